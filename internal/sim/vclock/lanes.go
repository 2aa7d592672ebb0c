package vclock

import (
	"time"

	"k8s.io/utils/clock"
)

// Lanes. A lane is a set of callbacks that depend on one another and on
// nothing else's, such as one simulated node's agent: callbacks on
// different lanes may run side by side, in any order, and give the same
// result. A driver that knows this takes a batch of them with TakeLanes and
// runs it on several goroutines; Step and the other advances still run lane
// callbacks one at a time, like any AfterFunc.

// LaneFunc returns a timer that calls f(at) once the clock reaches at, as a
// callback of lane (any int the caller chooses). Unlike AfterFunc, at may be
// before now: a lane's callback may run after other lanes' callbacks due
// later (see TakeLanes), and a timer it sets keeps the lane's own time.
// Such a timer is due at once, and fires ahead of everything due later
// than at. Reset re-arms it relative to now, as for AfterFunc.
func (c *Clock) LaneFunc(lane int, at time.Time, f func(due time.Time)) clock.Timer {
	t := &timer{c: c}
	t.e.kind = kindFunc
	t.e.lf = f
	t.e.lane = lane
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextSeq++
	t.e.seq = c.nextSeq
	t.e.due = c.offsetOf(at)
	c.heap.push(&t.e)
	if len(c.waiters) > 0 {
		c.wakeWaitersLocked()
	}
	return t
}

// LaneCall is one lane callback taken by TakeLanes: the caller must call
// F(Due).
type LaneCall struct {
	Lane int
	Due  time.Time
	F    func(due time.Time)
}

// TakeLanes removes from the clock, and appends to calls, the longest run
// of lane callbacks next in firing order that may run side by side: each
// due by until, each on a lane not already in the run, and at most limit of
// them. The run ends at the first timer of any other kind. Now moves to
// the last one's due time (never backward). The caller must make every
// call before it advances the clock again; each call's own time is its Due.
//
// The batch is a function of the clock's contents, but the order of lane
// callbacks due at the same instant follows the order they were set, which
// is only fixed if they were set one at a time.
func (c *Clock) TakeLanes(until time.Time, limit int, calls []LaneCall) []LaneCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.taken == nil {
		c.taken = map[int]struct{}{}
	}
	end := c.offsetOf(until)
	for n := 0; n < limit && len(c.heap) > 0; n++ {
		e := c.heap[0]
		if e.due > end || e.lf == nil {
			break
		}
		if _, dup := c.taken[e.lane]; dup {
			break
		}
		c.taken[e.lane] = struct{}{}
		c.heap.remove(0)
		c.now = max(c.now, e.due)
		calls = append(calls, LaneCall{Lane: e.lane, Due: c.timeAt(e.due), F: e.lf})
	}
	clear(c.taken)
	return calls
}
