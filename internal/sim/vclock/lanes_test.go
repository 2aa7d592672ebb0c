package vclock

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// taken is what a test sees of a batch: lane and due offset from t0.
type taken struct {
	Lane int
	Due  time.Duration
}

func takenOf(calls []LaneCall) []taken {
	out := make([]taken, len(calls))
	for i, c := range calls {
		out[i] = taken{c.Lane, c.Due.Sub(t0)}
	}
	return out
}

func TestTakeLanes(t *testing.T) {
	noop := func(time.Time) {}
	lane := func(c *Clock, l int, d time.Duration) { c.LaneFunc(l, t0.Add(d), noop) }
	tests := []struct {
		name  string
		setup func(c *Clock)
		until time.Duration
		limit int
		want  []taken
		now   time.Duration
	}{
		{
			name: "a run of lanes, in firing order",
			setup: func(c *Clock) {
				lane(c, 2, 3*time.Second)
				lane(c, 1, 1*time.Second)
				lane(c, 3, 3*time.Second)
			},
			until: time.Minute, limit: 10,
			want: []taken{{1, time.Second}, {2, 3 * time.Second}, {3, 3 * time.Second}},
			now:  3 * time.Second,
		},
		{
			name: "ends before another kind of timer",
			setup: func(c *Clock) {
				lane(c, 1, 1*time.Second)
				c.AfterFunc(2*time.Second, func() {})
				lane(c, 2, 3*time.Second)
			},
			until: time.Minute, limit: 10,
			want: []taken{{1, time.Second}},
			now:  time.Second,
		},
		{
			name: "ends at a lane already in the batch",
			setup: func(c *Clock) {
				lane(c, 1, 1*time.Second)
				lane(c, 2, 2*time.Second)
				lane(c, 1, 3*time.Second)
				lane(c, 3, 4*time.Second)
			},
			until: time.Minute, limit: 10,
			want: []taken{{1, time.Second}, {2, 2 * time.Second}},
			now:  2 * time.Second,
		},
		{
			name: "ends at until",
			setup: func(c *Clock) {
				lane(c, 1, 1*time.Second)
				lane(c, 2, 2*time.Second)
			},
			until: 1500 * time.Millisecond, limit: 10,
			want: []taken{{1, time.Second}},
			now:  time.Second,
		},
		{
			name: "ends at the limit",
			setup: func(c *Clock) {
				for l := range 5 {
					lane(c, l, time.Second)
				}
			},
			until: time.Minute, limit: 3,
			want: []taken{{0, time.Second}, {1, time.Second}, {2, time.Second}},
			now:  time.Second,
		},
		{
			name: "nothing when another kind is first",
			setup: func(c *Clock) {
				c.AfterFunc(time.Second, func() {})
				lane(c, 1, 2*time.Second)
			},
			until: time.Minute, limit: 10,
			want: []taken{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(t0)
			tt.setup(c)
			got := takenOf(c.TakeLanes(t0.Add(tt.until), tt.limit, nil))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("batch (-want +got):\n%s", diff)
			}
			if now := c.Now().Sub(t0); now != tt.now {
				t.Errorf("now = %v, want %v", now, tt.now)
			}
		})
	}
}

// A lane's timer set at its own time, before the clock's now, fires first
// and is told its own due time; Step runs lane callbacks like any other.
func TestLaneFuncInThePast(t *testing.T) {
	c := New(t0)
	var got []string
	c.AfterFunc(2*time.Second, func() { got = append(got, "other@"+c.Now().Sub(t0).String()) })
	batch := func() {
		for _, call := range c.TakeLanes(t0.Add(time.Minute), 10, nil) {
			call.F(call.Due)
		}
	}
	c.LaneFunc(1, t0.Add(time.Second), func(due time.Time) {
		got = append(got, "lane 1@"+due.Sub(t0).String())
		// Set at lane 1's own time, which the clock has passed: the batch
		// took lane 2 too.
		c.LaneFunc(1, due, func(due time.Time) { got = append(got, "lane 1 again@"+due.Sub(t0).String()) })
	})
	c.LaneFunc(2, t0.Add(1500*time.Millisecond), func(due time.Time) {
		got = append(got, "lane 2@"+due.Sub(t0).String())
	})
	batch()
	if now := c.Now().Sub(t0); now != 1500*time.Millisecond {
		t.Fatalf("now = %v after the batch", now)
	}
	if next, _ := c.Next(); next.Sub(t0) != time.Second {
		t.Fatalf("next due at %v, want lane 1's own 1s", next.Sub(t0))
	}
	for c.Step() {
	}
	want := []string{"lane 1@1s", "lane 2@1.5s", "lane 1 again@1s", "other@2s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("firings (-want +got):\n%s", diff)
	}
}
