package podgc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/podgc"
	"knode/internal/volume"
)

var quiet = slog.New(slog.DiscardHandler)

// write is one pod write the API server received.
type write struct {
	Method string
	Path   string
	Body   map[string]any
}

// wire sits in front of the API server: it records pod writes and lets a
// test answer some requests itself.
type wire struct {
	mu     sync.Mutex
	writes []write
	// intercept, when set, sees every request first; returning true means
	// it answered the request.
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

func (x *wire) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		x.mu.Lock()
		intercept := x.intercept
		if (r.Method == http.MethodPatch || r.Method == http.MethodDelete) && strings.Contains(r.URL.Path, "/pods/") {
			wr := write{Method: r.Method, Path: r.URL.Path, Body: decodeBody(r.Method, body)}
			x.writes = append(x.writes, wr)
		}
		x.mu.Unlock()
		if intercept != nil && intercept(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// decodeBody reads a patch (JSON) or a DELETE's options (JSON or
// protobuf, as the client chooses) as a JSON map; nil when there is none.
func decodeBody(method string, body []byte) map[string]any {
	if len(body) == 0 {
		return nil
	}
	if method == http.MethodDelete {
		opts := &metav1.DeleteOptions{}
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, opts); err != nil {
			return map[string]any{"undecodable": err.Error()}
		}
		body, _ = json.Marshal(opts)
	}
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		return map[string]any{"undecodable": err.Error()}
	}
	return out
}

func (x *wire) take() []write {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.writes
	x.writes = nil
	return out
}

func (x *wire) setIntercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.intercept = f
}

// world is apitest's World with a PodGC controller on its fake clock.
type world struct {
	*apitest.World
	wire *wire
	reg  *prometheus.Registry
	c    *podgc.Controller
}

// newWorld starts the API server and a controller built from cfg, with
// the world's client, clock, registry and a quiet logger filled in.
func newWorld(t *testing.T, cfg podgc.Config) *world {
	t.Helper()
	x := &wire{}
	w := &world{World: apitest.NewWorld(t, apitest.Options{Wrap: x.wrap}), wire: x, reg: prometheus.NewRegistry()}
	cfg.Client, cfg.Clock, cfg.Metrics, cfg.Logger = w.Client, w.Clock, w.reg, quiet
	c, err := podgc.New(cfg)
	w.Must("building the controller", err)
	w.c = c
	return w
}

// node creates a node whose Ready condition has status ready ("" for no
// conditions).
func (w *world) node(name string, ready corev1.ConditionStatus, taints ...corev1.Taint) {
	w.T.Helper()
	n, err := w.Client.CoreV1().Nodes().Create(w.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}, metav1.CreateOptions{})
	w.Must("creating node "+name, err)
	if ready == "" {
		return
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.NewTime(w.Clock.Now()), LastTransitionTime: metav1.NewTime(w.Clock.Now())}}
	_, err = w.Client.CoreV1().Nodes().UpdateStatus(w.Ctx, n, metav1.UpdateOptions{})
	w.Must("setting the status of node "+name, err)
}

// pod creates pod default/name bound to node ("" for none), in phase
// (Pending when empty); opts adjust it before it is created.
func (w *world) pod(name, node string, phase corev1.PodPhase, opts ...func(*corev1.Pod)) {
	w.T.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	for _, o := range opts {
		o(p)
	}
	p, err := w.Client.CoreV1().Pods(p.Namespace).Create(w.Ctx, p, metav1.CreateOptions{})
	w.Must("creating pod "+name, err)
	if phase == "" || phase == corev1.PodPending {
		return
	}
	p.Status.Phase = phase
	_, err = w.Client.CoreV1().Pods(p.Namespace).UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("setting the phase of pod "+name, err)
}

// startDeleting deletes pod default/name with the default options; a
// pod bound to a node and running stays, terminating, for its grace period.
func (w *world) startDeleting(name string) {
	w.T.Helper()
	w.Must("deleting pod "+name, w.Client.CoreV1().Pods("default").Delete(w.Ctx, name, metav1.DeleteOptions{}))
	if p := w.get(name); p == nil || p.DeletionTimestamp == nil {
		w.T.Fatalf("pod %s is not terminating after its deletion: %+v", name, p)
	}
}

