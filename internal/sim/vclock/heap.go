package vclock

import "time"

// kind says what firing an entry does.
type kind uint8

const (
	kindChan  kind = iota // send the due time on ch, once
	kindFunc              // call f, once
	kindTick              // send the due time on ch, then re-arm period later
	kindSleep             // wake the sleeper waiting on ch, once
)

// entry is one timer, ticker or sleeper. It is owned by its Clock, and every
// field is guarded by the Clock's mutex except ch, which is only ever used
// with non-blocking operations (and by the receiver).
type entry struct {
	due    int64  // offset from the clock's start, in nanoseconds
	seq    uint64 // creation order; breaks ties between equal due times
	period int64  // tickers only: nanoseconds between ticks, > 0

	// Invariant: pending is true exactly when the entry is in the heap,
	// and then heap[index] == the entry.
	pending bool
	index   int

	kind kind
	ch   chan time.Time // kindChan, kindTick, kindSleep
	f    func()         // kindFunc
	// lf replaces f for a lane callback (see LaneFunc), which is told its
	// due time; lane is its lane.
	lf   func(due time.Time)
	lane int
}

// heap is a binary min-heap of entries ordered by (due, seq). Each entry
// records its own index, so removing any entry costs O(log n).
type heap []*entry

func (h heap) less(i, j int) bool {
	a, b := h[i], h[j]
	return a.due < b.due || (a.due == b.due && a.seq < b.seq)
}

func (h heap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *heap) push(e *entry) {
	e.index = len(*h)
	e.pending = true
	*h = append(*h, e)
	h.up(e.index)
}

// remove takes out the entry at index i.
func (h *heap) remove(i int) {
	old := *h
	last := len(old) - 1
	e := old[i]
	if i != last {
		old.swap(i, last)
	}
	old[last] = nil
	*h = old[:last]
	e.pending = false
	e.index = -1
	if i != last {
		h.fix(i)
	}
}

// fix restores the order after the entry at index i changed its due time.
func (h heap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h heap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts the entry at i toward the leaves and reports whether it moved.
func (h heap) down(i int) bool {
	start := i
	n := len(h)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && h.less(right, child) {
			child = right
		}
		if !h.less(child, i) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}
