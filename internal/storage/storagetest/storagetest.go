// Package storagetest is the conformance suite for storage.Interface: every
// implementation runs Run and must pass it unchanged.
//
// What the caller provides: newStore, called once per subtest. It may return
// a fresh store or a handle on a store shared between subtests (for example
// one external etcd cluster); the suite keeps every key under a prefix unique
// to the subtest and never assumes the store is empty or at revision 1. It
// does assume that nothing else writes to the store while a subtest runs,
// because it checks that each write advances the revision by exactly one,
// and it compacts the store. newStore should register cleanup (t.Cleanup)
// for whatever it starts.
//
// What it does not cover: durability across restarts and performance; those
// belong to each implementation's own tests and benchmarks.
package storagetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"knode/internal/storage"
)

// waitTimeout bounds every wait for a watch event (through a context, never a
// sleep). It is generous because a timeout only ever means failure.
const waitTimeout = 30 * time.Second

// Run runs every conformance test against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) storage.Interface) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Interface, base string)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"RevisionAdvancesByOne", testRevisionAdvancesByOne},
		{"ValueIsCopied", testValueIsCopied},
		{"ListPrefixIsolation", testListPrefixIsolation},
		{"ListAtRevision", testListAtRevision},
		{"ListFutureRevision", testListFutureRevision},
		{"ListLimitContinue", testListLimitContinue},
		{"ListLimitBoundaries", testListLimitBoundaries},
		{"ListInvalidContinue", testListInvalidContinue},
		{"ListContinueCompacted", testListContinueCompacted},
		{"ListCompacted", testListCompacted},
		{"CompactBounds", testCompactBounds},
		{"UpdateCompareAndSwap", testUpdateCompareAndSwap},
		{"UpdateUnconditional", testUpdateUnconditional},
		{"DeleteWithPrecondition", testDeleteWithPrecondition},
		{"DeleteUnconditional", testDeleteUnconditional},
		{"RecreateAfterDelete", testRecreateAfterDelete},
		{"WatchFromRevision", testWatchFromRevision},
		{"WatchFromZero", testWatchFromZero},
		{"WatchLive", testWatchLive},
		{"WatchSlowReader", testWatchSlowReader},
		{"WatchCompacted", testWatchCompacted},
		{"WatchAtCompactionRevision", testWatchAtCompactionRevision},
		{"WatchFutureRevision", testWatchFutureRevision},
		{"WatchStop", testWatchStop},
		{"WatchContextCancel", testWatchContextCancel},
		{"ConcurrentCompareAndSwap", testConcurrentCompareAndSwap},
	}
	run := make([]byte, 8)
	if _, err := rand.Read(run); err != nil {
		t.Fatalf("random run id: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			// A base unique to this subtest and this run keeps subtests on a
			// shared store apart.
			base := fmt.Sprintf("/storagetest/%x/%s/", run, tc.name)
			tc.fn(t, s, base)
		})
	}
}

// kvOpts compares KVs and events treating nil and empty values alike: etcd
// does not distinguish them.
var kvOpts = cmpopts.EquateEmpty()

func revision(t *testing.T, s storage.Interface) int64 {
	t.Helper()
	rev, err := s.Revision(t.Context())
	if err != nil {
		t.Fatalf("Revision: %v", err)
	}
	return rev
}

func mustCreate(t *testing.T, s storage.Interface, key, value string) int64 {
	t.Helper()
	rev, err := s.Create(t.Context(), key, []byte(value))
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	return rev
}

func mustUpdate(t *testing.T, s storage.Interface, key, value string, expected int64) int64 {
	t.Helper()
	rev, err := s.Update(t.Context(), key, []byte(value), expected)
	if err != nil {
		t.Fatalf("Update(%q, expected %d): %v", key, expected, err)
	}
	return rev
}

