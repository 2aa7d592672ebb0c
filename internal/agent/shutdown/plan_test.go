package shutdown

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

func TestGroupsMigration(t *testing.T) {
	byPriority := []kubeletconfig.ShutdownGracePeriodByPodPriority{
		{Priority: 100000, ShutdownGracePeriodSeconds: 20},
		{Priority: 0, ShutdownGracePeriodSeconds: 30},
		{Priority: SystemCriticalPriority, ShutdownGracePeriodSeconds: 10},
	}
	tests := []struct {
		name string
		in   Settings
		want []Group
	}{
		{name: "both zero: off", in: Settings{}},
		{name: "critical only: off", in: Settings{CriticalPods: 10 * time.Second}},
		{name: "critical above the whole: off", in: Settings{GracePeriod: 10 * time.Second, CriticalPods: 20 * time.Second}},
		{name: "grace only: all regular", in: Settings{GracePeriod: 30 * time.Second},
			want: []Group{{0, 30 * time.Second}, {SystemCriticalPriority, 0}}},
		{name: "grace and critical", in: Settings{GracePeriod: 30 * time.Second, CriticalPods: 10 * time.Second},
			want: []Group{{0, 20 * time.Second}, {SystemCriticalPriority, 10 * time.Second}}},
		{name: "all critical", in: Settings{GracePeriod: 30 * time.Second, CriticalPods: 30 * time.Second},
			want: []Group{{0, 0}, {SystemCriticalPriority, 30 * time.Second}}},
		{name: "priority list, sorted", in: Settings{ByPriority: byPriority},
			want: []Group{{0, 30 * time.Second}, {100000, 20 * time.Second}, {SystemCriticalPriority, 10 * time.Second}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.in.Groups()); diff != "" {
				t.Errorf("Groups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		in   Settings
		want []string // substrings, one per expected error; none means valid
	}{
		{name: "defaults", in: Settings{}},
		{name: "valid durations", in: Settings{GracePeriod: 30 * time.Second, CriticalPods: 10 * time.Second}},
		{name: "valid list", in: Settings{ByPriority: []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 5}}}},
		{name: "critical above grace", in: Settings{GracePeriod: 10 * time.Second, CriticalPods: 20 * time.Second},
			want: []string{"shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s"}},
		{name: "sub-second grace", in: Settings{GracePeriod: 500 * time.Millisecond},
			want: []string{"shutdownGracePeriod 500ms must be either zero or otherwise >= 1 sec"}},
		{name: "negative critical", in: Settings{GracePeriod: 10 * time.Second, CriticalPods: -time.Second},
			want: []string{"shutdownGracePeriodCriticalPods -1s must be either zero or otherwise >= 1 sec"}},
		{name: "list and durations", in: Settings{GracePeriod: 10 * time.Second, ByPriority: []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 0}}},
			want: []string{"Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"}},
		{name: "negative period in list", in: Settings{ByPriority: []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: -1}}},
			want: []string{"shutdownGracePeriodByPodPriority[0].shutdownGracePeriodSeconds -1 must not be negative"}},
		{name: "huge period in list", in: Settings{ByPriority: []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 1 << 40}}},
			want: []string{"shutdownGracePeriodByPodPriority[0].shutdownGracePeriodSeconds 1099511627776 must be at most 31536000"}},
		{name: "repeated priority", in: Settings{ByPriority: []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: 7, ShutdownGracePeriodSeconds: 1}, {Priority: 7, ShutdownGracePeriodSeconds: 2}}},
			want: []string{"shutdownGracePeriodByPodPriority[1].priority 7 repeats shutdownGracePeriodByPodPriority[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want errors %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("Validate: %d errors %q, want %d", len(lines), lines, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("error %d = %q, want it to contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func pod(name string, priority *int32, grace *int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Priority: priority, TerminationGracePeriodSeconds: grace},
	}
}

