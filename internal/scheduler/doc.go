// Package scheduler is knode's pod scheduler, the default-scheduler's role
// (section 15 of the reference): it binds each pending pod to a node
// through the pods/binding subresource, or marks it unschedulable with
// upstream's message.
//
// The pure core decides. Filters are functions of (PodInfo, NodeInfo), run
// in the default scheduler's order, the first rejection judging a node:
// NodeUnschedulable, NodeName, TaintToleration (NoSchedule and NoExecute),
// NodeAffinity (nodeSelector and required node affinity, with upstream's
// matchFields pre-filter) and NodeResourcesFit (effective requests with
// sidecars, init containers, pod-level requests and overhead, against
// allocatable minus what the node's pods request, and the pods count).
// The score is LeastAllocated. Schedule picks the best node of a Snapshot,
// or returns a *FitError whose text is upstream's message, for example
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
// What the caller must do: give it a client allowed to list and watch
// nodes and pods, create pods/binding, patch pods/status, and create and
// patch events. Then either call Sync for one deterministic pass (tests,
// the simulator: it lists, then tries every pending pod once, and returns
// when every write is done), or Run, which follows informers: a node
// added or changed in what the filters read, or a bound pod deleted or
// finished, sends failed pods back, each after its backoff (1 s doubling
// to 10 s); every 30 s on the clock, pods unschedulable for 5 minutes are
// retried anyway. Use one of Sync and Run, not both at once.
//
// It does not preempt: where evicting lower-priority pods would make room,
// the pod stays pending (and, as upstream's, its message then has no
// preemption part). It has no score but LeastAllocated (no
// PreferNoSchedule, preferred affinity, topology spreading, image
// locality), no inter-pod affinity, host ports or volume filters, no
// extenders, and it does not expire assumptions whose binding succeeded
// but never showed up in the informer.
package scheduler
