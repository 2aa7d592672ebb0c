package memory_test

import (
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
