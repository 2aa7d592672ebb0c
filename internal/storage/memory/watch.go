package memory

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"knode/internal/storage"
)

// Watch implements storage.Interface. The watcher first replays the history
// after fromRevision, then reports live writes; a fromRevision older than
// the compaction point (compaction revision - 1 is the oldest allowed) fails
// at once with ErrCompacted, and one above the store revision with
// ErrFutureRevision.
//
// Delivery policy: a write appends to the watcher's unbounded buffer and
// never waits for the reader.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (storage.Watcher, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if fromRevision < 0 {
		return nil, fmt.Errorf("storage: watch revision %d must not be negative", fromRevision)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	w := &watcher{
		store:  s,
		prefix: prefix,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		events: make(chan storage.Event),
	}
	if fromRevision != 0 {
		if fromRevision > s.rev {
			return nil, fmt.Errorf("%w: watch from %d, store is at %d", storage.ErrFutureRevision, fromRevision, s.rev)
		}
		if fromRevision+1 < s.compacted {
			return nil, fmt.Errorf("%w: watch from %d, compacted at %d", storage.ErrCompacted, fromRevision, s.compacted)
		}
		for _, ev := range s.history[fromRevision+1-s.historyStart:] {
			if strings.HasPrefix(ev.KV.Key, prefix) {
				w.pending = append(w.pending, ev)
			}
		}
	}
	ws := s.watchers[prefix]
	if ws == nil {
		ws = map[*watcher]struct{}{}
		s.watchers[prefix] = ws
	}
	ws[w] = struct{}{}
	stop := context.AfterFunc(ctx, w.Stop)
	w.mu.Lock()
	w.stopCtx = stop
	w.mu.Unlock()
	go w.pump()
	return w, nil
}

// watcher buffers events between the writers that push them and the
// goroutine that hands them to the reader.
type watcher struct {
	store  *Store
	prefix string

	mu      sync.Mutex
	stopCtx func() bool // releases the context.AfterFunc
	pending []storage.Event
	err     error
	ended   bool

	notify chan struct{} // capacity 1: pending grew
	done   chan struct{} // closed once, by end
	events chan storage.Event
}

// push queues ev without blocking. Caller holds the store lock, which keeps
// events in revision order.
func (w *watcher) push(ev storage.Event) {
	w.mu.Lock()
	w.pending = append(w.pending, ev)
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// pump moves pending events to the reader until the watcher ends, then
// closes events.
func (w *watcher) pump() {
	defer close(w.events)
	for {
		w.mu.Lock()
		batch := w.pending
		w.pending = nil
		w.mu.Unlock()
		for _, ev := range batch {
			select {
			case w.events <- ev:
			case <-w.done:
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-w.notify:
		case <-w.done:
			return
		}
	}
}

// end stops delivery with err (nil for a plain stop). Only the first call
// counts.
func (w *watcher) end(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	w.ended = true
	w.err = err
	w.pending = nil
	close(w.done)
	if w.stopCtx != nil {
		w.stopCtx()
	}
}

func (w *watcher) Events() <-chan storage.Event { return w.events }

func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watch; Events is closed soon after and Err stays nil.
func (w *watcher) Stop() {
	s := w.store
	s.mu.Lock()
	if ws := s.watchers[w.prefix]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(s.watchers, w.prefix)
		}
	}
	s.mu.Unlock()
	w.end(nil)
}
