package tainteviction

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestQueue(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	a := types.NamespacedName{Namespace: "default", Name: "a"}
	b := types.NamespacedName{Namespace: "default", Name: "b"}
	c := types.NamespacedName{Namespace: "other", Name: "a"}

	q := newQueue()
	if _, ok := q.next(); ok {
		t.Fatal("empty queue has a next time")
	}
	if !q.add(Work{Pod: b, CreatedAt: at(0), FireAt: at(30)}) || !q.add(Work{Pod: a, CreatedAt: at(0), FireAt: at(30)}) || !q.add(Work{Pod: c, CreatedAt: at(0), FireAt: at(10)}) {
		t.Fatal("add to an empty key refused")
	}
	if q.add(Work{Pod: a, CreatedAt: at(1), FireAt: at(1)}) {
		t.Error("second add for a pending key accepted")
	}
	if next, _ := q.next(); !next.Equal(at(10)) {
		t.Errorf("next = %v, want +10s", next)
	}
	if got := q.due(at(9)); len(got) != 0 {
		t.Errorf("due before any FireAt: %v", got)
	}

	// Due at exactly FireAt, earliest first, ties by key.
	want := []Work{{Pod: c, CreatedAt: at(0), FireAt: at(10)}, {Pod: a, CreatedAt: at(0), FireAt: at(30)}, {Pod: b, CreatedAt: at(0), FireAt: at(30)}}
	if diff := cmp.Diff(want, q.due(at(30))); diff != "" {
		t.Fatalf("due (-want +got):\n%s", diff)
	}
	q.finish(want[0], true)  // deleted
	q.finish(want[1], false) // failed
	q.finish(want[2], true)

	if q.pending(c) != nil {
		t.Error("done work still pending")
	}
	if q.add(Work{Pod: c, CreatedAt: at(40), FireAt: at(40)}) {
		t.Error("done work scheduled again")
	}
	if !q.add(Work{Pod: a, CreatedAt: at(40), FireAt: at(50)}) {
		t.Error("failed work not schedulable again")
	}
	if q.cancel(c) {
		t.Error("cancelling done work reported a pending cancel")
	}
	if !q.add(Work{Pod: c, CreatedAt: at(40), FireAt: at(45)}) {
		t.Error("cancelled done work not schedulable again")
	}
	if !q.cancel(c) {
		t.Error("cancelling pending work reported nothing pending")
	}
	if q.cancel(c) {
		t.Error("cancelling twice reported pending work")
	}
	// The cancelled entry at +45 must not show as next.
	if next, _ := q.next(); !next.Equal(at(50)) {
		t.Errorf("next = %v, want +50s", next)
	}
	if diff := cmp.Diff([]Work{{Pod: a, CreatedAt: at(40), FireAt: at(50)}}, q.list()); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
}

// The heap agrees with a plain map of pending work under random adds,
// cancels and firings, and stays small under churn.
func TestQueueMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	q := newQueue()
	type state struct {
		w    Work
		done bool
	}
	model := map[types.NamespacedName]state{}
	for step := range 20000 {
		key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("p%d", rng.Intn(50))}
		switch op := rng.Intn(10); {
		case op < 5:
			w := Work{Pod: key, CreatedAt: now, FireAt: now.Add(time.Duration(rng.Intn(300)) * time.Second)}
			_, exists := model[key]
			if got := q.add(w); got != !exists {
				t.Fatalf("step %d: add(%v) = %v, model says %v", step, key, got, !exists)
			}
			if !exists {
				model[key] = state{w: w}
			}
		case op < 8:
			s, exists := model[key]
			if got := q.cancel(key); got != (exists && !s.done) {
				t.Fatalf("step %d: cancel(%v) = %v", step, key, got)
			}
			delete(model, key)
		default:
			now = now.Add(time.Duration(rng.Intn(60)) * time.Second)
			var want []Work
			for _, s := range model {
				if !s.done && !s.w.FireAt.After(now) {
					want = append(want, s.w)
				}
			}
			slices.SortFunc(want, func(a, b Work) int {
				if workBefore(&a, &b) {
					return -1
				}
				return 1
			})
			got := q.due(now)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("step %d: due (-want +got):\n%s", step, diff)
			}
			for _, w := range got {
				ok := rng.Intn(4) > 0
				q.finish(w, ok)
				if ok {
					model[w.Pod] = state{w: w, done: true}
				} else {
					delete(model, w.Pod)
				}
			}
		}
		var wantNext time.Time
		for _, s := range model {
			if !s.done && (wantNext.IsZero() || s.w.FireAt.Before(wantNext)) {
				wantNext = s.w.FireAt
			}
		}
		gotNext, ok := q.next()
		if ok != !wantNext.IsZero() || !gotNext.Equal(wantNext) {
			t.Fatalf("step %d: next = %v %v, want %v", step, gotNext, ok, wantNext)
		}
		if len(q.order) > 2*len(q.work)+65 {
			t.Fatalf("step %d: heap holds %d entries for %d keys", step, len(q.order), len(q.work))
		}
	}
}
