package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPolicies(t *testing.T) {
	two := []int{0, 1}
	for _, tc := range []struct {
		name      string
		policy    string
		nodes     []int
		hints     []map[string][]Hint
		want      Hint
		wantAdmit bool
	}{
		{name: "none: no hint, admit", policy: PolicyNone, nodes: two,
			hints: []map[string][]Hint{{"cpu": {}}}, want: Hint{}, wantAdmit: true},
		{name: "best-effort: non-preferred still admitted", policy: PolicyBestEffort, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0)}}, {"dev": {h(true, 1)}}}, want: h(false, 0, 1), wantAdmit: true},
		{name: "best-effort: preferred", policy: PolicyBestEffort, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 1)}}}, want: h(true, 1), wantAdmit: true},
		{name: "restricted: preferred admitted", policy: PolicyRestricted, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0, 1)}}}, want: h(true, 0, 1), wantAdmit: true},
		{name: "restricted: non-preferred rejected", policy: PolicyRestricted, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(false, 0)}}}, want: h(false, 0), wantAdmit: false},
		{name: "restricted: cannot satisfy rejected", policy: PolicyRestricted, nodes: two,
			hints: []map[string][]Hint{{"cpu": {}}}, want: h(false, 0, 1), wantAdmit: false},
		{name: "single-numa-node: one node admitted", policy: PolicySingleNUMANode, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0, 1), h(true, 1)}}, {"dev": {h(true, 1)}}}, want: h(true, 1), wantAdmit: true},
		{name: "single-numa-node: only a two-node placement is rejected", policy: PolicySingleNUMANode, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0, 1)}}}, want: Hint{}, wantAdmit: false},
		{name: "single-numa-node: disjoint nodes rejected", policy: PolicySingleNUMANode, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(true, 0)}}, {"dev": {h(true, 1)}}}, want: Hint{}, wantAdmit: false},
		{name: "single-numa-node: non-preferred single node rejected", policy: PolicySingleNUMANode, nodes: two,
			hints: []map[string][]Hint{{"cpu": {h(false, 0)}}}, want: Hint{}, wantAdmit: false},
		{name: "single-numa-node: no preference is any, admitted", policy: PolicySingleNUMANode, nodes: two,
			hints: []map[string][]Hint{{"cpu": nil}}, want: Hint{Preferred: true}, wantAdmit: true},
		{name: "single-numa-node: one-node machine gives any", policy: PolicySingleNUMANode, nodes: []int{0},
			hints: []map[string][]Hint{{"cpu": {h(true, 0)}}}, want: Hint{Preferred: true}, wantAdmit: true},
		{name: "single-numa-node: ignores prefer-closest distances", policy: PolicySingleNUMANode, nodes: []int{0, 1, 2, 3},
			hints: []map[string][]Hint{{"cpu": {h(true, 3), h(true, 2)}}}, want: h(true, 2), wantAdmit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPolicy(tc.policy, tc.nodes, Options{PreferClosestNUMA: true}, DistancesOf(fourNodes()))
			if err != nil {
				t.Fatal(err)
			}
			if p.Name() != tc.policy {
				t.Errorf("Name() = %q", p.Name())
			}
			got, admit := p.Merge(tc.hints)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hint (-want +got):\n%s", diff)
			}
			if admit != tc.wantAdmit {
				t.Errorf("admit = %v, want %v", admit, tc.wantAdmit)
			}
		})
	}
	if _, err := NewPolicy("strict", nil, Options{}, nil); err == nil || err.Error() != `unknown policy: "strict"` {
		t.Errorf("unknown policy error = %v", err)
	}
}
