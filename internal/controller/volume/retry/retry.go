// Package retry holds what the controllers that call a CSI driver share:
// a per-object exponential back-off on the caller's clock, and a context
// that times out on that clock. It does no I/O and reads no clock itself.
package retry

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Backoff is the per-object exponential back-off: after the n-th failure
// in a row an object waits start·2^(n-1), at most max, before a pass
// tries it again. The zero value is not usable; start and max must be
// positive.
type Backoff struct {
	start, max time.Duration
	m          map[string]retryState
}

type retryState struct {
	delay time.Duration
	at    time.Time
}

// New returns a Backoff from start doubling up to max.
func New(start, max time.Duration) *Backoff {
	return &Backoff{start: start, max: max, m: map[string]retryState{}}
}

// Due reports whether key may be tried at now.
func (r *Backoff) Due(key string, now time.Time) bool {
	s, ok := r.m[key]
	return !ok || !now.Before(s.at)
}

// Failed records a failure of key at now and returns when it is due again.
func (r *Backoff) Failed(key string, now time.Time) time.Time {
	s := r.m[key]
	switch {
	case s.delay == 0:
		s.delay = r.start
	case s.delay < r.max:
		s.delay *= 2
	}
	if s.delay > r.max {
		s.delay = r.max
	}
	s.at = now.Add(s.delay)
	r.m[key] = s
	return s.at
}

// FailedLong records a failure of key at now that waits the longest
// back-off at once, and returns when it is due again.
func (r *Backoff) FailedLong(key string, now time.Time) time.Time {
	s := retryState{delay: r.max, at: now.Add(r.max)}
	r.m[key] = s
	return s.at
}

// Succeeded forgets key's failures.
func (r *Backoff) Succeeded(key string) { delete(r.m, key) }

// Keep forgets every key that keep reports false for.
func (r *Backoff) Keep(keep func(string) bool) {
	for k := range r.m {
		if !keep(k) {
			delete(r.m, k)
		}
	}
}

// Next is the earliest time a waiting key is due; zero when none waits.
func (r *Backoff) Next() time.Time {
	var at time.Time
	for _, s := range r.m {
		if at.IsZero() || s.at.Before(at) {
			at = s.at
		}
	}
	return at
}

// WithTimeout is ctx cancelled once d has passed on clk, or when the
// returned cancel is called, whichever comes first. The caller must call
// cancel.
func WithTimeout(ctx context.Context, clk clock.WithTicker, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	timer := clk.NewTimer(d)
	done := make(chan struct{})
	go func() {
		defer timer.Stop()
		select {
		case <-timer.C():
			cancel()
		case <-done:
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		close(done)
		cancel()
	}
}

// Check fills the zero durations of a driver caller's Config with their
// defaults (timeout for each call, start and max of the back-off), and
// rejects a negative one or a max below start, naming the field; pkg
// prefixes the messages.
func Check(pkg string, timeout, start, max *time.Duration, defTimeout, defStart, defMax time.Duration) error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{{"Timeout", timeout, defTimeout}, {"RetryStart", start, defStart}, {"RetryMax", max, defMax}} {
		if *d.v < 0 {
			return fmt.Errorf("%s: %s %v must not be negative", pkg, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if *max < *start {
		return fmt.Errorf("%s: RetryMax %v must not be below RetryStart %v", pkg, *max, *start)
	}
	return nil
}
