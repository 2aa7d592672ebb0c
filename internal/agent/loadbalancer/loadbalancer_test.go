package loadbalancer

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
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
	for _, cfg := range []Config{{}, {Servers: []string{"no-port"}}, {Servers: []string{"a:1"}, DownFor: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
