package pods_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/agent/pods"
	"knode/internal/agent/runtime"
	"knode/internal/agent/runtime/fake"
	"knode/internal/apitest"
)

const (
	nodeName  = "node-1"
	nodeToken = "node1-token"
	nodeIP    = "10.0.0.11"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// cluster is the real API server (node authorizer and NodeRestriction on)
// over a memory store, one Node, and a worker acting as that node on the
// fake runtime and a fake clock.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	admin  kubernetes.Interface
	clk    *testingclock.FakeClock
	rt     *fake.Runtime
	worker *pods.Worker
	// nodeClient acts as the node.
	nodeClient kubernetes.Interface
	// served receives "LIST pods" once the node's pod list was answered,
	// and "WATCH pods" when the node starts watching its pods.
	served chan string
}

// record reports the node's pod lists and watches on c.served.
func (c *cluster) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nodePods := r.Header.Get("Authorization") == "Bearer "+nodeToken && r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods"
		if nodePods && r.URL.Query().Get("watch") == "true" {
			c.note("WATCH pods")
		}
		next.ServeHTTP(w, r)
		if nodePods && r.URL.Query().Get("watch") != "true" {
			c.note("LIST pods")
		}
	})
}

func (c *cluster) note(s string) {
	select {
	case c.served <- s:
	default:
	}
}

func newCluster(t *testing.T, allocatable corev1.ResourceList, taints ...corev1.Taint) *cluster {
	t.Helper()
	clk := testingclock.NewFakeClock(t0)
	c := &cluster{t: t, ctx: context.Background(), clk: clk, served: make(chan string, 1000)}
	api := apitest.Start(t, apitest.Options{
		NodeRules: true,
		Tokens:    []string{nodeToken + `,system:node:` + nodeName + `,uid1,"system:nodes"`},
		Clock:     clk,
		Wrap:      c.record,
	})
	c.admin = api.Admin
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"kubernetes.io/os": "linux", "zone": "a"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: nodeName}, {Type: corev1.NodeInternalIP, Address: nodeIP}},
			Capacity:    allocatable,
			Allocatable: allocatable,
		},
	}
	if _, err := c.admin.CoreV1().Nodes().Create(c.ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.rt = fake.New(fake.Config{Clock: c.clk})
	c.nodeClient = api.Client(t, nodeToken)
	c.newWorker(nil)
	return c
}

// newWorker makes c.worker the node's worker on c's runtime and clock,
// with edit applied to its Config.
func (c *cluster) newWorker(edit func(*pods.Config)) {
	c.t.Helper()
	cfg := pods.Config{
		Client:   c.nodeClient,
		NodeName: nodeName,
		Runtime:  c.rt,
		Clock:    c.clk,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := pods.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.worker = w
}

func resources(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

var roomy = resources("cpu", "2", "memory", "4Gi", "pods", "10")

// pod is a pod bound to the node; images name the fake behaviours of its
// containers "a", "b", ...
func pod(name string, policy corev1.RestartPolicy, images ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:                      nodeName,
			RestartPolicy:                 policy,
			TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
	}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: img})
	}
	return p
}

