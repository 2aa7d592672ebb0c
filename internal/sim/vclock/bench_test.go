package vclock

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// BenchmarkAfterFuncRearm keeps 10,000 AfterFunc timers pending, each of
// which re-arms itself when it fires, and measures one firing per op: a heap
// pop, the callback, and a heap push through Reset.
func BenchmarkAfterFuncRearm(b *testing.B) {
	const n = 10000
	cases := []struct {
		name   string
		period func(i int) time.Duration
	}{
		// Every timer has its own period, so due times rarely tie.
		{"distinct", func(i int) time.Duration { return 10*time.Second + time.Duration(i)*time.Millisecond }},
		// Every timer has the same period, like lease renewals, so
		// thousands of timers tie on each due time.
		{"ties", func(int) time.Duration { return 10 * time.Second }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := New(t0)
			fired := 0
			for i := 0; i < n; i++ {
				period := tc.period(i)
				var tm clock.Timer
				tm = c.AfterFunc(time.Duration(i)*time.Microsecond, func() {
					fired++
					tm.Reset(period)
				})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for fired < b.N {
				if !c.Step() {
					b.Fatal("nothing pending")
				}
			}
			b.StopTimer()
			if got := c.Pending(); got != n {
				b.Fatalf("Pending() = %d, want %d", got, n)
			}
		})
	}
}

// BenchmarkTicker measures one tick per op with 10,000 tickers pending.
func BenchmarkTicker(b *testing.B) {
	const n = 10000
	c := New(t0)
	for i := 0; i < n; i++ {
		c.NewTicker(10*time.Second + time.Duration(i)*time.Millisecond)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for fired := 0; fired < b.N; {
		fired += c.Advance(time.Millisecond)
	}
}
