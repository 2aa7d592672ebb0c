package nodelifecycle

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// exact compares times field by field (wall clock, monotonic reading and
// location), not as instants, so a Plan must be identical, not just equal.
var exact = cmp.Options{
	cmp.Comparer(func(a, b time.Time) bool { return a == b }),
	cmp.Comparer(func(a, b metav1.Time) bool { return a.Time == b.Time }),
}

// sameExactly is cmp.Diff(want, got, exact), quicker when they agree:
// reflect.DeepEqual is as strict (times field by field, nil apart from
// empty) and much faster on plans of thousands of nodes.
func sameExactly(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	if diff := cmp.Diff(want, got, exact); diff != "" {
		return diff
	}
	return "values differ, but cmp.Diff shows nothing"
}

// fleetMix says what a random fleet is made of.
type fleetMix struct {
	nodes, zones int
	// down: no node posts Ready True, so every zone can be fully disrupted.
	down bool
	// prevDown: the previous pass left every zone fully disrupted.
	prevDown bool
}

// randomPass builds a pass over a fleet that exercises every branch of
// PlanPass: every Ready status (and none, and a bogus one), stale and
// fresh heartbeats, missing and renewed leases, NoExecute taints, zones
// spelled with beta or GA labels or none, excluded nodes, nodes new since
// the last pass and nodes gone from it, held and retried nodes, and the
// occasional duplicated name.
func randomPass(rng *rand.Rand, mix fleetMix) Input {
	now := t0.Add(time.Hour)
	ago := func(max time.Duration) time.Time { return now.Add(-time.Duration(rng.Int64N(int64(max)))) }
	zoneName := func() string { return fmt.Sprintf("z%d", rng.IntN(mix.zones)) }
	regionName := func() string { return fmt.Sprintf("r%d", rng.IntN(2)) }
	prev := emptyState()
	in := Input{Now: now, Params: params, Leases: map[string]*coordinationv1.Lease{}, State: prev}
	var zoneKeys []string

	for i := 0; i < mix.nodes; i++ {
		name := fmt.Sprintf("n-%05d", i)
		if i > 0 && rng.IntN(500) == 0 {
			name = in.Nodes[rng.IntN(i)].Name
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, UID: types.UID(fmt.Sprintf("uid-%d", i)), CreationTimestamp: metav1.NewTime(ago(2 * time.Minute)),
		}}
		labels := map[string]string{corev1.LabelHostname: name}
		switch rng.IntN(10) {
		case 0:
			labels = nil
		case 1:
			// zone-less, but labelled otherwise
		case 2:
			labels[corev1.LabelFailureDomainBetaZone] = zoneName()
			labels[corev1.LabelFailureDomainBetaRegion] = regionName()
			labels[corev1.LabelTopologyZone] = zoneName()
		case 3:
			labels[corev1.LabelTopologyZone] = zoneName()
		case 4:
			labels[corev1.LabelFailureDomainBetaRegion] = ""
			labels[corev1.LabelTopologyRegion] = regionName()
			labels[corev1.LabelTopologyZone] = zoneName()
		default:
			labels[corev1.LabelTopologyRegion] = regionName()
			labels[corev1.LabelTopologyZone] = zoneName()
		}
		if labels != nil && rng.IntN(20) == 0 {
			labels[LabelExcludeDisruption] = ""
		}
		node.Labels = labels

		if rng.IntN(12) != 0 {
			status := corev1.ConditionTrue
			switch k := rng.IntN(100); {
			case k < 1:
				status = "Bogus"
			case k < 15 || mix.down && k < 55:
				status = corev1.ConditionFalse
			case k < 30 || mix.down:
				status = corev1.ConditionUnknown
			}
			hb := metav1.NewTime(ago(90 * time.Second))
			for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeReady, corev1.NodePIDPressure} {
				if t != corev1.NodeReady && rng.IntN(3) == 0 {
					continue
				}
				st := corev1.ConditionFalse
				if t == corev1.NodeReady {
					st = status
				}
				node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: t, Status: st, LastHeartbeatTime: hb, LastTransitionTime: metav1.NewTime(ago(time.Hour))})
			}
		}
		for _, tt := range []corev1.Taint{NotReadyTaint, UnreachableTaint, {Key: "other", Effect: corev1.TaintEffectNoExecute}} {
			if rng.IntN(6) == 0 {
				node.Spec.Taints = append(node.Spec.Taints, tt)
			}
		}
		in.Nodes = append(in.Nodes, node)

		switch rng.IntN(20) {
		case 0:
			// no lease
		case 1:
			in.Leases[name] = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		default:
			rt := metav1.NewMicroTime(ago(time.Minute))
			in.Leases[name] = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{RenewTime: &rt}}
		}

		key := ZoneKey(node)
		zoneKeys = append(zoneKeys, key)
		if rng.IntN(10) == 0 {
			continue // new since the last pass
		}
		h := &Health{ProbeTime: ago(90 * time.Second), ReadyTransitionTime: ago(time.Hour), Zone: key, UID: node.UID}
		if rng.IntN(8) == 0 {
			h.Zone = zoneKeyOf(regionName(), zoneName()) // moved zones
		}
		if i := conditionIndex(node.Status.Conditions, corev1.NodeReady); i >= 0 && rng.IntN(4) != 0 {
			h.Ready = readySeen(&node.Status.Conditions[i])
			if rng.IntN(3) == 0 {
				h.Ready.LastHeartbeatTime = h.Ready.LastHeartbeatTime.Add(-time.Second)
			}
			if rng.IntN(5) == 0 {
				h.Ready.LastTransitionTime = h.Ready.LastTransitionTime.Add(-time.Second)
			}
		}
		if l := in.Leases[name]; l != nil && rng.IntN(5) != 0 {
			h.Lease = leaseSeen(l)
			if h.Lease.HasRenewTime && rng.IntN(2) == 0 {
				h.Lease.RenewTime = h.Lease.RenewTime.Add(-10 * time.Second)
			}
		}
		prev.Health[name] = h
	}
	for i := 0; i < mix.nodes/30; i++ {
		name := fmt.Sprintf("gone-%05d", i)
		prev.Health[name] = &Health{ProbeTime: ago(time.Minute), Zone: zoneKeys[rng.IntN(len(zoneKeys))], UID: types.UID("uid-" + name)}
		if rng.IntN(2) == 0 {
			prev.Held[name] = zoneKeys[rng.IntN(len(zoneKeys))]
		}
	}
	for _, node := range in.Nodes {
		if rng.IntN(8) == 0 {
			prev.Held[node.Name] = zoneKeys[rng.IntN(len(zoneKeys))]
		}
		if rng.IntN(15) == 0 {
			prev.Retry[node.Name] = true
		}
	}
	states := []ZoneState{StateInitial, StateNormal, StatePartialDisruption, StateFullDisruption}
	decided := map[string]bool{}
	for _, key := range append(zoneKeys, "retired:\x00:zone") {
		if decided[key] {
			continue
		}
		decided[key] = true
		if !mix.prevDown && rng.IntN(3) == 0 {
			continue // a zone new to this pass
		}
		prev.Zones[key] = states[rng.IntN(len(states))]
		if mix.prevDown {
			prev.Zones[key] = StateFullDisruption
		}
		prev.Rates[key] = []float64{0, params.NodeEvictionRate, params.SecondaryNodeEvictionRate}[rng.IntN(3)]
	}
	return in
}

