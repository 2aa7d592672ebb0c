package outofservice_test

import (
	"context"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/outofservice"
	"knode/internal/volume"
)

var quiet = slog.New(slog.DiscardHandler)

// world is apitest's World with this package's helpers as methods.
type world struct{ *apitest.World }

func newWorld(t *testing.T) *world {
	return &world{apitest.NewWorld(t, apitest.Options{})}
}

func (w *world) controller() *outofservice.Controller {
	w.T.Helper()
	c, err := outofservice.New(outofservice.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	return c
}

func (w *world) sync(c *outofservice.Controller) {
	w.T.Helper()
	w.Must("sync", c.Sync(w.Ctx))
}

// addNode registers a node with its Ready condition and a Lease renewed
// now (40 s).
func (w *world) addNode(name string, ready corev1.ConditionStatus) {
	w.T.Helper()
	_, err := w.Client.CoreV1().Nodes().Create(w.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	w.Must("creating node", err)
	w.setReady(name, ready)
	_, err = w.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(w.Ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: w.Clock.Now()},
		},
	}, metav1.CreateOptions{})
	w.Must("creating lease", err)
}

func (w *world) setReady(name string, ready corev1.ConditionStatus) {
	w.T.Helper()
	n, err := w.Client.CoreV1().Nodes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting node", err)
	now := metav1.NewTime(w.Clock.Now())
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: now, LastTransitionTime: now}}
	_, err = w.Client.CoreV1().Nodes().UpdateStatus(w.Ctx, n, metav1.UpdateOptions{})
	w.Must("updating node status", err)
}

