// Package podstate answers the questions about a pod's readiness that the
// workload controllers (ReplicaSet, DaemonSet, StatefulSet) ask alike:
// whether it is Ready, since when, and whether it counts as available
// under a minReadySeconds, as upstream's podutil does.
//
// Every function is pure and reads only the pod's status.
package podstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ReadyCondition is the pod's Ready condition, nil when it has none.
func ReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// Ready reports whether the pod's Ready condition is True.
func Ready(p *corev1.Pod) bool {
	c := ReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// ReadySince is when a Ready pod became Ready; zero when it is not Ready
// or the time is unknown.
func ReadySince(p *corev1.Pod) time.Time {
	if c := ReadyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// AvailableAt is the time after which a Ready pod counts as available
// (Ready for more than minReady). ok is false when the pod is not Ready,
// or when minReady is set and the Ready time is unknown.
func AvailableAt(p *corev1.Pod, minReady time.Duration) (at time.Time, ok bool) {
	if !Ready(p) {
		return time.Time{}, false
	}
	since := ReadySince(p)
	if minReady == 0 {
		return since, true
	}
	if since.IsZero() {
		return time.Time{}, false
	}
	return since.Add(minReady), true
}

// Available is upstream's IsPodAvailable: Ready, and with a minReady,
// Ready since strictly more than minReady before now.
func Available(p *corev1.Pod, minReady time.Duration, now time.Time) bool {
	at, ok := AvailableAt(p, minReady)
	return ok && (minReady == 0 || at.Before(now))
}
