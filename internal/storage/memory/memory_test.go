package memory_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"knode/internal/storage"
	"knode/internal/storage/memory"
	"knode/internal/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		s := memory.New(memory.Config{})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestStartsAtRevisionOne(t *testing.T) {
	s := memory.New(memory.Config{})
	defer s.Close()
	rev, err := s.Revision(t.Context())
	if err != nil || rev != 1 {
		t.Fatalf("Revision of a new store = %d, %v; want 1, nil", rev, err)
	}
	if got, err := s.Create(t.Context(), "/a", nil); err != nil || got != 2 {
		t.Fatalf("first Create = %d, %v; want 2, nil", got, err)
	}
}

func TestClose(t *testing.T) {
	s := memory.New(memory.Config{})
	w, err := s.Watch(t.Context(), "/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case _, ok := <-w.Events():
		if ok {
			t.Fatal("event after Close")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch not ended by Close")
	}
	if !errors.Is(w.Err(), memory.ErrClosed) {
		t.Errorf("watch Err after Close = %v, want ErrClosed", w.Err())
	}
	if _, err := s.Get(t.Context(), "/a"); !errors.Is(err, memory.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestChanges(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.Config{})
	r1, _ := s.Create(ctx, "/a/1", []byte("x"))
	if _, err := s.Create(ctx, "/b/1", []byte("y")); err != nil {
		t.Fatal(err)
	}
	r3, _ := s.Update(ctx, "/a/1", []byte("z"), r1)
	evs, rev, err := s.Changes("/a/", 1)
	if err != nil {
		t.Fatal(err)
	}
	if rev != r3 || len(evs) != 2 || evs[0].KV.ModRevision != r1 || string(evs[1].KV.Value) != "z" {
		t.Fatalf("Changes(/a/, 1) = %d events up to %d: %+v", len(evs), rev, evs)
	}
	if evs, _, _ := s.Changes("/a/", r1); len(evs) != 1 || evs[0].KV.ModRevision != r3 {
		t.Fatalf("Changes after %d = %+v, want only revision %d", r1, evs, r3)
	}
	if _, _, err := s.Changes("/a/", r3+1); !errors.Is(err, storage.ErrFutureRevision) {
		t.Fatalf("future revision: err = %v", err)
	}
	if err := s.Compact(ctx, r3); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Changes("/a/", 1); !errors.Is(err, storage.ErrCompacted) {
		t.Fatalf("compacted revision: err = %v", err)
	}
}
