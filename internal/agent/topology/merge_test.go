package topology

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/host"
)

// h builds a hint on the given nodes; any builds a hint with no affinity.
func h(preferred bool, ids ...int) Hint {
	m, err := NewMask(ids...)
	if err != nil {
		panic(err)
	}
	return NewHint(m, preferred)
}

func anyHint(preferred bool) Hint { return Hint{Preferred: preferred} }

// fourNodes is a fixture machine: two sockets of two NUMA nodes each, 16
// within a socket, 32 across (an AMD-like 10/16/32 matrix).
func fourNodes() host.Topology {
	row := func(d ...int) map[int]int { return map[int]int{0: d[0], 1: d[1], 2: d[2], 3: d[3]} }
	return host.Topology{NUMANodes: []host.NUMANode{
		{ID: 0, Distances: row(10, 16, 32, 32)},
		{ID: 1, Distances: row(16, 10, 32, 32)},
		{ID: 2, Distances: row(32, 32, 10, 16)},
		{ID: 3, Distances: row(32, 32, 16, 10)},
	}}
}

func TestMerge(t *testing.T) {
	two := []int{0, 1}
	four := []int{0, 1, 2, 3}
	fixture := DistancesOf(fourNodes())
	for _, tc := range []struct {
		name    string
		nodes   []int
		closest bool
		hints   []map[string][]Hint
		want    Hint
	}{
		{name: "no providers: any, preferred", nodes: two, want: h(true, 0, 1)},
		{name: "provider with nil map: no preference", nodes: two,
			hints: []map[string][]Hint{nil}, want: h(true, 0, 1)},
		{name: "resource with nil list: no preference", nodes: two,
			hints: []map[string][]Hint{{"cpu": nil}}, want: h(true, 0, 1)},
		{name: "resource with empty list: cannot satisfy", nodes: two,
			hints: []map[string][]Hint{{"cpu": {}}}, want: h(false, 0, 1)},
		{name: "single any preferred hint", nodes: two,
			hints: []map[string][]Hint{{"cpu": {anyHint(true)}}}, want: h(true, 0, 1)},
		{name: "single any non-preferred hint", nodes: two,
			hints: []map[string][]Hint{{"cpu": {anyHint(false)}}}, want: h(false, 0, 1)},
		{name: "two providers agree on node 0", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0)}}, {"dev": {h(true, 0)}}}, want: h(true, 0)},
		{name: "two providers agree on node 1", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 1)}}, {"dev": {h(true, 1)}}}, want: h(true, 1)},
		{name: "no overlap: default, not preferred", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0)}}, {"dev": {h(true, 1)}}}, want: h(false, 0, 1)},
		{name: "both nodes offered by both: lower node wins", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 1), h(true, 0)}}, {"dev": {h(true, 0), h(true, 1)}}}, want: h(true, 0)},
		{name: "both want both nodes", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0, 1)}}, {"dev": {h(true, 0, 1)}}}, want: h(true, 0, 1)},
		{name: "narrow and wide preferred masks merge to non-preferred", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0)}}, {"dev": {h(true, 0, 1)}}}, want: h(false, 0)},
		{name: "any combines with a mask and stays preferred", nodes: two,
			hints: []map[string][]Hint{{"cpu": {anyHint(true)}, "dev": {h(true, 1)}}}, want: h(true, 1)},
		{name: "two resources of one provider", nodes: two,
			hints: []map[string][]Hint{{"a": {h(true, 0), h(true, 1)}, "b": {h(true, 1)}}}, want: h(true, 1)},
		{name: "preferred beats narrower non-preferred", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(false, 0), h(true, 0, 1)}}}, want: h(true, 0, 1)},
		{name: "non-preferred climbs to the best non-preferred width", nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0), h(false, 0, 1)}}, {"dev": {h(true, 0, 1)}}},
			want:  h(false, 0, 1)},
		{name: "non-preferred reaches the best width", nodes: four,
			// target width 2 (dev's narrowest); 0 (1) and 0-1 (2): 0-1
			hints: []map[string][]Hint{{"cpu": {h(false, 0), h(false, 0, 1, 2)}}, {"dev": {h(false, 0, 1)}}},
			want:  h(false, 0, 1)},
		{name: "non-preferred never overshoots the best width", nodes: four,
			// target width 2; candidates 1, 0 (below) and 0-2-3 (above)
			hints: []map[string][]Hint{{"cpu": {h(false, 0, 1), h(false, 0, 1, 2, 3)}}, {"dev": {h(false, 1), h(false, 0, 2, 3)}}},
			want:  h(false, 0)},
		{name: "non-preferred above the best width narrows", nodes: four,
			hints: []map[string][]Hint{{"cpu": {h(false, 0, 1, 2, 3), h(false, 1, 2), h(false, 1)}}},
			want:  h(false, 1)},
		{name: "exact best width beats narrower", nodes: four,
			// target 3 (dev); 0-1-2 (3) beats 0-1 (2)
			hints: []map[string][]Hint{{"cpu": {h(false, 0, 1, 2, 3), h(false, 0, 1)}}, {"dev": {h(false, 0, 1, 2)}}},
			want:  h(false, 0, 1, 2)},
		{name: "empty non-nil mask is never chosen", nodes: two,
			hints: []map[string][]Hint{{"cpu": {NewHint(0, true), h(false, 1)}}}, want: h(false, 1)},
		{name: "equal widths: lower set by default", nodes: four,
			hints: []map[string][]Hint{{"cpu": {h(true, 2, 3), h(true, 0, 2)}}}, want: h(true, 0, 2)},
		{name: "equal widths: closer set with prefer-closest", nodes: four, closest: true,
			hints: []map[string][]Hint{{"cpu": {h(true, 0, 2), h(true, 2, 3)}}}, want: h(true, 2, 3)},
		{name: "prefer-closest still prefers narrower", nodes: four, closest: true,
			hints: []map[string][]Hint{{"cpu": {h(true, 0, 1), h(true, 3)}}}, want: h(true, 3)},
		{name: "prefer-closest equal distances: lower set", nodes: four, closest: true,
			hints: []map[string][]Hint{{"cpu": {h(true, 2, 3), h(true, 0, 1)}}}, want: h(true, 0, 1)},
		{name: "prefer-closest among non-preferred", nodes: four, closest: true,
			hints: []map[string][]Hint{{"cpu": {h(false, 0, 2), h(false, 2, 3)}}}, want: h(false, 2, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Merge(tc.hints, tc.nodes, Options{PreferClosestNUMA: tc.closest}, fixture)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAverageDistance(t *testing.T) {
	d := DistancesOf(fourNodes())
	for _, tc := range []struct {
		ids  []int
		want float64
	}{
		{nil, 0},
		{[]int{0}, 10},
		{[]int{0, 1}, 13},
		{[]int{0, 2}, 21},
		{[]int{0, 1, 2, 3}, (4*10 + 4*16 + 8*32) / 16.0},
	} {
		if got := AverageDistance(d, mustMask(t, tc.ids...)); got != tc.want {
			t.Errorf("%v: got %v, want %v", tc.ids, got, tc.want)
		}
	}
}

// modelMerge is an independent brute-force statement of the documented
// rules: list every candidate, then pick the minimum under one explicit
// ranking.
func modelMerge(providers []map[string][]Hint, nodes []int, closest bool, d Distances, singleNUMA bool) Hint {
	var all Mask
	for _, n := range nodes {
		all |= 1 << uint(n)
	}
	var lists [][]Hint
	for _, p := range providers {
		if len(p) == 0 {
			lists = append(lists, []Hint{{Preferred: true}})
			continue
		}
		for _, l := range p {
			switch {
			case l == nil:
				lists = append(lists, []Hint{{Preferred: true}})
			case len(l) == 0:
				lists = append(lists, []Hint{{}})
			default:
				lists = append(lists, l)
			}
		}
	}
	if singleNUMA {
		for i, l := range lists {
			var kept []Hint
			for _, x := range l {
				if x.Preferred && (x.Affinity == nil || x.Affinity.Count() == 1) {
					kept = append(kept, x)
				}
			}
			lists[i] = kept
		}
	}
	// best non-preferred width: max over lists of the smallest non-nil width
	target := 0
	for _, l := range lists {
		smallest := -1
		for _, x := range l {
			if x.Affinity != nil && (smallest < 0 || x.Affinity.Count() < smallest) {
				smallest = x.Affinity.Count()
			}
		}
		if smallest > target {
			target = smallest
		}
	}
	// odometer over the cross product
	var cands []Hint
	idx := make([]int, len(lists))
	for {
		ok := true
		for i := range lists {
			if len(lists[i]) == 0 {
				ok = false
			}
		}
		if !ok {
			break
		}
		merged, pref := all, true
		var masks []Mask
		for i, j := range idx {
			x := lists[i][j]
			if !x.Preferred {
				pref = false
			}
			if x.Affinity != nil {
				masks = append(masks, *x.Affinity)
				merged &= *x.Affinity
			}
		}
		for _, m := range masks {
			if m != masks[0] {
				pref = false
			}
		}
		if merged != 0 {
			cands = append(cands, NewHint(merged, pref))
		}
		k := len(idx) - 1
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < len(lists[k]) {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			break
		}
	}
	avg := func(m Mask) float64 {
		var sum, n float64
		for a := 0; a < 64; a++ {
			for b := 0; b < 64; b++ {
				if m&(1<<uint(a)) != 0 && m&(1<<uint(b)) != 0 {
					sum += float64(d[a][b])
					n++
				}
			}
		}
		return sum / n
	}
	// key: preferred first; non-preferred by class (exactly target, below
	// target widest first, above target narrowest first); then width; then
	// average distance (prefer-closest, not single-numa-node); then value.
	type key struct {
		notPreferred, class, width int
		dist                       float64
		value                      uint64
	}
	keyOf := func(c Hint) key {
		m := *c.Affinity
		k := key{width: m.Count(), value: uint64(m)}
		if closest && !singleNUMA {
			k.dist = avg(m)
		}
		if !c.Preferred {
			k.notPreferred = 1
			switch w := m.Count(); {
			case w == target:
				k.class = 0
			case w < target:
				k.class, k.width = 1, -w
			default:
				k.class = 2
			}
		}
		return k
	}
	less := func(a, b key) bool {
		if a.notPreferred != b.notPreferred {
			return a.notPreferred < b.notPreferred
		}
		if a.class != b.class {
			return a.class < b.class
		}
		if a.width != b.width {
			return a.width < b.width
		}
		if a.dist != b.dist {
			return a.dist < b.dist
		}
		return a.value < b.value
	}
	if len(cands) == 0 {
		res := NewHint(all, false)
		if singleNUMA {
			res.Affinity = nil
		}
		return res
	}
	sort.SliceStable(cands, func(i, j int) bool { return less(keyOf(cands[i]), keyOf(cands[j])) })
	best := cands[0]
	if singleNUMA && *best.Affinity == all {
		best.Affinity = nil
	}
	return best
}

func randomHints(r *rand.Rand) []map[string][]Hint {
	providers := make([]map[string][]Hint, 1+r.IntN(3))
	for i := range providers {
		if r.IntN(10) == 0 {
			continue // nil map
		}
		p := map[string][]Hint{}
		for j := 0; j < 1+r.IntN(2); j++ {
			name := fmt.Sprintf("res%d", j)
			switch r.IntN(10) {
			case 0:
				p[name] = nil
				continue
			case 1:
				p[name] = []Hint{}
				continue
			}
			var list []Hint
			for k := 0; k < 1+r.IntN(4); k++ {
				pref := r.IntN(2) == 0
				switch r.IntN(20) {
				case 0, 1, 2:
					list = append(list, anyHint(pref))
				case 3:
					list = append(list, NewHint(0, pref))
				default:
					list = append(list, NewHint(Mask(1+r.IntN(15)), pref))
				}
			}
			p[name] = list
		}
		providers[i] = p
	}
	return providers
}

func randomDistances(r *rand.Rand) Distances {
	values := []int{11, 12, 16, 20, 21, 32}
	d := Distances{}
	for a := 0; a < 4; a++ {
		d[a] = map[int]int{a: 10}
	}
	for a := 0; a < 4; a++ {
		for b := a + 1; b < 4; b++ {
			v := values[r.IntN(len(values))]
			d[a][b], d[b][a] = v, v
		}
	}
	return d
}

// TestMergeModel compares Merge and the single-numa-node policy with the
// brute-force model on random hint sets over a 4-node machine.
func TestMergeModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 33))
	nodes := []int{0, 1, 2, 3}
	for i := 0; i < 5000; i++ {
		hints := randomHints(r)
		d := DistancesOf(fourNodes())
		if i%2 == 1 {
			d = randomDistances(r)
		}
		for _, closest := range []bool{false, true} {
			opts := Options{PreferClosestNUMA: closest, MaxAllowableNUMANodes: 8}
			want := modelMerge(hints, nodes, closest, d, false)
			if got := Merge(hints, nodes, opts, d); !got.IsEqual(want) {
				t.Fatalf("case %d closest=%v hints=%v distances=%v: Merge = %v, model = %v", i, closest, hints, d, got, want)
			}
			p, err := NewPolicy(PolicySingleNUMANode, nodes, opts, d)
			if err != nil {
				t.Fatal(err)
			}
			wantSingle := modelMerge(hints, nodes, closest, d, true)
			got, admit := p.Merge(hints)
			if !got.IsEqual(wantSingle) || admit != wantSingle.Preferred {
				t.Fatalf("case %d closest=%v hints=%v: single-numa-node = %v admit %v, model = %v", i, closest, hints, got, admit, wantSingle)
			}
		}
	}
}
