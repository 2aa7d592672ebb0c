package sim

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/sim/script"
)

// The lifecycle controller's NoSchedule pass runs for the nodes that
// change: a node whose agent falls silent is marked Unknown and then
// tainted unreachable:NoSchedule, and its running neighbour is not.
func TestNoScheduleTaintFollowsNodeChanges(t *testing.T) {
	w := silenceOne(t, 0, 2*time.Minute)
	unreachable := func(name string) bool {
		for _, taint := range w.mirror.nodes[name].Spec.Taints {
			if taint.Key == corev1.TaintNodeUnreachable && taint.Effect == corev1.TaintEffectNoSchedule {
				return true
			}
		}
		return false
	}
	if !unreachable("a-1") {
		t.Errorf("silent a-1 has taints %v, want %s:NoSchedule", w.mirror.nodes["a-1"].Spec.Taints, corev1.TaintNodeUnreachable)
	}
	if unreachable("a-2") {
		t.Errorf("running a-2 has taints %v, want no %s", w.mirror.nodes["a-2"].Spec.Taints, corev1.TaintNodeUnreachable)
	}
}

// silenceOne runs a World of two nodes in zone a with pods pods for a
// minute, then silences a-1 and runs for d more.
func silenceOne(t *testing.T, pods int, d time.Duration) *World {
	t.Helper()
	w, err := New(context.Background(), Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := w.AddNodes("a", 2); err != nil {
		t.Fatal(err)
	}
	if pods > 0 {
		if err := w.AddPods(script.Pods{Count: pods}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.RunFor(time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := w.Act(script.At{Action: script.Stop, Zone: "a", From: 0, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.RunFor(d); err != nil {
		t.Fatal(err)
	}
	return w
}
