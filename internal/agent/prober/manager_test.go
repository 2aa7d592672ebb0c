package prober_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/agent/prober"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// recorder keeps the events and OnChange calls the manager makes.
type recorder struct {
	mu      sync.Mutex
	events  []string
	changes []types.UID
	changed chan types.UID
}

func (r *recorder) record(pod *corev1.Pod, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s/%s %s %s %s", pod.Namespace, pod.Name, eventType, reason, message))
}

func (r *recorder) onChange(uid types.UID) {
	r.mu.Lock()
	r.changes = append(r.changes, uid)
	r.mu.Unlock()
	if r.changed != nil {
		r.changed <- uid
	}
}

// take returns the events recorded since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// takeChanges returns the OnChange calls since the last takeChanges.
func (r *recorder) takeChanges() []types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.changes
	r.changes = nil
	return ch
}

type env struct {
	m     *prober.Manager
	rec   *recorder
	clock *clocktesting.FakeClock
}

func newEnv(t *testing.T, cfg prober.Config) *env {
	t.Helper()
	rec := &recorder{}
	if cfg.Clock == nil {
		cfg.Clock = clocktesting.NewFakeClock(t0)
	}
	cfg.Recorder = rec.record
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.OnChange = rec.onChange
	m, err := prober.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{m: m, rec: rec, clock: cfg.Clock.(*clocktesting.FakeClock)}
}

// expect checks the events since the last check.
func (e *env) expect(t *testing.T, step string, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, e.rec.take()); diff != "" {
		t.Errorf("%s: events (-want +got):\n%s", step, diff)
	}
}

func (e *env) status(t *testing.T, step string, uid types.UID, container string, want prober.Status) {
	t.Helper()
	if diff := cmp.Diff(want, e.m.Status(uid, container)); diff != "" {
		t.Errorf("%s: status of %s (-want +got):\n%s", step, container, diff)
	}
}

func (e *env) nextDue(t *testing.T, step string, want time.Time, wantOK bool) {
	t.Helper()
	got, ok := e.m.NextDue()
	if ok != wantOK || (ok && !got.Equal(want)) {
		t.Errorf("%s: NextDue = %v %v, want %v %v", step, got.Sub(t0), ok, want.Sub(t0), wantOK)
	}
}

func newPod(uid string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{Containers: containers, RestartPolicy: corev1.RestartPolicyAlways},
	}
}

func portOf(t *testing.T, addr net.Addr) int32 {
	t.Helper()
	return int32(addr.(*net.TCPAddr).Port)
}

func TestLivenessHTTP(t *testing.T) {
	var code atomic.Int32
	var hits atomic.Int32
	code.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(int(code.Load()))
	}))
	t.Cleanup(srv.Close)
	port := portOf(t, srv.Listener.Addr())

	e := newEnv(t, prober.Config{})
	pod := newPod("u1", corev1.Container{Name: "app", LivenessProbe: &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port)}},
		InitialDelaySeconds: 5, PeriodSeconds: 10, FailureThreshold: 3,
		TerminationGracePeriodSeconds: ptr.To[int64](2),
	}})
	ctx := context.Background()
	e.m.AddPod(pod)
	e.m.UpdateContainer("u1", "app", "c1", t0, "127.0.0.1")
	e.status(t, "running", "u1", "app", prober.Status{Started: true, Ready: true})
	if got := e.rec.takeChanges(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("OnChange after the container started: %v", got)
	}
	e.nextDue(t, "start", at(5), true)

	e.m.Step(ctx, at(4))
	if hits.Load() != 0 {
		t.Fatalf("probed %d times before the initial delay", hits.Load())
	}
	e.m.Step(ctx, at(5))
	if hits.Load() != 1 {
		t.Fatalf("probed %d times at the initial delay, want 1", hits.Load())
	}
	e.expect(t, "success")
	e.nextDue(t, "after the first probe", at(15), true)

	code.Store(http.StatusInternalServerError)
	unhealthy := "default/web Warning Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 500"
	e.m.Step(ctx, at(15))
	e.expect(t, "failure 1", unhealthy)
	e.m.Step(ctx, at(25))
	e.expect(t, "failure 2", unhealthy)
	e.status(t, "below the threshold", "u1", "app", prober.Status{Started: true, Ready: true})
	if got := e.rec.takeChanges(); len(got) != 0 {
		t.Errorf("OnChange below the threshold: %v", got)
	}
	e.m.Step(ctx, at(35))
	e.expect(t, "failure 3", unhealthy, "default/web Normal Killing Container app failed liveness probe, will be restarted")
	e.status(t, "at the threshold", "u1", "app", prober.Status{Started: true, Ready: true, Kill: &prober.Kill{
		Probe: prober.Liveness, Message: "Container app failed liveness probe, will be restarted", GracePeriodSeconds: ptr.To[int64](2),
	}})
	if got := e.rec.takeChanges(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("OnChange at the threshold: %v", got)
	}
	e.nextDue(t, "killed", time.Time{}, false)
	e.m.Step(ctx, at(45))
	if hits.Load() != 4 {
		t.Errorf("probed %d times in all, want 4: no probe after the failure verdict", hits.Load())
	}

	// The restarted container starts afresh.
	code.Store(http.StatusOK)
	e.m.UpdateContainer("u1", "app", "c2", at(50), "127.0.0.1")
	e.status(t, "restarted", "u1", "app", prober.Status{Started: true, Ready: true})
	e.nextDue(t, "restarted", at(55), true)
	e.m.Step(ctx, at(55))
	e.expect(t, "restarted")
	if hits.Load() != 5 {
		t.Errorf("probed %d times in all, want 5", hits.Load())
	}
}

func TestReadinessTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := portOf(t, l.Addr())

	e := newEnv(t, prober.Config{})
	e.m.AddPod(newPod("u1", corev1.Container{
		Name:  "app",
		Ports: []corev1.ContainerPort{{Name: "db", ContainerPort: port}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("db")}},
			PeriodSeconds: 5, SuccessThreshold: 2, FailureThreshold: 1,
		},
	}))
	ctx := context.Background()
	e.m.UpdateContainer("u1", "app", "c1", t0, "127.0.0.1")
	e.status(t, "running", "u1", "app", prober.Status{Started: true})
	e.rec.takeChanges()

	e.m.Step(ctx, t0)
	e.status(t, "one success of two", "u1", "app", prober.Status{Started: true})
	e.m.Step(ctx, at(5))
	e.status(t, "two successes", "u1", "app", prober.Status{Started: true, Ready: true})
	if got := e.rec.takeChanges(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("OnChange when ready: %v", got)
	}

	_ = l.Close()
	e.m.Step(ctx, at(10))
	e.expect(t, "closed", fmt.Sprintf("default/web Warning Unhealthy Readiness probe failed: dial tcp 127.0.0.1:%d: connect: connection refused", port))
	e.status(t, "closed", "u1", "app", prober.Status{Started: true})
	e.nextDue(t, "readiness keeps probing", at(15), true)

	// A stopped container is neither started nor ready, and not probed.
	e.m.UpdateContainer("u1", "app", "", time.Time{}, "")
	e.status(t, "stopped", "u1", "app", prober.Status{})
	e.nextDue(t, "stopped", time.Time{}, false)
}

// shRunner runs exec probes as local processes with sh, standing in for
// a runtime, and reports each command on calls.
type shRunner struct {
	calls chan string
	// block, when set, holds every command until it is closed.
	block chan struct{}
}

func (s *shRunner) ExecSync(ctx context.Context, pod *corev1.Pod, container, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	if s.calls != nil {
		s.calls <- container + ": " + strings.Join(cmd, " ")
	}
	if s.block != nil {
		<-s.block
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.WaitDelay = 50 * time.Millisecond
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		return out, 0, ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out, exit.ExitCode(), nil
	}
	return out, 0, err
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case s := <-ch:
			out = append(out, s)
		default:
			slices.Sort(out)
			return out
		}
	}
}

