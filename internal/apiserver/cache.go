package apiserver

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"knode/internal/storage"
)

// The watch caches keep the decoded objects of each resource in memory.
// One storage watch of the whole store (the cache hub) feeds them all, so
// that a thousand watching agents cost the store one watch rather than a
// thousand, and so that the hub's revision follows the store's: a read that
// must be current waits until the hub has seen the store's revision.
//
// A resource's cache serves:
//
//   - lists without pagination (resourceVersion "" once the hub has caught
//     up with the store, "0" at once);
//   - lists selected by the indexed field (a pod's spec.nodeName, any
//     other object's metadata.name), from an index rather than a scan;
//   - watches from any revision inside its window of recent events, and
//     watches that start with the current state.
//
// Gets, paginated lists and lists at an exact revision read storage, as do
// watches from before a cache's window. A cache fills on the first request
// that needs it. When the hub's watch fails, every cache empties and ends
// its watchers (whose clients re-watch), and fills again on demand.

const (
	// cacheWindow is the number of recent events a cache keeps, so that
	// a watcher may resume from a revision in the recent past.
	cacheWindow = 8192
	// maxWatcherBacklog is the number of undelivered events after which a
	// watcher that does not keep up is ended; its client re-watches from
	// the last revision it saw.
	maxWatcherBacklog = 16384
	// cacheRetry is the pause before a failed hub watches again.
	cacheRetry = time.Second
	// fillPageSize is the page size of the list that fills a cache.
	fillPageSize = 1000
)

// The indexed field of a kind is the one whose exact-match selectors are
// answered from an index: every agent lists and watches its own pods by
// spec.nodeName, and its own Node by metadata.name. Kinds without
// spec.nodeName are indexed by name.
const (
	nodeNameField = "spec.nodeName"
	nameField     = "metadata.name"
)

// errTooOld: the revision asked for is older than the cache's window.
var errTooOld = errors.New("revision older than the watch cache")

var errStopping = errors.New("server is shutting down")

// errNotFresh: the cache did not reach the revision a consistent list
// needs within freshWait; the list is then served from storage, as
// upstream falls back to etcd.
var errNotFresh = errors.New("watch cache is not fresh enough")

// freshWait is how long a consistent list waits for its cache to reach
// the store's revision before it reads storage instead (upstream's 3 s).
const freshWait = 3 * time.Second

// cacheHub follows the store with one watch and feeds the caches.
type cacheHub struct {
	storage  storage.Interface
	clock    clock.WithTicker
	log      *slog.Logger
	stopping <-chan struct{}

	startOnce sync.Once
	starts    chan fillRequest
	// rev: every write up to rev has reached the caches.
	rev     atomic.Int64
	waiters atomic.Int64
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when rev or a cache changes
	// caches by storage prefix; only the hub's goroutine uses it.
	caches map[string][]*watchCache
}

type fillRequest struct {
	c    *watchCache
	done chan error
}

func newCacheHub(s storage.Interface, c clock.WithTicker, log *slog.Logger, stopping <-chan struct{}) *cacheHub {
	return &cacheHub{
		storage: s, clock: c, log: log, stopping: stopping,
		starts:  make(chan fillRequest),
		changed: make(chan struct{}),
		caches:  map[string][]*watchCache{},
	}
}

// notify wakes every waiter.
func (h *cacheHub) notify() {
	if h.waiters.Load() == 0 {
		return
	}
	h.mu.Lock()
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// waitFor waits until cond holds; cond is checked after every change. It
// gives up with errNotFresh when giveUp fires (nil: never).
func (h *cacheHub) waitFor(ctx context.Context, cond func() bool, giveUp <-chan time.Time) error {
	h.waiters.Add(1)
	defer h.waiters.Add(-1)
	for {
		h.mu.Lock()
		ch := h.changed
		h.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-giveUp:
			return errNotFresh
		case <-ctx.Done():
			return ctx.Err()
		case <-h.stopping:
			return errStopping
		}
	}
}

