package daemonset_test

import (
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/apitest"
	"knode/internal/controller/daemonset"
)

var quiet = slog.New(slog.DiscardHandler)

// world is apitest's World with this package's helpers as methods.
type world struct{ *apitest.World }

func newWorld(t *testing.T) *world {
	return &world{apitest.NewWorld(t, apitest.Options{})}
}

func newDS(name string) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "busybox", Command: []string{"sleep", "3600"}}}},
			},
		},
	}
}

func (w *world) controller() *daemonset.Controller {
	w.T.Helper()
	c, err := daemonset.New(daemonset.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	return c
}

func (w *world) addNode(name string, mutate func(*corev1.Node)) {
	w.T.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if mutate != nil {
		mutate(n)
	}
	_, err := w.Client.CoreV1().Nodes().Create(w.Ctx, n, metav1.CreateOptions{})
	w.Must("creating node", err)
}

// podsByNode maps each node to the daemon pods targeting it.
func (w *world) podsByNode() map[string][]string {
	out := map[string][]string{}
	for _, p := range w.Pods() {
		n := daemonset.TargetNode(&p)
		out[n] = append(out[n], p.Name)
	}
	for _, ps := range out {
		sort.Strings(ps)
	}
	return out
}

func (w *world) status(name string) appsv1.DaemonSetStatus {
	w.T.Helper()
	ds, err := w.Client.AppsV1().DaemonSets("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting daemonset", err)
	return ds.Status
}

// One pod per eligible node: a plain node and a cordoned one (the
// unschedulable taint is tolerated), not a node with another NoSchedule
// taint. Pods are pinned by node affinity and left for the scheduler.
func TestDaemonSetRunsOnEligibleNodes(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("plain", nil)
	w.addNode("cordoned", func(n *corev1.Node) {
		n.Spec.Unschedulable = true
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	})
	w.addNode("dedicated", func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "example.com/dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	created, err := w.Client.AppsV1().DaemonSets("default").Create(w.Ctx, newDS("agent"), metav1.CreateOptions{})
	w.Must("creating daemonset", err)
	if created.Annotations[appsv1.DeprecatedTemplateGeneration] != "1" {
		t.Errorf("template generation annotation = %q, want 1", created.Annotations[appsv1.DeprecatedTemplateGeneration])
	}
	w.Must("sync", c.Sync(w.Ctx))

	byNode := w.podsByNode()
	if len(byNode) != 2 || len(byNode["plain"]) != 1 || len(byNode["cordoned"]) != 1 {
		t.Fatalf("pods by node = %v, want one on plain and one on cordoned", byNode)
	}
	for _, p := range w.Pods() {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %q by the controller; the scheduler binds", p.Name, p.Spec.NodeName)
		}
		if !metav1.IsControlledBy(&p, created) {
			t.Errorf("pod %s is not controlled by the DaemonSet", p.Name)
		}
		found := false
		for _, tol := range p.Spec.Tolerations {
			found = found || (tol.Key == corev1.TaintNodeUnschedulable && tol.Effect == corev1.TaintEffectNoSchedule && tol.TolerationSeconds == nil)
		}
		if !found {
			t.Errorf("pod %s lacks the unschedulable toleration: %+v", p.Name, p.Spec.Tolerations)
		}
	}
	want := appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberUnavailable: 2, ObservedGeneration: 1}
	if diff := cmp.Diff(want, w.status("agent")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	// The scheduler binds the plain node's pod and its agent reports Ready.
	plainPod := byNode["plain"][0]
	w.Must("binding", w.Client.CoreV1().Pods("default").Bind(w.Ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: plainPod, Namespace: "default"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "plain"},
	}, metav1.CreateOptions{}))
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, plainPod, metav1.GetOptions{})
	w.Must("getting pod", err)
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(w.Clock.Now())}}
	_, err = w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("reporting ready", err)

	// The dedicated node's taint goes; an untolerated NoExecute taint
	// comes on the cordoned node.
	ded, err := w.Client.CoreV1().Nodes().Get(w.Ctx, "dedicated", metav1.GetOptions{})
	w.Must("getting node", err)
	ded.Spec.Taints = nil
	_, err = w.Client.CoreV1().Nodes().Update(w.Ctx, ded, metav1.UpdateOptions{})
	w.Must("untainting", err)
	cord, err := w.Client.CoreV1().Nodes().Get(w.Ctx, "cordoned", metav1.GetOptions{})
	w.Must("getting node", err)
	cord.Spec.Taints = append(cord.Spec.Taints, corev1.Taint{Key: "example.com/evict", Effect: corev1.TaintEffectNoExecute})
	_, err = w.Client.CoreV1().Nodes().Update(w.Ctx, cord, metav1.UpdateOptions{})
	w.Must("tainting", err)

	w.Must("sync", c.Sync(w.Ctx))
	byNode = w.podsByNode()
	if len(byNode) != 2 || len(byNode["plain"]) != 1 || len(byNode["dedicated"]) != 1 || byNode["plain"][0] != plainPod {
		t.Fatalf("pods by node = %v, want the same pod on plain and a new one on dedicated", byNode)
	}
	want = appsv1.DaemonSetStatus{
		DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, NumberReady: 1, NumberAvailable: 1,
		UpdatedNumberScheduled: 2, NumberUnavailable: 1, ObservedGeneration: 1,
	}
	if diff := cmp.Diff(want, w.status("agent")); diff != "" {
		t.Errorf("status after the changes (-want +got):\n%s", diff)
	}
}

