package tainteviction_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/controller/tainteviction"
)

// store is what a driver of Observe follows: its own copies of nodes and
// pods, which Lookup reads. The API server holds the same objects, for the
// controller's writes.
type store struct {
	e       *env
	nodes   map[string]*corev1.Node
	pods    map[types.NamespacedName]*corev1.Pod
	lookups int
}

func newStore(e *env) *store {
	return &store{e: e, nodes: map[string]*corev1.Node{}, pods: map[types.NamespacedName]*corev1.Pod{}}
}

func (s *store) lookup() tainteviction.Lookup {
	return tainteviction.Lookup{
		Node: func(name string) *corev1.Node {
			s.lookups++
			return s.nodes[name]
		},
		Pod: func(key types.NamespacedName) *corev1.Pod {
			s.lookups++
			return s.pods[key]
		},
	}
}

// loadNode copies the node from the API server.
func (s *store) loadNode(name string) {
	s.e.t.Helper()
	n, err := s.e.client.CoreV1().Nodes().Get(s.e.ctx, name, metav1.GetOptions{})
	s.e.must("get node "+name, err)
	s.nodes[name] = n
}

// loadPod copies the pod in default from the API server and returns its
// key.
func (s *store) loadPod(name string) types.NamespacedName {
	s.e.t.Helper()
	p, err := s.e.client.CoreV1().Pods("default").Get(s.e.ctx, name, metav1.GetOptions{})
	s.e.must("get pod "+name, err)
	key := types.NamespacedName{Namespace: "default", Name: name}
	s.pods[key] = p
	return key
}

func (s *store) observe(nodes []string, pods ...types.NamespacedName) {
	s.e.t.Helper()
	s.e.must("Observe", s.e.c.Observe(s.e.ctx, s.lookup(), nodes, pods))
}

// pendingWork is one pending deletion, its times as offsets from t0.
type pendingWork struct {
	Pod               string
	CreatedAt, FireAt time.Duration
}

// pending lists the controller's pending work, earliest first.
func pending(c *tainteviction.Controller) []pendingWork {
	var out []pendingWork
	for _, w := range c.Pending() {
		out = append(out, pendingWork{Pod: w.Pod.String(), CreatedAt: w.CreatedAt.Sub(t0), FireAt: w.FireAt.Sub(t0)})
	}
	return out
}

func (e *env) expectPending(when string, want ...pendingWork) {
	e.t.Helper()
	if diff := cmp.Diff(want, pending(e.c)); diff != "" {
		e.t.Errorf("%s: pending work (-want +got):\n%s", when, diff)
	}
	at, ok := e.c.NextDue()
	switch {
	case len(want) == 0 && ok:
		e.t.Errorf("%s: NextDue = %v, want nothing due", when, at)
	case len(want) > 0 && (!ok || !at.Equal(t0.Add(want[0].FireAt))):
		e.t.Errorf("%s: NextDue = %v %v, want t0+%v", when, at, ok, want[0].FireAt)
	}
}