func (c *cluster) create(p *corev1.Pod) *corev1.Pod {
	c.t.Helper()
	created, err := c.admin.CoreV1().Pods(p.Namespace).Create(c.ctx, p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return created
}

func (c *cluster) get(name string) *corev1.Pod {
	c.t.Helper()
	p, err := c.admin.CoreV1().Pods("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

func (c *cluster) sync() {
	c.t.Helper()
	if err := c.worker.Sync(c.ctx); err != nil {
		c.t.Fatal(err)
	}
}

// step moves the clock on and syncs.
func (c *cluster) step(d time.Duration) {
	c.t.Helper()
	c.clk.Step(d)
	c.sync()
}

func TestAdmissionRejections(t *testing.T) {
	c := newCluster(t, resources("cpu", "2", "memory", "1Gi", "pods", "4"),
		corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute})
	tolerant := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		return p
	}
	withRequests := func(p *corev1.Pod, r corev1.ResourceList) *corev1.Pod {
		p.Spec.Containers[0].Resources.Requests = r
		return p
	}
	// Created (and so admitted) in this order, one second apart.
	inputs := []*corev1.Pod{
		withRequests(tolerant(pod("big", corev1.RestartPolicyAlways, "busybox")), resources("cpu", "1500m")),
		withRequests(tolerant(pod("too-big", corev1.RestartPolicyAlways, "busybox")), resources("cpu", "1")),
		withRequests(tolerant(pod("hungry", corev1.RestartPolicyAlways, "busybox")), resources("memory", "2Gi")),
		func() *corev1.Pod {
			p := tolerant(pod("elsewhere", corev1.RestartPolicyAlways, "busybox"))
			p.Spec.NodeSelector = map[string]string{"zone": "b"}
			return p
		}(),
		pod("intolerant", corev1.RestartPolicyAlways, "busybox"),
		tolerant(pod("second", corev1.RestartPolicyAlways, "busybox")),
		tolerant(pod("third", corev1.RestartPolicyAlways, "busybox")),
		tolerant(pod("fourth", corev1.RestartPolicyAlways, "busybox")),
		tolerant(pod("fifth", corev1.RestartPolicyAlways, "busybox")),
	}
	for _, p := range inputs {
		c.create(p)
		c.clk.Step(time.Second)
	}
	c.sync()
	type outcome struct{ Phase, Reason, Message string }
	want := map[string]outcome{
		"big":        {"Running", "", ""},
		"too-big":    {"Failed", "OutOfcpu", "Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
		"hungry":     {"Failed", "OutOfmemory", "Pod was rejected: Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"},
		"elsewhere":  {"Failed", "NodeAffinity", "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		"intolerant": {"Failed", "TaintToleration", "Pod was rejected: Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		"second":     {"Running", "", ""},
		"third":      {"Running", "", ""},
		"fourth":     {"Running", "", ""},
		"fifth":      {"Failed", "OutOfpods", "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 4, capacity: 4"},
	}
	got := map[string]outcome{}
	for name := range want {
		p := c.get(name)
		got[name] = outcome{string(p.Status.Phase), p.Status.Reason, p.Status.Message}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	events, err := c.admin.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	warned := map[string]string{}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.Source.Component == "kubelet" {
			warned[e.InvolvedObject.Name] = e.Reason
		}
	}
	wantWarned := map[string]string{"too-big": "OutOfcpu", "hungry": "OutOfmemory", "elsewhere": "NodeAffinity", "intolerant": "TaintToleration", "fifth": "OutOfpods"}
	if diff := cmp.Diff(wantWarned, warned); diff != "" {
		t.Errorf("warning events (-want +got):\n%s", diff)
	}
	// A rejected pod stays rejected; an admitted one is not re-judged.
	c.sync()
	if p := c.get("too-big"); p.Status.Phase != corev1.PodFailed {
		t.Errorf("too-big phase = %s after another pass", p.Status.Phase)
	}
}

func TestStatusReporting(t *testing.T) {
	c := newCluster(t, roomy)
	created := c.create(pod("web", corev1.RestartPolicyAlways, "nginx", "busybox"))
	c.sync()
	p := c.get("web")
	at := metav1.NewTime(t0)
	ready := func(name, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: name, Image: image, Ready: true, Started: ptr.To(true),
			ContainerID: "",
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}},
		}
	}
	want := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: "PodReadyToStartContainers", Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
		},
		HostIP:            nodeIP,
		HostIPs:           []corev1.HostIP{{IP: nodeIP}},
		PodIP:             nodeIP,
		PodIPs:            []corev1.PodIP{{IP: nodeIP}},
		StartTime:         &at,
		ContainerStatuses: []corev1.ContainerStatus{ready("a", "nginx"), ready("b", "busybox")},
		QOSClass:          created.Status.QOSClass,
	}
	ignoreIDs := cmpopts.IgnoreFields(corev1.ContainerStatus{}, "ContainerID")
	if diff := cmp.Diff(want, p.Status, ignoreIDs); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ContainerID == "" {
			t.Errorf("container %s has no containerID", cs.Name)
		}
	}
	// Nothing changed: the next passes write nothing.
	writes := c.worker.Stats().StatusUpdates
	c.step(time.Minute)
	c.sync()
	if got := c.worker.Stats().StatusUpdates; got != writes {
		t.Errorf("status writes went from %d to %d with nothing changed", writes, got)
	}
}

