package queue

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/time/rate"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// pass runs Try at now, dealing with every item, and returns the names
// handed out.
func pass(q *RateLimited, now time.Time) []string {
	var got []string
	q.Try(now, func(it Item) (bool, time.Duration) {
		got = append(got, it.Name)
		return true, 0
	})
	return got
}

// taintTimes adds n names at t0, runs a pass every 100 ms for span, and
// returns when each name was handed out (offset from t0).
func taintTimes(q *RateLimited, n int, span time.Duration) []time.Duration {
	for i := 0; i < n; i++ {
		q.Add(fmt.Sprintf("n%03d", i), "", t0)
	}
	var out []time.Duration
	for d := time.Duration(0); d <= span; d += 100 * time.Millisecond {
		for range pass(q, at(d)) {
			out = append(out, d)
		}
	}
	return out
}

func TestRate(t *testing.T) {
	tests := []struct {
		name string
		qps  float64
		n    int
		span time.Duration
		want []time.Duration
	}{
		{"0.1/s: one every 10s, first at once", 0.1, 4, 35 * time.Second, []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second}},
		{"0.1/s: exactly at 10s the second token is there", 0.1, 2, 10 * time.Second, []time.Duration{0, 10 * time.Second}},
		{"0.1/s: just before 10s it is not", 0.1, 2, 9900 * time.Millisecond, []time.Duration{0}},
		{"0.01/s: one every 100s", 0.01, 3, 250 * time.Second, []time.Duration{0, 100 * time.Second, 200 * time.Second}},
		{"zero rate: never", 0, 3, time.Hour, nil},
		{"negative rate: never", -1, 3, time.Minute, nil},
		{"10/s: one per 100ms pass (burst 1)", 10, 3, time.Second, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}},
		{"100/s: still one per pass, tokens do not pile up beyond 1", 100, 3, time.Second, []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}},
		{"empty queue", 0.1, 0, time.Minute, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := taintTimes(New(tc.qps), tc.n, tc.span)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hand-out times (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddRemoveHold(t *testing.T) {
	q := New(100)
	if !q.Add("a", "u1", t0) {
		t.Fatal("first Add refused")
	}
	if q.Add("a", "u2", t0) {
		t.Error("second Add of a queued name accepted")
	}
	if got := pass(q, t0); !cmp.Equal(got, []string{"a"}) {
		t.Fatalf("pass = %v", got)
	}
	if !q.Holds("a") || q.Len() != 0 {
		t.Errorf("after handing out: Holds=%v Len=%d, want held and not queued", q.Holds("a"), q.Len())
	}
	if q.Add("a", "u1", at(time.Second)) {
		t.Error("Add of a handed-out, unremoved name accepted")
	}
	if !q.Remove("a") {
		t.Error("Remove of a held name reported false")
	}
	if q.Remove("a") {
		t.Error("second Remove reported true")
	}
	if !q.Add("a", "u1", at(time.Second)) {
		t.Error("Add after Remove refused")
	}
	if !q.Remove("a") || q.Len() != 0 || q.Holds("a") {
		t.Error("Remove of a queued name did not empty the queue")
	}
}

func TestOrderAndRetry(t *testing.T) {
	q := New(1000) // plenty of tokens: one per pass
	q.Add("b", "", t0)
	q.Add("a", "", t0)
	q.Add("c", "", at(time.Millisecond))
	var calls []string
	fail := map[string]bool{"b": true}
	step := func(now time.Time) {
		q.Try(now, func(it Item) (bool, time.Duration) {
			calls = append(calls, fmt.Sprintf("%s@%v", it.Name, now.Sub(t0)))
			if fail[it.Name] {
				fail[it.Name] = false
				return false, 50 * time.Millisecond
			}
			return true, 0
		})
	}
	for d := time.Duration(0); d < 500*time.Millisecond; d += 10 * time.Millisecond {
		step(at(d))
	}
	// b was added first (ties go in Add order), fails and comes back after
	// 50ms+1ns, behind a and c.
	want := []string{"b@0s", "a@10ms", "c@20ms", "b@60ms"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestTokenSpentOnNotDue(t *testing.T) {
	q := New(1) // one token a second
	q.Add("a", "", t0)
	q.Try(t0, func(Item) (bool, time.Duration) { return false, 10 * time.Second })
	// At 1s the bucket has a token again but "a" is due only at 10s: the
	// token is spent anyway, as upstream's queue does.
	q.Try(at(time.Second), func(Item) (bool, time.Duration) { t.Fatal("handed out before due"); return true, 0 })
	if q.bucket.take(at(1500 * time.Millisecond)) {
		t.Error("token was not spent on the not-yet-due head")
	}
}

func TestSwapLimiter(t *testing.T) {
	tests := []struct {
		name     string
		startQPS float64
		// tokenWaiting: the old bucket has a token at the swap (at 1s);
		// otherwise its only token was spent at 0s.
		tokenWaiting bool
		swapTo       float64
		want         []time.Duration // hand-out times of 3 items added at 1s, passes every 100ms from 1s to 40s
	}{
		{"old bucket had a token: new starts full", 0.1, true, 0.2, []time.Duration{1 * time.Second, 6 * time.Second, 11 * time.Second}},
		{"old bucket saturated: new one is drained", 0.1, false, 0.2, []time.Duration{6 * time.Second, 11 * time.Second, 16 * time.Second}},
		{"from never (0) to 0.1: drained, first after 10s", 0, false, 0.1, []time.Duration{11 * time.Second, 21 * time.Second, 31 * time.Second}},
		{"to 0: nothing ever", 0.1, true, 0, nil},
		{"same rate: no change, saturation kept", 0.1, false, 0.1, []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := New(tc.startQPS)
			if tc.startQPS > 0 && !tc.tokenWaiting {
				q.bucket.take(t0) // the next token comes only after 1s
			}
			q.SwapLimiter(tc.swapTo, at(time.Second))
			if q.QPS() != max(tc.swapTo, 0) {
				t.Errorf("QPS = %v, want %v", q.QPS(), tc.swapTo)
			}
			for i := 0; i < 3; i++ {
				q.Add(fmt.Sprint(i), "", at(time.Second))
			}
			var got []time.Duration
			for d := time.Second; d <= 40*time.Second; d += 100 * time.Millisecond {
				for range pass(q, at(d)) {
					got = append(got, d)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("hand-out times (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQueued(t *testing.T) {
	q := New(0)
	q.Add("c", "", at(2))
	q.Add("a", "", at(1))
	q.Add("b", "", at(1))
	var got []string
	for _, it := range q.Queued() {
		got = append(got, it.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("Queued order (-want +got):\n%s", diff)
	}
	if q.Len() != 3 {
		t.Errorf("Queued consumed the queue: Len=%d", q.Len())
	}
}

// model is the obvious implementation: a slice in insertion order, a held
// set, and golang.org/x/time/rate as the token bucket.
type model struct {
	items   []Item // re-inserted items go to the end
	held    map[string]bool
	qps     float64
	limiter *rate.Limiter // nil when qps <= 0
}

func newModel(qps float64) *model {
	m := &model{held: map[string]bool{}}
	m.setLimiter(qps)
	return m
}

func (m *model) setLimiter(qps float64) {
	m.qps = max(qps, 0)
	m.limiter = nil
	if qps > 0 {
		m.limiter = rate.NewLimiter(rate.Limit(qps), 1)
	}
}

func (m *model) allow(now time.Time) bool { return m.limiter != nil && m.limiter.AllowN(now, 1) }

func (m *model) add(name string, now time.Time) bool {
	if m.held[name] {
		return false
	}
	m.held[name] = true
	m.items = append(m.items, Item{Name: name, AddedAt: now, ProcessAt: now})
	return true
}

func (m *model) remove(name string) bool {
	if !m.held[name] {
		return false
	}
	delete(m.held, name)
	for i, it := range m.items {
		if it.Name == name {
			m.items = append(m.items[:i], m.items[i+1:]...)
			break
		}
	}
	return true
}

func (m *model) head() int {
	best := -1
	for i, it := range m.items {
		if best < 0 || it.ProcessAt.Before(m.items[best].ProcessAt) {
			best = i
		}
	}
	return best
}

func (m *model) try(now time.Time, fn func(Item) (bool, time.Duration)) {
	for len(m.items) > 0 {
		if !m.allow(now) {
			return
		}
		i := m.head()
		if now.Before(m.items[i].ProcessAt) {
			return
		}
		it := m.items[i]
		m.items = append(m.items[:i], m.items[i+1:]...)
		if done, wait := fn(it); !done {
			it.ProcessAt = now.Add(wait + time.Nanosecond)
			m.items = append(m.items, it)
		}
	}
}

func (m *model) swap(qps float64, now time.Time) {
	if max(qps, 0) == m.qps {
		return
	}
	saturated := !m.allow(now)
	m.setLimiter(qps)
	if qps > 0 && saturated {
		m.allow(now)
	}
}

// TestAgainstModel drives the queue and the model with the same random
// operations and checks they hand out the same names at the same times.
// Times move on a millisecond grid and rates have whole-millisecond
// intervals, so float rounding in x/time/rate cannot decide a case.
func TestAgainstModel(t *testing.T) {
	rates := []float64{0, 0.01, 0.1, 0.2, 0.5, 1, 2, 4, 5, 10, 20}
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		qps := rates[r.Intn(len(rates))]
		q, m := New(qps), newModel(qps)
		now := t0
		var log []string
		for step := 0; step < 400; step++ {
			name := fmt.Sprintf("n%d", r.Intn(12))
			switch op := r.Intn(10); {
			case op < 3:
				a, b := q.Add(name, "", now), m.add(name, now)
				if a != b {
					t.Fatalf("seed %d step %d: Add(%s) = %v, model %v", seed, step, name, a, b)
				}
			case op < 4:
				a, b := q.Remove(name), m.remove(name)
				if a != b {
					t.Fatalf("seed %d step %d: Remove(%s) = %v, model %v", seed, step, name, a, b)
				}
			case op < 5:
				qps := rates[r.Intn(len(rates))]
				q.SwapLimiter(qps, now)
				m.swap(qps, now)
			default:
				// Decide outcomes up front so both see the same ones.
				outcomes := make([]int, 8)
				for i := range outcomes {
					outcomes[i] = r.Intn(4) // 0: retry after 0..2s, else done
				}
				run := func(try func(time.Time, func(Item) (bool, time.Duration))) []string {
					var got []string
					k := 0
					try(now, func(it Item) (bool, time.Duration) {
						o := outcomes[k%len(outcomes)]
						k++
						got = append(got, fmt.Sprintf("%s@%s", it.Name, it.ProcessAt.Sub(t0)))
						if o == 0 {
							return false, time.Duration(k*250) * time.Millisecond
						}
						return true, 0
					})
					return got
				}
				got, want := run(q.Try), run(m.try)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("seed %d step %d (qps %v): Try handed out (-model +queue):\n%s\nhistory: %v", seed, step, q.QPS(), diff, log)
				}
				log = append(log, got...)
			}
			if q.Len() != len(m.items) {
				t.Fatalf("seed %d step %d: Len = %d, model %d", seed, step, q.Len(), len(m.items))
			}
			for i := 0; i < 12; i++ {
				n := fmt.Sprintf("n%d", i)
				if q.Holds(n) != m.held[n] {
					t.Fatalf("seed %d step %d: Holds(%s) = %v, model %v", seed, step, n, q.Holds(n), m.held[n])
				}
			}
			now = now.Add(time.Duration(r.Intn(3000)) * time.Millisecond)
		}
	}
}
