package apitest

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/registry"
	dsreg "knode/internal/registry/daemonset"
	pdbreg "knode/internal/registry/poddisruptionbudget"
	pcreg "knode/internal/registry/priorityclass"
	rsreg "knode/internal/registry/replicaset"
)

// Epoch is the time a World's fake clock starts at.
var Epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// WorkloadKinds are the kinds controller tests need that knode server
// does not serve yet: ReplicaSets, DaemonSets, PodDisruptionBudgets and
// PriorityClasses.
func WorkloadKinds() []registry.Kind {
	return []registry.Kind{rsreg.Kind(), dsreg.Kind(), pdbreg.Kind(), pcreg.Kind()}
}

// World is a Server on a fake clock that also serves WorkloadKinds, with
// the helpers the workload controllers' tests share. A test package
// usually embeds it in its own world type to add its helpers.
type World struct {
	*Server
	T      testing.TB
	Ctx    context.Context
	Client kubernetes.Interface // acts as AdminToken
	// Clock is the API server's clock, starting at Epoch; controllers
	// under test should take it too.
	Clock *clocktesting.FakeClock
}

// NewWorld starts a Server as Start does, with opts.Kinds extended by
// WorkloadKinds and a fresh fake clock. opts.Clock must be nil.
func NewWorld(t testing.TB, opts Options) *World {
	t.Helper()
	if opts.Clock != nil {
		t.Fatal("apitest.NewWorld: Options.Clock must be nil; the world makes its own fake clock")
	}
	clk := clocktesting.NewFakeClock(Epoch)
	opts.Clock = clk
	opts.Kinds = append(append([]registry.Kind(nil), opts.Kinds...), WorkloadKinds()...)
	s := Start(t, opts)
	return &World{Server: s, T: t, Ctx: context.Background(), Client: s.Admin, Clock: clk}
}

// Must ends the test, naming what failed, when err is not nil.
func (w *World) Must(what string, err error) {
	w.T.Helper()
	if err != nil {
		w.T.Fatalf("%s: %v", what, err)
	}
}

// Pods lists the pods of namespace default that are not being deleted.
func (w *World) Pods() []corev1.Pod {
	w.T.Helper()
	l, err := w.Client.CoreV1().Pods("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing pods", err)
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// SetReady marks pod default/name Running, with its Ready condition set
// to ready as of the clock's now, as its agent would.
func (w *World) SetReady(name string, ready bool) {
	w.T.Helper()
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting pod", err)
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(w.Clock.Now())}}
	_, err = w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("updating pod status", err)
}
