// Package memory is an in-process storage.Interface with etcd's semantics,
// for unit tests and the simulator.
//
// What it owns: one store-wide revision that starts at 1 with nothing written
// and grows by one on every write; per-key CreateRevision and ModRevision;
// compare-and-swap updates and deletes; reads at any revision back to the
// compaction point; and a history of every event since the last compaction,
// from which watches replay before they go live.
//
// Costs: finding one key (Get, Update, Delete, and Create of a key already
// indexed) is O(1) expected through a hash index; adding a key to the ordered
// index or removing it from there is O(log n) in the number of keys. Every
// write also costs O(p) in the number of distinct watch prefixes (each prefix
// with watchers is matched once). A list is O(log n + k) for k keys under the
// prefix, and a continued list O(1 + k) while its last key is still indexed.
// Compact walks every key.
//
// What callers must do: treat Value and PrevValue in watch events as
// read-only, because one event is shared by every watcher and the history.
// Values returned by Get, List and Delete are the caller's to keep. Read from
// or Stop every watcher: a watcher buffers without bound rather than block
// writers, so an abandoned watcher holds memory until it is stopped.
//
// What it does not do: persist anything, or compact by itself (see
// storage.Compactor).
package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"knode/internal/storage"
)

// ErrClosed is returned by every call on a closed Store, and ends its
// watchers.
var ErrClosed = errors.New("memory: store closed")

// Config configures a Store. The zero value is ready to use.
type Config struct{}

// Store is the in-memory implementation of storage.Interface.
type Store struct {
	mu sync.RWMutex
	// rev is the store revision: the revision of the last write, 1 before
	// any write.
	rev int64
	// compacted is the revision of the last compaction; 0 when never
	// compacted. Reads below it fail with ErrCompacted.
	compacted int64
	keys      *skiplist
	// history holds the event of every revision from historyStart to rev:
	// history[i] is the event of revision historyStart+i. Invariant:
	// historyStart == max(2, compacted).
	history      []storage.Event
	historyStart int64
	// watchers groups live watchers by prefix, so a write matches each
	// distinct prefix once.
	watchers map[string]map[*watcher]struct{}
	closed   bool
}

var _ storage.Interface = (*Store)(nil)

// record is every retained version of one key, oldest first. Invariant:
// versions is never empty while the record is in the index, and holds no
// version older than the one a read at the compaction revision sees.
type record struct {
	versions []version
}

type version struct {
	rev            int64
	createRevision int64 // 0 for a tombstone
	value          []byte
	deleted        bool
}

// at returns the version visible at revision rev, if the key existed then.
func (r *record) at(rev int64) (version, bool) {
	i := sort.Search(len(r.versions), func(i int) bool { return r.versions[i].rev > rev })
	if i == 0 {
		return version{}, false
	}
	v := r.versions[i-1]
	return v, !v.deleted
}

// latest returns the current version, if the key exists now.
func (r *record) latest() (version, bool) {
	if r == nil {
		return version{}, false
	}
	v := r.versions[len(r.versions)-1]
	return v, !v.deleted
}

// New returns an empty store at revision 1.
func New(cfg Config) *Store {
	return &Store{
		rev:          1,
		keys:         newSkiplist(),
		historyStart: 2,
		watchers:     map[string]map[*watcher]struct{}{},
	}
}

func (v version) kv(key string) storage.KV {
	return storage.KV{
		Key:            key,
		Value:          append([]byte{}, v.value...),
		CreateRevision: v.createRevision,
		ModRevision:    v.rev,
	}
}

