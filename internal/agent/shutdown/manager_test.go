package shutdown

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/agent/pods"
	"knode/internal/agent/shutdown/logind"
	"knode/internal/agent/shutdown/membus"
)

var t0 = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// fakePods records what the manager asks of the pod worker; a test says
// when each pod stops and when its status is posted.
type fakePods struct {
	mu     sync.Mutex
	clk    *clocktesting.FakeClock
	active []*corev1.Pod
	terms  map[types.UID]*pods.Termination
	finals map[types.UID]corev1.PodStatus
	order  []string // "name@seconds since t0"
}

func (f *fakePods) ActivePods(context.Context) ([]*corev1.Pod, error) { return f.active, nil }
func (f *fakePods) Kick()                                             {}

func (f *fakePods) Terminate(p *corev1.Pod, grace time.Duration, final func(*corev1.PodStatus)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clk.Now()
	f.terms[p.UID] = &pods.Termination{Requested: now, Grace: grace}
	st := corev1.PodStatus{Phase: corev1.PodRunning}
	final(&st)
	f.finals[p.UID] = st
	f.order = append(f.order, p.Name+"@"+now.Sub(t0).String())
}

func (f *fakePods) Terminated(uid types.UID) (pods.Termination, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.terms[uid]
	if !ok {
		return pods.Termination{}, false
	}
	return *t, true
}

// finish marks a pod stopped and its status posted now.
func (f *fakePods) finish(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.active {
		if p.Name == name {
			t := f.terms[p.UID]
			t.Stopped, t.Posted = f.clk.Now(), f.clk.Now()
		}
	}
}

type event struct{ Type, Reason, Message string }

type harness struct {
	clk    *clocktesting.FakeClock
	pods   *fakePods
	bus    *membus.Bus
	m      *Manager
	dir    string
	reg    *prometheus.Registry
	mu     sync.Mutex
	events []event
	syncs  int
}

