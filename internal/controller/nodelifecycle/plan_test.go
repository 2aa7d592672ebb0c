package nodelifecycle

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// summary renders a plan's node actions and events one line each, e.g.
// "a: write(Ready=Unknown) notready-event mark-pods +not-ready -unreachable dequeue(z) enqueue(z)".
func summary(p Plan) []string {
	var out []string
	for _, e := range p.Events {
		out = append(out, fmt.Sprintf("event %s %s", e.Reason, e.Node))
	}
	for _, a := range p.Nodes {
		var parts []string
		if a.Conditions != nil {
			i := conditionIndex(a.Conditions, corev1.NodeReady)
			parts = append(parts, fmt.Sprintf("write(Ready=%s)", a.Conditions[i].Status))
		}
		if a.NotReadyEvent {
			parts = append(parts, "notready-event")
		}
		if a.MarkPods {
			parts = append(parts, "mark-pods")
		}
		for _, t := range a.AddTaints {
			if t.TimeAdded == nil {
				parts = append(parts, "+"+shortKey(t)+"(NO TIMEADDED)")
				continue
			}
			parts = append(parts, "+"+shortKey(t))
		}
		for _, t := range a.RemoveTaints {
			parts = append(parts, "-"+shortKey(t))
		}
		if a.Dequeue {
			parts = append(parts, "dequeue("+shortZone(a.DequeueZone)+")")
		}
		if a.Enqueue {
			parts = append(parts, "enqueue("+shortZone(a.Zone)+")")
		}
		out = append(out, a.Name+": "+strings.Join(parts, " "))
	}
	return out
}

func shortKey(t corev1.Taint) string {
	return strings.TrimPrefix(t.Key, "node.kubernetes.io/")
}

func shortZone(z string) string { return strings.TrimPrefix(z, ":\x00:") }

// known remembers node as seen healthy at t0 (probe t0) unless changed.
func known(st State, n *corev1.Node, probe time.Duration) {
	h := Health{ProbeTime: at(probe), ReadyTransitionTime: at(0), Zone: ZoneKey(n), UID: n.UID}
	if i := conditionIndex(n.Status.Conditions, corev1.NodeReady); i >= 0 {
		h.Ready = readySeen(&n.Status.Conditions[i])
	}
	st.Health[n.Name] = &h
}

