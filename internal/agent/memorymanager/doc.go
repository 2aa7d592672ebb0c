// Package memorymanager owns the Memory Manager's decisions, faithful to the
// upstream kubelet 1.33 (pkg/kubelet/cm/memorymanager): the "None" and
// "Static" policy names, the reservedMemory checks, the per-NUMA machine
// state (memory and hugepages: total, system reserved, allocatable, reserved,
// free, and the groups of nodes used together), the static policy's pure
// state machine (Allocate, RemoveContainer, TopologyHints, PodTopologyHints,
// Restore) and the memory_manager_state checkpoint format with upstream's
// checksum.
//
// Every decision is a pure function of the policy (built once from the
// machine and the configuration), a State and a pod: the caller owns the
// State, serialises calls, persists it (Encode, Write) after every change,
// and applies Mems to the container's cpuset.mems. The package does no cgroup
// I/O, runs no reconcile loop and keeps no clock.
//
// Hugepages: host.NUMANode has no per-node hugepages, so the caller passes
// them in StaticConfig.NodeHugepages; a node without an entry has no
// hugepages resources, and then its whole MemoryBytes counts as memory.
//
// Deliberately not implemented: reuse of init containers' memory by later
// containers (upstream's initContainersReusableMemory; here every container
// is charged in full), the in-place-resize AllocatedResources lookup,
// pod-level resources, GetAllocatableMemory's block list, and the v3
// checkpoint (podEntries, dataChecksum) of later releases.
package memorymanager