func newHarness(t *testing.T, groups []Group, delay time.Duration, podList ...*corev1.Pod) *harness {
	t.Helper()
	h := &harness{clk: clocktesting.NewFakeClock(t0), dir: t.TempDir(), reg: prometheus.NewRegistry()}
	h.pods = &fakePods{clk: h.clk, active: podList, terms: map[types.UID]*pods.Termination{}, finals: map[types.UID]corev1.PodStatus{}}
	dropIns := filepath.Join(h.dir, "logind.conf.d")
	h.bus = membus.New(delay, dropIns)
	m, err := New(Config{
		Groups:     groups,
		DropInDir:  dropIns,
		Pods:       h.pods,
		RootDir:    h.dir,
		Registerer: h.reg,
		Clock:      h.clk,
		Event: func(typ, reason, msg string) {
			h.mu.Lock()
			h.events = append(h.events, event{typ, reason, msg})
			h.mu.Unlock()
		},
		SyncStatus: func() { h.mu.Lock(); h.syncs++; h.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

func (h *harness) setup(t *testing.T) {
	t.Helper()
	if err := h.m.Setup(context.Background(), h.bus); err != nil {
		t.Fatalf("Setup: %v", err)
	}
}

// stepTo advances the clock to t0+at and steps the manager.
func (h *harness) stepTo(at time.Duration) time.Time {
	h.clk.SetTime(t0.Add(at))
	return h.m.Step(context.Background())
}

// runOut steps the manager at every time it asks for until it is done.
func (h *harness) runOut() {
	for next := h.m.Step(context.Background()); !next.IsZero(); next = h.m.Step(context.Background()) {
		h.clk.SetTime(next)
	}
}

func (h *harness) eventReasons() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		out = append(out, e.Type+"/"+e.Reason)
	}
	return out
}

func mkpod(name string, priority int32, grace *int64) *corev1.Pod {
	p := pod(name, ptr.To(priority), grace)
	p.UID = types.UID("uid-" + name)
	return p
}

var threeGroups = []Group{{0, 20 * time.Second}, {1000, 5 * time.Second}, {SystemCriticalPriority, 10 * time.Second}}

func TestGroupTimers(t *testing.T) {
	stuck := mkpod("stuck", 0, nil)              // never stops: killed after its grace
	quick := mkpod("quick", 5, ptr.To[int64](3)) // its own shorter grace
	critical := mkpod("critical", SystemCriticalPriority+1000, nil)
	h := newHarness(t, threeGroups, time.Minute, stuck, quick, critical)
	h.setup(t)
	if h.bus.HeldLocks() != 1 {
		t.Fatalf("held locks after Setup = %d, want 1", h.bus.HeldLocks())
	}

	h.m.Begin(context.Background())
	if err := h.m.ShutdownStatus(); err == nil || err.Error() != "node is shutting down" {
		t.Errorf("ShutdownStatus = %v, want node is shutting down", err)
	}
	if h.syncs != 1 {
		t.Errorf("status syncs asked at Begin = %d, want 1", h.syncs)
	}
	if diff := cmp.Diff([]string{"stuck@0s", "quick@0s"}, h.pods.order); diff != "" {
		t.Errorf("terminated at Begin (-want +got):\n%s", diff)
	}
	if got := h.pods.terms["uid-quick"].Grace; got != 3*time.Second {
		t.Errorf("quick's grace = %v, want its own 3s", got)
	}

	h.pods.finish("quick")
	if next := h.stepTo(19 * time.Second); next.After(t0.Add(20 * time.Second)) {
		t.Errorf("next step %v after the group's end", next.Sub(t0))
	}
	if len(h.pods.order) != 2 {
		t.Fatalf("a group started before the first one's period ran out: %v", h.pods.order)
	}
	// The period runs out: the empty group at 1000 is skipped, and the
	// critical group starts at once.
	h.stepTo(20 * time.Second)
	if diff := cmp.Diff([]string{"stuck@0s", "quick@0s", "critical@20s"}, h.pods.order); diff != "" {
		t.Errorf("terminations (-want +got):\n%s", diff)
	}
	h.pods.finish("critical")
	// Every group is through, but stuck's status is not posted: wait for
	// it until the status reserve runs out (20 s + 10 s + 2 s).
	h.stepTo(25 * time.Second)
	if !h.m.HoldsLock() {
		t.Fatal("lock released while a final status was outstanding and time was left")
	}
	h.stepTo(32 * time.Second)
	if h.m.HoldsLock() || h.bus.HeldLocks() != 0 {
		t.Fatal("lock still held after the reserve ran out")
	}
	if err := h.m.ShutdownStatus(); err == nil {
		t.Error("the node stopped shutting down when the lock was released")
	}

	st, err := ReadState(filepath.Join(h.dir, "graceful_node_shutdown_state"))
	if err != nil {
		t.Fatal(err)
	}
	if !st.StartTime.Equal(t0) || !st.EndTime.Equal(t0.Add(32*time.Second)) {
		t.Errorf("state file = %+v, want start t0 and end t0+32s", st)
	}
	if got := gaugeValue(h.m.endGauge); got != float64(t0.Add(32*time.Second).Unix()) {
		t.Errorf("end gauge = %v", got)
	}
	if got := gaugeValue(h.m.startGauge); got != float64(t0.Unix()) {
		t.Errorf("start gauge = %v", got)
	}

	rep := readReport(t, h.dir)
	want := Report{
		Started: t0, Ended: t0.Add(32 * time.Second),
		DelayGrantedSeconds: 60, DelayRequestedSeconds: 37, StatusReserveSeconds: 2,
		Groups: []GroupReport{
			{Priority: 0, BudgetSeconds: 20, WaitedSeconds: 20, Pods: []PodReport{
				{Namespace: "default", Name: "stuck", UID: "uid-stuck", Priority: 0, GraceSeconds: 20, TookSeconds: 32, KilledAfterGrace: true},
				{Namespace: "default", Name: "quick", UID: "uid-quick", Priority: 5, GraceSeconds: 3, TookSeconds: 0, Stopped: true, StatusPosted: true},
			}},
			{Priority: SystemCriticalPriority, BudgetSeconds: 10, WaitedSeconds: 5, Pods: []PodReport{
				{Namespace: "default", Name: "critical", UID: "uid-critical", Priority: SystemCriticalPriority + 1000, GraceSeconds: 10, TookSeconds: 0, Stopped: true, StatusPosted: true},
			}},
		},
	}
	if diff := cmp.Diff(want, rep); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	reasons := h.eventReasons()
	if diff := cmp.Diff([]string{"Normal/Shutdown", "Normal/ShutdownReport"}, reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if msg := h.events[1].Message; !strings.Contains(msg, "3 pods stopped in 2 priority groups, 1 killed after their grace, 2 of 3 final statuses posted") {
		t.Errorf("report event = %q", msg)
	}
}

func readReport(t *testing.T, dir string) Report {
	t.Helper()
	var rep Report
	data, err := os.ReadFile(filepath.Join(dir, "shutdown-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestFinalStatus(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute, mkpod("a", 0, nil))
	h.setup(t)
	h.m.Begin(context.Background())
	st := h.pods.finals["uid-a"]
	want := corev1.PodStatus{
		Phase: corev1.PodFailed, Reason: "Terminated", Message: "Pod was terminated in response to imminent node shutdown.",
		Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet",
			Message: "Pod was terminated in response to imminent node shutdown.", LastTransitionTime: metav1.NewTime(t0)}},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("final status (-want +got):\n%s", diff)
	}
	succeeded := corev1.PodStatus{Phase: corev1.PodSucceeded}
	finalStatus(t0)(&succeeded)
	if succeeded.Phase != corev1.PodSucceeded {
		t.Errorf("a succeeded pod became %s", succeeded.Phase)
	}
}

func TestReleaseAsSoonAsEveryStatusIsPosted(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute, mkpod("a", 0, nil), mkpod("b", SystemCriticalPriority, nil))
	h.setup(t)
	h.m.Begin(context.Background())
	h.clk.SetTime(t0.Add(1500 * time.Millisecond))
	h.pods.finish("a")
	h.stepTo(1500 * time.Millisecond) // group 0 done early; critical starts
	h.clk.SetTime(t0.Add(2 * time.Second))
	h.pods.finish("b")
	if next := h.stepTo(2 * time.Second); !next.IsZero() {
		t.Errorf("Step after the last status = %v, want zero (done)", next)
	}
	if h.bus.HeldLocks() != 0 {
		t.Error("lock held after every pod's final status was posted")
	}
	if got := readReport(t, h.dir).Ended; !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("ended at %v, want t0+2s", got.Sub(t0))
	}
}

func TestIdleNodeReleasesAtOnce(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute)
	h.setup(t)
	h.m.Begin(context.Background())
	if h.bus.HeldLocks() != 0 {
		t.Error("an idle node kept its lock after Begin")
	}
	if got := readReport(t, h.dir); len(got.Groups) != 0 || !got.Ended.Equal(t0) {
		t.Errorf("report = %+v", got)
	}
}

