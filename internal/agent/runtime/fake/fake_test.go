package fake

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/runtime"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newPod(uid string, policy corev1.RestartPolicy, images ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID("uid-" + uid)},
		Spec:       corev1.PodSpec{RestartPolicy: policy},
	}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: img})
	}
	return p
}

// state is a compact view of one container.
type state struct {
	Reason   string
	Exit     int32
	Restarts int32
	At       time.Duration // since t0: start or finish
}

func view(t *testing.T, r *Runtime, p *corev1.Pod) []state {
	t.Helper()
	st, err := r.PodStatus(p.UID)
	if err != nil {
		t.Fatal(err)
	}
	var out []state
	for _, c := range st.Containers {
		s := state{Restarts: c.RestartCount}
		switch {
		case c.State.Running != nil:
			s.Reason, s.At = "Running", c.State.Running.StartedAt.Sub(t0)
		case c.State.Terminated != nil:
			s.Reason, s.Exit, s.At = c.State.Terminated.Reason, c.State.Terminated.ExitCode, c.State.Terminated.FinishedAt.Sub(t0)
		case c.State.Waiting != nil:
			s.Reason = c.State.Waiting.Reason
		}
		out = append(out, s)
	}
	return out
}

func TestParseImage(t *testing.T) {
	tests := []struct {
		image   string
		want    behaviour
		wantErr bool
	}{
		{"busybox", behaviour{termCode: ExitCodeTerm}, false},
		{"exit:0@5s", behaviour{exits: true, exitAfter: 5 * time.Second, termCode: ExitCodeTerm}, false},
		{"registry.k8s.io/pause:3.10,exit:3@1m", behaviour{exits: true, exitCode: 3, exitAfter: time.Minute, termCode: ExitCodeTerm}, false},
		{"term:0@2s", behaviour{termCode: 0, termAfter: 2 * time.Second}, false},
		{"term:ignore", behaviour{termCode: ExitCodeTerm, ignoreTerm: true}, false},
		{"start-error:no such file", behaviour{termCode: ExitCodeTerm, startError: "no such file"}, false},
		{"exit:0", behaviour{}, true},
		{"exit:300@1s", behaviour{}, true},
		{"exit:1@soon", behaviour{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			got, err := parseImage(tt.image)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(behaviour{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCrashLoopOnTheClock(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	r := New(Config{Clock: clk})
	p := newPod("1", corev1.RestartPolicyAlways, "exit:1@2s")
	if err := r.StartPod(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at   time.Duration
		want state
	}{
		{0, state{Reason: "Running"}},
		// Crash at 2 s, restarted at once.
		{2 * time.Second, state{Reason: "Running", Restarts: 1, At: 2 * time.Second}},
		// Crash at 4 s: 10 s of back-off.
		{5 * time.Second, state{Reason: runtime.ReasonCrashLoopBackOff, Restarts: 1}},
		{14 * time.Second, state{Reason: "Running", Restarts: 2, At: 14 * time.Second}},
		// Crash at 16 s: 20 s.
		{35 * time.Second, state{Reason: runtime.ReasonCrashLoopBackOff, Restarts: 2}},
		{36 * time.Second, state{Reason: "Running", Restarts: 3, At: 36 * time.Second}},
	}
	for _, s := range steps {
		clk.SetTime(t0.Add(s.at))
		if diff := cmp.Diff([]state{s.want}, view(t, r, p)); diff != "" {
			t.Errorf("at %v (-want +got):\n%s", s.at, diff)
		}
	}
	if next, ok := r.NextChange(); !ok || !next.Equal(t0.Add(38*time.Second)) {
		t.Errorf("NextChange = %v %v, want the crash at 38s", next, ok)
	}
}

func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		policy corev1.RestartPolicy
		image  string
		want   state
	}{
		{corev1.RestartPolicyNever, "exit:0@1s", state{Reason: runtime.ReasonCompleted, At: time.Second}},
		{corev1.RestartPolicyNever, "exit:2@1s", state{Reason: runtime.ReasonError, Exit: 2, At: time.Second}},
		{corev1.RestartPolicyOnFailure, "exit:0@1s", state{Reason: runtime.ReasonCompleted, At: time.Second}},
		{corev1.RestartPolicyOnFailure, "exit:2@1s", state{Reason: "Running", Restarts: 1, At: time.Second}},
		{corev1.RestartPolicyAlways, "exit:0@1s", state{Reason: "Running", Restarts: 1, At: time.Second}},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy)+"/"+tt.image, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(t0)
			r := New(Config{Clock: clk})
			p := newPod("1", tt.policy, tt.image)
			_ = r.StartPod(context.Background(), p)
			clk.SetTime(t0.Add(1500 * time.Millisecond))
			if diff := cmp.Diff([]state{tt.want}, view(t, r, p)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name  string
		image string
		grace time.Duration
		// at 1 s after the stop, and at the end of the grace period
		wantSoon, wantLater state
	}{
		{"plain container dies of SIGTERM", "busybox", 30 * time.Second,
			state{Reason: runtime.ReasonError, Exit: ExitCodeTerm, At: 0},
			state{Reason: runtime.ReasonError, Exit: ExitCodeTerm, At: 0}},
		{"clean shutdown within grace", "term:0@2s", 30 * time.Second,
			state{Reason: "Running"},
			state{Reason: runtime.ReasonCompleted, At: 2 * time.Second}},
		{"shutdown slower than grace is killed", "term:0@1m", 30 * time.Second,
			state{Reason: "Running"},
			state{Reason: runtime.ReasonError, Exit: ExitCodeKill, At: 30 * time.Second}},
		{"ignoring SIGTERM is killed", "term:ignore", 30 * time.Second,
			state{Reason: "Running"},
			state{Reason: runtime.ReasonError, Exit: ExitCodeKill, At: 30 * time.Second}},
		{"zero grace kills at once", "term:ignore", 0,
			state{Reason: runtime.ReasonError, Exit: ExitCodeKill, At: 0},
			state{Reason: runtime.ReasonError, Exit: ExitCodeKill, At: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testingclock.NewFakePassiveClock(t0)
			r := New(Config{Clock: clk})
			p := newPod("1", corev1.RestartPolicyAlways, tt.image)
			ctx := context.Background()
			_ = r.StartPod(ctx, p)
			if err := r.StopPod(ctx, p.UID, tt.grace); err != nil {
				t.Fatal(err)
			}
			if tt.wantSoon.Reason == "Running" {
				if err := r.RemovePod(ctx, p.UID); !errors.Is(err, runtime.ErrPodRunning) {
					t.Errorf("RemovePod while running = %v, want ErrPodRunning", err)
				}
			}
			clk.SetTime(t0.Add(time.Second))
			if diff := cmp.Diff([]state{tt.wantSoon}, view(t, r, p)); diff != "" {
				t.Errorf("1s after stop (-want +got):\n%s", diff)
			}
			clk.SetTime(t0.Add(tt.grace))
			if diff := cmp.Diff([]state{tt.wantLater}, view(t, r, p)); diff != "" {
				t.Errorf("at grace end (-want +got):\n%s", diff)
			}
			st, _ := r.PodStatus(p.UID)
			if !st.Stopped() {
				t.Errorf("not stopped at the end of the grace period")
			}
			if err := r.RemovePod(ctx, p.UID); err != nil {
				t.Fatal(err)
			}
			if _, err := r.PodStatus(p.UID); !errors.Is(err, runtime.ErrPodNotFound) {
				t.Errorf("PodStatus after RemovePod = %v, want ErrPodNotFound", err)
			}
		})
	}
}

func TestStopShortensGraceOnly(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	r := New(Config{Clock: clk})
	p := newPod("1", corev1.RestartPolicyAlways, "term:ignore")
	ctx := context.Background()
	_ = r.StartPod(ctx, p)
	_ = r.StopPod(ctx, p.UID, 30*time.Second)
	_ = r.StopPod(ctx, p.UID, time.Hour) // does not extend
	_ = r.StopPod(ctx, p.UID, 5*time.Second)
	clk.SetTime(t0.Add(5 * time.Second))
	want := []state{{Reason: runtime.ReasonError, Exit: ExitCodeKill, At: 5 * time.Second}}
	if diff := cmp.Diff(want, view(t, r, p)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStartIsIdempotentAndChangesFire(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	r := New(Config{Clock: clk})
	p := newPod("1", corev1.RestartPolicyNever, "exit:0@1s", "start-error:boom", "exit:0@bad")
	ctx := context.Background()
	_ = r.StartPod(ctx, p)
	<-r.Changes() // the start
	_ = r.StartPod(ctx, p)
	select {
	case <-r.Changes():
		t.Errorf("a second StartPod changed something")
	default:
	}
	want := []state{
		{Reason: "Running"},
		{Reason: runtime.ReasonStartError, Exit: runtime.ExitCodeStartError},
		{Reason: runtime.ReasonCreateContainerConfigError},
	}
	if diff := cmp.Diff(want, view(t, r, p)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	clk.SetTime(t0.Add(time.Second))
	if got := len(r.ListPods()); got != 1 {
		t.Errorf("ListPods has %d pods, want 1", got)
	}
	select {
	case <-r.Changes():
	default:
		t.Errorf("no change reported for the exit found at 1s")
	}
}
