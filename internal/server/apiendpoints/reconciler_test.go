package apiendpoints_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/apitest"
	"knode/internal/server/apiendpoints"
	"knode/internal/storage/etcd/etcdtest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// world is a real etcd and a real API server (over its own memory store:
// the reconciler's keys and the API's objects need not share storage).
type world struct {
	t      *testing.T
	ctx    context.Context
	etcd   *clientv3.Client
	client kubernetes.Interface
}

func newWorld(t *testing.T) *world {
	t.Helper()
	url := etcdtest.Start(t)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &world{t: t, ctx: ctx, etcd: etcd, client: apitest.Start(t, apitest.Options{}).Admin}
}

func (w *world) reconciler(address string, ttl, interval time.Duration) *apiendpoints.Reconciler {
	w.t.Helper()
	r, err := apiendpoints.New(apiendpoints.Config{
		Etcd: w.etcd, Client: w.client, Address: address, TTL: ttl, Interval: interval, Logger: quiet,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *world) sync(r *apiendpoints.Reconciler) {
	w.t.Helper()
	if err := r.Sync(w.ctx); err != nil {
		w.t.Fatal(err)
	}
}

// listed is what default/kubernetes lists, failing the test when it is
// missing or not shaped as upstream's (label, https/TCP ports).
func (w *world) listed() []string {
	w.t.Helper()
	ep, err := w.client.CoreV1().Endpoints("default").Get(w.ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	if ep.Labels[apiendpoints.SkipMirrorLabel] != "true" {
		w.t.Errorf("labels %v, want %s=true", ep.Labels, apiendpoints.SkipMirrorLabel)
	}
	for _, ss := range ep.Subsets {
		for _, p := range ss.Ports {
			if p.Name != "https" || p.Protocol != corev1.ProtocolTCP {
				w.t.Errorf("port %+v, want name https, protocol TCP", p)
			}
		}
	}
	return apiendpoints.Addresses(ep)
}

func (w *world) version() string {
	w.t.Helper()
	ep, err := w.client.CoreV1().Endpoints("default").Get(w.ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return ep.ResourceVersion
}

func (w *world) expect(want ...string) {
	w.t.Helper()
	if got := w.listed(); !slices.Equal(got, want) {
		w.t.Errorf("default/kubernetes lists %v, want %v", got, want)
	}
}

// Two servers on one IP with different ports both appear; Remove drops
// one at once and a later Sync does not bring it back.
func TestTwoServersAndRemove(t *testing.T) {
	w := newWorld(t)
	one := w.reconciler("10.0.0.1:6443", 0, 0)
	two := w.reconciler("10.0.0.1:6444", 0, 0)
	w.sync(one)
	w.expect("10.0.0.1:6443")
	w.sync(two)
	w.expect("10.0.0.1:6443", "10.0.0.1:6444")
	before := w.version()
	w.sync(one)
	if after := w.version(); after != before {
		t.Errorf("a pass with nothing to change wrote the object (resourceVersion %s -> %s)", before, after)
	}

	if err := two.Remove(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.expect("10.0.0.1:6443")
	w.sync(two)
	w.sync(one)
	w.expect("10.0.0.1:6443")
	if err := one.Remove(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.expect()
	// The keys are gone from etcd too.
	resp, err := w.etcd.Get(w.ctx, apiendpoints.DefaultKeyPrefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Errorf("keys left after both removed: %v", resp.Kvs)
	}
}

// A server that stops refreshing its key drops out once the key's TTL has
// passed. The TTL runs on etcd's clock, which the test cannot step: it
// waits (about 2 s, the shortest TTL etcd keeps to) for etcd to delete
// the key, watching the key rather than sleeping, then syncs the server
// that is left.
func TestStoppedServerDropsOutAfterTTL(t *testing.T) {
	w := newWorld(t)
	one := w.reconciler("10.0.0.1:6443", 2*time.Second, time.Second)
	gone := w.reconciler("10.0.0.2:6443", 2*time.Second, time.Second)
	watch := w.etcd.Watch(w.ctx, apiendpoints.DefaultKeyPrefix+"10.0.0.2:6443")
	w.sync(gone)
	w.sync(one)
	w.expect("10.0.0.1:6443", "10.0.0.2:6443")
	// Refreshing replaces the lease without the key lapsing in between.
	w.sync(gone)
	w.sync(one)
	w.expect("10.0.0.1:6443", "10.0.0.2:6443")

	for deleted := false; !deleted; {
		select {
		case resp, ok := <-watch:
			if !ok {
				t.Fatalf("the watch ended before the key expired: %v", w.ctx.Err())
			}
			for _, ev := range resp.Events {
				deleted = deleted || ev.Type == clientv3.EventTypeDelete
			}
		case <-w.ctx.Done():
			t.Fatal("the stopped server's key never expired")
		}
	}
	// one's pass refreshes its own key before it lists the live ones.
	w.sync(one)
	w.expect("10.0.0.1:6443")
}

// Run syncs at once and then every Interval on its clock; the TTL is
// etcd's and untouched here.
func TestRun(t *testing.T) {
	w := newWorld(t)
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	r, err := apiendpoints.New(apiendpoints.Config{
		Etcd: w.etcd, Client: w.client, Address: "10.0.0.1:6443", Clock: clk, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	eps := w.client.CoreV1().Endpoints("default")
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-w.ctx.Done():
				t.Fatalf("gave up waiting for %s", what)
			case <-done:
				t.Fatalf("Run returned while waiting for %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	exists := func() bool {
		_, err := eps.Get(w.ctx, "kubernetes", metav1.GetOptions{})
		return err == nil
	}
	waitFor("the first pass", exists)
	waitFor("Run to wait on its ticker", clk.HasWaiters)
	w.expect("10.0.0.1:6443")

	if err := eps.Delete(w.ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(apiendpoints.DefaultInterval)
	waitFor("the pass at the tick", exists)
	w.expect("10.0.0.1:6443")
}

func TestConfig(t *testing.T) {
	etcd := &clientv3.Client{}
	client := &kubernetes.Clientset{}
	for _, tc := range []struct {
		name string
		cfg  apiendpoints.Config
		want string
	}{
		{"no etcd", apiendpoints.Config{Client: client, Address: "10.0.0.1:6443"}, "etcd"},
		{"no client", apiendpoints.Config{Etcd: etcd, Address: "10.0.0.1:6443"}, "client"},
		{"a host name", apiendpoints.Config{Etcd: etcd, Client: client, Address: "cp.example:6443"}, "address"},
		{"no port", apiendpoints.Config{Etcd: etcd, Client: client, Address: "10.0.0.1"}, "address"},
		{"port 0", apiendpoints.Config{Etcd: etcd, Client: client, Address: "10.0.0.1:0"}, "address"},
		{"loopback, which Endpoints validation refuses", apiendpoints.Config{Etcd: etcd, Client: client, Address: "127.0.0.1:6443"}, "loopback"},
		{"unspecified", apiendpoints.Config{Etcd: etcd, Client: client, Address: "[::]:6443"}, "address"},
		{"a TTL of part of a second", apiendpoints.Config{Etcd: etcd, Client: client, Address: "10.0.0.1:6443", TTL: 1500 * time.Millisecond}, "ttl"},
		{"interval not below the TTL", apiendpoints.Config{Etcd: etcd, Client: client, Address: "10.0.0.1:6443", TTL: 5 * time.Second, Interval: 5 * time.Second}, "interval"},
		{"interval above the default TTL", apiendpoints.Config{Etcd: etcd, Client: client, Address: "10.0.0.1:6443", Interval: time.Minute}, "interval"},
		{"a prefix without the slash", apiendpoints.Config{Etcd: etcd, Client: client, Address: "10.0.0.1:6443", KeyPrefix: "/x"}, "keyPrefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := apiendpoints.New(tc.cfg)
			if !errors.Is(err, apiendpoints.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an invalid config naming %q", err, tc.want)
			}
		})
	}
	if _, err := apiendpoints.New(apiendpoints.Config{Etcd: etcd, Client: client, Address: "[2001:db8::1]:6443"}); err != nil {
		t.Errorf("an IPv6 address with the defaults: %v", err)
	}
}
