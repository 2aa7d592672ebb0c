package disruption_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/disruption"
)

var quiet = slog.New(slog.DiscardHandler)

// world is apitest's World with this package's helpers as methods.
type world struct{ *apitest.World }

func newWorld(t *testing.T) *world {
	return &world{apitest.NewWorld(t, apitest.Options{})}
}

func (w *world) controller() *disruption.Controller {
	w.T.Helper()
	c, err := disruption.New(disruption.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	return c
}

// addReplicaSet creates a ReplicaSet of n replicas and n Ready pods it
// controls, named <name>-0 ... <name>-(n-1).
func (w *world) addReplicaSet(name string, n int32) {
	w.T.Helper()
	labels := map[string]string{"app": name}
	rs, err := w.Client.AppsV1().ReplicaSets("default").Create(w.Ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	w.Must("creating replicaset", err)
	for i := range n {
		w.addPod(fmt.Sprintf("%s-%d", name, i), labels, metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet")))
	}
}

func (w *world) addPod(name string, labels map[string]string, owner *metav1.OwnerReference) {
	w.T.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	_, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, p, metav1.CreateOptions{})
	w.Must("creating pod", err)
	w.SetReady(name, true)
}

func (w *world) addBudget(name, app string, min, max *intstr.IntOrString) {
	w.T.Helper()
	_, err := w.Client.PolicyV1().PodDisruptionBudgets("default").Create(w.Ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			MinAvailable:   min,
			MaxUnavailable: max,
		},
	}, metav1.CreateOptions{})
	w.Must("creating budget", err)
}

func (w *world) budget(name string) *policyv1.PodDisruptionBudget {
	w.T.Helper()
	pdb, err := w.Client.PolicyV1().PodDisruptionBudgets("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting budget", err)
	return pdb
}

type numbers struct {
	Expected, Desired, Healthy, Allowed int32
	Observed                            int64
	Reason                              string
}

func (w *world) numbers(name string) numbers {
	w.T.Helper()
	s := w.budget(name).Status
	n := numbers{s.ExpectedPods, s.DesiredHealthy, s.CurrentHealthy, s.DisruptionsAllowed, s.ObservedGeneration, ""}
	for _, c := range s.Conditions {
		if c.Type == policyv1.DisruptionAllowedCondition {
			n.Reason = c.Reason
		}
	}
	return n
}

func TestBudgetStatus(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addReplicaSet("web", 3)
	w.addBudget("web-max", "web", nil, ptr.To(intstr.FromInt32(1)))
	w.addBudget("web-min", "web", ptr.To(intstr.FromString("50%")), nil)
	w.Must("sync", c.Sync(w.Ctx))

	check := func(name string, want numbers) {
		t.Helper()
		if diff := cmp.Diff(want, w.numbers(name)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	check("web-max", numbers{3, 2, 3, 1, 1, policyv1.SufficientPodsReason})
	check("web-min", numbers{3, 2, 3, 1, 1, policyv1.SufficientPodsReason})

	// One pod goes unready: no disruption is allowed any more.
	w.SetReady("web-1", false)
	w.Must("sync", c.Sync(w.Ctx))
	check("web-max", numbers{3, 2, 2, 0, 1, policyv1.InsufficientPodsReason})

	// A spec change is observed.
	pdb := w.budget("web-min")
	pdb.Spec.MinAvailable = ptr.To(intstr.FromInt32(1))
	_, err := w.Client.PolicyV1().PodDisruptionBudgets("default").Update(w.Ctx, pdb, metav1.UpdateOptions{})
	w.Must("updating budget", err)
	if got := w.numbers("web-min").Observed; got != 1 {
		t.Fatalf("observedGeneration moved to %d before the controller saw the change", got)
	}
	w.Must("sync", c.Sync(w.Ctx))
	check("web-min", numbers{3, 1, 2, 1, 2, policyv1.SufficientPodsReason})
}

// An eviction spends the budget through the status; the record keeps the
// pod out of currentHealthy until it is deleted or DeletionTimeout passes.
func TestBudgetSpentByEviction(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addReplicaSet("web", 3)
	w.addBudget("web", "web", nil, ptr.To(intstr.FromInt32(1)))
	w.Must("sync", c.Sync(w.Ctx))

	// What the eviction subresource does for web-0.
	pod, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "web-0", metav1.GetOptions{})
	w.Must("getting pod", err)
	pdbs, err := w.Client.PolicyV1().PodDisruptionBudgets("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing budgets", err)
	d, err := disruption.Decide(pod, pdbs.Items, w.Clock.Now())
	w.Must("deciding", err)
	if d.Budget == nil {
		t.Fatal("eviction did not spend the budget")
	}
	_, err = w.Client.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(w.Ctx, d.Budget, metav1.UpdateOptions{})
	w.Must("writing the spent budget", err)

	// A second eviction is refused until the controller recounts.
	pod1, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "web-1", metav1.GetOptions{})
	w.Must("getting pod", err)
	pdbs, err = w.Client.PolicyV1().PodDisruptionBudgets("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing budgets", err)
	if _, err := disruption.Decide(pod1, pdbs.Items, w.Clock.Now()); err == nil {
		t.Fatal("second eviction allowed")
	}

	// The pod was not deleted (say the delete failed): it stays out of
	// currentHealthy for DeletionTimeout, then counts again.
	w.Clock.Step(time.Minute)
	w.Must("sync", c.Sync(w.Ctx))
	st := w.budget("web").Status
	if st.CurrentHealthy != 2 || st.DisruptionsAllowed != 0 || len(st.DisruptedPods) != 1 {
		t.Errorf("within the timeout: %+v", st)
	}
	w.Clock.Step(2 * time.Minute)
	w.Must("sync", c.Sync(w.Ctx))
	st = w.budget("web").Status
	if st.CurrentHealthy != 3 || st.DisruptionsAllowed != 1 || len(st.DisruptedPods) != 0 {
		t.Errorf("after the timeout: %+v", st)
	}
}

