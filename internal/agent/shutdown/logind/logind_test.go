package logind_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/agent/shutdown/logind"
	"knode/internal/agent/shutdown/logind/logindtest"
)

// waitTimeout bounds every wait; on a healthy machine each takes
// milliseconds.
const waitTimeout = 10 * time.Second

func startFake(t *testing.T, cfg logindtest.Config) *logindtest.Fake {
	t.Helper()
	f, err := logindtest.StartFake(cfg)
	if err != nil {
		t.Fatalf("StartFake: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func dial(t *testing.T, address string, opts ...logind.Option) *logind.Conn {
	t.Helper()
	c, err := logind.Dial(address, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// next returns the next signal, failing the test if none comes in time or
// the channel closes.
func next(t *testing.T, ch <-chan logind.Signal) logind.Signal {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed, want a signal")
		}
		return s
	case <-waitCtx(t).Done():
		t.Fatal("no signal within timeout")
	}
	return logind.Signal{}
}

func TestDialReadsProperties(t *testing.T) {
	tests := []struct {
		name      string
		delay     time.Duration
		preparing bool
		wantDelay time.Duration
	}{
		{name: "typical", delay: 15 * time.Second, preparing: false, wantDelay: 15 * time.Second},
		{name: "shutdown under way", delay: 5 * time.Second, preparing: true, wantDelay: 5 * time.Second},
		{name: "microseconds kept", delay: 1500 * time.Microsecond, wantDelay: 1500 * time.Microsecond},
		{name: "zero", delay: 0, wantDelay: 0},
		{name: "infinity", delay: math.MaxInt64, wantDelay: math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := logindtest.StartBus(t)
			f := startFake(t, logindtest.Config{Address: addr, InhibitDelayMax: tc.delay})
			f.SetPreparingForShutdown(tc.preparing)
			c := dial(t, addr)

			delay, err := c.InhibitDelayMax()
			if err != nil {
				t.Fatalf("InhibitDelayMax: %v", err)
			}
			if delay != tc.wantDelay {
				t.Errorf("InhibitDelayMax = %v, want %v", delay, tc.wantDelay)
			}
			preparing, err := c.PreparingForShutdown()
			if err != nil {
				t.Fatalf("PreparingForShutdown: %v", err)
			}
			if preparing != tc.preparing {
				t.Errorf("PreparingForShutdown = %v, want %v", preparing, tc.preparing)
			}
		})
	}
}

func TestDialEmptyAddressUsesEnvironment(t *testing.T) {
	addr := logindtest.StartBus(t)
	startFake(t, logindtest.Config{Address: addr, InhibitDelayMax: 7 * time.Second})
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", addr)
	c := dial(t, "")
	delay, err := c.InhibitDelayMax()
	if err != nil || delay != 7*time.Second {
		t.Fatalf("InhibitDelayMax = %v, %v; want 7s, nil", delay, err)
	}
}

func TestDialNoBus(t *testing.T) {
	addr := "unix:path=" + filepath.Join(t.TempDir(), "none")
	c, err := logind.Dial(addr)
	if err == nil {
		c.Close()
		t.Fatal("Dial to a missing socket succeeded")
	}
	if !strings.Contains(err.Error(), "connecting to system bus") {
		t.Errorf("error %q does not say what failed", err)
	}
}

func TestErrorsNameWhatFailed(t *testing.T) {
	// A bus without logind: every call fails, and says which.
	c := dial(t, logindtest.StartBus(t))
	_, err := c.InhibitDelayMax()
	wantErr(t, err, "reading InhibitDelayMaxUSec: ")
	_, err = c.PreparingForShutdown()
	wantErr(t, err, "reading PreparingForShutdown: ")
	f, err := c.InhibitShutdown(logind.Who, logind.Why)
	if f != nil {
		f.Close()
	}
	wantErr(t, err, "taking shutdown inhibitor lock: ")
	wantErr(t, c.ReloadLogind(), "reloading systemd-logind.service: ")
}

func wantErr(t *testing.T, err error, prefix string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), prefix) {
		t.Errorf("error = %v, want one starting %q", err, prefix)
	}
}

