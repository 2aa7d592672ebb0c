package scheduler

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxNodeScore is the best score a node can get.
const MaxNodeScore int64 = 100

// Schedule picks the node for pod from snap, deciding only (it changes
// nothing): the node with the highest LeastAllocated score among those
// every filter admits; on equal scores the one with fewer pods, then the
// first by name. When no node fits, the error is a *FitError carrying
// upstream's message, or ErrNoNodes when the snapshot has no nodes.
//
// Unlike upstream, every node is looked at (upstream stops after a share
// of a large cluster) and ties are broken in a fixed order rather than at
// random, so a snapshot always gives the same answer.
func Schedule(pod *PodInfo, snap *Snapshot) (string, error) {
	node, _, err := schedule(pod, snap)
	return node, err
}

// schedule is Schedule, also returning the pod's volume state (nil for a
// pod without claims) for the chosen node's plan.
func schedule(pod *PodInfo, snap *Snapshot) (string, *podVolumes, error) {
	nodes := snap.Nodes()
	if len(nodes) == 0 {
		return "", nil, ErrNoNodes
	}
	fe := &FitError{NumAllNodes: len(nodes)}
	names := pod.affinity.nodeNames
	if names != nil {
		if len(names) == 0 {
			fe.rejectAll(ReasonAffinityConflict)
			fe.PostFilterMsg = preemption(pod, snap, fe, nil)
			return "", nil, fe
		}
		fe.Absent = statusPreFilter
	}
	var vols *podVolumes
	if len(pod.claims) > 0 {
		var msg string
		if vols, msg = snap.volumesFor(pod); msg != "" {
			fe.rejectAll(msg)
			fe.PostFilterMsg = preemption(pod, snap, fe, nil)
			return "", nil, fe
		}
	}

	var best *NodeInfo
	var bestScore int64
	for _, n := range nodes {
		if names != nil && !names[n.Node.Name] {
			continue
		}
		st := RunFilters(pod, n)
		if st == nil && vols != nil {
			st = vols.filter(n, nil)
		}
		if st != nil {
			if fe.Statuses == nil {
				fe.Statuses = map[string]*Status{}
			}
			fe.Statuses[n.Node.Name] = st
			continue
		}
		score := LeastAllocated(pod, n)
		if best == nil || score > bestScore || (score == bestScore && n.NumPods() < best.NumPods()) {
			best, bestScore = n, score
		}
	}
	if best != nil {
		return best.Node.Name, vols, nil
	}
	fe.PostFilterMsg = preemption(pod, snap, fe, vols)
	return "", nil, fe
}

// rejectAll makes msg the pod's whole verdict, before any node was looked
// at (a PreFilter rejection).
func (e *FitError) rejectAll(msg string) {
	e.PreFilterMsg = msg
	e.Statuses = nil
	e.Absent = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{msg}}
}

// LeastAllocated scores a node by the share of its allocatable cpu and
// memory left free once the pod is on it, 0 to MaxNodeScore, the two
// weighted equally, in integers as upstream's NodeResourcesFit
// LeastAllocated strategy computes it. Requests count with the defaults
// for unstated cpu and memory (PodRequests with nonZero).
func LeastAllocated(pod *PodInfo, node *NodeInfo) int64 {
	cpu := leastRequested(node.NonZeroRequested.MilliCPU+pod.NonZero.MilliCPU, node.Allocatable.MilliCPU)
	mem := leastRequested(node.NonZeroRequested.Memory+pod.NonZero.Memory, node.Allocatable.Memory)
	return (cpu + mem) / 2
}

func leastRequested(requested, capacity int64) int64 {
	if capacity == 0 || requested > capacity {
		return 0
	}
	return (capacity - requested) * MaxNodeScore / capacity
}

// preemption returns what upstream's DefaultPreemption would add to the
// message after the filters rejected every node (fe holds their verdicts):
// "preemption: " and a second FitError-style message saying, for each
// node, why evicting lower-priority pods would not make room.
//
// knode does not preempt. When evicting would make room somewhere, it
// returns "", as upstream's message has no preemption part then (upstream
// would go on to evict; knode leaves the pod pending).
func preemption(pod *PodInfo, snap *Snapshot, fe *FitError, vols *podVolumes) string {
	if p := pod.Pod.Spec.PreemptionPolicy; p != nil && *p == corev1.PreemptNever {
		return "preemption: " + preemptionNever
	}
	out := &FitError{
		NumAllNodes: fe.NumAllNodes,
		Absent:      &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonPreemptionUseless}},
	}
	for name, st := range fe.Statuses {
		if st.Code != Unschedulable {
			continue
		}
		n := snap.Node(name)
		st, helps := withoutLowerPriority(pod, n, vols)
		if helps {
			return ""
		}
		if out.Statuses == nil {
			out.Statuses = map[string]*Status{}
		}
		out.Statuses[name] = st
	}
	return "preemption: " + out.Error()
}

// withoutLowerPriority checks whether node could take pod if every pod of
// lower priority left it. It reports the node's status then, or helps
// when the pod would fit.
func withoutLowerPriority(pod *PodInfo, node *NodeInfo, vols *podVolumes) (st *Status, helps bool) {
	used := node.Requested.clone()
	victims := 0
	var gone map[types.NamespacedName]bool
	for key, u := range node.pods {
		if u.priority < pod.Priority {
			used.minus(u.requests)
			victims++
			if vols != nil {
				if gone == nil {
					gone = map[types.NamespacedName]bool{}
				}
				gone[key] = true
			}
		}
	}
	if victims == 0 {
		return &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonNoVictims}}, false
	}
	// Only NodeResourcesFit and the volume filters can reject for a reason
	// evicting changes; the filters before them passed already.
	if st := fit(&pod.Requests, &node.Allocatable, &used, node.NumPods()-victims); st != nil {
		return st, false
	}
	if vols != nil {
		if st := vols.filter(node, gone); st != nil {
			return st, false
		}
	}
	return nil, true
}