func TestShortDelayIsRaised(t *testing.T) {
	h := newHarness(t, threeGroups, 5*time.Second, mkpod("a", 0, nil))
	h.setup(t)
	if h.bus.Reloads() != 1 {
		t.Errorf("reloads = %d, want 1", h.bus.Reloads())
	}
	data, err := os.ReadFile(filepath.Join(h.dir, "logind.conf.d", logind.DropInName))
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=37\n"; string(data) != want {
		t.Errorf("drop-in = %q, want %q", data, want)
	}
	if d, _ := h.bus.InhibitDelayMax(); d != 37*time.Second {
		t.Errorf("delay after the reload = %v", d)
	}
	if len(h.eventReasons()) != 0 {
		t.Errorf("events = %v, want none", h.eventReasons())
	}
}

func TestShortDelayIsFitted(t *testing.T) {
	h := newHarness(t, threeGroups, 17*time.Second, mkpod("low", 0, nil), mkpod("mid", 1000, nil), mkpod("crit", SystemCriticalPriority, nil))
	h.bus.RefuseRaise(true)
	done := make(chan error)
	go func() { done <- h.m.Setup(context.Background(), h.bus) }()
	// Setup reads the delay again with a backoff on the clock: move the
	// clock each time it waits.
	for waiting := true; waiting; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		default:
			if h.clk.HasWaiters() {
				h.clk.Step(5 * time.Second)
			}
			runtime.Gosched()
		}
	}
	if h.bus.Reloads() != 1 || h.bus.HeldLocks() != 1 {
		t.Fatalf("reloads %d, held locks %d; want 1 and 1 (the lock is taken anyway)", h.bus.Reloads(), h.bus.HeldLocks())
	}
	// 17 s granted, 2 s kept for statuses: 15 s for 35 s of groups. The
	// lowest group gives all its 20 s; the others keep theirs.
	if diff := cmp.Diff([]string{"Warning/ShutdownGracePeriodTruncated"}, h.eventReasons()); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}
	wantMsg := "logind grants a shutdown delay of 17s, less than the 37s requested; the shutdown plan is cut to fit: priority 0 from 20s to 0s"
	if got := h.events[0].Message; got != wantMsg {
		t.Errorf("warning = %q\nwant      %q", got, wantMsg)
	}
	start := h.clk.Now()
	h.m.Begin(context.Background())
	h.pods.mu.Lock()
	graces := map[string]time.Duration{}
	for uid, term := range h.pods.terms {
		graces[string(uid)] = term.Grace
	}
	h.pods.mu.Unlock()
	// Group 0 has no time: its pod is killed at once, the group ends at once.
	if graces["uid-low"] != 0 {
		t.Errorf("low's grace = %v, want 0", graces["uid-low"])
	}
	h.clk.SetTime(start)
	h.m.Step(context.Background()) // group 0 (no time) is through: 1000 starts
	h.clk.SetTime(start.Add(5 * time.Second))
	h.m.Step(context.Background()) // 1000's 5 s are up: critical starts
	h.pods.mu.Lock()
	got := map[string]time.Duration{}
	for uid, term := range h.pods.terms {
		got[string(uid)] = term.Grace
	}
	h.pods.mu.Unlock()
	if diff := cmp.Diff(map[string]time.Duration{"uid-low": 0, "uid-mid": 5 * time.Second, "uid-crit": 10 * time.Second}, got); diff != "" {
		t.Errorf("graces (-want +got):\n%s", diff)
	}
	h.clk.SetTime(start.Add(15 * time.Second))
	h.m.Step(context.Background()) // every group through; statuses outstanding
	if !h.m.HoldsLock() {
		t.Fatal("lock released before the status reserve")
	}
	h.clk.SetTime(start.Add(17 * time.Second))
	h.m.Step(context.Background())
	if h.bus.HeldLocks() != 0 {
		t.Error("lock still held when the granted delay ran out")
	}
	if rep := readReport(t, h.dir); len(rep.Cuts) != 1 || rep.DelayGrantedSeconds != 17 {
		t.Errorf("report cuts %+v, granted %v", rep.Cuts, rep.DelayGrantedSeconds)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute, mkpod("low", 0, nil), mkpod("crit", SystemCriticalPriority, nil))
	h.setup(t)
	ctx := context.Background()
	h.m.Begin(ctx)
	if rej := h.m.Admit(mkpod("new", 0, nil)); rej == nil || rej.Reason != "NodeShutdown" || rej.Message != "Pod was rejected as the node is shutting down." {
		t.Errorf("Admit while shutting down = %+v", rej)
	}
	h.clk.SetTime(t0.Add(5 * time.Second))
	if err := h.m.Cancel(ctx, h.bus); err != nil {
		t.Fatal(err)
	}
	if h.m.ShutdownStatus() != nil || h.m.Admit(mkpod("new", 0, nil)) != nil {
		t.Error("still shutting down after the cancellation")
	}
	// The lock was still held: no second one.
	if h.bus.Locks() != 1 || h.bus.HeldLocks() != 1 {
		t.Errorf("locks taken %d, held %d; want 1 and 1", h.bus.Locks(), h.bus.HeldLocks())
	}
	// No further group starts.
	h.stepTo(30 * time.Second)
	if diff := cmp.Diff([]string{"low@0s"}, h.pods.order); diff != "" {
		t.Errorf("terminations (-want +got):\n%s", diff)
	}
	if rep := readReport(t, h.dir); !rep.Cancelled || len(rep.Groups) != 1 {
		t.Errorf("report = %+v, want cancelled with one group", rep)
	}
	if diff := cmp.Diff([]string{"Normal/Shutdown", "Normal/Shutdown", "Normal/ShutdownReport"}, h.eventReasons()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if h.events[1].Message != "Shutdown manager detected shutdown cancellation" {
		t.Errorf("cancellation event = %q", h.events[1].Message)
	}

	// A shutdown that ran to its end released the lock; a cancellation
	// then takes a new one.
	h.m.Begin(ctx)
	h.runOut()
	if h.bus.HeldLocks() != 0 {
		t.Fatal("lock held after the second shutdown ended")
	}
	if err := h.m.Cancel(ctx, h.bus); err != nil {
		t.Fatal(err)
	}
	if h.bus.Locks() != 2 || h.bus.HeldLocks() != 1 {
		t.Errorf("after cancelling a finished shutdown: locks taken %d, held %d; want 2 and 1", h.bus.Locks(), h.bus.HeldLocks())
	}
}

