package shutdown_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/agent/pods"
	"knode/internal/agent/runtime/fake"
	"knode/internal/agent/shutdown"
	"knode/internal/agent/shutdown/membus"
	"knode/internal/apitest"
)

// TestWithTheWorker runs the manager over the real pod worker, the fake
// runtime and the real API server, on one fake clock: pods in three
// groups stop group by group, each ends Failed/Terminated with its
// DisruptionTarget on the server, a new pod is rejected with NodeShutdown,
// and the lock goes only after every final status.
func TestWithTheWorker(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(t0)
	const node, token = "node-1", "node-token"
	api := apitest.Start(t, apitest.Options{NodeRules: true, Clock: clk, Tokens: []string{token + `,system:node:` + node + `,uid1,"system:nodes"`}})
	ctx := context.Background()
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}
	if _, err := api.Admin.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Status:     corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	rt := fake.New(fake.Config{Clock: clk})
	var mgr *shutdown.Manager
	worker, err := pods.New(pods.Config{Client: api.Client(t, token), NodeName: node, Runtime: rt, Clock: clk, Logger: quiet,
		Admit: func(p *corev1.Pod) *pods.Rejection { return mgr.Admit(p) }})
	if err != nil {
		t.Fatal(err)
	}
	groups := []shutdown.Group{{Priority: 0, Period: 20 * time.Second}, {Priority: 1000, Period: 5 * time.Second}, {Priority: shutdown.SystemCriticalPriority, Period: 10 * time.Second}}
	bus := membus.New(time.Minute, "")
	mgr, err = shutdown.New(shutdown.Config{Groups: groups, Pods: worker, RootDir: t.TempDir(), Clock: clk, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Setup(ctx, bus); err != nil {
		t.Fatal(err)
	}

	mk := func(name string, priority int32, image string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: node, Priority: ptr.To(priority), TerminationGracePeriodSeconds: ptr.To[int64](60),
				Containers: []corev1.Container{{Name: "c", Image: image}}},
		}
		if _, err := api.Admin.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mk("web", 0, "busybox,term:0@2s")          // stops 2 s after SIGTERM
	mk("stubborn", 0, "busybox,term:ignore")   // killed when its 20 s are up
	mk("cache", 1000, "busybox,term:0@1s")     // group 1000
	mk("dns", 2000001000, "busybox,term:0@1s") // system-node-critical
	sync := func() {
		t.Helper()
		if err := worker.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sync()

	phase := func(name string) (corev1.PodPhase, string) {
		p, err := api.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Status.Phase, p.Status.Reason
	}
	// at moves the clock, then lets the worker and the manager act as
	// their loops would.
	at := func(d time.Duration) {
		clk.SetTime(t0.Add(d))
		sync()
		mgr.Step(ctx)
		sync()
	}

	mgr.Begin(ctx)
	sync()
	mk("late", 0, "busybox")
	at(0)
	if ph, reason := phase("late"); ph != corev1.PodFailed || reason != "NodeShutdown" {
		t.Errorf("late pod: %s/%s, want Failed/NodeShutdown", ph, reason)
	}
	at(2 * time.Second) // web stops
	if ph, _ := phase("web"); ph != corev1.PodFailed {
		t.Errorf("web at 2s: %s, want Failed", ph)
	}
	if _, ok := worker.Terminated(podUID(t, api, "cache")); ok {
		t.Error("group 1000 started while group 0 still had a pod")
	}
	at(19 * time.Second)
	if ph, _ := phase("stubborn"); ph != corev1.PodRunning {
		t.Errorf("stubborn at 19s: %s, want Running", ph)
	}
	at(20 * time.Second) // killed; its status posted; group 1000 starts
	at(20 * time.Second)
	if ph, _ := phase("stubborn"); ph != corev1.PodFailed {
		t.Errorf("stubborn at 20s: %s, want Failed", ph)
	}
	if _, ok := worker.Terminated(podUID(t, api, "cache")); !ok {
		t.Error("group 1000 did not start when group 0 ran out")
	}
	if _, ok := worker.Terminated(podUID(t, api, "dns")); ok {
		t.Error("the critical group started with group 1000")
	}
	at(21 * time.Second) // cache stops: the critical group starts
	at(21 * time.Second)
	if bus.HeldLocks() != 1 {
		t.Fatal("lock released before the critical group")
	}
	at(22 * time.Second) // dns stops: every status posted, lock released
	if bus.HeldLocks() != 0 {
		t.Error("lock still held after every final status was posted")
	}

	for _, name := range []string{"web", "stubborn", "cache", "dns"} {
		p, err := api.Admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cond *corev1.PodCondition
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.DisruptionTarget {
				cond = &p.Status.Conditions[i]
			}
		}
		got := []string{string(p.Status.Phase), p.Status.Reason, p.Status.Message}
		want := []string{"Failed", "Terminated", "Pod was terminated in response to imminent node shutdown."}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s status (-want +got):\n%s", name, diff)
		}
		if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != "TerminationByKubelet" {
			t.Errorf("%s DisruptionTarget = %+v", name, cond)
		}
	}
}

func podUID(t *testing.T, api *apitest.Server, name string) types.UID {
	t.Helper()
	p, err := api.Admin.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.UID
}
