package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/registry"
	"knode/internal/registry/node"
	"knode/internal/registry/pod"
	"knode/internal/storage"
	"knode/internal/storage/memory"
)

// cacheFixture is a server of pods over a memory store whose pod cache has
// a window of 4 events and lets a watcher fall 2 events behind.
type cacheFixture struct {
	t     *testing.T
	ctx   context.Context
	store *memory.Store
	st    *objectStore
	c     *watchCache
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	store := memory.New(memory.Config{})
	s, err := New(Config{Storage: store, Kinds: []registry.Kind{pod.Kind()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	st := s.stores[corev1.SchemeGroupVersion.WithResource("pods")]
	st.cache.windowSize, st.cache.backlog = 4, 2
	f := &cacheFixture{t: t, ctx: context.Background(), store: store, st: st, c: st.cache}
	if _, _, err := f.c.list(f.ctx, st.prefix, everything(), true, 0); err != nil {
		t.Fatal(err)
	}
	return f
}

func everything() selector {
	return selector{labels: labels.Everything(), fields: fields.Everything()}
}

// create stores a pod and returns its revision once the cache has it.
func (f *cacheFixture) create(name string) int64 {
	f.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	obj, err := f.st.Create(f.ctx, "default", p, createOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	rev := obj.(*corev1.Pod).ResourceVersion
	var n int64
	fmt.Sscan(rev, &n)
	if err := f.c.waitFresh(f.ctx, n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// replay is the names a watch from start is first given.
func (f *cacheFixture) replay(start int64) ([]string, error) {
	w, _, _, err := f.c.watchFrom(f.ctx, f.st.prefix, everything(), start, false, true)
	if err != nil {
		return nil, err
	}
	defer f.c.stopWatcher(w)
	events, _ := w.take()
	var names []string
	for _, ev := range events {
		typ, obj := w.convert(f.st, ev)
		if typ != watch.Added {
			f.t.Fatalf("replayed %s, want ADDED", typ)
		}
		names = append(names, obj.(*corev1.Pod).Name)
	}
	return names, nil
}

// The window keeps the last 4 events as it wraps; a watch resumes from
// any revision inside it, in order, and from before it gets errTooOld.
// Compaction moves the window's start.
func TestCacheWindowWrapsAndCompacts(t *testing.T) {
	f := newCacheFixture(t)
	revs := map[string]int64{}
	for i := 1; i <= 10; i++ {
		name := fmt.Sprintf("p%02d", i)
		revs[name] = f.create(name)
	}
	got, err := f.replay(revs["p06"])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[p07 p08 p09 p10]" {
		t.Errorf("watch from p06's revision replays %v, want [p07 p08 p09 p10]", got)
	}
	if _, err := f.replay(revs["p05"]); !errors.Is(err, errTooOld) {
		t.Errorf("watch from p05's revision (before the window): %v, want errTooOld", err)
	}
	got, err = f.replay(revs["p10"])
	if err != nil || len(got) != 0 {
		t.Errorf("watch from the latest revision replays %v, %v; want nothing", got, err)
	}

	f.c.compacted(revs["p09"])
	if _, err := f.replay(revs["p07"]); !errors.Is(err, errTooOld) {
		t.Errorf("after compacting to p09, watch from p07: %v, want errTooOld", err)
	}
	got, err = f.replay(revs["p08"])
	if err != nil || fmt.Sprint(got) != "[p09 p10]" {
		t.Errorf("after compacting to p09, watch from p08 replays %v, %v; want [p09 p10]", got, err)
	}
	// Events keep coming after the trim, and the ring still wraps.
	for i := 11; i <= 16; i++ {
		name := fmt.Sprintf("p%02d", i)
		revs[name] = f.create(name)
	}
	got, err = f.replay(revs["p12"])
	if err != nil || fmt.Sprint(got) != "[p13 p14 p15 p16]" {
		t.Errorf("watch from p12 replays %v, %v; want [p13 p14 p15 p16]", got, err)
	}
}

// A watcher that falls more than its backlog behind is ended after the
// events it holds, and leaves the cache.
func TestCacheEndsWatcherThatFallsBehind(t *testing.T) {
	f := newCacheFixture(t)
	w, _, _, err := f.c.watchFrom(f.ctx, f.st.prefix, everything(), 0, true, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		f.create(fmt.Sprintf("p%d", i))
	}
	events, ended := w.take()
	if len(events) != 2 || !ended {
		t.Errorf("watcher holds %d events, ended %v; want 2 and ended", len(events), ended)
	}
	f.c.mu.Lock()
	_, still := f.c.watchers[w]
	f.c.mu.Unlock()
	if still {
		t.Error("an ended watcher is still registered")
	}
}

// Pods are indexed by spec.nodeName and nodes by name, so a watcher pinned
// to either is handed only the events of its own objects.
func TestIndexedWatchersHearOnlyTheirOwn(t *testing.T) {
	ctx := context.Background()
	store := memory.New(memory.Config{})
	s, err := New(Config{Storage: store, Kinds: []registry.Kind{pod.Kind(), node.Kind()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pods := s.stores[corev1.SchemeGroupVersion.WithResource("pods")]
	nodes := s.stores[corev1.SchemeGroupVersion.WithResource("nodes")]
	if pods.cache.indexField != nodeNameField || nodes.cache.indexField != nameField {
		t.Fatalf("indexed fields: pods %q, nodes %q; want %q and %q", pods.cache.indexField, nodes.cache.indexField, nodeNameField, nameField)
	}
	pinned := func(field, value string) selector {
		return selector{labels: labels.Everything(), fields: fields.OneTermEqualSelector(field, value)}
	}
	watchers := map[string]*cacheWatcher{}
	for _, name := range []string{"n1", "n2"} {
		w, _, _, err := nodes.cache.watchFrom(ctx, nodes.prefix, pinned(nameField, name), 0, true, true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nodes.cache.stopWatcher(w) })
		watchers[name] = w
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		if _, err := nodes.Create(ctx, "", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, createOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel := func(cur runtime.Object) (runtime.Object, error) {
		n := cur.(*corev1.Node).DeepCopy()
		n.Labels = map[string]string{"changed": "yes"}
		return n, nil
	}
	if _, err := nodes.Update(ctx, "", "n2", relabel, updateOptions{}); err != nil {
		t.Fatal(err)
	}
	rev, err := store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := nodes.cache.waitFresh(ctx, rev); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"n1": 1, "n2": 2} {
		events, _ := watchers[name].take()
		if len(events) != want {
			t.Errorf("watcher of %s was handed %d events, want %d (its own only)", name, len(events), want)
		}
		for _, ev := range events {
			if !strings.HasSuffix(ev.key, "/"+name) {
				t.Errorf("watcher of %s was handed %s", name, ev.key)
			}
		}
	}
}

// stalledStore is a store whose watches never deliver an event, as an etcd
// watch that has stopped making progress.
type stalledStore struct{ storage.Interface }

type stalledWatch struct{ events chan storage.Event }

func (w stalledWatch) Events() <-chan storage.Event { return w.events }
func (w stalledWatch) Err() error                   { return nil }
func (w stalledWatch) Stop()                        {}

func (s stalledStore) Watch(ctx context.Context, prefix string, from int64) (storage.Watcher, error) {
	return stalledWatch{events: make(chan storage.Event)}, nil
}

// A consistent list whose cache cannot catch up with the store is served
// from storage after freshWait on the server's clock.
func TestConsistentListFallsBackToStorage(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	s, err := New(Config{Storage: stalledStore{memory.New(memory.Config{})}, Kinds: []registry.Kind{pod.Kind()}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	st := s.stores[corev1.SchemeGroupVersion.WithResource("pods")]
	if _, _, err := st.cache.list(ctx, st.prefix, everything(), true, 0); err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := st.Create(ctx, "default", p, createOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/pods", nil)
		if err := s.list(ctx, rec, r, st, "default"); err != nil {
			t.Error(err)
		}
		done <- rec
	}()
	// The list waits on the clock until freshWait has passed.
	for !clk.HasWaiters() {
		goruntime.Gosched()
	}
	select {
	case <-done:
		t.Fatal("the list answered before the cache caught up or freshWait passed")
	default:
	}
	clk.Step(freshWait)
	rec := <-done
	var list corev1.PodList
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
		t.Fatalf("decoding %q: %v", rec.Body.String(), err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("list after the fallback = %v, want the pod only storage has", list.Items)
	}
}
