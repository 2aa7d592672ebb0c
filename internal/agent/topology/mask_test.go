package topology

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustMask(t testing.TB, ids ...int) Mask {
	t.Helper()
	m, err := NewMask(ids...)
	if err != nil {
		t.Fatalf("NewMask(%v): %v", ids, err)
	}
	return m
}

func TestNewMask(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ids     []int
		want    Mask
		wantErr bool
	}{
		{name: "empty", want: 0},
		{name: "node 0", ids: []int{0}, want: 1},
		{name: "nodes 1 and 3", ids: []int{1, 3}, want: 0b1010},
		{name: "duplicates", ids: []int{2, 2}, want: 0b100},
		{name: "node 63", ids: []int{63}, want: 1 << 63},
		{name: "node 64 is out of range", ids: []int{64}, wantErr: true},
		{name: "negative", ids: []int{-1}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewMask(tc.ids...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if err.Error() != "bit number must be in range 0-63" {
					t.Errorf("message %q", err)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %b, want %b", got, tc.want)
			}
		})
	}
}

func TestMaskOperations(t *testing.T) {
	m01, m0, m1, m2, m012 := mustMask(t, 0, 1), mustMask(t, 0), mustMask(t, 1), mustMask(t, 2), mustMask(t, 0, 1, 2)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"and", m012.And(m01, mustMask(t, 1, 2)), m1},
		{"and nothing", m01.And(), m01},
		{"count", m012.Count(), 3},
		{"count empty", Mask(0).Count(), 0},
		{"equal", m01.IsEqual(mustMask(t, 1, 0)), true},
		{"not equal", m01.IsEqual(m0), false},
		{"subset", m0.IsSubsetOf(m01), true},
		{"empty is subset", Mask(0).IsSubsetOf(m0), true},
		{"not subset", m2.IsSubsetOf(m01), false},
		{"is set", m01.IsSet(1), true},
		{"not set", m01.IsSet(2), false},
		{"out of range not set", m01.IsSet(64), false},
		{"bits", m012.Bits(), []int{0, 1, 2}},
		{"bits empty", Mask(0).Bits(), []int(nil)},
		{"narrower by count", m2.IsNarrowerThan(m01), true},
		{"wider by count", m01.IsNarrowerThan(m2), false},
		{"tie: lower node wins", m0.IsNarrowerThan(m1), true},
		{"tie: higher node loses", m1.IsNarrowerThan(m0), false},
		{"tie: 0,2 before 1,2", mustMask(t, 0, 2).IsNarrowerThan(mustMask(t, 1, 2)), true},
		{"tie: 0,3 after 1,2", mustMask(t, 0, 3).IsNarrowerThan(mustMask(t, 1, 2)), false},
		{"equal is not narrower", m01.IsNarrowerThan(m01), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestMaskString(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want string
	}{
		{nil, "00"},
		{[]int{0}, "01"},
		{[]int{1}, "10"},
		{[]int{0, 1}, "11"},
		// Upstream pads only above a power of four: 4 prints as "100".
		{[]int{2}, "100"},
		{[]int{0, 2}, "0101"},
		{[]int{3}, "1000"},
		{[]int{4}, "10000"},
		{[]int{0, 4}, "010001"},
	} {
		if got := mustMask(t, tc.ids...).String(); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.ids, got, tc.want)
		}
	}
}
