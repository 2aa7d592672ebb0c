package tainteviction_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/apiserver"
	"knode/internal/apitest"
	"knode/internal/controller/tainteviction"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// env is a real API server over the memory store, with the
// DefaultTolerationSeconds plugin, a fake clock shared by the server and
// the controller, and a controller whose metrics go to reg.
type env struct {
	t      *testing.T
	ctx    context.Context
	client kubernetes.Interface
	clock  *clocktesting.FakeClock
	reg    *prometheus.Registry
	c      *tainteviction.Controller
}

func newEnv(t *testing.T) *env {
	t.Helper()
	fc := clocktesting.NewFakeClock(t0)
	client := apitest.Start(t, apitest.Options{
		Admission: []apiserver.Admitter{defaulttolerationseconds.New(defaulttolerationseconds.Config{})},
		Clock:     fc,
	}).Admin
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg := prometheus.NewRegistry()
	c, err := tainteviction.New(tainteviction.Config{Client: client, Clock: fc, Metrics: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, client: client, clock: fc, reg: reg, c: c}
}

func (e *env) must(what string, err error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *env) createNode(name string, taints ...corev1.Taint) {
	e.t.Helper()
	_, err := e.client.CoreV1().Nodes().Create(e.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}, metav1.CreateOptions{})
	e.must("create node "+name, err)
}

// setTaints replaces the node's taints.
func (e *env) setTaints(name string, taints ...corev1.Taint) {
	e.t.Helper()
	n, err := e.client.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	e.must("get node "+name, err)
	n.Spec.Taints = taints
	_, err = e.client.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{})
	e.must("taint node "+name, err)
}

// createPod makes a pod bound to node; admission adds the default
// tolerations the pod lacks.
func (e *env) createPod(name, node string, tolerations ...corev1.Toleration) {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Containers:  []corev1.Container{{Name: "c", Image: "busybox"}},
			Tolerations: tolerations,
		},
	}
	_, err := e.client.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{})
	e.must("create pod "+name, err)
}

func (e *env) sync() {
	e.t.Helper()
	e.must("sync", e.c.Sync(e.ctx))
}

// stepTo moves the clock to t0+s and syncs.
func (e *env) stepTo(s time.Duration) {
	e.t.Helper()
	e.clock.SetTime(t0.Add(s))
	e.sync()
}

// deleted lists the pods in default that carry a deletionTimestamp, or
// are gone, among names.
func (e *env) deleted(names ...string) []string {
	e.t.Helper()
	var out []string
	for _, n := range names {
		p, err := e.client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			out = append(out, n)
		}
	}
	return out
}

func (e *env) expectDeleted(when string, names []string, want ...string) {
	e.t.Helper()
	if diff := cmp.Diff(want, e.deleted(names...), cmpEmpty); diff != "" {
		e.t.Errorf("%s: deleted pods (-want +got):\n%s", when, diff)
	}
}

// cmpEmpty treats nil and empty slices alike.
var cmpEmpty = cmp.Transformer("nilToEmpty", func(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
})

// events returns the TaintManagerEviction messages in default, in
// creation order.
func (e *env) events() []string {
	e.t.Helper()
	list, err := e.client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{})
	e.must("list events", err)
	items := list.Items
	// Names end in a hex number that grows with time and sequence.
	seq := func(ev corev1.Event) int64 {
		n, err := strconv.ParseInt(ev.Name[strings.LastIndex(ev.Name, ".")+1:], 16, 64)
		e.must("event name "+ev.Name, err)
		return n
	}
	slices.SortStableFunc(items, func(a, b corev1.Event) int {
		if c := a.FirstTimestamp.Compare(b.FirstTimestamp.Time); c != 0 {
			return c
		}
		return int(seq(a) - seq(b))
	})
	var out []string
	for _, ev := range items {
		if ev.Reason != tainteviction.EventReason {
			continue
		}
		if ev.Source.Component != tainteviction.Name || ev.Type != corev1.EventTypeNormal || ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Namespace != "default" {
			e.t.Errorf("event %s: source %q type %q involved %+v", ev.Name, ev.Source.Component, ev.Type, ev.InvolvedObject)
		}
		out = append(out, ev.Message)
	}
	return out
}

func (e *env) deletions() float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	e.must("gather", err)
	for _, f := range families {
		if f.GetName() == "taint_eviction_controller_pod_deletions_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	e.t.Fatal("taint_eviction_controller_pod_deletions_total not registered")
	return 0
}

func (e *env) pendingFireTimes() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, w := range e.c.Pending() {
		out[w.Pod.Name] = w.FireAt.Sub(t0)
	}
	return out
}

func unreachableTaint(added time.Time) corev1.Taint {
	return corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: added}}
}

func unreachableToleration(seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}
}

