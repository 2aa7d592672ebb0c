package fleet

import (
	"fmt"
	"math"
	"time"
)

// Progress is one line of a running fleet's progress.
type Progress struct {
	// Ramping is true while agents are still being started; Elapsed and
	// Of are then the ramp's, otherwise the measured run's.
	Ramping bool
	Elapsed time.Duration
	Of      time.Duration
	// Started agents out of Nodes.
	Started int
	Nodes   int
	// Ready and NotReady are as the server reports the fleet's nodes;
	// NotReady counts only nodes that had been Ready.
	Ready    int
	NotReady int
	Renewals int64
	// P99 is over the whole run so far, P99Recent over the last Interval.
	P99       time.Duration
	P99Recent time.Duration
	Interval  time.Duration
	Errors    int64
}

// String renders the line, for example
//
//	fleet: 120s/600s nodes=10000 ready=10000 not_ready=0 renewals=119880 p99=12.3ms p99_10s=11.0ms errors=0
//	fleet: ramp 12s/40s started=3000/10000 ready=2950 not_ready=0 renewals=2800 p99=4.1ms p99_10s=4.4ms errors=0
func (p Progress) String() string {
	head := fmt.Sprintf("%s/%s nodes=%d", seconds(p.Elapsed), seconds(p.Of), p.Nodes)
	if p.Ramping {
		head = fmt.Sprintf("ramp %s/%s started=%d/%d", seconds(p.Elapsed), seconds(p.Of), p.Started, p.Nodes)
	}
	return fmt.Sprintf("fleet: %s ready=%d not_ready=%d renewals=%d p99=%s p99_%s=%s errors=%d",
		head, p.Ready, p.NotReady, p.Renewals, millis(p.P99), interval(p.Interval), millis(p.P99Recent), p.Errors)
}

// seconds renders d in whole seconds, rounded down: "120s".
func seconds(d time.Duration) string {
	return fmt.Sprintf("%ds", int64(d/time.Second))
}

// interval names a progress interval: "10s", or "500ms" below a second.
func interval(d time.Duration) string {
	if d >= time.Second {
		return seconds(d)
	}
	return d.String()
}

// millis renders d in milliseconds with one decimal: "12.3ms".
func millis(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// ms is d in milliseconds, rounded to the microsecond, for the JSON result.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Microsecond)) / 1000
}

// secs is d in seconds, rounded to the millisecond, for the JSON result.
func secs(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)) / 1000
}