// get returns pod default/name, nil when it is gone.
func (w *world) get(name string) *corev1.Pod {
	w.T.Helper()
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	w.Must("getting pod "+name, err)
	return p
}

// present lists which of names still exist, in the order given.
func (w *world) present(names ...string) []string {
	w.T.Helper()
	out := []string{}
	for _, n := range names {
		if w.get(n) != nil {
			out = append(out, n)
		}
	}
	return out
}

func (w *world) expectPresent(when string, names []string, want ...string) {
	w.T.Helper()
	if want == nil {
		want = []string{}
	}
	if diff := cmp.Diff(want, w.present(names...)); diff != "" {
		w.T.Errorf("%s: pods present (-want +got):\n%s", when, diff)
	}
}

func (w *world) sync() {
	w.T.Helper()
	w.Must("sync", w.c.Sync(w.Ctx))
}

// stepTo sets the clock to apitest.Epoch+d and passes.
func (w *world) stepTo(d time.Duration) {
	w.T.Helper()
	w.Clock.SetTime(apitest.Epoch.Add(d))
	w.sync()
}

// counter is the value of the named pod_gc_collector series for
// namespace default and reason; 0 when absent.
func (w *world) counter(name string, reason podgc.Reason) float64 {
	w.T.Helper()
	families, err := w.reg.Gather()
	w.Must("gathering metrics", err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == "default" && labels["reason"] == string(reason) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

const (
	deletionsTotal = "pod_gc_collector_force_delete_pods_total"
	errorsTotal    = "pod_gc_collector_force_delete_pod_errors_total"
)

func (w *world) expectCounts(reason podgc.Reason, deletions, errs float64) {
	w.T.Helper()
	if got := w.counter(deletionsTotal, reason); got != deletions {
		w.T.Errorf("%s{reason=%q} = %v, want %v", deletionsTotal, reason, got, deletions)
	}
	if got := w.counter(errorsTotal, reason); got != errs {
		w.T.Errorf("%s{reason=%q} = %v, want %v", errorsTotal, reason, got, errs)
	}
}

var outOfService = corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// With a threshold of 2, of four finished pods the two oldest go; running
// pods never count.
func TestTerminatedPodsOverThreshold(t *testing.T) {
	w := newWorld(t, podgc.Config{TerminatedPodThreshold: ptr.To(2)})
	w.node("n1", corev1.ConditionTrue)
	names := []string{"oldest", "older", "running", "newer", "newest"}
	phases := []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	for i, n := range names {
		w.pod(n, "n1", phases[i])
		w.Clock.Step(time.Second)
	}
	w.wire.take()
	w.sync()
	w.expectPresent("after the pass", names, "running", "newer", "newest")
	w.expectCounts(podgc.ReasonTerminated, 2, 0)

	// Finished pods need no status patch: two deletions, grace 0.
	writes := w.wire.take()
	if len(writes) != 2 {
		t.Fatalf("writes: %+v, want two deletions", writes)
	}
	for _, wr := range writes {
		if wr.Method != http.MethodDelete || wr.Body["gracePeriodSeconds"] != float64(0) {
			t.Errorf("write %+v, want a DELETE with gracePeriodSeconds 0", wr)
		}
	}

	// At the threshold nothing more goes.
	w.Clock.Step(20 * time.Second)
	w.sync()
	w.expectPresent("at the threshold", names, "running", "newer", "newest")
	w.expectCounts(podgc.ReasonTerminated, 2, 0)
}

// A threshold <= 0 turns the terminated path off; the others still run.
func TestTerminatedPathOff(t *testing.T) {
	for _, threshold := range []int{0, -1} {
		w := newWorld(t, podgc.Config{TerminatedPodThreshold: ptr.To(threshold)})
		w.node("n1", corev1.ConditionTrue)
		w.pod("done-1", "n1", corev1.PodSucceeded)
		w.pod("done-2", "n1", corev1.PodFailed)
		w.pod("unscheduled", "", "", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} })
		w.startDeleting("unscheduled")
		w.sync()
		w.expectPresent(fmt.Sprint("threshold ", threshold), []string{"done-1", "done-2"}, "done-1", "done-2")
		w.expectCounts(podgc.ReasonTerminated, 0, 0)
		w.expectCounts(podgc.ReasonUnscheduled, 1, 0)
	}
}

