package loadbalancer

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestOrder(t *testing.T) {
	down := map[string]time.Time{"b": t0, "c": t0.Add(-time.Minute)}
	for _, tc := range []struct {
		name    string
		current string
		now     time.Time
		want    []string
	}{
		{"current first, then the list after it", "a", t0, []string{"a", "c", "b"}},
		{"a down server goes last", "b", t0, []string{"c", "a", "b"}},
		{"down only for a while", "b", t0.Add(16 * time.Second), []string{"b", "c", "a"}},
		{"an unknown current starts at the top", "x", t0, []string{"a", "c", "b"}},
	} {
		if got := order([]string{"a", "b", "c"}, tc.current, down, tc.now, 15*time.Second); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// server answers each connection with its name and the line it reads.
func server(t *testing.T, name string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = io.WriteString(c, name+" "+line)
				}
			}()
		}
	}()
	return ln
}

func ask(t *testing.T, b *Balancer) string {
	t.Helper()
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(c)
	return string(out)
}

// Connections go to the current server; when it stops answering they go
// to the next, which stays current; the list can change under way.
func TestFailover(t *testing.T) {
	one, two, three := server(t, "one"), server(t, "two"), server(t, "three")
	clk := testingclock.NewFakeClock(t0)
	b, err := New(Config{Servers: []string{one.Addr().String(), two.Addr().String()}, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	if got := ask(t, b); got != "one hello\n" {
		t.Fatalf("first answer %q", got)
	}
	one.Close()
	if got := ask(t, b); got != "two hello\n" {
		t.Fatalf("after the first server went: %q", got)
	}
	if b.Current() != two.Addr().String() {
		t.Errorf("current %s, want the second server", b.Current())
	}
	b.SetServers([]string{three.Addr().String(), two.Addr().String()})
	if got := ask(t, b); got != "two hello\n" {
		t.Errorf("the current server left the list? %q", got)
	}
	b.SetServers([]string{three.Addr().String()})
	if got := ask(t, b); got != "three hello\n" {
		t.Errorf("after the list lost the current server: %q", got)
	}
	three.Close()
	two.Close()
	if got := ask(t, b); got != "" {
		t.Errorf("with every server gone the connection was answered: %q", got)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.Servers: at least one"},
		{Config{Servers: []string{"no-port"}}, `Config.Servers[0] "no-port": must be host:port`},
		{Config{Servers: []string{"a:1"}, DownFor: -1}, "Config.DownFor -1ns: must not be negative"},
		{Config{Servers: []string{"a:1"}, CheckPeriod: -time.Second}, "Config.CheckPeriod -1s: must not be negative"},
		{Config{Servers: []string{"a:1"}, CheckTimeout: -time.Second}, "Config.CheckTimeout -1s: must not be negative"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want an error with %q", tc.cfg, err, tc.want)
		}
	}
}

func TestAfterChecks(t *testing.T) {
	servers := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		current string
		failed  []string
		want    string
	}{
		{"the current one passed", "a", []string{"b"}, "a"},
		{"the next that passed", "a", []string{"a", "b"}, "c"},
		{"round the list", "c", []string{"c"}, "a"},
		{"all failed: stay", "b", []string{"a", "b", "c"}, "b"},
		{"a current not in the list stays", "x", []string{"x", "a"}, "x"},
	} {
		failed := map[string]bool{}
		for _, s := range tc.failed {
			failed[s] = true
		}
		if got := afterChecks(servers, tc.current, failed); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// silentServer accepts connections and never answers, as a stopped
// process's kernel does; they are closed at the end of the test.
func silentServer(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	return ln
}

// checks is a Config.Check whose verdicts the test sets, and which
// reports each round's first call.
type checks struct {
	mu     sync.Mutex
	failed map[string]bool
	calls  chan string
}

func (c *checks) set(addr string, failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed[addr] = failed
}

func (c *checks) check(_ context.Context, addr string) error {
	select {
	case c.calls <- addr:
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed[addr] {
		return errors.New("not ready")
	}
	return nil
}

// A server that accepts connections but does not answer fails its check:
// the balancer makes the next server current and closes the connection
// held open to the silent one, and new connections go to the next.
func TestCheckFailsOverFromASilentServer(t *testing.T) {
	silent, two := silentServer(t), server(t, "two")
	clk := testingclock.NewFakeClock(t0)
	c := &checks{failed: map[string]bool{}, calls: make(chan string, 1)}
	b, err := New(Config{Servers: []string{silent.Addr().String(), two.Addr().String()}, Clock: clk, Check: c.check,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A connection to the current (silent) server, held open. The
	// balancer's first round of checks (Serve's) passes both servers.
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx) }()
	<-c.calls
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "hello\n"); err != nil {
		t.Fatal(err)
	}
	// The balancer has passed the connection on once it is listed open.
	for open := false; !open; {
		b.mu.Lock()
		open = len(b.open[silent.Addr().String()]) == 1
		b.mu.Unlock()
		runtime.Gosched()
	}

	c.set(silent.Addr().String(), true)
	b.CheckOnce(ctx)
	if got := b.Current(); got != two.Addr().String() {
		t.Fatalf("current %s after the silent server failed its check, want the second", got)
	}
	// Closed by the balancer: the read ends with EOF or a reset, not the
	// deadline (a bound in case it is not closed).
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 16)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection to the failed server: read %d bytes, %v; want it closed", n, err)
	}
	if got := ask(t, b); got != "two hello\n" {
		t.Fatalf("a new connection after the check: %q", got)
	}

	// It passes again: it is up, and the current server stays.
	c.set(silent.Addr().String(), false)
	b.CheckOnce(ctx)
	b.mu.Lock()
	_, down := b.down[silent.Addr().String()]
	b.mu.Unlock()
	if down || b.Current() != two.Addr().String() {
		t.Errorf("after the silent server passed: down %v, current %s; want up, and the second still current", down, b.Current())
	}

	// The checks go on each CheckPeriod on the clock (the calls of the
	// rounds above drained first).
	for len(c.calls) > 0 {
		<-c.calls
	}
	clk.Step(DefaultCheckPeriod)
	select {
	case <-c.calls:
	case <-time.After(10 * time.Second):
		t.Fatal("no check a CheckPeriod later")
	}
	cancel()
	if err := <-served; err != nil {
		t.Error(err)
	}
}
