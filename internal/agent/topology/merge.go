package topology

import (
	"slices"

	"knode/internal/agent/host"
)

// Distances are NUMA distances (the kernel's SLIT values): Distances[a][b]
// is the distance from node a to node b, 10 from a node to itself. A
// missing entry counts as 0.
type Distances map[int]map[int]int

// DistancesOf returns the distances of t's NUMA nodes.
func DistancesOf(t host.Topology) Distances {
	d := make(Distances, len(t.NUMANodes))
	for _, n := range t.NUMANodes {
		d[n.ID] = n.Distances
	}
	return d
}

// NodeIDsOf returns the IDs of t's NUMA nodes, in t's order.
func NodeIDsOf(t host.Topology) []int {
	ids := make([]int, 0, len(t.NUMANodes))
	for _, n := range t.NUMANodes {
		ids = append(ids, n.ID)
	}
	return ids
}

// Merge returns the best hint over every provider's hints, as upstream's
// HintMerger does for the best-effort and restricted policies:
//
//  1. Normalise: a provider with no hints at all stands for one resource
//     with hints [{any, preferred}]; a resource with a nil list becomes
//     [{any, preferred}]; a resource with an empty list becomes
//     [{any, not preferred}].
//  2. For every way of picking one hint per resource, AND the non-nil
//     affinities together, starting from all of numaNodes. The result is
//     preferred only if every picked hint is preferred and all non-nil
//     picked affinities are equal. Empty results are dropped.
//  3. Keep the best result: preferred beats not preferred; of two preferred
//     results the narrower wins (see IsNarrowerThan), or, with
//     opts.PreferClosestNUMA and equal widths, the one with the smaller
//     average distance (then the lower-numbered one); of two non-preferred
//     results, the one whose width is closest to the best non-preferred
//     width (the widest of each resource's narrowest hint) without
//     exceeding it wins, falling back to the narrower one.
//  4. With no result at all, return {all of numaNodes, not preferred}.
//
// The returned Affinity is never nil. numaNodes IDs must be 0 to 63 (others
// are ignored); opts.MaxAllowableNUMANodes is not used here.
func Merge(providersHints []map[string][]Hint, numaNodes []int, opts Options, distances Distances) Hint {
	return mergeFiltered(normalise(providersHints), maskOf(numaNodes), opts.PreferClosestNUMA, distances)
}

// maskOf is NewMask ignoring out-of-range IDs; callers validate IDs first.
func maskOf(ids []int) Mask {
	var m Mask
	for _, id := range ids {
		if id >= 0 && id < MaxNUMANodes {
			m |= 1 << uint(id)
		}
	}
	return m
}

// normalise flattens the providers' maps into one hint list per (provider,
// resource), applying the nil and empty list rules. Resources are taken in
// name order; the result of the merge does not depend on that order.
func normalise(providersHints []map[string][]Hint) [][]Hint {
	var all [][]Hint
	for _, hints := range providersHints {
		if len(hints) == 0 {
			all = append(all, []Hint{{Preferred: true}})
			continue
		}
		names := make([]string, 0, len(hints))
		for name := range hints {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			switch list := hints[name]; {
			case list == nil:
				all = append(all, []Hint{{Preferred: true}})
			case len(list) == 0:
				all = append(all, []Hint{{Preferred: false}})
			default:
				all = append(all, list)
			}
		}
	}
	return all
}

// merger holds what the comparison of two candidates needs.
type merger struct {
	// bestNonPreferredCount is the widest of each resource's narrowest
	// non-nil hint: the width a non-preferred result aims for.
	bestNonPreferredCount int
	preferClosest         bool
	distances             Distances
}

// mergeFiltered merges normalised hint lists; see Merge.
func mergeFiltered(lists [][]Hint, all Mask, preferClosest bool, distances Distances) Hint {
	m := merger{
		bestNonPreferredCount: maxOfNarrowestCounts(lists),
		preferClosest:         preferClosest,
		distances:             distances,
	}
	var best *Hint
	perm := make([]Hint, len(lists))
	var walk func(i int)
	walk = func(i int) {
		if i == len(lists) {
			candidate := mergePermutation(all, perm)
			best = m.better(best, &candidate)
			return
		}
		for _, h := range lists[i] {
			perm[i] = h
			walk(i + 1)
		}
	}
	walk(0)
	if best == nil {
		return NewHint(all, false)
	}
	return *best
}