// The documented timeline on an unreachable node: the default toleration
// gives exactly 300 s from when the controller saw the taint (its
// timeAdded, an hour earlier, does not count), tolerationSeconds 30 gives
// 30 s, and a toleration without seconds keeps the pod.
func TestUnreachableNodeTimeline(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.createPod("plain", "n1")
	e.createPod("quick", "n1", unreachableToleration(ptr.To[int64](30)))
	e.createPod("forever", "n1", unreachableToleration(nil))
	e.createPod("elsewhere", "n2")
	all := []string{"plain", "quick", "forever", "elsewhere"}
	e.sync()
	e.expectDeleted("untainted", all)

	e.setTaints("n1", unreachableTaint(t0.Add(-time.Hour)), corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule})
	e.sync()
	if diff := cmp.Diff(map[string]time.Duration{"plain": 300 * time.Second, "quick": 30 * time.Second}, e.pendingFireTimes()); diff != "" {
		t.Errorf("pending deletions (-want +got):\n%s", diff)
	}
	if at, ok := e.c.NextDue(); !ok || !at.Equal(t0.Add(30*time.Second)) {
		t.Errorf("NextDue = %v %v, want t0+30s", at, ok)
	}

	e.stepTo(29*time.Second + 999*time.Millisecond)
	e.expectDeleted("just before 30 s", all)

	// Watch quick to see the condition land before the deletion.
	w, err := e.client.CoreV1().Pods("default").Watch(e.ctx, metav1.ListOptions{FieldSelector: "metadata.name=quick"})
	e.must("watch", err)
	defer w.Stop()
	e.stepTo(30 * time.Second)
	e.expectDeleted("at 30 s", all, "quick")
	if got := e.deletions(); got != 1 {
		t.Errorf("deletions metric at 30 s = %v, want 1", got)
	}
	sawCondition := false
	for !sawCondition {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed before the condition was seen")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			if p.DeletionTimestamp != nil {
				t.Fatal("pod deleted before it got the DisruptionTarget condition")
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.DisruptionTarget {
					want := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint", LastTransitionTime: metav1.NewTime(t0.Add(30 * time.Second))}
					if diff := cmp.Diff(want, c); diff != "" {
						t.Errorf("condition (-want +got):\n%s", diff)
					}
					sawCondition = true
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event for quick")
		}
	}

	// A pass with nothing new repeats no deletion of the terminating pod.
	e.sync()
	if got := e.deletions(); got != 1 {
		t.Errorf("deletions metric after a quiet pass = %v, want 1", got)
	}

	e.stepTo(299 * time.Second)
	e.expectDeleted("at 299 s", all, "quick")
	e.stepTo(300 * time.Second)
	e.expectDeleted("at 300 s", all, "plain", "quick")
	if got := e.deletions(); got != 2 {
		t.Errorf("deletions metric at 300 s = %v, want 2", got)
	}
	e.stepTo(time.Hour)
	e.expectDeleted("an hour later", all, "plain", "quick")
	if p := e.c.Pending(); len(p) != 0 {
		t.Errorf("still pending: %v", p)
	}
	want := []string{"Marking for deletion Pod default/quick", "Marking for deletion Pod default/plain"}
	if diff := cmp.Diff(want, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	text := e.exposition()
	for _, line := range []string{
		"# HELP taint_eviction_controller_pod_deletions_total [ALPHA] Total number of Pods deleted by TaintEvictionController since its start.\n",
		"# TYPE taint_eviction_controller_pod_deletions_total counter\n",
		"taint_eviction_controller_pod_deletions_total 2\n",
		"# TYPE taint_eviction_controller_pod_deletion_duration_seconds histogram\n",
		"taint_eviction_controller_pod_deletion_duration_seconds_count 2\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %q; got:\n%s", line, text)
		}
	}
}

// exposition is the registry in Prometheus text format.
func (e *env) exposition() string {
	e.t.Helper()
	families, err := e.reg.Gather()
	e.must("gather", err)
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		e.must("encode", enc.Encode(f))
	}
	return b.String()
}

