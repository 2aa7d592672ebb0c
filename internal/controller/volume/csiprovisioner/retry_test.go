package csiprovisioner

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRetries(t *testing.T) {
	r := newRetries(time.Second, 4*time.Second)
	var waits []time.Duration
	for range 4 {
		waits = append(waits, r.failed("a", now).Sub(now))
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if at := r.failedLong("b", now); !at.Equal(now.Add(4 * time.Second)) {
		t.Errorf("failedLong due %v, want the longest back-off at once", at)
	}
	if r.due("b", now.Add(4*time.Second-time.Nanosecond)) || !r.due("b", now.Add(4*time.Second)) {
		t.Error("b is due before its time or not at it")
	}
	r.succeeded("a")
	r.keep(func(string) bool { return false })
	if !r.next().IsZero() || !r.due("b", now) {
		t.Error("keys remain after keep")
	}
}

func TestWithTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	ctx, cancel := withTimeout(context.Background(), clk, time.Second)
	defer cancel()
	clk.Step(time.Second)
	<-ctx.Done()
}
