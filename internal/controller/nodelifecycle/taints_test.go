package nodelifecycle

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ns(key string) corev1.Taint { return corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule} }

func nsAt(key string, d time.Duration) corev1.Taint {
	t := ns(key)
	stamp := mt(d)
	t.TimeAdded = &stamp
	return t
}

func TestNoScheduleChange(t *testing.T) {
	now := 7 * time.Second
	tests := []struct {
		name       string
		node       *corev1.Node
		add, remov []corev1.Taint
	}{
		{"ready, nothing", mkNode("a", ready(corev1.ConditionTrue, 0, 0)), nil, nil},
		{"Ready False: not-ready", mkNode("a", ready(corev1.ConditionFalse, 0, 0)), []corev1.Taint{nsAt(corev1.TaintNodeNotReady, now)}, nil},
		{"Ready Unknown: unreachable", mkNode("a", ready(corev1.ConditionUnknown, 0, 0)), []corev1.Taint{nsAt(corev1.TaintNodeUnreachable, now)}, nil},
		{
			"pressures and network",
			mkNode("a", ready(corev1.ConditionTrue, 0, 0), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, 0, 0), cond(corev1.NodeDiskPressure, corev1.ConditionTrue, 0, 0), cond(corev1.NodePIDPressure, corev1.ConditionTrue, 0, 0), cond(corev1.NodeNetworkUnavailable, corev1.ConditionTrue, 0, 0)),
			[]corev1.Taint{nsAt(corev1.TaintNodeMemoryPressure, now), nsAt(corev1.TaintNodeDiskPressure, now), nsAt(corev1.TaintNodePIDPressure, now), nsAt(corev1.TaintNodeNetworkUnavailable, now)},
			nil,
		},
		{"unschedulable", mkNode("a", ready(corev1.ConditionTrue, 0, 0), func(n *corev1.Node) { n.Spec.Unschedulable = true }), []corev1.Taint{nsAt(corev1.TaintNodeUnschedulable, now)}, nil},
		{
			"recovered: managed taints go, others stay",
			mkNode("a", ready(corev1.ConditionTrue, 0, 0), taints(ns(corev1.TaintNodeUnreachable), ns(corev1.TaintNodeUnschedulable), ns("example.com/mine"), UnreachableTaint)),
			nil,
			[]corev1.Taint{ns(corev1.TaintNodeUnreachable), ns(corev1.TaintNodeUnschedulable)},
		},
		{"already tainted: nothing", mkNode("a", ready(corev1.ConditionFalse, 0, 0), taints(nsAt(corev1.TaintNodeNotReady, -time.Hour))), nil, nil},
		{"not-ready to unreachable", mkNode("a", ready(corev1.ConditionUnknown, 0, 0), taints(ns(corev1.TaintNodeNotReady))), []corev1.Taint{nsAt(corev1.TaintNodeUnreachable, now)}, []corev1.Taint{ns(corev1.TaintNodeNotReady)}},
		{"no Ready condition: nothing", mkNode("a"), nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			add, remove := NoScheduleChange(tc.node, at(now))
			if diff := cmp.Diff(tc.add, add); diff != "" {
				t.Errorf("add (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.remov, remove); diff != "" {
				t.Errorf("remove (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBetaLabelChange(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   map[string]string
	}{
		{"none", nil, nil},
		{"GA only: beta added", map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"}, map[string]string{"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}},
		{"beta differs: fixed", map[string]string{corev1.LabelOSStable: "linux", "beta.kubernetes.io/os": "windows"}, map[string]string{"beta.kubernetes.io/os": "linux"}},
		{"in step", map[string]string{corev1.LabelOSStable: "linux", "beta.kubernetes.io/os": "linux"}, nil},
		{"beta only: left alone", map[string]string{"beta.kubernetes.io/os": "linux"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := mkNode("a")
			n.Labels = tc.labels
			if diff := cmp.Diff(tc.want, BetaLabelChange(n)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyTaints(t *testing.T) {
	old := metav1.NewTime(at(-time.Hour))
	newer := metav1.NewTime(at(0))
	nrOld := NotReadyTaint
	nrOld.TimeAdded = &old
	nrNew := NotReadyTaint
	nrNew.TimeAdded = &newer
	other := corev1.Taint{Key: "example.com/x", Value: "v", Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name         string
		in, add, rem []corev1.Taint
		want         []corev1.Taint
		changed      bool
	}{
		{"add to empty", nil, []corev1.Taint{nrNew}, nil, []corev1.Taint{nrNew}, true},
		{"same key+effect replaced, order kept", []corev1.Taint{nrOld, other}, []corev1.Taint{nrNew}, nil, []corev1.Taint{nrNew, other}, true},
		{"identical: unchanged", []corev1.Taint{nrNew}, []corev1.Taint{nrNew}, nil, []corev1.Taint{nrNew}, false},
		{"swap", []corev1.Taint{other, UnreachableTaint}, []corev1.Taint{nrNew}, []corev1.Taint{UnreachableTaint}, []corev1.Taint{other, nrNew}, true},
		{"remove absent: unchanged", []corev1.Taint{other}, nil, []corev1.Taint{UnreachableTaint}, []corev1.Taint{other}, false},
		{"remove matches key and effect only", []corev1.Taint{ns(corev1.TaintNodeUnreachable), UnreachableTaint}, nil, []corev1.Taint{UnreachableTaint}, []corev1.Taint{ns(corev1.TaintNodeUnreachable)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]corev1.Taint(nil), tc.in...)
			got, changed := ApplyTaints(tc.in, tc.add, tc.rem)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("taints (-want +got):\n%s", diff)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if diff := cmp.Diff(before, tc.in); diff != "" {
				t.Errorf("input modified:\n%s", diff)
			}
		})
	}
}

func TestNoExecuteTaintFor(t *testing.T) {
	stamp := mt(3 * time.Second)
	nr, ur := NotReadyTaint, UnreachableTaint
	nr.TimeAdded, ur.TimeAdded = &stamp, &stamp
	tests := []struct {
		name     string
		node     *corev1.Node
		add, rem corev1.Taint
		ok       bool
		retry    time.Duration
	}{
		{"gone", nil, corev1.Taint{}, corev1.Taint{}, false, 0},
		{"no Ready: retry in 50ms", mkNode("a"), corev1.Taint{}, corev1.Taint{}, false, 50 * time.Millisecond},
		{"False: not-ready", mkNode("a", ready(corev1.ConditionFalse, 0, 0)), nr, UnreachableTaint, true, 0},
		{"Unknown: unreachable", mkNode("a", ready(corev1.ConditionUnknown, 0, 0)), ur, NotReadyTaint, true, 0},
		{"Ready again: nothing", mkNode("a", ready(corev1.ConditionTrue, 0, 0)), corev1.Taint{}, corev1.Taint{}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			add, rem, ok, retry := NoExecuteTaintFor(tc.node, at(3*time.Second))
			if diff := cmp.Diff([]any{tc.add, tc.rem, tc.ok, tc.retry}, []any{add, rem, ok, retry}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