func mustDelete(t *testing.T, s storage.Interface, key string, expected int64) storage.KV {
	t.Helper()
	kv, err := s.Delete(t.Context(), key, expected)
	if err != nil {
		t.Fatalf("Delete(%q, expected %d): %v", key, expected, err)
	}
	return kv
}

func mustList(t *testing.T, s storage.Interface, prefix string, opts storage.ListOptions) storage.ListResult {
	t.Helper()
	res, err := s.List(t.Context(), prefix, opts)
	if err != nil {
		t.Fatalf("List(%q, %+v): %v", prefix, opts, err)
	}
	return res
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func kv(key, value string, create, mod int64) storage.KV {
	return storage.KV{Key: key, Value: []byte(value), CreateRevision: create, ModRevision: mod}
}

// nextEvent waits for the next event, failing if the watch ends or nothing
// arrives in time.
func nextEvent(t *testing.T, w storage.Watcher) storage.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended early, Err() = %v", w.Err())
		}
		return ev
	case <-ctx.Done():
		t.Fatalf("no watch event within %v", waitTimeout)
	}
	return storage.Event{}
}

// waitClosed drains the watcher until Events is closed and returns Err.
func waitClosed(t *testing.T, w storage.Watcher) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
		case <-ctx.Done():
			t.Fatalf("watch not closed within %v", waitTimeout)
		}
	}
}

func mustWatch(t *testing.T, s storage.Interface, ctx context.Context, prefix string, from int64) storage.Watcher {
	t.Helper()
	w, err := s.Watch(ctx, prefix, from)
	if err != nil {
		t.Fatalf("Watch(%q, %d): %v", prefix, from, err)
	}
	t.Cleanup(w.Stop)
	return w
}

func testCreateAndGet(t *testing.T, s storage.Interface, base string) {
	key := base + "pods/a"
	rev := mustCreate(t, s, key, "v1")
	if got := revision(t, s); got != rev {
		t.Errorf("Revision after Create = %d, want %d", got, rev)
	}
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(kv(key, "v1", rev, rev), got, kvOpts); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}

	_, err = s.Create(t.Context(), key, []byte("v2"))
	wantErr(t, "Create of an existing key", err, storage.ErrExists)
	if got := revision(t, s); got != rev {
		t.Errorf("a failed Create moved the revision from %d to %d", rev, got)
	}

	_, err = s.Get(t.Context(), base+"pods/missing")
	wantErr(t, "Get of a missing key", err, storage.ErrNotFound)

	// A key that is only a prefix of an existing one does not exist.
	_, err = s.Get(t.Context(), base+"pods/")
	wantErr(t, "Get of a prefix", err, storage.ErrNotFound)
}

func testRevisionAdvancesByOne(t *testing.T, s storage.Interface, base string) {
	start := revision(t, s)
	if start < 1 {
		t.Fatalf("Revision = %d, want at least 1", start)
	}
	key := base + "k"
	revs := []int64{mustCreate(t, s, key, "1")}
	revs = append(revs, mustUpdate(t, s, key, "2", revs[0]))
	revs = append(revs, mustUpdate(t, s, key, "3", 0))
	revs = append(revs, mustDelete(t, s, key, 0).ModRevision)
	revs = append(revs, mustCreate(t, s, base+"other", "x"))
	want := []int64{start + 1, start + 2, start + 3, start + 4, start + 5}
	if diff := cmp.Diff(want, revs); diff != "" {
		t.Errorf("write revisions (-want +got):\n%s", diff)
	}
}

func testValueIsCopied(t *testing.T, s storage.Interface, base string) {
	key := base + "k"
	buf := []byte("original")
	mustCreate(t, s, key, string(buf))
	if _, err := s.Update(t.Context(), key, buf, 0); err != nil {
		t.Fatalf("Update: %v", err)
	}
	copy(buf, "XXXXXXXX")
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if string(got.Value) != "original" {
		t.Errorf("stored value changed with the caller's buffer: %q", got.Value)
	}
	// Changing a returned value must not change the store either.
	copy(got.Value, "YYYYYYYY")
	again, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if string(again.Value) != "original" {
		t.Errorf("stored value changed with a returned value: %q", again.Value)
	}
}