// A terminating pod on a node that is not Ready and carries the
// out-of-service taint is marked Failed, then deleted with grace 0 and a
// UID precondition. A Ready node with the taint, or a not-Ready node
// without it, keeps its terminating pods untouched, and a pod that is not
// terminating stays even on the out-of-service node.
func TestOutOfServiceForceDeletesTerminatingPods(t *testing.T) {
	w := newWorld(t, podgc.Config{})
	w.node("down", corev1.ConditionFalse, outOfService)
	w.node("ready-tainted", corev1.ConditionTrue, outOfService)
	w.node("down-untainted", corev1.ConditionUnknown, corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute})
	for _, n := range []string{"down", "ready-tainted", "down-untainted"} {
		w.pod("on-"+n, n, corev1.PodRunning)
		w.startDeleting("on-" + n)
	}
	w.pod("not-deleting", "down", corev1.PodRunning)
	uid := w.get("on-down").UID
	before := map[string]*corev1.Pod{"on-ready-tainted": w.get("on-ready-tainted"), "on-down-untainted": w.get("on-down-untainted")}
	w.wire.take()

	w.sync()
	all := []string{"on-down", "on-ready-tainted", "on-down-untainted", "not-deleting"}
	w.expectPresent("after the pass", all, "on-ready-tainted", "on-down-untainted", "not-deleting")
	w.expectCounts(podgc.ReasonOutOfService, 1, 0)

	want := []write{
		{Method: http.MethodPatch, Path: "/api/v1/namespaces/default/pods/on-down/status", Body: map[string]any{
			"metadata": map[string]any{"uid": string(uid)},
			"status":   map[string]any{"phase": "Failed"},
		}},
		{Method: http.MethodDelete, Path: "/api/v1/namespaces/default/pods/on-down", Body: map[string]any{
			"kind": "DeleteOptions", "apiVersion": "v1",
			"gracePeriodSeconds": float64(0),
			"preconditions":      map[string]any{"uid": string(uid)},
		}},
	}
	if diff := cmp.Diff(want, w.wire.take()); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	for name, old := range before {
		now := w.get(name)
		if now.ResourceVersion != old.ResourceVersion || now.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s was touched: resourceVersion %s -> %s, phase %s", name, old.ResourceVersion, now.ResourceVersion, now.Status.Phase)
		}
	}
}

// A pod bound to a node that never existed stays through the 40 s
// quarantine and goes at the first pass after it, marked Failed with the
// DisruptionTarget condition. A node that shows up during its quarantine
// keeps its pods.
func TestOrphanWaitsOutQuarantine(t *testing.T) {
	w := newWorld(t, podgc.Config{})
	w.pod("orphan", "ghost", corev1.PodRunning)
	w.pod("late", "late-node", corev1.PodRunning)
	names := []string{"orphan", "late"}
	uid := w.get("orphan").UID

	w.stepTo(0)
	w.expectPresent("at 0 s", names, "orphan", "late")
	w.stepTo(20 * time.Second)
	w.node("late-node", corev1.ConditionTrue)
	w.expectPresent("at 20 s", names, "orphan", "late")
	w.stepTo(39 * time.Second)
	w.expectPresent("at 39 s", names, "orphan", "late")
	w.expectCounts(podgc.ReasonOrphaned, 0, 0)
	w.wire.take()

	w.stepTo(40 * time.Second)
	w.expectPresent("at 40 s", names, "late")
	w.expectCounts(podgc.ReasonOrphaned, 1, 0)
	writes := w.wire.take()
	if len(writes) != 2 {
		t.Fatalf("writes: %+v, want a status patch and a deletion", writes)
	}
	wantPatch := map[string]any{
		"metadata": map[string]any{"uid": string(uid)},
		"status": map[string]any{"phase": "Failed", "conditions": []any{map[string]any{
			"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists",
			"lastTransitionTime": apitest.Epoch.Add(40 * time.Second).Format(time.RFC3339), "lastProbeTime": nil,
		}}},
	}
	if diff := cmp.Diff(wantPatch, writes[0].Body); diff != "" {
		t.Errorf("status patch (-want +got):\n%s", diff)
	}
	if writes[1].Method != http.MethodDelete || writes[1].Body["gracePeriodSeconds"] != float64(0) {
		t.Errorf("second write %+v, want a DELETE with grace 0", writes[1])
	}

	w.stepTo(120 * time.Second)
	w.expectPresent("at 120 s", names, "late")
}

