// Package vclock is a virtual clock for the simulator. It implements the
// k8s.io/utils/clock interfaces (PassiveClock, Clock, WithTicker,
// WithDelayedExecution), so any knode component that takes a clock in its
// Config can run on virtual time.
//
// What it owns: the current virtual time and every pending timer, ticker and
// sleeper created through it. Time moves only when a caller advances the
// clock (AdvanceTo, Advance, Step), and nothing in this package waits on real
// time.
//
// What callers must do: drive the clock. The simulator usually loops on Step,
// which jumps to the earliest pending timer and fires everything due then.
// Time never moves backward. AfterFunc callbacks run synchronously on the
// goroutine that advances the clock, outside the clock's lock. A callback may
// use the clock freely (Now, NewTimer, AfterFunc, Stop, Reset), but it must
// not block waiting for other goroutines that wait on this clock, because the
// advance cannot continue until the callback returns. Components that wait on
// channels (timers, tickers, Sleep) run on their own goroutines; before
// advancing, the driver can use BlockUntil to know they have parked.
//
// Determinism: timers fire in order of due time, and timers due at the same
// instant fire in the order they were created (NewTimer, After, AfterFunc,
// NewTicker, Tick or Sleep). The same sequence of calls always gives the same
// firing order. Advancing from several goroutines at once is safe but makes
// the order across those advances depend on scheduling, so the simulator
// advances from one goroutine.
//
// Lanes (LaneFunc, TakeLanes) let a driver take a batch of callbacks that
// its caller declares independent and run them side by side; see lanes.go.
//
// Channel timers and tickers follow the semantics of Go 1.23 and later: after
// Stop or Reset returns, a receive from C() never yields a value from before
// the call.
//
// What it does not do: it does not run callbacks on goroutines of their own
// (time.AfterFunc does), it does not model the monotonic clock (the start time
// has its monotonic reading stripped), and it does not let time go backward.
package vclock

import (
	"context"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

var (
	_ clock.PassiveClock                  = (*Clock)(nil)
	_ clock.Clock                         = (*Clock)(nil)
	_ clock.WithTicker                    = (*Clock)(nil)
	_ clock.WithDelayedExecution          = (*Clock)(nil)
	_ clock.WithTickerAndDelayedExecution = (*Clock)(nil)
	_ clock.Timer                         = (*timer)(nil)
	_ clock.Ticker                        = (*ticker)(nil)
)

// Clock is a virtual clock. The zero value is not usable; call New.
// All methods are safe for concurrent use.
type Clock struct {
	// start is the instant New was given, with no monotonic reading.
	// Every time inside the clock is an offset in nanoseconds from start.
	start time.Time

	mu      sync.Mutex
	now     int64 // offset of the current time from start; never decreases
	nextSeq uint64
	heap    heap // every pending timer, ticker and sleeper
	waiters []pendingWaiter
	// taken is TakeLanes' scratch set of the lanes in its batch.
	taken map[int]struct{}
}

// pendingWaiter is a BlockUntil call waiting for the heap to reach n entries.
type pendingWaiter struct {
	n    int
	done chan struct{}
}

// New returns a clock that reads start until it is advanced.
func New(start time.Time) *Clock {
	return &Clock{start: start.Round(0)}
}

// Now returns the current virtual time. While an AfterFunc callback runs,
// Now is the due time of that callback's timer.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timeAt(c.now)
}

// Since returns the virtual time elapsed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the virtual time left until t.
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// NewTimer returns a timer whose channel, of capacity 1, receives the due
// time once the clock reaches now+d. A d <= 0 makes the timer due at now; it
// fires on the next advance, even one that does not move time.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c}
	t.e.kind = kindChan
	t.e.ch = make(chan time.Time, 1)
	c.arm(&t.e, d)
	return t
}

// After returns the channel of a new timer (see NewTimer).
func (c *Clock) After(d time.Duration) <-chan time.Time {
	return c.NewTimer(d).C()
}

