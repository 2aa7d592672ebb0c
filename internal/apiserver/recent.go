package apiserver

import (
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
)

// maxRecentObjects bounds recentObjects; it is cleared when full.
const maxRecentObjects = 65536

// recentObjects maps storage keys to the last version of the object this
// server read or wrote. Entries may be stale when other servers write the
// same store; callers must let a compare-and-swap decide.
type recentObjects struct {
	mu    sync.Mutex
	items map[string]recentEntry
}

type recentEntry struct {
	rev  int64
	obj  runtime.Object // shared: nobody may change it
	data []byte         // the stored value (read-only)
}

func newRecentObjects() *recentObjects {
	return &recentObjects{items: map[string]recentEntry{}}
}

// lookup returns the remembered object of key, its revision and its stored
// value. With wantRV set, only a version with that resourceVersion is
// returned. As with peek, the object is shared and must not change.
func (r *recentObjects) lookup(key, wantRV string) (runtime.Object, int64, []byte, bool) {
	r.mu.Lock()
	e, ok := r.items[key]
	r.mu.Unlock()
	if !ok || (wantRV != "" && !isRevision(wantRV, e.rev)) {
		return nil, 0, nil, false
	}
	return e.obj, e.rev, e.data, true
}

// peek returns the remembered object of key if its revision is rev, without
// copying it: the caller must not change or hand out what it gets.
func (r *recentObjects) peek(key string, rev int64) (runtime.Object, bool) {
	r.mu.Lock()
	e, ok := r.items[key]
	r.mu.Unlock()
	if !ok || e.rev != rev {
		return nil, false
	}
	return e.obj, true
}

// remember records obj, stored as data, as key's version rev, unless a
// newer one is known. data must not change afterwards.
func (r *recentObjects) remember(key string, rev int64, obj runtime.Object, data []byte) {
	r.keep(key, rev, obj.DeepCopyObject(), data)
}

// keep is remember without the copy: obj is shared from then on, and
// neither the caller nor anyone it hands obj to may change it.
func (r *recentObjects) keep(key string, rev int64, obj runtime.Object, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.items[key]; ok && e.rev >= rev {
		return
	}
	if len(r.items) >= maxRecentObjects {
		clear(r.items)
	}
	r.items[key] = recentEntry{rev: rev, obj: obj, data: data}
}

func (r *recentObjects) forget(key string) {
	r.mu.Lock()
	delete(r.items, key)
	r.mu.Unlock()
}

// isRevision reports whether rv is rev written in decimal, as
// resourceVersions are, without making that string.
func isRevision(rv string, rev int64) bool {
	var buf [20]byte
	return string(strconv.AppendInt(buf[:0], rev, 10)) == rv
}