// The node list is not trusted alone: when the quarantine ends, a GET of
// the node decides. A node the GET finds keeps its pods; a GET that fails
// starts the quarantine again.
func TestOrphanConfirmedByGet(t *testing.T) {
	w := newWorld(t, podgc.Config{})
	w.node("hidden", corev1.ConditionTrue)
	w.pod("on-hidden", "hidden", corev1.PodRunning)
	w.pod("on-ghost", "ghost", corev1.PodRunning)
	names := []string{"on-hidden", "on-ghost"}
	var failGets atomic.Bool
	w.wire.setIntercept(func(rw http.ResponseWriter, r *http.Request) bool {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes":
			// Every node list comes back empty.
			rw.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(rw, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return true
		case failGets.Load() && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is down","reason":"InternalError","code":500}`)
			return true
		}
		return false
	})

	failGets.Store(true)
	w.stepTo(0)
	w.stepTo(20 * time.Second)
	w.Clock.SetTime(apitest.Epoch.Add(40 * time.Second))
	if err := w.c.Sync(w.Ctx); err == nil || !strings.Contains(err.Error(), "etcd is down") {
		t.Errorf("pass with failing GETs: %v, want the GET's error", err)
	}
	w.expectPresent("at 40 s, the GETs failing", names, names...)

	failGets.Store(false)
	w.stepTo(60 * time.Second)
	w.expectPresent("at 60 s, a new quarantine running", names, names...)
	w.stepTo(80 * time.Second)
	w.expectPresent("at 80 s, the new quarantine over", names, "on-hidden")
	w.expectCounts(podgc.ReasonOrphaned, 1, 0)
}

// A terminating pod never bound to a node is marked Failed and deleted
// with grace 0; its finalizer keeps it, as upstream, until it is removed.
func TestUnscheduledTerminating(t *testing.T) {
	w := newWorld(t, podgc.Config{})
	hold := func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} }
	w.pod("unscheduled", "", "", hold)
	w.pod("waiting", "", "")
	w.startDeleting("unscheduled")

	w.sync()
	p := w.get("unscheduled")
	if p == nil || p.Status.Phase != corev1.PodFailed || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 0 {
		t.Fatalf("unscheduled pod after the pass: %+v, want phase Failed, terminating with grace 0", p)
	}
	if w.get("waiting") == nil || w.get("waiting").Status.Phase != corev1.PodPending {
		t.Errorf("a pending pod not being deleted was touched: %+v", w.get("waiting"))
	}
	w.expectCounts(podgc.ReasonUnscheduled, 1, 0)

	p.Finalizers = nil
	_, err := w.Client.CoreV1().Pods("default").Update(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("removing the finalizer", err)
	w.expectPresent("once its finalizer is gone", []string{"unscheduled"})
}

