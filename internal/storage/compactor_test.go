package storage_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/storage"
	"knode/internal/storage/memory"
)

// scriptedStore answers Revision from a script and records Compact calls;
// its other methods are not used by the compactor.
type scriptedStore struct {
	storage.Interface
	revisions   []int64 // next answers of Revision
	revisionErr error
	compactErrs []error // results of the next Compact calls; then nil
	compacted   []int64
}

func (s *scriptedStore) Revision(context.Context) (int64, error) {
	if s.revisionErr != nil {
		return 0, s.revisionErr
	}
	rev := s.revisions[0]
	s.revisions = s.revisions[1:]
	return rev, nil
}

func (s *scriptedStore) Compact(_ context.Context, rev int64) error {
	s.compacted = append(s.compacted, rev)
	if len(s.compactErrs) == 0 {
		return nil
	}
	err := s.compactErrs[0]
	s.compactErrs = s.compactErrs[1:]
	return err
}

func TestCompactorStep(t *testing.T) {
	errDown := errors.New("store down")
	tests := []struct {
		name        string
		revisions   []int64 // store revision at each step
		compactErrs []error
		// wantCalls are the Compact calls made; wantErrs the steps (by
		// index) that fail.
		wantCalls []int64
		wantErrs  []int
	}{
		{name: "first step only remembers", revisions: []int64{10}},
		{name: "second step compacts to the first revision", revisions: []int64{10, 25}, wantCalls: []int64{10}},
		{name: "each step compacts one interval back", revisions: []int64{10, 25, 40, 41}, wantCalls: []int64{10, 25, 40}},
		{name: "no writes since the last compaction", revisions: []int64{10, 10, 10, 12, 12}, wantCalls: []int64{10, 12}},
		{name: "a fresh store is compacted at revision 1", revisions: []int64{1, 1, 1}, wantCalls: []int64{1}},
		{name: "store went backwards", revisions: []int64{10, 5, 8}, wantCalls: []int64{5}},
		{
			name:        "already compacted elsewhere is fine",
			revisions:   []int64{10, 25, 40},
			compactErrs: []error{fmt.Errorf("other server: %w", storage.ErrCompacted)},
			wantCalls:   []int64{10, 25},
		},
		{
			name:        "failure is reported and retried",
			revisions:   []int64{10, 25, 40},
			compactErrs: []error{errDown},
			wantCalls:   []int64{10, 10},
			wantErrs:    []int{1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &scriptedStore{revisions: tc.revisions, compactErrs: tc.compactErrs}
			c, err := storage.NewCompactor(storage.CompactorConfig{Store: store, Clock: clocktesting.NewFakeClock(time.Unix(0, 0))})
			if err != nil {
				t.Fatal(err)
			}
			var errs []int
			for i := range tc.revisions {
				if err := c.Step(t.Context()); err != nil {
					errs = append(errs, i)
				}
			}
			if diff := cmp.Diff(tc.wantCalls, store.compacted); diff != "" {
				t.Errorf("Compact calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrs, errs); diff != "" {
				t.Errorf("failing steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompactorStepRevisionError(t *testing.T) {
	errDown := errors.New("store down")
	c, err := storage.NewCompactor(storage.CompactorConfig{Store: &scriptedStore{revisionErr: errDown}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Step(t.Context()); !errors.Is(err, errDown) {
		t.Errorf("Step = %v, want it to wrap %v", err, errDown)
	}
}

func TestCompactorConfigValidate(t *testing.T) {
	_, err := storage.NewCompactor(storage.CompactorConfig{Interval: -time.Second})
	want := `storage: invalid compactor config: [store: Required value: the compactor needs a store, interval: Invalid value: "-1s": must not be negative]`
	if err == nil || err.Error() != want {
		t.Errorf("NewCompactor error:\n got %v\nwant %s", err, want)
	}
}

// notifyingStore is a memory store that reports each revision read and
// each compaction.
type notifyingStore struct {
	*memory.Store
	reads       chan int64
	compactions chan int64
}

func (s notifyingStore) Revision(ctx context.Context) (int64, error) {
	rev, err := s.Store.Revision(ctx)
	s.reads <- rev
	return rev, err
}

func (s notifyingStore) Compact(ctx context.Context, rev int64) error {
	err := s.Store.Compact(ctx, rev)
	s.compactions <- rev
	return err
}

// TestCompactorRun drives Run with a fake clock: nothing is compacted until
// one interval has passed, then each tick compacts to the revision of the
// tick before.
func TestCompactorRun(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	store := notifyingStore{memory.New(memory.Config{}), make(chan int64, 10), make(chan int64, 10)}
	c, err := storage.NewCompactor(storage.CompactorConfig{Store: store, Clock: clk, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	write := func(key string) int64 {
		rev, err := store.Create(t.Context(), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	expectCompaction := func(want int64) {
		t.Helper()
		select {
		case got := <-store.compactions:
			if got != want {
				t.Fatalf("compacted to %d, want %d", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no compaction to %d", want)
		}
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()

	// The first step, at start, reads revision 1 and remembers it. Run
	// makes its ticker before that, so the clock steps below reach it.
	select {
	case rev := <-store.reads:
		if rev != 1 {
			t.Fatalf("first step read revision %d, want 1", rev)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not step at start")
	}
	r1 := write("/a")
	clk.Step(time.Minute)
	expectCompaction(1)
	write("/b")
	clk.Step(time.Minute)
	expectCompaction(r1)

	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
