// Package scheduler is knode's pod scheduler, the default-scheduler's role
// (section 15 of the reference): it binds each pending pod to a node
// through the pods/binding subresource, or marks it unschedulable with
// upstream's message.
//
// The pure core decides. Filters are functions of (PodInfo, NodeInfo), run
// in the default scheduler's order, the first rejection judging a node:
// NodeUnschedulable, NodeName, TaintToleration (NoSchedule and NoExecute),
// NodeAffinity (nodeSelector and required node affinity, with upstream's
// matchFields pre-filter), NodeResourcesFit (effective requests with
// sidecars, init containers, pod-level requests and overhead, against
// allocatable minus what the node's pods request, and the pods count),
// then, for a pod that uses PersistentVolumeClaims only, the volume
// filters below. The score is LeastAllocated. Schedule picks the best
// node of a Snapshot, or returns a *FitError whose text is upstream's
// message, for example
//
//	0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.
//
// The preemption part is what upstream's DefaultPreemption reports when
// evicting lower-priority pods would not help; the DynamicResources note
// ("no new claims to deallocate") is absent, as upstream's is with
// dynamic resource allocation off (knode serves no resource.k8s.io).
//
// The shell (Scheduler) keeps a Snapshot of nodes and of the requests of
// bound, non-terminal pods, and a queue of pending pods: spec.nodeName
// empty, spec.schedulerName its own, not being deleted, not finished, no
// scheduling gates. It tries them by priority, then age. It assumes a
// chosen pod onto its node at once, then binds it (several binds in
// flight), so a decision never waits for the API. A bound pod gets a
// Normal "Scheduled" event; a pod that fits nowhere gets PodScheduled=False
// with reason Unschedulable and the message (written only when it
// changes) and a Warning "FailedScheduling" event (repeats of the same
// message bump the event's count).
//
// # Volumes
//
// A pod's claims are first checked as a whole, with upstream's messages
// as the pod's whole verdict: a claim missing (`persistentvolumeclaim "x"
// not found`), lost, or being deleted, or one the PV controller should
// have bound already because its class binds Immediately or it has none
// ("pod has unbound immediate PersistentVolumeClaims"). A claim is bound
// when it names a volume and carries pv.kubernetes.io/bind-completed.
// Then, per node, in upstream's order:
//
//   - VolumeRestrictions: a ReadWriteOncePod claim another pod uses
//     (anywhere) rejects every node. knode adds a rule of its own: a claim
//     whose access modes are ReadWriteOnce without ReadWriteMany or
//     ReadOnlyMany, used by other pods that are not being deleted, admits
//     only the nodes of those pods, since the volume attaches to one node
//     at a time (upstream places the pod anywhere and leaves it to fail to
//     attach). A pod being deleted does not hold the claim: its
//     replacement may go elsewhere and wait for the volume to be detached,
//     as upstream's would.
//   - NodeVolumeLimits: per CSI driver with an allocatable count in the
//     node's CSINode, the distinct volumes (driver and handle; an unbound
//     claim counts for its class's provisioner) of the node's pods and the
//     pod must not pass it.
//   - VolumeBinding: a bound volume's node affinity must admit the node's
//     labels; each unbound WaitForFirstConsumer claim needs either an
//     Available volume of its class that fits it (size, access modes,
//     volume mode, selector, attributes class, node affinity; a volume
//     pre-bound to the claim first, else the smallest) or a class that
//     provisions (a provisioner other than kubernetes.io/no-provisioner)
//     whose allowedTopologies admit the node. A claim already given a node
//     (volume.kubernetes.io/selected-node) admits only that node, unless
//     the node no longer exists.
//
// When the chosen node needs it (PreBind), the scheduler writes, with
// updates so that a concurrent change is a conflict: the chosen volumes'
// claimRef (with the claim's uid) and the claims' selected-node
// annotation. These are assumed in the snapshot at once, so the next
// decisions see the volume taken and the claim placed. Like upstream, it
// then waits for every claim to be bound before binding the pod, so that a
// provisioner that gives the claim up (removing the annotation) sends the
// pod back to be placed again. The wait blocks nothing: the pod stays
// assumed on its node, claim and volume events move it on, and the wait
// ends on the clock after 10 minutes (upstream's bindTimeoutSeconds).
// Failures are upstream's PreBind errors (reason SchedulerError, for
// example `running PreBind plugin "VolumeBinding": binding volumes:
// provisioning failed for PVC "x"`); on a timeout the scheduler also
// removes the selected-node annotations it wrote from claims still
// unbound, so that the next attempt may choose another node. Sync does not
// wait: a pass writes what it must and leaves the pod pending; a later
// pass binds it once its claims are bound.
//
// Not done: generic ephemeral volumes, storage capacity
// (CSIStorageCapacity, so CSIDriver objects are not read), the in-tree
// volume limits and conflicts, CSI migration, the volume score, and
// upstream's narrowing of the nodes for local volumes (those nodes get
// "node(s) had volume node affinity conflict" instead of "node(s) didn't
// satisfy plugin(s) [VolumeBinding]"). Whether a CSINode lists a class's
// driver is not checked, as upstream does not. Equal volumes are chosen
// by name, where upstream's order is its cache's.
//
// What the caller must do: give it a client allowed to list and watch
// nodes, pods, persistentvolumeclaims, persistentvolumes, storageclasses
// and csinodes, update persistentvolumeclaims and persistentvolumes,
// create pods/binding, patch pods/status, and create and patch events.
// Then either call Sync for one deterministic pass (tests: it lists, then
// tries every pending pod once, and returns when every write is done), or
// Run, which follows informers: a node added or changed in what the
// filters read, or a bound pod deleted or finished, sends failed pods
// back, each after its backoff (1 s doubling to 10 s), and a storage
// object added or changed, or a pod with claims being deleted, does so
// for the pods with claims; every 30 s on the clock, pods unschedulable
// for 5 minutes are retried anyway. Use one of Sync and Run, not both at
// once. A driver that follows the objects itself (the simulator) feeds the
// handlers Run would register (NodeHandler, PodHandler, ClaimHandler,
// VolumeHandler, ClassHandler, CSINodeHandler) and calls Step.
//
// It does not preempt: where evicting lower-priority pods would make room,
// the pod stays pending (and, as upstream's, its message then has no
// preemption part). It has no score but LeastAllocated (no
// PreferNoSchedule, preferred affinity, topology spreading, image
// locality), no inter-pod affinity or host ports, no
// extenders, and it does not expire assumptions whose binding succeeded
// but never showed up in the informer.
package scheduler