func TestRestartCountsAndCrashLoop(t *testing.T) {
	c := newCluster(t, roomy)
	c.create(pod("crashy", corev1.RestartPolicyAlways, "exit:1@5s"))
	c.sync()
	type view struct {
		Phase    corev1.PodPhase
		Ready    corev1.ConditionStatus
		State    string
		Restarts int32
		LastExit int32
	}
	look := func() view {
		p := c.get("crashy")
		cs := p.Status.ContainerStatuses[0]
		v := view{Phase: p.Status.Phase, Restarts: cs.RestartCount}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				v.Ready = cond.Status
			}
		}
		switch {
		case cs.State.Running != nil:
			v.State = "running"
		case cs.State.Waiting != nil:
			v.State = cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			v.State = cs.State.Terminated.Reason
		}
		if cs.LastTerminationState.Terminated != nil {
			v.LastExit = cs.LastTerminationState.Terminated.ExitCode
		}
		return v
	}
	steps := []struct {
		after time.Duration
		want  view
	}{
		{0, view{corev1.PodRunning, corev1.ConditionTrue, "running", 0, 0}},
		{5 * time.Second, view{corev1.PodRunning, corev1.ConditionTrue, "running", 1, 1}},
		{5 * time.Second, view{corev1.PodRunning, corev1.ConditionFalse, runtime.ReasonCrashLoopBackOff, 1, 1}},
		{10 * time.Second, view{corev1.PodRunning, corev1.ConditionTrue, "running", 2, 1}},
	}
	for i, s := range steps {
		if s.after > 0 {
			c.step(s.after)
		}
		if diff := cmp.Diff(s.want, look()); diff != "" {
			t.Errorf("step %d (-want +got):\n%s", i, diff)
		}
	}
	p := c.get("crashy")
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Reason != "" {
			t.Errorf("Ready carries reason %q while ready", cond.Reason)
		}
	}
	// One BackOff event for the one wait.
	events, err := c.admin.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var backoffs []string
	for _, e := range events.Items {
		if e.Reason == pods.ReasonBackOff {
			backoffs = append(backoffs, e.Type+" "+e.Message)
		}
	}
	want := fmt.Sprintf("Warning Back-off restarting failed container a in pod crashy_default(%s)", p.UID)
	if len(backoffs) != 1 || backoffs[0] != want {
		t.Errorf("BackOff events %q, want one %q", backoffs, want)
	}
}

func TestFinishedPods(t *testing.T) {
	tests := []struct {
		policy    corev1.RestartPolicy
		image     string
		wantPhase corev1.PodPhase
		wantReady string // reason of the Ready condition
	}{
		{corev1.RestartPolicyNever, "exit:0@1s", corev1.PodSucceeded, pods.ReasonPodCompleted},
		{corev1.RestartPolicyNever, "exit:2@1s", corev1.PodFailed, pods.ReasonContainersNotReady},
		{corev1.RestartPolicyOnFailure, "exit:0@1s", corev1.PodSucceeded, pods.ReasonPodCompleted},
	}
	for _, tt := range tests {
		t.Run(string(tt.policy)+"/"+tt.image, func(t *testing.T) {
			c := newCluster(t, roomy)
			c.create(pod("job", tt.policy, tt.image))
			c.sync()
			c.step(time.Second)
			p := c.get("job")
			if p.Status.Phase != tt.wantPhase {
				t.Fatalf("phase = %s, want %s", p.Status.Phase, tt.wantPhase)
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && (cond.Status != corev1.ConditionFalse || cond.Reason != tt.wantReady) {
					t.Errorf("Ready = %s/%s, want False/%s", cond.Status, cond.Reason, tt.wantReady)
				}
			}
			// A finished pod no longer counts: a pod filling the node fits.
			c.create(pod("next", corev1.RestartPolicyAlways, "busybox"))
			c.step(time.Second)
			if got := c.get("next").Status.Phase; got != corev1.PodRunning {
				t.Errorf("next pod phase = %s", got)
			}
		})
	}
}