// A template change bumps the template generation and rolls the pods one
// node at a time (maxUnavailable 1).
func TestDaemonSetRollingUpdate(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("a", nil)
	w.addNode("b", nil)
	_, err := w.Client.AppsV1().DaemonSets("default").Create(w.Ctx, newDS("agent"), metav1.CreateOptions{})
	w.Must("creating daemonset", err)
	w.Must("sync", c.Sync(w.Ctx))
	before := w.podsByNode()

	ds, err := w.Client.AppsV1().DaemonSets("default").Get(w.Ctx, "agent", metav1.GetOptions{})
	w.Must("getting daemonset", err)
	ds.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	ds, err = w.Client.AppsV1().DaemonSets("default").Update(w.Ctx, ds, metav1.UpdateOptions{})
	w.Must("updating template", err)
	if g := ds.Annotations[appsv1.DeprecatedTemplateGeneration]; g != "2" || ds.Generation != 2 {
		t.Fatalf("after a template change: template generation %q, generation %d; want 2 and 2", g, ds.Generation)
	}
	// The old pods are not Ready, so both may be replaced at once.
	w.Must("sync", c.Sync(w.Ctx))
	if got := w.podsByNode(); len(got["a"])+len(got["b"]) != 0 {
		t.Fatalf("old pods left after the rolling pass: %v (before %v)", got, before)
	}
	w.Must("sync", c.Sync(w.Ctx))
	after := w.Pods()
	if len(after) != 2 {
		t.Fatalf("%d pods after the roll-out, want 2", len(after))
	}
	for _, p := range after {
		if p.Spec.Containers[0].Image != "busybox:1.37" || p.Labels[daemonset.LabelTemplateGeneration] != "2" {
			t.Errorf("pod %s: image %s, template generation %s", p.Name, p.Spec.Containers[0].Image, p.Labels[daemonset.LabelTemplateGeneration])
		}
	}
}

// setNodeReady posts node's Ready condition as its agent would.
func (w *world) setNodeReady(name string, status corev1.ConditionStatus, reason, message string) {
	w.T.Helper()
	n, err := w.Client.CoreV1().Nodes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting node", err)
	n.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: status, Reason: reason, Message: message,
		LastHeartbeatTime: metav1.NewTime(w.Clock.Now()), LastTransitionTime: metav1.NewTime(w.Clock.Now()),
	}}
	_, err = w.Client.CoreV1().Nodes().UpdateStatus(w.Ctx, n, metav1.UpdateOptions{})
	w.Must("updating node status", err)
}

func (w *world) setNodeShuttingDown(name string) {
	w.T.Helper()
	w.setNodeReady(name, corev1.ConditionFalse, "KubeletNotReady", "[container runtime is down, "+daemonset.NodeShuttingDownMessage+"]")
}

// allPods lists the pods of namespace default, those being deleted too.
func (w *world) allPods() []corev1.Pod {
	w.T.Helper()
	l, err := w.Client.CoreV1().Pods("default").List(w.Ctx, metav1.ListOptions{})
	w.Must("listing pods", err)
	return l.Items
}

