package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeChangeMayHelp(t *testing.T) {
	base := mkNode("n1", "4", "8Gi")
	cases := []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{name: "nothing", change: func(*corev1.Node) {}},
		{name: "a heartbeat", change: func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(t0)}}
			n.ResourceVersion = "42"
		}},
		{name: "capacity without allocatable", change: func(n *corev1.Node) { n.Status.Capacity = requests("8", "") }},
		{name: "uncordoned", change: cordoned, want: true},
		{name: "a label", change: withLabels("disk", "ssd"), want: true},
		{name: "a taint", change: withTaints(corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}), want: true},
		{name: "allocatable", change: withAllocatable(corev1.ResourceCPU, "8"), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.change(cur)
			if got := nodeChangeMayHelp(base, cur); got != tc.want {
				t.Errorf("nodeChangeMayHelp = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodScheduledFalse(t *testing.T) {
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	now := t0.Add(1500 * time.Millisecond)
	cond := func(status corev1.ConditionStatus, reason, message string, at metav1.Time) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodScheduled, Status: status, Reason: reason, Message: message, LastTransitionTime: at}
	}
	cases := []struct {
		name        string
		have        []corev1.PodCondition
		generation  int64
		want        corev1.PodCondition
		wantChanged bool
	}{
		{
			name:        "no condition yet",
			want:        cond(corev1.ConditionFalse, "Unschedulable", "m", metav1.NewTime(t0.Add(time.Second))),
			wantChanged: true,
		},
		{
			name: "the same",
			have: []corev1.PodCondition{{Type: corev1.PodReady}, cond(corev1.ConditionFalse, "Unschedulable", "m", earlier)},
			want: cond(corev1.ConditionFalse, "Unschedulable", "m", earlier),
		},
		{
			name:        "another message keeps the transition time",
			have:        []corev1.PodCondition{cond(corev1.ConditionFalse, "Unschedulable", "old", earlier)},
			want:        cond(corev1.ConditionFalse, "Unschedulable", "m", earlier),
			wantChanged: true,
		},
		{
			name:        "from True",
			have:        []corev1.PodCondition{cond(corev1.ConditionTrue, "", "", earlier)},
			want:        cond(corev1.ConditionFalse, "Unschedulable", "m", metav1.NewTime(t0.Add(time.Second))),
			wantChanged: true,
		},
		{
			name:       "a new generation",
			have:       []corev1.PodCondition{cond(corev1.ConditionFalse, "Unschedulable", "m", earlier)},
			generation: 3,
			want: func() corev1.PodCondition {
				c := cond(corev1.ConditionFalse, "Unschedulable", "m", earlier)
				c.ObservedGeneration = 3
				return c
			}(),
			wantChanged: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := mkPod("p", "", "")
			pod.Generation = tc.generation
			pod.Status.Conditions = tc.have
			got, changed := podScheduledFalse(pod, "Unschedulable", "m", now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("condition (-want +got):\n%s", diff)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
		})
	}
}