// mergePermutation ANDs one picked hint per resource into one hint.
func mergePermutation(all Mask, perm []Hint) Hint {
	merged := all
	preferred := true
	var first *Mask
	for _, h := range perm {
		if h.Affinity != nil {
			if first == nil {
				first = h.Affinity
			} else if *h.Affinity != *first {
				preferred = false
			}
			merged &= *h.Affinity
		}
		if !h.Preferred {
			preferred = false
		}
	}
	return NewHint(merged, preferred)
}

// maxOfNarrowestCounts is the largest, over lists, of the width of the
// list's narrowest non-nil hint (preferred or not); 0 if none has one.
func maxOfNarrowestCounts(lists [][]Hint) int {
	most := 0
	for _, list := range lists {
		var narrowest *Mask
		for _, h := range list {
			if h.Affinity == nil {
				continue
			}
			if narrowest == nil || h.Affinity.IsNarrowerThan(*narrowest) {
				narrowest = h.Affinity
			}
		}
		if narrowest != nil && narrowest.Count() > most {
			most = narrowest.Count()
		}
	}
	return most
}

// better returns whichever of current (nil before the first candidate) and
// candidate should be kept.
func (m merger) better(current, candidate *Hint) *Hint {
	if candidate.Affinity.Count() == 0 {
		return current
	}
	if current == nil {
		return candidate
	}
	if current.Preferred != candidate.Preferred {
		if candidate.Preferred {
			return candidate
		}
		return current
	}
	if current.Preferred {
		return m.fitter(current, candidate)
	}

	// Both not preferred: aim for bestNonPreferredCount nodes, never
	// overshooting it once at or below it.
	target := m.bestNonPreferredCount
	cur, cand := current.Affinity.Count(), candidate.Affinity.Count()
	switch {
	case cur > target:
		return m.fitter(current, candidate)
	case cur == target:
		if cand != target {
			return current
		}
		return m.fitter(current, candidate)
	case cand > target:
		return current
	case cand == target:
		return candidate
	case cand > cur:
		return candidate
	case cand < cur:
		return current
	default:
		return m.fitter(current, candidate)
	}
}

// fitter picks between two hints by affinity alone: equal masks keep
// current; otherwise the narrower mask, or with prefer-closest the closer.
func (m merger) fitter(current, candidate *Hint) *Hint {
	a, b := *current.Affinity, *candidate.Affinity
	if a == b {
		return current
	}
	var best Mask
	if m.preferClosest {
		best = m.closest(a, b)
	} else {
		best = narrowest(a, b)
	}
	if best == a {
		return current
	}
	return candidate
}

func narrowest(a, b Mask) Mask {
	if a.IsNarrowerThan(b) {
		return a
	}
	return b
}

// closest is narrowest for masks of different widths; for equal widths the
// smaller average distance over all ordered node pairs (each node with
// itself included), then the lesser mask.
func (m merger) closest(a, b Mask) Mask {
	if a.Count() != b.Count() {
		return narrowest(a, b)
	}
	// Equal widths mean equal pair counts, so comparing sums compares the
	// averages exactly.
	da, db := m.distanceSum(a), m.distanceSum(b)
	if da == db {
		if a.IsLessThan(b) {
			return a
		}
		return b
	}
	if da < db {
		return a
	}
	return b
}

func (m merger) distanceSum(mask Mask) int {
	sum := 0
	ids := mask.Bits()
	for _, x := range ids {
		for _, y := range ids {
			sum += m.distances[x][y]
		}
	}
	return sum
}

// AverageDistance is the mean distance over all ordered pairs of nodes in
// mask, each node paired with itself included; 0 for the empty mask.
func AverageDistance(d Distances, mask Mask) float64 {
	if mask.Count() == 0 {
		return 0
	}
	n := mask.Count()
	return float64(merger{distances: d}.distanceSum(mask)) / float64(n*n)
}
