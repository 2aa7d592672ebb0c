package nodelifecycle_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/nodelifecycle"
)

var start = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// harness is a real API server over the memory store, a controller reading
// it directly, and simulated kubelets, all on one fake clock.
type harness struct {
	t      *testing.T
	ctx    context.Context
	clock  *testingclock.FakeClock
	client kubernetes.Interface
	ctrl   *nodelifecycle.Controller
	reg    *prometheus.Registry
	leases map[string]*coordinationv1.Lease
	zoneOf map[string]string // node → zone label
	dead   map[string]bool   // nodes whose kubelet is silent
	names  []string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	clk := testingclock.NewFakeClock(start)
	client := apitest.Start(t, apitest.Options{Clock: clk}).Admin
	reg := prometheus.NewRegistry()
	ctrl, err := nodelifecycle.New(nodelifecycle.Config{
		Client:     client,
		Source:     nodelifecycle.NewClientSource(client),
		Clock:      clk,
		Registerer: reg,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{
		t: t, ctx: context.Background(), clock: clk, client: client, ctrl: ctrl, reg: reg,
		leases: map[string]*coordinationv1.Lease{}, zoneOf: map[string]string{}, dead: map[string]bool{},
	}
}

// addZone registers n Ready nodes "<zone>-NNN" in zone, each with a Lease.
func (h *harness) addZone(zone string, n int) {
	h.t.Helper()
	now := metav1.NewTime(h.clock.Now())
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%03d", zone, i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				corev1.LabelTopologyRegion: "r", corev1.LabelTopologyZone: zone, corev1.LabelOSStable: "linux",
			}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
				LastHeartbeatTime: now, LastTransitionTime: now,
			}}},
		}
		if _, err := h.client.CoreV1().Nodes().Create(h.ctx, node, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
		renew := metav1.NewMicroTime(h.clock.Now())
		lease, err := h.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(h.ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &renew},
		}, metav1.CreateOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		h.leases[name] = lease
		h.zoneOf[name] = zone
		h.names = append(h.names, name)
	}
}

// kill silences the first n kubelets of zone.
func (h *harness) kill(zone string, n int) {
	for _, name := range h.names {
		if n > 0 && h.zoneOf[name] == zone {
			h.dead[name] = true
			n--
		}
	}
}