// run follows the store until the server stops.
func (h *cacheHub) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-h.stopping
		cancel()
	}()
	for ctx.Err() == nil {
		err := h.follow(ctx)
		for _, cs := range h.caches {
			for _, c := range cs {
				c.reset()
			}
		}
		clear(h.caches)
		h.notify()
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("watch cache restarting", "err", err)
		t := h.clock.NewTimer(cacheRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// follow watches the whole store from its current revision, routing every
// event to the caches of its resource and filling caches on request, until
// the watch fails.
func (h *cacheHub) follow(ctx context.Context) error {
	rev, err := h.storage.Revision(ctx)
	if err != nil {
		return err
	}
	w, err := h.storage.Watch(ctx, "", rev)
	if err != nil {
		return err
	}
	defer w.Stop()
	if rev > h.rev.Load() {
		h.rev.Store(rev)
	}
	h.notify()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case req := <-h.starts:
			err := req.c.fill(ctx)
			if err == nil && !slices.Contains(h.caches[req.c.st.prefix], req.c) {
				h.caches[req.c.st.prefix] = append(h.caches[req.c.st.prefix], req.c)
			}
			req.done <- err
			h.notify()
		case ev, ok := <-w.Events():
			if !ok {
				if err := w.Err(); err != nil {
					return err
				}
				return errors.New("storage watch ended")
			}
			for _, c := range h.caches[resourcePrefix(ev.KV.Key)] {
				if err := c.apply(ev); err != nil {
					return err
				}
			}
			h.rev.Store(ev.KV.ModRevision)
			h.notify()
		}
	}
}

// resourcePrefix is the "/registry/<resource>/" part of a storage key.
func resourcePrefix(key string) string {
	const root = "/registry/"
	if !strings.HasPrefix(key, root) {
		return ""
	}
	i := strings.IndexByte(key[len(root):], '/')
	if i < 0 {
		return ""
	}
	return key[:len(root)+i+1]
}

type cacheEntry struct {
	key   string
	obj   runtime.Object // shared and read-only
	index string         // value of the indexed field
}

// cacheEvent is one change, decoded once and shared by every watcher.
type cacheEvent struct {
	key  string
	rev  int64
	typ  watch.EventType // Added, Modified or Deleted
	obj  runtime.Object  // after the change; for a deletion the last state, at the deletion's revision
	prev runtime.Object  // before the change; nil for a creation
	// index and prevIndex are the indexed field's values of obj and prev.
	index, prevIndex string
}

// watchCache is the cache of one resource.
type watchCache struct {
	st  *objectStore
	hub *cacheHub
	// indexField is nodeNameField or nameField.
	indexField string
	// windowSize and backlog are cacheWindow and maxWatcherBacklog, but
	// for tests.
	windowSize, backlog int

	mu    sync.Mutex
	ready bool
	// rev is the revision of the fill or of the last event applied; the
	// cache is current at the larger of rev and the hub's revision.
	rev     int64
	items   map[string]*cacheEntry
	byIndex map[string]map[string]*cacheEntry
	// window holds the latest events in a ring; every event after
	// windowStart is in it.
	window      []cacheEvent
	head, size  int
	windowStart int64
	watchers    map[*cacheWatcher]struct{}
	byWatchIdx  map[string]map[*cacheWatcher]struct{}
}

func newWatchCache(st *objectStore, hub *cacheHub) *watchCache {
	field := nameField
	if _, ok := st.fieldSet(st.kind.New())[nodeNameField]; ok {
		field = nodeNameField
	}
	return &watchCache{
		st: st, hub: hub, indexField: field,
		windowSize: cacheWindow, backlog: maxWatcherBacklog,
		watchers:   map[*cacheWatcher]struct{}{},
		byWatchIdx: map[string]map[*cacheWatcher]struct{}{},
	}
}

// indexOf is obj's value of the indexed field.
func (c *watchCache) indexOf(obj runtime.Object) string {
	if obj == nil {
		return ""
	}
	if c.indexField == nameField {
		if m, ok := obj.(metav1.Object); ok {
			return m.GetName()
		}
	}
	return c.st.fieldSet(obj)[c.indexField]
}

// currentLocked is the revision the cache is current at.
func (c *watchCache) currentLocked() int64 {
	return max(c.rev, c.hub.rev.Load())
}

func (c *watchCache) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready
}

// waitReady fills the cache if it is empty.
func (c *watchCache) waitReady(ctx context.Context) error {
	for !c.isReady() {
		c.hub.startOnce.Do(func() { go c.hub.run() })
		req := fillRequest{c: c, done: make(chan error, 1)}
		select {
		case c.hub.starts <- req:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.hub.stopping:
			return errStopping
		}
		if err := <-req.done; err != nil {
			return err
		}
	}
	return nil
}