func testListPrefixIsolation(t *testing.T, s storage.Interface, base string) {
	// Created out of order on purpose: List sorts by key.
	rc := mustCreate(t, s, base+"pods/ns/c", "c")
	rx := mustCreate(t, s, base+"podsx/ns/a", "x")
	ra := mustCreate(t, s, base+"pods/ns/a", "a")
	rb := mustCreate(t, s, base+"pods/ns2/b", "b")
	mustCreate(t, s, base+"pod", "short")
	now := revision(t, s)

	tests := []struct {
		prefix string
		want   []storage.KV
	}{
		{base + "pods/", []storage.KV{
			kv(base+"pods/ns/a", "a", ra, ra),
			kv(base+"pods/ns/c", "c", rc, rc),
			kv(base+"pods/ns2/b", "b", rb, rb),
		}},
		{base + "pods/ns/", []storage.KV{
			kv(base+"pods/ns/a", "a", ra, ra),
			kv(base+"pods/ns/c", "c", rc, rc),
		}},
		{base + "podsx/", []storage.KV{kv(base+"podsx/ns/a", "x", rx, rx)}},
		{base + "nothing/", nil},
	}
	for _, tc := range tests {
		res := mustList(t, s, tc.prefix, storage.ListOptions{})
		want := storage.ListResult{Items: tc.want, Revision: now}
		if diff := cmp.Diff(want, res, kvOpts); diff != "" {
			t.Errorf("List(%q) (-want +got):\n%s", tc.prefix, diff)
		}
	}
}

func testListAtRevision(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	a, b := p+"a", p+"b"
	r1 := mustCreate(t, s, a, "a1")
	r2 := mustCreate(t, s, b, "b1")
	r3 := mustUpdate(t, s, a, "a2", r1)
	r4 := mustDelete(t, s, b, r2).ModRevision

	tests := []struct {
		name string
		rev  int64
		want []storage.KV
	}{
		{"before anything", r1 - 1, nil},
		{"after create a", r1, []storage.KV{kv(a, "a1", r1, r1)}},
		{"after create b", r2, []storage.KV{kv(a, "a1", r1, r1), kv(b, "b1", r2, r2)}},
		{"after update a", r3, []storage.KV{kv(a, "a2", r1, r3), kv(b, "b1", r2, r2)}},
		{"after delete b", r4, []storage.KV{kv(a, "a2", r1, r3)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustList(t, s, p, storage.ListOptions{Revision: tc.rev})
			want := storage.ListResult{Items: tc.want, Revision: tc.rev}
			if diff := cmp.Diff(want, res, kvOpts); diff != "" {
				t.Errorf("List at %d (-want +got):\n%s", tc.rev, diff)
			}
		})
	}
	latest := mustList(t, s, p, storage.ListOptions{})
	want := storage.ListResult{Items: []storage.KV{kv(a, "a2", r1, r3)}, Revision: r4}
	if diff := cmp.Diff(want, latest, kvOpts); diff != "" {
		t.Errorf("List at latest (-want +got):\n%s", diff)
	}
}

func testListFutureRevision(t *testing.T, s storage.Interface, base string) {
	rev := mustCreate(t, s, base+"a", "a")
	_, err := s.List(t.Context(), base, storage.ListOptions{Revision: rev + 10})
	wantErr(t, "List at a future revision", err, storage.ErrFutureRevision)
}

func ptr(n int64) *int64 { return &n }

