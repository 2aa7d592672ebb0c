package apiserver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"knode/internal/apitest"
	"knode/internal/storage"
	"knode/internal/storage/memory"
)

// countingStore counts the watches opened on each prefix.
type countingStore struct {
	storage.Interface
	mu      sync.Mutex
	watches map[string]int
}

func (c *countingStore) Watch(ctx context.Context, prefix string, from int64) (storage.Watcher, error) {
	c.mu.Lock()
	c.watches[prefix]++
	c.mu.Unlock()
	return c.Interface.Watch(ctx, prefix, from)
}

func (c *countingStore) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.watches {
		n += v
	}
	return n
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func rv(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return watch.Event{}
}

// Many watchers, of pods and of nodes, share a single storage watch, and
// each sees only its own node's pods.
func TestWatchersShareOneStorageWatch(t *testing.T) {
	store := &countingStore{Interface: memory.New(memory.Config{}), watches: map[string]int{}}
	s := apitest.Start(t, apitest.Options{Store: store})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	const nodes = 50
	watchers := make([]watch.Interface, nodes)
	for i := range watchers {
		w, err := s.Admin.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: fmt.Sprintf("spec.nodeName=n%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watchers[i] = w
	}
	for i := 0; i < nodes; i++ {
		if _, err := pods.Create(ctx, pod(fmt.Sprintf("p%d", i), fmt.Sprintf("n%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range watchers {
		ev := nextEvent(t, w)
		p, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Added || !ok || p.Name != fmt.Sprintf("p%d", i) {
			t.Fatalf("watcher %d: got %s %v, want ADDED p%d", i, ev.Type, ev.Object, i)
		}
	}
	nw, err := s.Admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Stop()
	if _, err := s.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, nw); ev.Type != watch.Added {
		t.Errorf("node watch: got %s, want ADDED", ev.Type)
	}
	if got := store.total(); got != 1 {
		t.Errorf("storage watches = %d (%v), want 1 shared by %d watchers", got, store.watches, nodes+1)
	}
}

// A list by spec.nodeName made right after a write sees it, and holds only
// that node's pods, in name order.
func TestCachedListIsConsistentAndIndexed(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	// Start the cache before the writes, so that it must catch up.
	if _, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{pod("c", "n1"), pod("a", "n1"), pod("b", "n2"), pod("d", "")} {
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + p.Spec.NodeName})
		if err != nil {
			t.Fatal(err)
		}
		if rv(t, list.ResourceVersion) < rv(t, created.ResourceVersion) {
			t.Errorf("list at %s is older than the create at %s", list.ResourceVersion, created.ResourceVersion)
		}
		found := false
		for _, item := range list.Items {
			found = found || item.Name == p.Name
		}
		if !found {
			t.Errorf("list by node %q right after creating %s misses it", p.Spec.NodeName, p.Name)
		}
	}
	list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, item := range list.Items {
		names = append(names, item.Name)
	}
	if got := strings.Join(names, ","); got != "a,c" {
		t.Errorf("pods of n1 = %s, want a,c", got)
	}
	// A pod that moves off the index (deleted) leaves the list.
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	list, err = pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "c" {
		t.Errorf("after deleting a, pods of n1 = %v, want [c]", list.Items)
	}
}

// A watch resumed from a revision inside the cache's window replays what
// followed it; one from before the window is served by the store.
func TestWatchResumesFromWindowAndBeforeIt(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	early, err := pods.Create(ctx, pod("early", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("mid", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The cache starts here, after "mid": "early"'s revision is before
	// its window.
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("late", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ from, first string }{
		{list.ResourceVersion, "late"},
		{early.ResourceVersion, "mid"},
	} {
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: tc.from})
		if err != nil {
			t.Fatal(err)
		}
		ev := nextEvent(t, w)
		if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Added || !ok || p.Name != tc.first {
			t.Errorf("watch from %s: got %s %v, want ADDED %s", tc.from, ev.Type, ev.Object, tc.first)
		}
		w.Stop()
	}
	before, err := pods.Create(ctx, pod("x", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: before.ResourceVersion, FieldSelector: "spec.nodeName=n1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := pods.Delete(ctx, "x", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Deleted || !ok || p.Name != "x" || p.ResourceVersion == before.ResourceVersion {
		t.Errorf("got %s %v, want DELETED x at the deletion's revision", ev.Type, ev.Object)
	}
}

// Closing the server ends the watches its caches serve.
func TestCloseEndsCachedWatches(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	w, err := s.Admin.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s.API.Close()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Error("got an event, want the watch to end")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch still open 10s after Close")
	}
}

// Once the store is compacted and the server told, a watch from before the
// compaction gets 410 Expired even though the cache had those events.
func TestCompactedCacheExpiresOldWatches(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	if _, err := pods.List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	first, err := pods.Create(ctx, pod("a", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c"} {
		if _, err := pods.Create(ctx, pod(name, "n1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	watchFirst := func() watch.Event {
		w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		return nextEvent(t, w)
	}
	if ev := watchFirst(); ev.Type != watch.Added {
		t.Fatalf("before compaction: got %s, want ADDED b from the cache", ev.Type)
	}
	rev, err := s.Store.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	s.API.Compacted(rev)
	ev := watchFirst()
	if st, ok := ev.Object.(*metav1.Status); ev.Type != watch.Error || !ok || st.Code != 410 {
		t.Errorf("after compaction: got %s %v, want ERROR 410", ev.Type, ev.Object)
	}
}

// countingGets counts storage reads of single keys.
type countingGets struct {
	storage.Interface
	mu   sync.Mutex
	gets int
}

func (c *countingGets) Get(ctx context.Context, key string) (storage.KV, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Interface.Get(ctx, key)
}

func (c *countingGets) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets
}

// A get at resourceVersion "0" is answered by the cache, as upstream,
// unless the server keeps reads strict; a plain get reads storage.
func TestGetAtAnyRevision(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			store := &countingGets{Interface: memory.New(memory.Config{})}
			s := apitest.Start(t, apitest.Options{Store: store, StrictReads: strict})
			ctx := context.Background()
			nodes := s.Admin.CoreV1().Nodes()
			if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Warm the cache, then wait until it holds n1.
			w, err := nodes.Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			nextEvent(t, w)
			before := store.count()
			n, err := nodes.Get(ctx, "n1", metav1.GetOptions{ResourceVersion: "0"})
			if err != nil || n.Name != "n1" {
				t.Fatalf("get n1 at any revision: %v, %v", n, err)
			}
			fromStorage := store.count() - before
			if want := map[bool]int{false: 0, true: 1}[strict]; fromStorage != want {
				t.Errorf("storage reads for a get at revision 0 = %d, want %d", fromStorage, want)
			}
			if _, err := nodes.Get(ctx, "missing", metav1.GetOptions{ResourceVersion: "0"}); !apierrors.IsNotFound(err) {
				t.Errorf("get of a missing node at revision 0: %v, want NotFound", err)
			}
			before = store.count()
			if _, err := nodes.Get(ctx, "n1", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			}
			if store.count() != before+1 {
				t.Errorf("a plain get did not read storage")
			}
		})
	}
}
