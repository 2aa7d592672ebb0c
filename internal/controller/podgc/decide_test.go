package podgc

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// pod builds pod ns/name created an hour before now; opts adjust it.
func pod(name string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func on(node string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

func phase(ph corev1.PodPhase) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Minute)} }

func evictedPod(p *corev1.Pod) {
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = "Evicted"
}

func createdAgo(d time.Duration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now.Add(-d)) }
}

func inNamespace(ns string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Namespace = ns } }

// node builds a node; ready is its Ready condition status ("" for none).
func node(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: ready},
		}
	}
	return n
}

var (
	outOfServiceExecute  = corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	outOfServiceSchedule = corev1.Taint{Key: volume.TaintOutOfService, Effect: corev1.TaintEffectNoSchedule}
	unreachable          = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
)

func TestObserve(t *testing.T) {
	const d = 40 * time.Second
	cases := []struct {
		name      string
		q         Quarantine
		pods      []*corev1.Pod
		nodes     []*corev1.Node
		d         time.Duration
		want      Quarantine
		wantCheck []string
	}{
		{name: "nothing", want: Quarantine{}},
		{
			name:  "pods on existing nodes and unbound pods start nothing",
			pods:  []*corev1.Pod{pod("a", on("n1")), pod("b")},
			nodes: []*corev1.Node{node("n1", corev1.ConditionTrue)},
			want:  Quarantine{},
		},
		{
			name: "a missing node name starts a quarantine",
			pods: []*corev1.Pod{pod("a", on("ghost")), pod("b", on("ghost"))},
			want: Quarantine{"ghost": now.Add(d)},
		},
		{
			name: "the first sighting counts",
			q:    Quarantine{"ghost": now.Add(10 * time.Second)},
			pods: []*corev1.Pod{pod("a", on("ghost"))},
			want: Quarantine{"ghost": now.Add(10 * time.Second)},
		},
		{
			name: "one nanosecond before the end it waits",
			q:    Quarantine{"ghost": now.Add(time.Nanosecond)},
			pods: []*corev1.Pod{pod("a", on("ghost"))},
			want: Quarantine{"ghost": now.Add(time.Nanosecond)},
		},
		{
			name:      "exactly at the end it is checked, and a new quarantine starts",
			q:         Quarantine{"ghost": now},
			pods:      []*corev1.Pod{pod("a", on("ghost"))},
			want:      Quarantine{"ghost": now.Add(d)},
			wantCheck: []string{"ghost"},
		},
		{
			name:      "ended names are checked in order",
			q:         Quarantine{"b": now.Add(-time.Second), "a": now.Add(-time.Minute), "c": now.Add(time.Second)},
			pods:      []*corev1.Pod{pod("x", on("a")), pod("y", on("b")), pod("z", on("c"))},
			want:      Quarantine{"a": now.Add(d), "b": now.Add(d), "c": now.Add(time.Second)},
			wantCheck: []string{"a", "b"},
		},
		{
			name:  "a node that came back is dropped when its quarantine ends",
			q:     Quarantine{"n1": now.Add(-time.Second)},
			pods:  []*corev1.Pod{pod("a", on("n1"))},
			nodes: []*corev1.Node{node("n1", corev1.ConditionTrue)},
			want:  Quarantine{},
		},
		{
			name:  "a node that came back stays quarantined until the end",
			q:     Quarantine{"n1": now.Add(time.Second)},
			nodes: []*corev1.Node{node("n1", corev1.ConditionTrue)},
			want:  Quarantine{"n1": now.Add(time.Second)},
		},
		{
			name: "an ended name no pod uses any more is dropped unchecked",
			q:    Quarantine{"ghost": now.Add(-time.Second)},
			want: Quarantine{},
		},
		{
			name: "a name no pod uses waits out its quarantine",
			q:    Quarantine{"ghost": now.Add(time.Second)},
			want: Quarantine{"ghost": now.Add(time.Second)},
		},
		{
			name:      "a zero quarantine checks in the same pass",
			pods:      []*corev1.Pod{pod("a", on("ghost"))},
			d:         -1, // stands for 0 below
			want:      Quarantine{},
			wantCheck: []string{"ghost"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dur := d
			if tc.d < 0 {
				dur = 0
			}
			before := Quarantine{}
			for k, v := range tc.q {
				before[k] = v
			}
			got, check := Observe(tc.q, tc.pods, tc.nodes, now, dur)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("quarantine (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCheck, check); diff != "" {
				t.Errorf("check (-want +got):\n%s", diff)
			}
			if tc.q != nil {
				if diff := cmp.Diff(before, tc.q); diff != "" {
					t.Errorf("Observe changed its input (-before +after):\n%s", diff)
				}
			}
		})
	}
}