func sh(script string) corev1.ProbeHandler {
	return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "started")
	runner := &shRunner{calls: make(chan string, 10)}
	e := newEnv(t, prober.Config{Exec: runner})
	e.m.AddPod(newPod("u1", corev1.Container{
		Name:           "app",
		StartupProbe:   &corev1.Probe{ProbeHandler: sh("test -f " + marker), PeriodSeconds: 1, FailureThreshold: 5},
		LivenessProbe:  &corev1.Probe{ProbeHandler: sh("echo live"), PeriodSeconds: 10},
		ReadinessProbe: &corev1.Probe{ProbeHandler: sh("echo ready"), PeriodSeconds: 10},
	}))
	ctx := context.Background()
	e.m.UpdateContainer("u1", "app", "c1", t0, "127.0.0.1")
	e.status(t, "starting", "u1", "app", prober.Status{})
	e.nextDue(t, "starting", t0, true)

	e.m.Step(ctx, t0)
	if diff := cmp.Diff([]string{"app: sh -c test -f " + marker}, drain(runner.calls)); diff != "" {
		t.Errorf("only the startup probe runs (-want +got):\n%s", diff)
	}
	e.expect(t, "startup failed once", "default/web Warning Unhealthy Startup probe failed: ")
	e.nextDue(t, "startup pending", at(1), true)

	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e.rec.takeChanges()
	e.m.Step(ctx, at(1))
	if diff := cmp.Diff([]string{"app: sh -c test -f " + marker}, drain(runner.calls)); diff != "" {
		t.Errorf("still only the startup probe (-want +got):\n%s", diff)
	}
	e.expect(t, "startup succeeded")
	e.status(t, "started", "u1", "app", prober.Status{Started: true})
	if got := e.rec.takeChanges(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("OnChange when started: %v", got)
	}
	// Liveness and readiness were due since the container started.
	e.nextDue(t, "started", t0, true)
	e.m.Step(ctx, at(1))
	if diff := cmp.Diff([]string{"app: sh -c echo live", "app: sh -c echo ready"}, drain(runner.calls)); diff != "" {
		t.Errorf("after startup (-want +got):\n%s", diff)
	}
	e.status(t, "ready", "u1", "app", prober.Status{Started: true, Ready: true})
	// The startup probe is done; the others run on their grid from t0.
	e.nextDue(t, "ready", at(10), true)
	e.m.Step(ctx, at(10))
	if diff := cmp.Diff([]string{"app: sh -c echo live", "app: sh -c echo ready"}, drain(runner.calls)); diff != "" {
		t.Errorf("at 10s (-want +got):\n%s", diff)
	}
}

func TestStartupFailureKills(t *testing.T) {
	e := newEnv(t, prober.Config{Exec: &shRunner{}})
	pod := newPod("u1", corev1.Container{
		Name:          "app",
		StartupProbe:  &corev1.Probe{ProbeHandler: sh("echo not yet; exit 3"), PeriodSeconds: 1, FailureThreshold: 2},
		LivenessProbe: &corev1.Probe{ProbeHandler: sh("true")},
	})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	e.m.AddPod(pod)
	e.m.UpdateContainer("u1", "app", "c1", t0, "")
	ctx := context.Background()
	e.m.Step(ctx, t0)
	e.m.Step(ctx, at(1))
	e.expect(t, "startup failed twice",
		"default/web Warning Unhealthy Startup probe failed: not yet\n",
		"default/web Warning Unhealthy Startup probe failed: not yet\n",
		"default/web Normal Killing Container app failed startup probe")
	e.status(t, "killed", "u1", "app", prober.Status{Kill: &prober.Kill{Probe: prober.Startup, Message: "Container app failed startup probe"}})
	e.nextDue(t, "killed", time.Time{}, false)
}

func TestErroredProbeDoesNotCount(t *testing.T) {
	e := newEnv(t, prober.Config{})
	e.m.AddPod(newPod("u1", corev1.Container{Name: "app", LivenessProbe: &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("nope")}},
		FailureThreshold: 1,
	}}))
	e.m.UpdateContainer("u1", "app", "c1", t0, "127.0.0.1")
	ctx := context.Background()
	for i := range 3 {
		e.m.Step(ctx, at(10*i))
		e.expect(t, "errored", `default/web Warning Unhealthy Liveness probe errored and resulted in unknown state: strconv.Atoi: parsing "nope": invalid syntax`)
	}
	e.status(t, "errored", "u1", "app", prober.Status{Started: true, Ready: true})
	e.nextDue(t, "errored", at(30), true)
}