// A maxUnavailable budget over pods whose controller has no scale (a
// DaemonSet) cannot be computed: nothing is allowed, condition SyncFailed.
func TestBudgetFailSafe(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	labels := map[string]string{"app": "agent"}
	ds, err := w.Client.AppsV1().DaemonSets("default").Create(w.Ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	w.Must("creating daemonset", err)
	w.addPod("agent-0", labels, metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet")))
	w.addBudget("agent", "agent", nil, ptr.To(intstr.FromInt32(1)))
	w.Must("sync", c.Sync(w.Ctx))

	pdb := w.budget("agent")
	if pdb.Status.DisruptionsAllowed != 0 || len(pdb.Status.Conditions) != 1 || pdb.Status.Conditions[0].Reason != policyv1.SyncFailedReason {
		t.Errorf("status = %+v, want no disruptions and SyncFailed", pdb.Status)
	}
	events, err := w.Client.CoreV1().Events("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	found := false
	for _, e := range events.Items {
		found = found || (e.Reason == "CalculateExpectedPodCountFailed" && e.InvolvedObject.Name == "agent")
	}
	if !found {
		t.Error("no CalculateExpectedPodCountFailed event")
	}
}

// Run passes again, on its clock, when a disruptedPods record expires,
// without waiting for the resync.
func TestRunRechecksWhenARecordExpires(t *testing.T) {
	w := newWorld(t)
	// The controller's own clock, so that its waiters are only its own.
	clk := clocktesting.NewFakeClock(w.Clock.Now())
	c, err := disruption.New(disruption.Config{Client: w.Client, Clock: clk, ResyncPeriod: time.Hour, Logger: quiet})
	w.Must("building the controller", err)
	w.addReplicaSet("web", 3)
	w.addBudget("web", "web", nil, ptr.To(intstr.FromInt32(1)))
	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(w.Ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		})
		w.Must("waiting for "+what, err)
	}
	waitFor("the first status", func() bool { return w.budget("web").Status.DisruptionsAllowed == 1 })

	pod, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "web-0", metav1.GetOptions{})
	w.Must("getting pod", err)
	d, err := disruption.Decide(pod, []policyv1.PodDisruptionBudget{*w.budget("web")}, clk.Now())
	w.Must("deciding", err)
	_, err = w.Client.PolicyV1().PodDisruptionBudgets("default").UpdateStatus(w.Ctx, d.Budget, metav1.UpdateOptions{})
	w.Must("spending the budget", err)

	waitFor("the recount and its timer", func() bool {
		st := w.budget("web").Status
		return st.DisruptionsAllowed == 0 && st.CurrentHealthy == 2 && clk.Waiters() == 2
	})
	clk.Step(disruption.DeletionTimeout + 2*time.Second)
	waitFor("the record to expire", func() bool {
		st := w.budget("web").Status
		return st.DisruptionsAllowed == 1 && st.CurrentHealthy == 3 && len(st.DisruptedPods) == 0
	})
}
