// Package cidrset hands out equal-sized subnets (node pod CIDRs) from one
// cluster CIDR.
//
// A Set owns a bitmap with one bit per subnet of the cluster CIDR. It
// allocates round-robin (the search for a free subnet starts after the one
// handed out last, as upstream's range allocator does), and it can mark any
// CIDR that overlaps the cluster CIDR as used (Occupy) or free (Release), at
// subnet granularity. IPv4 and IPv6 are both supported.
//
// The caller decides what the subnets mean: it occupies the CIDRs nodes
// already hold before allocating, and releases a node's CIDR when the node
// goes. A Set is safe for concurrent use.
//
// What it does not do: it keeps no state outside memory (the node objects
// are the record, so a restarted controller rebuilds the Set from them), it
// exports no metrics (Size and Used let a caller do that), and it never
// talks to the API.
package cidrset

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"sync"
)

// MaxIPv6SubnetBits is how many bits longer than the cluster mask an IPv6
// node mask may be: at most 2^16 subnets per IPv6 set (upstream's limit).
const MaxIPv6SubnetBits = 16

var (
	// ErrNoCIDRsRemaining is returned by AllocateNext when every subnet is
	// in use. The text is upstream's.
	ErrNoCIDRsRemaining = errors.New("CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")
	// ErrSubnetTooBig is returned by New when an IPv6 node mask is more than
	// MaxIPv6SubnetBits longer than the cluster mask. The text is upstream's.
	ErrSubnetTooBig = errors.New("New CIDR set failed; the node CIDR size is too big")
	// ErrInvalidMaskSize is returned by New when the node mask is shorter
	// than the cluster mask or longer than the address.
	ErrInvalidMaskSize = errors.New("invalid node CIDR mask size")
	// ErrOutOfRange is matched (errors.Is) by the error Occupy and Release
	// return for a CIDR that does not overlap the cluster CIDR.
	ErrOutOfRange = errors.New("cidr out of range")
	// ErrInvalidCIDR is returned for a nil CIDR or one with a
	// non-canonical mask.
	ErrInvalidCIDR = errors.New("invalid CIDR")
)

// outOfRangeError carries upstream's message and matches ErrOutOfRange.
type outOfRangeError struct {
	cidr, cluster string
}

func (e *outOfRangeError) Error() string {
	return fmt.Sprintf("cidr %s is out the range of cluster cidr %s", e.cidr, e.cluster)
}

func (e *outOfRangeError) Unwrap() error { return ErrOutOfRange }

// Set allocates subnets of one cluster CIDR.
type Set struct {
	cluster  netip.Prefix // masked
	nodeBits int          // node mask length
	shift    uint         // address bits below the node mask
	base     u128         // cluster network address
	size     int          // number of subnets, 1 << (nodeBits - cluster bits)

	mu   sync.Mutex
	used int // bits set in words
	next int // where the next search starts
	// words is the bitmap; bit i is subnet i. It grows as high subnets are
	// used, so a huge sparse set costs little; bits past its end are free.
	words []uint64
}

// New returns an empty Set of the subnets of clusterCIDR with node mask
// length maskSize. maskSize must be at least the cluster mask length and at
// most the address length (32 or 128); for IPv6 it may exceed the cluster
// mask length by at most MaxIPv6SubnetBits.
func New(clusterCIDR *net.IPNet, maskSize int) (*Set, error) {
	cluster, err := toPrefix(clusterCIDR)
	if err != nil {
		return nil, err
	}
	addrBits := cluster.Addr().BitLen()
	if maskSize < cluster.Bits() || maskSize > addrBits {
		return nil, fmt.Errorf("%w: node mask size %d must be between the cluster mask size %d of %s and %d",
			ErrInvalidMaskSize, maskSize, cluster.Bits(), cluster, addrBits)
	}
	if cluster.Addr().Is6() && maskSize-cluster.Bits() > MaxIPv6SubnetBits {
		return nil, ErrSubnetTooBig
	}
	return &Set{
		cluster:  cluster,
		nodeBits: maskSize,
		shift:    uint(addrBits - maskSize),
		base:     fromAddr(cluster.Addr()),
		size:     1 << uint(maskSize-cluster.Bits()),
	}, nil
}

