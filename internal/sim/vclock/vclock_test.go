package vclock

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/clock"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fire is one observed firing: which timer, and what Now read inside it,
// as an offset from t0.
type fire struct {
	Name string
	At   time.Duration
}

// recorder collects firings from AfterFunc callbacks.
type recorder struct {
	c     *Clock
	mu    sync.Mutex
	fires []fire
}

func (r *recorder) fn(name string) func() {
	return func() {
		at := r.c.Now().Sub(t0)
		r.mu.Lock()
		r.fires = append(r.fires, fire{name, at})
		r.mu.Unlock()
	}
}

func (r *recorder) take() []fire {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.fires
	r.fires = nil
	return f
}

func TestNowSinceUntil(t *testing.T) {
	c := New(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now() = %v, want %v", got, t0)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), t0.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
	if got, want := c.Since(t0), 90*time.Second; got != want {
		t.Errorf("Since(t0) = %v, want %v", got, want)
	}
	if got, want := c.Until(t0.Add(2*time.Minute)), 30*time.Second; got != want {
		t.Errorf("Until(t0+2m) = %v, want %v", got, want)
	}
}

func TestNewStripsMonotonicReading(t *testing.T) {
	start := time.Now() // has a monotonic reading
	c := New(start)
	if got, want := c.Now().String(), start.Round(0).String(); got != want {
		t.Errorf("Now().String() = %q, want %q", got, want)
	}
}

func TestFiringOrder(t *testing.T) {
	type arm struct {
		name string
		d    time.Duration
	}
	cases := []struct {
		name        string
		arms        []arm
		advance     time.Duration
		want        []fire
		wantFired   int
		wantPending int
	}{
		{
			name:      "due order, Now reads each due time",
			arms:      []arm{{"c", 3 * time.Second}, {"a", time.Second}, {"b", 2 * time.Second}},
			advance:   5 * time.Second,
			want:      []fire{{"a", time.Second}, {"b", 2 * time.Second}, {"c", 3 * time.Second}},
			wantFired: 3,
		},
		{
			name:      "ties fire in creation order",
			arms:      []arm{{"x", 2 * time.Second}, {"y", time.Second}, {"z", 2 * time.Second}, {"w", 2 * time.Second}},
			advance:   2 * time.Second,
			want:      []fire{{"y", time.Second}, {"x", 2 * time.Second}, {"z", 2 * time.Second}, {"w", 2 * time.Second}},
			wantFired: 4,
		},
		{
			name:        "due exactly at the target fires, one nanosecond later does not",
			arms:        []arm{{"late", 5*time.Second + 1}, {"on-time", 5 * time.Second}},
			advance:     5 * time.Second,
			want:        []fire{{"on-time", 5 * time.Second}},
			wantFired:   1,
			wantPending: 1,
		},
		{
			name:        "non-positive durations are due now and fire on an advance of zero",
			arms:        []arm{{"one-ns", 1}, {"zero", 0}, {"negative", -time.Second}},
			advance:     0,
			want:        []fire{{"zero", 0}, {"negative", 0}},
			wantFired:   2,
			wantPending: 1,
		},
		{
			name:        "nothing due",
			arms:        []arm{{"a", 10 * time.Second}},
			advance:     9 * time.Second,
			wantPending: 1,
		},
		{
			name: "no timers at all",
		},
		{
			name:        "an advance of one nanosecond moves time",
			arms:        []arm{{"a", 2}},
			advance:     1,
			wantPending: 1,
		},
		{
			name:        "negative advance counts as zero",
			arms:        []arm{{"now", 0}, {"later", time.Second}},
			advance:     -time.Hour,
			want:        []fire{{"now", 0}},
			wantFired:   1,
			wantPending: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t0)
			r := &recorder{c: c}
			for _, a := range tc.arms {
				c.AfterFunc(a.d, r.fn(a.name))
			}
			fired := c.Advance(tc.advance)
			if diff := cmp.Diff(tc.want, r.take()); diff != "" {
				t.Errorf("firings (-want +got):\n%s", diff)
			}
			if fired != tc.wantFired {
				t.Errorf("Advance returned %d, want %d", fired, tc.wantFired)
			}
			if got := c.Pending(); got != tc.wantPending {
				t.Errorf("Pending() = %d, want %d", got, tc.wantPending)
			}
			if got, want := c.Now(), t0.Add(max(tc.advance, 0)); !got.Equal(want) {
				t.Errorf("Now() after advance = %v, want %v", got, want)
			}
		})
	}
}