func TestGroupOfBoundaries(t *testing.T) {
	groups := []Group{{Priority: 10, Period: time.Second}, {Priority: 100, Period: 2 * time.Second}, {Priority: 1000, Period: 3 * time.Second}}
	tests := []struct {
		priority int32
		want     int
	}{
		{priority: -5, want: 0},  // below the lowest boundary: first group
		{priority: 0, want: 0},   // same
		{priority: 10, want: 0},  // exactly at a boundary
		{priority: 11, want: 0},  // between two boundaries: the lower group
		{priority: 99, want: 0},  // just below the next boundary
		{priority: 100, want: 1}, // exactly at the next
		{priority: 999, want: 1},
		{priority: 1000, want: 2},
		{priority: 2000000000, want: 2}, // above every boundary: the last group
	}
	for _, tc := range tests {
		if got := GroupOf(groups, tc.priority); got != tc.want {
			t.Errorf("GroupOf(priority %d) = %d, want %d", tc.priority, got, tc.want)
		}
	}
}

func TestNewPlan(t *testing.T) {
	groups := []Group{{Priority: 0, Period: 20 * time.Second}, {Priority: 1000, Period: 5 * time.Second}, {Priority: SystemCriticalPriority, Period: 10 * time.Second}}
	regular := pod("regular", nil, nil)
	short := pod("short", nil, ptr.To[int64](3))
	long := pod("long", ptr.To[int32](5), ptr.To[int64](600))
	zero := pod("zero", nil, ptr.To[int64](0))
	critical := pod("critical", ptr.To[int32](SystemCriticalPriority+1000), nil)

	plan := NewPlan(groups, []*corev1.Pod{regular, critical, short, long, zero})
	want := Plan{Groups: []GroupPlan{
		{Priority: 0, Period: 20 * time.Second, Pods: []PodPlan{
			{Pod: regular, Grace: 20 * time.Second},
			{Pod: short, Grace: 3 * time.Second}, // its own, shorter grace
			{Pod: long, Grace: 20 * time.Second}, // capped, never extended
			{Pod: zero, Grace: 0},
		}},
		// The group at 1000 has no pod: skipped, its 5 s not waited.
		{Priority: SystemCriticalPriority, Period: 10 * time.Second, Pods: []PodPlan{{Pod: critical, Grace: 10 * time.Second}}},
	}}
	if diff := cmp.Diff(want, plan); diff != "" {
		t.Errorf("NewPlan (-want +got):\n%s", diff)
	}
	if got := NewPlan(nil, []*corev1.Pod{regular}); len(got.Groups) != 0 {
		t.Errorf("NewPlan without groups = %+v, want empty", got)
	}
	if got := NewPlan(groups, nil); len(got.Groups) != 0 {
		t.Errorf("NewPlan without pods = %+v, want empty", got)
	}
}

func TestFit(t *testing.T) {
	groups := []Group{{0, 20 * time.Second}, {1000, 10 * time.Second}, {SystemCriticalPriority, 10 * time.Second}}
	tests := []struct {
		name     string
		budget   time.Duration
		want     []Group
		wantCuts []Cut
	}{
		{name: "enough", budget: 40 * time.Second, want: groups},
		{name: "more than enough", budget: time.Hour, want: groups},
		{name: "lowest group shortened", budget: 35 * time.Second,
			want:     []Group{{0, 15 * time.Second}, {1000, 10 * time.Second}, {SystemCriticalPriority, 10 * time.Second}},
			wantCuts: []Cut{{0, 20 * time.Second, 15 * time.Second}}},
		{name: "lowest group gone, next shortened", budget: 15 * time.Second,
			want:     []Group{{0, 0}, {1000, 5 * time.Second}, {SystemCriticalPriority, 10 * time.Second}},
			wantCuts: []Cut{{0, 20 * time.Second, 0}, {1000, 10 * time.Second, 5 * time.Second}}},
		{name: "exactly the critical period: critical pods keep theirs", budget: 10 * time.Second,
			want:     []Group{{0, 0}, {1000, 0}, {SystemCriticalPriority, 10 * time.Second}},
			wantCuts: []Cut{{0, 20 * time.Second, 0}, {1000, 10 * time.Second, 0}}},
		{name: "less than the critical period", budget: 4 * time.Second,
			want:     []Group{{0, 0}, {1000, 0}, {SystemCriticalPriority, 4 * time.Second}},
			wantCuts: []Cut{{0, 20 * time.Second, 0}, {1000, 10 * time.Second, 0}, {SystemCriticalPriority, 10 * time.Second, 4 * time.Second}}},
		{name: "negative budget", budget: -time.Second,
			want:     []Group{{0, 0}, {1000, 0}, {SystemCriticalPriority, 0}},
			wantCuts: []Cut{{0, 20 * time.Second, 0}, {1000, 10 * time.Second, 0}, {SystemCriticalPriority, 10 * time.Second, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, cuts := Fit(groups, tc.budget)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCuts, cuts); diff != "" {
				t.Errorf("cuts (-want +got):\n%s", diff)
			}
			if Total(got) > max(tc.budget, 0) {
				t.Errorf("fitted total %v over budget %v", Total(got), tc.budget)
			}
		})
	}
	// Fit leaves its argument alone.
	if groups[0].Period != 20*time.Second {
		t.Errorf("Fit changed its argument: %+v", groups)
	}
}