// A node that is shutting down gets no daemon pod while a Ready one does;
// once it is Ready again, it gets one. Meanwhile it counts as a node that
// should run a pod and has none.
func TestDaemonSetSkipsShuttingDownNode(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("up", nil)
	w.setNodeReady("up", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	w.addNode("down", nil)
	w.setNodeShuttingDown("down")
	_, err := w.Client.AppsV1().DaemonSets("default").Create(w.Ctx, newDS("agent"), metav1.CreateOptions{})
	w.Must("creating daemonset", err)

	for pass := 1; pass <= 3; pass++ {
		w.Must("sync", c.Sync(w.Ctx))
		byNode := w.podsByNode()
		if len(byNode) != 1 || len(byNode["up"]) != 1 {
			t.Fatalf("pass %d: pods by node = %v, want one on up and none on down", pass, byNode)
		}
		w.Clock.Step(daemonset.DefaultResyncPeriod)
	}
	want := appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberUnavailable: 2, ObservedGeneration: 1}
	if diff := cmp.Diff(want, w.status("agent")); diff != "" {
		t.Errorf("status while down shuts down (-want +got):\n%s", diff)
	}

	w.setNodeReady("down", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	w.Must("sync", c.Sync(w.Ctx))
	if byNode := w.podsByNode(); len(byNode) != 2 || len(byNode["up"]) != 1 || len(byNode["down"]) != 1 {
		t.Fatalf("after down is Ready again: pods by node = %v, want one on each", byNode)
	}
	want = appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberUnavailable: 2, ObservedGeneration: 1}
	if diff := cmp.Diff(want, w.status("agent")); diff != "" {
		t.Errorf("status after down is Ready again (-want +got):\n%s", diff)
	}
}

// A daemon pod the agent of a shutting-down node has failed is deleted
// but not replaced, however many passes run and back-offs end; the node
// gets a pod again once it is Ready. Upstream replaces it each time, and
// the agent rejects each replacement (kubernetes#100184, #130490).
func TestDaemonSetDoesNotReplaceFailedPodOnShuttingDownNode(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("n", nil)
	w.setNodeReady("n", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	_, err := w.Client.AppsV1().DaemonSets("default").Create(w.Ctx, newDS("agent"), metav1.CreateOptions{})
	w.Must("creating daemonset", err)
	w.Must("sync", c.Sync(w.Ctx))
	pods := w.Pods()
	if len(pods) != 1 {
		t.Fatalf("%d pods after the first pass, want 1", len(pods))
	}
	first := pods[0].Name
	w.Must("binding", w.Client.CoreV1().Pods("default").Bind(w.Ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: "default"},
		Target:     corev1.ObjectReference{Kind: "Node", Name: "n"},
	}, metav1.CreateOptions{}))

	// The node starts shutting down and its agent fails the pod.
	w.setNodeShuttingDown("n")
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, first, metav1.GetOptions{})
	w.Must("getting pod", err)
	p.Status.Phase = corev1.PodFailed
	p.Status.Reason = "NodeShutdown"
	p.Status.Message = "Pod was rejected as the node is shutting down."
	_, err = w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("failing the pod", err)

	w.Must("sync", c.Sync(w.Ctx))
	if got := w.Pods(); len(got) != 0 {
		t.Fatalf("pods after the pass that finds the failed one: %v, want it deleted and no new one", w.podsByNode())
	}
	// Each step is longer than the longest back-off.
	for pass := 1; pass <= 5; pass++ {
		w.Clock.Step(daemonset.FailedPodBackoffMax + time.Second)
		w.Must("sync", c.Sync(w.Ctx))
		var names []string
		for _, p := range w.allPods() {
			if p.Name != first {
				names = append(names, p.Name)
			}
		}
		if len(names) != 0 {
			t.Fatalf("pass %d: new pods %v created on the shutting-down node", pass, names)
		}
	}

	w.setNodeReady("n", corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	w.Must("sync", c.Sync(w.Ctx))
	if byNode := w.podsByNode(); len(byNode["n"]) != 1 || byNode["n"][0] == first {
		t.Fatalf("after n is Ready again: pods by node = %v, want one new pod on n", byNode)
	}
}