func TestAdvanceToThePastKeepsTimeAndFiresWhatIsDue(t *testing.T) {
	c := New(t0)
	c.Advance(10 * time.Second)
	r := &recorder{c: c}
	c.AfterFunc(0, r.fn("due-now"))
	c.AfterFunc(time.Second, r.fn("later"))

	fired := c.AdvanceTo(t0.Add(5 * time.Second))

	if diff := cmp.Diff([]fire{{"due-now", 10 * time.Second}}, r.take()); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if fired != 1 {
		t.Errorf("AdvanceTo returned %d, want 1", fired)
	}
	if got, want := c.Now(), t0.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v (time must not go backward)", got, want)
	}
}

func TestStepAndNext(t *testing.T) {
	c := New(t0)
	if _, ok := c.Next(); ok {
		t.Fatal("Next() on an empty clock reported a pending timer")
	}
	if c.Step() {
		t.Fatal("Step() on an empty clock returned true")
	}
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Step() on an empty clock moved time to %v", got)
	}

	r := &recorder{c: c}
	c.AfterFunc(3*time.Second, r.fn("b1"))
	c.AfterFunc(7*time.Second, r.fn("c"))
	c.AfterFunc(3*time.Second, r.fn("b2"))

	next, ok := c.Next()
	if !ok || !next.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("Next() = %v, %v; want %v, true", next, ok, t0.Add(3*time.Second))
	}
	if !c.Step() {
		t.Fatal("Step() returned false with timers pending")
	}
	if diff := cmp.Diff([]fire{{"b1", 3 * time.Second}, {"b2", 3 * time.Second}}, r.take()); diff != "" {
		t.Errorf("first Step firings (-want +got):\n%s", diff)
	}
	if got, want := c.Now(), t0.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("Now() after Step = %v, want %v", got, want)
	}
	if !c.Step() {
		t.Fatal("second Step() returned false")
	}
	if diff := cmp.Diff([]fire{{"c", 7 * time.Second}}, r.take()); diff != "" {
		t.Errorf("second Step firings (-want +got):\n%s", diff)
	}
	if c.Step() {
		t.Error("third Step() returned true with nothing pending")
	}
}

func TestStepFiresWorkCallbacksAddAtTheSameInstant(t *testing.T) {
	c := New(t0)
	r := &recorder{c: c}
	c.AfterFunc(time.Second, func() {
		r.fn("first")()
		c.AfterFunc(0, r.fn("follow-up"))
		c.AfterFunc(1, r.fn("next-instant"))
	})
	c.Step()
	want := []fire{{"first", time.Second}, {"follow-up", time.Second}}
	if diff := cmp.Diff(want, r.take()); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if got := c.Pending(); got != 1 {
		t.Errorf("Pending() = %d, want 1", got)
	}
}