func TestPlanPassNodes(t *testing.T) {
	z := zone("z")
	healthy := func(name string) *corev1.Node { return mkNode(name, z, ready(corev1.ConditionTrue, 0, 0)) }
	tests := []struct {
		name  string
		nodes []*corev1.Node
		// setup adjusts the remembered state; every node is known with
		// probe t0 unless setup deletes it.
		setup func(st State, nodes map[string]*corev1.Node)
		now   time.Duration
		want  []string
	}{
		{
			name:  "healthy and known: nothing at all",
			nodes: []*corev1.Node{healthy("a"), healthy("b")},
			now:   10 * time.Second,
			want:  nil,
		},
		{
			name:  "first sight: RegisteredNode, and a NoExecute taint from before comes off",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionTrue, 0, 0), taints(UnreachableTaint))},
			setup: func(st State, nodes map[string]*corev1.Node) { delete(st.Health, "a") },
			want:  []string{"event RegisteredNode a", "a: -unreachable"},
		},
		{
			name:  "first sight, not ready with its taint: taint off, queued afresh",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionFalse, 0, 0), taints(NotReadyTaint)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { delete(st.Health, "a"); st.Held["a"] = zkey("z") },
			want:  []string{"event RegisteredNode a", "a: -not-ready dequeue(z) enqueue(z)"},
		},
		{
			name:  "Ready False: queued",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionFalse, 0, 0)), healthy("b")},
			want:  []string{"a: enqueue(z)"},
		},
		{
			name:  "Ready False, tainted and held: nothing",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionFalse, 0, 0), taints(NotReadyTaint)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Held["a"] = zkey("z") },
			want:  nil,
		},
		{
			name:  "Ready False, held but the taint is gone: queued afresh",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionFalse, 0, 0)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Held["a"] = zkey("z") },
			want:  []string{"a: dequeue(z) enqueue(z)"},
		},
		{
			name:  "Ready False with unreachable: swapped at once",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionFalse, 0, 0), taints(UnreachableTaint)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Held["a"] = zkey("z") },
			want:  []string{"a: +not-ready -unreachable"},
		},
		{
			name:  "Unknown with not-ready: swapped at once",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionUnknown, 0, 0), taints(NotReadyTaint)), healthy("b")},
			now:   10 * time.Second,
			want:  []string{"a: +unreachable -not-ready"},
		},
		{
			name:  "Unknown within its grace period on our clock: left alone",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionUnknown, 0, 0)), healthy("b")},
			now:   40 * time.Second,
			want:  nil,
		},
		{
			name:  "Unknown past grace: queued",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionUnknown, 0, 0)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { known(st, nodes["b"], 30*time.Second) },
			now:   40*time.Second + 1,
			want:  []string{"a: enqueue(z)"},
		},
		{
			name:  "Ready again: both NoExecute taints off, out of the queue",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionTrue, 0, 0), taints(NotReadyTaint, UnreachableTaint))},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Held["a"] = zkey("z") },
			want:  []string{"a: -not-ready -unreachable dequeue(z)"},
		},
		{
			name:  "silent past grace: Unknown written, NodeNotReady, pods marked; the queue waits for the written status",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionTrue, 0, 0)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { known(st, nodes["b"], 30*time.Second) },
			now:   40*time.Second + 1,
			want:  []string{"a: write(Ready=Unknown) notready-event mark-pods"},
		},
		{
			name:  "retry: pods marked again while Ready is not True",
			nodes: []*corev1.Node{mkNode("a", z, ready(corev1.ConditionUnknown, 0, 0), taints(UnreachableTaint)), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Retry["a"] = true; st.Held["a"] = zkey("z") },
			now:   10 * time.Second,
			want:  []string{"a: mark-pods"},
		},
		{
			name:  "retry dropped once Ready",
			nodes: []*corev1.Node{healthy("a")},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Retry["a"] = true },
			want:  nil,
		},
		{
			name:  "never posted, in startup grace: nothing, not even a queue change",
			nodes: []*corev1.Node{mkNode("a", z), healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) { delete(st.Health, "a") },
			now:   30 * time.Second,
			want:  []string{"event RegisteredNode a"},
		},
		{
			name:  "deleted: RemovingNode, out of its queue",
			nodes: []*corev1.Node{healthy("b")},
			setup: func(st State, nodes map[string]*corev1.Node) {
				st.Health["gone"] = &Health{Zone: zkey("old"), UID: "uid-gone"}
				st.Held["gone"] = zkey("old")
			},
			want: []string{"event RemovingNode gone", "gone: dequeue(old)"},
		},
		{
			name: "moved to another zone while held: out of the old queue, into the new",
			nodes: []*corev1.Node{
				mkNode("a", zone("new"), ready(corev1.ConditionFalse, 0, 0), taints(NotReadyTaint)),
				mkNode("b", zone("new"), ready(corev1.ConditionTrue, 0, 0)),
			},
			setup: func(st State, nodes map[string]*corev1.Node) { st.Held["a"] = zkey("old") },
			want:  []string{"a: dequeue(old) enqueue(new)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := emptyState()
			byName := map[string]*corev1.Node{}
			for _, n := range tc.nodes {
				known(st, n, 0)
				byName[n.Name] = n
			}
			if tc.setup != nil {
				tc.setup(st, byName)
			}
			before := fmt.Sprint(st)
			p := PlanPass(Input{Now: at(tc.now), Params: params, Nodes: tc.nodes, State: st})
			if diff := cmp.Diff(tc.want, summary(p)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if after := fmt.Sprint(st); after != before {
				t.Errorf("PlanPass modified its input state")
			}
		})
	}
}

func TestPlanPassPods(t *testing.T) {
	// The exclude-disruption label keeps a node out of its zone's counts.
	nodes := []*corev1.Node{
		mkNode("a", zone("z"), ready(corev1.ConditionTrue, 0, 0)),
		mkNode("b", zone("z"), ready(corev1.ConditionFalse, 0, 0)),
		mkNode("c", zone("z"), ready(corev1.ConditionFalse, 0, 0), label(LabelExcludeDisruption, "")),
		mkNode("d", zone("y"), ready(corev1.ConditionFalse, 0, 0), label(LabelExcludeDisruption, "true")),
	}
	p := PlanPass(Input{Now: at(time.Second), Params: params, Nodes: nodes, State: emptyState()})
	want := []ZoneReport{
		{Zone: zkey("y"), Health: 100},
		{Zone: zkey("z"), Size: 2, Unhealthy: 1, Health: 50},
	}
	if diff := cmp.Diff(want, p.Zones); diff != "" {
		t.Errorf("zone reports (-want +got):\n%s", diff)
	}
	// Excluded nodes are still tainted: c and d are queued.
	var queued []string
	for _, a := range p.Nodes {
		if a.Enqueue {
			queued = append(queued, a.Name)
		}
	}
	if diff := cmp.Diff([]string{"b", "c", "d"}, queued); diff != "" {
		t.Errorf("queued (-want +got):\n%s", diff)
	}
}