// Create implements storage.Interface.
func (s *Store) Create(ctx context.Context, key string, value []byte) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	rec := s.keys.get(key)
	if _, ok := rec.latest(); ok {
		return 0, fmt.Errorf("%w: %q", storage.ErrExists, key)
	}
	rev := s.rev + 1
	v := version{rev: rev, createRevision: rev, value: append([]byte{}, value...)}
	if rec == nil {
		rec = &record{}
		s.keys.insert(key, rec)
	}
	rec.versions = append(rec.versions, v)
	s.commit(storage.Event{
		Type:    storage.Put,
		KV:      storage.KV{Key: key, Value: v.value, CreateRevision: rev, ModRevision: rev},
		Created: true,
	})
	return rev, nil
}

// Get implements storage.Interface.
func (s *Store) Get(ctx context.Context, key string) (storage.KV, error) {
	if err := ctx.Err(); err != nil {
		return storage.KV{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return storage.KV{}, ErrClosed
	}
	v, ok := s.keys.get(key).latest()
	if !ok {
		return storage.KV{}, fmt.Errorf("%w: %q", storage.ErrNotFound, key)
	}
	return v.kv(key), nil
}

// Update implements storage.Interface.
func (s *Store) Update(ctx context.Context, key string, value []byte, expected int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	rec := s.keys.get(key)
	cur, err := checkPrecondition(rec, key, expected)
	if err != nil {
		return 0, err
	}
	rev := s.rev + 1
	v := version{rev: rev, createRevision: cur.createRevision, value: append([]byte{}, value...)}
	rec.versions = append(rec.versions, v)
	s.commit(storage.Event{
		Type:      storage.Put,
		KV:        storage.KV{Key: key, Value: v.value, CreateRevision: v.createRevision, ModRevision: rev},
		PrevValue: cur.value,
	})
	return rev, nil
}

// Delete implements storage.Interface.
func (s *Store) Delete(ctx context.Context, key string, expected int64) (storage.KV, error) {
	if err := ctx.Err(); err != nil {
		return storage.KV{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return storage.KV{}, ErrClosed
	}
	rec := s.keys.get(key)
	cur, err := checkPrecondition(rec, key, expected)
	if err != nil {
		return storage.KV{}, err
	}
	rev := s.rev + 1
	rec.versions = append(rec.versions, version{rev: rev, deleted: true})
	s.commit(storage.Event{
		Type:      storage.Delete,
		KV:        storage.KV{Key: key, Value: cur.value, CreateRevision: cur.createRevision, ModRevision: rev},
		PrevValue: cur.value,
	})
	kv := cur.kv(key)
	kv.ModRevision = rev
	return kv, nil
}

// checkPrecondition returns the current version of rec, or ErrNotFound when
// the key is absent and ErrConflict when expected is set and differs.
func checkPrecondition(rec *record, key string, expected int64) (version, error) {
	cur, ok := rec.latest()
	if !ok {
		return version{}, fmt.Errorf("%w: %q", storage.ErrNotFound, key)
	}
	if expected != 0 && cur.rev != expected {
		return version{}, fmt.Errorf("%w: %q is at revision %d, not %d", storage.ErrConflict, key, cur.rev, expected)
	}
	return cur, nil
}

// commit advances the revision to ev's, records ev in the history and hands
// it to every watcher whose prefix matches. Caller holds s.mu for writing.
func (s *Store) commit(ev storage.Event) {
	s.rev = ev.KV.ModRevision
	s.history = append(s.history, ev)
	for prefix, ws := range s.watchers {
		if !strings.HasPrefix(ev.KV.Key, prefix) {
			continue
		}
		for w := range ws {
			w.push(ev)
		}
	}
}

// List implements storage.Interface.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (storage.ListResult, error) {
	if err := ctx.Err(); err != nil {
		return storage.ListResult{}, err
	}
	if opts.Limit < 0 {
		return storage.ListResult{}, fmt.Errorf("storage: limit %d must not be negative", opts.Limit)
	}
	if opts.Revision < 0 {
		return storage.ListResult{}, fmt.Errorf("storage: revision %d must not be negative", opts.Revision)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return storage.ListResult{}, ErrClosed
	}

	rev := opts.Revision
	var start *skipNode
	if opts.Continue != "" {
		lastKey, tokenRev, err := storage.DecodeContinue(opts.Continue, prefix)
		if err != nil {
			return storage.ListResult{}, err
		}
		if rev != 0 && rev != tokenRev {
			return storage.ListResult{}, fmt.Errorf("%w: token reads at revision %d, options ask for %d", storage.ErrInvalidContinue, tokenRev, rev)
		}
		rev = tokenRev
		start = s.keys.seekAfter(lastKey)
	} else {
		start = s.keys.seek(prefix)
	}
	if rev == 0 {
		rev = s.rev
	}
	if err := s.checkReadable(rev); err != nil {
		return storage.ListResult{}, err
	}

	res := storage.ListResult{Revision: rev, Items: []storage.KV{}}
	var remaining int64
	for n := start; n != nil && strings.HasPrefix(n.key, prefix); n = n.next[0] {
		v, ok := n.rec.at(rev)
		if !ok {
			continue
		}
		if opts.Limit > 0 && int64(len(res.Items)) >= opts.Limit {
			remaining++
			continue
		}
		res.Items = append(res.Items, v.kv(n.key))
	}
	if remaining > 0 {
		res.Continue = storage.EncodeContinue(res.Items[len(res.Items)-1].Key, rev)
		res.RemainingItemCount = &remaining
	}
	return res, nil
}

// checkReadable reports whether revision rev can be read. Caller holds s.mu.
func (s *Store) checkReadable(rev int64) error {
	if rev > s.rev {
		return fmt.Errorf("%w: revision %d, store is at %d", storage.ErrFutureRevision, rev, s.rev)
	}
	if rev < s.compacted {
		return fmt.Errorf("%w: revision %d, compacted at %d", storage.ErrCompacted, rev, s.compacted)
	}
	return nil
}

// Revision implements storage.Interface.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, ErrClosed
	}
	return s.rev, nil
}