// TestCallbacksUseTheClockWithoutDeadlock checks that callbacks run outside
// the clock's lock: k8s.io/utils' FakeClock holds its lock while it calls
// them, so each of these calls would deadlock there. If ours deadlocked, the
// test would hang until go test's timeout.
func TestCallbacksUseTheClockWithoutDeadlock(t *testing.T) {
	c := New(t0)
	r := &recorder{c: c}
	victim := c.AfterFunc(4*time.Second, r.fn("victim"))
	moved := c.AfterFunc(time.Hour, r.fn("moved"))
	ch := c.NewTimer(time.Hour)
	var self clock.Timer
	runs := 0
	self = c.AfterFunc(time.Second, func() {
		runs++
		r.fn("self")()
		_ = c.Now()
		_ = c.Since(t0)
		_ = c.Pending()
		_, _ = c.Next()
		if runs == 1 {
			if !victim.Stop() {
				t.Error("victim.Stop() = false, want true")
			}
			if !moved.Reset(2 * time.Second) {
				t.Error("moved.Reset() = false, want true")
			}
			ch.Reset(time.Second)
			c.AfterFunc(time.Second, r.fn("child"))
			if self.Stop() {
				t.Error("Stop() of the running callback's own timer = true, want false")
			}
			if self.Reset(5 * time.Second) {
				t.Error("Reset() of the running callback's own timer = true, want false")
			}
		}
	})

	fired := c.Advance(10 * time.Second)

	want := []fire{
		{"self", time.Second},
		{"child", 2 * time.Second},
		{"moved", 3 * time.Second},
		{"self", 6 * time.Second},
	}
	if diff := cmp.Diff(want, r.take()); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	// self twice, child, moved, and the channel timer at 2s.
	if fired != 5 {
		t.Errorf("Advance returned %d, want 5", fired)
	}
	select {
	case got := <-ch.C():
		if want := t0.Add(2 * time.Second); !got.Equal(want) {
			t.Errorf("channel timer sent %v, want %v", got, want)
		}
	default:
		t.Error("channel timer reset by a callback did not fire")
	}
}

func TestCallbacksScheduleMoreWorkWithinOneAdvance(t *testing.T) {
	c := New(t0)
	r := &recorder{c: c}
	var chain func()
	chain = func() {
		r.fn("chain")()
		c.AfterFunc(2*time.Second, chain)
	}
	c.AfterFunc(2*time.Second, chain)
	c.AfterFunc(5*time.Second, r.fn("fixed"))

	fired := c.Advance(7 * time.Second)

	want := []fire{
		{"chain", 2 * time.Second},
		{"chain", 4 * time.Second},
		{"fixed", 5 * time.Second},
		{"chain", 6 * time.Second},
	}
	if diff := cmp.Diff(want, r.take()); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if fired != 4 {
		t.Errorf("Advance returned %d, want 4", fired)
	}
	if next, _ := c.Next(); !next.Equal(t0.Add(8 * time.Second)) {
		t.Errorf("Next() = %v, want t0+8s", next)
	}
}

