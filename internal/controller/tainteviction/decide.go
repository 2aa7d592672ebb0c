package tainteviction

import (
	"math"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
)

// Forever is what MinTolerationTime returns when the pod tolerates its
// node's NoExecute taints without a time limit.
const Forever time.Duration = -1

// NoExecuteTaints returns the taints whose effect is NoExecute, in order;
// nil when there are none. NoSchedule and PreferNoSchedule taints never
// evict.
func NoExecuteTaints(taints []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			out = append(out, t)
		}
	}
	return out
}

// MatchingTolerations pairs each taint with the first toleration, in the
// pod's order, that tolerates it, and returns those tolerations in taint
// order (one per taint, possibly repeated). ok is false, and used nil,
// when some taint is tolerated by none. No taints gives ok with nothing
// used.
//
// Numeric toleration operators (Lt, Gt) are treated as not tolerating, as
// upstream does while their feature gate is off.
func MatchingTolerations(taints []corev1.Taint, tolerations []corev1.Toleration) (used []corev1.Toleration, ok bool) {
	for i := range taints {
		found := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(logr.Discard(), &taints[i], false) {
				used = append(used, tolerations[j])
				found = true
				break
			}
		}
		if !found {
			return nil, false
		}
	}
	return used, true
}

// MinTolerationTime is how long a pod may stay given the tolerations
// MatchingTolerations used:
//   - none used: 0 (delete now);
//   - any with tolerationSeconds ≤ 0: 0;
//   - none with tolerationSeconds set: Forever;
//   - otherwise the smallest tolerationSeconds, in seconds (capped at the
//     largest time.Duration).
func MinTolerationTime(used []corev1.Toleration) time.Duration {
	if len(used) == 0 {
		return 0
	}
	minSeconds, bounded := int64(math.MaxInt64), false
	for _, t := range used {
		if t.TolerationSeconds == nil {
			continue
		}
		s := *t.TolerationSeconds
		if s <= 0 {
			return 0
		}
		minSeconds, bounded = min(minSeconds, s), true
	}
	if !bounded {
		return Forever
	}
	if minSeconds > int64(math.MaxInt64/time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(minSeconds) * time.Second
}

// Op is what Decide asks the caller to do with a pod's deletion work.
type Op int

const (
	// Keep leaves the pod's work, if any, as it is.
	Keep Op = iota
	// Cancel drops the pod's work, pending or done: the pod may stay.
	Cancel
	// Schedule adds the work in Decision unless the pod already has work,
	// pending or done (a deletion that already ran is not repeated).
	Schedule
	// Reschedule drops whatever work the pod has, then adds the work in
	// Decision.
	Reschedule
)

func (o Op) String() string {
	switch o {
	case Keep:
		return "Keep"
	case Cancel:
		return "Cancel"
	case Schedule:
		return "Schedule"
	case Reschedule:
		return "Reschedule"
	}
	return "Op(?)"
}

// Decision is the verdict for one pod. For Schedule and Reschedule,
// CreatedAt is when the pod's countdown started and FireAt when it is to
// be deleted (FireAt ≤ now means at once). For Keep with pending work they
// repeat that work's times; otherwise they are zero.
type Decision struct {
	Op                Op
	CreatedAt, FireAt time.Time
}

// Decide is the pure core: what to do about a pod given its node's taints
// (of any effect; only NoExecute ones count), the pod's tolerations, the
// deletion pending for it (nil when none is pending, including when one
// already ran), and now. It is upstream's processPodOnNode:
//   - no NoExecute taint, or all tolerated forever: Cancel;
//   - some taint not tolerated: Reschedule at now (delete at once, even if a
//     deletion already ran);
//   - all tolerated for at least min = MinTolerationTime: with nothing
//     pending, Schedule from now to now+min. With pending work that started
//     before now, Keep it: a countdown, once started, is never moved, even
//     when the tolerations change. Pending work that started at now (or
//     later) is replaced by one that keeps its start and fires at now+min.
//
// The countdown therefore starts when the controller first sees the pod
// on the tainted node, not at the taint's timeAdded.
func Decide(taints []corev1.Taint, tolerations []corev1.Toleration, pending *Work, now time.Time) Decision {
	noExecute := NoExecuteTaints(taints)
	if len(noExecute) == 0 {
		return Decision{Op: Cancel}
	}
	used, ok := MatchingTolerations(noExecute, tolerations)
	if !ok {
		return Decision{Op: Reschedule, CreatedAt: now, FireAt: now}
	}
	wait := MinTolerationTime(used)
	if wait == Forever {
		return Decision{Op: Cancel}
	}
	fireAt := now.Add(wait)
	if pending == nil {
		return Decision{Op: Schedule, CreatedAt: now, FireAt: fireAt}
	}
	if pending.CreatedAt.Add(wait).Before(fireAt) {
		return Decision{Op: Keep, CreatedAt: pending.CreatedAt, FireAt: pending.FireAt}
	}
	return Decision{Op: Reschedule, CreatedAt: pending.CreatedAt, FireAt: fireAt}
}