// deletesGracefulPodOnStatusUpdate probes whether the API server removes a
// pod that is in graceful deletion when its status is updated, which
// upstream does only for a deletion grace period of 0.
func (c *cluster) deletesGracefulPodOnStatusUpdate() bool {
	c.t.Helper()
	probe := c.create(pod("probe", corev1.RestartPolicyAlways, "busybox"))
	if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, probe.Name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
	probe = c.get(probe.Name)
	probe.Status.Message = "probe"
	if _, err := c.admin.CoreV1().Pods("default").UpdateStatus(c.ctx, probe, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	_, err := c.admin.CoreV1().Pods("default").Get(c.ctx, probe.Name, metav1.GetOptions{})
	if err == nil {
		_ = c.admin.CoreV1().Pods("default").Delete(c.ctx, probe.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}
	return apierrors.IsNotFound(err)
}

// lastPhase watches one pod and reports the phase it last had before it
// was deleted.
func lastPhase(t *testing.T, c *cluster, name string) func() corev1.PodPhase {
	t.Helper()
	w, err := c.admin.CoreV1().Pods("default").Watch(c.ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func() corev1.PodPhase {
		t.Helper()
		var phase corev1.PodPhase
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-w.ResultChan():
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				phase = p.Status.Phase
				if ev.Type == watch.Deleted {
					return phase
				}
			case <-timeout:
				t.Fatalf("pod %s was not deleted", name)
			}
		}
	}
}

func TestGracefulDeletion(t *testing.T) {
	tests := []struct {
		name      string
		image     string
		grace     int64
		stoppedAt time.Duration
		wantPhase corev1.PodPhase
	}{
		{"clean shutdown", "term:0@3s", 30, 3 * time.Second, corev1.PodSucceeded},
		{"killed at the end of the grace period", "term:ignore", 10, 10 * time.Second, corev1.PodFailed},
		{"dies of SIGTERM", "busybox", 30, 0, corev1.PodFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCluster(t, roomy)
			deletesOnUpdate := c.deletesGracefulPodOnStatusUpdate()
			p := pod("web", corev1.RestartPolicyAlways, tt.image)
			p.Spec.TerminationGracePeriodSeconds = ptr.To(tt.grace)
			created := c.create(p)
			c.sync()
			final := lastPhase(t, c, "web")
			if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, "web", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if tt.stoppedAt > 0 {
				c.sync()
				c.step(tt.stoppedAt - time.Second)
				deleting := c.get("web")
				if deleting.DeletionTimestamp == nil || deleting.Status.ContainerStatuses[0].State.Running == nil {
					t.Fatalf("one second before the container stops: deletion %v, state %+v", deleting.DeletionTimestamp, deleting.Status.ContainerStatuses[0].State)
				}
				c.step(time.Second)
			} else {
				c.sync()
			}
			if _, err := c.admin.CoreV1().Pods("default").Get(c.ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("pod still there after its containers stopped: %v", err)
			}
			if _, err := c.rt.PodStatus(created.UID); err == nil {
				t.Errorf("runtime still holds the deleted pod")
			}
			if deletesOnUpdate {
				t.Log("the API server removes a pod in graceful deletion on any status update (upstream only does so when its deletionGracePeriodSeconds is 0): the final phase is not observable")
				return
			}
			if got := final(); got != tt.wantPhase {
				t.Errorf("final phase = %s, want %s", got, tt.wantPhase)
			}
			if got := c.worker.Stats().Deletions; got != 1 {
				t.Errorf("deletions = %d, want 1", got)
			}
		})
	}
}

