// Package cpumanager owns the CPU manager's decisions, faithful to the
// upstream kubelet 1.33 (pkg/kubelet/cm/cpumanager): the "none" and "static"
// policy names and options, the reserved CPUs, the packed topology-aware CPU
// picker (takeByTopology), the static policy's pure state machine (Allocate,
// RemoveContainer, TopologyHints, PodTopologyHints) and the
// cpu_manager_state checkpoint format with upstream's checksum.
//
// Every decision is a pure function of a Topology, a State and a pod: the
// caller owns the State, serialises calls, persists it (Encode, Write) after
// every change, and applies the resulting cpusets to containers. The package
// does no cgroup I/O, runs no reconcile loop and keeps no clock.
//
// Deliberately not implemented: the distribute-cpus-across-numa,
// distribute-cpus-across-cores, align-by-socket, strict-cpu-reservation and
// prefer-align-cpus-by-uncorecache options (they are rejected by
// ValidateConfig), reuse of init containers' CPUs by later containers
// (pod-scope hints size the pod as upstream does, but Allocate charges every
// container in full) and the v1 checkpoint format.
package cpumanager
