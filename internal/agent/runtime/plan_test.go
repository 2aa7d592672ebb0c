package runtime

import (
	"fmt"
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

// restored is p rebuilt by RestorePlan from its records at now.
func restored(t *testing.T, pod *corev1.Pod, p *Plan, now time.Time) *Plan {
	t.Helper()
	records := make([]ContainerRecord, p.Len())
	for i := range records {
		records[i] = p.Record(i)
	}
	q, err := RestorePlan(pod, records, p.Stopping(), now, BackoffConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// samePlans fails unless a and b report and schedule the same at now.
func samePlans(t *testing.T, what string, a, b *Plan, now time.Time) {
	t.Helper()
	if diff := cmp.Diff(a.Status(), b.Status()); diff != "" {
		t.Errorf("%s: status (-original +restored):\n%s", what, diff)
	}
	if diff := cmp.Diff(a.Due(now), b.Due(now)); diff != "" {
		t.Errorf("%s: Due (-original +restored):\n%s", what, diff)
	}
	an, aok := a.NextDue()
	bn, bok := b.NextDue()
	if aok != bok || !an.Equal(bn) {
		t.Errorf("%s: NextDue = %v %v, restored %v %v", what, an, aok, bn, bok)
	}
}

func TestRestorePlanRoundTrip(t *testing.T) {
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	initPod := podWith(corev1.RestartPolicyAlways, []corev1.Container{
		{Name: "setup", Image: "img"},
		{Name: "proxy", Image: "img", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}, "app")
	tests := []struct {
		name string
		pod  *corev1.Pod
		// history happens before the agent restart, at times up to now.
		history func(p *Plan)
		now     time.Time
		// after happens to both plans after the restore.
		after func(p *Plan)
	}{
		{name: "never started", history: func(*Plan) {}, now: t0},
		{name: "running", history: func(p *Plan) { p.Started(0, "r0", sec(1)) }, now: sec(60)},
		{
			name: "running after a restart keeps count and last state",
			history: func(p *Plan) {
				p.Started(0, "r0", sec(0))
				p.Exited(0, 1, ReasonError, "", sec(1))
				p.Started(0, "r1", sec(1))
			},
			now: sec(60),
		},
		{
			name: "restart due at once after the first crash",
			history: func(p *Plan) {
				p.Started(0, "r0", sec(0))
				p.Exited(0, 2, ReasonError, "", sec(5))
			},
			now: sec(5),
		},
		{
			name: "in back-off, restored before it ends",
			history: func(p *Plan) {
				p.Started(0, "r0", sec(0))
				p.Exited(0, 1, ReasonError, "", sec(1))
				p.Started(0, "r1", sec(1))
				p.Exited(0, 1, ReasonError, "", sec(2))
			},
			now: sec(7),
		},
		{
			name: "in back-off, restored after it ended",
			history: func(p *Plan) {
				p.Started(0, "r0", sec(0))
				p.Exited(0, 1, ReasonError, "", sec(1))
				p.Started(0, "r1", sec(1))
				p.Exited(0, 1, ReasonError, "", sec(2))
			},
			now: sec(3600),
		},
		{
			name: "back-off carries over: the next crash waits 20 s",
			history: func(p *Plan) {
				p.Started(0, "r0", sec(0))
				p.Exited(0, 1, ReasonError, "", sec(1))
				p.Started(0, "r1", sec(1))
				p.Exited(0, 1, ReasonError, "", sec(2))
				p.Started(0, "r2", sec(12))
			},
			now:   sec(13),
			after: func(p *Plan) { p.Exited(0, 1, ReasonError, "", sec(13)) },
		},
		{
			name:    "completed under Never",
			pod:     podWith(corev1.RestartPolicyNever, nil, "app"),
			history: func(p *Plan) { p.Started(0, "r0", sec(0)); p.Exited(0, 0, ReasonCompleted, "", sec(1)) },
			now:     sec(60),
		},
		{
			name:    "start failed",
			history: func(p *Plan) { p.StartFailed(0, "no such file", sec(1)) },
			now:     sec(1),
		},
		{
			name:    "init container running",
			pod:     initPod,
			history: func(p *Plan) { p.Started(0, "s0", sec(0)) },
			now:     sec(1),
			after:   func(p *Plan) { p.Exited(0, 0, ReasonCompleted, "", sec(2)) },
		},
		{
			name: "init done, sidecar and app running",
			pod:  initPod,
			history: func(p *Plan) {
				p.Started(0, "s0", sec(0))
				p.Exited(0, 0, ReasonCompleted, "", sec(1))
				p.Started(1, "p0", sec(1))
				p.Started(2, "a0", sec(1))
			},
			now: sec(2),
		},
		{
			name:    "stopping with a running container",
			history: func(p *Plan) { p.Started(0, "r0", sec(0)); p.Stop() },
			now:     sec(1),
			after:   func(p *Plan) { p.Exited(0, 143, ReasonError, "", sec(2)) },
		},
		{
			name:    "stopped after its container exited",
			history: func(p *Plan) { p.Started(0, "r0", sec(0)); p.Stop(); p.Exited(0, 137, ReasonError, "", sec(1)) },
			now:     sec(2),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod
			if pod == nil {
				pod = podWith(corev1.RestartPolicyAlways, nil, "app")
			}
			a := NewPlan(pod, t0, BackoffConfig{})
			tt.history(a)
			b := restored(t, pod, a, tt.now)
			samePlans(t, "restored", a, b, tt.now)
			if tt.after != nil {
				tt.after(a)
				tt.after(b)
				samePlans(t, "after the restore", a, b, tt.now)
			}
		})
	}
}

func TestRestorePlan(t *testing.T) {
	pod := podWith(corev1.RestartPolicyAlways, nil, "app", "side")
	running := ContainerRecord{Started: true, ID: "r3", RestartCount: 3, StartedAt: t0}
	tests := []struct {
		name    string
		records []ContainerRecord
		now     time.Time
		want    []string
		wantDue []int
		wantErr string
	}{
		{
			name:    "a container that never started starts",
			records: []ContainerRecord{running, {}},
			now:     t0,
			want:    []string{"app=running/3", "side=waiting:ContainerCreating/0"},
			wantDue: []int{1},
		},
		{
			name: "an exit in back-off whose wait passed before the restore is due at once",
			records: []ContainerRecord{running, {
				Started: true, ID: "s1", RestartCount: 1, StartedAt: t0,
				Exit:         &corev1.ContainerStateTerminated{ExitCode: 137, Reason: ReasonContainerStatusUnknown, FinishedAt: metav1.NewTime(t0.Add(time.Minute))},
				BackoffDelay: 10 * time.Second, LastRestart: t0,
			}},
			now:     t0.Add(time.Minute + 10*time.Second),
			want:    []string{"app=running/3", "side=waiting:CrashLoopBackOff/1"},
			wantDue: []int{1},
		},
		{
			name: "an exit in back-off still waits when restored early",
			records: []ContainerRecord{running, {
				Started: true, ID: "s1", RestartCount: 1, StartedAt: t0,
				Exit:         &corev1.ContainerStateTerminated{ExitCode: 137, Reason: ReasonContainerStatusUnknown, FinishedAt: metav1.NewTime(t0.Add(time.Minute))},
				BackoffDelay: 10 * time.Second, LastRestart: t0,
			}},
			now:  t0.Add(time.Minute + 10*time.Second - time.Nanosecond),
			want: []string{"app=running/3", "side=waiting:CrashLoopBackOff/1"},
		},
		{
			name: "an exit long after the last restart restarts at once, back-off expired",
			records: []ContainerRecord{running, {
				Started: true, ID: "s1", RestartCount: 1, StartedAt: t0,
				Exit:         &corev1.ContainerStateTerminated{ExitCode: 137, Reason: ReasonContainerStatusUnknown, FinishedAt: metav1.NewTime(t0.Add(time.Hour))},
				BackoffDelay: 10 * time.Second, LastRestart: t0,
			}},
			now:     t0.Add(time.Hour),
			want:    []string{"app=running/3", "side=terminated:ContainerStatusUnknown/1"},
			wantDue: []int{1},
		},
		{
			name:    "too few records",
			records: []ContainerRecord{running},
			wantErr: "restoring pod u1: 1 container records for 2 containers",
		},
		{
			name:    "a started record without a start time",
			records: []ContainerRecord{{Started: true, ID: "x"}, {}},
			wantErr: "restoring pod u1: container app: a started container's record needs StartedAt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := RestorePlan(pod, tt.records, false, tt.now, BackoffConfig{})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range p.Status().Containers {
				got = append(got, fmt.Sprintf("%s=%s/%d", c.Name, describe(c), c.RestartCount))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDue, p.Due(tt.now)); diff != "" {
				t.Errorf("Due (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordLeavesConfigErrorsOut(t *testing.T) {
	p := NewPlan(podWith(corev1.RestartPolicyAlways, nil, "app"), t0, BackoffConfig{})
	p.ConfigError(0, "spec.containers[0].command: Required value")
	if diff := cmp.Diff(ContainerRecord{}, p.Record(0)); diff != "" {
		t.Errorf("record of a config error (-want +got):\n%s", diff)
	}
}
