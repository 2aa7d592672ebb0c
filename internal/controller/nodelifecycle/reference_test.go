package nodelifecycle

// This file freezes PlanPass as it was before its judging was split into
// parallel chunks, as an oracle: the tests require the current PlanPass to
// produce exactly what this produces, for every input.

import (
	"fmt"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

func refPlanPass(in Input) Plan {
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
	recs := make([]refJudged, len(in.Nodes))
	zones := refZoneTable{byLabels: map[refZoneLabels]*refZoneTally{}, byKey: map[string]*refZoneTally{}}
	counts := map[string]*zoneCount{}
	var seen, countedZones []string
	for i, node := range in.Nodes {
		old := prev.Health[node.Name]
		zone, tally := zones.lookup(node)
		v := refJudge(node, in.Leases[node.Name], old, now, p, zone)
		slab[i] = v.Health
		next.Health[node.Name] = &slab[i]
		recs[i] = refJudged{observed: v.Observed, current: v.Current, timedOut: v.TimedOut, added: old == nil, conditions: v.Conditions}
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
	if len(prev.Health) > len(next.Health)-refCountAdded(recs) {
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
		add, remove, want := refNoExecuteDecision(node, r, zd.disruption == DisruptionEntered, now)
		if zd.halted && (want == queueAdd || want == queueReAdd) {
			want = queueRemove
		}
		a.AddTaints, a.RemoveTaints = add, remove
		refApplyQueueWant(&a, want, next.Held)
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

type refZoneTable struct {
	byLabels map[refZoneLabels]*refZoneTally
	byKey    map[string]*refZoneTally
}

type refZoneLabels struct {
	values  [4]string
	present uint8
}

type refZoneTally struct {
	key           string
	seen, counted bool
	zoneCount
}

func (t refZoneTable) lookup(node *corev1.Node) (string, *refZoneTally) {
	var k refZoneLabels
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
		z = &refZoneTally{key: key}
		t.byKey[key] = z
	}
	t.byLabels[k] = z
	return key, z
}

func refCountAdded(recs []refJudged) int {
	n := 0
	for i := range recs {
		if recs[i].added {
			n++
		}
	}
	return n
}

type refJudged struct {
	observed, current corev1.ConditionStatus
	timedOut          bool
	added             bool
	conditions        []corev1.NodeCondition
}

func refNoExecuteDecision(node *corev1.Node, r refJudged, entering bool, now time.Time) (add, remove []corev1.Taint, want queueWant) {
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

func refApplyQueueWant(a *NodeAction, want queueWant, held map[string]string) {
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

func refJudge(node *corev1.Node, lease *coordinationv1.Lease, prevp *Health, now time.Time, p Params, zone string) Verdict {
	created := node.CreationTimestamp.Time
	readyIdx := conditionIndex(node.Status.Conditions, corev1.NodeReady)
	hasReady := readyIdx >= 0

	known := prevp != nil
	var h Health
	if known {
		h = *prevp
	}
	var observed ReadySeen
	grace := p.NodeMonitorGracePeriod
	if hasReady {
		observed = readySeen(&node.Status.Conditions[readyIdx])
	} else {
		// Never posted: a synthetic Unknown dated from creation, and the
		// startup grace period counted from creation when first seen.
		observed = ReadySeen{Status: corev1.ConditionUnknown, LastHeartbeatTime: created, LastTransitionTime: created}
		grace = p.NodeStartupGracePeriod
		if !known {
			h = Health{ProbeTime: created, ReadyTransitionTime: created}
		}
		h.Ready = ReadySeen{}
	}

	switch saved := h.Ready; {
	case !hasReady:
		// Nothing posted, nothing to compare; only the Lease can tell.
	case !known || !saved.Present:
		// First sight, or Ready appeared: start the clock now.
		h.ProbeTime, h.ReadyTransitionTime = now, now
		h.Ready = observed
	case !saved.LastHeartbeatTime.Equal(observed.LastHeartbeatTime):
		// A status post.
		h.ProbeTime = now
		if !saved.LastTransitionTime.Equal(observed.LastTransitionTime) {
			h.ReadyTransitionTime = now
		}
		h.Ready = observed
	}
	if lease != nil && (!h.Lease.Present || leaseRenewed(h.Lease, lease)) {
		h.Lease = leaseSeen(lease)
		h.ProbeTime = now
	}
	h.Zone = zone
	h.UID = node.UID

	v := Verdict{Grace: grace, Observed: observed.Status}
	if hasReady {
		v.Current = observed.Status
	}
	v.TimedOut = now.After(h.ProbeTime.Add(grace))
	// Ready changes, and so is written, when it is missing or not yet
	// Unknown; a Ready already Unknown leaves the node untouched, as
	// upstream writes only when Ready differs.
	if v.TimedOut && (!hasReady || observed.Status != corev1.ConditionUnknown) {
		v.Conditions = unknownConditions(node, now)
		v.Current = corev1.ConditionUnknown
		h.Ready = readySeen(&v.Conditions[conditionIndex(v.Conditions, corev1.NodeReady)])
		h.ReadyTransitionTime = now
		h.Lease = leaseSeen(lease)
	}
	v.Health = h
	return v
}
