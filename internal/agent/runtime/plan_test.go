package runtime

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func TestBackoffWaits(t *testing.T) {
	// A container that crashes 1 s after each start: the waits upstream
	// gives are 0 (first restart), then 10 s doubling to 5 min.
	b := NewBackoff(BackoffConfig{})
	now := t0
	var got []time.Duration
	for range 9 {
		finished := now.Add(time.Second)
		wait := b.Wait(finished)
		got = append(got, wait)
		now = finished.Add(wait)
		b.Restarted(finished, now)
	}
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second, 300 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

func TestBackoffResetsAfterTwiceMax(t *testing.T) {
	tests := []struct {
		name    string
		ranFor  time.Duration
		wantGap time.Duration
	}{
		{"crash soon after restart keeps back-off", time.Second, 20 * time.Second},
		{"crash exactly twice the maximum after restart keeps it", 10 * time.Minute, 20 * time.Second},
		{"crash later than twice the maximum starts over", 10*time.Minute + time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBackoff(BackoffConfig{})
			b.Restarted(t0, t0)                                      // delay 10 s
			b.Restarted(t0.Add(time.Second), t0.Add(11*time.Second)) // delay 20 s
			if got := b.Wait(t0.Add(11 * time.Second).Add(tt.ranFor)); got != tt.wantGap {
				t.Errorf("Wait = %v, want %v", got, tt.wantGap)
			}
		})
	}
}

func podWith(policy corev1.RestartPolicy, init []corev1.Container, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{RestartPolicy: policy, InitContainers: init},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "img"})
	}
	return p
}

// describe summarises one container's state for comparison.
func describe(c ContainerStatus) string {
	switch {
	case c.State.Running != nil:
		return "running"
	case c.State.Terminated != nil:
		return "terminated:" + c.State.Terminated.Reason
	case c.State.Waiting != nil:
		return "waiting:" + c.State.Waiting.Reason
	}
	return "?"
}

func TestPlanRestartPolicy(t *testing.T) {
	tests := []struct {
		policy   corev1.RestartPolicy
		exitCode int32
		// wantDue: a restart is scheduled (immediately: first restart).
		wantDue bool
	}{
		{corev1.RestartPolicyAlways, 0, true},
		{corev1.RestartPolicyAlways, 1, true},
		{corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyOnFailure, 2, true},
		{corev1.RestartPolicyNever, 0, false},
		{corev1.RestartPolicyNever, 1, false},
		{"", 0, true}, // unset means Always
	}
	for _, tt := range tests {
		t.Run(string(tt.policy)+"/"+string(rune('0'+tt.exitCode)), func(t *testing.T) {
			p := NewPlan(podWith(tt.policy, nil, "app"), t0, BackoffConfig{})
			if diff := cmp.Diff([]int{0}, p.Due(t0)); diff != "" {
				t.Fatalf("Due at start (-want +got):\n%s", diff)
			}
			p.Started(0, "id-0", t0)
			p.Exited(0, tt.exitCode, "Error", "", t0.Add(time.Minute))
			due := p.Due(t0.Add(time.Minute))
			if got := len(due) == 1; got != tt.wantDue {
				t.Errorf("restart due = %v, want %v", got, tt.wantDue)
			}
			if !tt.wantDue {
				if _, ok := p.NextDue(); ok {
					t.Errorf("NextDue set for a container that does not restart")
				}
				if got := describe(p.Status().Containers[0]); got != "terminated:Error" {
					t.Errorf("state = %s, want terminated:Error", got)
				}
			}
		})
	}
}

func TestPlanCrashLoop(t *testing.T) {
	p := NewPlan(podWith(corev1.RestartPolicyAlways, nil, "app"), t0, BackoffConfig{})
	p.Started(0, "run-0", t0)
	// First crash: restarted at once.
	p.Exited(0, 1, ReasonError, "", t0.Add(time.Second))
	if diff := cmp.Diff([]int{0}, p.Due(t0.Add(time.Second))); diff != "" {
		t.Fatalf("Due after first crash (-want +got):\n%s", diff)
	}
	p.Started(0, "run-1", t0.Add(time.Second))
	st := p.Status().Containers[0]
	if st.RestartCount != 1 || st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ContainerID != "run-0" {
		t.Errorf("after first restart: restartCount %d, lastState %+v", st.RestartCount, st.LastTerminationState)
	}
	// Second crash: 10 s of CrashLoopBackOff.
	crash := t0.Add(2 * time.Second)
	p.Exited(0, 1, ReasonError, "", crash)
	st = p.Status().Containers[0]
	want := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  ReasonCrashLoopBackOff,
		Message: "back-off 10s restarting failed container=app pod=web_default(u1)",
	}}
	if diff := cmp.Diff(want, st.State); diff != "" {
		t.Errorf("state in back-off (-want +got):\n%s", diff)
	}
	if st.LastTerminationState.Terminated == nil || st.LastTerminationState.Terminated.ExitCode != 1 {
		t.Errorf("lastState = %+v, want the crash", st.LastTerminationState)
	}
	if got := p.Due(crash.Add(10*time.Second - time.Nanosecond)); len(got) != 0 {
		t.Errorf("due before the back-off ends: %v", got)
	}
	if next, _ := p.NextDue(); !next.Equal(crash.Add(10 * time.Second)) {
		t.Errorf("NextDue = %v, want %v", next, crash.Add(10*time.Second))
	}
	if got := p.Due(crash.Add(10 * time.Second)); len(got) != 1 {
		t.Errorf("not due when the back-off ends")
	}
	// Stopping cancels the pending restart.
	p.Stop()
	if got := p.Due(crash.Add(time.Hour)); len(got) != 0 {
		t.Errorf("due after Stop: %v", got)
	}
}

