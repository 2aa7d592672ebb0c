package pods

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPhase(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	waiting := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	backoff := corev1.ContainerStatus{
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}},
	}
	two := []corev1.Container{{Name: "a"}, {Name: "b"}}
	tests := []struct {
		name       string
		policy     corev1.RestartPolicy
		init       []corev1.Container
		initStatus []corev1.ContainerStatus
		statuses   []corev1.ContainerStatus
		terminal   bool
		want       corev1.PodPhase
	}{
		{name: "all waiting", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{waiting, waiting}, want: corev1.PodPending},
		{name: "one waiting one running", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{waiting, running}, want: corev1.PodPending},
		{name: "running", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{running, running}, want: corev1.PodRunning},
		{name: "crash looping under Always", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{backoff, backoff}, want: corev1.PodRunning},
		{name: "all succeeded under Never", policy: corev1.RestartPolicyNever, statuses: []corev1.ContainerStatus{exited(0), exited(0)}, want: corev1.PodSucceeded},
		{name: "one failed under Never", policy: corev1.RestartPolicyNever, statuses: []corev1.ContainerStatus{exited(0), exited(2)}, want: corev1.PodFailed},
		{name: "one still running under Never", policy: corev1.RestartPolicyNever, statuses: []corev1.ContainerStatus{exited(2), running}, want: corev1.PodRunning},
		{name: "all succeeded under OnFailure", policy: corev1.RestartPolicyOnFailure, statuses: []corev1.ContainerStatus{exited(0), exited(0)}, want: corev1.PodSucceeded},
		{name: "exited under Always is restarting", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{exited(0), exited(0)}, want: corev1.PodRunning},
		{name: "deleted, all exited 0", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{exited(0), exited(0)}, terminal: true, want: corev1.PodSucceeded},
		{name: "deleted, one killed", policy: corev1.RestartPolicyAlways, statuses: []corev1.ContainerStatus{exited(0), exited(137)}, terminal: true, want: corev1.PodFailed},
		{name: "init running", policy: corev1.RestartPolicyAlways, init: []corev1.Container{{Name: "i"}}, initStatus: []corev1.ContainerStatus{running}, statuses: []corev1.ContainerStatus{waiting, waiting}, want: corev1.PodPending},
		{name: "init failed under Never", policy: corev1.RestartPolicyNever, init: []corev1.Container{{Name: "i"}}, initStatus: []corev1.ContainerStatus{exited(1)}, statuses: []corev1.ContainerStatus{waiting, waiting}, want: corev1.PodFailed},
		{name: "init failed under OnFailure is retried", policy: corev1.RestartPolicyOnFailure, init: []corev1.Container{{Name: "i"}}, initStatus: []corev1.ContainerStatus{backoff}, statuses: []corev1.ContainerStatus{waiting, waiting}, want: corev1.PodPending},
		{name: "sidecar running, app running", policy: corev1.RestartPolicyAlways,
			init:       []corev1.Container{{Name: "s", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			initStatus: []corev1.ContainerStatus{running}, statuses: []corev1.ContainerStatus{running, running}, want: corev1.PodRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &corev1.PodSpec{RestartPolicy: tt.policy, InitContainers: tt.init, Containers: two}
			if got := Phase(spec, tt.initStatus, tt.statuses, tt.terminal); got != tt.want {
				t.Errorf("Phase = %s, want %s", got, tt.want)
			}
		})
	}
}