// Removing the taint at 100 s cancels the pending deletions, with events;
// tainting again starts a new countdown.
func TestTaintRemovalCancels(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1", unreachableTaint(t0))
	e.createPod("plain", "n1")
	e.createPod("slow", "n1", unreachableToleration(ptr.To[int64](200)))
	all := []string{"plain", "slow"}
	e.sync()
	if diff := cmp.Diff(map[string]time.Duration{"plain": 300 * time.Second, "slow": 200 * time.Second}, e.pendingFireTimes()); diff != "" {
		t.Errorf("pending deletions (-want +got):\n%s", diff)
	}

	e.clock.SetTime(t0.Add(100 * time.Second))
	e.setTaints("n1")
	e.sync()
	if p := e.c.Pending(); len(p) != 0 {
		t.Errorf("pending after untaint: %v", p)
	}
	want := []string{"Cancelling deletion of Pod default/plain", "Cancelling deletion of Pod default/slow"}
	if diff := cmp.Diff(want, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	e.stepTo(400 * time.Second)
	e.expectDeleted("at 400 s", all)
	if got := e.deletions(); got != 0 {
		t.Errorf("deletions = %v, want 0", got)
	}

	// Tainted again at 400 s: counted from 400 s.
	e.setTaints("n1", unreachableTaint(t0.Add(400*time.Second)))
	e.sync()
	if diff := cmp.Diff(map[string]time.Duration{"plain": 700 * time.Second, "slow": 600 * time.Second}, e.pendingFireTimes()); diff != "" {
		t.Errorf("pending after re-taint (-want +got):\n%s", diff)
	}
	e.stepTo(600 * time.Second)
	e.expectDeleted("at 600 s", all, "slow")
}

// When the node lifecycle controller swaps not-ready for unreachable, the
// countdown already running is kept, not restarted.
func TestTaintSwapKeepsCountdown(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1", corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: t0}})
	e.createPod("plain", "n1")
	e.sync()
	e.clock.SetTime(t0.Add(100 * time.Second))
	e.setTaints("n1", unreachableTaint(t0.Add(100*time.Second)))
	e.sync()
	if diff := cmp.Diff(map[string]time.Duration{"plain": 300 * time.Second}, e.pendingFireTimes()); diff != "" {
		t.Errorf("pending after swap (-want +got):\n%s", diff)
	}
	e.stepTo(300 * time.Second)
	e.expectDeleted("at 300 s", []string{"plain"}, "plain")
	if got := e.events(); len(got) != 1 || got[0] != "Marking for deletion Pod default/plain" {
		t.Errorf("events = %q, want only the deletion", got)
	}
}

// A NoExecute taint the pod does not tolerate deletes it at once; a
// NoSchedule taint never does.
func TestUntoleratedTaintDeletesAtOnce(t *testing.T) {
	e := newEnv(t)
	maintenance := corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute}
	e.createNode("n1", maintenance)
	e.createNode("n2", corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoSchedule})
	e.createPod("plain", "n1")
	e.createPod("tolerant", "n1", corev1.Toleration{Key: maintenance.Key, Operator: corev1.TolerationOpExists})
	e.createPod("on-n2", "n2")
	e.createPod("unbound", "")
	all := []string{"plain", "tolerant", "on-n2", "unbound"}
	e.sync()
	e.expectDeleted("first pass", all, "plain")
	if got := e.deletions(); got != 1 {
		t.Errorf("deletions = %v, want 1", got)
	}
	e.stepTo(time.Hour)
	e.expectDeleted("an hour later", all, "plain")
}

// A pod created on a node that is already tainted starts its own
// countdown; a pod deleted while pending cancels its deletion.
func TestPodChanges(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1", unreachableTaint(t0))
	e.createPod("early", "n1")
	e.sync()
	e.clock.SetTime(t0.Add(50 * time.Second))
	e.createPod("late", "n1")
	e.sync()
	if diff := cmp.Diff(map[string]time.Duration{"early": 300 * time.Second, "late": 350 * time.Second}, e.pendingFireTimes()); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	e.must("delete early", e.client.CoreV1().Pods("default").Delete(e.ctx, "early", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	e.sync()
	if diff := cmp.Diff(map[string]time.Duration{"late": 350 * time.Second}, e.pendingFireTimes()); diff != "" {
		t.Errorf("pending after delete (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Cancelling deletion of Pod default/early"}, e.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	e.stepTo(350 * time.Second)
	e.expectDeleted("at 350 s", []string{"late"}, "late")
}

// A deleted node is forgotten, but its pods' deletions stay scheduled.
func TestNodeDeletionKeepsPending(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1", unreachableTaint(t0))
	e.createPod("plain", "n1")
	e.sync()
	e.must("delete node", e.client.CoreV1().Nodes().Delete(e.ctx, "n1", metav1.DeleteOptions{}))
	e.stepTo(300 * time.Second)
	e.expectDeleted("at 300 s", []string{"plain"}, "plain")
}

func TestNewChecksConfig(t *testing.T) {
	if _, err := tainteviction.New(tainteviction.Config{}); err == nil {
		t.Error("New without a client succeeded")
	}
	e := newEnv(t)
	_, err := tainteviction.New(tainteviction.Config{Client: e.client, Metrics: e.reg})
	if !errors.Is(err, tainteviction.ErrMetricsRegistered) {
		t.Errorf("second registration: %v, want ErrMetricsRegistered", err)
	}
}