// advance is the fleet 5 s after a pass: the controller's condition
// writes and NoExecute changes landed, and some kubelets posted or
// renewed their leases.
func advance(rng *rand.Rand, in Input, p Plan) Input {
	in.Now = in.Now.Add(5 * time.Second)
	in.State = p.State
	byName := map[string]*NodeAction{}
	for i := range p.Nodes {
		byName[p.Nodes[i].Name] = &p.Nodes[i]
	}
	nodes := make([]*corev1.Node, len(in.Nodes))
	leases := make(map[string]*coordinationv1.Lease, len(in.Leases))
	for k, v := range in.Leases {
		leases[k] = v
	}
	for i, node := range in.Nodes {
		node = node.DeepCopy()
		if a := byName[node.Name]; a != nil {
			if a.Conditions != nil {
				node.Status.Conditions = a.Conditions
			}
			node.Spec.Taints, _ = ApplyTaints(node.Spec.Taints, a.AddTaints, a.RemoveTaints)
		}
		if j := conditionIndex(node.Status.Conditions, corev1.NodeReady); j >= 0 && rng.IntN(4) == 0 {
			c := &node.Status.Conditions[j]
			c.LastHeartbeatTime = metav1.NewTime(in.Now)
			if c.Status != corev1.ConditionTrue && rng.IntN(2) == 0 {
				c.Status, c.LastTransitionTime = corev1.ConditionTrue, metav1.NewTime(in.Now)
			}
		}
		if rng.IntN(3) == 0 {
			rt := metav1.NewMicroTime(in.Now)
			leases[node.Name] = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: node.Name}, Spec: coordinationv1.LeaseSpec{RenewTime: &rt}}
		}
		nodes[i] = node
	}
	in.Nodes, in.Leases = nodes, leases
	return in
}

// serial is the plain way to judge n nodes: one chunk, one goroutine.
func serial(n int) split { return split{chunk: max(n, 1), workers: 1} }

// splits are the other ways a pass can be cut: in small chunks serially,
// in tiny chunks over more goroutines than nodes warrant (so chunks see
// zones in different orders and some chunks see a zone only through
// excluded nodes), and as PlanPass cuts it.
func splits(n int) map[string]split {
	return map[string]split{
		"serial chunks":  {chunk: 7, workers: 1},
		"tiny chunks":    {chunk: 3, workers: 8},
		"default chunks": {chunk: chunkNodes, workers: max(runtime.GOMAXPROCS(0), 2)},
		"PlanPass":       splitFor(n),
	}
}

