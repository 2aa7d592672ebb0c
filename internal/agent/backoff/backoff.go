// Package backoff owns the capped exponential waits the node agent uses
// between failed attempts, with the exact schedules of the kubelet.
//
// It only computes durations. The caller waits (on its injected clock),
// calls Next before each wait and Reset after a success. An Exponential is
// not safe for concurrent use, and it adds no jitter: upstream adds none to
// these two schedules.
package backoff

import "time"

// Exponential yields Initial, 2×Initial, 4×Initial, … capped at Max, for
// ever. The zero value of the internal state means "before the first wait";
// construct it with a composite literal or one of the schedule functions.
type Exponential struct {
	// Initial is the first wait. It must be positive; zero or less makes
	// every wait zero.
	Initial time.Duration
	// Max caps every wait. Zero or less means no cap.
	Max time.Duration

	// next is the wait Next returns next time; 0 before the first call.
	next time.Duration
}

// LeaseEnsure is the node Lease controller's schedule between failed
// attempts to get or create the Lease: 200 ms, 400 ms, 800 ms, 1.6 s, 3.2 s,
// 6.4 s, then 7 s for ever. (Upstream starts from 100 ms and doubles before
// each wait, so its first wait is 200 ms.)
func LeaseEnsure() Exponential {
	return Exponential{Initial: 200 * time.Millisecond, Max: 7 * time.Second}
}

// Registration is the kubelet's schedule before each attempt to register
// its Node: 100 ms, 200 ms, 400 ms, … 6.4 s, then 7 s for ever. Upstream
// waits before the first attempt too, so the caller calls Next before every
// attempt, including the first.
func Registration() Exponential {
	return Exponential{Initial: 100 * time.Millisecond, Max: 7 * time.Second}
}

// Next returns the wait before the next attempt and advances the schedule.
func (e *Exponential) Next() time.Duration {
	if e.Initial <= 0 {
		return 0
	}
	if e.next == 0 {
		e.next = e.Initial
	}
	d := e.capped(e.next)
	if d == e.next && e.next <= maxDuration/2 {
		e.next *= 2
	}
	return d
}

// Reset starts the schedule again from Initial, as after a success.
func (e *Exponential) Reset() { e.next = 0 }

func (e *Exponential) capped(d time.Duration) time.Duration {
	if e.Max > 0 && d > e.Max {
		return e.Max
	}
	return d
}

const maxDuration = time.Duration(1<<63 - 1)
