package loop_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/controller/loop"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const resync = 30 * time.Second

// fakeInformer keeps the handlers the loop registers; nothing else of the
// interface is used.
type fakeInformer struct {
	cache.SharedIndexInformer
	handlers []cache.ResourceEventHandler
}

func (f *fakeInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	f.handlers = append(f.handlers, h)
	return nil, nil
}

// harness runs loop.Run on a fake clock; every pass blocks until the test
// takes it from passes, so the test decides when the loop moves on.
type harness struct {
	t        *testing.T
	clk      *testingclock.FakeClock
	inf      *fakeInformer
	passes   chan time.Time
	errs     chan error // what the next pass returns; empty: nil
	cancel   context.CancelFunc
	done     chan struct{}
	log      *bytes.Buffer
	handlers int // handlers registered when Start was called
	started  bool
	startCh  chan struct{} // closed by Start
}

func start(t *testing.T, nextDue time.Duration, margin time.Duration) *harness {
	t.Helper()
	h := &harness{
		t:       t,
		clk:     testingclock.NewFakeClock(t0),
		inf:     &fakeInformer{},
		passes:  make(chan time.Time),
		errs:    make(chan error, 1),
		done:    make(chan struct{}),
		log:     &bytes.Buffer{},
		startCh: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	cfg := loop.Config{
		Clock:     h.clk,
		Resync:    resync,
		Informers: []cache.SharedIndexInformer{h.inf},
		Start: func(stop <-chan struct{}) {
			h.started = stop == ctx.Done()
			h.handlers = len(h.inf.handlers)
			close(h.startCh)
		},
		Sync: func(ctx context.Context) error {
			select {
			case h.passes <- h.clk.Now():
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case err := <-h.errs:
				return err
			default:
				return nil
			}
		},
		DueMargin: margin,
		Logger:    slog.New(slog.NewTextHandler(h.log, nil)),
		Name:      "test",
	}
	if nextDue != 0 {
		cfg.NextDue = func() time.Time { return t0.Add(nextDue) }
	}
	go func() {
		defer close(h.done)
		loop.Run(ctx, cfg)
	}()
	t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

// pass waits for the next pass and returns the clock's time in it.
func (h *harness) pass() time.Time {
	h.t.Helper()
	return <-h.passes
}

// settle waits until the loop, after a pass, holds n clock waiters (the
// ticker, plus the due timer when there is one).
func (h *harness) settle(n int) {
	for h.clk.Waiters() != n {
		runtime.Gosched()
	}
}

// idle fails if a pass is pending.
func (h *harness) idle() {
	h.t.Helper()
	select {
	case at := <-h.passes:
		h.t.Fatalf("unexpected pass at %v", at)
	default:
	}
}

func TestRunPasses(t *testing.T) {
	cases := []struct {
		name    string
		nextDue time.Duration // after t0; 0 means none
		margin  time.Duration
		waiters int
		// trigger wakes the loop after the first pass; it returns the
		// clock's time the next pass must see.
		trigger func(h *harness) time.Time
	}{
		{
			name: "add event", waiters: 1,
			trigger: func(h *harness) time.Time { h.inf.handlers[0].OnAdd(nil, false); return t0 },
		},
		{
			name: "update event", waiters: 1,
			trigger: func(h *harness) time.Time { h.inf.handlers[0].OnUpdate(nil, nil); return t0 },
		},
		{
			name: "delete event", waiters: 1,
			trigger: func(h *harness) time.Time { h.inf.handlers[0].OnDelete(nil); return t0 },
		},
		{
			name: "resync tick", waiters: 1,
			trigger: func(h *harness) time.Time {
				h.clk.Step(resync - time.Nanosecond)
				h.idle()
				h.clk.Step(time.Nanosecond)
				return t0.Add(resync)
			},
		},
		{
			name: "due time plus margin", nextDue: 10 * time.Second, margin: time.Second, waiters: 2,
			trigger: func(h *harness) time.Time {
				h.clk.Step(10 * time.Second)
				// A timer that fires leaves the fake clock at once.
				if n := h.clk.Waiters(); n != 2 {
					h.t.Fatalf("due timer fired before the margin: %d waiters, want 2", n)
				}
				h.clk.Step(time.Second)
				return t0.Add(11 * time.Second)
			},
		},
		{
			name: "due time without margin", nextDue: 5 * time.Second, waiters: 2,
			trigger: func(h *harness) time.Time {
				h.clk.Step(5 * time.Second)
				return t0.Add(5 * time.Second)
			},
		},
		{
			// The fake clock fires a timer set in the past at its next step.
			name: "due time already past", nextDue: -time.Minute, margin: time.Second, waiters: 2,
			trigger: func(h *harness) time.Time { h.clk.Step(0); return t0 },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, tc.nextDue, tc.margin)
			if got := h.pass(); !got.Equal(t0) {
				t.Fatalf("first pass at %v, want %v", got, t0)
			}
			if !h.started || h.handlers != 1 {
				t.Fatalf("Start: stop is ctx.Done() %v, handlers registered before %d; want true, 1", h.started, h.handlers)
			}
			h.settle(tc.waiters)
			h.idle()
			want := tc.trigger(h)
			if got := h.pass(); !got.Equal(want) {
				t.Errorf("pass at %v, want %v", got, want)
			}
		})
	}
}

