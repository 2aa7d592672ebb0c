package scheduler

import (
	"container/heap"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Retry timing, upstream's defaults: a pod that failed waits
// initialBackoff, doubling per further failure up to maxBackoff, before
// an event may send it back; a pod left unschedulable for
// maxUnschedulable is retried anyway, checked every flushPeriod.
const (
	initialBackoff   = 1 * time.Second
	maxBackoff       = 10 * time.Second
	maxUnschedulable = 5 * time.Minute
	flushPeriod      = 30 * time.Second
)

// Where a queued pod waits.
type place int

const (
	active        place = iota // ready to be tried, in priority order
	backingOff                 // moved by an event, waiting for its backoff to end
	unschedulable              // failed, waiting for a change that may help
)

// queued is a pending pod in the queue.
type queued struct {
	info     *PodInfo
	place    place
	attempts int       // failed attempts so far
	failedAt time.Time // when the last attempt failed
	index    int       // position in the active heap
	// moves is the queue's move count when the pod was popped: a move
	// during its attempt may have made it fit.
	moves uint64
}

// queue holds the pending pods: an active heap (higher priority first,
// then older, then by namespace/name), pods backing off, and pods that
// failed. It is not safe for concurrent use.
type queue struct {
	pods   map[types.NamespacedName]*queued
	active activeHeap
	// moves counts the events that sent unschedulable pods back (moveAll,
	// moveClaimPods), as upstream's move request cycle.
	moves uint64
}

func newQueue() *queue {
	return &queue{pods: map[types.NamespacedName]*queued{}}
}

// upsert adds a new pending pod to the active heap, or updates a queued
// one. An update that changes what scheduling reads (spec, labels,
// annotations) sends a failed pod back as moveAll does; other updates
// (its own status, say) leave it where it is. It reports whether the pod
// is active now.
func (q *queue) upsert(pi *PodInfo, now time.Time) bool {
	e := q.pods[pi.Key]
	if e == nil {
		e = &queued{info: pi, place: active}
		q.pods[pi.Key] = e
		heap.Push(&q.active, e)
		return true
	}
	changed := schedulingChanged(e.info, pi)
	e.info = pi
	switch e.place {
	case active:
		heap.Fix(&q.active, e.index)
	case unschedulable:
		if changed {
			q.release(e, now)
		}
	}
	return e.place == active
}

// schedulingChanged reports whether a new version of a pod may schedule
// differently: its spec, labels or annotations changed.
func schedulingChanged(old, cur *PodInfo) bool {
	return !equality.Semantic.DeepEqual(old.Pod.Spec, cur.Pod.Spec) ||
		!equality.Semantic.DeepEqual(old.Pod.Labels, cur.Pod.Labels) ||
		!equality.Semantic.DeepEqual(old.Pod.Annotations, cur.Pod.Annotations)
}

// remove drops the pod from the queue, wherever it waits.
func (q *queue) remove(key types.NamespacedName) {
	e := q.pods[key]
	if e == nil {
		return
	}
	if e.place == active {
		heap.Remove(&q.active, e.index)
	}
	delete(q.pods, key)
}

// pop takes the first active pod out of the queue; nil when none is
// active. The caller gives it back with failed, or forgets it.
func (q *queue) pop() *queued {
	if q.active.Len() == 0 {
		return nil
	}
	e := heap.Pop(&q.active).(*queued)
	delete(q.pods, e.info.Key)
	e.moves = q.moves
	return e
}

// failed puts a popped pod back as unschedulable, unless a newer version
// was queued meanwhile.
func (q *queue) failed(e *queued, now time.Time) {
	if _, requeued := q.pods[e.info.Key]; requeued {
		return
	}
	e.attempts++
	e.failedAt = now
	e.place = unschedulable
	if e.moves != q.moves {
		// Something changed while it was tried: it waits out its backoff
		// only, not for another change that may never come.
		e.place = backingOff
	}
	q.pods[e.info.Key] = e
}

// retry puts a popped pod back to wait out a fresh backoff, unless a
// newer version was queued meanwhile: for a pod whose binding failed.
func (q *queue) retry(e *queued, now time.Time) {
	if _, requeued := q.pods[e.info.Key]; requeued {
		return
	}
	e.attempts++
	e.failedAt = now
	e.place = backingOff
	q.pods[e.info.Key] = e
}

// moveAll sends every unschedulable pod back: to the active heap if its
// backoff is over, else to wait for it. Call it on a change that may let
// pods fit (a node added or changed, a bound pod gone).
func (q *queue) moveAll(now time.Time) {
	q.moves++
	for _, e := range q.pods {
		if e.place == unschedulable {
			q.release(e, now)
		}
	}
}

// moveClaimPods is moveAll for the unschedulable pods that use claims:
// what a change to a storage object may help. It reports whether a pod
// moved (to the active heap, or to back off: either way the loop must
// look again at when to wake).
func (q *queue) moveClaimPods(now time.Time) bool {
	q.moves++
	moved := false
	for _, e := range q.pods {
		if e.place == unschedulable && len(e.info.claims) > 0 {
			q.release(e, now)
			moved = true
		}
	}
	return moved
}

// flush activates pods whose backoff ended and releases pods left
// unschedulable for maxUnschedulable.
func (q *queue) flush(now time.Time) {
	for _, e := range q.pods {
		switch e.place {
		case backingOff:
			if !now.Before(e.backoffEnd()) {
				q.activate(e)
			}
		case unschedulable:
			if now.Sub(e.failedAt) >= maxUnschedulable {
				q.release(e, now)
			}
		}
	}
}

// nextBackoffEnd returns when the earliest backing-off pod may go; ok is
// false when none is backing off.
func (q *queue) nextBackoffEnd() (at time.Time, ok bool) {
	for _, e := range q.pods {
		if e.place == backingOff && (!ok || e.backoffEnd().Before(at)) {
			at, ok = e.backoffEnd(), true
		}
	}
	return at, ok
}

func (q *queue) release(e *queued, now time.Time) {
	if now.Before(e.backoffEnd()) {
		e.place = backingOff
		return
	}
	q.activate(e)
}

func (q *queue) activate(e *queued) {
	e.place = active
	heap.Push(&q.active, e)
}

// activateAll puts every queued pod in the active heap, backoff or not:
// what an explicit pass does.
func (q *queue) activateAll() {
	for _, e := range q.pods {
		if e.place != active {
			q.activate(e)
		}
	}
}

// counts returns how many pods wait in each place.
func (q *queue) counts() (act, backoff, unsched int) {
	for _, e := range q.pods {
		switch e.place {
		case active:
			act++
		case backingOff:
			backoff++
		case unschedulable:
			unsched++
		}
	}
	return act, backoff, unsched
}

// backoffEnd is when the pod's backoff after its last failure ends.
func (e *queued) backoffEnd() time.Time {
	d := initialBackoff
	for i := 1; i < e.attempts && d < maxBackoff; i++ {
		d *= 2
	}
	return e.failedAt.Add(min(d, maxBackoff))
}

// activeHeap orders active pods: higher priority, then older (creation
// time), then namespace/name.
type activeHeap []*queued

func (h activeHeap) Len() int { return len(h) }

func (h activeHeap) Less(i, j int) bool { return before(h[i].info, h[j].info) }

func (h activeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *activeHeap) Push(x any) {
	e := x.(*queued)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *activeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// before is the order pods are tried in.
func before(a, b *PodInfo) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	ta, tb := a.Pod.CreationTimestamp.Time, b.Pod.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if c := strings.Compare(a.Key.Namespace, b.Key.Namespace); c != 0 {
		return c < 0
	}
	return a.Key.Name < b.Key.Name
}