// ClusterCIDR returns the cluster CIDR the Set divides.
func (s *Set) ClusterCIDR() *net.IPNet { return toIPNet(s.cluster) }

// MaskSize returns the node mask length.
func (s *Set) MaskSize() int { return s.nodeBits }

// Size returns the number of subnets.
func (s *Set) Size() int { return s.size }

// Used returns the number of subnets in use.
func (s *Set) Used() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// AllocateNext marks the next free subnet used and returns it. The search
// starts after the subnet AllocateNext returned last and wraps around. It
// returns ErrNoCIDRsRemaining when every subnet is in use.
func (s *Set) AllocateNext() (*net.IPNet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used == s.size {
		return nil, ErrNoCIDRsRemaining
	}
	i := s.firstFree(s.next, s.size)
	if i < 0 {
		i = s.firstFree(0, s.next)
	}
	// i >= 0: used < size guarantees a free bit.
	s.setRange(i, i, true)
	s.next = (i + 1) % s.size
	return s.subnet(i), nil
}

// Occupy marks every subnet that overlaps cidr as used. cidr may be smaller
// than a subnet (its whole subnet is taken), larger than one, or even
// contain the whole cluster CIDR. Occupying a used subnet is not an error.
// A cidr that does not overlap the cluster CIDR (including one of the other
// IP family) gives an error matching ErrOutOfRange.
func (s *Set) Occupy(cidr *net.IPNet) error {
	begin, end, err := s.indices(cidr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setRange(begin, end, true)
	return nil
}

// Release marks every subnet that overlaps cidr as free, with the same
// rules as Occupy. Releasing a free subnet is not an error.
func (s *Set) Release(cidr *net.IPNet) error {
	begin, end, err := s.indices(cidr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setRange(begin, end, false)
	return nil
}

// InUse reports whether the subnet holding ip is in use; false for an ip
// outside the cluster CIDR.
func (s *Set) InUse(ip net.IP) bool {
	addr, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	if s.cluster.Addr().Is4() {
		addr = addr.Unmap()
	}
	if !s.cluster.Contains(addr) {
		return false
	}
	i := s.index(fromAddr(addr))
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bit(i)
}

// indices returns the first and last subnet index cidr overlaps.
func (s *Set) indices(cidr *net.IPNet) (begin, end int, err error) {
	p, err := toPrefix(cidr)
	if err != nil {
		return 0, 0, err
	}
	outside := &outOfRangeError{cidr: cidr.String(), cluster: s.cluster.String()}
	if p.Addr().Is4() != s.cluster.Addr().Is4() {
		return 0, 0, outside
	}
	if p.Bits() <= s.cluster.Bits() {
		if !p.Contains(s.cluster.Addr()) {
			return 0, 0, outside
		}
		return 0, s.size - 1, nil
	}
	if !s.cluster.Contains(p.Addr()) {
		return 0, 0, outside
	}
	first := fromAddr(p.Addr())
	last := first.or(hostMask(p.Addr().BitLen(), p.Bits()))
	return s.index(first), s.index(last), nil
}

// index is the subnet holding address a, which must be in the cluster.
func (s *Set) index(a u128) int {
	return int(a.xor(s.base).shr(s.shift).lo)
}

// subnet returns subnet i as an IPNet.
func (s *Set) subnet(i int) *net.IPNet {
	a := s.base.or(u128{lo: uint64(i)}.shl(s.shift))
	return toIPNet(netip.PrefixFrom(toAddr(a, s.cluster.Addr().Is4()), s.nodeBits))
}

func (s *Set) bit(i int) bool {
	w := i / 64
	return w < len(s.words) && s.words[w]&(1<<uint(i%64)) != 0
}

// firstFree returns the lowest free index in [from, to), or -1.
func (s *Set) firstFree(from, to int) int {
	for i := from; i < to; {
		w := i / 64
		if w >= len(s.words) {
			return i
		}
		free := ^s.words[w] >> uint(i%64) // free bits from i upward
		if free != 0 {
			j := i + bits.TrailingZeros64(free)
			if j < to {
				return j
			}
			return -1
		}
		i = (w + 1) * 64
	}
	return -1
}

// setRange sets bits [begin, end] to v and keeps used in step.
func (s *Set) setRange(begin, end int, v bool) {
	if v {
		if need := end/64 + 1; need > len(s.words) {
			if need <= cap(s.words) {
				s.words = s.words[:need]
			} else {
				grown := make([]uint64, need, max(need, 2*len(s.words)))
				copy(grown, s.words)
				s.words = grown
			}
		}
	} else if begin/64 >= len(s.words) {
		return
	} else if end/64 >= len(s.words) {
		end = len(s.words)*64 - 1
	}
	for w := begin / 64; w <= end/64; w++ {
		mask := ^uint64(0)
		if w == begin/64 {
			mask &= ^uint64(0) << uint(begin%64)
		}
		if w == end/64 {
			mask &= ^uint64(0) >> uint(63-end%64)
		}
		old := s.words[w]
		if v {
			s.words[w] |= mask
			s.used += bits.OnesCount64(mask &^ old)
		} else {
			s.words[w] &^= mask
			s.used -= bits.OnesCount64(mask & old)
		}
	}
}

// toPrefix converts a CIDR to a masked prefix, IPv4 when its mask has 32
// bits and IPv6 when it has 128.
func toPrefix(cidr *net.IPNet) (netip.Prefix, error) {
	if cidr == nil {
		return netip.Prefix{}, fmt.Errorf("%w: cidr is nil", ErrInvalidCIDR)
	}
	ones, total := cidr.Mask.Size()
	var addr netip.Addr
	switch total {
	case 32:
		ip4 := cidr.IP.To4()
		if ip4 == nil {
			return netip.Prefix{}, fmt.Errorf("%w: %v has an IPv4 mask and an IPv6 address", ErrInvalidCIDR, cidr)
		}
		addr = netip.AddrFrom4([4]byte(ip4))
	case 128:
		ip16 := cidr.IP.To16()
		if ip16 == nil || len(cidr.IP) != net.IPv6len {
			return netip.Prefix{}, fmt.Errorf("%w: %v has an IPv6 mask and an IPv4 address", ErrInvalidCIDR, cidr)
		}
		addr = netip.AddrFrom16([16]byte(ip16))
	default:
		return netip.Prefix{}, fmt.Errorf("%w: %v has a non-canonical mask", ErrInvalidCIDR, cidr)
	}
	return netip.PrefixFrom(addr, ones).Masked(), nil
}

func toIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// u128 is an address as a 128-bit number; IPv4 lives in the low 32 bits.
type u128 struct{ hi, lo uint64 }

func fromAddr(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{lo: uint64(b[0])<<24 | uint64(b[1])<<16 | uint64(b[2])<<8 | uint64(b[3])}
	}
	b := a.As16()
	var u u128
	for i := 0; i < 8; i++ {
		u.hi = u.hi<<8 | uint64(b[i])
		u.lo = u.lo<<8 | uint64(b[8+i])
	}
	return u
}

func toAddr(u u128, is4 bool) netip.Addr {
	if is4 {
		return netip.AddrFrom4([4]byte{byte(u.lo >> 24), byte(u.lo >> 16), byte(u.lo >> 8), byte(u.lo)})
	}
	var b [16]byte
	for i := 0; i < 8; i++ {
		b[7-i] = byte(u.hi >> (8 * i))
		b[15-i] = byte(u.lo >> (8 * i))
	}
	return netip.AddrFrom16(b)
}

// hostMask has the low addrBits-ones bits set.
func hostMask(addrBits, ones int) u128 {
	n := uint(addrBits - ones)
	all := u128{hi: ^uint64(0), lo: ^uint64(0)}
	return all.shr(128 - n)
}

func (u u128) or(v u128) u128  { return u128{u.hi | v.hi, u.lo | v.lo} }
func (u u128) xor(v u128) u128 { return u128{u.hi ^ v.hi, u.lo ^ v.lo} }

// shl and shr shift by n in [0, 128]; Go defines shifts of 64 or more as
// giving zero, which the split below relies on.
func (u u128) shl(n uint) u128 {
	if n >= 64 {
		return u128{hi: u.lo << (n - 64)}
	}
	return u128{hi: u.hi<<n | u.lo>>(64-n), lo: u.lo << n}
}

func (u u128) shr(n uint) u128 {
	if n >= 64 {
		return u128{lo: u.hi >> (n - 64)}
	}
	return u128{hi: u.hi >> n, lo: u.lo>>n | u.hi<<(64-n)}
}
