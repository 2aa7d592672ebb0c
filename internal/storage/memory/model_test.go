package memory_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"knode/internal/storage"
	"knode/internal/storage/memory"
)

// model is the obviously-correct store the memory Store is checked against:
// a full copy of the key map at every revision and a flat event log.
type model struct {
	rev       int64
	compacted int64
	states    map[int64]map[string]storage.KV // revision -> every live key
	events    []storage.Event                 // events[i] is revision i+2
}

func newModel() *model {
	return &model{rev: 1, states: map[int64]map[string]storage.KV{1: {}}}
}

func (m *model) now() map[string]storage.KV { return m.states[m.rev] }

func (m *model) write(ev storage.Event) {
	next := maps.Clone(m.now())
	if ev.Type == storage.Delete {
		delete(next, ev.KV.Key)
	} else {
		next[ev.KV.Key] = ev.KV
	}
	m.rev++
	m.states[m.rev] = next
	m.events = append(m.events, ev)
}

func (m *model) create(key, value string) (int64, error) {
	if _, ok := m.now()[key]; ok {
		return 0, storage.ErrExists
	}
	rev := m.rev + 1
	m.write(storage.Event{Type: storage.Put, Created: true, KV: storage.KV{Key: key, Value: []byte(value), CreateRevision: rev, ModRevision: rev}})
	return rev, nil
}

func (m *model) check(key string, expected int64) (storage.KV, error) {
	cur, ok := m.now()[key]
	if !ok {
		return storage.KV{}, storage.ErrNotFound
	}
	if expected != 0 && expected != cur.ModRevision {
		return storage.KV{}, storage.ErrConflict
	}
	return cur, nil
}

func (m *model) update(key, value string, expected int64) (int64, error) {
	cur, err := m.check(key, expected)
	if err != nil {
		return 0, err
	}
	rev := m.rev + 1
	m.write(storage.Event{Type: storage.Put, PrevValue: cur.Value, KV: storage.KV{Key: key, Value: []byte(value), CreateRevision: cur.CreateRevision, ModRevision: rev}})
	return rev, nil
}

func (m *model) delete(key string, expected int64) (storage.KV, error) {
	cur, err := m.check(key, expected)
	if err != nil {
		return storage.KV{}, err
	}
	gone := cur
	gone.ModRevision = m.rev + 1
	m.write(storage.Event{Type: storage.Delete, PrevValue: cur.Value, KV: gone})
	return gone, nil
}

func (m *model) list(prefix string, rev int64) ([]storage.KV, error) {
	if rev == 0 {
		rev = m.rev
	}
	if rev > m.rev {
		return nil, storage.ErrFutureRevision
	}
	if rev < m.compacted {
		return nil, storage.ErrCompacted
	}
	var out []storage.KV
	for k, v := range m.states[rev] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (m *model) compact(rev int64) error {
	if rev <= m.compacted {
		return storage.ErrCompacted
	}
	if rev > m.rev {
		return storage.ErrFutureRevision
	}
	m.compacted = rev
	return nil
}

// watchFrom returns the events a watch from rev must replay, or its error.
func (m *model) watchFrom(prefix string, rev int64) ([]storage.Event, error) {
	if rev > m.rev {
		return nil, storage.ErrFutureRevision
	}
	if rev+1 < m.compacted {
		return nil, storage.ErrCompacted
	}
	var out []storage.Event
	for _, ev := range m.events[rev-1:] {
		if strings.HasPrefix(ev.KV.Key, prefix) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// errKind reduces an error to the sentinel it wraps, so that store and model
// errors compare.
func errKind(err error) string {
	for _, s := range []error{storage.ErrNotFound, storage.ErrExists, storage.ErrConflict, storage.ErrCompacted, storage.ErrFutureRevision, storage.ErrInvalidContinue} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	if err != nil {
		return "unexpected: " + err.Error()
	}
	return "ok"
}

// listAll follows continue tokens to the end, checking that every page reads
// at the first page's revision and reports the right remaining count.
func listAll(t *testing.T, s storage.Interface, prefix string, rev, limit int64) ([]storage.KV, error) {
	ctx := context.Background()
	var all []storage.KV
	opts := storage.ListOptions{Revision: rev, Limit: limit}
	var firstRev int64
	var wantRemaining *int64
	for page := 0; ; page++ {
		res, err := s.List(ctx, prefix, opts)
		if err != nil {
			return nil, err
		}
		if page == 0 {
			firstRev = res.Revision
		} else {
			if res.Revision != firstRev {
				t.Fatalf("page %d read at %d, first page at %d", page, res.Revision, firstRev)
			}
			if got := int64(len(res.Items)); *wantRemaining < got {
				t.Fatalf("page %d has %d items, previous page promised %d", page, got, *wantRemaining)
			}
		}
		if limit > 0 && int64(len(res.Items)) > limit {
			t.Fatalf("page %d has %d items, limit %d", page, len(res.Items), limit)
		}
		all = append(all, res.Items...)
		if res.Continue == "" {
			if res.RemainingItemCount != nil {
				t.Fatalf("last page has RemainingItemCount %d", *res.RemainingItemCount)
			}
			if wantRemaining != nil && *wantRemaining != int64(len(res.Items)) {
				t.Fatalf("last page has %d items, previous page promised %d", len(res.Items), *wantRemaining)
			}
			return all, nil
		}
		if res.RemainingItemCount == nil {
			t.Fatalf("page %d has a continue token but no remaining count", page)
		}
		wantRemaining = res.RemainingItemCount
		opts = storage.ListOptions{Limit: limit, Continue: res.Continue}
	}
}

// drain reads exactly n events from w. Every event the store owes is
// already buffered when drain starts, so the timeout only catches a bug.
func drain(t *testing.T, w storage.Watcher, n int) []storage.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	var out []storage.Event
	for range n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch closed after %d of %d events: %v", len(out), n, w.Err())
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("watch gave %d of %d events", len(out), n)
		}
	}
	return out
}