func testListLimitContinue(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	revs := map[string]int64{}
	for _, name := range []string{"a", "b", "d", "e", "f"} {
		revs[name] = mustCreate(t, s, p+name, name)
	}
	listRev := revision(t, s)
	item := func(name string) storage.KV { return kv(p+name, name, revs[name], revs[name]) }

	page1 := mustList(t, s, p, storage.ListOptions{Limit: 2})
	if page1.Continue == "" {
		t.Fatalf("first page has no continue token: %+v", page1)
	}
	want := storage.ListResult{Items: []storage.KV{item("a"), item("b")}, Revision: listRev, RemainingItemCount: ptr(3)}
	if diff := cmp.Diff(want, page1, kvOpts, cmpopts.IgnoreFields(storage.ListResult{}, "Continue")); diff != "" {
		t.Errorf("page 1 (-want +got):\n%s", diff)
	}

	// Writes between pages must not show: every page reads at listRev.
	mustCreate(t, s, p+"c", "c")
	mustUpdate(t, s, p+"d", "d2", 0)
	mustDelete(t, s, p+"e", 0)

	page2 := mustList(t, s, p, storage.ListOptions{Limit: 2, Continue: page1.Continue})
	if page2.Continue == "" {
		t.Fatalf("second page has no continue token: %+v", page2)
	}
	want = storage.ListResult{Items: []storage.KV{item("d"), item("e")}, Revision: listRev, RemainingItemCount: ptr(1)}
	if diff := cmp.Diff(want, page2, kvOpts, cmpopts.IgnoreFields(storage.ListResult{}, "Continue")); diff != "" {
		t.Errorf("page 2 (-want +got):\n%s", diff)
	}

	page3 := mustList(t, s, p, storage.ListOptions{Limit: 2, Continue: page2.Continue})
	want = storage.ListResult{Items: []storage.KV{item("f")}, Revision: listRev}
	if diff := cmp.Diff(want, page3, kvOpts); diff != "" {
		t.Errorf("page 3 (-want +got):\n%s", diff)
	}
}

func testListLimitBoundaries(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	for _, name := range []string{"a", "b", "c"} {
		mustCreate(t, s, p+name, name)
	}
	mustCreate(t, s, base+"podsx/z", "z")
	tests := []struct {
		name          string
		limit         int64
		wantItems     int
		wantContinue  bool
		wantRemaining *int64
	}{
		{"no limit", 0, 3, false, nil},
		{"limit below count", 1, 1, true, ptr(2)},
		{"limit one below count", 2, 2, true, ptr(1)},
		{"limit equals count", 3, 3, false, nil},
		{"limit above count", 10, 3, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := mustList(t, s, p, storage.ListOptions{Limit: tc.limit})
			if len(res.Items) != tc.wantItems {
				t.Errorf("got %d items, want %d", len(res.Items), tc.wantItems)
			}
			if got := res.Continue != ""; got != tc.wantContinue {
				t.Errorf("continue present = %v, want %v", got, tc.wantContinue)
			}
			if diff := cmp.Diff(tc.wantRemaining, res.RemainingItemCount); diff != "" {
				t.Errorf("RemainingItemCount (-want +got):\n%s", diff)
			}
		})
	}
}

func testListInvalidContinue(t *testing.T, s storage.Interface, base string) {
	for _, name := range []string{"a", "b"} {
		mustCreate(t, s, base+"pods/"+name, name)
		mustCreate(t, s, base+"nodes/"+name, name)
	}
	page := mustList(t, s, base+"pods/", storage.ListOptions{Limit: 1})
	if page.Continue == "" {
		t.Fatalf("no continue token")
	}
	tests := []struct {
		name, prefix, token string
	}{
		{"not base64", base + "pods/", "%%%"},
		{"base64 of garbage", base + "pods/", "Z2FyYmFnZQ"},
		{"token of another prefix", base + "nodes/", page.Continue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.List(t.Context(), tc.prefix, storage.ListOptions{Continue: tc.token})
			wantErr(t, "List with a bad continue token", err, storage.ErrInvalidContinue)
		})
	}
}