// waitFresh waits until the cache is current at rev, a revision the store
// has reached.
func (c *watchCache) waitFresh(ctx context.Context, rev int64) error {
	return c.waitFreshWithin(ctx, rev, 0)
}

// waitFreshWithin is waitFresh giving up after limit on the server's clock
// (0: never) with errNotFresh. The timer is made only when the cache has
// to be waited for.
func (c *watchCache) waitFreshWithin(ctx context.Context, rev int64, limit time.Duration) error {
	var giveUp <-chan time.Time
	for {
		if err := c.waitReady(ctx); err != nil {
			return err
		}
		fresh, ready := false, true
		check := func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			ready = c.ready
			fresh = c.ready && c.currentLocked() >= rev
			return fresh || !ready
		}
		if check() && fresh {
			return nil
		}
		if limit > 0 && giveUp == nil {
			t := c.hub.clock.NewTimer(limit)
			defer t.Stop()
			giveUp = t.C()
		}
		err := c.hub.waitFor(ctx, check, giveUp)
		if err != nil || fresh {
			return err
		}
	}
}

// fill lists the resource at the store's latest revision; the hub then
// applies the events after it. It runs on the hub's goroutine.
func (c *watchCache) fill(ctx context.Context) error {
	if c.isReady() {
		return nil
	}
	items := map[string]*cacheEntry{}
	byIndex := map[string]map[string]*cacheEntry{}
	var rev int64
	opts := storage.ListOptions{Limit: fillPageSize}
	for {
		page, err := c.st.storage.List(ctx, c.st.prefix, opts)
		if err != nil {
			return err
		}
		rev = page.Revision
		for _, kv := range page.Items {
			obj, err := c.st.decodeShared(kv)
			if err != nil {
				return err
			}
			e := &cacheEntry{key: kv.Key, obj: obj, index: c.indexOf(obj)}
			items[kv.Key] = e
			addIndexed(byIndex, e)
		}
		if page.Continue == "" {
			break
		}
		opts = storage.ListOptions{Limit: fillPageSize, Continue: page.Continue}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items, c.byIndex, c.rev, c.windowStart = items, byIndex, rev, rev
	c.window, c.head, c.size = make([]cacheEvent, c.windowSize), 0, 0
	c.ready = true
	return nil
}

// compacted drops the events a watch from before revision would need,
// matching a store compacted to revision.
func (c *watchCache) compacted(revision int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || revision-1 <= c.windowStart {
		return
	}
	c.windowStart = revision - 1
	for c.size > 0 && c.window[c.head].rev <= c.windowStart {
		c.window[c.head] = cacheEvent{}
		c.head = (c.head + 1) % len(c.window)
		c.size--
	}
}

// reset empties the cache and ends its watchers.
func (c *watchCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ready = false
	c.items, c.byIndex, c.window = nil, nil, nil
	for w := range c.watchers {
		w.end()
	}
	for _, ws := range c.byWatchIdx {
		for w := range ws {
			w.end()
		}
	}
	clear(c.watchers)
	clear(c.byWatchIdx)
}

func addIndexed(byIndex map[string]map[string]*cacheEntry, e *cacheEntry) {
	if e.index == "" {
		return
	}
	m := byIndex[e.index]
	if m == nil {
		m = map[string]*cacheEntry{}
		byIndex[e.index] = m
	}
	m[e.key] = e
}

func removeIndexed(byIndex map[string]map[string]*cacheEntry, e *cacheEntry) {
	if m := byIndex[e.index]; m != nil {
		delete(m, e.key)
		if len(m) == 0 {
			delete(byIndex, e.index)
		}
	}
}

// apply decodes one storage event, updates the objects and the window and
// hands the event to the watchers it may concern.
func (c *watchCache) apply(ev storage.Event) error {
	rev := ev.KV.ModRevision
	c.mu.Lock()
	old, seen := c.items[ev.KV.Key], rev <= c.rev || !c.ready
	c.mu.Unlock()
	if seen {
		// The fill's list already holds it.
		return nil
	}
	ce := cacheEvent{key: ev.KV.Key, rev: rev}
	if old != nil {
		ce.prev, ce.prevIndex = old.obj, old.index
	}
	if ev.Type == storage.Delete {
		if old == nil {
			obj, err := c.st.decode(ev.KV.Value, rev)
			if err != nil {
				return err
			}
			ce.prev, ce.prevIndex = obj, c.indexOf(obj)
		}
		ce.typ, ce.obj, ce.index = watch.Deleted, withRevision(ce.prev, rev), ce.prevIndex
	} else {
		obj, err := c.st.decodeShared(ev.KV)
		if err != nil {
			return err
		}
		ce.typ, ce.obj, ce.index = watch.Modified, obj, c.indexOf(obj)
		if old == nil {
			ce.typ = watch.Added
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old != nil {
		delete(c.items, ce.key)
		removeIndexed(c.byIndex, old)
	}
	if ce.typ != watch.Deleted {
		e := &cacheEntry{key: ce.key, obj: ce.obj, index: ce.index}
		c.items[ce.key] = e
		addIndexed(c.byIndex, e)
	}
	if c.size == len(c.window) {
		c.windowStart = c.window[c.head].rev
		c.head = (c.head + 1) % len(c.window)
		c.size--
	}
	c.window[(c.head+c.size)%len(c.window)] = ce
	c.size++
	c.rev = rev
	for w := range c.watchers {
		c.deliverLocked(w, ce)
	}
	for w := range c.byWatchIdx[ce.index] {
		c.deliverLocked(w, ce)
	}
	if ce.prevIndex != ce.index {
		for w := range c.byWatchIdx[ce.prevIndex] {
			c.deliverLocked(w, ce)
		}
	}
	return nil
}

// withRevision is a copy of obj carrying resourceVersion rev.
func withRevision(obj runtime.Object, rev int64) runtime.Object {
	cp := obj.DeepCopyObject()
	setRevision(cp, rev)
	return cp
}

// deliverLocked queues ev for w, ending w when it has fallen too far behind.
func (c *watchCache) deliverLocked(w *cacheWatcher, ev cacheEvent) {
	if !w.push(ev) {
		c.removeWatcherLocked(w)
	}
}

func (c *watchCache) removeWatcherLocked(w *cacheWatcher) {
	if w.index == "" {
		delete(c.watchers, w)
		return
	}
	if ws := c.byWatchIdx[w.index]; ws != nil {
		delete(ws, w)
		if len(ws) == 0 {
			delete(c.byWatchIdx, w.index)
		}
	}
}

// selectedIndex is the indexed field's value sel requires, if any.
func (c *watchCache) selectedIndex(sel selector) string {
	v, _ := sel.fields.RequiresExactMatch(c.indexField)
	return v
}

// get returns the cached object of key, shared and read-only, or
// storage.ErrNotFound.
func (c *watchCache) get(ctx context.Context, key string) (runtime.Object, error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil, errors.New("watch cache is restarting")
	}
	if e := c.items[key]; e != nil {
		return e.obj, nil
	}
	return nil, storage.ErrNotFound
}

// list returns the objects under prefix that sel matches, in key order,
// shared and read-only, and the cache revision they are current at.
// consistent first waits until the cache has reached the store's revision,
// giving up after limit (0: never) with errNotFresh.
func (c *watchCache) list(ctx context.Context, prefix string, sel selector, consistent bool, limit time.Duration) ([]runtime.Object, int64, error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, 0, err
	}
	if consistent {
		rev, err := c.st.storage.Revision(ctx)
		if err != nil {
			return nil, 0, err
		}
		if err := c.waitFreshWithin(ctx, rev, limit); err != nil {
			return nil, 0, err
		}
	}
	c.mu.Lock()
	entries := c.selectLocked(prefix, sel)
	rev := c.rev
	c.mu.Unlock()
	return sortedObjects(entries), rev, nil
}

func (c *watchCache) selectLocked(prefix string, sel selector) []*cacheEntry {
	var out []*cacheEntry
	keep := func(e *cacheEntry) {
		if strings.HasPrefix(e.key, prefix) && sel.matches(c.st, e.obj) {
			out = append(out, e)
		}
	}
	if v := c.selectedIndex(sel); v != "" {
		for _, e := range c.byIndex[v] {
			keep(e)
		}
		return out
	}
	for _, e := range c.items {
		keep(e)
	}
	return out
}

func sortedObjects(entries []*cacheEntry) []runtime.Object {
	slices.SortFunc(entries, func(a, b *cacheEntry) int { return strings.Compare(a.key, b.key) })
	out := make([]runtime.Object, len(entries))
	for i, e := range entries {
		out[i] = e.obj
	}
	return out
}

// watchFrom registers a watcher of prefix with sel. With initial, its
// first events are the current state (after waiting for the store's
// revision when consistent); otherwise it resumes after revision start, or
// fails with errTooOld when start is before the window.
func (c *watchCache) watchFrom(ctx context.Context, prefix string, sel selector, start int64, initial, consistent bool) (*cacheWatcher, []runtime.Object, int64, error) {
	if err := c.waitReady(ctx); err != nil {
		return nil, nil, 0, err
	}
	switch {
	case initial && consistent:
		rev, err := c.st.storage.Revision(ctx)
		if err != nil {
			return nil, nil, 0, err
		}
		if err := c.waitFresh(ctx, rev); err != nil {
			return nil, nil, 0, err
		}
	case !initial:
		rev, err := c.st.storage.Revision(ctx)
		if err != nil {
			return nil, nil, 0, err
		}
		if start > rev {
			return nil, nil, 0, storage.ErrFutureRevision
		}
		if err := c.waitFresh(ctx, start); err != nil {
			return nil, nil, 0, err
		}
	}
	w := &cacheWatcher{prefix: prefix, sel: sel, index: c.selectedIndex(sel), backlog: c.backlog, notify: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil, nil, 0, errors.New("watch cache is restarting")
	}
	var initialObjs []runtime.Object
	if initial {
		initialObjs, start = sortedObjects(c.selectLocked(prefix, sel)), c.currentLocked()
	} else {
		if start < c.windowStart {
			return nil, nil, 0, errTooOld
		}
		at := func(i int) cacheEvent { return c.window[(c.head+i)%len(c.window)] }
		for i := sort.Search(c.size, func(i int) bool { return at(i).rev > start }); i < c.size; i++ {
			w.queue = append(w.queue, at(i))
		}
	}
	if w.index == "" {
		c.watchers[w] = struct{}{}
	} else {
		ws := c.byWatchIdx[w.index]
		if ws == nil {
			ws = map[*cacheWatcher]struct{}{}
			c.byWatchIdx[w.index] = ws
		}
		ws[w] = struct{}{}
	}
	if len(w.queue) > 0 {
		w.notify <- struct{}{}
	}
	return w, initialObjs, start, nil
}

// stopWatcher unregisters w.
func (c *watchCache) stopWatcher(w *cacheWatcher) {
	c.mu.Lock()
	c.removeWatcherLocked(w)
	c.mu.Unlock()
}

// cacheWatcher is one watch served from the cache: the cache queues events
// without waiting, and the request's goroutine filters and writes them.
type cacheWatcher struct {
	prefix  string
	sel     selector
	index   string
	backlog int // maxWatcherBacklog

	mu     sync.Mutex
	queue  []cacheEvent
	ended  bool
	notify chan struct{}
}

// push queues ev; false when the watcher is ended, now or before.
func (w *cacheWatcher) push(ev cacheEvent) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return false
	}
	if len(w.queue) >= w.backlog {
		w.ended = true
	} else {
		w.queue = append(w.queue, ev)
	}
	select {
	case w.notify <- struct{}{}:
	default:
	}
	return !w.ended
}

