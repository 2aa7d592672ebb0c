// Package topology is the kubelet Topology Manager's decision logic: it
// merges the NUMA affinity hints of the resource managers (CPU, memory,
// devices) into one affinity per container or per pod, decides whether the
// pod may be admitted under the configured policy, and remembers the chosen
// affinity so the providers can read it back while they allocate.
//
// It follows upstream kubelet 1.33 (pkg/kubelet/cm/topologymanager): the
// mask order, the hint normalisation, the permutation merge, the comparison
// of candidates (including the best non-preferred width and the
// prefer-closest-numa-nodes tie break by average distance), the four
// policies, the container and pod scopes, the option and configuration
// checks, the admission failure strings, and the
// kubelet_topology_manager_admission_* metrics.
//
// What it owns:
//   - Mask, Hint and the pure Merge function;
//   - Policy (none, best-effort, restricted, single-numa-node);
//   - Scope (container, pod, and the none scope used by the none policy),
//     which gathers hints from every HintProvider, stores the chosen hint per
//     (pod UID, container name) and calls every provider's Allocate;
//   - Manager, which ties a policy and scope to a host.Topology, a clock and
//     the metrics.
//
// What the caller must do:
//   - register every HintProvider with AddHintProvider before the first
//     Admit (registration is not synchronised with admission);
//   - call Admit once per pod at admission and act on the Result (reject the
//     pod with Result.Reason and Result.Message when Admit is false);
//   - call RemoveContainer or RemovePod when a container or pod is gone, or
//     the stored hints are kept forever.
//
// What it does not do: it is not wired into the agent yet, it reads no sysfs
// (NUMA node IDs and distances come from host.Topology), it has no feature
// gates (every 1.33 option is accepted), and it does not export the
// kubelet_container_aligned_compute_resources_* series.
package topology