func testListContinueCompacted(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	for _, name := range []string{"a", "b", "c"} {
		mustCreate(t, s, p+name, name)
	}
	page := mustList(t, s, p, storage.ListOptions{Limit: 1})
	now := mustUpdate(t, s, p+"a", "a2", 0)
	if err := s.Compact(t.Context(), now); err != nil {
		t.Fatalf("Compact(%d): %v", now, err)
	}
	_, err := s.List(t.Context(), p, storage.ListOptions{Limit: 1, Continue: page.Continue})
	wantErr(t, "continue after compaction", err, storage.ErrCompacted)
}

func testListCompacted(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	r1 := mustCreate(t, s, p+"a", "a1")
	r2 := mustUpdate(t, s, p+"a", "a2", r1)
	r3 := mustCreate(t, s, p+"b", "b")
	r4 := mustDelete(t, s, p+"b", r3).ModRevision
	if err := s.Compact(t.Context(), r2); err != nil {
		t.Fatalf("Compact(%d): %v", r2, err)
	}
	_, err := s.List(t.Context(), p, storage.ListOptions{Revision: r1})
	wantErr(t, "List below the compaction revision", err, storage.ErrCompacted)

	// The compaction revision itself and everything after stay readable.
	tests := []struct {
		rev  int64
		want []storage.KV
	}{
		{r2, []storage.KV{kv(p+"a", "a2", r1, r2)}},
		{r3, []storage.KV{kv(p+"a", "a2", r1, r2), kv(p+"b", "b", r3, r3)}},
		{r4, []storage.KV{kv(p+"a", "a2", r1, r2)}},
	}
	for _, tc := range tests {
		res := mustList(t, s, p, storage.ListOptions{Revision: tc.rev})
		if diff := cmp.Diff(tc.want, res.Items, kvOpts); diff != "" {
			t.Errorf("List at %d after compaction (-want +got):\n%s", tc.rev, diff)
		}
	}
	// Compacting past a delete leaves the key gone at every readable revision.
	if err := s.Compact(t.Context(), r4); err != nil {
		t.Fatalf("Compact(%d): %v", r4, err)
	}
	res := mustList(t, s, p, storage.ListOptions{Revision: r4})
	if diff := cmp.Diff([]storage.KV{kv(p+"a", "a2", r1, r2)}, res.Items, kvOpts); diff != "" {
		t.Errorf("List at %d after compacting the delete (-want +got):\n%s", r4, diff)
	}
}

func testCompactBounds(t *testing.T, s storage.Interface, base string) {
	r1 := mustCreate(t, s, base+"a", "1")
	r2 := mustUpdate(t, s, base+"a", "2", 0)
	wantErr(t, "Compact beyond the store revision", s.Compact(t.Context(), r2+1), storage.ErrFutureRevision)
	if err := s.Compact(t.Context(), r2); err != nil {
		t.Fatalf("Compact at the store revision: %v", err)
	}
	wantErr(t, "Compact at the same revision again", s.Compact(t.Context(), r2), storage.ErrCompacted)
	wantErr(t, "Compact below the last compaction", s.Compact(t.Context(), r1), storage.ErrCompacted)
	got, err := s.Get(t.Context(), base+"a")
	if err != nil {
		t.Fatalf("Get after compaction: %v", err)
	}
	if diff := cmp.Diff(kv(base+"a", "2", r1, r2), got, kvOpts); diff != "" {
		t.Errorf("Get after compaction (-want +got):\n%s", diff)
	}
}