func TestQuarantineNext(t *testing.T) {
	if got := (Quarantine{}).Next(); !got.IsZero() {
		t.Errorf("empty: Next = %v, want zero", got)
	}
	q := Quarantine{"a": now.Add(30 * time.Second), "b": now.Add(10 * time.Second), "c": now.Add(20 * time.Second)}
	if got, want := q.Next(), now.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Next = %v, want %v", got, want)
	}
}

// planned is a Deletion as a comparable line.
type planned struct {
	Pod    string
	Reason Reason
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name      string
		pods      []*corev1.Pod
		nodes     []*corev1.Node
		gone      map[string]bool
		threshold int
		want      []planned
	}{
		{name: "nothing", threshold: 1},

		// Terminated.
		{
			name:      "exactly at the threshold nothing goes",
			pods:      []*corev1.Pod{pod("a", phase(corev1.PodSucceeded)), pod("b", phase(corev1.PodFailed)), pod("c")},
			threshold: 2,
		},
		{
			name: "one over the threshold: the oldest goes",
			pods: []*corev1.Pod{
				pod("new", phase(corev1.PodSucceeded), createdAgo(time.Minute)),
				pod("old", phase(corev1.PodFailed), createdAgo(time.Hour)),
				pod("mid", phase(corev1.PodSucceeded), createdAgo(10*time.Minute)),
				pod("running", createdAgo(2*time.Hour)),
			},
			threshold: 2,
			want:      []planned{{"ns/old", ReasonTerminated}},
		},
		{
			name: "evicted pods go first, then the oldest, ties by name",
			pods: []*corev1.Pod{
				pod("old", phase(corev1.PodSucceeded), createdAgo(time.Hour)),
				pod("evicted", evictedPod, createdAgo(time.Second)),
				pod("tie-b", phase(corev1.PodSucceeded), createdAgo(time.Hour)),
				pod("failed-other-reason", phase(corev1.PodFailed), createdAgo(time.Minute)),
				pod("ancient", phase(corev1.PodFailed), createdAgo(24*time.Hour)),
			},
			threshold: 1,
			want: []planned{
				{"ns/evicted", ReasonTerminated}, {"ns/ancient", ReasonTerminated},
				{"ns/old", ReasonTerminated}, {"ns/tie-b", ReasonTerminated},
			},
		},
		{
			name: "an empty phase counts as terminated; Pending, Running and Unknown do not",
			pods: []*corev1.Pod{
				pod("empty", phase(""), createdAgo(time.Hour)),
				pod("pending", phase(corev1.PodPending), createdAgo(2*time.Hour)),
				pod("unknown", phase(corev1.PodUnknown), createdAgo(2*time.Hour)),
				pod("done", phase(corev1.PodSucceeded), createdAgo(time.Minute)),
			},
			threshold: 1,
			want:      []planned{{"ns/empty", ReasonTerminated}},
		},
		{
			name:      "threshold 0 turns the terminated path off",
			pods:      []*corev1.Pod{pod("a", phase(corev1.PodSucceeded)), pod("b", phase(corev1.PodFailed))},
			threshold: 0,
		},
		{
			name:      "a negative threshold turns it off too",
			pods:      []*corev1.Pod{pod("a", phase(corev1.PodSucceeded))},
			threshold: -1,
		},

		// Out of service.
		{
			name: "terminating pods on a not-Ready node with the taint go, whatever its effect",
			pods: []*corev1.Pod{
				pod("a", on("n1"), deleting, createdAgo(time.Minute)),
				pod("b", on("n2"), deleting, createdAgo(time.Hour)),
				pod("c", on("n3"), deleting),
			},
			nodes: []*corev1.Node{
				node("n1", corev1.ConditionFalse, unreachable, outOfServiceExecute),
				node("n2", corev1.ConditionUnknown, outOfServiceSchedule),
				node("n3", ""), // no Ready condition, but no taint either
			},
			threshold: 10,
			want:      []planned{{"ns/b", ReasonOutOfService}, {"ns/a", ReasonOutOfService}},
		},
		{
			name:      "a node without a Ready condition is not Ready",
			pods:      []*corev1.Pod{pod("a", on("n1"), deleting)},
			nodes:     []*corev1.Node{node("n1", "", outOfServiceExecute)},
			threshold: 10,
			want:      []planned{{"ns/a", ReasonOutOfService}},
		},
		{
			name:      "a Ready node with the taint keeps its pods",
			pods:      []*corev1.Pod{pod("a", on("n1"), deleting)},
			nodes:     []*corev1.Node{node("n1", corev1.ConditionTrue, outOfServiceExecute)},
			threshold: 10,
		},
		{
			name:      "a not-Ready node without the taint keeps its pods",
			pods:      []*corev1.Pod{pod("a", on("n1"), deleting)},
			nodes:     []*corev1.Node{node("n1", corev1.ConditionFalse, unreachable)},
			threshold: 10,
		},
		{
			name:      "pods not being deleted stay on an out-of-service node",
			pods:      []*corev1.Pod{pod("a", on("n1"))},
			nodes:     []*corev1.Node{node("n1", corev1.ConditionFalse, outOfServiceExecute)},
			threshold: 10,
		},

		// Orphaned.
		{
			name: "every pod of a node confirmed gone goes, whatever its state",
			pods: []*corev1.Pod{
				pod("b", on("ghost")),
				pod("a", on("ghost"), inNamespace("other")),
				pod("c", on("ghost"), deleting),
				pod("d", on("ghost"), phase(corev1.PodSucceeded)),
				pod("e", on("other-ghost")),
			},
			gone:      map[string]bool{"ghost": true},
			threshold: 10,
			want: []planned{
				{"ns/b", ReasonOrphaned}, {"ns/c", ReasonOrphaned}, {"ns/d", ReasonOrphaned}, {"other/a", ReasonOrphaned},
			},
		},
		{
			name:      "a gone name whose node is listed keeps its pods",
			pods:      []*corev1.Pod{pod("a", on("n1"))},
			nodes:     []*corev1.Node{node("n1", corev1.ConditionTrue)},
			gone:      map[string]bool{"n1": true},
			threshold: 10,
		},

		// Unscheduled.
		{
			name:      "terminating pods on no node go; others stay",
			pods:      []*corev1.Pod{pod("b", deleting), pod("a", deleting, phase(corev1.PodPending)), pod("c", phase(corev1.PodPending))},
			threshold: 10,
			want:      []planned{{"ns/a", ReasonUnscheduled}, {"ns/b", ReasonUnscheduled}},
		},

		// Paths together.
		{
			name: "each pod once, under the first path, paths in upstream's order",
			pods: []*corev1.Pod{
				pod("unscheduled", deleting),
				pod("orphan", on("ghost")),
				pod("done-orphan", on("ghost"), phase(corev1.PodFailed), createdAgo(3*time.Hour)),
				pod("done-unscheduled", deleting, phase(corev1.PodSucceeded), createdAgo(2*time.Hour)),
				pod("oos", on("n1"), deleting),
				pod("done-kept", phase(corev1.PodSucceeded), createdAgo(time.Minute)),
			},
			nodes:     []*corev1.Node{node("n1", corev1.ConditionFalse, outOfServiceExecute)},
			gone:      map[string]bool{"ghost": true},
			threshold: 1,
			want: []planned{
				{"ns/done-orphan", ReasonTerminated}, {"ns/done-unscheduled", ReasonTerminated},
				{"ns/oos", ReasonOutOfService},
				{"ns/orphan", ReasonOrphaned},
				{"ns/unscheduled", ReasonUnscheduled},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			order := make([]string, len(tc.pods))
			for i, p := range tc.pods {
				order[i] = p.Name
			}
			var got []planned
			for _, d := range Plan(tc.pods, tc.nodes, tc.gone, tc.threshold) {
				got = append(got, planned{d.Pod.Namespace + "/" + d.Pod.Name, d.Reason})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for i, p := range tc.pods {
				if p.Name != order[i] {
					t.Fatalf("Plan reordered its input: %d is %s, was %s", i, p.Name, order[i])
				}
			}
		})
	}
}

