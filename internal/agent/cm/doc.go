// Package cm is the agent's container manager, in the role of the kubelet's
// pkg/kubelet/cm: the one place where the node's resource managers meet and
// their answers become decisions for pods and containers.
//
// What it decides and owns:
//   - admission: the topology manager (policy and scope) over the hint
//     providers in upstream's order: the device manager, the CPU manager
//     (static policy only) and the memory manager (Static only). Rejections
//     carry upstream's reasons and messages (TopologyAffinityError,
//     SMTAlignmentError, UnexpectedAdmissionError); what a rejected pod was
//     given is taken back at once;
//   - the CPU and memory managers' state: restored from cpu_manager_state and
//     memory_manager_state under RootDir at New (a file that does not match
//     the configured policy or machine is an error that asks the user to
//     drain the node and delete it, as upstream), written after every change;
//   - the node's cgroups, when Config.Cgroups is set and CgroupsPerQOS: the
//     kubepods cgroup (limited to allocatable with enforceNodeAllocatable
//     "pods", else to capacity) and the burstable and besteffort QoS cgroups
//     at New, each pod's cgroup at PodStarting, the QoS cpu shares of the
//     active pods, and the removal of a pod's cgroup, retried by Sync while a
//     process lingers in it;
//   - each container's resources (ContainerResources, a
//     runtime.ResourceDecider): its cgroup parent, its limits, its cpuset
//     (exclusive CPUs or the shared pool) and memory nodes, its swap, and what
//     the device plugins asked for.
//
// What the caller must do: Admit every pod before it runs (a pod admitted
// before is admitted again at once; after a restart its allocations come
// back from the state files), call PodStarting before a pod's first
// container, RemovePod once its containers are gone, and RemoveStale after a
// restart with the pods that still exist. It calls Sync now and then, and
// when SharedPoolGeneration has changed it asks the runtime to apply the
// decisions again (runtime.ResourceUpdater), because the shared pool of
// every container outside the static CPU policy moved. Start and Stop the
// device manager itself.
//
// What it does not do: it runs no goroutine, loop or timer (the caller drives
// Sync); it kills no process (the runtime owns them, so a pod cgroup that
// still holds one waits in PendingRemovals); it does not scan for orphaned
// pod cgroups; it makes no system-reserved or kube-reserved cgroups; it
// does not reuse init containers' CPUs, memory or devices for app
// containers; device plugins' annotations and CDI device names have no
// place in runtime.ContainerResources and are dropped; it reads no machine
// facts itself (topology, capacity, swap and hugepages come in Config).
package cm