// revive brings back every kubelet of zone: it renews its Lease and posts
// Ready=True at once, as a kubelet does when the server's copy differs.
func (h *harness) revive(zone string) {
	h.t.Helper()
	now := metav1.NewTime(h.clock.Now())
	for _, name := range h.names {
		if h.zoneOf[name] != zone {
			continue
		}
		delete(h.dead, name)
		node, err := h.client.CoreV1().Nodes().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		for i := range node.Status.Conditions {
			c := &node.Status.Conditions[i]
			if c.Type == corev1.NodeReady {
				*c = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now}
			}
		}
		if _, err := h.client.CoreV1().Nodes().UpdateStatus(h.ctx, node, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	h.renewLeases()
}

// renewLeases renews every live kubelet's Lease.
func (h *harness) renewLeases() {
	h.t.Helper()
	for _, name := range h.names {
		if h.dead[name] {
			continue
		}
		l := h.leases[name].DeepCopy()
		renew := metav1.NewMicroTime(h.clock.Now())
		l.Spec.RenewTime = &renew
		updated, err := h.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Update(h.ctx, l, metav1.UpdateOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		h.leases[name] = updated
	}
}

// run steps virtual time from now until elapsed (since start) reaches end,
// 100ms at a time, as Run would: kubelets renew every 10s, the monitor pass
// runs every 5s, the NoExecute tainting pass every 100ms. check is called
// after each step with the elapsed time and the evictions counted so far.
func (h *harness) run(end time.Duration, check func(elapsed time.Duration, evictions int)) {
	h.t.Helper()
	for {
		elapsed := h.clock.Now().Sub(start)
		if elapsed > end {
			return
		}
		if elapsed%(10*time.Second) == 0 {
			h.renewLeases()
		}
		if elapsed%(5*time.Second) == 0 {
			if err := h.ctrl.MonitorNodeHealth(h.ctx); err != nil {
				h.t.Fatalf("monitor pass at %v: %v", elapsed, err)
			}
		}
		if err := h.ctrl.DoNoExecuteTaintingPass(h.ctx); err != nil {
			h.t.Fatalf("tainting pass at %v: %v", elapsed, err)
		}
		if check != nil {
			check(elapsed, h.evictions())
		}
		h.clock.Step(100 * time.Millisecond)
	}
}

// evictions sums node_collector_evictions_total over zones.
func (h *harness) evictions() int {
	total := 0.0
	for _, v := range h.metric(nodelifecycle.MetricEvictionsTotal) {
		total += v
	}
	return int(total)
}

// metric returns a metric's values by zone label.
func (h *harness) metric(name string) map[string]float64 {
	h.t.Helper()
	families, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			zone := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "zone" {
					zone = l.GetValue()
				}
			}
			switch {
			case m.GetCounter() != nil:
				out[zone] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[zone] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// noExecuteTainted lists the nodes carrying a NoExecute taint of the
// controller's, checking each carries timeAdded.
func (h *harness) noExecuteTainted() []string {
	h.t.Helper()
	list, err := h.client.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		for _, t := range n.Spec.Taints {
			if t.Effect == corev1.TaintEffectNoExecute && (t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady) {
				if t.TimeAdded == nil {
					h.t.Errorf("node %s: taint %s without timeAdded", n.Name, t.Key)
				}
				out = append(out, n.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// expectCounts checks, at the listed elapsed times, how many nodes the
// queue has tainted.
func expectCounts(t *testing.T, want map[time.Duration]int) func(time.Duration, int) {
	return func(elapsed time.Duration, got int) {
		if w, ok := want[elapsed]; ok && got != w {
			t.Errorf("at %v: %d nodes tainted NoExecute, want %d", elapsed, got, w)
		}
	}
}

func zoneKey(zone string) string { return "r:\x00:" + zone }

// A healthy large zone with 100 dead nodes: half the zone is below the
// 0.55 threshold, so the zone stays Normal and is tainted at 0.1/s. The
// dead nodes go Unknown at the first pass past 40s (45s), are queued at the
// next (50s), and get one taint every 10s from then.
func TestHealthyLargeZoneTaintsAtNormalRate(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 200)
	h.kill("a", 100)
	h.run(150*time.Second, expectCounts(t, map[time.Duration]int{
		45 * time.Second:         0,
		49900 * time.Millisecond: 0,
		50 * time.Second:         1,
		59900 * time.Millisecond: 1,
		60 * time.Second:         2,
		100 * time.Second:        6,
		150 * time.Second:        11,
	}))
	if got := len(h.noExecuteTainted()); got != 11 {
		t.Errorf("nodes with a NoExecute taint = %d, want 11", got)
	}
	if diff := h.metric(nodelifecycle.MetricZoneSize)[zoneKey("a")]; diff != 200 {
		t.Errorf("zone size = %v, want 200", diff)
	}
	if got := h.metric(nodelifecycle.MetricUnhealthyNodes)[zoneKey("a")]; got != 100 {
		t.Errorf("unhealthy = %v, want 100", got)
	}
	if got := h.metric(nodelifecycle.MetricZoneHealth)[zoneKey("a")]; got != 50 {
		t.Errorf("zone health = %v, want 50", got)
	}
	zones := h.ctrl.Zones()
	if len(zones) != 1 || zones[0].State != nodelifecycle.StateNormal || zones[0].QPS != 0.1 {
		t.Errorf("zones = %+v, want one Normal zone at 0.1/s", zones)
	}
}

// A partially disrupted zone of 60 nodes (40 dead, 67%) is larger than
// --large-cluster-size-threshold: tainting slows to 0.01/s, one every 100s.
func TestPartialLargeZoneTaintsAtSecondaryRate(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 60)
	h.addZone("b", 10)
	h.kill("a", 40)
	h.run(250*time.Second, expectCounts(t, map[time.Duration]int{
		50 * time.Second:          1,
		149900 * time.Millisecond: 1,
		150 * time.Second:         2,
		249900 * time.Millisecond: 2,
		250 * time.Second:         3,
	}))
	zones := h.ctrl.Zones()
	want := []nodelifecycle.ZoneInfo{
		{Zone: zoneKey("a"), State: nodelifecycle.StatePartialDisruption, QPS: 0.01, Queued: 37, Held: 40},
		{Zone: zoneKey("b"), State: nodelifecycle.StateNormal, QPS: 0.1},
	}
	if fmt.Sprint(zones) != fmt.Sprint(want) {
		t.Errorf("zones = %+v\nwant %+v", zones, want)
	}
}

// Partially disrupted zones of 50 nodes or fewer are not tainted at all.
func TestPartialSmallZoneNotTainted(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 50) // exactly the threshold
	h.addZone("b", 10)
	h.addZone("c", 5)
	h.kill("a", 30) // 60%
	h.kill("b", 6)  // 60%
	h.kill("c", 3)  // 60%, just more than 2
	h.run(300*time.Second, expectCounts(t, map[time.Duration]int{300 * time.Second: 0}))
	if got := h.noExecuteTainted(); len(got) != 0 {
		t.Errorf("NoExecute taints on %v, want none", got)
	}
	for _, z := range h.ctrl.Zones() {
		if z.State != nodelifecycle.StatePartialDisruption || z.QPS != 0 {
			t.Errorf("zone %q: %s at %v/s, want PartialDisruption at 0", z.Zone, z.State, z.QPS)
		}
	}
	// The NoSchedule pass still marks every silent node unreachable.
	if err := h.ctrl.DoNoScheduleTaintingPass(h.ctx); err != nil {
		t.Fatal(err)
	}
	list, err := h.client.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unreachable := 0
	for _, n := range list.Items {
		for _, tt := range n.Spec.Taints {
			if tt.Key == corev1.TaintNodeUnreachable && tt.Effect == corev1.TaintEffectNoSchedule && tt.TimeAdded != nil {
				unreachable++
			}
		}
		if n.Labels["beta.kubernetes.io/os"] != "linux" {
			t.Errorf("node %s: beta os label = %q, want linux", n.Name, n.Labels["beta.kubernetes.io/os"])
		}
	}
	if unreachable != 39 {
		t.Errorf("unreachable:NoSchedule on %d nodes, want 39", unreachable)
	}
}

// A zone that is entirely dead, while other zones are healthy, is really
// gone: it is tainted at the normal rate, 0.1/s.
func TestFullyDeadZoneTaintsAtNormalRate(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 20)
	h.addZone("b", 20)
	h.addZone("c", 20)
	h.kill("a", 20)
	h.run(100*time.Second, expectCounts(t, map[time.Duration]int{
		50 * time.Second:  1,
		60 * time.Second:  2,
		100 * time.Second: 6,
	}))
	if got := h.metric(nodelifecycle.MetricEvictionsTotal); got[zoneKey("a")] != 6 || len(got) != 1 {
		t.Errorf("evictions by zone = %v, want 6 in zone a only", got)
	}
	if got := h.metric(nodelifecycle.MetricZoneHealth)[zoneKey("a")]; got != 0 {
		t.Errorf("zone a health = %v, want 0", got)
	}
}

// When every zone goes silent the controller blames itself: no NoExecute
// taint at all. When one zone comes back, every node gets a fresh grace
// period: nothing is tainted before it runs out, then the still-dead zones
// are tainted at the normal rate.
func TestAllZonesSilentThenRecovery(t *testing.T) {
	h := newHarness(t)
	for _, z := range []string{"a", "b", "c"} {
		h.addZone(z, 10)
		h.kill(z, 10)
	}
	h.run(200*time.Second, expectCounts(t, map[time.Duration]int{200 * time.Second: 0}))
	if got := h.noExecuteTainted(); len(got) != 0 {
		t.Fatalf("NoExecute taints while every zone is silent: %v", got)
	}
	for _, z := range h.ctrl.Zones() {
		if z.State != nodelifecycle.StateFullDisruption || z.QPS != 0 || z.Held != 0 {
			t.Errorf("zone %q while all down: %+v", z.Zone, z)
		}
	}
	// Zone a comes back at 200.1s; the 205s pass leaves the mode and starts
	// a fresh 40s grace period for everyone: nothing before 245s, then one
	// node in each of b and c every 10s.
	h.clock.Step(100 * time.Millisecond)
	h.revive("a")
	h.run(265*time.Second, expectCounts(t, map[time.Duration]int{
		205 * time.Second:         0,
		244900 * time.Millisecond: 0,
		245 * time.Second:         0, // exactly at the fresh grace period
		249900 * time.Millisecond: 0,
		250 * time.Second:         2,
		259900 * time.Millisecond: 2,
		260 * time.Second:         4,
	}))
	got := h.noExecuteTainted()
	if len(got) != 4 || strings.HasPrefix(got[0], "a-") {
		t.Errorf("tainted = %v, want 2 in b and 2 in c", got)
	}
}

// The controller's writes when a node goes silent: conditions, events, and
// the pods on it marked not Ready.
func TestSilentNodeWrites(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 3)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "a-000", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	pod, err := h.client.CoreV1().Pods("default").Create(h.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(start)}}
	if _, err := h.client.CoreV1().Pods("default").UpdateStatus(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.kill("a", 1)
	h.run(45*time.Second, nil)

	node, err := h.client.CoreV1().Nodes().Get(h.ctx, "a-000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var conds []string
	for _, c := range node.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s/%s/%s hb=%v tr=%v", c.Type, c.Status, c.Reason, c.Message, c.LastHeartbeatTime.Sub(start), c.LastTransitionTime.Sub(start)))
	}
	want := []string{
		"Ready=Unknown/NodeStatusUnknown/Kubelet stopped posting node status. hb=0s tr=45s",
		"MemoryPressure=Unknown/NodeStatusNeverUpdated/Kubelet never posted node status. hb=0s tr=45s",
		"DiskPressure=Unknown/NodeStatusNeverUpdated/Kubelet never posted node status. hb=0s tr=45s",
		"PIDPressure=Unknown/NodeStatusNeverUpdated/Kubelet never posted node status. hb=0s tr=45s",
	}
	if fmt.Sprint(conds) != fmt.Sprint(want) {
		t.Errorf("conditions:\n%s\nwant:\n%s", strings.Join(conds, "\n"), strings.Join(want, "\n"))
	}

	got, err := h.client.CoreV1().Pods("default").Get(h.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Conditions[0]; c.Status != corev1.ConditionFalse || !c.LastTransitionTime.Time.Equal(start.Add(45*time.Second)) {
		t.Errorf("pod Ready = %s at %v, want False at 45s", c.Status, c.LastTransitionTime.Sub(start))
	}

	events, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "a-000" || e.InvolvedObject.Name == "web" {
			evs = append(evs, fmt.Sprintf("%s %s %s %s: %s (%s)", e.Type, e.InvolvedObject.Kind, e.Reason, e.InvolvedObject.Name, e.Message, e.Source.Component))
		}
	}
	sort.Strings(evs)
	wantEvs := []string{
		"Normal Node NodeNotReady a-000: Node a-000 status is now: NodeNotReady (node-controller)",
		"Normal Node RegisteredNode a-000: Registered Node a-000 in Controller (node-controller)",
		"Warning Pod NodeNotReady web: Node is not ready (node-controller)",
	}
	if fmt.Sprint(evs) != fmt.Sprint(wantEvs) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(evs, "\n"), strings.Join(wantEvs, "\n"))
	}

	// The node comes back: taints come off once it posts Ready.
	h.run(60*time.Second, nil)
	if got := h.noExecuteTainted(); fmt.Sprint(got) != "[a-000]" {
		t.Fatalf("tainted = %v, want [a-000]", got)
	}
	h.clock.Step(100 * time.Millisecond)
	h.revive("a")
	h.run(65*time.Second, nil)
	if got := h.noExecuteTainted(); len(got) != 0 {
		t.Errorf("tainted after recovery = %v, want none", got)
	}

	// Deleting the node: RemovingNode.
	if err := h.client.CoreV1().Nodes().Delete(h.ctx, "a-002", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.run(70*time.Second, nil)
	events, err = h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=a-002"})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	sort.Strings(reasons)
	if fmt.Sprint(reasons) != "[RegisteredNode RemovingNode]" {
		t.Errorf("a-002 events = %v, want RegisteredNode and RemovingNode", reasons)
	}
}

// Run with informers: the caches sync, the first tick past the grace
// period marks the silent node Unknown, the node change triggers the
// NoSchedule pass, and Run returns when its context ends. Progress is
// observed through a watch; the test never sleeps.
func TestRunWithInformers(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 2)
	h.kill("a", 1)
	ctrl, err := nodelifecycle.New(nodelifecycle.Config{
		Client: h.client, Clock: h.clock, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := h.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=a-000"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	evw, err := h.client.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=a-000"})
	if err != nil {
		t.Fatal(err)
	}
	defer evw.Stop()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	// The first monitor pass (RegisteredNode) runs after the caches have
	// synced and the monitor ticker exists: only then move the clock.
	for registered := false; !registered; {
		select {
		case ev := <-evw.ResultChan():
			if e, ok := ev.Object.(*corev1.Event); ok && e.Reason == nodelifecycle.EventRegisteredNode {
				registered = true
			}
		case err := <-done:
			t.Fatalf("Run returned early: %v", err)
		case <-ctx.Done():
			t.Fatal("timed out waiting for the first pass")
		}
	}
	h.clock.Step(45 * time.Second)
	var unknown, tainted bool
	for !(unknown && tainted) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			n, _ := ev.Object.(*corev1.Node)
			if n == nil {
				continue
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionUnknown {
					unknown = true
				}
			}
			for _, tt := range n.Spec.Taints {
				if tt.Key == corev1.TaintNodeUnreachable && tt.Effect == corev1.TaintEffectNoSchedule {
					tainted = true
				}
			}
		case <-ctx.Done():
			t.Fatalf("timed out: unknown=%v tainted=%v", unknown, tainted)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// A first pass writes one RegisteredNode per node, several at once; the
// stamps in the events' names follow the nodes' order all the same.
func TestFirstPassEventsInOrder(t *testing.T) {
	h := newHarness(t)
	h.addZone("a", 60)
	if err := h.ctrl.MonitorNodeHealth(h.ctx); err != nil {
		t.Fatal(err)
	}
	nodes, err := h.client.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range nodes.Items {
		want = append(want, n.Name)
	}
	events, err := h.client.CoreV1().Events("default").List(h.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type stamped struct {
		stamp int64
		node  string
	}
	var got []stamped
	for _, e := range events.Items {
		if e.Reason != nodelifecycle.EventRegisteredNode {
			t.Errorf("event %s: reason %s, want only %s", e.Name, e.Reason, nodelifecycle.EventRegisteredNode)
			continue
		}
		node, hex, _ := strings.Cut(e.Name, ".")
		stamp, err := strconv.ParseInt(hex, 16, 64)
		if err != nil || node != e.InvolvedObject.Name {
			t.Fatalf("event name %q: want <node>.<hex nanoseconds> for node %s", e.Name, e.InvolvedObject.Name)
		}
		got = append(got, stamped{stamp, node})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].stamp < got[j].stamp })
	var order []string
	for _, g := range got {
		order = append(order, g.node)
	}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("RegisteredNode events by stamp:\n%v\nwant one per node in the nodes' order:\n%v", order, want)
	}
}