// A failed deletion counts as an error, fails the pass and is tried again
// at the next; a pod that went away meanwhile is no error.
func TestFailedDeletionCountsAndRetries(t *testing.T) {
	w := newWorld(t, podgc.Config{TerminatedPodThreshold: ptr.To(1)})
	w.node("n1", corev1.ConditionTrue)
	w.pod("a", "n1", corev1.PodSucceeded)
	w.Clock.Step(time.Second)
	w.pod("b", "n1", corev1.PodSucceeded)
	w.Clock.Step(time.Second)
	w.pod("c", "n1", corev1.PodSucceeded)
	bGone := false
	w.wire.setIntercept(func(rw http.ResponseWriter, r *http.Request) bool {
		switch {
		case r.Method == http.MethodDelete && r.URL.Path == "/api/v1/namespaces/default/pods/a":
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"try later","reason":"ServiceUnavailable","code":503}`)
			return true
		case r.Method == http.MethodDelete && r.URL.Path == "/api/v1/namespaces/default/pods/b" && !bGone:
			// Someone else deletes b first.
			bGone = true
			w.Must("deleting b first", w.Client.CoreV1().Pods("default").Delete(context.Background(), "b", metav1.DeleteOptions{}))
		}
		return false
	})

	err := w.c.Sync(w.Ctx)
	if err == nil || !strings.Contains(err.Error(), "try later") || strings.Contains(err.Error(), "default/b") {
		t.Errorf("pass: %v, want only a's failure", err)
	}
	w.expectPresent("after the failing pass", []string{"a", "b", "c"}, "a", "c")
	w.expectCounts(podgc.ReasonTerminated, 2, 1)

	w.wire.setIntercept(nil)
	w.Clock.Step(20 * time.Second)
	w.sync()
	w.expectPresent("after the next pass", []string{"a", "b", "c"}, "c")
	w.expectCounts(podgc.ReasonTerminated, 3, 1)
}

// The series carry upstream's names, help and labels, per namespace and
// reason.
func TestMetricsExposition(t *testing.T) {
	w := newWorld(t, podgc.Config{TerminatedPodThreshold: ptr.To(1)})
	w.node("n1", corev1.ConditionTrue)
	_, err := w.Client.CoreV1().Namespaces().Create(w.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	w.Must("creating namespace other", err)
	w.pod("done-1", "n1", corev1.PodSucceeded)
	w.Clock.Step(time.Second)
	w.pod("done-2", "n1", corev1.PodSucceeded, func(p *corev1.Pod) { p.Namespace = "other" })
	w.Clock.Step(time.Second)
	w.pod("done-3", "n1", corev1.PodSucceeded)
	w.pod("unscheduled", "", "", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} })
	w.startDeleting("unscheduled")
	w.sync()

	want := `# HELP pod_gc_collector_force_delete_pods_total [ALPHA] Number of pods that are being forcefully deleted since the Pod GC Controller started.
# TYPE pod_gc_collector_force_delete_pods_total counter
pod_gc_collector_force_delete_pods_total{namespace="default",reason="terminated"} 1
pod_gc_collector_force_delete_pods_total{namespace="default",reason="unscheduled"} 1
pod_gc_collector_force_delete_pods_total{namespace="other",reason="terminated"} 1
`
	if diff := cmp.Diff(want, w.exposition()); diff != "" {
		t.Errorf("exposition (-want +got):\n%s", diff)
	}

	// A failure shows in the errors series, with its help.
	w.pod("done-4", "n1", corev1.PodSucceeded)
	w.wire.setIntercept(func(rw http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodDelete {
			return false
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(rw, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"no","reason":"Forbidden","code":403}`)
		return true
	})
	w.Clock.Step(20 * time.Second)
	if err := w.c.Sync(w.Ctx); err == nil {
		t.Error("a pass whose deletions are forbidden succeeded")
	}
	text := w.exposition()
	for _, line := range []string{
		"# HELP pod_gc_collector_force_delete_pod_errors_total [ALPHA] Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.\n",
		"# TYPE pod_gc_collector_force_delete_pod_errors_total counter\n",
		// done-3 and done-4 (done-1 and done-2 went at the first pass).
		`pod_gc_collector_force_delete_pod_errors_total{namespace="default",reason="terminated"} 2` + "\n",
		`pod_gc_collector_force_delete_pods_total{namespace="default",reason="terminated"} 3` + "\n",
		// The unscheduled pod, which its finalizer kept, is tried again.
		`pod_gc_collector_force_delete_pod_errors_total{namespace="default",reason="unscheduled"} 1` + "\n",
		`pod_gc_collector_force_delete_pods_total{namespace="default",reason="unscheduled"} 2` + "\n",
		`pod_gc_collector_force_delete_pods_total{namespace="other",reason="terminated"} 1` + "\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("exposition lacks %q; got:\n%s", line, text)
		}
	}
}

