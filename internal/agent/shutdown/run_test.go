package shutdown

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"knode/internal/agent/shutdown/membus"
)

// TestRunReconnects: Run takes a lock on every new connection, a lost bus
// drops the lock, and the next connection comes one second later on the
// clock.
func TestRunReconnects(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute)
	var mu sync.Mutex
	var buses []*membus.Bus
	h.m.cfg.Dial = func() (Bus, error) {
		mu.Lock()
		defer mu.Unlock()
		b := membus.New(time.Minute, "")
		buses = append(buses, b)
		return b, nil
	}
	bus := func(i int) *membus.Bus {
		mu.Lock()
		defer mu.Unlock()
		if i < len(buses) {
			return buses[i]
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.m.Run(ctx)
	}()
	// until waits, without sleeping, for cond; the test's deadline bounds it.
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-done:
				t.Fatalf("Run returned while waiting for %s", what)
			default:
				runtime.Gosched()
			}
		}
	}
	until("the first lock", func() bool { b := bus(0); return b != nil && b.HeldLocks() == 1 })

	start := h.clk.Now()
	_ = bus(0).Close() // the bus is lost: every watch ends
	until("the lock to drop", func() bool { return !h.m.HoldsLock() })
	until("the reconnect timer", h.clk.HasWaiters)
	if bus(1) != nil {
		t.Fatal("reconnected before the second had passed")
	}
	h.clk.Step(999 * time.Millisecond)
	runtime.Gosched()
	if bus(1) != nil {
		t.Fatal("reconnected before the second had passed")
	}
	h.clk.Step(time.Millisecond)
	until("the second lock", func() bool { b := bus(1); return b != nil && b.HeldLocks() == 1 })
	if got := h.clk.Now().Sub(start); got != time.Second {
		t.Errorf("reconnected after %v, want 1s", got)
	}

	// A shutdown announced on the new bus is handled.
	bus(1).PrepareForShutdown(true)
	until("the shutdown", func() bool { return h.m.ShutdownStatus() != nil })
	// An idle node releases at once; the cancellation takes a new lock.
	until("the release", func() bool { return bus(1).HeldLocks() == 0 })
	bus(1).PrepareForShutdown(false)
	until("the lock after the cancellation", func() bool { return bus(1).HeldLocks() == 1 })
	cancel()
	<-done
	if bus(1).HeldLocks() != 0 {
		t.Error("Run left a lock held when it returned")
	}
}
