package podstate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(status corev1.ConditionStatus, since time.Time) *corev1.Pod {
	p := &corev1.Pod{}
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)},
	}
	return p
}

func TestAvailable(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		minReady  time.Duration
		now       time.Time
		ready     bool
		available bool
	}{
		{"no conditions", &corev1.Pod{}, 0, t0, false, false},
		{"not ready", pod(corev1.ConditionFalse, t0), 0, t0.Add(time.Hour), false, false},
		{"ready, no minReady", pod(corev1.ConditionTrue, t0), 0, t0, true, true},
		{"ready for exactly minReady", pod(corev1.ConditionTrue, t0), 10 * time.Second, t0.Add(10 * time.Second), true, false},
		{"ready for more than minReady", pod(corev1.ConditionTrue, t0), 10 * time.Second, t0.Add(11 * time.Second), true, true},
		{"ready since unknown, with minReady", pod(corev1.ConditionTrue, time.Time{}), time.Second, t0, true, false},
		{"ready since unknown, no minReady", pod(corev1.ConditionTrue, time.Time{}), 0, t0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Ready(tc.pod); got != tc.ready {
				t.Errorf("Ready = %v, want %v", got, tc.ready)
			}
			if got := Available(tc.pod, tc.minReady, tc.now); got != tc.available {
				t.Errorf("Available = %v, want %v", got, tc.available)
			}
		})
	}
	if got := ReadySince(pod(corev1.ConditionFalse, t0)); !got.IsZero() {
		t.Errorf("ReadySince of a pod not Ready = %v, want zero", got)
	}
	if got := ReadySince(pod(corev1.ConditionTrue, t0)); !got.Equal(t0) {
		t.Errorf("ReadySince = %v, want %v", got, t0)
	}
}
