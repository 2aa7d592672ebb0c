package nodelifecycle

import (
	"fmt"
	"sort"
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

// judged is what the second half of a pass needs from Judge.
type judged struct {
	observed, current corev1.ConditionStatus
	timedOut          bool
	added             bool
	conditions        []corev1.NodeCondition
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
func PlanPass(in Input) Plan {
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
	recs := make([]judged, len(in.Nodes))
	zones := zoneTable{byLabels: map[zoneLabels]*zoneTally{}, byKey: map[string]*zoneTally{}}
	counts := map[string]*zoneCount{}
	var seen, countedZones []string
	for i, node := range in.Nodes {
		old := prev.Health[node.Name]
		zone, tally := zones.lookup(node)
		v := judge(node, in.Leases[node.Name], old, now, p, zone)
		slab[i] = v.Health
		next.Health[node.Name] = &slab[i]
		recs[i] = judged{observed: v.Observed, current: v.Current, timedOut: v.TimedOut, added: old == nil, conditions: v.Conditions}
		if old == nil {
			plan.Events = append(plan.Events, Event{Node: node.Name, UID: node.UID, Reason: EventRegisteredNode, Message: fmt.Sprintf("Registered Node %s in Controller", node.Name)})
		}
		if !tally.seen {
			tally.seen = true
			seen = append(seen, zone)
		}
		if excludedFromDisruption(node) {
			continue
		}
		if !tally.counted {
			tally.counted = true
			counts[zone] = &tally.zoneCount
			countedZones = append(countedZones, zone)
		}
		if v.Current == corev1.ConditionTrue {
			tally.ready++
		} else {
			tally.notReady++
		}
	}
	if len(prev.Health) > len(next.Health)-countAdded(recs) {
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

	sort.Strings(countedZones)
	zd := decideZones(prev.Zones, prev.Rates, seen, counts, countedZones, p)
	next.Zones, next.Rates = zd.zones, zd.rates
	plan.Queues, plan.Zones, plan.Disruption = zd.changes, zd.reports, zd.disruption

	for i, node := range in.Nodes {
		r := recs[i]
		h := &slab[i]
		if zd.disruption == DisruptionLeft {
			h.ProbeTime, h.ReadyTransitionTime = now, now
			r.timedOut = false
		}
		a := NodeAction{Name: node.Name, UID: node.UID, Zone: h.Zone, Conditions: r.conditions}
		add, remove, want := noExecuteDecision(node, r, zd.disruption == DisruptionEntered, now)
		if zd.halted && (want == queueAdd || want == queueReAdd) {
			want = queueRemove
		}
		a.AddTaints, a.RemoveTaints = add, remove
		applyQueueWant(&a, want, next.Held)
		if r.current != "" {
			switch {
			case r.observed == corev1.ConditionTrue && r.current != corev1.ConditionTrue:
				a.NotReadyEvent, a.MarkPods = true, true
			case prev.Retry[node.Name] && r.observed != corev1.ConditionTrue:
				a.MarkPods = true
			}
		}
		if a.Conditions != nil || a.NotReadyEvent || a.MarkPods || len(a.AddTaints) > 0 || len(a.RemoveTaints) > 0 || a.Dequeue || a.Enqueue {
			plan.Nodes = append(plan.Nodes, a)
		}
	}
	plan.State = next
	return plan
}

// zoneTable works out zone keys once per distinct set of zone labels, and
// keeps one tally per zone key (different labels can name the same zone).
type zoneTable struct {
	byLabels map[zoneLabels]*zoneTally
	byKey    map[string]*zoneTally
}

// zoneLabels are the four label values ZoneKey reads, and which are set.
type zoneLabels struct {
	values  [4]string
	present uint8
}

type zoneTally struct {
	key           string
	seen, counted bool
	zoneCount
}

// lookup returns node's zone key (exactly ZoneKey's) and tally.
func (t zoneTable) lookup(node *corev1.Node) (string, *zoneTally) {
	var k zoneLabels
	for i, l := range [4]string{corev1.LabelFailureDomainBetaZone, corev1.LabelTopologyZone, corev1.LabelFailureDomainBetaRegion, corev1.LabelTopologyRegion} {
		if v, ok := node.Labels[l]; ok {
			k.values[i] = v
			k.present |= 1 << i
		}
	}
	if z := t.byLabels[k]; z != nil {
		return z.key, z
	}
	key := ZoneKey(node)
	z := t.byKey[key]
	if z == nil {
		z = &zoneTally{key: key}
		t.byKey[key] = z
	}
	t.byLabels[k] = z
	return key, z
}

func countAdded(recs []judged) int {
	n := 0
	for i := range recs {
		if recs[i].added {
			n++
		}
	}
	return n
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
func noExecuteDecision(node *corev1.Node, r judged, entering bool, now time.Time) (add, remove []corev1.Taint, want queueWant) {
	hasNR := hasTaint(node.Spec.Taints, NotReadyTaint.Key, NotReadyTaint.Effect)
	hasUR := hasTaint(node.Spec.Taints, UnreachableTaint.Key, UnreachableTaint.Effect)
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

// applyQueueWant turns a wanted membership into Dequeue/Enqueue on a, and
// records it in held.
func applyQueueWant(a *NodeAction, want queueWant, held map[string]string) {
	zone, isHeld := held[a.Name]
	switch want {
	case queueRemove:
		if isHeld {
			a.Dequeue, a.DequeueZone = true, zone
			delete(held, a.Name)
		}
	case queueAdd, queueReAdd:
		if isHeld && zone == a.Zone && want == queueAdd {
			return
		}
		if isHeld {
			a.Dequeue, a.DequeueZone = true, zone
		}
		a.Enqueue = true
		held[a.Name] = a.Zone
	}
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