func TestMarkFailed(t *testing.T) {
	earlier := metav1.NewTime(now.Add(-time.Hour))
	stamp := func(tm time.Time) string { return tm.UTC().Format(time.RFC3339) }
	withCondition := func(status corev1.ConditionStatus) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue},
				{Type: corev1.DisruptionTarget, Status: status, Reason: "Other", LastTransitionTime: earlier},
			}
		}
	}
	condition := func(transition time.Time) map[string]any {
		return map[string]any{
			"type": "DisruptionTarget", "status": "True", "reason": ConditionReason, "message": ConditionMessage,
			"lastTransitionTime": stamp(transition), "lastProbeTime": nil,
		}
	}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		reason Reason
		want   map[string]any // nil: no patch
	}{
		{name: "a succeeded pod is not patched", pod: pod("a", phase(corev1.PodSucceeded)), reason: ReasonTerminated},
		{name: "a failed orphan is not patched", pod: pod("a", phase(corev1.PodFailed), on("ghost")), reason: ReasonOrphaned},
		{
			name: "out of service: phase only, with the uid",
			pod:  pod("a", on("n1"), deleting), reason: ReasonOutOfService,
			want: map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{"phase": "Failed"}},
		},
		{
			name: "unscheduled: phase only",
			pod:  pod("a", deleting, phase(corev1.PodPending)), reason: ReasonUnscheduled,
			want: map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{"phase": "Failed"}},
		},
		{
			name: "an empty phase (terminated) is marked Failed",
			pod:  pod("a", phase("")), reason: ReasonTerminated,
			want: map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{"phase": "Failed"}},
		},
		{
			name: "orphaned: phase and the DisruptionTarget condition as of now",
			pod:  pod("a", on("ghost")), reason: ReasonOrphaned,
			want: map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{
				"phase": "Failed", "conditions": []any{condition(now)},
			}},
		},
		{
			name: "orphaned with a DisruptionTarget already True keeps its transition time",
			pod:  pod("a", on("ghost"), withCondition(corev1.ConditionTrue)), reason: ReasonOrphaned,
			want: map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{
				"phase": "Failed", "conditions": []any{condition(earlier.Time)},
			}},
		},
		{
			name: "orphaned with a DisruptionTarget False transitions now",
			pod:  pod("a", on("ghost"), withCondition(corev1.ConditionFalse)), reason: ReasonOrphaned,
			want: map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{
				"phase": "Failed", "conditions": []any{condition(now)},
			}},
		},
		{
			name: "a reported observedGeneration is brought to the pod's generation",
			pod: pod("a", on("n1"), deleting, func(p *corev1.Pod) {
				p.Generation = 3
				p.Status.ObservedGeneration = 2
			}),
			reason: ReasonOutOfService,
			want:   map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{"phase": "Failed", "observedGeneration": float64(3)}},
		},
		{
			name: "an unreported observedGeneration stays unreported",
			pod: pod("a", on("n1"), deleting, func(p *corev1.Pod) {
				p.Generation = 3
			}),
			reason: ReasonOutOfService,
			want:   map[string]any{"metadata": map[string]any{"uid": "a-uid"}, "status": map[string]any{"phase": "Failed"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			patch, ok := MarkFailed(tc.pod, tc.reason, now)
			if ok != (tc.want != nil) {
				t.Fatalf("MarkFailed ok = %v, want %v (patch %s)", ok, tc.want != nil, patch)
			}
			if !ok {
				if patch != nil {
					t.Errorf("no patch due, yet got %s", patch)
				}
				return
			}
			var got map[string]any
			if err := json.Unmarshal(patch, &got); err != nil {
				t.Fatalf("patch %s: %v", patch, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTerminatedAndNodeReady(t *testing.T) {
	for ph, want := range map[corev1.PodPhase]bool{
		corev1.PodPending: false, corev1.PodRunning: false, corev1.PodUnknown: false,
		corev1.PodSucceeded: true, corev1.PodFailed: true, "": true,
	} {
		if got := Terminated(pod("a", phase(ph))); got != want {
			t.Errorf("Terminated(phase %q) = %v, want %v", ph, got, want)
		}
	}
	for status, want := range map[corev1.ConditionStatus]bool{
		corev1.ConditionTrue: true, corev1.ConditionFalse: false, corev1.ConditionUnknown: false, "": false,
	} {
		if got := NodeReady(node("n", status)); got != want {
			t.Errorf("NodeReady(Ready %q) = %v, want %v", status, got, want)
		}
	}
}