// AfterFunc returns a timer that calls f once the clock reaches now+d. The
// call happens on the goroutine advancing the clock, outside the clock's
// lock, with Now reading the due time. The returned timer's C is nil.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c}
	t.e.kind = kindFunc
	t.e.f = f
	c.arm(&t.e, d)
	return t
}

// NewTicker returns a ticker that is due every d, starting at now+d. Its
// channel has capacity 1, and a tick into a full channel is dropped. After a
// tick due at T the next one is due at T+d, so one long advance may deliver
// one tick and drop the rest. NewTicker panics if d <= 0, as
// time.NewTicker does. The returned value also has a method
// Reset(d time.Duration), as time.Ticker does.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	if d <= 0 {
		panic("non-positive interval for NewTicker")
	}
	t := &ticker{c: c}
	t.e.kind = kindTick
	t.e.period = int64(d)
	t.e.ch = make(chan time.Time, 1)
	c.arm(&t.e, d)
	return t
}

// Tick returns the channel of a new ticker (see NewTicker), or nil if
// d <= 0, as time.Tick does.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.NewTicker(d).C()
}

// Sleep blocks the calling goroutine until the clock has been advanced to
// now+d or later. It returns at once if d <= 0, as time.Sleep does. A
// sleeping goroutine counts in Pending until it is woken.
func (c *Clock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	e := &entry{kind: kindSleep, ch: make(chan time.Time, 1)}
	c.arm(e, d)
	<-e.ch
}

// Next reports when the earliest pending timer is due, or ok=false when
// nothing is pending.
func (c *Clock) Next() (due time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.heap) == 0 {
		return time.Time{}, false
	}
	return c.timeAt(c.heap[0].due), true
}

// Pending returns how many timers, tickers and sleepers are waiting to fire.
// A stopped timer, or one that has fired and not been reset, is not pending.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.heap)
}

// BlockUntil blocks until at least n timers, tickers and sleepers are
// pending, or ctx ends. The driver uses it to know that goroutines it started
// have parked on the clock before it advances.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	c.mu.Lock()
	if len(c.heap) >= n {
		c.mu.Unlock()
		return nil
	}
	w := pendingWaiter{n: n, done: make(chan struct{})}
	c.waiters = append(c.waiters, w)
	c.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range c.waiters {
			if c.waiters[i].done == w.done {
				c.waiters = append(c.waiters[:i], c.waiters[i+1:]...)
				break
			}
		}
		return ctx.Err()
	}
}

// AdvanceTo moves the clock forward to t, firing every timer due at or before
// t in order of due time, ties in creation order. While a timer fires, Now
// reads its due time. Timers that callbacks create or reset fire within the
// same call if they fall due at or before t. Time never moves backward: a t
// before Now is treated as Now, so timers already due still fire but the
// clock stays where it is. AdvanceTo returns the number of timers fired,
// counting every tick of a ticker, including ticks dropped into a full
// channel.
func (c *Clock) AdvanceTo(t time.Time) int {
	return c.advance(func(now int64) int64 { return max(now, c.offsetOf(t)) })
}

// Advance moves the clock forward by d (see AdvanceTo). A d < 0 counts as 0.
func (c *Clock) Advance(d time.Duration) int {
	return c.advance(func(now int64) int64 { return addSat(now, max(d, 0)) })
}

// Step advances the clock to the earliest pending due time and fires every
// timer due then, including ones that callbacks create due at that instant.
// It returns false, and does nothing, when nothing is pending.
func (c *Clock) Step() bool {
	return c.advance(func(now int64) int64 {
		if len(c.heap) == 0 {
			return math.MinInt64 // before now: nothing to do
		}
		return c.heap[0].due
	}) > 0
}

