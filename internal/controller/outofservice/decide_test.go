package outofservice_test

import (
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/controller/outofservice"
	"knode/internal/volume"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var oos = corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// node is a node named name (UID "uid-"+name) with the given Ready status
// ("" for no condition) and taints.
func node(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.NodeSpec{Taints: taints}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
	}
	return n
}

// lease was renewed ago before now; seconds 0 leaves the duration unset.
func lease(name string, ago time.Duration, seconds int32) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease}}
	l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-ago)}
	if seconds != 0 {
		l.Spec.LeaseDurationSeconds = ptr.To(seconds)
	}
	return l
}

func warning(name, ago string) outofservice.Event {
	return outofservice.Event{
		Node: name, UID: types.UID("uid-" + name), Type: corev1.EventTypeWarning, Reason: outofservice.ReasonNodeAlive,
		Message: "Node " + name + " has the node.kubernetes.io/out-of-service taint but still renews its Lease (last renewed " + ago + " ago): " +
			"it may still be running, and detaching its volumes may corrupt data. " +
			"Remove the taint unless the machine is confirmed off: kubectl taint nodes " + name + " node.kubernetes.io/out-of-service-",
	}
}

func removable(name string) outofservice.Event {
	return outofservice.Event{
		Node: name, UID: types.UID("uid-" + name), Type: corev1.EventTypeNormal, Reason: outofservice.ReasonTaintRemovable,
		Message: "Node " + name + " is Ready and no pods are bound to it; the node.kubernetes.io/out-of-service taint can be removed: " +
			"kubectl taint nodes " + name + " node.kubernetes.io/out-of-service-",
	}
}