// Compact implements storage.Interface with etcd's rules: revision must be
// above the last compaction (ErrCompacted otherwise) and not above the
// store revision (ErrFutureRevision). Reads and watches may still start at
// exactly the compaction revision.
func (s *Store) Compact(ctx context.Context, revision int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if revision <= s.compacted {
		return fmt.Errorf("%w: revision %d, already compacted at %d", storage.ErrCompacted, revision, s.compacted)
	}
	if revision > s.rev {
		return fmt.Errorf("%w: cannot compact at %d, store is at %d", storage.ErrFutureRevision, revision, s.rev)
	}
	s.compacted = revision

	var gone []string
	for n := s.keys.first(); n != nil; n = n.next[0] {
		if dropBefore(n.rec, revision) {
			gone = append(gone, n.key)
		}
	}
	for _, k := range gone {
		s.keys.remove(k)
	}

	if start := max(2, revision); start > s.historyStart {
		s.history = append([]storage.Event(nil), s.history[start-s.historyStart:]...)
		s.historyStart = start
	}
	return nil
}

// dropBefore removes the versions of rec that no read at or after revision
// can see, and reports whether nothing is left.
func dropBefore(rec *record, revision int64) bool {
	vs := rec.versions
	// i is the first version newer than revision; vs[i-1] is the one a
	// read at revision sees.
	i := sort.Search(len(vs), func(i int) bool { return vs[i].rev > revision })
	if i == 0 {
		return false
	}
	keep := i - 1
	if vs[keep].deleted {
		keep = i
	}
	if keep > 0 {
		rec.versions = append([]version(nil), vs[keep:]...)
	}
	return len(rec.versions) == 0
}

// Close ends every watcher with ErrClosed; later calls fail with ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var all []*watcher
	for _, ws := range s.watchers {
		for w := range ws {
			all = append(all, w)
		}
	}
	s.watchers = map[string]map[*watcher]struct{}{}
	s.mu.Unlock()
	for _, w := range all {
		w.end(ErrClosed)
	}
	return nil
}