func TestDeletionSettlesLiveness(t *testing.T) {
	runner := &shRunner{calls: make(chan string, 10)}
	e := newEnv(t, prober.Config{Exec: runner})
	pod := newPod("u1", corev1.Container{Name: "app", LivenessProbe: &corev1.Probe{ProbeHandler: sh("exit 1"), FailureThreshold: 1}})
	e.m.AddPod(pod)
	e.m.UpdateContainer("u1", "app", "c1", t0, "")
	ctx := context.Background()
	e.m.Step(ctx, t0)
	if e.m.Status("u1", "app").Kill == nil {
		t.Fatal("liveness did not fail")
	}
	e.rec.takeChanges()

	deleting := pod.DeepCopy()
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(at(1)))
	e.m.AddPod(deleting)
	e.status(t, "deleting", "u1", "app", prober.Status{Started: true, Ready: true})
	if got := e.rec.takeChanges(); !slices.Equal(got, []types.UID{"u1"}) {
		t.Errorf("OnChange on deletion: %v", got)
	}
	// A new run while the pod is being deleted is not probed either.
	e.m.UpdateContainer("u1", "app", "c2", at(2), "")
	e.nextDue(t, "deleting", time.Time{}, false)
	drain(runner.calls)
	e.m.Step(ctx, at(20))
	if got := drain(runner.calls); len(got) != 0 {
		t.Errorf("probed while deleting: %v", got)
	}
}

func TestContainersWithoutProbes(t *testing.T) {
	e := newEnv(t, prober.Config{})
	pod := newPod("u1", corev1.Container{Name: "app"})
	pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	e.m.AddPod(pod)
	e.status(t, "not running", "u1", "app", prober.Status{})
	e.m.UpdateContainer("u1", "app", "c1", t0, "")
	e.m.UpdateContainer("u1", "init", "c0", t0, "")
	e.status(t, "running", "u1", "app", prober.Status{Started: true, Ready: true})
	e.status(t, "a regular init container is not tracked", "u1", "init", prober.Status{})
	e.status(t, "unknown pod", "u2", "app", prober.Status{})
	e.nextDue(t, "no probes", time.Time{}, false)
	e.m.Step(context.Background(), at(100))
	e.expect(t, "no probes")
}

func TestSidecarLiveness(t *testing.T) {
	e := newEnv(t, prober.Config{Exec: &shRunner{}})
	pod := newPod("u1", corev1.Container{Name: "app"})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.InitContainers = []corev1.Container{{
		Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		LivenessProbe: &corev1.Probe{ProbeHandler: sh("echo dead; exit 1"), FailureThreshold: 1},
	}}
	e.m.AddPod(pod)
	e.m.UpdateContainer("u1", "proxy", "p1", t0, "")
	e.m.Step(context.Background(), t0)
	e.expect(t, "sidecar", "default/web Warning Unhealthy Liveness probe failed: dead\n", "default/web Normal Killing Init container proxy failed liveness probe")
	e.status(t, "sidecar", "u1", "proxy", prober.Status{Started: true, Ready: true, Kill: &prober.Kill{Probe: prober.Liveness, Message: "Init container proxy failed liveness probe"}})
}

func TestReadinessGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	hs.SetServingStatus("api", healthpb.HealthCheckResponse_SERVING)

	e := newEnv(t, prober.Config{})
	e.m.AddPod(newPod("u1", corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: portOf(t, l.Addr()), Service: ptr.To("api")}},
		FailureThreshold: 1, TimeoutSeconds: 5,
	}}))
	e.m.UpdateContainer("u1", "app", "c1", t0, "127.0.0.1")
	ctx := context.Background()
	e.m.Step(ctx, t0)
	e.status(t, "serving", "u1", "app", prober.Status{Started: true, Ready: true})
	hs.SetServingStatus("api", healthpb.HealthCheckResponse_NOT_SERVING)
	e.m.Step(ctx, at(10))
	e.expect(t, "not serving", `default/web Warning Unhealthy Readiness probe failed: service unhealthy (responded with "NOT_SERVING")`)
	e.status(t, "not serving", "u1", "app", prober.Status{Started: true})
}