// exposition is the registry in Prometheus text format.
func (w *world) exposition() string {
	w.T.Helper()
	families, err := w.reg.Gather()
	w.Must("gathering metrics", err)
	var b strings.Builder
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		w.Must("encoding metrics", enc.Encode(f))
	}
	return b.String()
}

func TestNew(t *testing.T) {
	w := newWorld(t, podgc.Config{})
	for name, cfg := range map[string]podgc.Config{
		"Config.Client is required": {},
		"Config.Period -1s":         {Client: w.Client, Period: -time.Second},
		"Config.Quarantine -1s":     {Client: w.Client, Quarantine: -time.Second},
	} {
		if _, err := podgc.New(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New(%s): %v, want an error naming it", name, err)
		}
	}
	_, err := podgc.New(podgc.Config{Client: w.Client, Metrics: w.reg})
	if !errors.Is(err, podgc.ErrMetricsRegistered) {
		t.Errorf("a second controller on one registry: %v, want ErrMetricsRegistered", err)
	}
	other := prometheus.NewRegistry()
	if _, err := podgc.New(podgc.Config{Client: w.Client, Metrics: other}); err != nil {
		t.Errorf("a controller on a fresh registry: %v", err)
	}
}

// NextDue is now before the first pass, then Period after the last pass,
// or a quarantine's end when that comes first.
func TestNextDue(t *testing.T) {
	w := newWorld(t, podgc.Config{Quarantine: 30 * time.Second})
	at := func(d time.Duration) time.Time { return apitest.Epoch.Add(d) }
	if got := w.c.NextDue(); !got.Equal(at(0)) {
		t.Errorf("before the first pass: NextDue = %v, want now (%v)", got, at(0))
	}
	w.pod("orphan", "ghost", corev1.PodRunning)
	w.stepTo(0)
	if got := w.c.NextDue(); !got.Equal(at(20 * time.Second)) {
		t.Errorf("after the pass at 0 s: NextDue = %v, want 20 s", got.Sub(apitest.Epoch))
	}
	w.stepTo(20 * time.Second)
	if got := w.c.NextDue(); !got.Equal(at(30 * time.Second)) {
		t.Errorf("after the pass at 20 s: NextDue = %v, want the quarantine's end at 30 s", got.Sub(apitest.Epoch))
	}
	w.stepTo(30 * time.Second)
	w.expectPresent("at 30 s", []string{"orphan"})
	if got := w.c.NextDue(); !got.Equal(at(50 * time.Second)) {
		t.Errorf("after the pass at 30 s: NextDue = %v, want 50 s", got.Sub(apitest.Epoch))
	}
}

// Run passes at once, then every Period of the clock.
func TestRun(t *testing.T) {
	w := newWorld(t, podgc.Config{TerminatedPodThreshold: ptr.To(1)})
	w.node("n1", corev1.ConditionTrue)
	w.pod("first", "n1", corev1.PodSucceeded)
	w.Clock.Step(time.Second)
	w.pod("second", "n1", corev1.PodSucceeded)

	deleted := make(chan string, 10)
	w.wire.setIntercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodDelete {
			deleted <- r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		}
		return false
	})
	expect := func(when, want string) {
		t.Helper()
		select {
		case got := <-deleted:
			if got != want {
				t.Fatalf("%s: deleted %s, want %s", when, got, want)
			}
		case <-time.After(30 * time.Second): // a guard against a hang, not a wait
			t.Fatalf("%s: no deletion", when)
		}
	}

	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan struct{})
	go func() {
		w.c.Run(ctx)
		close(done)
	}()
	expect("the first pass", "first")
	// The loop's ticker is registered before the first pass.
	w.Clock.Step(time.Second)
	w.pod("third", "n1", corev1.PodSucceeded)
	w.Clock.Step(19 * time.Second)
	expect("the pass one period later", "second")
	cancel()
	<-done
}