// A node that gains an unreachable taint, seen through Observe, starts
// the countdown of the pods known on it; an Observe with no names fires
// the deletion when due, reading nothing.
func TestObserveDeletesWhenDue(t *testing.T) {
	e := newEnv(t)
	s := newStore(e)
	e.createNode("n1")
	e.createPod("p", "n1", unreachableToleration(ptr.To[int64](300)))
	s.loadNode("n1")
	p := s.loadPod("p")
	s.observe([]string{"n1"}, p)
	e.expectPending("untainted")

	e.clock.SetTime(t0.Add(10 * time.Second))
	e.setTaints("n1", unreachableTaint(t0.Add(10*time.Second)))
	s.loadNode("n1")
	s.observe([]string{"n1"})
	e.expectPending("tainted at 10 s", pendingWork{Pod: "default/p", CreatedAt: 10 * time.Second, FireAt: 310 * time.Second})
	e.expectDeleted("tainted at 10 s", []string{"p"})

	s.lookups = 0
	e.clock.SetTime(t0.Add(310*time.Second - time.Nanosecond))
	s.observe(nil)
	e.expectDeleted("just before 310 s", []string{"p"})
	e.expectPending("just before 310 s", pendingWork{Pod: "default/p", CreatedAt: 10 * time.Second, FireAt: 310 * time.Second})

	e.clock.SetTime(t0.Add(310 * time.Second))
	s.observe(nil)
	e.expectDeleted("at 310 s", []string{"p"}, "p")
	e.expectPending("at 310 s")
	if s.lookups != 0 {
		t.Errorf("Observe with no names made %d lookups, want 0", s.lookups)
	}
	got, err := e.client.CoreV1().Pods("default").Get(e.ctx, "p", metav1.GetOptions{})
	e.must("get p after its deletion (a bound pod is deleted gracefully)", err)
	if got.DeletionTimestamp == nil {
		t.Errorf("p has no deletionTimestamp")
	}
	var cond *corev1.PodCondition
	for i := range got.Status.Conditions {
		if got.Status.Conditions[i].Type == corev1.DisruptionTarget {
			cond = &got.Status.Conditions[i]
		}
	}
	want := &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", Message: tainteviction.ConditionMessage, LastTransitionTime: metav1.NewTime(t0.Add(310 * time.Second))}
	if diff := cmp.Diff(want, cond); diff != "" {
		t.Errorf("DisruptionTarget (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Marking for deletion Pod default/p"}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := e.deletions(); got != 1 {
		t.Errorf("deletions metric = %v, want 1", got)
	}

	// Nothing more is due: the deletion is not repeated.
	e.clock.SetTime(t0.Add(time.Hour))
	s.observe(nil)
	if got := e.deletions(); got != 1 {
		t.Errorf("deletions metric an hour later = %v, want 1", got)
	}
}

// A node whose Lookup comes back without the taint cancels the pending
// deletions of its pods.
func TestObserveTaintRemovalCancels(t *testing.T) {
	e := newEnv(t)
	s := newStore(e)
	e.createNode("n1", unreachableTaint(t0))
	e.createPod("p", "n1", unreachableToleration(ptr.To[int64](300)))
	s.loadNode("n1")
	p := s.loadPod("p")
	// New node and pod together: the pod is looked at after its node.
	s.observe([]string{"n1"}, p)
	e.expectPending("tainted", pendingWork{Pod: "default/p", FireAt: 300 * time.Second})

	e.clock.SetTime(t0.Add(100 * time.Second))
	untainted := s.nodes["n1"].DeepCopy()
	untainted.Spec.Taints = nil
	s.nodes["n1"] = untainted
	s.observe([]string{"n1"})
	e.expectPending("untainted at 100 s")
	if diff := cmp.Diff([]string{"Cancelling deletion of Pod default/p"}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	e.clock.SetTime(t0.Add(time.Hour))
	s.observe(nil)
	e.expectDeleted("an hour later", []string{"p"})
	if got := e.deletions(); got != 0 {
		t.Errorf("deletions metric = %v, want 0", got)
	}
}

// A pod whose Lookup returns nil is gone: its pending deletion is
// cancelled and the controller forgets it, so a later taint change on its
// node does not reach it, and seeing it again is seeing a new pod.
func TestObserveForgetsMissingPod(t *testing.T) {
	e := newEnv(t)
	s := newStore(e)
	e.createNode("n1", unreachableTaint(t0))
	e.createPod("p", "n1", unreachableToleration(ptr.To[int64](300)))
	s.loadNode("n1")
	p := s.loadPod("p")
	s.observe([]string{"n1"}, p)
	e.expectPending("tainted", pendingWork{Pod: "default/p", FireAt: 300 * time.Second})

	kept := s.pods[p]
	delete(s.pods, p)
	s.observe(nil, p)
	e.expectPending("pod gone")
	if diff := cmp.Diff([]string{"Cancelling deletion of Pod default/p"}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The pod is back in the store but not named; its node's taints
	// change. A remembered pod would be looked at again; a forgotten one
	// is not.
	e.clock.SetTime(t0.Add(50 * time.Second))
	s.pods[p] = kept
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0.Add(50 * time.Second)}}
	node := s.nodes["n1"].DeepCopy()
	node.Spec.Taints = append(node.Spec.Taints, notReady)
	s.nodes["n1"] = node
	s.observe([]string{"n1"})
	e.expectPending("node changed, pod forgotten")

	// Named again, it is new: a fresh countdown from now.
	s.observe(nil, p)
	e.expectPending("pod seen again at 50 s", pendingWork{Pod: "default/p", CreatedAt: 50 * time.Second, FireAt: 350 * time.Second})
	e.expectDeleted("pod seen again at 50 s", []string{"p"})
}