func TestRunCoalescesEvents(t *testing.T) {
	h := start(t, 0, 0)
	<-h.startCh
	// The first pass cannot end before the test takes it, so these all
	// come while it runs.
	for range 3 {
		h.inf.handlers[0].OnAdd(nil, false)
	}
	h.pass()
	h.pass()
	h.settle(1)
	h.idle()
}

func TestRunStopsOnCancel(t *testing.T) {
	h := start(t, 10*time.Second, time.Second)
	h.pass()
	h.settle(2)
	h.cancel()
	<-h.done
	// The due timer is stopped; the fake clock never drops a ticker, even
	// a stopped one, so one waiter stays.
	if n := h.clk.Waiters(); n != 1 {
		t.Errorf("%d clock waiters left after Run returned, want 1", n)
	}
	h.clk.Step(time.Hour)
	h.idle()
}

func TestRunLogsFailures(t *testing.T) {
	h := start(t, 0, 0)
	h.errs <- errors.New("boom")
	h.pass()
	h.inf.handlers[0].OnAdd(nil, false)
	h.pass() // the first pass's failure is logged before this one starts
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(h.log.String()), "\n") {
		if i := strings.Index(line, "msg="); i >= 0 {
			got = append(got, line[i:])
		}
	}
	want := []string{`msg="test pass failed" err=boom`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}

func TestRunRequiresSyncAndResync(t *testing.T) {
	cases := []struct {
		name string
		cfg  loop.Config
	}{
		{name: "no sync", cfg: loop.Config{Resync: time.Second}},
		{name: "zero resync", cfg: loop.Config{Sync: func(context.Context) error { return nil }}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("Run did not panic")
				}
			}()
			loop.Run(context.Background(), tc.cfg)
		})
	}
}

func TestTimerUntil(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(start)
	if timer := loop.TimerUntil(clk, start); timer != nil {
		t.Errorf("timer for a time already reached: %v, want nil", timer)
	}
	if timer := loop.TimerUntil(clk, start.Add(-time.Second)); timer != nil {
		t.Errorf("timer for a time in the past: %v, want nil", timer)
	}
	timer := loop.TimerUntil(clk, start.Add(3*time.Second))
	if timer == nil {
		t.Fatal("no timer for a time ahead")
	}
	defer timer.Stop()
	clk.Step(3*time.Second - time.Nanosecond)
	select {
	case <-timer.C():
		t.Fatal("fired 1ns early")
	default:
	}
	clk.Step(time.Nanosecond)
	select {
	case <-timer.C():
	default:
		t.Fatal("did not fire at the time")
	}
}

func TestCheckSettings(t *testing.T) {
	var resync time.Duration
	var clk clock.WithTicker
	var logger *slog.Logger
	settings := func(hasClient bool) loop.Settings {
		return loop.Settings{Package: "demo", HasClient: hasClient, ResyncPeriod: &resync, DefaultResync: time.Minute, Clock: &clk, Logger: &logger}
	}
	if err := loop.Check(settings(false)); err == nil || err.Error() != "demo: Config.Client is required" {
		t.Errorf("no client: %v", err)
	}
	resync = -time.Second
	if err := loop.Check(settings(true)); err == nil || err.Error() != "demo: ResyncPeriod -1s must not be negative" {
		t.Errorf("negative resync: %v", err)
	}
	resync = 0
	if err := loop.Check(settings(true)); err != nil {
		t.Fatal(err)
	}
	if resync != time.Minute || clk == nil || logger == nil {
		t.Errorf("defaults: resync %v, clock %v, logger %v; want 1m, the real clock, slog's default", resync, clk, logger)
	}
}
