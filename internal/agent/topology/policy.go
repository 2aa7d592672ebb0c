package topology

import "fmt"

// Policy decides, from the providers' hints for one container (or pod), the
// affinity to use and whether the pod may be admitted.
type Policy interface {
	// Name is the policy's configuration name, e.g. "best-effort".
	Name() string
	// Merge returns the chosen hint and whether to admit. It does not keep
	// the hints it is given.
	Merge(providersHints []map[string][]Hint) (hint Hint, admit bool)
}

// NewPolicy returns the named policy for a machine with NUMA nodes
// numaNodes (IDs 0 to 63) and the given distances (only read with
// opts.PreferClosestNUMA). An unknown name is an error.
func NewPolicy(name string, numaNodes []int, opts Options, distances Distances) (Policy, error) {
	base := mergingPolicy{all: maskOf(numaNodes), opts: opts, distances: distances}
	switch name {
	case PolicyNone:
		return nonePolicy{}, nil
	case PolicyBestEffort:
		return bestEffortPolicy{base}, nil
	case PolicyRestricted:
		return restrictedPolicy{base}, nil
	case PolicySingleNUMANode:
		return singleNUMANodePolicy{base}, nil
	}
	return nil, fmt.Errorf("unknown policy: %q", name)
}

// mergingPolicy is what the three merging policies share.
type mergingPolicy struct {
	all       Mask
	opts      Options
	distances Distances
}

func (p mergingPolicy) merge(providersHints []map[string][]Hint) Hint {
	return mergeFiltered(normalise(providersHints), p.all, p.opts.PreferClosestNUMA, p.distances)
}

// nonePolicy computes nothing and admits everything.
type nonePolicy struct{}

func (nonePolicy) Name() string { return PolicyNone }

func (nonePolicy) Merge([]map[string][]Hint) (Hint, bool) { return Hint{}, true }

// bestEffortPolicy keeps the best hint and always admits.
type bestEffortPolicy struct{ mergingPolicy }

func (bestEffortPolicy) Name() string { return PolicyBestEffort }

func (p bestEffortPolicy) Merge(providersHints []map[string][]Hint) (Hint, bool) {
	return p.merge(providersHints), true
}

// restrictedPolicy admits only when the best hint is preferred.
type restrictedPolicy struct{ mergingPolicy }

func (restrictedPolicy) Name() string { return PolicyRestricted }

func (p restrictedPolicy) Merge(providersHints []map[string][]Hint) (Hint, bool) {
	h := p.merge(providersHints)
	return h, h.Preferred
}

// singleNUMANodePolicy admits only a preferred placement on one NUMA node
// (or one with no NUMA preference at all).
type singleNUMANodePolicy struct{ mergingPolicy }

func (singleNUMANodePolicy) Name() string { return PolicySingleNUMANode }

// Merge keeps, for every resource, only its preferred hints that are "any"
// or a single node, merges those (always narrowest-first: the
// prefer-closest option does not apply), turns an all-nodes result into
// "any" (nil), and admits iff the result is preferred.
func (p singleNUMANodePolicy) Merge(providersHints []map[string][]Hint) (Hint, bool) {
	lists := normalise(providersHints)
	single := make([][]Hint, len(lists))
	for i, list := range lists {
		var kept []Hint
		for _, h := range list {
			if h.Preferred && (h.Affinity == nil || h.Affinity.Count() == 1) {
				kept = append(kept, h)
			}
		}
		single[i] = kept
	}
	h := mergeFiltered(single, p.all, false, p.distances)
	if *h.Affinity == p.all {
		h.Affinity = nil
	}
	return h, h.Preferred
}