// FuzzSettings checks that any shutdown settings either fail validation
// with a named field, or give sorted groups whose total fits a Duration and
// whose fitting never exceeds the budget.
func FuzzSettings(f *testing.F) {
	f.Add(int64(30), int64(10), int32(0), int64(0), int32(0), int64(0), int64(15))
	f.Add(int64(0), int64(0), int32(100), int64(20), int32(-5), int64(3), int64(1))
	f.Add(int64(-1), int64(0), int32(7), int64(-1), int32(7), int64(1<<40), int64(-3))
	f.Fuzz(func(t *testing.T, grace, critical int64, p1 int32, s1 int64, p2 int32, s2 int64, budget int64) {
		s := Settings{GracePeriod: time.Duration(grace) * time.Millisecond * 100, CriticalPods: time.Duration(critical) * time.Millisecond * 100}
		if s1 != 0 || s2 != 0 {
			s.ByPriority = []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: p1, ShutdownGracePeriodSeconds: s1}, {Priority: p2, ShutdownGracePeriodSeconds: s2}}
		}
		if err := s.Validate(); err != nil {
			if !strings.Contains(err.Error(), "shutdownGracePeriod") {
				t.Fatalf("error names no field: %v", err)
			}
			return
		}
		groups := s.Groups()
		for i := 1; i < len(groups); i++ {
			if groups[i-1].Priority > groups[i].Priority {
				t.Fatalf("groups not sorted: %+v", groups)
			}
		}
		total := Total(groups)
		if total < 0 {
			t.Fatalf("total %v overflowed: %+v", total, groups)
		}
		b := time.Duration(budget) * time.Second
		fitted, _ := Fit(groups, b)
		if want := min(total, max(b, 0)); Total(fitted) != want {
			t.Fatalf("fitted total %v, want %v (total %v, budget %v)", Total(fitted), want, total, b)
		}
		for i, g := range fitted {
			if g.Period < 0 || g.Period > groups[i].Period {
				t.Fatalf("fitted group %d = %v out of [0, %v]", i, g.Period, groups[i].Period)
			}
		}
	})
}

// FuzzReadState feeds the state-file decoder arbitrary bytes: an error
// names the file, a success round-trips through writeJSON.
func FuzzReadState(f *testing.F) {
	f.Add([]byte(`{"startTime":"2026-11-25T12:00:00Z","endTime":"2026-11-25T12:00:30.5Z"}`))
	f.Add([]byte(`{"startTime":"yesterday"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "graceful_node_shutdown_state")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := ReadState(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if err := writeJSON(path, st); err != nil {
			t.Fatal(err)
		}
		again, err := ReadState(path)
		if err != nil || !again.StartTime.Equal(st.StartTime) || !again.EndTime.Equal(st.EndTime) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, st)
		}
	})
}
