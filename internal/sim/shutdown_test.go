package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/agent/shutdown"
	"knode/internal/registry/priorityclass"
	"knode/internal/sim/script"
)

// settingsWorld is an empty World (seed 1) with the given name=value
// settings, closed when the test ends.
func settingsWorld(t *testing.T, settings ...string) *World {
	t.Helper()
	w, err := New(context.Background(), Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for _, kv := range settings {
		name, value, _ := strings.Cut(kv, "=")
		if err := w.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// shutdownWorld is a World of two nodes in zone a, with the given settings,
// run for a minute.
func shutdownWorld(t *testing.T, settings ...string) *World {
	t.Helper()
	w := settingsWorld(t, settings...)
	if err := w.AddNodes("a", 2); err != nil {
		t.Fatal(err)
	}
	return w
}

// bindPod creates a pod bound to node whose container behaves as image
// says (see the fake runtime), of the given PriorityClass ("" for none).
func bindPod(t *testing.T, w *World, name, node, image, class string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{
			NodeName:          node,
			PriorityClassName: class,
			Containers:        []corev1.Container{{Name: "app", Image: image, Resources: corev1.ResourceRequirements{Requests: PodRequests}}},
		},
	}
	if _, err := w.admin.CoreV1().Pods(pod.Namespace).Create(w.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.settle()
}

// runTo runs w until virtual time at.
func runTo(t *testing.T, w *World, at time.Duration) {
	t.Helper()
	if err := w.RunFor(at - w.Now()); err != nil {
		t.Fatal(err)
	}
}

func pod(t *testing.T, w *World, name string) *corev1.Pod {
	t.Helper()
	for k, p := range w.mirror.pods {
		if k.Name == name {
			return p
		}
	}
	t.Fatalf("no pod %s", name)
	return nil
}

func podCondition(p *corev1.Pod, ct corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == ct {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

func ready(t *testing.T, w *World, node string) corev1.NodeCondition {
	t.Helper()
	for _, c := range w.mirror.nodes[node].Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	t.Fatalf("node %s has no Ready condition", node)
	return corev1.NodeCondition{}
}

// phases is the phase and reason of each named pod.
func phases(t *testing.T, w *World, names ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range names {
		p := pod(t, w, name)
		out[name] = string(p.Status.Phase) + "/" + p.Status.Reason
	}
	return out
}

// With graceful shutdown on, a shutdown turns Ready False at once, stops
// the regular pods within their 20 s, then the critical ones within their
// 10 s, and powers the machine off when the lock is released; a start
// boots it, and nothing runs the ended pods again.
func TestShutdownStopsPodsGroupByGroup(t *testing.T) {
	w := shutdownWorld(t, "shutdown-grace-period=30s", "shutdown-grace-period-critical-pods=10s")
	// These ignore SIGTERM, so each group takes its whole period.
	bindPod(t, w, "web", "a-1", "pause,term:ignore", "")
	bindPod(t, w, "batch", "a-1", "pause,term:ignore", "")
	bindPod(t, w, "dns", "a-1", "pause,term:ignore", priorityclass.SystemClusterCritical)
	bindPod(t, w, "elsewhere", "a-2", "pause", "")
	all := []string{"web", "batch", "dns", "elsewhere"}
	runTo(t, w, time.Minute)
	if diff := cmp.Diff(map[string]string{"web": "Running/", "batch": "Running/", "dns": "Running/", "elsewhere": "Running/"}, phases(t, w, all...)); diff != "" {
		t.Fatalf("before the shutdown (-want +got):\n%s", diff)
	}
	a := w.byName["a-1"]
	if a.bus.HeldLocks() != 1 {
		t.Fatalf("a-1 holds %d delay locks before the shutdown, want 1", a.bus.HeldLocks())
	}

	if err := w.At(script.At{Time: time.Minute, Action: script.Shutdown, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	runTo(t, w, time.Minute)
	r := ready(t, w, "a-1")
	if r.Status != corev1.ConditionFalse || r.Message != shutdown.ShuttingDownMessage || !r.LastTransitionTime.Time.Equal(Epoch.Add(time.Minute)) {
		t.Errorf("a-1 Ready at the shutdown = %s %q since %v; want False %q since %v", r.Status, r.Message, r.LastTransitionTime.Time, shutdown.ShuttingDownMessage, Epoch.Add(time.Minute))
	}
	if ready(t, w, "a-2").Status != corev1.ConditionTrue {
		t.Errorf("a-2 is not Ready")
	}

	// A pod bound while the node shuts down is rejected.
	bindPod(t, w, "late", "a-1", "pause", "")
	runTo(t, w, time.Minute+19*time.Second)
	if diff := cmp.Diff(map[string]string{"web": "Running/", "batch": "Running/", "dns": "Running/", "late": "Failed/" + shutdown.ReasonNodeShutdown}, phases(t, w, "web", "batch", "dns", "late")); diff != "" {
		t.Errorf("19s into the shutdown (-want +got):\n%s", diff)
	}
	runTo(t, w, time.Minute+20*time.Second)
	terminated := "Failed/" + shutdown.ReasonTerminated
	if diff := cmp.Diff(map[string]string{"web": terminated, "batch": terminated, "dns": "Running/"}, phases(t, w, "web", "batch", "dns")); diff != "" {
		t.Errorf("20s into the shutdown, the regular group is done (-want +got):\n%s", diff)
	}
	if a.power != shuttingDown || a.bus.HeldLocks() != 1 {
		t.Errorf("20s into the shutdown: power %d, %d locks; want shutting down with its lock", a.power, a.bus.HeldLocks())
	}
	runTo(t, w, time.Minute+30*time.Second)
	if diff := cmp.Diff(map[string]string{"web": terminated, "batch": terminated, "dns": terminated, "elsewhere": "Running/"}, phases(t, w, all...)); diff != "" {
		t.Errorf("30s into the shutdown, every group is done (-want +got):\n%s", diff)
	}
	for _, name := range []string{"web", "batch", "dns"} {
		c := podCondition(pod(t, w, name), corev1.DisruptionTarget)
		if c == nil || c.Status != corev1.ConditionTrue || c.Reason != shutdown.ReasonTerminationByKubelet {
			t.Errorf("pod %s DisruptionTarget = %+v, want True %s", name, c, shutdown.ReasonTerminationByKubelet)
		}
	}
	if a.power != poweredOff || a.bus.HeldLocks() != 0 {
		t.Fatalf("after the last group: power %d, %d locks; want off, lock released", a.power, a.bus.HeldLocks())
	}
	lease := w.mirror.leases["a-1"].Spec.RenewTime.Time

	// Off: silent, as a stopped agent, until a start.
	if err := w.At(script.At{Time: 3 * time.Minute, Action: script.Start, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	runTo(t, w, 3*time.Minute-time.Second)
	if got := w.mirror.leases["a-1"].Spec.RenewTime.Time; !got.Equal(lease) || got.After(Epoch.Add(time.Minute+30*time.Second)) {
		t.Errorf("a-1 renewed its lease at %v while off (last before: %v)", got, lease)
	}
	if r := ready(t, w, "a-1"); r.Status != corev1.ConditionUnknown {
		t.Errorf("a-1 Ready while off = %s %q, want Unknown (the lifecycle controller's)", r.Status, r.Message)
	}
	rows := w.Snapshot()
	if rows[0].ShuttingDown != 1 || rows[0].PodsShutDown != 3 || rows[0].Pods != 1 {
		t.Errorf("timeline while off: %+v; want 1 shutting down, 3 pods shut down, 1 pod running", rows[0])
	}

	runTo(t, w, 3*time.Minute+10*time.Second)
	if r := ready(t, w, "a-1"); r.Status != corev1.ConditionTrue {
		t.Errorf("a-1 Ready after booting = %s %q, want True", r.Status, r.Message)
	}
	if diff := cmp.Diff(map[string]string{"web": terminated, "batch": terminated, "dns": terminated, "late": "Failed/" + shutdown.ReasonNodeShutdown}, phases(t, w, "web", "batch", "dns", "late")); diff != "" {
		t.Errorf("after booting (-want +got):\n%s", diff)
	}
	if n := len(a.rt.ListPods()); n != 0 {
		t.Errorf("after booting the runtime runs %d pods, want none", n)
	}
	if a.power != poweredOn || a.bus.HeldLocks() != 1 || a.shutdown.ShutdownStatus() != nil {
		t.Errorf("after booting: power %d, %d locks, status %v; want on, holding a new lock, not shutting down", a.power, a.bus.HeldLocks(), a.shutdown.ShutdownStatus())
	}
	if id := w.mirror.nodes["a-1"].Status.NodeInfo.BootID; id != "boot-a-1-1" {
		t.Errorf("boot ID after booting = %q, want boot-a-1-1", id)
	}
	rows = w.Snapshot()
	if rows[0].ShuttingDown != 0 || rows[0].PodsShutDown != 3 {
		t.Errorf("timeline after booting: %+v; want none shutting down, still 3 pods shut down", rows[0])
	}
}

// Without graceful shutdown (the default), a shutdown powers the machine
// off at once: Ready stays True until the lifecycle controller finds the
// node silent, the pods are not stopped, and after a boot they run again.
func TestShutdownWithoutGracePowersOffAtOnce(t *testing.T) {
	w := shutdownWorld(t)
	bindPod(t, w, "web", "a-1", "pause", "")
	runTo(t, w, time.Minute)
	a := w.byName["a-1"]
	if a.shutdown != nil {
		t.Fatalf("a shutdown manager runs with graceful shutdown off")
	}
	if err := w.Act(script.At{Action: script.Shutdown, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if a.power != poweredOff || a.running {
		t.Fatalf("after the shutdown: power %d, running %v; want off and silent", a.power, a.running)
	}
	runTo(t, w, time.Minute+10*time.Second)
	if r := ready(t, w, "a-1"); r.Status != corev1.ConditionTrue {
		t.Errorf("a-1 Ready 10s after the shutdown = %s %q, want True (nothing posted)", r.Status, r.Message)
	}
	if got := phases(t, w, "web")["web"]; got != "Running/" {
		t.Errorf("web after the shutdown = %s, want Running", got)
	}
	if err := w.Act(script.At{Action: script.Start, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	runTo(t, w, time.Minute+20*time.Second)
	if n := len(a.rt.ListPods()); n != 1 {
		t.Errorf("after booting the runtime runs %d pods, want web again", n)
	}
	if rows := w.Snapshot(); rows[0].PodsShutDown != 0 {
		t.Errorf("pods_shut_down = %d, want 0", rows[0].PodsShutDown)
	}
}

// A stop during a shutdown pauses it and a start carries it on; a start
// does not boot a machine that is on. A machine whose agent is silent goes
// off when logind's delay has passed, its pods left as they were.
func TestShutdownOfSilentAgents(t *testing.T) {
	w := shutdownWorld(t, "shutdown-grace-period=30s", "shutdown-grace-period-critical-pods=10s")
	bindPod(t, w, "web", "a-1", "pause,term:ignore", "")
	bindPod(t, w, "db", "a-2", "pause,term:ignore", "")
	runTo(t, w, time.Minute)
	a1, a2 := w.byName["a-1"], w.byName["a-2"]
	if err := w.Act(script.At{Action: script.Stop, Zone: "a", From: 2, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Act(script.At{Action: script.Shutdown, Zone: "a"}); err != nil {
		t.Fatal(err)
	}
	runTo(t, w, time.Minute+5*time.Second)
	if err := w.Act(script.At{Action: script.Stop, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	runTo(t, w, time.Minute+15*time.Second)
	if err := w.Act(script.At{Action: script.Start, Zone: "a", From: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if a1.boots != 0 || a1.power != shuttingDown {
		t.Fatalf("start of a machine shutting down: %d boots, power %d; want none, still shutting down", a1.boots, a1.power)
	}
	runTo(t, w, time.Minute+19*time.Second)
	if got := phases(t, w, "web")["web"]; got != "Running/" || a1.power != shuttingDown {
		t.Errorf("19s into the shutdown: web %s, power %d; want Running, shutting down", got, a1.power)
	}
	runTo(t, w, time.Minute+20*time.Second)
	if got := phases(t, w, "web")["web"]; got != "Failed/"+shutdown.ReasonTerminated || a1.power != poweredOff {
		t.Errorf("20s into the shutdown: web %s, power %d; want Failed/Terminated, off", got, a1.power)
	}
	runTo(t, w, time.Minute+31*time.Second)
	if a2.power != shuttingDown {
		t.Errorf("silent a-2 31s into the shutdown: power %d, want shutting down", a2.power)
	}
	runTo(t, w, time.Minute+32*time.Second)
	if got := phases(t, w, "db")["db"]; got != "Running/" || a2.power != poweredOff {
		t.Errorf("silent a-2 after logind's 32s: db %s, power %d; want Running (never stopped), off", got, a2.power)
	}
}

// Act names the nodes from and count pick, and refuses names beyond the
// zone.
func TestActSelectsNodes(t *testing.T) {
	w := shutdownWorld(t)
	if err := w.AddNodes("b", 4); err != nil {
		t.Fatal(err)
	}
	if err := w.Act(script.At{Action: script.Stop, Zone: "b", From: 2, Count: 2}); err != nil {
		t.Fatal(err)
	}
	var running []string
	for _, a := range w.zones["b"] {
		if a.running {
			running = append(running, a.name)
		}
	}
	if diff := cmp.Diff([]string{"b-1", "b-4"}, running); diff != "" {
		t.Errorf("running after stopping from=2 count=2 (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		from, count int
		want        string
	}{
		{5, 0, `from=5: zone "b" has only 4 nodes`},
		{3, 3, `from=3 count=3: zone "b" has only 4 nodes`},
		{0, 5, `from=1 count=5: zone "b" has only 4 nodes`},
	} {
		if err := w.Act(script.At{Action: script.Stop, Zone: "b", From: tc.from, Count: tc.count}); err == nil || err.Error() != tc.want {
			t.Errorf("Act(from=%d, count=%d) = %v, want %q", tc.from, tc.count, err, tc.want)
		}
	}
}

// A pods statement's priority becomes the pods' PriorityClass: a built-in
// one for its value, else one made on first use.
func TestPodsPriority(t *testing.T) {
	w := shutdownWorld(t)
	for _, p := range []script.Priority{{Given: true, Value: script.SystemClusterCritical}, {Given: true, Value: 5}, {Given: true, Value: 5}, {}} {
		if err := w.AddPods(script.Pods{Count: 1, Priority: p}); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]string{}
	for k, p := range w.mirror.pods {
		got[k.Name] = fmt.Sprintf("%s=%d", p.Spec.PriorityClassName, ptr.Deref(p.Spec.Priority, -1))
	}
	want := map[string]string{"pod-1": "system-cluster-critical=2000000000", "pod-2": "priority-5=5", "pod-3": "priority-5=5", "pod-4": "=0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pods' class=priority (-want +got):\n%s", diff)
	}
}

// A pods statement's stop becomes its container's stop behaviour: in a
// shutdown with 30 s of grace, 10 s of them for critical pods, regular
// pods of stop=5s end 5 s in, those of stop=ignore when the regular
// group's 20 s are up, and critical pods of stop=3s 3 s later; pods
// without stop end at once.
func TestPodsStop(t *testing.T) {
	w := shutdownWorld(t, "shutdown-grace-period=30s", "shutdown-grace-period-critical-pods=10s")
	critical := script.Priority{Given: true, Value: script.SystemClusterCritical}
	for _, p := range []struct {
		prio script.Priority
		stop script.Termination
	}{
		{script.Priority{}, script.Termination{}},
		{script.Priority{}, script.Termination{Given: true, After: 5 * time.Second}},
		{script.Priority{}, script.Termination{Given: true, Ignore: true}},
		{critical, script.Termination{Given: true, After: 3 * time.Second}},
	} {
		if err := w.AddPods(script.Pods{Count: 2, Priority: p.prio, Stop: p.stop}); err != nil {
			t.Fatal(err)
		}
	}
	images := map[string]string{}
	for k, p := range w.mirror.pods {
		images[k.Name] = p.Spec.Containers[0].Image
	}
	const pause = "registry.k8s.io/pause:3.10"
	want := map[string]string{
		"pod-1": pause, "pod-2": pause,
		"pod-3": pause + ",term:0@5s", "pod-4": pause + ",term:0@5s",
		"pod-5": pause + ",term:ignore", "pod-6": pause + ",term:ignore",
		"pod-7": pause + ",term:0@3s", "pod-8": pause + ",term:0@3s",
	}
	if diff := cmp.Diff(want, images); diff != "" {
		t.Fatalf("images (-want +got):\n%s", diff)
	}
	runTo(t, w, time.Minute)
	if err := w.At(script.At{Time: time.Minute, Action: script.Shutdown, Zone: "a"}); err != nil {
		t.Fatal(err)
	}
	const running, ended = "Running/", "Failed/" + shutdown.ReasonTerminated
	all := []string{"pod-1", "pod-2", "pod-3", "pod-4", "pod-5", "pod-6", "pod-7", "pod-8"}
	for _, step := range []struct {
		at   time.Duration // into the shutdown
		want []string      // phase/reason of pod-1 … pod-8
	}{
		{0, []string{ended, ended, running, running, running, running, running, running}},
		{4 * time.Second, []string{ended, ended, running, running, running, running, running, running}},
		{5 * time.Second, []string{ended, ended, ended, ended, running, running, running, running}},
		{19 * time.Second, []string{ended, ended, ended, ended, running, running, running, running}},
		{20 * time.Second, []string{ended, ended, ended, ended, ended, ended, running, running}},
		{22 * time.Second, []string{ended, ended, ended, ended, ended, ended, running, running}},
		{23 * time.Second, []string{ended, ended, ended, ended, ended, ended, ended, ended}},
	} {
		runTo(t, w, time.Minute+step.at)
		wantPhases := map[string]string{}
		for i, name := range all {
			wantPhases[name] = step.want[i]
		}
		if diff := cmp.Diff(wantPhases, phases(t, w, all...)); diff != "" {
			t.Errorf("%v into the shutdown (-want +got):\n%s", step.at, diff)
		}
	}
	for _, node := range []string{"a-1", "a-2"} {
		if a := w.byName[node]; a.power != poweredOff {
			t.Errorf("%s 23s into the shutdown: power %d, want off", node, a.power)
		}
	}
}

// Shutdowns whose groups take time keep the outcome whether the agents'
// callbacks run one at a time or side by side: the same timeline and the
// same objects, as TestLanesKeepTheOutcome checks for scripts.
func TestLanesKeepTheShutdownOutcome(t *testing.T) {
	replay := func(cfg Config) *World {
		w, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		for _, kv := range [][2]string{{"shutdown-grace-period", "30s"}, {"shutdown-grace-period-critical-pods", "10s"}} {
			if err := w.Set(kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AddNodes("a", 8); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 8; i++ {
			node := fmt.Sprintf("a-%d", i)
			bindPod(t, w, node+"-slow", node, "pause,term:ignore", "")
			bindPod(t, w, node+"-clean", node, fmt.Sprintf("pause,term:0@%ds", i), "")
			bindPod(t, w, node+"-critical", node, "pause,term:0@3s", priorityclass.SystemClusterCritical)
		}
		runTo(t, w, time.Minute)
		for _, at := range []struct {
			t           time.Duration
			action      script.Action
			from, count int
		}{
			{time.Minute, script.Shutdown, 1, 6},
			{time.Minute + 5*time.Second, script.Stop, 6, 1},
			{time.Minute + 15*time.Second, script.Start, 6, 1},
			{3 * time.Minute, script.Start, 1, 6},
			{4 * time.Minute, script.Shutdown, 0, 0},
		} {
			if err := w.At(script.At{Time: at.t, Action: at.action, Zone: "a", From: at.from, Count: at.count}); err != nil {
				t.Fatal(err)
			}
		}
		runTo(t, w, 6*time.Minute)
		return w
	}
	serial := replay(Config{Seed: 3, Batch: 1, Workers: 1})
	lanes := replay(Config{Seed: 3, Workers: 4})
	if lanes.batched < 2*lanes.batches || lanes.batches < 10 {
		t.Fatalf("only %d callbacks in %d batches: the scenario does not exercise lanes", lanes.batched, lanes.batches)
	}
	rows := serial.Samples()
	if last := rows[len(rows)-1]; last.ShuttingDown != 8 || last.PodsShutDown != 24 {
		t.Errorf("last sample %+v; want all 8 nodes off, 24 pods ended by the shutdowns (18, then 6)", last)
	}
	if diff := cmp.Diff(rows, lanes.Samples()); diff != "" {
		t.Errorf("timeline (-serial +lanes):\n%s", diff)
	}
	if diff := cmp.Diff(objects(t, serial), objects(t, lanes)); diff != "" {
		t.Errorf("objects (-serial +lanes):\n%s", diff)
	}
}
