package tainteviction

import (
	"container/heap"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Work is one scheduled pod deletion: the pod's countdown started at
// CreatedAt and the pod is to be deleted at FireAt.
type Work struct {
	Pod       types.NamespacedName
	CreatedAt time.Time
	FireAt    time.Time
}

// queue is the timed work queue, keyed by pod. A key holds either pending
// work or, once its deletion ran, a "done" marker that keeps the same
// deletion from being scheduled again until the work is cancelled. The
// queue reads no clock: callers pass now. Not safe for concurrent use.
type queue struct {
	work  map[types.NamespacedName]*Work // nil value: done
	order fireOrder                      // pending work, possibly stale entries
}

func newQueue() *queue {
	return &queue{work: map[types.NamespacedName]*Work{}}
}

// add schedules w unless its pod already has work, pending or done; it
// reports whether it did.
func (q *queue) add(w Work) bool {
	if _, exists := q.work[w.Pod]; exists {
		return false
	}
	p := &w
	q.work[w.Pod] = p
	heap.Push(&q.order, p)
	if len(q.order) > 2*len(q.work)+64 {
		q.compact()
	}
	return true
}

// compact rebuilds the heap from the pending work, dropping the entries
// that cancelled or replaced work left behind.
func (q *queue) compact() {
	q.order = q.order[:0]
	for _, w := range q.work {
		if w != nil {
			q.order = append(q.order, w)
		}
	}
	heap.Init(&q.order)
}

// cancel forgets the pod's work, pending or done, and reports whether
// pending work was dropped.
func (q *queue) cancel(pod types.NamespacedName) bool {
	w, exists := q.work[pod]
	if !exists {
		return false
	}
	delete(q.work, pod)
	return w != nil
}

// pending returns the pod's pending work, or nil when there is none or it
// is done. The caller must not change it.
func (q *queue) pending(pod types.NamespacedName) *Work {
	return q.work[pod]
}

// next returns the earliest FireAt among pending work.
func (q *queue) next() (time.Time, bool) {
	q.dropStale()
	if len(q.order) == 0 {
		return time.Time{}, false
	}
	return q.order[0].FireAt, true
}

// due removes and returns the pending work whose FireAt is not after now,
// earliest first (ties by namespace, then name). The caller must report
// each with finish.
func (q *queue) due(now time.Time) []Work {
	var out []Work
	for {
		q.dropStale()
		if len(q.order) == 0 || q.order[0].FireAt.After(now) {
			return out
		}
		w := heap.Pop(&q.order).(*Work)
		out = append(out, *w)
	}
}

// finish records the outcome of a deletion due returned: done keeps the
// pod's marker so the deletion is not repeated; otherwise the pod is
// forgotten and may be scheduled again. Work re-added meanwhile is kept.
func (q *queue) finish(w Work, done bool) {
	cur, exists := q.work[w.Pod]
	if !exists || cur == nil || *cur != w {
		return
	}
	if done {
		q.work[w.Pod] = nil
	} else {
		delete(q.work, w.Pod)
	}
}

// list returns the pending work, earliest first.
func (q *queue) list() []Work {
	var out []Work
	for _, w := range q.work {
		if w != nil {
			out = append(out, *w)
		}
	}
	slices.SortFunc(out, func(a, b Work) int {
		switch {
		case workBefore(&a, &b):
			return -1
		case workBefore(&b, &a):
			return 1
		}
		return 0
	})
	return out
}

// dropStale pops heap entries whose work was cancelled or replaced.
func (q *queue) dropStale() {
	for len(q.order) > 0 {
		top := q.order[0]
		if cur := q.work[top.Pod]; cur == top {
			return
		}
		heap.Pop(&q.order)
	}
}

// fireOrder is a min-heap of work by FireAt, then pod. Entries are the
// pointers stored in queue.work; an entry no longer stored there is stale.
type fireOrder []*Work

func (h fireOrder) Len() int           { return len(h) }
func (h fireOrder) Less(i, j int) bool { return workBefore(h[i], h[j]) }
func (h fireOrder) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fireOrder) Push(x any)        { *h = append(*h, x.(*Work)) }
func (h *fireOrder) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return x
}

func workBefore(a, b *Work) bool {
	if !a.FireAt.Equal(b.FireAt) {
		return a.FireAt.Before(b.FireAt)
	}
	if a.Pod.Namespace != b.Pod.Namespace {
		return a.Pod.Namespace < b.Pod.Namespace
	}
	return a.Pod.Name < b.Pod.Name
}