func TestStaleOutcomesAreDropped(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(m *prober.Manager)
	}{
		{"pod removed", func(m *prober.Manager) { m.RemovePod("u1") }},
		{"container restarted", func(m *prober.Manager) { m.UpdateContainer("u1", "app", "c2", at(1), "") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runner := &shRunner{calls: make(chan string, 1), block: make(chan struct{})}
			e := newEnv(t, prober.Config{Exec: runner})
			e.m.AddPod(newPod("u1", corev1.Container{Name: "app", LivenessProbe: &corev1.Probe{ProbeHandler: sh("exit 1"), FailureThreshold: 1}}))
			e.m.UpdateContainer("u1", "app", "c1", t0, "")
			done := make(chan struct{})
			go func() {
				defer close(done)
				e.m.Step(context.Background(), t0)
			}()
			<-runner.calls
			tt.change(e.m)
			close(runner.block)
			<-done
			e.expect(t, "stale")
			if st := e.m.Status("u1", "app"); st.Kill != nil {
				t.Errorf("stale failure applied: %+v", st)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, prober.Config{Exec: &shRunner{}, Registerer: reg})
	e.m.AddPod(newPod("u1",
		corev1.Container{Name: "a", ReadinessProbe: &corev1.Probe{ProbeHandler: sh("true")}},
		corev1.Container{Name: "b", LivenessProbe: &corev1.Probe{ProbeHandler: sh("false")}},
	))
	e.m.UpdateContainer("u1", "a", "ca", t0, "")
	e.m.UpdateContainer("u1", "b", "cb", t0, "")
	e.m.Step(context.Background(), t0)
	e.m.Step(context.Background(), at(10))
	want := []string{
		`container="a" namespace="default" pod="web" pod_uid="u1" probe_type="Readiness" result="successful" = 2`,
		`container="b" namespace="default" pod="web" pod_uid="u1" probe_type="Liveness" result="failed" = 2`,
	}
	if diff := cmp.Diff(want, probeCounts(t, reg)); diff != "" {
		t.Errorf("prober_probe_total (-want +got):\n%s", diff)
	}
	e.m.RemovePod("u1")
	if got := probeCounts(t, reg); len(got) != 0 {
		t.Errorf("after RemovePod: %v", got)
	}
	if _, err := prober.New(prober.Config{Registerer: reg}); !errors.Is(err, prober.ErrMetricsRegistered) {
		t.Errorf("second manager on the registry: %v, want ErrMetricsRegistered", err)
	}
}

func TestRun(t *testing.T) {
	rec := &recorder{changed: make(chan types.UID, 10)}
	clk := clocktesting.NewFakeClock(t0)
	m, err := prober.New(prober.Config{Clock: clk, Exec: &shRunner{}, Recorder: rec.record, OnChange: rec.onChange, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	m.AddPod(newPod("u1", corev1.Container{Name: "app", ReadinessProbe: &corev1.Probe{ProbeHandler: sh("true"), InitialDelaySeconds: 5}}))
	m.UpdateContainer("u1", "app", "c1", t0, "")
	if uid := <-rec.changed; uid != "u1" {
		t.Fatalf("OnChange(%q) on start", uid)
	}
	// Run sleeps on the clock until the initial delay has passed.
	waitFor(t, "Run to wait on the clock", func() bool { return clk.HasWaiters() })
	if m.Status("u1", "app").Ready {
		t.Fatal("ready before the initial delay")
	}
	clk.Step(5 * time.Second)
	select {
	case uid := <-rec.changed:
		if uid != "u1" {
			t.Fatalf("OnChange(%q)", uid)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not probe after the initial delay")
	}
	if diff := cmp.Diff(prober.Status{Started: true, Ready: true}, m.Status("u1", "app")); diff != "" {
		t.Errorf("status after Run probed (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// probeCounts lists the prober_probe_total series in reg, sorted.
func probeCounts(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fams {
		if f.GetName() != "prober_probe_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out = append(out, fmt.Sprintf("%s = %v", strings.Join(labels, " "), m.GetCounter().GetValue()))
		}
	}
	slices.Sort(out)
	return out
}

// waitFor polls cond, yielding in between, until it holds or a generous
// deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}
