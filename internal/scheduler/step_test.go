package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/scheduler"
)

// stepEnv drives a scheduler the way the simulator does: it feeds the
// handlers itself and calls Step. Bindings go through the real
// pods/binding, and their order is kept.
type stepEnv struct {
	*env
	binds []string // "pod -> node", in the order Bind was called
	fail  func(b *corev1.Binding) error
}

func newStepEnv(t *testing.T) *stepEnv {
	t.Helper()
	se := &stepEnv{}
	var real scheduler.Binder
	se.env = newEnv(t, binderFunc(func(ctx context.Context, b *corev1.Binding) error {
		se.binds = append(se.binds, b.Name+" -> "+b.Target.Name)
		if se.fail != nil {
			if err := se.fail(b); err != nil {
				return err
			}
		}
		return real.Bind(ctx, b)
	}))
	real = scheduler.ClientBinder(se.client)
	return se
}

func (e *stepEnv) node(name string) *corev1.Node {
	e.t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	e.must("get node "+name, err)
	return n
}

// addNodes creates the nodes, each with cpu "2", and feeds them to the
// node handler.
func (e *stepEnv) addNodes(names ...string) {
	e.t.Helper()
	for _, name := range names {
		e.createNode(name, "2")
		e.s.NodeHandler().OnAdd(e.node(name), false)
	}
}

// changeNode updates the node through the API (its status subresource
// when status is set, since a plain update keeps the old status), checks
// the change landed, and feeds it to the node handler.
func (e *stepEnv) changeNode(name string, status bool, change func(*corev1.Node)) {
	e.t.Helper()
	old := e.node(name)
	want := old.DeepCopy()
	change(want)
	update := e.client.CoreV1().Nodes().Update
	if status {
		update = e.client.CoreV1().Nodes().UpdateStatus
	}
	_, err := update(e.ctx, want, metav1.UpdateOptions{})
	e.must("update node "+name, err)
	cur := e.node(name)
	if diff := cmp.Diff(want.Labels, cur.Labels); diff != "" {
		e.t.Fatalf("node %s labels (-want +got):\n%s", name, diff)
	}
	if diff := cmp.Diff(want.Status.Allocatable, cur.Status.Allocatable); diff != "" {
		e.t.Fatalf("node %s allocatable (-want +got):\n%s", name, diff)
	}
	e.s.NodeHandler().OnUpdate(old, cur)
}

// addPods creates the pods in default, each requesting cpu, and feeds
// them to the pod handler in the order given.
func (e *stepEnv) addPods(cpu string, names ...string) {
	e.t.Helper()
	for _, name := range names {
		e.createPod(name, cpu)
		e.s.PodHandler().OnAdd(e.pod(name), false)
	}
}

// refreshPods feeds the pods' current versions to the pod handler, as a
// driver passes on the writes Step made.
func (e *stepEnv) refreshPods(old map[string]*corev1.Pod) {
	e.t.Helper()
	for name, p := range old {
		e.s.PodHandler().OnUpdate(p, e.pod(name))
	}
}

func (e *stepEnv) snapshotPods(names ...string) map[string]*corev1.Pod {
	e.t.Helper()
	out := map[string]*corev1.Pod{}
	for _, name := range names {
		out[name] = e.pod(name)
	}
	return out
}

// nodeNames returns each pod's spec.nodeName as the API server has it.
func (e *stepEnv) nodeNames(names ...string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, name := range names {
		out[name] = e.pod(name).Spec.NodeName
	}
	return out
}

// step calls Step, which must not fail, and returns its next and ok.
func (e *stepEnv) step() (time.Time, bool) {
	e.t.Helper()
	next, ok, err := e.s.Step(e.ctx)
	e.must("Step", err)
	return next, ok
}

// takeBinds returns the bindings since the last call.
func (e *stepEnv) takeBinds() []string {
	b := e.binds
	e.binds = nil
	return b
}