// TestPlanPassSplitsAgree checks that however a pass's judging is cut into
// chunks and shared out, it decides exactly what judging every node in
// turn decides, over random fleets and a few passes of each. (What that
// serial plan is, the other tests of this package say.)
func TestPlanPassSplitsAgree(t *testing.T) {
	for _, tc := range []struct {
		name string
		mix  fleetMix
	}{
		{"empty", fleetMix{nodes: 0, zones: 1}},
		{"small", fleetMix{nodes: 40, zones: 3}},
		{"below parallel", fleetMix{nodes: parallelMinNodes - 1, zones: 5}},
		{"mixed", fleetMix{nodes: 3000, zones: 6}},
		{"many zones", fleetMix{nodes: 2500, zones: 60}},
		{"all down", fleetMix{nodes: 2000, zones: 4, down: true}},
		{"recovering", fleetMix{nodes: 2000, zones: 4, prevDown: true}},
		{"still down", fleetMix{nodes: 1500, zones: 3, down: true, prevDown: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				rng := rand.New(rand.NewPCG(seed, uint64(tc.mix.nodes)))
				in := randomPass(rng, tc.mix)
				for pass := 0; pass < 3; pass++ {
					want := planPass(in, serial(len(in.Nodes)))
					for name, sp := range splits(len(in.Nodes)) {
						if diff := sameExactly(want, planPass(in, sp)); diff != "" {
							t.Fatalf("seed %d pass %d, %s: plan differs from the serial one (-want +got):\n%s", seed, pass, name, diff)
						}
					}
					if diff := sameExactly(want, PlanPass(in)); diff != "" {
						t.Fatalf("seed %d pass %d: PlanPass differs from the serial plan (-want +got):\n%s", seed, pass, diff)
					}
					in = advance(rng, in, want)
				}
			}
		})
	}
}

// TestPlanPassLeavesInputAlone checks that a parallel pass modifies
// nothing it is given, State included.
func TestPlanPassLeavesInputAlone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	in := randomPass(rng, fleetMix{nodes: 2000, zones: 5, prevDown: true})
	snapshot := func(in Input) Input {
		out := in
		out.Nodes = make([]*corev1.Node, len(in.Nodes))
		for i, n := range in.Nodes {
			out.Nodes[i] = n.DeepCopy()
		}
		out.Leases = map[string]*coordinationv1.Lease{}
		for k, l := range in.Leases {
			out.Leases[k] = l.DeepCopy()
		}
		out.State = State{Health: map[string]*Health{}, Zones: map[string]ZoneState{}, Rates: map[string]float64{}, Held: map[string]string{}, Retry: map[string]bool{}}
		for k, h := range in.State.Health {
			c := *h
			out.State.Health[k] = &c
		}
		for k, v := range in.State.Zones {
			out.State.Zones[k] = v
		}
		for k, v := range in.State.Rates {
			out.State.Rates[k] = v
		}
		for k, v := range in.State.Held {
			out.State.Held[k] = v
		}
		for k, v := range in.State.Retry {
			out.State.Retry[k] = v
		}
		return out
	}
	before := snapshot(in)
	if p := planPass(in, split{chunk: 5, workers: 4}); p.Disruption != DisruptionLeft {
		t.Fatalf("pass disruption = %v, want DisruptionLeft (the case that rewrites Health after judging)", p.Disruption)
	}
	if diff := sameExactly(before, in); diff != "" {
		t.Errorf("PlanPass modified its input (-before +after):\n%s", diff)
	}
}

// TestChunkZoneIndex checks a chunk's zone lookup past the point where it
// indexes zones instead of scanning them.
func TestChunkZoneIndex(t *testing.T) {
	var ct chunkTally
	for round := 0; round < 2; round++ {
		for i := 0; i < 3*scanZones; i++ {
			region, zone := "r", fmt.Sprintf("z%d", i)
			z := ct.zoneFor(region, zone, nil)
			if z.key != zoneKeyOf(region, zone) {
				t.Fatalf("round %d: zone %q has key %q, want %q", round, zone, z.key, zoneKeyOf(region, zone))
			}
		}
	}
	if len(ct.zones) != 3*scanZones {
		t.Errorf("chunk has %d zones, want %d", len(ct.zones), 3*scanZones)
	}
}

func TestIsZoneKeyOf(t *testing.T) {
	for _, tc := range []struct{ key, region, zone string }{
		{"", "", ""},
		{":\x00:", "", ""},
		{"r:\x00:z", "r", "z"},
		{":\x00:z", "", "z"},
		{"r:\x00:", "r", ""},
		{"r:\x00:z", "r:\x00:z", ""},
		{"a:\x00:b:\x00:c", "a", "b:\x00:c"},
		{"a:\x00:b:\x00:c", "a:\x00:b", "c"},
		{"r:x:z", "r", "z"},
		{"rr:\x00:z", "r", "z"},
	} {
		if got, want := isZoneKeyOf(tc.key, tc.region, tc.zone), tc.key == zoneKeyOf(tc.region, tc.zone); got != want {
			t.Errorf("isZoneKeyOf(%q, %q, %q) = %v, want %v", tc.key, tc.region, tc.zone, got, want)
		}
	}
}