// advance fires timers up to the target that limit computes, under the
// lock, from the current offset. A target before now fires nothing and
// leaves time alone.
func (c *Clock) advance(limit func(now int64) int64) int {
	fired := 0
	c.mu.Lock()
	target := limit(c.now)
	for len(c.heap) > 0 && c.heap[0].due <= target {
		e := c.heap[0]
		c.now = max(c.now, e.due)
		fired++
		switch e.kind {
		case kindTick:
			// Re-arm in place: the ticker keeps its sequence number,
			// so ties stay in creation order. A tick that would fall
			// past the end of representable time never comes.
			if e.due > math.MaxInt64-e.period {
				c.heap.remove(0)
			} else {
				e.due += e.period
				c.heap.fix(0)
			}
			sendLatest(e.ch, c.timeAt(c.now))
		case kindFunc:
			c.heap.remove(0)
			f, lf, due := e.f, e.lf, c.timeAt(e.due)
			c.mu.Unlock()
			if lf != nil {
				lf(due)
			} else {
				f()
			}
			c.mu.Lock()
		default: // kindChan, kindSleep
			c.heap.remove(0)
			sendLatest(e.ch, c.timeAt(c.now))
		}
	}
	if target > c.now {
		c.now = target
	}
	c.mu.Unlock()
	return fired
}

// arm schedules e at now+d (now if d <= 0), giving it a sequence number the
// first time. Callers hold no lock.
func (c *Clock) arm(e *entry, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked(e, d)
}

func (c *Clock) armLocked(e *entry, d time.Duration) {
	if e.seq == 0 {
		c.nextSeq++
		e.seq = c.nextSeq
	}
	e.due = addSat(c.now, max(d, 0))
	if e.pending {
		c.heap.fix(e.index)
	} else {
		c.heap.push(e)
	}
	if len(c.waiters) > 0 {
		c.wakeWaitersLocked()
	}
}

// disarm removes e from the heap and reports whether it was there.
func (c *Clock) disarmLocked(e *entry) bool {
	if !e.pending {
		return false
	}
	c.heap.remove(e.index)
	return true
}

func (c *Clock) wakeWaitersLocked() {
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if len(c.heap) >= w.n {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}

func (c *Clock) timeAt(off int64) time.Time {
	return c.start.Add(time.Duration(off))
}

// offsetOf converts t to an offset from start, saturating at the limits of
// time.Duration.
func (c *Clock) offsetOf(t time.Time) int64 {
	return int64(t.Sub(c.start))
}

// addSat returns off+d, saturating instead of overflowing.
func addSat(off int64, d time.Duration) int64 {
	if d > 0 && off > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return off + int64(d)
}

// sendLatest does a non-blocking send of v on ch.
func sendLatest(ch chan time.Time, v time.Time) {
	select {
	case ch <- v:
	default:
	}
}

// drain discards a value waiting in ch and reports whether there was one.
func drain(ch chan time.Time) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// timer is a channel timer (NewTimer, After) or a callback timer
// (AfterFunc).
type timer struct {
	c *Clock
	e entry
}

func (t *timer) C() <-chan time.Time { return t.e.ch }

// Stop prevents the timer from firing. It returns true if the timer was
// pending, or, for a channel timer, had fired but its value had not been
// received yet (the value is discarded, as with time.Timer since Go 1.23).
// It returns false once an AfterFunc callback has started.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.disarmLocked(&t.e)
	if t.e.ch != nil && drain(t.e.ch) {
		was = true
	}
	return was
}

// Reset re-arms the timer to fire at now+d (now if d <= 0) and returns what
// Stop would have returned.
func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.e.pending
	if t.e.ch != nil && drain(t.e.ch) {
		was = true
	}
	t.c.armLocked(&t.e, d)
	return was
}

// ticker is a ticker made by NewTicker or Tick.
type ticker struct {
	c *Clock
	e entry
}

func (t *ticker) C() <-chan time.Time { return t.e.ch }

// Stop turns the ticker off and discards a tick not yet received. Reset
// turns it back on.
func (t *ticker) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.c.disarmLocked(&t.e)
	drain(t.e.ch)
}

// Reset makes the ticker due every d from now, discarding a tick not yet
// received, and turns it on if it was stopped. It panics if d <= 0, as
// time.Ticker.Reset does.
func (t *ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("non-positive interval for Ticker.Reset")
	}
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	drain(t.e.ch)
	t.e.period = int64(d)
	t.c.armLocked(&t.e, d)
}
