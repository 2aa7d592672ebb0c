package memory

import (
	"fmt"
	"strings"

	"knode/internal/storage"
)

// Changes returns, synchronously, every event under prefix with a revision
// above after, in revision order, and the store revision they run up to.
// It is the simulator's way of following the store without a watch
// goroutine: when a write has returned, the next Changes call sees it.
// after must not be below the compaction point (ErrCompacted) nor above
// the store revision (ErrFutureRevision). The events are shared with the
// history and with watchers: treat them as read-only.
func (s *Store) Changes(prefix string, after int64) ([]storage.Event, int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, 0, ErrClosed
	}
	if after > s.rev {
		return nil, 0, fmt.Errorf("%w: changes after %d, store is at %d", storage.ErrFutureRevision, after, s.rev)
	}
	if after+1 < s.compacted {
		return nil, 0, fmt.Errorf("%w: changes after %d, compacted at %d", storage.ErrCompacted, after, s.compacted)
	}
	start := after + 1 - s.historyStart
	if start < 0 {
		start = 0
	}
	var out []storage.Event
	for _, ev := range s.history[start:] {
		if strings.HasPrefix(ev.KV.Key, prefix) {
			out = append(out, ev)
		}
	}
	return out, s.rev, nil
}