func TestForceDeletedPodIsStopped(t *testing.T) {
	c := newCluster(t, roomy)
	created := c.create(pod("web", corev1.RestartPolicyAlways, "busybox"))
	c.sync()
	if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	c.sync()
	if _, err := c.rt.PodStatus(created.UID); err == nil {
		t.Errorf("runtime still holds the force-deleted pod")
	}
}

func TestRunFollowsTheWatch(t *testing.T) {
	c := newCluster(t, roomy)
	ctx, cancel := context.WithCancel(c.ctx)
	done := make(chan error, 1)
	go func() { done <- c.worker.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	// Only once the first pass is over and the watch is open does the pod
	// appear: the watch alone must bring it to the worker (the resync
	// ticker is on a fake clock that does not move).
	seen := map[string]int{}
	timeout := time.After(10 * time.Second)
	for seen["LIST pods"] == 0 || seen["WATCH pods"] == 0 {
		select {
		case s := <-c.served:
			seen[s]++
		case <-timeout:
			t.Fatalf("the worker did not list and watch its pods: %v", seen)
		}
	}
	w, err := c.admin.CoreV1().Pods("default").Watch(c.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created := c.create(pod("web", corev1.RestartPolicyAlways, "busybox"))
	for running := false; !running; {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			running = ok && p.Status.Phase == corev1.PodRunning
		case <-timeout:
			t.Fatalf("the pod never ran: Run did not react to it")
		}
	}
	// A force deletion reaches the worker through the watch alone too:
	// it stops and removes the pod.
	if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, err := c.rt.PodStatus(created.UID); err == nil; _, err = c.rt.PodStatus(created.UID) {
		if time.Now().After(deadline) {
			t.Fatal("the runtime still holds the force-deleted pod: Run did not react to the deletion")
		}
		goruntime.Gosched()
	}
	// Every pass after the first list read the pods from the watch, not
	// from the server.
	for drained := false; !drained; {
		select {
		case s := <-c.served:
			seen[s]++
		default:
			drained = true
		}
	}
	if seen["LIST pods"] != 1 {
		t.Errorf("pod lists served = %d, want 1 (the list that fills the cache)", seen["LIST pods"])
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := pods.New(pods.Config{})
	want := "pods: Config.Client is required\npods: Config.NodeName is required\npods: Config.Runtime is required"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// nodeListerFunc is a pods.NodeLister.
type nodeListerFunc func(name string) (*corev1.Node, error)

func (f nodeListerFunc) Get(name string) (*corev1.Node, error) { return f(name) }

// A pass judges pods against the Node its lister holds, and reads the
// server only when the lister misses.
func TestSyncReadsNodeFromLister(t *testing.T) {
	for _, tc := range []struct {
		name string
		hit  bool
		// wantSecond is the second pod's phase: the cached Node has room
		// for one pod, the server's for ten.
		wantSecond corev1.PodPhase
	}{
		{name: "cached Node", hit: true, wantSecond: corev1.PodFailed},
		{name: "cache misses", hit: false, wantSecond: corev1.PodRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, roomy)
			stored, err := c.admin.CoreV1().Nodes().Get(c.ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cached := stored.DeepCopy()
			cached.Status.Allocatable = resources("cpu", "2", "memory", "4Gi", "pods", "1")
			c.newWorker(func(cfg *pods.Config) {
				cfg.Nodes = nodeListerFunc(func(name string) (*corev1.Node, error) {
					if !tc.hit || name != nodeName {
						return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
					}
					return cached, nil
				})
			})
			c.create(pod("first", corev1.RestartPolicyAlways, "busybox"))
			c.clk.Step(time.Second)
			c.create(pod("second", corev1.RestartPolicyAlways, "busybox"))
			c.sync()
			if got := c.get("first").Status.Phase; got != corev1.PodRunning {
				t.Errorf("first pod %s, want Running", got)
			}
			if got := c.get("second").Status.Phase; got != tc.wantSecond {
				t.Errorf("second pod %s, want %s", got, tc.wantSecond)
			}
		})
	}
}