// TestAgainstModel runs random operation sequences on the store and on the
// model and requires identical results, including every page of every list
// and every event of long-running and late-started watches.
func TestAgainstModel(t *testing.T) {
	keys := []string{"/a/1", "/a/2", "/a/3", "/ab/1", "/b/1", "/b/2"}
	prefixes := []string{"", "/a/", "/ab/", "/b/", "/c/"}
	cmpOpts := cmpopts.EquateEmpty()

	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			ctx := context.Background()
			s := memory.New(memory.Config{})
			defer s.Close()
			m := newModel()

			// Watchers that see the whole run, one per prefix.
			whole := map[string]storage.Watcher{}
			for _, p := range prefixes {
				w, err := s.Watch(ctx, p, 1)
				if err != nil {
					t.Fatalf("Watch(%q, 1): %v", p, err)
				}
				defer w.Stop()
				whole[p] = w
			}

			// pickRev returns a revision around the interesting range:
			// compacted, live, and a little in the future.
			pickRev := func() int64 { return max(1, m.compacted-1) + rng.Int64N(m.rev-max(1, m.compacted-1)+3) }
			pickExpected := func(key string) int64 {
				switch rng.IntN(3) {
				case 0:
					return 0
				case 1:
					return m.now()[key].ModRevision
				default:
					return rng.Int64N(m.rev + 2)
				}
			}

			for step := 0; step < 300; step++ {
				key := keys[rng.IntN(len(keys))]
				value := fmt.Sprintf("v%d", step)
				var what string
				var got, want any
				var gotErr, wantErr error
				switch op := rng.IntN(10); op {
				case 0, 1:
					what = fmt.Sprintf("Create(%s)", key)
					got, gotErr = s.Create(ctx, key, []byte(value))
					want, wantErr = m.create(key, value)
				case 2, 3:
					exp := pickExpected(key)
					what = fmt.Sprintf("Update(%s, %d)", key, exp)
					got, gotErr = s.Update(ctx, key, []byte(value), exp)
					want, wantErr = m.update(key, value, exp)
				case 4:
					exp := pickExpected(key)
					what = fmt.Sprintf("Delete(%s, %d)", key, exp)
					got, gotErr = s.Delete(ctx, key, exp)
					want, wantErr = m.delete(key, exp)
				case 5:
					what = fmt.Sprintf("Get(%s)", key)
					got, gotErr = s.Get(ctx, key)
					want = m.now()[key]
					if _, ok := m.now()[key]; !ok {
						wantErr = storage.ErrNotFound
					}
				case 6, 7:
					p := prefixes[rng.IntN(len(prefixes))]
					rev := pickRev()
					if rng.IntN(3) == 0 {
						rev = 0
					}
					limit := rng.Int64N(4)
					what = fmt.Sprintf("List(%q, rev %d, limit %d)", p, rev, limit)
					got, gotErr = listAll(t, s, p, rev, limit)
					want, wantErr = m.list(p, rev)
				case 8:
					if rng.IntN(3) != 0 {
						continue
					}
					rev := pickRev()
					what = fmt.Sprintf("Compact(%d)", rev)
					gotErr = s.Compact(ctx, rev)
					wantErr = m.compact(rev)
				case 9:
					p := prefixes[rng.IntN(len(prefixes))]
					rev := pickRev()
					what = fmt.Sprintf("Watch(%q, %d)", p, rev)
					want, wantErr = m.watchFrom(p, rev)
					w, err := s.Watch(ctx, p, rev)
					gotErr = err
					if err == nil {
						got = drain(t, w, len(want.([]storage.Event)))
						w.Stop()
					}
				}
				if g, w := errKind(gotErr), errKind(wantErr); g != w {
					t.Fatalf("step %d %s: error %q, model says %q", step, what, g, w)
				}
				if wantErr == nil {
					if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
						t.Fatalf("step %d %s (-model +store):\n%s", step, what, diff)
					}
				}
				if rev, _ := s.Revision(ctx); rev != m.rev {
					t.Fatalf("step %d %s: store at revision %d, model at %d", step, what, rev, m.rev)
				}
			}

			for _, p := range slices.Sorted(maps.Keys(whole)) {
				want, _ := (&model{rev: m.rev, events: m.events}).watchFrom(p, 1)
				got := drain(t, whole[p], len(want))
				if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
					t.Fatalf("whole-run watch of %q (-model +store):\n%s", p, diff)
				}
			}
		})
	}
}
