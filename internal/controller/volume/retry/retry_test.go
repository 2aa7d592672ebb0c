package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRetries(t *testing.T) {
	r := New(time.Second, 5*time.Second)
	if !r.Due("a", now) || !r.Next().IsZero() {
		t.Fatal("a fresh key is not due, or something waits")
	}
	var waits []time.Duration
	at := now
	for range 5 {
		next := r.Failed("a", at)
		waits = append(waits, next.Sub(at))
		if r.Due("a", next.Add(-time.Nanosecond)) {
			t.Errorf("due a nanosecond before %v", next)
		}
		if !r.Due("a", next) {
			t.Errorf("not due at exactly %v", next)
		}
		at = next
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	r.Failed("b", now)
	if got := r.Next(); !got.Equal(now.Add(time.Second)) {
		t.Errorf("next = %v, want b's %v", got, now.Add(time.Second))
	}
	r.Succeeded("b")
	r.Keep(func(k string) bool { return k != "a" })
	if !r.Next().IsZero() {
		t.Errorf("keys remain after succeeded and keep: %v", r.m)
	}
	r.Failed("a", now)
	if got := r.Failed("a", now); !got.Equal(now.Add(2 * time.Second)) {
		t.Errorf("a key forgotten by keep did not restart its back-off: due %v", got)
	}
}

func TestWithTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	ctx, cancel := WithTimeout(context.Background(), clk, 10*time.Second)
	defer cancel()
	clk.Step(10*time.Second - time.Nanosecond)
	if ctx.Err() != nil {
		t.Fatal("cancelled before the timeout")
	}
	clk.Step(time.Nanosecond)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("ctx.Err() = %v", ctx.Err())
	}

	ctx, cancel = WithTimeout(context.Background(), clk, time.Hour)
	cancel()
	<-ctx.Done()
}

func TestRetriesLong(t *testing.T) {
	r := New(time.Second, 4*time.Second)
	var waits []time.Duration
	for range 4 {
		waits = append(waits, r.Failed("a", now).Sub(now))
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if at := r.FailedLong("b", now); !at.Equal(now.Add(4 * time.Second)) {
		t.Errorf("failedLong due %v, want the longest back-off at once", at)
	}
	if r.Due("b", now.Add(4*time.Second-time.Nanosecond)) || !r.Due("b", now.Add(4*time.Second)) {
		t.Error("b is due before its time or not at it")
	}
	r.Succeeded("a")
	r.Keep(func(string) bool { return false })
	if !r.Next().IsZero() || !r.Due("b", now) {
		t.Error("keys remain after keep")
	}
}

func TestWithTimeoutFires(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	ctx, cancel := WithTimeout(context.Background(), clk, time.Second)
	defer cancel()
	clk.Step(time.Second)
	<-ctx.Done()
}

func TestCheck(t *testing.T) {
	var timeout, start, max time.Duration
	if err := Check("x", &timeout, &start, &max, time.Minute, time.Second, time.Hour); err != nil || timeout != time.Minute || start != time.Second || max != time.Hour {
		t.Fatalf("defaults: %v %v %v %v", err, timeout, start, max)
	}
	neg := -time.Second
	if err := Check("x", &neg, &start, &max, 1, 1, 1); err == nil || err.Error() != "x: Timeout -1s must not be negative" {
		t.Errorf("negative timeout: %v", err)
	}
	low := time.Millisecond
	if err := Check("x", &timeout, &start, &low, 1, 1, 1); err == nil || err.Error() != "x: RetryMax 1ms must not be below RetryStart 1s" {
		t.Errorf("max below start: %v", err)
	}
}