func testUpdateCompareAndSwap(t *testing.T, s storage.Interface, base string) {
	key := base + "k"
	r1 := mustCreate(t, s, key, "v1")
	r2 := mustUpdate(t, s, key, "v2", r1)
	if r2 <= r1 {
		t.Fatalf("Update returned revision %d, not after %d", r2, r1)
	}
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(kv(key, "v2", r1, r2), got, kvOpts); diff != "" {
		t.Errorf("Get after Update (-want +got):\n%s", diff)
	}

	_, err = s.Update(t.Context(), key, []byte("stale"), r1)
	wantErr(t, "Update with a stale revision", err, storage.ErrConflict)
	_, err = s.Update(t.Context(), key, []byte("future"), r2+100)
	wantErr(t, "Update with a future revision", err, storage.ErrConflict)
	_, err = s.Update(t.Context(), base+"missing", []byte("x"), r1)
	wantErr(t, "conditional Update of a missing key", err, storage.ErrNotFound)

	if got := revision(t, s); got != r2 {
		t.Errorf("failed updates moved the revision from %d to %d", r2, got)
	}
	after, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(kv(key, "v2", r1, r2), after, kvOpts); diff != "" {
		t.Errorf("failed updates changed the key (-want +got):\n%s", diff)
	}
}

func testUpdateUnconditional(t *testing.T, s storage.Interface, base string) {
	key := base + "k"
	r1 := mustCreate(t, s, key, "v1")
	mustUpdate(t, s, key, "v2", 0)
	r3 := mustUpdate(t, s, key, "v3", 0)
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(kv(key, "v3", r1, r3), got, kvOpts); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	_, err = s.Update(t.Context(), base+"missing", []byte("x"), 0)
	wantErr(t, "unconditional Update of a missing key", err, storage.ErrNotFound)
	if _, err := s.Get(t.Context(), base+"missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a failed Update created the key: Get error %v", err)
	}
}

func testDeleteWithPrecondition(t *testing.T, s storage.Interface, base string) {
	key := base + "k"
	r1 := mustCreate(t, s, key, "v1")
	r2 := mustUpdate(t, s, key, "v2", r1)

	_, err := s.Delete(t.Context(), key, r1)
	wantErr(t, "Delete with a stale revision", err, storage.ErrConflict)
	if _, err := s.Get(t.Context(), key); err != nil {
		t.Fatalf("key gone after a failed Delete: %v", err)
	}

	got := mustDelete(t, s, key, r2)
	want := kv(key, "v2", r1, r2+1)
	if diff := cmp.Diff(want, got, kvOpts); diff != "" {
		t.Errorf("Delete result (-want +got):\n%s", diff)
	}
	if rev := revision(t, s); rev != got.ModRevision {
		t.Errorf("Revision after Delete = %d, want the deletion revision %d", rev, got.ModRevision)
	}
	_, err = s.Get(t.Context(), key)
	wantErr(t, "Get after Delete", err, storage.ErrNotFound)
	_, err = s.Delete(t.Context(), key, r2)
	wantErr(t, "conditional Delete of a deleted key", err, storage.ErrNotFound)
}

func testDeleteUnconditional(t *testing.T, s storage.Interface, base string) {
	key := base + "k"
	r1 := mustCreate(t, s, key, "v1")
	got := mustDelete(t, s, key, 0)
	if diff := cmp.Diff(kv(key, "v1", r1, r1+1), got, kvOpts); diff != "" {
		t.Errorf("Delete result (-want +got):\n%s", diff)
	}
	_, err := s.Delete(t.Context(), key, 0)
	wantErr(t, "unconditional Delete of a missing key", err, storage.ErrNotFound)
	if rev := revision(t, s); rev != r1+1 {
		t.Errorf("a failed Delete moved the revision from %d to %d", r1+1, rev)
	}
}

func testRecreateAfterDelete(t *testing.T, s storage.Interface, base string) {
	key := base + "k"
	mustCreate(t, s, key, "v1")
	mustDelete(t, s, key, 0)
	r3 := mustCreate(t, s, key, "v2")
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(kv(key, "v2", r3, r3), got, kvOpts); diff != "" {
		t.Errorf("recreated key (-want +got):\n%s", diff)
	}
}

