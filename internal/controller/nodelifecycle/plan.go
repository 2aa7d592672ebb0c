package nodelifecycle

import (
	"fmt"
	"sort"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Event reasons the controller emits, as upstream names them.
const (
	EventRegisteredNode = "RegisteredNode"
	EventRemovingNode   = "RemovingNode"
	EventNodeNotReady   = "NodeNotReady"
)

// State is what the controller carries from one monitor pass to the next.
// Plan never modifies the State it is given; the shell replaces its State
// with Plan.State and then records write failures in Retry.
type State struct {
	// Health holds every node seen at the last pass, by name. The values
	// are shared between successive States: replace one, never modify it.
	Health map[string]*Health
	// Zones holds the state of every zone that had counted nodes at the
	// last pass (upstream's zoneStates).
	Zones map[string]ZoneState
	// Rates holds the rate of every zone's tainting queue. A queue, once
	// created, is never dropped, so a zone stays here after it empties.
	Rates map[string]float64
	// Held maps every node held by a tainting queue (queued, or tainted and
	// not yet Ready again) to that queue's zone.
	Held map[string]string
	// Retry holds nodes whose pods could not all be marked not Ready.
	Retry map[string]bool
}

// Input is one monitor pass's view of the cluster. Everything in it is
// read-only.
type Input struct {
	Now    time.Time
	Params Params
	// Nodes are all the nodes; the order of Plan.Nodes follows it.
	Nodes []*corev1.Node
	// Leases are the node leases (kube-node-lease) by node name.
	Leases map[string]*coordinationv1.Lease
	State  State
}

// NodeAction is everything a pass does to one node. The shell does the
// status write first; NotReadyEvent and MarkPods only after it succeeds.
type NodeAction struct {
	Name string
	UID  types.UID
	// Zone is the node's zone; Enqueue adds it to that zone's queue.
	Zone string
	// Conditions, when non-nil, is the node's complete new condition list,
	// to be written with UpdateStatus.
	Conditions []corev1.NodeCondition
	// NotReadyEvent: this controller turned Ready from True to Unknown.
	NotReadyEvent bool
	// MarkPods: set the Ready condition of the node's pods to False.
	MarkPods bool
	// AddTaints (stamped with timeAdded) and RemoveTaints are NoExecute
	// changes made at once, outside the rate limit.
	AddTaints, RemoveTaints []corev1.Taint
	// Dequeue removes the node from DequeueZone's queue; Enqueue then adds
	// it to Zone's queue.
	Dequeue     bool
	DequeueZone string
	Enqueue     bool
}

// QueueChange creates a zone's tainting queue or changes its rate. The
// shell applies them in order: a created queue starts full at QPS; a rate
// change goes through queue.SwapLimiter.
type QueueChange struct {
	Zone   string
	Create bool
	QPS    float64
}

// Event is a Normal event about a node.
type Event struct {
	Node    string
	UID     types.UID
	Reason  string
	Message string
}

// Plan is the outcome of one monitor pass.
type Plan struct {
	// State is the new remembered state, complete.
	State State
	// Nodes lists the nodes that need anything, in input order.
	Nodes []NodeAction
	// Queues creates zone queues and changes rates, to apply after the
	// per-node queue changes of Nodes.
	Queues []QueueChange
	// Events are the RegisteredNode and RemovingNode events.
	Events []Event
	// Zones reports every zone's health for the metrics, sorted by zone.
	Zones []ZoneReport
	// Disruption says whether this pass entered or left the all-zones-down
	// mode.
	Disruption Disruption
}

// judged is Judge's verdict less the Health and grace period: what the
// second half of a pass needs to know about a node.
type judged struct {
	observed, current corev1.ConditionStatus
	timedOut          bool
	// added: the node was not seen at the last pass.
	added bool
	// hasNR and hasUR: the node carries the not-ready or unreachable
	// NoExecute taint.
	hasNR, hasUR bool
	conditions   []corev1.NodeCondition
}

// PlanPass decides one monitor pass (upstream's monitorNodeHealth without
// the writes):
//
//  1. Nodes not seen before get RegisteredNode and lose their NoExecute
//     taints (they are re-queued if still not Ready); nodes gone get
//     RemovingNode and are forgotten.
//  2. Each node's health is judged (see Judge), and counted in its zone
//     unless labelled node.kubernetes.io/exclude-disruption.
//  3. Zones get their states and rates (see ComputeZoneState, ZoneRate).
//     When every zone has become fully disrupted, every NoExecute taint
//     comes off, every queue is emptied and every rate drops to 0, and
//     nothing is queued while that lasts; when one zone comes back, every
//     node gets a fresh grace period and each zone the rate for its state.
//  4. NoExecute decisions, from the Ready status the node carried in:
//     False queues it for not-ready, or swaps an unreachable taint at once;
//     Unknown does the mirror image, but queues only once the grace period
//     has run out on this controller's clock; True removes both taints and
//     takes it out of the queue.
//  5. A node this controller turned from Ready to Unknown gets NodeNotReady
//     and its pods marked not Ready; so does a node in State.Retry whose
//     Ready is still not True.
//
// From parallelMinNodes nodes on, step 2 runs on up to GOMAXPROCS
// goroutines, which have all finished when PlanPass returns; the Plan is
// the same as a serial pass's, byte for byte.
func PlanPass(in Input) Plan {
	return planPass(in, splitFor(len(in.Nodes)))
}

// planPass is PlanPass with the judging split as sp says. The split changes
// how fast a pass is, never what it decides.
func planPass(in Input, sp split) Plan {
	now, p, prev := in.Now, in.Params, in.State
	next := State{
		Health: make(map[string]*Health, len(in.Nodes)),
		Held:   make(map[string]string, len(prev.Held)),
		Retry:  map[string]bool{},
	}
	for k, v := range prev.Held {
		next.Held[k] = v
	}
	var plan Plan

	// One slab holds every node's new Health: one allocation per pass.
	slab := make([]Health, len(in.Nodes))
	recsp := getRecs(len(in.Nodes))
	defer recsPool.Put(recsp)
	recs := *recsp
	chunks := judgeAll(in, sp, slab, recs, func() {
		for i, node := range in.Nodes {
			next.Health[node.Name] = &slab[i]
		}
	})

	added := 0
	for c := range chunks {
		if chunks[c].added == 0 {
			continue
		}
		added += chunks[c].added
		lo, hi := sp.bounds(c, len(in.Nodes))
		for i := lo; i < hi; i++ {
			if recs[i].added {
				node := in.Nodes[i]
				plan.Events = append(plan.Events, Event{Node: node.Name, UID: node.UID, Reason: EventRegisteredNode, Message: fmt.Sprintf("Registered Node %s in Controller", node.Name)})
			}
		}
	}
	if len(prev.Health) > len(next.Health)-added {
		for _, name := range sortedKeys(prev.Health) {
			if _, ok := next.Health[name]; ok {
				continue
			}
			h := *prev.Health[name]
			plan.Events = append(plan.Events, Event{Node: name, UID: h.UID, Reason: EventRemovingNode, Message: fmt.Sprintf("Removing Node %s from Controller", name)})
			if zone, ok := next.Held[name]; ok {
				plan.Nodes = append(plan.Nodes, NodeAction{Name: name, UID: h.UID, Zone: h.Zone, Dequeue: true, DequeueZone: zone})
				delete(next.Held, name)
			}
		}
	}

	seen, counts, countedZones := mergeZones(chunks)
	sort.Strings(countedZones)
	zd := decideZones(prev.Zones, prev.Rates, seen, counts, countedZones, p)
	next.Zones, next.Rates = zd.zones, zd.rates
	plan.Queues, plan.Zones, plan.Disruption = zd.changes, zd.reports, zd.disruption

	entering, left := zd.disruption == DisruptionEntered, zd.disruption == DisruptionLeft
	for i := range recs {
		r := &recs[i]
		h := &slab[i]
		if left {
			h.ProbeTime, h.ReadyTransitionTime = now, now
			r.timedOut = false
		}
		add, remove, want := noExecuteDecision(r, entering, now)
		if zd.halted && (want == queueAdd || want == queueReAdd) {
			want = queueRemove
		}
		// The node itself is read only when something may need doing: in a
		// steady fleet nothing is held or retried, and every node is Ready.
		mayHold := want == queueAdd || want == queueReAdd || want == queueRemove && len(next.Held) > 0
		mayRetry := r.current != "" && r.observed != corev1.ConditionTrue && len(prev.Retry) > 0
		notReadyEvent := r.current != "" && r.observed == corev1.ConditionTrue && r.current != corev1.ConditionTrue
		if !mayHold && !mayRetry && !notReadyEvent && r.conditions == nil && len(add) == 0 && len(remove) == 0 {
			continue
		}
		node := in.Nodes[i]
		var dequeue, enqueue bool
		var dequeueZone string
		if mayHold {
			dequeue, dequeueZone, enqueue = queueMoves(node.Name, h.Zone, want, next.Held)
		}
		markPods := notReadyEvent || mayRetry && prev.Retry[node.Name]
		if r.conditions != nil || notReadyEvent || markPods || len(add) > 0 || len(remove) > 0 || dequeue || enqueue {
			plan.Nodes = append(plan.Nodes, NodeAction{
				Name: node.Name, UID: node.UID, Zone: h.Zone, Conditions: r.conditions,
				NotReadyEvent: notReadyEvent, MarkPods: markPods,
				AddTaints: add, RemoveTaints: remove,
				Dequeue: dequeue, DequeueZone: dequeueZone, Enqueue: enqueue,
			})
		}
	}
	plan.State = next
	return plan
}

// queueWant is what a node's queue membership should become.
type queueWant int

const (
	queueKeep   queueWant = iota
	queueAdd              // held in its zone's queue (a held entry stays as it is)
	queueReAdd            // queued afresh: any held entry is stale
	queueRemove           // not held
)

// noExecuteDecision is upstream's processTaintBaseEviction (plus
// markNodeAsReachable for new nodes and on entering the all-zones-down
// mode), folded into one set of taint changes and one queue change.
func noExecuteDecision(r *judged, entering bool, now time.Time) (add, remove []corev1.Taint, want queueWant) {
	hasNR, hasUR := r.hasNR, r.hasUR
	reachable := func() {
		if hasNR {
			remove = append(remove, NotReadyTaint)
		}
		if hasUR {
			remove = append(remove, UnreachableTaint)
		}
		want = queueRemove
	}
	if entering {
		reachable()
		return nil, remove, want
	}
	if r.added {
		// A node seen for the first time starts with no NoExecute taint of
		// this controller's; what it should have is decided below.
		reachable()
		hasNR, hasUR = false, false
	}
	if r.current == "" {
		return add, remove, want
	}
	switch r.observed {
	case corev1.ConditionFalse:
		switch {
		case hasUR:
			add = append(add, stamped(NotReadyTaint, now))
			remove = append(remove, UnreachableTaint)
		case hasNR:
			want = queueAdd
		default:
			want = queueReAdd
		}
	case corev1.ConditionUnknown:
		switch {
		case hasNR:
			add = append(add, stamped(UnreachableTaint, now))
			remove = append(remove, NotReadyTaint)
		case !r.timedOut:
			// Within its grace period on this controller's clock: leave it.
		case hasUR:
			want = queueAdd
		default:
			want = queueReAdd
		}
	case corev1.ConditionTrue:
		reachable()
	}
	return add, remove, want
}

// queueMoves turns a wanted queue membership for the node name in zone
// into a dequeue (from dequeueZone) and an enqueue (into zone), and records
// it in held.
func queueMoves(name, zone string, want queueWant, held map[string]string) (dequeue bool, dequeueZone string, enqueue bool) {
	if want == queueKeep {
		return false, "", false
	}
	heldZone, isHeld := held[name]
	switch want {
	case queueRemove:
		if isHeld {
			delete(held, name)
			return true, heldZone, false
		}
	case queueAdd, queueReAdd:
		if isHeld && heldZone == zone && want == queueAdd {
			return false, "", false
		}
		held[name] = zone
		return isHeld, heldZone, true
	}
	return false, "", false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortReports(r []ZoneReport) {
	sort.Slice(r, func(i, j int) bool { return r[i].Zone < r[j].Zone })
}

// recsPool recycles the per-node records of a pass, which nothing keeps
// after it; every record is overwritten before it is read.
var recsPool sync.Pool

func getRecs(n int) *[]judged {
	if p, ok := recsPool.Get().(*[]judged); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]judged, n)
	return &s
}
