package cidrset

import (
	"errors"
	"net"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustCIDR(t *testing.T, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNew(t *testing.T) {
	cases := []struct {
		name    string
		cluster string
		mask    int
		size    int
		wantErr error
	}{
		{name: "ipv4 /16 into /24", cluster: "10.0.0.0/16", mask: 24, size: 256},
		{name: "ipv4 node mask equals cluster mask", cluster: "10.0.0.0/24", mask: 24, size: 1},
		{name: "ipv4 /8 into /32 is allowed (no IPv4 limit)", cluster: "10.0.0.0/8", mask: 32, size: 1 << 24},
		{name: "ipv4 host bits in the cluster CIDR are masked", cluster: "10.0.3.7/22", mask: 24, size: 4},
		{name: "ipv4 node mask shorter than cluster mask", cluster: "10.0.0.0/16", mask: 15, wantErr: ErrInvalidMaskSize},
		{name: "ipv4 node mask longer than 32", cluster: "10.0.0.0/16", mask: 33, wantErr: ErrInvalidMaskSize},
		{name: "ipv6 /48 into /64 (16 bits, the limit)", cluster: "2001:db8::/48", mask: 64, size: 1 << 16},
		{name: "ipv6 /47 into /64 (17 bits)", cluster: "2001:db8::/47", mask: 64, wantErr: ErrSubnetTooBig},
		{name: "ipv6 /120 into /128", cluster: "fd00::/120", mask: 128, size: 256},
		{name: "ipv6 node mask longer than 128", cluster: "fd00::/120", mask: 129, wantErr: ErrInvalidMaskSize},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(mustCIDR(t, tc.cluster), tc.mask)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("New error = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if s.Size() != tc.size || s.Used() != 0 {
				t.Errorf("Size, Used = %d, %d; want %d, 0", s.Size(), s.Used(), tc.size)
			}
		})
	}
}

func TestNewRejectsBadCIDR(t *testing.T) {
	if _, err := New(nil, 24); !errors.Is(err, ErrInvalidCIDR) {
		t.Errorf("nil cluster: %v, want ErrInvalidCIDR", err)
	}
	odd := &net.IPNet{IP: net.IPv4(10, 0, 0, 0).To4(), Mask: net.IPMask{255, 0, 255, 0}}
	if _, err := New(odd, 24); !errors.Is(err, ErrInvalidCIDR) {
		t.Errorf("non-canonical mask: %v, want ErrInvalidCIDR", err)
	}
}

// allocateAll allocates until the set is exhausted and returns what it got.
func allocateAll(t *testing.T, s *Set) []string {
	t.Helper()
	var got []string
	for i := 0; i <= s.Size(); i++ {
		c, err := s.AllocateNext()
		if errors.Is(err, ErrNoCIDRsRemaining) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.String())
	}
	t.Fatalf("allocated more than Size() = %d subnets", s.Size())
	return nil
}

func TestAllocateNextOrderAndExhaustion(t *testing.T) {
	cases := []struct {
		name    string
		cluster string
		mask    int
		want    []string
	}{
		{
			name: "ipv4 first to last", cluster: "10.0.0.0/22", mask: 24,
			want: []string{"10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"},
		},
		{name: "ipv4 single subnet", cluster: "192.168.7.0/24", mask: 24, want: []string{"192.168.7.0/24"}},
		{
			name: "ipv4 /31 node subnets of a /30", cluster: "10.9.8.4/30", mask: 31,
			want: []string{"10.9.8.4/31", "10.9.8.6/31"},
		},
		{
			name: "ipv4 /32 at the top of the address space", cluster: "255.255.255.252/30", mask: 32,
			want: []string{"255.255.255.252/32", "255.255.255.253/32", "255.255.255.254/32", "255.255.255.255/32"},
		},
		{
			name: "ipv6 /64 subnets", cluster: "2001:db8:1:ff00::/62", mask: 64,
			want: []string{"2001:db8:1:ff00::/64", "2001:db8:1:ff01::/64", "2001:db8:1:ff02::/64", "2001:db8:1:ff03::/64"},
		},
		{
			name: "ipv6 subnet bits straddle the 64-bit halves", cluster: "fd00::/63", mask: 65,
			want: []string{"fd00::/65", "fd00::8000:0:0:0/65", "fd00:0:0:1::/65", "fd00:0:0:1:8000::/65"},
		},
		{
			name: "ipv6 /128 at the top of the address space", cluster: "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/127", mask: 128,
			want: []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe/128", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(mustCIDR(t, tc.cluster), tc.mask)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, allocateAll(t, s)); diff != "" {
				t.Errorf("allocations (-want +got):\n%s", diff)
			}
			if s.Used() != s.Size() {
				t.Errorf("Used = %d, want %d", s.Used(), s.Size())
			}
			_, err = s.AllocateNext()
			if err == nil || err.Error() != "CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range" {
				t.Errorf("exhausted AllocateNext error = %v", err)
			}
		})
	}
}

