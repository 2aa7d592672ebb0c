package etcd

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"knode/internal/storage"
)

// Watch implements storage.Interface with one etcd watch on prefix.
//
// fromRevision 0 is first resolved to the current store revision, so every
// write acknowledged after Watch returns is reported. A fromRevision above the
// store revision fails at once with ErrFutureRevision; a compacted one ends
// the watcher with ErrCompacted.
//
// Delivery policy: the etcd client buffers events for a slow reader without
// bound, so a slow reader never blocks writers.
func (s *Store) Watch(ctx context.Context, prefix string, fromRevision int64) (storage.Watcher, error) {
	if fromRevision < 0 {
		return nil, fmt.Errorf("storage: watch revision %d must not be negative", fromRevision)
	}
	current, err := s.Revision(ctx)
	if err != nil {
		return nil, err
	}
	if fromRevision > current {
		return nil, fmt.Errorf("%w: watch from %d, store is at %d", storage.ErrFutureRevision, fromRevision, current)
	}
	if fromRevision == 0 {
		fromRevision = current
	}

	wctx, cancel := context.WithCancel(ctx)
	if s.requireLeader {
		wctx = clientv3.WithRequireLeader(wctx)
	}
	ch := s.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(fromRevision+1), clientv3.WithPrevKV())
	w := &watcher{
		ctx:    wctx,
		cancel: cancel,
		events: make(chan storage.Event),
	}
	go w.run(ch)
	return w, nil
}

type watcher struct {
	ctx    context.Context
	cancel context.CancelFunc
	events chan storage.Event

	mu  sync.Mutex
	err error
}

// run converts etcd responses to events until the watch ends, then records
// why and closes events.
func (w *watcher) run(ch clientv3.WatchChan) {
	defer close(w.events)
	defer w.cancel()
	for resp := range ch {
		if err := resp.Err(); err != nil {
			w.fail(mapError(err))
			return
		}
		for _, ev := range resp.Events {
			select {
			case w.events <- toEvent(ev):
			case <-w.ctx.Done():
				return
			}
		}
	}
	w.fail(fmt.Errorf("etcd: watch channel closed"))
}

// fail records err unless the watch was stopped or its context ended, in
// which case the end is not an error.
func (w *watcher) fail(err error) {
	if w.ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

func toEvent(ev *clientv3.Event) storage.Event {
	var prev []byte
	if ev.PrevKv != nil {
		prev = ev.PrevKv.Value
	}
	if ev.Type == clientv3.EventTypeDelete {
		// etcd reports a deletion with an empty value; the contract wants
		// the value the key had.
		kv := storage.KV{Key: string(ev.Kv.Key), Value: prev, ModRevision: ev.Kv.ModRevision}
		if ev.PrevKv != nil {
			kv.CreateRevision = ev.PrevKv.CreateRevision
		}
		return storage.Event{Type: storage.Delete, KV: kv, PrevValue: prev}
	}
	return storage.Event{Type: storage.Put, KV: toKV(ev.Kv), PrevValue: prev, Created: ev.IsCreate()}
}

func (w *watcher) Events() <-chan storage.Event { return w.events }

func (w *watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watch; Events is closed soon after and Err stays nil.
func (w *watcher) Stop() { w.cancel() }