func TestShutdownUnderWayAtSetup(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute, mkpod("a", 0, nil))
	h.bus.SetPreparingForShutdown(true)
	h.setup(t)
	if h.m.ShutdownStatus() == nil || len(h.pods.order) != 1 {
		t.Errorf("a shutdown under way at start was not acted on: status %v, terminated %v", h.m.ShutdownStatus(), h.pods.order)
	}
}

func TestHandleSignals(t *testing.T) {
	h := newHarness(t, threeGroups, time.Minute)
	h.setup(t)
	ctx := context.Background()
	if err := h.m.Handle(ctx, h.bus, logind.Signal{Kind: logind.OwnerChanged, Owner: ""}); err != nil {
		t.Fatal(err)
	}
	if h.m.HoldsLock() || h.bus.HeldLocks() != 0 {
		t.Error("lock kept after logind went away")
	}
	if err := h.m.Handle(ctx, h.bus, logind.Signal{Kind: logind.OwnerChanged, Owner: ":1.42"}); err != nil {
		t.Fatal(err)
	}
	if !h.m.HoldsLock() || h.bus.Locks() != 2 {
		t.Errorf("lock not taken again after logind came back: held %v, taken %d", h.m.HoldsLock(), h.bus.Locks())
	}
	if err := h.m.Handle(ctx, h.bus, logind.Signal{Kind: logind.PrepareForShutdown, Active: true}); err != nil {
		t.Fatal(err)
	}
	if h.m.ShutdownStatus() == nil {
		t.Error("PrepareForShutdown(true) did not start a shutdown")
	}
	if err := h.m.Handle(ctx, h.bus, logind.Signal{Kind: logind.PrepareForShutdown, Active: false}); err != nil {
		t.Fatal(err)
	}
	if h.m.ShutdownStatus() != nil {
		t.Error("PrepareForShutdown(false) did not cancel")
	}
}

func TestGaugesRestoredFromStateFile(t *testing.T) {
	dir := t.TempDir()
	start, end := t0.Add(-time.Hour), t0.Add(-time.Hour+30*time.Second)
	if err := writeJSON(filepath.Join(dir, "graceful_node_shutdown_state"), State{StartTime: start, EndTime: end}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := New(Config{Groups: threeGroups, Pods: &fakePods{}, RootDir: dir, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got := gaugeValue(m.startGauge); got != float64(start.Unix()) {
		t.Errorf("start gauge = %v, want %v", got, start.Unix())
	}
	if got := gaugeValue(m.endGauge); got != float64(end.Unix()) {
		t.Errorf("end gauge = %v, want %v", got, end.Unix())
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if diff := cmp.Diff([]string{"kubelet_graceful_shutdown_end_time_seconds", "kubelet_graceful_shutdown_start_time_seconds"}, names); diff != "" {
		t.Errorf("registered metrics (-want +got):\n%s", diff)
	}
}

func TestConfigErrors(t *testing.T) {
	_, err := New(Config{StatusReserve: -time.Second})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, want := range []string{"Config.Groups is empty", "Config.Pods is required", "Config.RootDir is required", "status reserve -1s: must not be negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}