func TestPlanInitContainers(t *testing.T) {
	init := []corev1.Container{
		{Name: "setup", Image: "img"},
		{Name: "proxy", Image: "img", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
		{Name: "migrate", Image: "img"},
	}
	p := NewPlan(podWith(corev1.RestartPolicyAlways, init, "app", "worker"), t0, BackoffConfig{})
	states := func() []string {
		st := p.Status()
		var out []string
		for _, c := range append(st.InitContainers, st.Containers...) {
			out = append(out, c.Name+"="+describe(c))
		}
		return out
	}
	steps := []struct {
		name string
		do   func()
		due  []int
		want []string
	}{
		{"start", func() {}, []int{0}, []string{"setup=waiting:PodInitializing", "proxy=waiting:PodInitializing", "migrate=waiting:PodInitializing", "app=waiting:PodInitializing", "worker=waiting:PodInitializing"}},
		{"setup fails and is retried", func() { p.Started(0, "s0", t0); p.Exited(0, 1, ReasonError, "", t0) }, []int{0}, nil},
		{"setup succeeds: sidecar next", func() { p.Started(0, "s1", t0); p.Exited(0, 0, ReasonCompleted, "", t0) }, []int{1}, nil},
		{"sidecar started: migrate next", func() { p.Started(1, "p0", t0) }, []int{2}, nil},
		{"migrate done: regular containers", func() { p.Started(2, "m0", t0); p.Exited(2, 0, ReasonCompleted, "", t0) }, []int{3, 4}, []string{"setup=terminated:Completed", "proxy=running", "migrate=terminated:Completed", "app=waiting:ContainerCreating", "worker=waiting:ContainerCreating"}},
	}
	for _, s := range steps {
		s.do()
		if diff := cmp.Diff(s.due, p.Due(t0)); diff != "" {
			t.Fatalf("%s: Due (-want +got):\n%s", s.name, diff)
		}
		if s.want != nil {
			if diff := cmp.Diff(s.want, states()); diff != "" {
				t.Errorf("%s: states (-want +got):\n%s", s.name, diff)
			}
		}
	}
}

func TestPlanInitFailureWithNeverStops(t *testing.T) {
	p := NewPlan(podWith(corev1.RestartPolicyNever, []corev1.Container{{Name: "setup"}}, "app"), t0, BackoffConfig{})
	p.Started(0, "s0", t0)
	p.Exited(0, 3, ReasonError, "", t0)
	if got := p.Due(t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("due after a failed init container under Never: %v", got)
	}
}

func TestPlanStartFailedAndConfigError(t *testing.T) {
	p := NewPlan(podWith(corev1.RestartPolicyAlways, nil, "a", "b"), t0, BackoffConfig{})
	p.ConfigError(0, "spec.containers[0].command: Required value")
	p.StartFailed(1, `exec: "nope": executable file not found in $PATH`, t0)
	st := p.Status()
	if got := describe(st.Containers[0]); got != "waiting:CreateContainerConfigError" {
		t.Errorf("a = %s", got)
	}
	// A failed start is a run that ended: its first restart is immediate.
	b := st.Containers[1]
	if got := describe(b); got != "terminated:StartError" || b.State.Terminated.ExitCode != ExitCodeStartError {
		t.Errorf("b = %s %+v", got, b.State)
	}
	if diff := cmp.Diff([]int{1}, p.Due(t0)); diff != "" {
		t.Errorf("Due (-want +got):\n%s", diff)
	}
}

func TestPodStatusStopped(t *testing.T) {
	running := ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	done := ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}
	tests := []struct {
		name string
		st   PodStatus
		want bool
	}{
		{"not stopping", PodStatus{Containers: []ContainerStatus{done}}, false},
		{"stopping, one runs", PodStatus{Stopping: true, Containers: []ContainerStatus{done, running}}, false},
		{"stopping, init runs", PodStatus{Stopping: true, InitContainers: []ContainerStatus{running}}, false},
		{"stopping, none runs", PodStatus{Stopping: true, Containers: []ContainerStatus{done}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.st.Stopped(); got != tt.want {
				t.Errorf("Stopped = %v, want %v", got, tt.want)
			}
		})
	}
}