func TestInhibitShutdown(t *testing.T) {
	addr := logindtest.StartBus(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	f := startFake(t, logindtest.Config{Address: addr, Clock: clk})
	c := dial(t, addr)

	lock, err := c.InhibitShutdown(logind.Who, logind.Why)
	if err != nil {
		t.Fatalf("InhibitShutdown: %v", err)
	}
	defer lock.Close()
	want := []logindtest.Inhibitor{{What: "shutdown", Who: "kubelet", Why: "Kubelet needs time to handle node shutdown", Mode: "delay", Taken: t0}}
	if diff := cmp.Diff(want, f.Inhibitors()); diff != "" {
		t.Fatalf("Inhibitors after InhibitShutdown (-want +got):\n%s", diff)
	}

	// The lock outlives the connection it was taken on.
	c.Close()
	if !f.Inhibitors()[0].Held() {
		t.Fatal("lock released when the connection closed, want held until the file closes")
	}

	t1 := t0.Add(3 * time.Second)
	clk.SetTime(t1)
	if err := lock.Close(); err != nil {
		t.Fatalf("closing lock: %v", err)
	}
	if err := f.WaitFor(waitCtx(t), func(f *logindtest.Fake) bool { return !f.Inhibitors()[0].Held() }); err != nil {
		t.Fatalf("lock not released after closing its file: %v", err)
	}
	want[0].Released = t1
	if diff := cmp.Diff(want, f.Inhibitors()); diff != "" {
		t.Errorf("Inhibitors after close (-want +got):\n%s", diff)
	}
}

func TestWriteDropIn(t *testing.T) {
	tests := []struct {
		delay time.Duration
		want  string // the InhibitDelayMaxSec value
	}{
		{30 * time.Second, "30"},
		{0, "0"},
		{1400 * time.Millisecond, "1"},
		{1500 * time.Millisecond, "2"},
		{2500 * time.Millisecond, "2"}, // %.0f: an exact half goes to even
		{2501 * time.Millisecond, "3"},
		{500 * time.Millisecond, "0"},
		{90 * time.Minute, "5400"},
	}
	for _, tc := range tests {
		t.Run(tc.delay.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "logind.conf.d")
			path, err := logind.WriteDropIn(dir, tc.delay)
			if err != nil {
				t.Fatalf("WriteDropIn: %v", err)
			}
			if want := filepath.Join(dir, "99-kubelet.conf"); path != want {
				t.Errorf("path = %q, want %q", path, want)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=" + tc.want + "\n"
			if diff := cmp.Diff(want, string(got)); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
			checkMode(t, dir, 0o755|os.ModeDir)
			checkMode(t, path, 0o644)
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Errorf("dir holds %v (%v), want only the drop-in", entries, err)
			}
		})
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != want {
		t.Errorf("mode of %s = %v, want %v", path, fi.Mode(), want)
	}
}

func TestWriteDropInReplaces(t *testing.T) {
	dir := t.TempDir()
	if _, err := logind.WriteDropIn(dir, time.Minute); err != nil {
		t.Fatal(err)
	}
	path, err := logind.WriteDropIn(dir, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(got, []byte("\nInhibitDelayMaxSec=10\n")) {
		t.Errorf("content %q, want the second delay", got)
	}
}

func TestWriteDropInRefusesNegative(t *testing.T) {
	dir := t.TempDir()
	if _, err := logind.WriteDropIn(dir, -time.Second); err == nil {
		t.Fatal("WriteDropIn(-1s) succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("dir holds %v after a refused write", entries)
	}
}

func TestReloadLogind(t *testing.T) {
	tests := []struct {
		name        string
		refuseRaise bool
		want        time.Duration
	}{
		{name: "raised", want: 30 * time.Second},
		{name: "logind refuses", refuseRaise: true, want: 5 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := logindtest.StartBus(t)
			dir := t.TempDir()
			f := startFake(t, logindtest.Config{Address: addr, InhibitDelayMax: 5 * time.Second, DropInDir: dir, RefuseRaise: tc.refuseRaise})
			c := dial(t, addr)

			if _, err := logind.WriteDropIn(dir, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if err := c.ReloadLogind(); err != nil {
				t.Fatalf("ReloadLogind: %v", err)
			}
			if got := f.Reloads(); got != 1 {
				t.Errorf("Reloads = %d, want 1", got)
			}
			delay, err := c.InhibitDelayMax()
			if err != nil {
				t.Fatal(err)
			}
			if delay != tc.want {
				t.Errorf("InhibitDelayMax after reload = %v, want %v", delay, tc.want)
			}
		})
	}
}

// logRecorder keeps the records logged through it.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// warnSenders returns the sender attribute of every Warn record.
func (r *logRecorder) warnSenders() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var senders []string
	for _, rec := range r.records {
		if rec.Level != slog.LevelWarn {
			continue
		}
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "sender" {
				senders = append(senders, a.Value.String())
			}
			return true
		})
	}
	return senders
}

