package shutdown

import (
	"errors"
	"fmt"
	"slices"
	"time"

	kubeletconfig "k8s.io/kubelet/config/v1beta1"
)

// SystemCriticalPriority is the priority of system-cluster-critical pods
// (2000000000): the boundary of the critical group that the two durations
// migrate into.
const SystemCriticalPriority int32 = 2000000000

// Settings are the KubeletConfiguration's shutdown fields.
type Settings struct {
	// GracePeriod is shutdownGracePeriod: the whole delay the node asks
	// for. CriticalPods is shutdownGracePeriodCriticalPods: the part of it
	// kept for critical pods. Both zero (the default) turn the feature off.
	GracePeriod  time.Duration
	CriticalPods time.Duration
	// ByPriority is shutdownGracePeriodByPodPriority. It cannot be combined
	// with the two durations.
	ByPriority []kubeletconfig.ShutdownGracePeriodByPodPriority
}

// Group is one priority group: the pods whose priority is at least Priority
// and below the next group's get Period to stop, in total.
type Group struct {
	Priority int32
	Period   time.Duration
}

// Validate applies the kubelet's rules to the shutdown fields, plus two of
// knode's own for the priority list (no negative periods, no priority
// twice). Each error names the field and the rule.
func (s Settings) Validate() error {
	var errs []error
	if s.CriticalPods > s.GracePeriod {
		errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodCriticalPods %v must be <= shutdownGracePeriod %v", s.CriticalPods, s.GracePeriod))
	}
	if s.GracePeriod < 0 || (s.GracePeriod > 0 && s.GracePeriod < time.Second) {
		errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriod %v must be either zero or otherwise >= 1 sec", s.GracePeriod))
	}
	if s.CriticalPods < 0 || (s.CriticalPods > 0 && s.CriticalPods < time.Second) {
		errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodCriticalPods %v must be either zero or otherwise >= 1 sec", s.CriticalPods))
	}
	if len(s.ByPriority) != 0 && (s.GracePeriod > 0 || s.CriticalPods > 0) {
		errs = append(errs, errors.New("invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"))
	}
	seen := map[int32]int{}
	for i, p := range s.ByPriority {
		if p.ShutdownGracePeriodSeconds < 0 {
			errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodByPodPriority[%d].shutdownGracePeriodSeconds %d must not be negative", i, p.ShutdownGracePeriodSeconds))
		}
		if p.ShutdownGracePeriodSeconds > maxPeriodSeconds {
			errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodByPodPriority[%d].shutdownGracePeriodSeconds %d must be at most %d", i, p.ShutdownGracePeriodSeconds, maxPeriodSeconds))
		}
		if j, dup := seen[p.Priority]; dup {
			errs = append(errs, fmt.Errorf("invalid configuration: shutdownGracePeriodByPodPriority[%d].priority %d repeats shutdownGracePeriodByPodPriority[%d]: each priority may appear once", i, p.Priority, j))
			continue
		}
		seen[p.Priority] = i
	}
	return errors.Join(errs...)
}

// maxPeriodSeconds bounds one group's period (a year), so that the sum of
// every group stays a valid time.Duration.
const maxPeriodSeconds = 365 * 24 * 3600

// Groups is the priority groups s asks for, lowest priority first; nil
// means graceful shutdown is off. The priority list is taken as it is;
// without one, the two durations become two groups, as upstream migrates
// them: priority 0 gets GracePeriod minus CriticalPods, and
// SystemCriticalPriority gets CriticalPods. A GracePeriod of zero, or a
// CriticalPods larger than it, gives nil. Call Validate first.
func (s Settings) Groups() []Group {
	var groups []Group
	if len(s.ByPriority) > 0 {
		for _, p := range s.ByPriority {
			groups = append(groups, Group{Priority: p.Priority, Period: time.Duration(p.ShutdownGracePeriodSeconds) * time.Second})
		}
	} else {
		if s.GracePeriod <= 0 {
			return nil
		}
		regular := s.GracePeriod - s.CriticalPods
		if regular < 0 {
			return nil
		}
		groups = []Group{
			{Priority: 0, Period: regular},
			{Priority: SystemCriticalPriority, Period: s.GracePeriod - regular},
		}
	}
	slices.SortStableFunc(groups, func(a, b Group) int {
		switch {
		case a.Priority < b.Priority:
			return -1
		case a.Priority > b.Priority:
			return 1
		}
		return 0
	})
	return groups
}

// Total is the sum of the groups' periods: the delay they need.
func Total(groups []Group) time.Duration {
	var sum time.Duration
	for _, g := range groups {
		sum += g.Period
	}
	return sum
}