// end stops w after the events already queued.
func (w *cacheWatcher) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether w has ended.
func (w *cacheWatcher) take() ([]cacheEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queue
	w.queue = nil
	return q, w.ended
}

// convert is what this watcher sees of ev: nil when nothing. An object that
// starts matching the selector is ADDED; one that stops is DELETED, with
// its previous state at the event's revision.
func (w *cacheWatcher) convert(st *objectStore, ev cacheEvent) (watch.EventType, runtime.Object) {
	if !strings.HasPrefix(ev.key, w.prefix) {
		return "", nil
	}
	switch ev.typ {
	case watch.Deleted:
		if w.sel.matches(st, ev.obj) {
			return watch.Deleted, ev.obj
		}
		return "", nil
	case watch.Added:
		if w.sel.matches(st, ev.obj) {
			return watch.Added, ev.obj
		}
		return "", nil
	}
	cur := w.sel.matches(st, ev.obj)
	if w.sel.empty() {
		return watch.Modified, ev.obj
	}
	old := w.sel.matches(st, ev.prev)
	switch {
	case cur && old:
		return watch.Modified, ev.obj
	case cur:
		return watch.Added, ev.obj
	case old:
		return watch.Deleted, withRevision(ev.prev, ev.rev)
	}
	return "", nil
}
