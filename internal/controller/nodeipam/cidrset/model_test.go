package cidrset

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
)

// model is the obvious allocator: a map of used subnet indices, subnet
// addresses computed with math/big, and overlap decided by netip. The Set
// must agree with it after every operation.
type model struct {
	cluster  netip.Prefix
	nodeBits int
	subnets  []netip.Prefix
	used     map[int]bool
	next     int
}

func newModel(cluster netip.Prefix, nodeBits int) *model {
	m := &model{cluster: cluster, nodeBits: nodeBits, used: map[int]bool{}}
	n := 1 << (nodeBits - cluster.Bits())
	base := new(big.Int).SetBytes(cluster.Addr().AsSlice())
	for i := 0; i < n; i++ {
		v := new(big.Int).Lsh(big.NewInt(int64(i)), uint(cluster.Addr().BitLen()-nodeBits))
		v.Or(v, base)
		buf := make([]byte, cluster.Addr().BitLen()/8)
		v.FillBytes(buf)
		addr, _ := netip.AddrFromSlice(buf)
		m.subnets = append(m.subnets, netip.PrefixFrom(addr, nodeBits))
	}
	return m
}

func (m *model) allocate() (string, bool) {
	for k := 0; k < len(m.subnets); k++ {
		i := (m.next + k) % len(m.subnets)
		if !m.used[i] {
			m.used[i] = true
			m.next = (i + 1) % len(m.subnets)
			return m.subnets[i].String(), true
		}
	}
	return "", false
}

// mark sets every subnet overlapping p; false if none does.
func (m *model) mark(p netip.Prefix, v bool) bool {
	if !p.Overlaps(m.cluster) {
		return false
	}
	for i, s := range m.subnets {
		if s.Overlaps(p) {
			if v {
				m.used[i] = true
			} else {
				delete(m.used, i)
			}
		}
	}
	return true
}

// randomPrefix returns a prefix near the cluster: usually inside it, of
// any length from a little shorter than the cluster's to a single address,
// sometimes just outside, sometimes of the other family.
func randomPrefix(r *rand.Rand, cluster netip.Prefix) netip.Prefix {
	addrBits := cluster.Addr().BitLen()
	if r.IntN(20) == 0 {
		if cluster.Addr().Is4() {
			return netip.MustParsePrefix("fd00::/64")
		}
		return netip.MustParsePrefix("10.0.0.0/24")
	}
	b := cluster.Addr().AsSlice()
	// Random host bits inside the cluster.
	for bit := cluster.Bits(); bit < addrBits; bit++ {
		if r.IntN(2) == 1 {
			b[bit/8] |= 1 << (7 - bit%8)
		}
	}
	// Now and then flip a bit above the cluster mask: outside it.
	if r.IntN(8) == 0 && cluster.Bits() > 0 {
		bit := r.IntN(cluster.Bits())
		b[bit/8] ^= 1 << (7 - bit%8)
	}
	addr, _ := netip.AddrFromSlice(b)
	lo := max(cluster.Bits()-2, 0)
	ones := lo + r.IntN(addrBits-lo+1)
	return netip.PrefixFrom(addr, ones).Masked()
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func TestSetAgainstModel(t *testing.T) {
	configs := []struct {
		cluster string
		mask    int
	}{
		{"10.0.0.0/24", 24},
		{"10.0.0.0/22", 24},
		{"10.96.0.0/16", 24},
		{"172.16.0.0/20", 26},
		{"0.0.0.0/0", 8},
		{"2001:db8::/56", 64},
		{"fd00::/63", 70},   // subnet bits straddle the two 64-bit halves
		{"fd00::/120", 128}, // all in the low half
		{"::/0", 7},
	}
	for _, cfg := range configs {
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("%s_into_%d/seed%d", cfg.cluster, cfg.mask, seed), func(t *testing.T) {
				runModel(t, netip.MustParsePrefix(cfg.cluster), cfg.mask, rand.New(rand.NewPCG(seed, 7)))
			})
		}
	}
}

func runModel(t *testing.T, cluster netip.Prefix, mask int, r *rand.Rand) {
	s, err := New(ipnet(cluster), mask)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(cluster, mask)
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after ops:\n  %v\n"+format, append([]any{log}, args...)...)
	}
	for op := 0; op < 300; op++ {
		switch k := r.IntN(10); {
		case k < 5:
			got, err := s.AllocateNext()
			want, ok := m.allocate()
			log = append(log, "allocate")
			switch {
			case !ok && !errors.Is(err, ErrNoCIDRsRemaining):
				fail("AllocateNext = %v, %v; want ErrNoCIDRsRemaining", got, err)
			case ok && (err != nil || got.String() != want):
				fail("AllocateNext = %v, %v; want %s", got, err, want)
			}
		default:
			p := randomPrefix(r, cluster)
			occupy := k < 7
			var err error
			if occupy {
				err = s.Occupy(ipnet(p))
				log = append(log, "occupy "+p.String())
			} else {
				err = s.Release(ipnet(p))
				log = append(log, "release "+p.String())
			}
			inRange := m.mark(p, occupy)
			if inRange && err != nil {
				fail("%s: unexpected error %v", p, err)
			}
			if !inRange && !errors.Is(err, ErrOutOfRange) {
				fail("%s: error %v, want ErrOutOfRange", p, err)
			}
		}
		if s.Used() != len(m.used) {
			fail("Used = %d, model %d", s.Used(), len(m.used))
		}
		for i, sub := range m.subnets {
			if s.InUse(net.IP(sub.Addr().AsSlice())) != m.used[i] {
				fail("subnet %s: InUse %v, model %v", sub, !m.used[i], m.used[i])
			}
		}
	}
}
