package backoff

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

func take(e *Exponential, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = e.Next()
	}
	return out
}

func TestSchedules(t *testing.T) {
	tests := []struct {
		name string
		b    Exponential
		want []time.Duration
	}{
		{
			name: "lease ensure: 200ms doubling, capped at 7s, forever",
			b:    LeaseEnsure(),
			want: []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 7 * time.Second, 7 * time.Second, 7 * time.Second},
		},
		{
			name: "registration: 100ms doubling, capped at 7s, forever",
			b:    Registration(),
			want: []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 7 * time.Second, 7 * time.Second},
		},
		{
			name: "max below initial caps the first wait",
			b:    Exponential{Initial: time.Second, Max: 300 * ms},
			want: []time.Duration{300 * ms, 300 * ms},
		},
		{
			name: "max exactly reached by doubling",
			b:    Exponential{Initial: time.Second, Max: 4 * time.Second},
			want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second},
		},
		{
			name: "no max keeps doubling",
			b:    Exponential{Initial: time.Second},
			want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second},
		},
		{
			name: "zero initial never waits",
			b:    Exponential{Max: time.Second},
			want: []time.Duration{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.b
			if diff := cmp.Diff(tt.want, take(&b, len(tt.want))); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResetStartsOver(t *testing.T) {
	b := LeaseEnsure()
	take(&b, 8) // well past the cap
	b.Reset()
	want := []time.Duration{200 * ms, 400 * ms, 800 * ms}
	if diff := cmp.Diff(want, take(&b, 3)); diff != "" {
		t.Errorf("waits after Reset (-want +got):\n%s", diff)
	}
}

func TestUncappedDoesNotOverflow(t *testing.T) {
	b := Exponential{Initial: time.Hour}
	prev := time.Duration(0)
	for i := range 80 {
		d := b.Next()
		if d < prev {
			t.Fatalf("wait %d went down from %v to %v", i, prev, d)
		}
		prev = d
	}
}