func testWatchFromRevision(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	start := revision(t, s)
	a := p + "a"
	r1 := mustCreate(t, s, a, "a1")
	mustCreate(t, s, base+"podsx/a", "not watched")
	r3 := mustUpdate(t, s, a, "a2", r1)
	r4 := mustDelete(t, s, a, 0).ModRevision
	r5 := mustCreate(t, s, p+"b", "b1")

	w := mustWatch(t, s, t.Context(), p, start)
	want := []storage.Event{
		{Type: storage.Put, KV: kv(a, "a1", r1, r1), Created: true},
		{Type: storage.Put, KV: kv(a, "a2", r1, r3), PrevValue: []byte("a1")},
		{Type: storage.Delete, KV: kv(a, "a2", r1, r4), PrevValue: []byte("a2")},
		{Type: storage.Put, KV: kv(p+"b", "b1", r5, r5), Created: true},
	}
	var got []storage.Event
	for range want {
		got = append(got, nextEvent(t, w))
	}
	if diff := cmp.Diff(want, got, kvOpts); diff != "" {
		t.Errorf("replayed events (-want +got):\n%s", diff)
	}

	// Starting later skips what came before.
	w2 := mustWatch(t, s, t.Context(), p, r4)
	if diff := cmp.Diff(want[3], nextEvent(t, w2), kvOpts); diff != "" {
		t.Errorf("watch from %d: first event (-want +got):\n%s", r4, diff)
	}
}

func testWatchFromZero(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	mustCreate(t, s, p+"old", "old")
	w := mustWatch(t, s, t.Context(), p, 0)
	r := mustCreate(t, s, p+"new", "new")
	want := storage.Event{Type: storage.Put, KV: kv(p+"new", "new", r, r), Created: true}
	if diff := cmp.Diff(want, nextEvent(t, w), kvOpts); diff != "" {
		t.Errorf("first event of a watch from 0 (-want +got):\n%s", diff)
	}
}

func testWatchLive(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	w := mustWatch(t, s, t.Context(), p, revision(t, s))
	r1 := mustCreate(t, s, p+"a", "a1")
	if diff := cmp.Diff(storage.Event{Type: storage.Put, KV: kv(p+"a", "a1", r1, r1), Created: true}, nextEvent(t, w), kvOpts); diff != "" {
		t.Errorf("create event (-want +got):\n%s", diff)
	}
	r2 := mustUpdate(t, s, p+"a", "a2", r1)
	if diff := cmp.Diff(storage.Event{Type: storage.Put, KV: kv(p+"a", "a2", r1, r2), PrevValue: []byte("a1")}, nextEvent(t, w), kvOpts); diff != "" {
		t.Errorf("update event (-want +got):\n%s", diff)
	}
	r3 := mustDelete(t, s, p+"a", r2).ModRevision
	if diff := cmp.Diff(storage.Event{Type: storage.Delete, KV: kv(p+"a", "a2", r1, r3), PrevValue: []byte("a2")}, nextEvent(t, w), kvOpts); diff != "" {
		t.Errorf("delete event (-want +got):\n%s", diff)
	}
}

// testWatchSlowReader writes many events before reading any: writers must not
// wait for the reader, and the reader still gets every event in order.
func testWatchSlowReader(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	w := mustWatch(t, s, t.Context(), p, revision(t, s))
	const n = 200
	key := p + "counter"
	rev := mustCreate(t, s, key, "0")
	for i := 1; i < n; i++ {
		rev = mustUpdate(t, s, key, strconv.Itoa(i), rev)
	}
	for i := 0; i < n; i++ {
		ev := nextEvent(t, w)
		if string(ev.KV.Value) != strconv.Itoa(i) {
			t.Fatalf("event %d has value %q", i, ev.KV.Value)
		}
	}
}

func testWatchCompacted(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	r1 := mustCreate(t, s, p+"a", "1")
	mustUpdate(t, s, p+"a", "2", 0)
	r3 := mustUpdate(t, s, p+"a", "3", 0)
	if err := s.Compact(t.Context(), r3); err != nil {
		t.Fatalf("Compact(%d): %v", r3, err)
	}
	w, err := s.Watch(t.Context(), p, r1)
	if err == nil {
		t.Cleanup(w.Stop)
		err = waitClosed(t, w)
	}
	wantErr(t, "watch from a compacted revision", err, storage.ErrCompacted)
}

