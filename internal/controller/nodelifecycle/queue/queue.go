// Package queue is the per-zone, rate-limited timed queue through which the
// node lifecycle controller applies NoExecute taints (upstream's
// RateLimitedTimedQueue).
//
// A RateLimited holds node names ordered by the time they become due, and
// hands them to a callback no faster than its token bucket allows: burst 1,
// refilled at the zone's rate. A name is held from Add until Remove, even
// after the callback has dealt with it, so a node is processed once per
// outage rather than once per Add.
//
// Time is always an argument: nothing here reads a clock, sleeps or starts a
// goroutine. The caller owns synchronisation; a RateLimited must not be used
// from two goroutines at once.
package queue

import (
	"container/heap"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Item is one queued node.
type Item struct {
	Name string
	UID  types.UID
	// AddedAt is when Add queued it.
	AddedAt time.Time
	// ProcessAt is the earliest time Try may hand it out; a failed attempt
	// pushes it back.
	ProcessAt time.Time

	seq   uint64 // insertion order; breaks ties between equal ProcessAt
	index int    // position in the heap
}

// RateLimited is a queue of unique names with a token bucket in front.
// The zero value is not usable; build one with New.
type RateLimited struct {
	items items
	// held maps every name between Add and Remove to its queued item, or
	// to nil once Try has dealt with it.
	held   map[string]*Item
	bucket bucket
	seq    uint64
}

// New returns an empty queue whose bucket refills at qps tokens a second
// and starts full (one token). qps <= 0 gives a queue that never hands
// anything out.
func New(qps float64) *RateLimited {
	return &RateLimited{held: map[string]*Item{}, bucket: newBucket(qps)}
}

// Add queues name, due now. It reports false, and changes nothing, when the
// name is already held (queued, or dealt with and not yet removed).
func (q *RateLimited) Add(name string, uid types.UID, now time.Time) bool {
	if _, ok := q.held[name]; ok {
		return false
	}
	q.seq++
	it := &Item{Name: name, UID: uid, AddedAt: now, ProcessAt: now, seq: q.seq}
	heap.Push(&q.items, it)
	q.held[name] = it
	return true
}

// Remove forgets name, whether queued or already dealt with, so a later Add
// queues it again. It reports whether the name was held.
func (q *RateLimited) Remove(name string) bool {
	it, ok := q.held[name]
	if !ok {
		return false
	}
	delete(q.held, name)
	if it != nil {
		heap.Remove(&q.items, it.index)
	}
	return true
}

// Try hands due items to fn, earliest ProcessAt first (ties in Add order),
// spending one token per item. It stops at the first item the bucket has
// no token for, or that is not yet due; a token is spent even then, as
// upstream's queue does. The queue must not be used from inside fn.
//
// fn reports done=true when the item is dealt with: it leaves the queue but
// stays held until Remove. done=false puts it back, due at
// now + retryAfter + 1ns.
func (q *RateLimited) Try(now time.Time, fn func(it Item) (done bool, retryAfter time.Duration)) {
	for len(q.items) > 0 {
		if !q.bucket.take(now) {
			return
		}
		head := q.items[0]
		if now.Before(head.ProcessAt) {
			return
		}
		done, retryAfter := fn(*head)
		if done {
			heap.Remove(&q.items, head.index)
			q.held[head.Name] = nil
			continue
		}
		head.ProcessAt = now.Add(retryAfter + time.Nanosecond)
		q.seq++
		head.seq = q.seq
		heap.Fix(&q.items, head.index)
	}
}

// SwapLimiter changes the rate, as upstream's SwapLimiter does: nothing
// happens if qps equals the current rate; qps <= 0 installs a bucket that
// never gives a token; otherwise a new full bucket is installed, and a token
// is drained from it at once if the old bucket had none to give at now
// (asking the old bucket spends its token, which no longer matters).
func (q *RateLimited) SwapLimiter(qps float64, now time.Time) {
	if qps <= 0 {
		qps = 0
	}
	if qps == q.bucket.qps {
		return
	}
	next := newBucket(qps)
	if qps > 0 && !q.bucket.take(now) {
		next.take(now)
	}
	q.bucket = next
}

// QPS is the current rate in tokens a second; 0 means the queue never hands
// anything out.
func (q *RateLimited) QPS() float64 { return q.bucket.qps }

// Len is the number of items waiting (held names already dealt with are
// not counted).
func (q *RateLimited) Len() int { return len(q.items) }

// Holds reports whether name is held: queued, or dealt with and not removed.
func (q *RateLimited) Holds(name string) bool {
	_, ok := q.held[name]
	return ok
}

// Queued returns the waiting items in the order Try would take them. The
// result is a copy.
func (q *RateLimited) Queued() []Item {
	c := make(items, len(q.items))
	for i, it := range q.items {
		cp := *it
		cp.index = i
		c[i] = &cp
	}
	out := make([]Item, 0, len(c))
	for len(c) > 0 {
		out = append(out, *heap.Pop(&c).(*Item))
	}
	return out
}

// bucket is a token bucket of burst 1 on explicit times: a token is
// available at or after next, and taking it makes the next one available
// one interval later. With burst 1 this is exactly a refilling bucket
// capped at one token.
type bucket struct {
	qps      float64 // 0: never gives a token
	interval time.Duration
	next     time.Time // zero: a token is available now
}

func newBucket(qps float64) bucket {
	if qps <= 0 {
		return bucket{}
	}
	return bucket{qps: qps, interval: time.Duration(float64(time.Second) / qps)}
}

func (b *bucket) take(now time.Time) bool {
	if b.qps <= 0 || now.Before(b.next) {
		return false
	}
	b.next = now.Add(b.interval)
	return true
}

// items is a min-heap on (ProcessAt, seq).
type items []*Item

func (h items) Len() int { return len(h) }
func (h items) Less(i, j int) bool {
	if !h[i].ProcessAt.Equal(h[j].ProcessAt) {
		return h[i].ProcessAt.Before(h[j].ProcessAt)
	}
	return h[i].seq < h[j].seq
}
func (h items) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *items) Push(x any) {
	it := x.(*Item)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *items) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return it
}
