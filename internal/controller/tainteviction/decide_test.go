package tainteviction

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var (
	unreachableNoExecute = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}
	notReadyNoExecute    = corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}
	unreachableNoSched   = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule}
	unreachablePrefer    = corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectPreferNoSchedule}
	maintenance          = corev1.Taint{Key: "example.com/maintenance", Value: "true", Effect: corev1.TaintEffectNoExecute}
)

// tol is an Exists toleration of key for NoExecute; seconds < 0 means no
// tolerationSeconds (forever).
func tol(key string, seconds int64) corev1.Toleration {
	t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	if seconds >= 0 {
		t.TolerationSeconds = ptr.To(seconds)
	}
	return t
}

func TestMinTolerationTime(t *testing.T) {
	cases := []struct {
		name string
		used []corev1.Toleration
		want time.Duration
	}{
		{name: "no matching toleration: now", want: 0},
		{name: "zero seconds: now", used: []corev1.Toleration{tol("a", 0)}, want: 0},
		{name: "negative seconds: now", used: []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](-5)}}, want: 0},
		{name: "one with seconds", used: []corev1.Toleration{tol("a", 30)}, want: 30 * time.Second},
		{name: "several: the minimum", used: []corev1.Toleration{tol("a", 300), tol("b", 30), tol("c", 120)}, want: 30 * time.Second},
		{name: "zero among others wins", used: []corev1.Toleration{tol("a", 300), tol("b", 0)}, want: 0},
		{name: "without seconds: forever", used: []corev1.Toleration{tol("a", -1)}, want: Forever},
		{name: "all without seconds: forever", used: []corev1.Toleration{tol("a", -1), tol("b", -1)}, want: Forever},
		{name: "forever and bounded: the bound", used: []corev1.Toleration{tol("a", -1), tol("b", 60)}, want: 60 * time.Second},
		{name: "one second", used: []corev1.Toleration{tol("a", 1)}, want: time.Second},
		{name: "huge seconds are capped", used: []corev1.Toleration{tol("a", math.MaxInt64)}, want: time.Duration(math.MaxInt64)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := MinTolerationTime(tc.used); got != tc.want {
				t.Errorf("MinTolerationTime = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMatchingTolerations(t *testing.T) {
	all := corev1.Toleration{Operator: corev1.TolerationOpExists}
	cases := []struct {
		name        string
		taints      []corev1.Taint
		tolerations []corev1.Toleration
		wantUsed    []corev1.Toleration
		wantOK      bool
	}{
		{name: "no taints", tolerations: []corev1.Toleration{tol("a", 1)}, wantOK: true},
		{name: "taint and no tolerations", taints: []corev1.Taint{unreachableNoExecute}, wantOK: false},
		{
			name:        "first matching toleration in pod order",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeNotReady, 1), tol(corev1.TaintNodeUnreachable, 30), all},
			wantUsed:    []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 30)},
			wantOK:      true,
		},
		{
			name:        "one per taint, in taint order",
			taints:      []corev1.Taint{unreachableNoExecute, notReadyNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeNotReady, 5), tol(corev1.TaintNodeUnreachable, 7)},
			wantUsed:    []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 7), tol(corev1.TaintNodeNotReady, 5)},
			wantOK:      true,
		},
		{
			name:        "one toleration may serve several taints",
			taints:      []corev1.Taint{unreachableNoExecute, notReadyNoExecute},
			tolerations: []corev1.Toleration{all},
			wantUsed:    []corev1.Toleration{all, all},
			wantOK:      true,
		},
		{
			name:        "one taint of two untolerated",
			taints:      []corev1.Taint{unreachableNoExecute, maintenance},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 300)},
			wantOK:      false,
		},
		{
			name:        "Equal needs the value",
			taints:      []corev1.Taint{maintenance},
			tolerations: []corev1.Toleration{{Key: maintenance.Key, Operator: corev1.TolerationOpEqual, Value: "false", Effect: corev1.TaintEffectNoExecute}},
			wantOK:      false,
		},
		{
			name:        "Equal with the value",
			taints:      []corev1.Taint{maintenance},
			tolerations: []corev1.Toleration{{Key: maintenance.Key, Value: "true"}},
			wantUsed:    []corev1.Toleration{{Key: maintenance.Key, Value: "true"}},
			wantOK:      true,
		},
		{
			name:        "effect must match when set",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			wantOK:      false,
		},
		{
			name:        "numeric operators do not tolerate",
			taints:      []corev1.Taint{{Key: "example.com/level", Value: "3", Effect: corev1.TaintEffectNoExecute}},
			tolerations: []corev1.Toleration{{Key: "example.com/level", Operator: corev1.TolerationOpGt, Value: "1"}},
			wantOK:      false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			used, ok := MatchingTolerations(tc.taints, tc.tolerations)
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantUsed, used); diff != "" {
				t.Errorf("used (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return now.Add(time.Duration(n) * time.Second) }
	pod := types.NamespacedName{Namespace: "default", Name: "p"}
	defaults := []corev1.Toleration{tol(corev1.TaintNodeNotReady, 300), tol(corev1.TaintNodeUnreachable, 300)}
	cases := []struct {
		name        string
		taints      []corev1.Taint
		tolerations []corev1.Toleration
		pending     *Work
		want        Decision
	}{
		{
			name:        "no taints: cancel",
			tolerations: defaults,
			want:        Decision{Op: Cancel},
		},
		{
			name:    "no taints with pending work: cancel",
			pending: &Work{Pod: pod, CreatedAt: sec(-10), FireAt: sec(290)},
			want:    Decision{Op: Cancel},
		},
		{
			name:   "NoSchedule and PreferNoSchedule taints are ignored",
			taints: []corev1.Taint{unreachableNoSched, unreachablePrefer},
			want:   Decision{Op: Cancel},
		},
		{
			name:   "no matching toleration: now",
			taints: []corev1.Taint{unreachableNoExecute},
			want:   Decision{Op: Reschedule, CreatedAt: now, FireAt: now},
		},
		{
			name:        "not every taint tolerated: now, replacing pending work",
			taints:      []corev1.Taint{unreachableNoExecute, maintenance},
			tolerations: defaults,
			pending:     &Work{Pod: pod, CreatedAt: sec(-10), FireAt: sec(290)},
			want:        Decision{Op: Reschedule, CreatedAt: now, FireAt: now},
		},
		{
			name:        "default tolerations: 300 s from now",
			taints:      []corev1.Taint{unreachableNoExecute, unreachableNoSched},
			tolerations: defaults,
			want:        Decision{Op: Schedule, CreatedAt: now, FireAt: sec(300)},
		},
		{
			name:        "the first matching toleration counts, not a later shorter one",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 300), tol(corev1.TaintNodeUnreachable, 5)},
			want:        Decision{Op: Schedule, CreatedAt: now, FireAt: sec(300)},
		},
		{
			name:        "several taints: the minimum of the used tolerations",
			taints:      []corev1.Taint{unreachableNoExecute, maintenance},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 300), tol(maintenance.Key, 30)},
			want:        Decision{Op: Schedule, CreatedAt: now, FireAt: sec(30)},
		},
		{
			name:        "tolerationSeconds 0: now",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 0)},
			want:        Decision{Op: Schedule, CreatedAt: now, FireAt: now},
		},
		{
			name:        "negative tolerationSeconds: now",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, -1), {Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](-3)}},
			want:        Decision{Op: Cancel}, // the first (forever) is the one used
		},
		{
			name:        "negative tolerationSeconds used: now",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](-3)}},
			want:        Decision{Op: Schedule, CreatedAt: now, FireAt: now},
		},
		{
			name:        "tolerated forever: cancel",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, -1)},
			pending:     &Work{Pod: pod, CreatedAt: sec(-10), FireAt: sec(290)},
			want:        Decision{Op: Cancel},
		},
		{
			name:        "pending work that started earlier is kept",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: defaults,
			pending:     &Work{Pod: pod, CreatedAt: sec(-100), FireAt: sec(200)},
			want:        Decision{Op: Keep, CreatedAt: sec(-100), FireAt: sec(200)},
		},
		{
			name:        "pending work is not brought forward by a shorter toleration",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 30)},
			pending:     &Work{Pod: pod, CreatedAt: sec(-1), FireAt: sec(299)},
			want:        Decision{Op: Keep, CreatedAt: sec(-1), FireAt: sec(299)},
		},
		{
			name:        "pending work that started now is replaced, keeping its start",
			taints:      []corev1.Taint{unreachableNoExecute},
			tolerations: []corev1.Toleration{tol(corev1.TaintNodeUnreachable, 30)},
			pending:     &Work{Pod: pod, CreatedAt: now, FireAt: sec(300)},
			want:        Decision{Op: Reschedule, CreatedAt: now, FireAt: sec(30)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.taints, tc.tolerations, tc.pending, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoExecuteTaints(t *testing.T) {
	got := NoExecuteTaints([]corev1.Taint{unreachableNoSched, unreachableNoExecute, unreachablePrefer, maintenance})
	if diff := cmp.Diff([]corev1.Taint{unreachableNoExecute, maintenance}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := NoExecuteTaints([]corev1.Taint{unreachableNoSched}); got != nil {
		t.Errorf("no NoExecute taints: got %v, want nil", got)
	}
}