func TestPlanPassZoneLabelsSpelledTwoWays(t *testing.T) {
	// Beta and GA labels naming the same zone are one zone.
	nodes := []*corev1.Node{
		mkNode("a", label(corev1.LabelTopologyRegion, "r"), label(corev1.LabelTopologyZone, "z"), ready(corev1.ConditionTrue, 0, 0)),
		mkNode("b", label(corev1.LabelFailureDomainBetaRegion, "r"), label(corev1.LabelFailureDomainBetaZone, "z"), ready(corev1.ConditionFalse, 0, 0)),
		mkNode("c", label(corev1.LabelFailureDomainBetaRegion, "r"), label(corev1.LabelTopologyZone, "z"), ready(corev1.ConditionFalse, 0, 0)),
	}
	p := PlanPass(Input{Now: at(time.Second), Params: params, Nodes: nodes, State: emptyState()})
	want := []ZoneReport{{Zone: "r:\x00:z", Size: 3, Unhealthy: 2, Health: float64(100) / 3}}
	if diff := cmp.Diff(want, p.Zones); diff != "" {
		t.Errorf("zone reports (-want +got):\n%s", diff)
	}
}

// cluster is a tiny in-memory cluster for multi-pass plan tests: it applies
// plans to its nodes the way the shell would, and simulates kubelets.
type cluster struct {
	t      *testing.T
	nodes  []*corev1.Node
	leases map[string]*coordinationv1.Lease
	state  State
}

func newCluster(t *testing.T, zones map[string]int) *cluster {
	c := &cluster{t: t, leases: map[string]*coordinationv1.Lease{}, state: emptyState()}
	for _, z := range sortedKeys(zones) {
		for i := 0; i < zones[z]; i++ {
			n := mkNode(fmt.Sprintf("%s%d", z, i), zone(z), ready(corev1.ConditionTrue, 0, 0))
			c.nodes = append(c.nodes, n)
			c.leases[n.Name] = mkLease(n.Name, 0)
		}
	}
	return c
}

// heartbeat renews the named nodes' leases and posts Ready=True at d.
func (c *cluster) heartbeat(d time.Duration, names ...string) {
	for _, name := range names {
		c.leases[name] = mkLease(name, d)
		for _, n := range c.nodes {
			if n.Name == name {
				i := conditionIndex(n.Status.Conditions, corev1.NodeReady)
				n.Status.Conditions[i] = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: mt(d), LastTransitionTime: mt(d)}
			}
		}
	}
}

// pass plans at d and applies status writes and immediate taint changes.
func (c *cluster) pass(d time.Duration) Plan {
	p := PlanPass(Input{Now: at(d), Params: params, Nodes: c.nodes, Leases: c.leases, State: c.state})
	c.state = p.State
	for _, a := range p.Nodes {
		for _, n := range c.nodes {
			if n.Name != a.Name {
				continue
			}
			if a.Conditions != nil {
				n.Status.Conditions = a.Conditions
			}
			n.Spec.Taints, _ = ApplyTaints(n.Spec.Taints, a.AddTaints, a.RemoveTaints)
		}
	}
	return p
}

func (c *cluster) held() []string {
	out := sortedKeys(c.state.Held)
	sort.Strings(out)
	return out
}

