package shutdown

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// GroupOf is the index in groups (sorted by priority, lowest first, not
// empty) of the group a pod of the given priority belongs to: the last
// group whose priority is at most the pod's. A pod below every boundary
// belongs to the first group.
func GroupOf(groups []Group, priority int32) int {
	i := 0
	for j, g := range groups {
		if g.Priority > priority {
			break
		}
		i = j
	}
	return i
}

// Priority is a pod's spec.priority, or 0 when unset.
func Priority(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// Grace is how long a pod in a group with the given period gets to stop:
// the period, or the pod's terminationGracePeriodSeconds when that is set
// and shorter. A group never extends a pod's own grace.
func Grace(pod *corev1.Pod, period time.Duration) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		own := time.Duration(max(*s, 0)) * time.Second
		if own < period {
			return own
		}
	}
	return period
}

// Plan is the order in which a shutdown stops pods: the groups that have
// pods, lowest priority first.
type Plan struct {
	Groups []GroupPlan
}

// GroupPlan is one group of a Plan. Period bounds the wait for the whole
// group; each pod's Grace is at most Period.
type GroupPlan struct {
	Priority int32
	Period   time.Duration
	Pods     []PodPlan
}

// PodPlan is one pod and the grace it gets.
type PodPlan struct {
	Pod   *corev1.Pod
	Grace time.Duration
}

// NewPlan sorts pods into groups (sorted by priority, lowest first) and
// leaves out the groups with no pod: their time is not waited. Pods keep
// their order within a group.
func NewPlan(groups []Group, pods []*corev1.Pod) Plan {
	if len(groups) == 0 {
		return Plan{}
	}
	byGroup := make([][]PodPlan, len(groups))
	for _, p := range pods {
		i := GroupOf(groups, Priority(p))
		byGroup[i] = append(byGroup[i], PodPlan{Pod: p, Grace: Grace(p, groups[i].Period)})
	}
	var plan Plan
	for i, g := range groups {
		if len(byGroup[i]) == 0 {
			continue
		}
		plan.Groups = append(plan.Groups, GroupPlan{Priority: g.Priority, Period: g.Period, Pods: byGroup[i]})
	}
	return plan
}

// Cut is a group that Fit shortened.
type Cut struct {
	Priority  int32
	Requested time.Duration
	Granted   time.Duration
}

// Fit shortens groups so that their periods add up to at most budget,
// taking the time from the lowest-priority groups first, so the critical
// groups keep theirs as long as anything else can give. It returns the
// fitted groups (a new slice) and the groups it cut, lowest first. A
// negative budget counts as zero.
func Fit(groups []Group, budget time.Duration) ([]Group, []Cut) {
	fitted := append([]Group(nil), groups...)
	over := Total(groups) - max(budget, 0)
	var cuts []Cut
	for i := range fitted {
		if over <= 0 {
			break
		}
		take := min(over, fitted[i].Period)
		if take == 0 {
			continue
		}
		cuts = append(cuts, Cut{Priority: fitted[i].Priority, Requested: fitted[i].Period, Granted: fitted[i].Period - take})
		fitted[i].Period -= take
		over -= take
	}
	return fitted, cuts
}