func TestIPv6FirstAndLastOf65536(t *testing.T) {
	s, err := New(mustCIDR(t, "2001:db8::/48"), 64)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.AllocateNext()
	if err != nil || first.String() != "2001:db8::/64" {
		t.Fatalf("first = %v, %v", first, err)
	}
	// Take everything but the last subnet, then the last comes next.
	if err := s.Occupy(mustCIDR(t, "2001:db8::/49")); err != nil {
		t.Fatal(err)
	}
	if err := s.Occupy(mustCIDR(t, "2001:db8:0:8000::/50")); err != nil {
		t.Fatal(err)
	}
	if err := s.Occupy(mustCIDR(t, "2001:db8:0:c000::/51")); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Used(), 1<<15+1<<14+1<<13; got != want {
		t.Fatalf("Used = %d, want %d", got, want)
	}
	for s.Used() < s.Size()-1 {
		if _, err := s.AllocateNext(); err != nil {
			t.Fatal(err)
		}
	}
	last, err := s.AllocateNext()
	if err != nil || last.String() != "2001:db8:0:ffff::/64" {
		t.Fatalf("last = %v, %v", last, err)
	}
	if _, err := s.AllocateNext(); !errors.Is(err, ErrNoCIDRsRemaining) {
		t.Fatalf("after the last: %v", err)
	}
}

func TestOccupyAndRelease(t *testing.T) {
	const cluster = "10.0.0.0/22" // subnets 10.0.0.0/24 .. 10.0.3.0/24
	cases := []struct {
		name    string
		cidr    string
		want    []bool // which of the 4 subnets are used after Occupy
		wantErr string
	}{
		{name: "one subnet", cidr: "10.0.2.0/24", want: []bool{false, false, true, false}},
		{name: "smaller than a subnet takes its subnet", cidr: "10.0.1.128/25", want: []bool{false, true, false, false}},
		{name: "a single address", cidr: "10.0.3.255/32", want: []bool{false, false, false, true}},
		{name: "two subnets", cidr: "10.0.2.0/23", want: []bool{false, false, true, true}},
		{name: "the cluster itself", cidr: "10.0.0.0/22", want: []bool{true, true, true, true}},
		{name: "larger than the cluster (partly outside)", cidr: "10.0.0.0/8", want: []bool{true, true, true, true}},
		{name: "outside", cidr: "10.0.4.0/24", wantErr: "cidr 10.0.4.0/24 is out the range of cluster cidr 10.0.0.0/22"},
		{name: "larger but disjoint", cidr: "11.0.0.0/8", wantErr: "cidr 11.0.0.0/8 is out the range of cluster cidr 10.0.0.0/22"},
		{name: "other family", cidr: "fd00::/64", wantErr: "cidr fd00::/64 is out the range of cluster cidr 10.0.0.0/22"},
	}
	subnets := []string{"10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1"}
	inUse := func(s *Set) []bool {
		var got []bool
		for _, ip := range subnets {
			got = append(got, s.InUse(net.ParseIP(ip)))
		}
		return got
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(mustCIDR(t, cluster), 24)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Occupy(mustCIDR(t, tc.cidr))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("Occupy error = %v, want %q matching ErrOutOfRange", err, tc.wantErr)
				}
				if err := s.Release(mustCIDR(t, tc.cidr)); err == nil || err.Error() != tc.wantErr {
					t.Fatalf("Release error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, inUse(s)); diff != "" {
				t.Errorf("after Occupy (-want +got):\n%s", diff)
			}
			// Occupying twice counts once.
			used := s.Used()
			if err := s.Occupy(mustCIDR(t, tc.cidr)); err != nil || s.Used() != used {
				t.Errorf("second Occupy: err %v, Used %d, want %d", err, s.Used(), used)
			}
			if err := s.Release(mustCIDR(t, tc.cidr)); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]bool{false, false, false, false}, inUse(s)); diff != "" || s.Used() != 0 {
				t.Errorf("after Release, Used %d (-want +got):\n%s", s.Used(), diff)
			}
		})
	}
	s, _ := New(mustCIDR(t, cluster), 24)
	if err := s.Occupy(nil); !errors.Is(err, ErrInvalidCIDR) {
		t.Errorf("Occupy(nil) = %v, want ErrInvalidCIDR", err)
	}
}

