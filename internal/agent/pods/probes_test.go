package pods_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/pods"
	"knode/internal/agent/prober"
	"knode/internal/agent/runtime"
)

// scriptedExec answers exec probes by the command's first word: the exit
// code set for it (0 until set).
type scriptedExec struct {
	mu    sync.Mutex
	codes map[string]int
}

func (s *scriptedExec) set(cmd string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[cmd] = code
}

func (s *scriptedExec) ExecSync(_ context.Context, _ *corev1.Pod, _, _ string, cmd []string, _ time.Duration) ([]byte, int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []byte(cmd[0] + " said no"), s.codes[cmd[0]], nil
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// Readiness drives Ready; a liveness failure kills the run, which the
// restart policy restarts, with the prober's events on the pod.
func TestProbesDriveReadyAndRestarts(t *testing.T) {
	c := newCluster(t, roomy)
	exec := &scriptedExec{codes: map[string]int{"ready": 1}}
	var w *pods.Worker
	probes, err := prober.New(prober.Config{
		Clock: c.clk,
		Exec:  exec,
		Recorder: func(pod *corev1.Pod, eventType, reason, message string) {
			w.RecordEvent(context.Background(), pod, eventType, reason, message)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.newWorker(func(cfg *pods.Config) { cfg.Probes = probes })
	w = c.worker
	p := pod("web", corev1.RestartPolicyAlways, "busybox")
	probe := func(cmd string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}},
			PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1}
	}
	p.Spec.Containers[0].ReadinessProbe = probe("ready")
	p.Spec.Containers[0].LivenessProbe = probe("alive")
	c.create(p)
	c.sync()
	step := func() {
		t.Helper()
		c.clk.Step(time.Second)
		probes.Step(c.ctx, c.clk.Now())
		c.sync()
	}
	step()
	got := c.get("web")
	if got.Status.Phase != corev1.PodRunning || condition(got, corev1.PodReady) != corev1.ConditionFalse || got.Status.ContainerStatuses[0].Ready {
		t.Fatalf("with readiness failing: phase %s, Ready %s, %+v", got.Status.Phase, condition(got, corev1.PodReady), got.Status.ContainerStatuses[0])
	}
	exec.set("ready", 0)
	step()
	got = c.get("web")
	if condition(got, corev1.PodReady) != corev1.ConditionTrue || !got.Status.ContainerStatuses[0].Ready {
		t.Fatalf("with readiness passing: Ready %s", condition(got, corev1.PodReady))
	}
	firstID := got.Status.ContainerStatuses[0].ContainerID

	exec.set("alive", 1)
	step() // the probe fails: the run is killed (the fake ends it at once)
	c.sync()
	got = c.get("web")
	cs := got.Status.ContainerStatuses[0]
	if cs.RestartCount != 1 || cs.ContainerID == firstID || cs.LastTerminationState.Terminated == nil {
		t.Fatalf("after a liveness failure: %+v", cs)
	}
	if cs.Ready || condition(got, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("a new run is ready before its readiness probe passed: %+v", cs)
	}
	events, err := c.admin.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range events.Items {
		seen = append(seen, e.Type+" "+e.Reason+" "+e.Message)
	}
	for _, want := range []string{
		"Warning Unhealthy Readiness probe failed: ready said no",
		"Warning Unhealthy Liveness probe failed: alive said no",
		"Normal Killing Container a failed liveness probe, will be restarted",
	} {
		if !slices.Contains(seen, want) {
			t.Errorf("no event %q in %q", want, seen)
		}
	}
}

// withIPs is a runtime whose pods have networks of their own.
type withIPs struct {
	runtime.Runtime
	ips map[types.UID][]string
}

func (r withIPs) PodStatus(uid types.UID) (runtime.PodStatus, error) {
	st, err := r.Runtime.PodStatus(uid)
	st.IPs = r.ips[uid]
	return st, err
}

// With a pod network, podIP(s) are the sandbox's, kept while it reports
// none; a hostNetwork pod's are the node's.
func TestPodNetworkAddresses(t *testing.T) {
	c := newCluster(t, roomy)
	rt := withIPs{Runtime: c.rt, ips: map[types.UID][]string{}}
	c.newWorker(func(cfg *pods.Config) { cfg.Runtime, cfg.PodNetwork = rt, true })
	own := c.create(pod("own", corev1.RestartPolicyAlways, "busybox"))
	host := pod("host", corev1.RestartPolicyAlways, "busybox")
	host.Spec.HostNetwork = true
	c.create(host)
	c.sync()
	if got := c.get("own"); got.Status.PodIP != "" || got.Status.HostIP != nodeIP {
		t.Errorf("before the sandbox has an address: podIP %q, hostIP %q", got.Status.PodIP, got.Status.HostIP)
	}
	rt.ips[own.UID] = []string{"10.244.1.5", "fd00::5"}
	c.step(time.Second)
	got := c.get("own")
	if got.Status.PodIP != "10.244.1.5" || len(got.Status.PodIPs) != 2 || got.Status.PodIPs[1].IP != "fd00::5" {
		t.Errorf("podIP %q, podIPs %v", got.Status.PodIP, got.Status.PodIPs)
	}
	delete(rt.ips, own.UID)
	c.step(time.Second)
	if got := c.get("own"); got.Status.PodIP != "10.244.1.5" {
		t.Errorf("the address was dropped when the sandbox stopped reporting it: %q", got.Status.PodIP)
	}
	if got := c.get("host"); got.Status.PodIP != nodeIP {
		t.Errorf("hostNetwork pod's podIP %q, want the node's %s", got.Status.PodIP, nodeIP)
	}
}
