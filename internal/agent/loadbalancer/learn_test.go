package loadbalancer_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"knode/internal/agent/loadbalancer"
	"knode/internal/apitest"
	"knode/internal/server/apiendpoints"
	"knode/internal/storage/memory"
)

// logs counts the log messages, so a test can wait for one.
type logs struct {
	mu   *sync.Mutex
	seen map[string]int
	kick chan struct{}
}

func newLogs() logs {
	return logs{mu: &sync.Mutex{}, seen: map[string]int{}, kick: make(chan struct{}, 1)}
}

func (l logs) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[msg]
}

func (l logs) Enabled(context.Context, slog.Level) bool { return true }
func (l logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.seen[r.Message]++
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return nil
}
func (l logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logs) WithGroup(string) slog.Handler      { return l }

func hostOf(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// The agent's balancer learns the servers from default/kubernetes and
// follows every change, keeping the configured server last; an object
// that lists nobody, or none, changes nothing; a learned server takes
// over when the configured one stops answering.
//
// Endpoints may not list loopback addresses, so the object names
// documentation addresses (198.51.100.0/24) and the balancer's Dial maps
// them to two real API servers on 127.0.0.1 over one store.
func TestLearn(t *testing.T) {
	store := memory.New(memory.Config{})
	a := apitest.Start(t, apitest.Options{Store: store})
	b := apitest.Start(t, apitest.Options{Store: store})
	configured := hostOf(t, a.URL)
	const learnedA, learnedB = "198.51.100.1:6443", "198.51.100.2:6443"
	var configuredDown atomic.Bool
	real := map[string]string{configured: configured, learnedA: configured, learnedB: hostOf(t, b.URL)}
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		target, ok := real[address]
		if !ok || (address == configured && configuredDown.Load()) {
			return nil, errors.New("unreachable in this test")
		}
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}
	messages := newLogs()
	log := slog.New(messages)
	lb, err := loadbalancer.New(loadbalancer.Config{Servers: []string{configured}, Dial: dial, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var running []chan struct{}
	defer func() {
		cancel()
		for _, done := range running {
			<-done
		}
	}()
	goRun := func(f func()) {
		done := make(chan struct{})
		running = append(running, done)
		go func() {
			defer close(done)
			f()
		}()
	}
	goRun(func() { _ = lb.Serve(ctx) })
	through := func() kubernetes.Interface {
		cfg := &rest.Config{Host: "http://" + lb.Addr(), BearerToken: apitest.AdminToken, QPS: -1}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	goRun(func() { loadbalancer.Learn(ctx, through(), lb, log) })

	waitServers := func(want ...string) {
		t.Helper()
		for !slices.Equal(lb.Servers(), want) {
			select {
			case <-ctx.Done():
				t.Fatalf("servers %v, want %v", lb.Servers(), want)
			case <-messages.kick:
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitLog := func(msg string) {
		t.Helper()
		for messages.count(msg) == 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("no log %q", msg)
			case <-messages.kick:
			}
		}
	}
	endpoints := func(addrs ...string) *corev1.Endpoints {
		return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Subsets: apiendpoints.Subsets(addrs)}
	}
	write := func(c kubernetes.Interface, ep *corev1.Endpoints) {
		t.Helper()
		eps := c.CoreV1().Endpoints("default")
		cur, err := eps.Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			if _, err := eps.Create(ctx, ep, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			return
		}
		cur.Subsets = ep.Subsets
		if _, err := eps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	write(a.Admin, endpoints(learnedB, learnedA))
	waitServers(learnedA, learnedB, configured)
	if lb.Current() != configured {
		t.Errorf("current %s, want the configured server to stay current while listed", lb.Current())
	}
	// Written through the other server: the same store.
	write(b.Admin, endpoints(learnedB))
	waitServers(learnedB, configured)

	write(a.Admin, endpoints())
	waitLog("the API server endpoints list no server; keeping the list")
	if got := lb.Servers(); !slices.Equal(got, []string{learnedB, configured}) {
		t.Errorf("an empty object changed the servers to %v", got)
	}
	if err := a.Admin.CoreV1().Endpoints("default").Delete(ctx, "kubernetes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog("the API server endpoints were deleted; keeping the list")
	if got := lb.Servers(); !slices.Equal(got, []string{learnedB, configured}) {
		t.Errorf("deleting the object changed the servers to %v", got)
	}

	// Created again later: learned again.
	write(b.Admin, endpoints(learnedA, learnedB))
	waitServers(learnedA, learnedB, configured)

	// The configured server stops answering: a new connection goes to
	// the next in the list, a learned one.
	configuredDown.Store(true)
	if _, err := through().CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("a request once the configured server was down: %v", err)
	}
	if lb.Current() != learnedA {
		t.Errorf("current %s, want %s", lb.Current(), learnedA)
	}
}