func TestAllocateSkipsOccupiedAndReusesReleased(t *testing.T) {
	s, err := New(mustCIDR(t, "10.0.0.0/22"), 24)
	if err != nil {
		t.Fatal(err)
	}
	// A restarted controller occupies what nodes hold, then allocates.
	for _, c := range []string{"10.0.0.0/24", "10.0.2.0/24"} {
		if err := s.Occupy(mustCIDR(t, c)); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"10.0.1.0/24", "10.0.3.0/24"}, allocateAll(t, s)); diff != "" {
		t.Errorf("allocations (-want +got):\n%s", diff)
	}
	if err := s.Release(mustCIDR(t, "10.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	got, err := s.AllocateNext()
	if err != nil || got.String() != "10.0.2.0/24" {
		t.Errorf("after release: %v, %v; want 10.0.2.0/24", got, err)
	}
}

func TestRoundRobin(t *testing.T) {
	s, err := New(mustCIDR(t, "10.0.0.0/22"), 24)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.AllocateNext() // 10.0.0.0
	if err := s.Release(a); err != nil {
		t.Fatal(err)
	}
	// The search starts after the last allocation, so a released subnet
	// is not handed out again at once.
	b, _ := s.AllocateNext()
	if b.String() != "10.0.1.0/24" {
		t.Errorf("next after release = %v, want 10.0.1.0/24", b)
	}
}

func TestHugeSparseSet(t *testing.T) {
	// 2^24 subnets cost nothing until high ones are used.
	s, err := New(mustCIDR(t, "10.0.0.0/8"), 32)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Occupy(mustCIDR(t, "10.255.255.255/32")); err != nil {
		t.Fatal(err)
	}
	if !s.InUse(net.ParseIP("10.255.255.255")) || s.InUse(net.ParseIP("10.255.255.254")) || s.Used() != 1 {
		t.Fatalf("occupied the wrong subnet; Used %d", s.Used())
	}
	if err := s.Release(mustCIDR(t, "10.0.0.0/8")); err != nil || s.Used() != 0 {
		t.Fatalf("release all: %v, Used %d", err, s.Used())
	}
	// Releasing beyond what was ever used is harmless.
	if err := s.Release(mustCIDR(t, "10.0.0.0/8")); err != nil || s.Used() != 0 {
		t.Fatalf("release again: %v, Used %d", err, s.Used())
	}
}

// BenchmarkAllocateReleaseHalfFull measures one AllocateNext plus one
// Release in a set of 65536 subnets that is half used, the free ones
// scattered: the search skips used subnets 64 at a time.
func BenchmarkAllocateReleaseHalfFull(b *testing.B) {
	_, cluster, _ := net.ParseCIDR("10.0.0.0/8")
	s, err := New(cluster, 24)
	if err != nil {
		b.Fatal(err)
	}
	var taken []*net.IPNet
	for i := 0; i < s.Size(); i++ {
		c, _ := s.AllocateNext()
		taken = append(taken, c)
	}
	for i := 0; i < len(taken); i += 2 {
		if err := s.Release(taken[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := s.AllocateNext()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Release(c); err != nil {
			b.Fatal(err)
		}
	}
}
