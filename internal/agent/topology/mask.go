package topology

import (
	"fmt"
	"math/bits"
	"strconv"
)

// MaxNUMANodes is the number of NUMA node IDs a Mask can hold: IDs 0 to 63.
const MaxNUMANodes = 64

// Mask is a set of NUMA node IDs, bit i standing for node i. The zero Mask is
// the empty set. Masks are values: every operation returns a new Mask.
type Mask uint64

// NewMask returns the mask holding ids. An ID outside 0 to 63 is an error.
func NewMask(ids ...int) (Mask, error) {
	var m Mask
	for _, id := range ids {
		if id < 0 || id >= MaxNUMANodes {
			return 0, fmt.Errorf("bit number must be in range 0-63")
		}
		m |= 1 << uint(id)
	}
	return m, nil
}

// And returns the intersection of m and others.
func (m Mask) And(others ...Mask) Mask {
	for _, o := range others {
		m &= o
	}
	return m
}

// Count is the number of nodes in m.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// IsEmpty reports whether m holds no node.
func (m Mask) IsEmpty() bool { return m == 0 }

// IsSet reports whether node id is in m. IDs outside 0 to 63 are never set.
func (m Mask) IsSet(id int) bool {
	if id < 0 || id >= MaxNUMANodes {
		return false
	}
	return m&(1<<uint(id)) != 0
}

// IsEqual reports whether m and o hold the same nodes.
func (m Mask) IsEqual(o Mask) bool { return m == o }

// IsSubsetOf reports whether every node of m is in o.
func (m Mask) IsSubsetOf(o Mask) bool { return m&^o == 0 }

// IsLessThan compares m and o as unsigned integers, so of two masks with the
// same count the one whose highest differing node is lower is less.
func (m Mask) IsLessThan(o Mask) bool { return m < o }

// IsNarrowerThan reports whether m has fewer nodes than o; on equal counts,
// whether m IsLessThan o (upstream's tie rule: the lower-numbered set wins).
func (m Mask) IsNarrowerThan(o Mask) bool {
	if m.Count() == o.Count() {
		return m.IsLessThan(o)
	}
	return m.Count() < o.Count()
}

// Bits returns the node IDs in m, ascending; nil for the empty mask.
func (m Mask) Bits() []int {
	var ids []int
	for i := 0; i < MaxNUMANodes; i++ {
		if m.IsSet(i) {
			ids = append(ids, i)
		}
	}
	return ids
}

// String prints m in binary, node 0 rightmost, zero-padded to a multiple of
// two digits as upstream does ("01", "10", "0101"). Upstream pads only when
// the value is strictly above a power of four, so a mask equal to one (for
// example node 2 alone, 4) prints unpadded beyond two digits ("100"); this
// keeps that quirk so logs read the same.
func (m Mask) String() string {
	const grouping = 2
	for shift := 64 - grouping; shift > 0; shift -= grouping {
		if uint64(m) > 1<<uint(shift) {
			return fmt.Sprintf("%0"+strconv.Itoa(shift+grouping)+"b", uint64(m))
		}
	}
	return fmt.Sprintf("%0"+strconv.Itoa(grouping)+"b", uint64(m))
}