func seen(name string, announced bool) outofservice.Seen {
	return outofservice.Seen{UID: types.UID("uid-" + name), Announced: announced}
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name    string
		mem     outofservice.Memory
		nodes   []*corev1.Node
		leases  map[string]*coordinationv1.Lease
		pods    map[string]int
		want    []outofservice.Event
		wantMem outofservice.Memory
	}{
		{
			name:    "untainted nodes are not looked at",
			nodes:   []*corev1.Node{node("a", corev1.ConditionTrue), node("b", corev1.ConditionFalse, corev1.Taint{Key: "other", Effect: corev1.TaintEffectNoSchedule})},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 0, 40)},
			wantMem: outofservice.Memory{},
		},
		{
			name:    "new taint on a node renewing its lease warns",
			nodes:   []*corev1.Node{node("a", corev1.ConditionFalse, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 10*time.Second+300*time.Millisecond, 40)},
			pods:    map[string]int{"a": 2},
			want:    []outofservice.Event{warning("a", "10s")},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "lease renewed one second inside its duration is live",
			nodes:   []*corev1.Node{node("a", corev1.ConditionUnknown, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 39*time.Second, 40)},
			want:    []outofservice.Event{warning("a", "39s")},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "lease expiring exactly now is not live",
			nodes:   []*corev1.Node{node("a", corev1.ConditionUnknown, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 40*time.Second, 40)},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "stale lease (dead node) does not warn",
			nodes:   []*corev1.Node{node("a", corev1.ConditionUnknown, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 5*time.Minute, 40)},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "a short lease duration counts",
			nodes:   []*corev1.Node{node("a", corev1.ConditionUnknown, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 15*time.Second, 10)},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "lease without a duration lasts the default 40s",
			nodes:   []*corev1.Node{node("a", corev1.ConditionUnknown, oos), node("b", corev1.ConditionUnknown, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", 39*time.Second, 0), "b": lease("b", 40*time.Second, 0)},
			want:    []outofservice.Event{warning("a", "39s")},
			wantMem: outofservice.Memory{"a": seen("a", false), "b": seen("b", false)},
		},
		{
			name:    "renewal ahead of now is live, renewed 0s ago",
			nodes:   []*corev1.Node{node("a", corev1.ConditionFalse, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", -3*time.Second, 40)},
			pods:    map[string]int{"a": 1},
			want:    []outofservice.Event{warning("a", "0s")},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:  "no lease, or a lease never renewed, does not warn",
			nodes: []*corev1.Node{node("a", corev1.ConditionFalse, oos), node("b", corev1.ConditionFalse, oos)},
			leases: map[string]*coordinationv1.Lease{"b": {
				ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](40)},
			}},
			wantMem: outofservice.Memory{"a": seen("a", false), "b": seen("b", false)},
		},
		{
			name:    "any value and effect of the key counts",
			nodes:   []*corev1.Node{node("a", corev1.ConditionFalse, corev1.Taint{Key: volume.TaintOutOfService, Effect: corev1.TaintEffectNoSchedule})},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", time.Second, 40)},
			want:    []outofservice.Event{warning("a", "1s")},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "a taint already seen does not warn again",
			mem:     outofservice.Memory{"a": seen("a", false)},
			nodes:   []*corev1.Node{node("a", corev1.ConditionFalse, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", time.Second, 40)},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "a node recreated under the same name is new",
			mem:     outofservice.Memory{"a": {UID: "old", Announced: true}},
			nodes:   []*corev1.Node{node("a", corev1.ConditionTrue, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", time.Second, 40)},
			want:    []outofservice.Event{warning("a", "1s"), removable("a")},
			wantMem: outofservice.Memory{"a": seen("a", true)},
		},
		{
			name:    "nodes untainted or gone are forgotten",
			mem:     outofservice.Memory{"a": seen("a", true), "gone": seen("gone", false)},
			nodes:   []*corev1.Node{node("a", corev1.ConditionTrue)},
			wantMem: outofservice.Memory{},
		},
		{
			name:    "Ready with no pods is announced",
			mem:     outofservice.Memory{"a": seen("a", false)},
			nodes:   []*corev1.Node{node("a", corev1.ConditionTrue, oos)},
			leases:  map[string]*coordinationv1.Lease{"a": lease("a", time.Second, 40)},
			want:    []outofservice.Event{removable("a")},
			wantMem: outofservice.Memory{"a": seen("a", true)},
		},
		{
			name:    "Ready with a pod left waits",
			mem:     outofservice.Memory{"a": seen("a", false)},
			nodes:   []*corev1.Node{node("a", corev1.ConditionTrue, oos)},
			pods:    map[string]int{"a": 1},
			wantMem: outofservice.Memory{"a": seen("a", false)},
		},
		{
			name:    "announced once per Ready stretch",
			mem:     outofservice.Memory{"a": seen("a", true)},
			nodes:   []*corev1.Node{node("a", corev1.ConditionTrue, oos)},
			wantMem: outofservice.Memory{"a": seen("a", true)},
		},
		{
			name:    "not Ready ends the stretch",
			mem:     outofservice.Memory{"a": seen("a", true), "b": seen("b", true), "c": seen("c", true)},
			nodes:   []*corev1.Node{node("a", corev1.ConditionFalse, oos), node("b", corev1.ConditionUnknown, oos), node("c", "", oos)},
			wantMem: outofservice.Memory{"a": seen("a", false), "b": seen("b", false), "c": seen("c", false)},
		},
		{
			name:    "not Ready and empty is not announced",
			nodes:   []*corev1.Node{node("a", corev1.ConditionFalse, oos), node("b", "", oos)},
			wantMem: outofservice.Memory{"a": seen("a", false), "b": seen("b", false)},
		},
		{
			name:  "events come in node name order",
			nodes: []*corev1.Node{node("c", corev1.ConditionTrue, oos), node("a", corev1.ConditionTrue, oos), node("b", corev1.ConditionFalse, oos)},
			leases: map[string]*coordinationv1.Lease{
				"a": lease("a", 0, 40), "b": lease("b", 2*time.Second, 40), "c": lease("c", time.Hour, 40),
			},
			pods:    map[string]int{"c": 0},
			want:    []outofservice.Event{warning("a", "0s"), removable("a"), warning("b", "2s"), removable("c")},
			wantMem: outofservice.Memory{"a": seen("a", true), "b": seen("b", false), "c": seen("c", true)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.mem)
			got, mem := outofservice.Decide(tc.mem, tc.nodes, tc.leases, tc.pods, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantMem, mem); diff != "" {
				t.Errorf("memory (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.mem); diff != "" {
				t.Errorf("memory given was changed (-before +after):\n%s", diff)
			}
		})
	}
}