func TestFullDisruptionAndFreshGrace(t *testing.T) {
	c := newCluster(t, map[string]int{"a": 3, "b": 3})
	all := []string{"a0", "a1", "a2", "b0", "b1", "b2"}
	c.pass(0)
	if diff := cmp.Diff(map[string]ZoneState{zkey("a"): StateNormal, zkey("b"): StateNormal}, c.state.Zones); diff != "" {
		t.Fatalf("zones after first pass (-want +got):\n%s", diff)
	}
	// One node of a goes down early and gets queued and tainted.
	c.heartbeat(30*time.Second, "a1", "a2", "b0", "b1", "b2")
	c.pass(41 * time.Second) // a0 marked Unknown
	p := c.pass(46 * time.Second)
	if diff := cmp.Diff([]string{"a0: enqueue(a)"}, summary(p)); diff != "" {
		t.Fatalf("a0 alone down (-want +got):\n%s", diff)
	}
	c.nodes[0].Spec.Taints = []corev1.Taint{UnreachableTaint} // the tainting pass did its job

	// Everything goes silent after 30s. The controller saw the last
	// renewals at its 41s pass, so at 81s they are exactly at grace...
	if p := c.pass(81 * time.Second); len(p.Nodes) != 0 {
		t.Fatalf("at exactly the grace period: %v", summary(p))
	}
	// ...and one pass later every node is Unknown.
	p = c.pass(86 * time.Second)
	if p.Disruption != DisruptionEntered {
		t.Fatalf("disruption = %v, want entered", p.Disruption)
	}
	want := []string{
		"a0: -unreachable dequeue(a)",
		"a1: write(Ready=Unknown) notready-event mark-pods",
		"a2: write(Ready=Unknown) notready-event mark-pods",
		"b0: write(Ready=Unknown) notready-event mark-pods",
		"b1: write(Ready=Unknown) notready-event mark-pods",
		"b2: write(Ready=Unknown) notready-event mark-pods",
	}
	if diff := cmp.Diff(want, summary(p)); diff != "" {
		t.Errorf("entering (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]QueueChange{{Zone: zkey("a"), QPS: 0}, {Zone: zkey("b"), QPS: 0}}, p.Queues); diff != "" {
		t.Errorf("rates on entering (-want +got):\n%s", diff)
	}
	// While every zone is down, nothing is queued or tainted.
	for d := 91 * time.Second; d < 300*time.Second; d += 5 * time.Second {
		if p := c.pass(d); len(p.Nodes) != 0 || len(p.Queues) != 0 {
			t.Fatalf("pass at %v while all down: %v %v", d, summary(p), p.Queues)
		}
	}
	if len(c.held()) != 0 {
		t.Fatalf("held while all down: %v", c.held())
	}

	// At 300s a0 comes back: leaving the mode, every node gets a fresh
	// grace period and each zone its rate (a: 2 of 3 down → Normal; b: Full
	// → the normal rate).
	c.heartbeat(300*time.Second, "a0")
	p = c.pass(300 * time.Second)
	if p.Disruption != DisruptionLeft {
		t.Fatalf("disruption = %v, want left", p.Disruption)
	}
	if diff := cmp.Diff([]QueueChange{{Zone: zkey("a"), QPS: 0.1}, {Zone: zkey("b"), QPS: 0.1}}, p.Queues); diff != "" {
		t.Errorf("rates on leaving (-want +got):\n%s", diff)
	}
	for _, name := range all {
		if h := c.state.Health[name]; !h.ProbeTime.Equal(at(300 * time.Second)) {
			t.Errorf("%s: ProbeTime = %v, want the fresh start at 300s", name, h.ProbeTime.Sub(t0))
		}
	}
	if len(p.Nodes) != 0 {
		t.Errorf("leaving pass acted on nodes: %v", summary(p))
	}
	// a0 stays alive; the others stay silent. Exactly at the fresh grace
	// period: still nothing queued.
	c.heartbeat(320*time.Second, "a0")
	if p := c.pass(320 * time.Second); len(p.Nodes) != 0 {
		t.Errorf("at 320s: %v", summary(p))
	}
	if p := c.pass(340 * time.Second); len(p.Nodes) != 0 {
		t.Errorf("at fresh grace (340s): %v", summary(p))
	}
	// Past it: the still-dead nodes are queued.
	p = c.pass(340*time.Second + 1)
	want = []string{"a1: enqueue(a)", "a2: enqueue(a)", "b0: enqueue(b)", "b1: enqueue(b)", "b2: enqueue(b)"}
	if diff := cmp.Diff(want, summary(p)); diff != "" {
		t.Errorf("after fresh grace (-want +got):\n%s", diff)
	}
}

func TestPlanPassRateSelection(t *testing.T) {
	// Zones of 50 and 51 nodes with 30 and 31 down (60%): partial; the
	// small one stops, the large one slows to the secondary rate.
	c := newCluster(t, map[string]int{"s": 50, "l": 51, "h": 10})
	c.pass(0)
	var alive []string
	for _, n := range c.nodes {
		var idx int
		fmt.Sscanf(n.Name[1:], "%d", &idx)
		if n.Name[0] == 'h' || (n.Name[0] == 's' && idx >= 30) || (n.Name[0] == 'l' && idx >= 31) {
			alive = append(alive, n.Name)
		}
	}
	c.heartbeat(30*time.Second, alive...)
	p := c.pass(41 * time.Second)
	if diff := cmp.Diff([]QueueChange{{Zone: zkey("l"), QPS: 0.01}, {Zone: zkey("s"), QPS: 0}}, p.Queues); diff != "" {
		t.Errorf("rates (-want +got):\n%s", diff)
	}
	want := map[string]ZoneState{zkey("h"): StateNormal, zkey("l"): StatePartialDisruption, zkey("s"): StatePartialDisruption}
	if diff := cmp.Diff(want, c.state.Zones); diff != "" {
		t.Errorf("zones (-want +got):\n%s", diff)
	}
}