func testWatchAtCompactionRevision(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	r1 := mustCreate(t, s, p+"a", "1")
	r2 := mustUpdate(t, s, p+"a", "2", 0)
	if err := s.Compact(t.Context(), r2); err != nil {
		t.Fatalf("Compact(%d): %v", r2, err)
	}
	w := mustWatch(t, s, t.Context(), p, r2)
	r3 := mustUpdate(t, s, p+"a", "3", 0)
	want := storage.Event{Type: storage.Put, KV: kv(p+"a", "3", r1, r3), PrevValue: []byte("2")}
	if diff := cmp.Diff(want, nextEvent(t, w), kvOpts); diff != "" {
		t.Errorf("first event of a watch from the compaction revision (-want +got):\n%s", diff)
	}
}

func testWatchFutureRevision(t *testing.T, s storage.Interface, base string) {
	rev := mustCreate(t, s, base+"a", "1")
	w, err := s.Watch(t.Context(), base, rev+100)
	if err == nil {
		t.Cleanup(w.Stop)
		err = waitClosed(t, w)
	}
	wantErr(t, "watch from a future revision", err, storage.ErrFutureRevision)
}

func testWatchStop(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	w := mustWatch(t, s, t.Context(), p, revision(t, s))
	mustCreate(t, s, p+"a", "1") // left unread on purpose
	w.Stop()
	if err := waitClosed(t, w); err != nil {
		t.Errorf("Err after Stop = %v, want nil", err)
	}
	w.Stop() // a second Stop is harmless
	// The store keeps working after a watcher stops.
	mustCreate(t, s, p+"b", "2")
}

func testWatchContextCancel(t *testing.T, s storage.Interface, base string) {
	p := base + "pods/"
	ctx, cancel := context.WithCancel(t.Context())
	w := mustWatch(t, s, ctx, p, revision(t, s))
	cancel()
	if err := waitClosed(t, w); err != nil {
		t.Errorf("Err after cancel = %v, want nil", err)
	}
}

// testConcurrentCompareAndSwap has many goroutines increment one counter with
// read-modify-write loops. Compare-and-swap must let exactly one of them win
// each revision, so no increment is lost.
func testConcurrentCompareAndSwap(t *testing.T, s storage.Interface, base string) {
	const workers, perWorker = 8, 10
	key := base + "counter"
	mustCreate(t, s, key, "0")

	var (
		mu       sync.Mutex
		winsFrom = map[int64]int{} // expected revision -> successful updates
		wg       sync.WaitGroup
		errs     = make(chan error, workers)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done := 0; done < perWorker; {
				cur, err := s.Get(t.Context(), key)
				if err != nil {
					errs <- err
					return
				}
				n, err := strconv.Atoi(string(cur.Value))
				if err != nil {
					errs <- err
					return
				}
				_, err = s.Update(t.Context(), key, []byte(strconv.Itoa(n+1)), cur.ModRevision)
				switch {
				case errors.Is(err, storage.ErrConflict):
					continue
				case err != nil:
					errs <- err
					return
				}
				done++
				mu.Lock()
				winsFrom[cur.ModRevision]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("worker: %v", err)
	}
	got, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if want := strconv.Itoa(workers * perWorker); string(got.Value) != want {
		t.Errorf("counter = %s, want %s", got.Value, want)
	}
	var multi []string
	for rev, n := range winsFrom {
		if n != 1 {
			multi = append(multi, fmt.Sprintf("%d won %d times", rev, n))
		}
	}
	if len(multi) > 0 {
		t.Errorf("revisions won more than once: %s", strings.Join(multi, ", "))
	}
}
