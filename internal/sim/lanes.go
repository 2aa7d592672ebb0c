package sim

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"knode/internal/sim/vclock"
)

// Lanes: the agents run side by side.
//
// Each agent's callbacks (lease renewal, status pass, pod sync, and the
// shutdown manager's steps that follow a pod sync) touch only that agent's
// own objects: its Node, its Lease, the pods bound to it, the events it
// records and the files in its own root directory; and they read only
// their own Node and pods from the mirror, and the claims, volumes and
// VolumeAttachments, which no agent writes. What spans agents (the at
// statements, logind's deadline for a machine shutting down) runs on the
// driving goroutine, as any other timer. So between
// two callbacks of anything else (a controller pass, a sample), the agents'
// callbacks may run at once on several goroutines and leave the store in
// the same state as running them one by one, apart from the order of the
// revisions they write. Each agent is a lane of the virtual clock; a batch
// holds at most one callback per lane, and each callback reads its own due
// time from its agent's laneClock.
//
// What keeps runs identical: the World settles once after a batch and hands
// the batch's changes to the mirror's observers ordered by agent (by due
// time, then creation order), not by revision, so the scheduler, taint
// eviction and the pod kicks see the same sequence whichever goroutine
// wrote first. Components other than agents react to a batch's changes at
// its end rather than after each callback; a batch never spans anything
// else's timer, so that moves them by less than the gap to the next one
// (the NoExecute tainting pass ticks every 100 ms).

// maxBatch bounds the callbacks of one batch.
const maxBatch = 1024

// laneClock is an agent's view of the virtual clock. While one of the
// agent's callbacks runs, Now reads that callback's due time, even when the
// clock has moved on for other agents' callbacks in the same batch;
// otherwise it reads the clock. Timers still come from the clock itself,
// relative to its now: the agent's own timers go through simAgent.after.
type laneClock struct {
	*vclock.Clock
	// at is the due time of the callback running, when pinned; only the
	// goroutine running the agent's callback touches them.
	at     time.Time
	pinned bool
}

var _ clock.WithTicker = (*laneClock)(nil)

func (l *laneClock) Now() time.Time {
	if l.pinned {
		return l.at
	}
	return l.Clock.Now()
}

func (l *laneClock) Since(t time.Time) time.Duration { return l.Now().Sub(t) }

func (l *laneClock) Until(t time.Time) time.Duration { return t.Sub(l.Now()) }

// after runs fn as one of the agent's callbacks, d after the agent's now.
// Run on its own it is followed by a settle, as every callback is; run in a
// batch, the batch settles once at its end.
func (a *simAgent) after(d time.Duration, fn func()) clock.Timer {
	w := a.w
	return w.clk.LaneFunc(a.lane, a.clk.Now().Add(max(d, 0)), func(due time.Time) {
		if w.err != nil {
			return
		}
		a.clk.at, a.clk.pinned = due, true
		fn()
		a.clk.pinned = false
		if !w.batching {
			w.settle()
		}
	})
}

// stepLanes runs the batch of agent callbacks due next, by until, and
// reports whether there was one. A lone callback runs as Step would run it.
func (w *World) stepLanes(until time.Time) bool {
	limit := w.cfg.Batch
	if limit <= 0 {
		limit = maxBatch
	}
	w.batch = w.clk.TakeLanes(until, limit, w.batch[:0])
	calls := w.batch
	switch len(calls) {
	case 0:
		return false
	case 1:
		calls[0].F(calls[0].Due)
		return true
	}
	w.batches++
	w.batched += len(calls)
	w.batching = true
	workers := min(w.workers(), len(calls))
	var next atomic.Int64
	run := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(calls) {
				return
			}
			calls[i].F(calls[i].Due)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	run()
	wg.Wait()
	w.batching = false
	// Each lane's place when the batch is taken one callback at a time:
	// by due time, then by agent.
	slices.SortFunc(calls, func(a, b vclock.LaneCall) int {
		return cmp.Or(a.Due.Compare(b.Due), cmp.Compare(a.Lane, b.Lane))
	})
	rank := w.laneRank
	clear(rank)
	for i, c := range calls {
		rank[c.Lane] = i
	}
	w.settleOrdered(func(node string) int {
		if a := w.byName[node]; a != nil {
			if r, ok := rank[a.lane]; ok {
				return r
			}
		}
		return -1
	})
	clear(calls)
	return true
}

// workers is how many goroutines run a batch.
func (w *World) workers() int {
	if w.cfg.Workers > 0 {
		return w.cfg.Workers
	}
	return runtime.GOMAXPROCS(0)
}