// taint adds (on) or removes the out-of-service taint.
func (w *world) taint(name string, on bool) {
	w.T.Helper()
	n, err := w.Client.CoreV1().Nodes().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting node", err)
	var kept []corev1.Taint
	for _, t := range n.Spec.Taints {
		if t.Key != volume.TaintOutOfService {
			kept = append(kept, t)
		}
	}
	if on {
		kept = append(kept, corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
	}
	n.Spec.Taints = kept
	_, err = w.Client.CoreV1().Nodes().Update(w.Ctx, n, metav1.UpdateOptions{})
	w.Must("updating node", err)
}

func (w *world) addPod(name, node string) {
	w.T.Helper()
	_, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	w.Must("creating pod", err)
}

// nodeEvent is what the tests check of an event on a Node.
type nodeEvent struct{ Type, Reason, Node, Source string }

// events are the events in namespace default, by name: in the order
// written while the tests' events are about one node and the clock does
// not go back.

func (w *world) events() []nodeEvent {
	w.T.Helper()
	l, err := w.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	items := l.Items
	sort.SliceStable(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	var out []nodeEvent
	for _, e := range items {
		if e.InvolvedObject.Kind != "Node" {
			w.T.Errorf("event %s is about a %s", e.Name, e.InvolvedObject.Kind)
		}
		out = append(out, nodeEvent{e.Type, e.Reason, e.InvolvedObject.Name, e.Source.Component})
	}
	return out
}

// expect checks the node events written since the last call.
func (w *world) expect(seen *int, want ...nodeEvent) {
	w.T.Helper()
	all := w.events()
	got := all[min(*seen, len(all)):]
	*seen = len(all)
	if diff := cmp.Diff(want, got); len(want)+len(got) > 0 && diff != "" {
		w.T.Errorf("new events (-want +got):\n%s", diff)
	}
}

func warnedEv(node string) nodeEvent {
	return nodeEvent{corev1.EventTypeWarning, outofservice.ReasonNodeAlive, node, outofservice.Name}
}

func announcedEv(node string) nodeEvent {
	return nodeEvent{corev1.EventTypeNormal, outofservice.ReasonTaintRemovable, node, outofservice.Name}
}

// A node still renewing its Lease is warned about once per addition of
// the taint, and again by a restarted controller; a node whose Lease
// expired is not.
func TestWarnsAboutLiveNodes(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("live", corev1.ConditionTrue)
	w.addPod("web", "live")
	w.Clock.Step(10 * time.Second)
	w.addNode("dead", corev1.ConditionUnknown)
	w.Clock.Step(31 * time.Second) // live: renewed 41 s ago, until its renewal below
	l, err := w.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(w.Ctx, "live", metav1.GetOptions{})
	w.Must("getting lease", err)
	l.Spec.RenewTime = &metav1.MicroTime{Time: w.Clock.Now().Add(-12 * time.Second)}
	_, err = w.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(w.Ctx, l, metav1.UpdateOptions{})
	w.Must("renewing lease", err)
	w.Clock.Step(10 * time.Second) // dead: renewed 41 s ago

	var seen int
	w.sync(c)
	w.expect(&seen)

	w.taint("live", true)
	w.taint("dead", true)
	w.sync(c)
	w.expect(&seen, warnedEv("live"))
	l2, err := w.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	want := "Node live has the node.kubernetes.io/out-of-service taint but still renews its Lease (last renewed 22s ago): " +
		"it may still be running, and detaching its volumes may corrupt data. " +
		"Remove the taint unless the machine is confirmed off: kubectl taint nodes live node.kubernetes.io/out-of-service-"
	if got := l2.Items[0]; got.Message != want || got.InvolvedObject.APIVersion != "v1" || got.InvolvedObject.UID == "" {
		t.Errorf("warning = %q about %+v\nwant message %q about v1 Node with its UID", got.Message, got.InvolvedObject, want)
	}

	w.sync(c)
	w.expect(&seen)

	// Removed and added again: warned again.
	w.taint("live", false)
	w.sync(c)
	w.taint("live", true)
	w.sync(c)
	w.expect(&seen, warnedEv("live"))

	// A restarted controller sees the taint as new, once. (Its event
	// names start over: a second later, they differ from the first's.)
	w.Clock.Step(time.Second)
	c2 := w.controller()
	w.sync(c2)
	w.sync(c2)
	w.expect(&seen, warnedEv("live"))
}

// A tainted node that is Ready with no pods bound is announced once per
// Ready transition; while pods remain, it is not.
func TestAnnouncesRemovableTaint(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("a", corev1.ConditionUnknown)
	w.addPod("web", "a")
	w.addPod("done", "a")
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "done", metav1.GetOptions{})
	w.Must("getting pod", err)
	p.Status.Phase = corev1.PodSucceeded
	_, err = w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("finishing pod", err)
	w.Clock.Step(time.Minute) // the lease expired: no warning
	w.taint("a", true)

	var seen int
	w.sync(c)
	w.expect(&seen)

	// Ready again, but pods are still bound (one of them finished).
	w.setReady("a", corev1.ConditionTrue)
	w.sync(c)
	w.expect(&seen)
	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	w.sync(c)
	w.expect(&seen)

	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "done", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	w.sync(c)
	w.expect(&seen, announcedEv("a"))
	l, err := w.Client.CoreV1().Events(metav1.NamespaceDefault).List(w.Ctx, metav1.ListOptions{})
	w.Must("listing events", err)
	want := "Node a is Ready and no pods are bound to it; the node.kubernetes.io/out-of-service taint can be removed: kubectl taint nodes a node.kubernetes.io/out-of-service-"
	if got := l.Items[0].Message; got != want {
		t.Errorf("message = %q\nwant %q", got, want)
	}

	w.sync(c)
	w.expect(&seen)

	// NotReady and Ready again: announced again. The taint stays.
	w.setReady("a", corev1.ConditionFalse)
	w.sync(c)
	w.expect(&seen)
	w.setReady("a", corev1.ConditionTrue)
	w.sync(c)
	w.expect(&seen, announcedEv("a"))
	n, err := w.Client.CoreV1().Nodes().Get(w.Ctx, "a", metav1.GetOptions{})
	w.Must("getting node", err)
	if !volume.OutOfService(n) {
		t.Error("the controller removed the taint")
	}
}

// Run passes when a node changes, without waiting for the resync.
func TestRunWakesOnNodeChange(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	w.addNode("a", corev1.ConditionTrue)
	w.addPod("web", "a")
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
	w.taint("a", true)
	err := wait.PollUntilContextTimeout(w.Ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(w.events()) == 1, nil
	})
	w.Must("waiting for the warning", err)
	// A pod deletion wakes it too.
	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	err = wait.PollUntilContextTimeout(w.Ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(w.events()) == 2, nil
	})
	w.Must("waiting for the announcement", err)
	if diff := cmp.Diff([]nodeEvent{warnedEv("a"), announcedEv("a")}, w.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