// Step places the pods fed to PodHandler on the nodes fed to NodeHandler,
// one at a time in queue order (priority, then age, then name), whatever
// order they were fed in; a pod that fits nowhere is marked and waits
// out its backoff once a node change sends it back; past the backoff,
// with room added, Step binds it.
func TestStep(t *testing.T) {
	e := newStepEnv(t)
	e.addNodes("n1", "n2")
	// All created at t0: priority, then name, decides.
	e.addPods("1", "d", "c")
	e.createPod("b", "1", withPriority(10))
	e.s.PodHandler().OnAdd(e.pod("b"), false)
	e.addPods("4", "big")
	e.addPods("1", "a")
	all := []string{"a", "b", "c", "d", "big"}
	before := e.snapshotPods(all...)

	next, ok := e.step()
	if ok {
		t.Errorf("first Step: next %v ok, want nothing backing off (big is unschedulable, not backing off)", next)
	}
	// Equal scores go to the node with fewer pods, then the first by name.
	if diff := cmp.Diff([]string{"b -> n1", "a -> n2", "c -> n1", "d -> n2"}, e.takeBinds()); diff != "" {
		t.Errorf("binding order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a": "n2", "b": "n1", "c": "n1", "d": "n2", "big": ""}, e.nodeNames(all...)); diff != "" {
		t.Errorf("spec.nodeName in the API (-want +got):\n%s", diff)
	}
	c := e.scheduled("big")
	if c == nil || c.Status != corev1.ConditionFalse || c.Reason != scheduler.ConditionUnschedulable ||
		!strings.HasPrefix(c.Message, "0/2 nodes are available: 2 Insufficient cpu.") || !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("big PodScheduled %+v, want False Unschedulable at t0 for 2 Insufficient cpu", c)
	}
	e.refreshPods(before)
	if got, want := e.s.Stats(), (scheduler.QueueStats{Unschedulable: 1}); got != want {
		t.Errorf("stats after the first Step %+v, want %+v", got, want)
	}

	// A node change that may help sends big back before its 1 s backoff
	// ends: it backs off, and Step says until when.
	before = e.snapshotPods("big")
	e.changeNode("n1", false, func(n *corev1.Node) { n.Labels = map[string]string{"zone": "a"} })
	next, ok = e.step()
	if !ok || !next.Equal(t0.Add(time.Second)) {
		t.Errorf("Step while backing off = %v %v, want t0+1s true", next, ok)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Errorf("bindings while backing off: %v", b)
	}
	if got, want := e.s.Stats(), (scheduler.QueueStats{BackingOff: 1}); got != want {
		t.Errorf("stats while backing off %+v, want %+v", got, want)
	}
	e.refreshPods(before)

	// Room appears, but the backoff is not over yet.
	e.changeNode("n2", true, func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("8") })
	e.clock.SetTime(next.Add(-time.Nanosecond))
	if got, ok := e.step(); !ok || !got.Equal(next) {
		t.Errorf("Step just before the backoff ends = %v %v, want %v true", got, ok, next)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Errorf("bindings before the backoff ended: %v", b)
	}

	e.clock.SetTime(next)
	if got, ok := e.step(); ok {
		t.Errorf("Step after binding big = %v ok, want nothing backing off", got)
	}
	if diff := cmp.Diff([]string{"big -> n2"}, e.takeBinds()); diff != "" {
		t.Errorf("bindings once the backoff ended (-want +got):\n%s", diff)
	}
	if got := e.pod("big").Spec.NodeName; got != "n2" {
		t.Errorf("big on %q in the API, want n2", got)
	}
	e.refreshPods(before)
	if got := e.s.Stats(); got != (scheduler.QueueStats{}) {
		t.Errorf("stats at the end %+v, want nothing pending", got)
	}
	// Nothing left: Step does nothing.
	if got, ok := e.step(); ok {
		t.Errorf("idle Step = %v ok, want nothing backing off", got)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Errorf("idle Step bound %v", b)
	}
}

// A failed binding is Step's error; the pod backs off and Step says
// until when, then binds it.
func TestStepBindingFailure(t *testing.T) {
	e := newStepEnv(t)
	failures := 1
	e.fail = func(*corev1.Binding) error {
		if failures > 0 {
			failures--
			return apierrors.NewInternalError(errors.New("etcd is down"))
		}
		return nil
	}
	e.addNodes("n1")
	e.addPods("1", "p")

	next, ok, err := e.s.Step(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "etcd is down") {
		t.Errorf("Step error %v, want the binding's", err)
	}
	if !ok || !next.Equal(t0.Add(time.Second)) {
		t.Errorf("Step after the failure = %v %v, want t0+1s true", next, ok)
	}
	if c := e.scheduled("p"); c == nil || c.Reason != scheduler.ConditionSchedulerError {
		t.Errorf("p PodScheduled %+v, want SchedulerError", c)
	}
	if got := e.pod("p").Spec.NodeName; got != "" {
		t.Errorf("p on %q after the failed binding", got)
	}

	e.clock.SetTime(next)
	if got, ok := e.step(); ok {
		t.Errorf("Step after the retry = %v ok, want nothing backing off", got)
	}
	if diff := cmp.Diff([]string{"p -> n1", "p -> n1"}, e.takeBinds()); diff != "" {
		t.Errorf("binding attempts (-want +got):\n%s", diff)
	}
	if got := e.pod("p").Spec.NodeName; got != "n1" {
		t.Errorf("p on %q, want n1", got)
	}
}

// Step stops deciding once its context ends.
func TestStepCancelled(t *testing.T) {
	e := newStepEnv(t)
	e.addNodes("n1")
	e.addPods("", "p")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if _, _, err := e.s.Step(ctx); err != nil {
		t.Errorf("Step with an ended context: %v", err)
	}
	if b := e.takeBinds(); len(b) != 0 {
		t.Errorf("Step with an ended context bound %v", b)
	}
	if got, want := e.s.Stats(), (scheduler.QueueStats{Active: 1}); got != want {
		t.Errorf("stats %+v, want %+v (the pod still waits)", got, want)
	}
}