func TestWatch(t *testing.T) {
	addr := logindtest.StartBus(t)
	f := startFake(t, logindtest.Config{Address: addr, InhibitDelayMax: 10 * time.Second})
	logs := &logRecorder{}
	c := dial(t, addr, logind.WithLogger(slog.New(logs)))
	ch, err := c.Watch()
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	prepare := func(active bool) logind.Signal {
		return logind.Signal{Kind: logind.PrepareForShutdown, Active: active}
	}
	expect := func(t *testing.T, want logind.Signal) {
		t.Helper()
		if diff := cmp.Diff(want, next(t, ch)); diff != "" {
			t.Fatalf("signal (-want +got):\n%s", diff)
		}
	}

	t.Run("from logind", func(t *testing.T) {
		for _, active := range []bool{true, false} {
			if err := f.PrepareForShutdown(active); err != nil {
				t.Fatal(err)
			}
			expect(t, prepare(active))
		}
	})

	t.Run("spoof dropped", func(t *testing.T) {
		// The spoof reaches the bus first; if it were let through it would
		// be the next signal.
		if err := f.Spoof(true); err != nil {
			t.Fatal(err)
		}
		if err := f.PrepareForShutdown(false); err != nil {
			t.Fatal(err)
		}
		expect(t, prepare(false))
		senders := logs.warnSenders()
		if len(senders) != 1 || !strings.HasPrefix(senders[0], ":") || senders[0] == f.Owner() {
			t.Errorf("Warn senders = %q, want the spoofer's unique name", senders)
		}
	})

	t.Run("logind restarts", func(t *testing.T) {
		lock, err := c.InhibitShutdown(logind.Who, logind.Why)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		oldOwner := f.Owner()
		if err := f.Restart(); err != nil {
			t.Fatal(err)
		}
		if f.Owner() == oldOwner {
			t.Fatalf("owner %q unchanged by Restart", oldOwner)
		}
		expect(t, logind.Signal{Kind: logind.OwnerChanged, Owner: ""})
		expect(t, logind.Signal{Kind: logind.OwnerChanged, Owner: f.Owner()})
		if f.Inhibitors()[0].Held() {
			t.Error("lock taken before the restart is still held")
		}
		// The new logind's signals count; a spoof still does not.
		if err := f.Spoof(false); err != nil {
			t.Fatal(err)
		}
		if err := f.PrepareForShutdown(true); err != nil {
			t.Fatal(err)
		}
		expect(t, prepare(true))
		if delay, err := c.InhibitDelayMax(); err != nil || delay != 10*time.Second {
			t.Errorf("InhibitDelayMax after restart = %v, %v; want 10s", delay, err)
		}
	})
}

func TestWatchBeforeLogindStarts(t *testing.T) {
	addr := logindtest.StartBus(t)
	c := dial(t, addr, logind.WithLogger(slog.New(slog.DiscardHandler)))
	ch, err := c.Watch()
	if err != nil {
		t.Fatalf("Watch with no logind on the bus: %v", err)
	}
	f := startFake(t, logindtest.Config{Address: addr})
	if s := next(t, ch); s != (logind.Signal{Kind: logind.OwnerChanged, Owner: f.Owner()}) {
		t.Fatalf("signal = %+v, want OwnerChanged to %s", s, f.Owner())
	}
	if err := f.PrepareForShutdown(true); err != nil {
		t.Fatal(err)
	}
	if s := next(t, ch); s != (logind.Signal{Kind: logind.PrepareForShutdown, Active: true}) {
		t.Fatalf("signal = %+v, want PrepareForShutdown(true)", s)
	}
}

func TestWatchClosesWhenConnectionEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(*logindtest.Bus, *logind.Conn)
	}{
		{name: "bus dies", end: func(b *logindtest.Bus, _ *logind.Conn) { b.Kill() }},
		{name: "Close", end: func(_ *logindtest.Bus, c *logind.Conn) { c.Close() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bus := logindtest.NewBus(t)
			f := startFake(t, logindtest.Config{Address: bus.Address})
			c := dial(t, bus.Address)
			ch, err := c.Watch()
			if err != nil {
				t.Fatal(err)
			}
			// Leave a signal unread: the relay must not block on it.
			if err := f.PrepareForShutdown(true); err != nil {
				t.Fatal(err)
			}
			tc.end(bus, c)
			ctx := waitCtx(t)
			for {
				select {
				case _, ok := <-ch:
					if !ok {
						return
					}
				case <-ctx.Done():
					t.Fatal("watch channel still open after the connection ended")
				}
			}
		})
	}
}

func TestSignalKindString(t *testing.T) {
	for k, want := range map[logind.SignalKind]string{
		logind.PrepareForShutdown: "PrepareForShutdown",
		logind.OwnerChanged:       "OwnerChanged",
		0:                         "SignalKind(0)",
	} {
		if got := k.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(k), got, want)
		}
	}
}
