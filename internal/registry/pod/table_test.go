package pod

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var tableNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) metav1.Time { return metav1.NewTime(tableNow.Add(-d)) }

func runningReady(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Ready: true, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func waiting(name, reason string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason}}}
}

func terminatedWith(name, reason string, code, signal int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: reason, ExitCode: code, Signal: signal}}}
}

func tablePod(mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", CreationTimestamp: ago(5 * time.Minute)},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "x"}}},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
	mutate(p)
	return p
}

func twoInits(p *v1.Pod) {
	p.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "x"}, {Name: "i2", Image: "x"}}
}

// The READY, STATUS and RESTARTS cells, as kubectl get pods shows them.
func TestRowStatusCells(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1.Pod)
		want   [3]string // READY, STATUS, RESTARTS
	}{
		{"new pod", func(*v1.Pod) {}, [3]string{"0/1", "Pending", "0"}},
		{"running and ready", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c")}
		}, [3]string{"1/1", "Running", "0"}},
		{"running, not ready", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		}, [3]string{"0/1", "Running", "0"}},
		{"creating", func(p *v1.Pod) {
			p.Status.ContainerStatuses = []v1.ContainerStatus{waiting("c", "ContainerCreating")}
		}, [3]string{"0/1", "ContainerCreating", "0"}},
		{"crash loop with last restart time", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			st := waiting("c", "CrashLoopBackOff")
			st.RestartCount = 3
			st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(2 * time.Minute)}
			p.Status.ContainerStatuses = []v1.ContainerStatus{st}
		}, [3]string{"0/1", "CrashLoopBackOff", "3 (2m ago)"}},
		{"restarts without a last termination time", func(p *v1.Pod) {
			p.Status.Phase = v1.PodRunning
			st := runningReady("c")
			st.RestartCount = 4
			p.Status.ContainerStatuses = []v1.ContainerStatus{st}
		}, [3]string{"1/1", "Running", "4"}},
		{"restarts summed, newest restart shown", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x"})
			p.Status.Phase = v1.PodRunning
			a, b := runningReady("c"), runningReady("d")
			a.RestartCount, b.RestartCount = 1, 2
			a.LastTerminationState.Terminated = &v1.ContainerStateTerminated{FinishedAt: ago(90 * time.Minute)}
			b.LastTerminationState.Terminated = &v1.ContainerStateTerminated{FinishedAt: ago(30 * time.Second)}
			p.Status.ContainerStatuses = []v1.ContainerStatus{a, b}
		}, [3]string{"2/2", "Running", "3 (30s ago)"}},
		{"completed", func(p *v1.Pod) {
			p.Status.Phase = v1.PodSucceeded
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminatedWith("c", "Completed", 0, 0)}
		}, [3]string{"0/1", "Completed", "0"}},
		{"error", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminatedWith("c", "Error", 1, 0)}
		}, [3]string{"0/1", "Error", "0"}},
		{"killed by signal", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminatedWith("c", "", 137, 9)}
		}, [3]string{"0/1", "Signal:9", "0"}},
		{"exit code without reason", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminatedWith("c", "", 2, 0)}
		}, [3]string{"0/1", "ExitCode:2", "0"}},
		{"completed with a container still running and Ready", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x"})
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
			p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c"), terminatedWith("d", "Completed", 0, 0)}
		}, [3]string{"1/2", "Running", "0"}},
		{"completed with a container still running, not Ready", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x"})
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c"), terminatedWith("d", "Completed", 0, 0)}
		}, [3]string{"1/2", "NotReady", "0"}},
		{"evicted", func(p *v1.Pod) {
			p.Status.Phase = v1.PodFailed
			p.Status.Reason = "Evicted"
		}, [3]string{"0/1", "Evicted", "0"}},
		{"scheduling gated", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulingGated"}}
		}, [3]string{"0/1", "SchedulingGated", "0"}},

		// Init containers.
		{"first init container running", func(p *v1.Pod) {
			twoInits(p)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "i1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}, waiting("i2", "PodInitializing")}
			p.Status.ContainerStatuses = []v1.ContainerStatus{waiting("c", "PodInitializing")}
		}, [3]string{"0/1", "Init:0/2", "0"}},
		{"second init container pending", func(p *v1.Pod) {
			twoInits(p)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{terminatedWith("i1", "Completed", 0, 0), waiting("i2", "PodInitializing")}
		}, [3]string{"0/1", "Init:1/2", "0"}},
		{"init image pull failing", func(p *v1.Pod) {
			twoInits(p)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{waiting("i1", "ImagePullBackOff")}
		}, [3]string{"0/1", "Init:ImagePullBackOff", "0"}},
		{"init container failed", func(p *v1.Pod) {
			twoInits(p)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{terminatedWith("i1", "Error", 1, 0)}
		}, [3]string{"0/1", "Init:Error", "0"}},
		{"init container exit code", func(p *v1.Pod) {
			twoInits(p)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{terminatedWith("i1", "", 3, 0)}
		}, [3]string{"0/1", "Init:ExitCode:3", "0"}},
		{"init container signal", func(p *v1.Pod) {
			twoInits(p)
			p.Status.InitContainerStatuses = []v1.ContainerStatus{terminatedWith("i1", "", 137, 9)}
		}, [3]string{"0/1", "Init:Signal:9", "0"}},
		{"init crash loop counts init restarts", func(p *v1.Pod) {
			twoInits(p)
			st := waiting("i1", "CrashLoopBackOff")
			st.RestartCount = 2
			st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: 1, FinishedAt: ago(time.Minute)}
			p.Status.InitContainerStatuses = []v1.ContainerStatus{st}
		}, [3]string{"0/1", "Init:CrashLoopBackOff", "2 (60s ago)"}},
		{"finished init restarts are not shown", func(p *v1.Pod) {
			twoInits(p)
			p.Status.Phase = v1.PodRunning
			a, b := terminatedWith("i1", "Completed", 0, 0), terminatedWith("i2", "Completed", 0, 0)
			a.RestartCount = 5
			p.Status.InitContainerStatuses = []v1.ContainerStatus{a, b}
			p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c")}
		}, [3]string{"1/1", "Running", "0"}},
		{"sidecar counts towards ready and restarts", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "side", Image: "x", RestartPolicy: ptr(v1.ContainerRestartPolicyAlways)}}
			p.Status.Phase = v1.PodRunning
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}}
			side := runningReady("side")
			side.Started = ptr(true)
			side.RestartCount = 1
			side.LastTerminationState.Terminated = &v1.ContainerStateTerminated{FinishedAt: ago(3 * time.Hour)}
			p.Status.InitContainerStatuses = []v1.ContainerStatus{side}
			p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c")}
		}, [3]string{"2/2", "Running", "1 (3h ago)"}},

		// Deletion.
		{"terminating", func(p *v1.Pod) {
			p.DeletionTimestamp = ptr(ago(0))
			p.Status.Phase = v1.PodRunning
			p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c")}
		}, [3]string{"1/1", "Terminating", "0"}},
		{"node lost", func(p *v1.Pod) {
			p.DeletionTimestamp = ptr(ago(0))
			p.Status.Phase = v1.PodRunning
			p.Status.Reason = "NodeLost"
		}, [3]string{"0/1", "Unknown", "0"}},
		{"finished pods are not Terminating", func(p *v1.Pod) {
			p.DeletionTimestamp = ptr(ago(0))
			p.Status.Phase = v1.PodSucceeded
			p.Status.ContainerStatuses = []v1.ContainerStatus{terminatedWith("c", "Completed", 0, 0)}
		}, [3]string{"0/1", "Completed", "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cells := row(tablePod(tc.mutate), tableNow)
			got := [3]string{cells[1].(string), cells[2].(string), cells[3].(string)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("READY/STATUS/RESTARTS (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRowAllCells(t *testing.T) {
	cases := []struct {
		name string
		pod  *v1.Pod
		want []interface{}
	}{
		{
			name: "unscheduled",
			pod:  tablePod(func(*v1.Pod) {}),
			want: []interface{}{"web", "0/1", "Pending", "0", "5m", "<none>", "<none>", "<none>", "<none>"},
		},
		{
			name: "scheduled with gates",
			pod: tablePod(func(p *v1.Pod) {
				p.CreationTimestamp = ago(49 * time.Hour)
				p.Spec.NodeName = "node-1"
				p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "a"}, {ConditionType: "b"}, {ConditionType: "c"}}
				p.Status.Phase = v1.PodRunning
				p.Status.PodIP = "10.0.0.7"
				p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.7"}, {IP: "fd00::7"}}
				p.Status.NominatedNodeName = "node-2"
				p.Status.Conditions = []v1.PodCondition{{Type: "a", Status: v1.ConditionTrue}, {Type: "b", Status: v1.ConditionFalse}}
				p.Status.ContainerStatuses = []v1.ContainerStatus{runningReady("c")}
			}),
			want: []interface{}{"web", "1/1", "Running", "0", "2d1h", "10.0.0.7", "node-1", "node-2", "1/3"},
		},
		{
			name: "no creation time",
			pod:  tablePod(func(p *v1.Pod) { p.CreationTimestamp = metav1.Time{} }),
			want: []interface{}{"web", "0/1", "Pending", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, row(tc.pod, tableNow)); diff != "" {
				t.Errorf("cells (-want +got):\n%s", diff)
			}
		})
	}
}

func TestColumns(t *testing.T) {
	type col struct {
		Name     string
		Type     string
		Priority int32
	}
	want := []col{
		{"Name", "string", 0}, {"Ready", "string", 0}, {"Status", "string", 0}, {"Restarts", "string", 0}, {"Age", "string", 0},
		{"IP", "string", 1}, {"Node", "string", 1}, {"Nominated Node", "string", 1}, {"Readiness Gates", "string", 1},
	}
	var got []col
	for _, c := range columns {
		got = append(got, col{c.Name, c.Type, c.Priority})
		if c.Description == "" {
			t.Errorf("column %q has no description", c.Name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if columns[0].Format != "name" {
		t.Errorf("Name column format = %q, want name", columns[0].Format)
	}
}
