// Package devicemanager is the agent's device manager for device plugins
// (k8s.io/kubelet deviceplugin/v1beta1), in the role of the kubelet's
// pkg/kubelet/cm/devicemanager.
//
// What it owns:
//   - the Registration service on <SocketDir>/kubelet.sock; a plugin that
//     registers (version v1beta1, an extended resource name with a domain)
//     is dialled at <SocketDir>/<endpoint> and its ListAndWatch stream
//     keeps the resource's device list (ID, health, NUMA nodes);
//   - Capacity for node status: every device in capacity, healthy ones in
//     allocatable. A plugin that goes away has its devices marked
//     unhealthy; the resource stays (allocatable 0) for GracePeriod and is
//     then reported once in removed and forgotten;
//   - Allocate: devices for a container's extended-resource limits (the
//     plugin's GetPreferredAllocation when it offers one, the topology
//     hint's NUMA nodes first), the plugin's Allocate RPC, and the response,
//     read back with RunOptions;
//   - the checkpoint kubelet_internal_checkpoint in CheckpointDir, upstream's
//     format, written after every change of the allocations or devices and
//     read at Start, so allocations survive a restart. Resources found in
//     the checkpoint count 0 devices until their plugins register again;
//   - TopologyHints and PodTopologyHints for the topology manager (Manager
//     is a topology.HintProvider).
//
// What the caller must do: call Start once and Stop at the end; call
// RemovePod or UpdateAllocated when pods go away, or their devices stay
// taken; pass the topology manager's Affinity in Config (or later with
// SetAffinity) to have hints honoured.
//
// What it does not do (yet): reuse an init container's devices for the app
// containers, PreStartContainer, CDI devices in RunOptions beyond their
// names, the pod resources API, metrics, and checking the checkpoint's
// boot ID. It does not clean the socket directory of stale plugin sockets
// other than kubelet.sock.
package devicemanager