func TestChannelTimer(t *testing.T) {
	t.Run("sends the due time once, buffer of one", func(t *testing.T) {
		c := New(t0)
		tm := c.NewTimer(3 * time.Second)
		if got := cap(tm.C()); got != 1 {
			t.Errorf("cap(C()) = %d, want 1", got)
		}
		c.Advance(10 * time.Second)
		if got, want := <-tm.C(), t0.Add(3*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
		c.Advance(10 * time.Second)
		select {
		case v := <-tm.C():
			t.Errorf("timer fired twice; second value %v", v)
		default:
		}
	})
	t.Run("After", func(t *testing.T) {
		c := New(t0)
		ch := c.After(time.Minute)
		c.Advance(time.Minute)
		if got, want := <-ch, t0.Add(time.Minute); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
	})
	t.Run("Stop before firing", func(t *testing.T) {
		c := New(t0)
		tm := c.NewTimer(time.Second)
		if !tm.Stop() {
			t.Error("first Stop() = false, want true")
		}
		if tm.Stop() {
			t.Error("second Stop() = true, want false")
		}
		if got := c.Advance(time.Minute); got != 0 {
			t.Errorf("Advance fired %d timers after Stop, want 0", got)
		}
		if c.Pending() != 0 {
			t.Errorf("Pending() = %d after Stop, want 0", c.Pending())
		}
	})
	t.Run("Stop after receiving", func(t *testing.T) {
		c := New(t0)
		tm := c.NewTimer(time.Second)
		c.Advance(time.Second)
		<-tm.C()
		if tm.Stop() {
			t.Error("Stop() after the value was received = true, want false")
		}
	})
	t.Run("Stop discards an unreceived value and reports it", func(t *testing.T) {
		c := New(t0)
		tm := c.NewTimer(time.Second)
		c.Advance(time.Second)
		if !tm.Stop() {
			t.Error("Stop() with an unreceived value = false, want true")
		}
		select {
		case v := <-tm.C():
			t.Errorf("received stale value %v after Stop", v)
		default:
		}
	})
	t.Run("the stop-and-drain idiom does not block", func(t *testing.T) {
		for _, received := range []bool{false, true} {
			c := New(t0)
			tm := c.NewTimer(time.Second)
			c.Advance(time.Second)
			if received {
				<-tm.C()
			}
			if !tm.Stop() && !received {
				t.Errorf("received=%v: Stop() = false with a value still buffered", received)
			}
		}
	})
	t.Run("Reset of a pending timer moves it", func(t *testing.T) {
		c := New(t0)
		tm := c.NewTimer(time.Second)
		if !tm.Reset(5 * time.Second) {
			t.Error("Reset() of a pending timer = false, want true")
		}
		if got := c.Advance(4 * time.Second); got != 0 {
			t.Errorf("fired %d before the new due time", got)
		}
		c.Advance(time.Second)
		if got, want := <-tm.C(), t0.Add(5*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
		if c.Pending() != 0 {
			t.Errorf("Pending() = %d, want 0 (Reset must not duplicate the timer)", c.Pending())
		}
	})
	t.Run("Reset after firing re-arms and discards the stale value", func(t *testing.T) {
		c := New(t0)
		tm := c.NewTimer(time.Second)
		c.Advance(time.Second)
		if !tm.Reset(time.Second) {
			t.Error("Reset() with an unreceived value = false, want true")
		}
		select {
		case v := <-tm.C():
			t.Errorf("received stale value %v after Reset", v)
		default:
		}
		c.Advance(time.Second)
		if got, want := <-tm.C(), t0.Add(2*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
		if tm.Reset(time.Second) {
			t.Error("Reset() of a fired and received timer = true, want false")
		}
	})
	t.Run("a duration past the end of time saturates", func(t *testing.T) {
		c := New(t0)
		c.Advance(time.Hour)
		c.NewTimer(math.MaxInt64)
		if got := c.Advance(math.MaxInt64); got != 1 {
			t.Errorf("Advance(MaxInt64) fired %d, want 1", got)
		}
	})
}

func TestAfterFuncStopAndReset(t *testing.T) {
	c := New(t0)
	r := &recorder{c: c}
	tm := c.AfterFunc(time.Second, r.fn("f"))
	if tm.C() != nil {
		t.Error("AfterFunc timer has a non-nil channel")
	}
	if !tm.Stop() {
		t.Error("Stop() of a pending AfterFunc = false, want true")
	}
	c.Advance(time.Minute)
	if got := r.take(); len(got) != 0 {
		t.Errorf("stopped callback ran: %v", got)
	}
	if tm.Reset(time.Second) {
		t.Error("Reset() of a stopped AfterFunc = true, want false")
	}
	c.Advance(time.Second)
	if diff := cmp.Diff([]fire{{"f", 61 * time.Second}}, r.take()); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
	if tm.Stop() {
		t.Error("Stop() after the callback ran = true, want false")
	}
}

func TestTicker(t *testing.T) {
	t.Run("ticks every period and drops into a full channel", func(t *testing.T) {
		c := New(t0)
		tk := c.NewTicker(10 * time.Second)
		if got := cap(tk.C()); got != 1 {
			t.Errorf("cap(C()) = %d, want 1", got)
		}
		if got := c.Advance(35 * time.Second); got != 3 {
			t.Errorf("Advance(35s) fired %d ticks, want 3", got)
		}
		// The first tick filled the buffer; the ones at 20s and 30s were dropped.
		if got, want := <-tk.C(), t0.Add(10*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
		if next, _ := c.Next(); !next.Equal(t0.Add(40 * time.Second)) {
			t.Errorf("Next() = %v, want t0+40s", next)
		}
		c.Advance(5 * time.Second)
		if got, want := <-tk.C(), t0.Add(40*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
		if c.Pending() != 1 {
			t.Errorf("Pending() = %d, want 1", c.Pending())
		}
	})
	t.Run("Stop and Reset", func(t *testing.T) {
		c := New(t0)
		tk := c.NewTicker(time.Second)
		c.Advance(time.Second)
		tk.Stop()
		select {
		case v := <-tk.C():
			t.Errorf("received stale tick %v after Stop", v)
		default:
		}
		if got := c.Advance(time.Minute); got != 0 {
			t.Errorf("stopped ticker fired %d times", got)
		}
		if c.Pending() != 0 {
			t.Errorf("Pending() = %d after Stop, want 0", c.Pending())
		}
		tk.(interface{ Reset(time.Duration) }).Reset(5 * time.Second)
		c.Advance(5 * time.Second)
		if got, want := <-tk.C(), t0.Add(66*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
		c.Advance(5 * time.Second)
		if got, want := <-tk.C(), t0.Add(71*time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
	})
	t.Run("ties with a timer keep creation order across ticks", func(t *testing.T) {
		c := New(t0)
		r := &recorder{c: c}
		tk := c.NewTicker(2 * time.Second)
		c.AfterFunc(4*time.Second, r.fn("timer"))
		c.AfterFunc(4*time.Second, func() {
			select {
			case v := <-tk.C():
				r.fn("tick at " + v.Sub(t0).String())()
			default:
				r.fn("no tick yet")()
			}
		})
		c.Advance(2 * time.Second)
		<-tk.C()
		c.Advance(2 * time.Second)
		want := []fire{{"timer", 4 * time.Second}, {"tick at 4s", 4 * time.Second}}
		if diff := cmp.Diff(want, r.take()); diff != "" {
			t.Errorf("firings (-want +got):\n%s", diff)
		}
	})
	t.Run("Tick", func(t *testing.T) {
		c := New(t0)
		if c.Tick(0) != nil || c.Tick(-time.Second) != nil {
			t.Error("Tick(d <= 0) returned a non-nil channel")
		}
		ch := c.Tick(time.Second)
		c.Advance(time.Second)
		if got, want := <-ch, t0.Add(time.Second); !got.Equal(want) {
			t.Errorf("received %v, want %v", got, want)
		}
	})
	t.Run("a tick past the end of time never comes", func(t *testing.T) {
		c := New(t0)
		c.NewTicker(math.MaxInt64 / 2)
		if got := c.Advance(math.MaxInt64); got != 2 {
			t.Errorf("Advance(MaxInt64) fired %d ticks, want 2", got)
		}
		if c.Pending() != 0 {
			t.Errorf("Pending() = %d, want 0", c.Pending())
		}
	})
}

func TestTickerPanicsOnNonPositiveInterval(t *testing.T) {
	cases := []struct {
		name string
		call func(c *Clock)
		want string
	}{
		{"NewTicker(0)", func(c *Clock) { c.NewTicker(0) }, "non-positive interval for NewTicker"},
		{"NewTicker(-1s)", func(c *Clock) { c.NewTicker(-time.Second) }, "non-positive interval for NewTicker"},
		{"Reset(0)", func(c *Clock) {
			c.NewTicker(time.Second).(interface{ Reset(time.Duration) }).Reset(0)
		}, "non-positive interval for Ticker.Reset"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if got := recover(); got != tc.want {
					t.Errorf("panic value = %v, want %q", got, tc.want)
				}
			}()
			tc.call(New(t0))
		})
	}
}

func TestSleep(t *testing.T) {
	c := New(t0)
	woke := make(chan time.Time)
	go func() {
		c.Sleep(5 * time.Second)
		woke <- c.Now()
	}()
	if err := c.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got := c.Advance(4 * time.Second); got != 0 {
		t.Errorf("Advance(4s) fired %d, want 0", got)
	}
	if got := c.Pending(); got != 1 {
		t.Fatalf("Pending() = %d with the sleeper not yet due, want 1", got)
	}
	if got := c.Advance(2 * time.Second); got != 1 {
		t.Errorf("Advance(2s) fired %d, want 1", got)
	}
	if got, want := <-woke, t0.Add(6*time.Second); !got.Equal(want) {
		t.Errorf("sleeper woke reading %v, want %v", got, want)
	}
	if got := c.Pending(); got != 0 {
		t.Errorf("Pending() = %d after waking, want 0", got)
	}
}

func TestSleepNonPositiveReturnsAtOnce(t *testing.T) {
	c := New(t0)
	c.Sleep(0)
	c.Sleep(-time.Second)
	if got := c.Pending(); got != 0 {
		t.Errorf("Pending() = %d, want 0", got)
	}
}

func TestBlockUntil(t *testing.T) {
	c := New(t0)
	done := make(chan error)
	go func() { done <- c.BlockUntil(context.Background(), 2) }()
	c.NewTimer(time.Second)
	c.AfterFunc(time.Second, func() {})
	if err := <-done; err != nil {
		t.Errorf("BlockUntil = %v, want nil", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.BlockUntil(ctx, 3); err != context.Canceled {
		t.Errorf("BlockUntil with a cancelled context = %v, want %v", err, context.Canceled)
	}
	if err := c.BlockUntil(ctx, 2); err != nil {
		t.Errorf("BlockUntil already satisfied = %v, want nil", err)
	}
}

// TestAgainstModel drives the clock and a naive model with the same random
// operations and checks that they agree on every firing, return value,
// Pending and Next. Small durations make ties common.
func TestAgainstModel(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		got := runScript(t, seed, false)
		want := runScript(t, seed, true)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("seed %d: clock disagrees with model (-model +clock):\n%s", seed, diff)
		}
		if again := runScript(t, seed, false); !cmp.Equal(got, again) {
			t.Fatalf("seed %d: two runs of the same script differ", seed)
		}
	}
}

// modelTimer is the model's view of one AfterFunc timer.
type modelTimer struct {
	pending bool
	due     time.Duration
	period  time.Duration // > 0: the callback re-arms itself this much later
}

// runScript runs one random script on the clock, or on the model, and
// returns a log of everything observable.
func runScript(t *testing.T, seed int64, model bool) []string {
	rng := rand.New(rand.NewSource(seed))
	dur := func() time.Duration { return time.Duration(rng.Intn(12)-2) * time.Second }
	var log []string
	logf := func(s string, args ...any) { log = append(log, fmt.Sprintf(s, args...)) }

	c := New(t0)
	var timers []clock.Timer
	var now time.Duration
	var mt []*modelTimer

	modelAdvance := func(target time.Duration) int {
		n := 0
		target = max(target, now)
		for {
			best := -1
			for i, m := range mt {
				if m.pending && m.due <= target && (best < 0 || m.due < mt[best].due) {
					best = i
				}
			}
			if best < 0 {
				break
			}
			m := mt[best]
			m.pending = false
			now = m.due
			n++
			logf("fire %d at %v", best, now)
			if m.period > 0 {
				m.pending, m.due = true, now+m.period
			}
		}
		now = target
		return n
	}
	modelPending := func() (n int) {
		for _, m := range mt {
			if m.pending {
				n++
			}
		}
		return n
	}

	for op := 0; op < 300; op++ {
		switch k := rng.Intn(10); {
		case k < 3: // create
			d := dur()
			var period time.Duration
			if rng.Intn(3) == 0 {
				period = time.Duration(1+rng.Intn(5)) * time.Second
			}
			id := len(mt)
			if model {
				mt = append(mt, &modelTimer{pending: true, due: now + max(d, 0), period: period})
			} else {
				var tm clock.Timer
				tm = c.AfterFunc(d, func() {
					logf("fire %d at %v", id, c.Now().Sub(t0))
					if period > 0 {
						tm.Reset(period)
					}
				})
				timers = append(timers, tm)
				mt = append(mt, nil) // keeps ids aligned
			}
			logf("create %d d=%v period=%v", id, d, period)
		case k < 5 && len(mt) > 0: // stop
			i := rng.Intn(len(mt))
			var was bool
			if model {
				was, mt[i].pending = mt[i].pending, false
			} else {
				was = timers[i].Stop()
			}
			logf("stop %d = %v", i, was)
		case k < 7 && len(mt) > 0: // reset
			i, d := rng.Intn(len(mt)), dur()
			var was bool
			if model {
				was = mt[i].pending
				mt[i].pending, mt[i].due = true, now+max(d, 0)
			} else {
				was = timers[i].Reset(d)
			}
			logf("reset %d d=%v = %v", i, d, was)
		case k < 8: // step
			var ok bool
			if model {
				next := time.Duration(-1)
				for _, m := range mt {
					if m.pending && (next < 0 || m.due < next) {
						next = m.due
					}
				}
				if ok = next >= 0; ok {
					modelAdvance(next)
				}
			} else {
				ok = c.Step()
			}
			logf("step = %v", ok)
		default: // advance, sometimes to the past
			d := time.Duration(rng.Intn(8)-1) * time.Second
			var n int
			if model {
				n = modelAdvance(now + d)
			} else {
				n = c.AdvanceTo(c.Now().Add(d))
			}
			logf("advance %v fired %d", d, n)
		}
		var pending int
		var next time.Duration
		if model {
			pending = modelPending()
			next = -1
			for _, m := range mt {
				if m.pending && (next < 0 || m.due < next) {
					next = m.due
				}
			}
			logf("now %v pending %d next %v", now, pending, next)
		} else {
			pending = c.Pending()
			next = -1
			if n, ok := c.Next(); ok {
				next = n.Sub(t0)
			}
			logf("now %v pending %d next %v", c.Now().Sub(t0), pending, next)
		}
	}
	return log
}

// TestConcurrentUse exercises the clock from many goroutines at once; run it
// with -race. Every AfterFunc either runs once or is stopped before it runs.
func TestConcurrentUse(t *testing.T) {
	c := New(t0)
	const workers, perWorker = 4, 300
	var created, stopped, ran atomic.Int64
	stop := make(chan struct{})

	var advancer sync.WaitGroup
	advancer.Add(1)
	go func() {
		defer advancer.Done()
		for {
			select {
			case <-stop:
				return
			default:
				c.Advance(time.Second)
			}
		}
	}()

	tk := c.NewTicker(time.Second)
	var tickReader sync.WaitGroup
	tickReader.Add(1)
	go func() {
		defer tickReader.Done()
		for {
			select {
			case <-stop:
				return
			case <-tk.C():
			}
		}
	}()

	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < perWorker; i++ {
				d := time.Duration(rng.Intn(20)) * time.Second
				created.Add(1)
				tm := c.AfterFunc(d, func() {
					ran.Add(1)
					c.AfterFunc(0, func() {}) // callbacks may use the clock
				})
				if rng.Intn(3) == 0 && tm.Stop() {
					stopped.Add(1)
				}
				ch := c.NewTimer(d)
				ch.Reset(d / 2)
				ch.Stop()
				_ = c.Now()
				_ = c.Pending()
				_, _ = c.Next()
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	advancer.Wait()
	tickReader.Wait()
	tk.Stop()

	c.Advance(time.Minute)
	if got, want := ran.Load()+stopped.Load(), created.Load(); got != want {
		t.Errorf("ran %d + stopped %d = %d, want %d created", ran.Load(), stopped.Load(), got, want)
	}
	if got := c.Pending(); got != 0 {
		t.Errorf("Pending() = %d after the final advance, want 0", got)
	}
}
