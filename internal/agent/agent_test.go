package agent_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"knode/internal/agent"
	"knode/internal/agent/host"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/nodestatus"
	"knode/internal/apitest"
)

// The identities of the test cluster.
const (
	adminToken = apitest.AdminToken
	node1Token = "node1-token"
	node2Token = "node2-token"
)

var (
	t0      = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	node1IP = netip.MustParseAddr("10.0.0.11")
)

// request is one call the test cluster served.
type request struct {
	Token  string
	Method string
	Path   string
	Query  string
	Code   int
}

func (r request) String() string {
	return fmt.Sprintf("%s %s %s?%s -> %d", r.Token, r.Method, r.Path, r.Query, r.Code)
}

// isWrite: the request changed something (anything but GET, LIST and WATCH).
func (r request) isWrite() bool { return r.Method != http.MethodGet }

// cluster is the real API server (real kinds, node authorizer,
// NodeRestriction) over a memory store, behind httptest, with a log of
// every request it answered.
type cluster struct {
	api   *apitest.Server
	admin kubernetes.Interface

	mu       sync.Mutex
	requests []request
	// watches are the watch requests the server has begun to serve, logged
	// as they arrive: a watch is in requests only once it has ended.
	watches []request
	notify  chan struct{}
	// failStatus makes the next this many status PATCHes answer 500.
	failStatus atomic.Int32
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{notify: make(chan struct{}, 1)}
	c.api = apitest.Start(t, apitest.Options{
		Tokens: []string{
			node1Token + `,system:node:node-1,uid1,"system:nodes"`,
			node2Token + `,system:node:node-2,uid2,"system:nodes"`,
		},
		NodeRules: true,
		Wrap:      c.record,
		Logger:    quietLogger(),
	})
	c.admin = c.api.Admin
	return c
}

// record serves through api and logs the request.
func (c *cluster) record(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		if r.URL.Query().Get("watch") == "true" {
			c.mu.Lock()
			c.watches = append(c.watches, requestOf(r, 0))
			c.mu.Unlock()
			c.wake()
		}
		if r.Method == http.MethodPatch && strings.HasSuffix(r.URL.Path, "/status") && c.failStatus.Add(-1) >= 0 {
			rec.Header().Set("Content-Type", "application/json")
			rec.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(rec, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500,"message":"injected failure"}`)
		} else {
			api.ServeHTTP(rec, r)
		}
		c.mu.Lock()
		c.requests = append(c.requests, requestOf(r, rec.code))
		c.mu.Unlock()
		c.wake()
	})
}

// requestOf is r as the log keeps it, answered with code (0: not yet).
func requestOf(r *http.Request, code int) request {
	return request{
		Token:  strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "),
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Code:   code,
	}
}

// wake tells a waiter that the logs changed.
func (c *cluster) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// client is a clientset acting as the identity of token.
func (c *cluster) client(t *testing.T, token string) kubernetes.Interface {
	t.Helper()
	return c.api.Client(t, token)
}

// log returns the requests served so far that match keep (all if nil).
func (c *cluster) log(keep func(request) bool) []request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return filterRequests(c.requests, keep)
}

// filterRequests is the requests of rs that keep matches (all if nil).
func filterRequests(rs []request, keep func(request) bool) []request {
	var out []request
	for _, r := range rs {
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// waitForRequests waits until at least n served requests match keep, and
// returns them. It blocks on the server's notifications, not on time; the
// deadline only turns a hang into a failure.
func (c *cluster) waitForRequests(t *testing.T, what string, n int, keep func(request) bool) []request {
	t.Helper()
	return c.waitForLog(t, what, n, func() []request { return c.log(keep) })
}

// waitForWatch waits until the server has begun to serve a watch that
// keep matches.
func (c *cluster) waitForWatch(t *testing.T, what string, keep func(request) bool) {
	t.Helper()
	c.waitForLog(t, what, 1, func() []request {
		c.mu.Lock()
		defer c.mu.Unlock()
		return filterRequests(c.watches, keep)
	})
}

func (c *cluster) waitForLog(t *testing.T, what string, n int, logged func() []request) []request {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if got := logged(); len(got) >= n {
			return got
		}
		select {
		case <-c.notify:
		case <-deadline:
			t.Fatalf("waiting for %d request(s) %s; served:\n%s", n, what, joinRequests(c.log(nil)))
		}
	}
}

func joinRequests(rs []request) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString("  " + r.String() + "\n")
	}
	return b.String()
}

func by(token, method, pathPrefix string) func(request) bool {
	return func(r request) bool {
		return r.Token == token && r.Method == method && strings.HasPrefix(r.Path, pathPrefix)
	}
}

// recordingClock is a fake clock that remembers the duration of every
// timer asked of it.
type recordingClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func newRecordingClock() *recordingClock {
	return &recordingClock{FakeClock: testingclock.NewFakeClock(t0)}
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	timer := c.FakeClock.NewTimer(d)
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return timer
}

func (c *recordingClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// waitForTimers waits (without sleeping) until n timers were asked for.
func (c *recordingClock) waitForTimers(t *testing.T, n int) []time.Duration {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if w := c.Waits(); len(w) >= n {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for timer #%d; timers so far: %v", n, c.Waits())
		}
		runtime.Gosched()
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newAgent builds an agent for name, acting as token, on a fake machine.
func newAgent(t *testing.T, c *cluster, token, name string, h *fake.Host, clk clock.WithTicker, edit func(*agent.Config)) *agent.Agent {
	t.Helper()
	cfg := agent.Config{
		Client:       c.client(t, token),
		NodeName:     name,
		RegisterNode: true,
		Status: nodestatus.Config{
			KubeletVersion: "v1.34.0-test",
			RuntimeName:    "knode",
			RuntimeVersion: "0.0.0-test",
		},
		Host:    h,
		RootDir: "/var/lib/knode/agent",
		Clock:   clk,
		Rand:    func() float64 { return 0.5 }, // no report offset, 2 % lease jitter
		Logger:  quietLogger(),
	}
	if edit != nil {
		edit(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	return a
}

func machine(name string, ip netip.Addr) *fake.Host { return fake.New(fake.Machine(name, ip)) }

func getNode(t *testing.T, c *cluster, name string) *corev1.Node {
	t.Helper()
	n, err := c.admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("admin GET node %s: %v", name, err)
	}
	return n
}

// quantities turns a ResourceList into comparable integers (cpu in cores).
func quantities(l corev1.ResourceList) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for k, v := range l {
		out[k] = v.Value()
	}
	return out
}

// condition is the part of a NodeCondition a test compares.
type condition struct {
	Status          corev1.ConditionStatus
	Reason, Message string
	Heartbeat       time.Time
	Transition      time.Time
}

func conditions(n *corev1.Node) map[corev1.NodeConditionType]condition {
	out := map[corev1.NodeConditionType]condition{}
	for _, c := range n.Status.Conditions {
		out[c.Type] = condition{c.Status, c.Reason, c.Message, c.LastHeartbeatTime.UTC(), c.LastTransitionTime.UTC()}
	}
	return out
}

func defaultLabels(hostname string) map[string]string {
	return map[string]string{
		"kubernetes.io/hostname":  hostname,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
}

func withLabels(base map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

const gi = int64(1) << 30
const mi = int64(1) << 20

// TestTryRegisterCreatesNode: the first registration creates the Node with
// its labels, taints, annotation and full status, as the node's own
// identity, through the node authorizer and NodeRestriction.
func TestTryRegisterCreatesNode(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	var ready []*corev1.Node
	a := newAgent(t, c, node1Token, "node-1", machine("node-1", node1IP), clk, func(cfg *agent.Config) {
		cfg.NodeLabels = map[string]string{"team": "blue", "node.kubernetes.io/pool": "p1"}
		cfg.RegisterWithTaints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
		cfg.OnReady = func(n *corev1.Node) { ready = append(ready, n) }
	})

	done, err := a.TryRegister(ctx)
	if !done || err != nil {
		t.Fatalf("TryRegister = %v, %v; want true, nil", done, err)
	}
	creates := c.log(by(node1Token, http.MethodPost, "/api/v1/nodes"))
	if len(creates) != 1 || creates[0].Code != http.StatusCreated {
		t.Errorf("node-1 POSTs to /api/v1/nodes: %v; want one 201", creates)
	}
	n := getNode(t, c, "node-1")

	wantLabels := withLabels(defaultLabels("node-1"), map[string]string{"team": "blue", "node.kubernetes.io/pool": "p1"})
	if d := cmp.Diff(wantLabels, n.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if got := n.Annotations[agent.AnnotationControllerManagedAttachDetach]; got != "true" {
		t.Errorf("annotation %s = %q, want \"true\" (annotations %v)", agent.AnnotationControllerManagedAttachDetach, got, n.Annotations)
	}
	wantTaints := []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	if d := cmp.Diff(wantTaints, n.Spec.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}

	wantAddresses := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.11"}, {Type: corev1.NodeHostName, Address: "node-1"}}
	if d := cmp.Diff(wantAddresses, n.Status.Addresses); d != "" {
		t.Errorf("addresses (-want +got):\n%s", d)
	}
	wantCapacity := map[corev1.ResourceName]int64{
		"cpu": 4, "memory": 8 * gi, "ephemeral-storage": 100 * gi, "pods": 110,
		"hugepages-2Mi": 0, "hugepages-1Gi": 0,
	}
	if d := cmp.Diff(wantCapacity, quantities(n.Status.Capacity)); d != "" {
		t.Errorf("capacity (-want +got):\n%s", d)
	}
	// Default evictionHard: memory.available<100Mi, nodefs.available<10%.
	// Upstream keeps the percentage as a float32, so 10% of 100Gi is
	// 10737418400 bytes, not 10Gi.
	nodefsReserved := int64(float64(100*gi) * float64(float32(0.1)))
	wantAllocatable := map[corev1.ResourceName]int64{
		"cpu": 4, "memory": 8*gi - 100*mi, "ephemeral-storage": 100*gi - nodefsReserved, "pods": 110,
		"hugepages-2Mi": 0, "hugepages-1Gi": 0,
	}
	if d := cmp.Diff(wantAllocatable, quantities(n.Status.Allocatable)); d != "" {
		t.Errorf("allocatable (-want +got):\n%s", d)
	}
	wantInfo := corev1.NodeSystemInfo{
		MachineID: "machine-node-1", SystemUUID: "system-node-1", BootID: "boot-node-1",
		KernelVersion: "6.1.0-knode", OSImage: "knode simulated Linux",
		ContainerRuntimeVersion: "knode://0.0.0-test", KubeletVersion: "v1.34.0-test",
		OperatingSystem: "linux", Architecture: "amd64",
		Swap: &corev1.NodeSwapStatus{Capacity: ptr.To[int64](0)},
	}
	if d := cmp.Diff(wantInfo, n.Status.NodeInfo); d != "" {
		t.Errorf("nodeInfo (-want +got):\n%s", d)
	}
	if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != 10250 {
		t.Errorf("daemonEndpoints.kubeletEndpoint.port = %d, want 10250", got)
	}
	wantConditions := map[corev1.NodeConditionType]condition{
		corev1.NodeMemoryPressure: {"False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", t0, t0},
		corev1.NodeDiskPressure:   {"False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", t0, t0},
		corev1.NodePIDPressure:    {"False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", t0, t0},
		corev1.NodeReady:          {"True", "KubeletReady", "kubelet is posting ready status", t0, t0},
	}
	if d := cmp.Diff(wantConditions, conditions(n)); d != "" {
		t.Errorf("conditions (-want +got):\n%s", d)
	}
	if len(ready) != 1 || ready[0].Name != "node-1" {
		t.Errorf("OnReady called with %d nodes, want once with node-1", len(ready))
	}
	if got := a.Stats().Registrations; got != 1 {
		t.Errorf("Stats().Registrations = %d, want 1", got)
	}

	// The Lease, created as the node, owned by the Node.
	if err := a.Lease().Sync(ctx); err != nil {
		t.Fatalf("first lease sync: %v", err)
	}
	l, err := c.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("admin GET lease: %v", err)
	}
	wantSpec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To("node-1"),
		LeaseDurationSeconds: ptr.To[int32](40),
		RenewTime:            &metav1.MicroTime{Time: t0},
	}
	gotSpec := l.Spec
	if gotSpec.RenewTime != nil {
		gotSpec.RenewTime = &metav1.MicroTime{Time: gotSpec.RenewTime.UTC()}
	}
	if d := cmp.Diff(wantSpec, gotSpec); d != "" {
		t.Errorf("lease spec (-want +got):\n%s", d)
	}
	wantOwners := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: n.UID}}
	if d := cmp.Diff(wantOwners, l.OwnerReferences); d != "" {
		t.Errorf("lease ownerReferences (-want +got):\n%s", d)
	}

	// The events upstream records at registration.
	events, err := c.admin.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == "node-1" && e.Source.Component == "kubelet" {
			got[e.Reason] = true
		}
	}
	for _, reason := range []string{"Starting", "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID"} {
		if !got[reason] {
			t.Errorf("no %s event about node-1 from kubelet; events: %v; event POSTs: %v", reason, got, c.log(by(node1Token, http.MethodPost, "/api/v1/namespaces/default/events")))
		}
	}
}

// TestRestartAdoptsExistingNode: a new agent for a Node that exists gets
// 409 on create and adopts it, changing neither user labels nor taints,
// but restoring its default labels and the attach/detach annotation.
func TestRestartAdoptsExistingNode(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	h := machine("node-1", node1IP)
	first := newAgent(t, c, node1Token, "node-1", h, clk, func(cfg *agent.Config) {
		cfg.NodeLabels = map[string]string{"team": "blue"}
		cfg.RegisterWithTaints = []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}
	})
	if done, err := first.TryRegister(ctx); !done || err != nil {
		t.Fatalf("first TryRegister = %v, %v", done, err)
	}

	// The admin moves the hostname label, drops the annotation and adds
	// a label of their own.
	n := getNode(t, c, "node-1")
	n.Labels["kubernetes.io/hostname"] = "somewhere-else"
	n.Labels["admin-label"] = "kept"
	delete(n.Annotations, agent.AnnotationControllerManagedAttachDetach)
	if _, err := c.admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("admin update: %v", err)
	}
	before := getNode(t, c, "node-1")

	clk.Step(time.Minute)
	second := newAgent(t, c, node1Token, "node-1", h, clk, func(cfg *agent.Config) {
		cfg.NodeLabels = map[string]string{"team": "red", "extra": "new"}
		cfg.RegisterWithTaints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}}
	})
	mark := len(c.log(nil))
	done, err := second.TryRegister(ctx)
	if !done || err != nil {
		t.Fatalf("second TryRegister = %v, %v; want true, nil", done, err)
	}
	var calls []string
	for _, r := range c.log(nil)[mark:] {
		if r.Token == node1Token && strings.HasPrefix(r.Path, "/api/v1/nodes") {
			calls = append(calls, fmt.Sprintf("%s %s %d", r.Method, r.Path, r.Code))
		}
	}
	wantCalls := []string{
		"POST /api/v1/nodes 409",
		"GET /api/v1/nodes/node-1 200",
		"PATCH /api/v1/nodes/node-1/status 200",
	}
	if d := cmp.Diff(wantCalls, calls); d != "" {
		t.Errorf("node-1's calls on nodes during adoption (-want +got):\n%s", d)
	}

	after := getNode(t, c, "node-1")
	wantLabels := withLabels(defaultLabels("node-1"), map[string]string{"team": "blue", "admin-label": "kept"})
	if d := cmp.Diff(wantLabels, after.Labels); d != "" {
		t.Errorf("labels after adoption (-want +got):\n%s", d)
	}
	if d := cmp.Diff(before.Spec.Taints, after.Spec.Taints); d != "" {
		t.Errorf("taints changed by adoption (-before +after):\n%s", d)
	}
	if got := after.Annotations[agent.AnnotationControllerManagedAttachDetach]; got != "true" {
		t.Errorf("annotation %s = %q after adoption, want it restored to \"true\"", agent.AnnotationControllerManagedAttachDetach, got)
	}
	if after.UID != before.UID {
		t.Errorf("adoption replaced the Node: uid %s -> %s", before.UID, after.UID)
	}

	// A third start with nothing to reconcile writes nothing.
	third := newAgent(t, c, node1Token, "node-1", h, clk, nil)
	mark = len(c.log(nil))
	if done, err := third.TryRegister(ctx); !done || err != nil {
		t.Fatalf("third TryRegister = %v, %v", done, err)
	}
	for _, r := range c.log(nil)[mark:] {
		if r.Method == http.MethodPatch || r.Method == http.MethodPut {
			t.Errorf("adopting an up-to-date Node wrote it: %s", r)
		}
	}
}

// TestRegisterBackoff drives Register against real refusals: the agent is
// configured (bypassing the flag check) with a label NodeRestriction
// forbids, so every create is a 403 and, the Node being absent, the GET
// that follows is a 404. After the ninth refusal the admin creates the
// Node; the tenth attempt takes the 403 adoption path. The waits are read
// from the fake clock.
func TestRegisterBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(t)
	clk := newRecordingClock()
	a := newAgent(t, c, node1Token, "node-1", machine("node-1", node1IP), clk, func(cfg *agent.Config) {
		cfg.NodeLabels = map[string]string{"node-role.kubernetes.io/worker": ""}
	})

	// One attempt on its own, to see the refusal.
	done, err := a.TryRegister(ctx)
	if done || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node-role.kubernetes.io/worker") {
		t.Fatalf("TryRegister with a forbidden label = %v, %v; want false and a 403 naming the label", done, err)
	}
	base := len(c.log(by(node1Token, http.MethodPost, "/api/v1/nodes")))

	result := make(chan error, 1)
	go func() { result <- a.Register(ctx) }()

	const ms = time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 7 * time.Second, 7 * time.Second, 7 * time.Second}
	for i, w := range want {
		waits := clk.waitForTimers(t, i+1)
		if got := waits[i]; got != w {
			t.Fatalf("wait #%d = %v, want %v (waits so far %v)", i+1, got, w, waits)
		}
		if i == len(want)-1 {
			// The admin creates the Node before the last attempt.
			if _, err := c.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
				t.Fatalf("admin create: %v", err)
			}
		}
		clk.Step(w - time.Nanosecond)
		if !clk.HasWaiters() {
			t.Fatalf("the wait before attempt #%d ended before %v had passed", i+1, w)
		}
		clk.Step(time.Nanosecond)
		posts := c.waitForRequests(t, fmt.Sprintf("attempt #%d", i+1), base+i+1, by(node1Token, http.MethodPost, "/api/v1/nodes"))
		if code := posts[base+i].Code; code != http.StatusForbidden {
			t.Errorf("attempt #%d: create answered %d, want 403", i+1, code)
		}
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("Register = %v, want nil after adopting", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Register did not return after the Node was created")
	}
	if got := clk.Waits(); len(got) != len(want) {
		t.Errorf("timers %v, want exactly %v", got, want)
	}
	n := getNode(t, c, "node-1")
	if d := cmp.Diff(defaultLabels("node-1"), n.Labels); d != "" {
		t.Errorf("labels after adoption through 403 (-want +got):\n%s", d)
	}
	if got := a.Stats().Registrations; got != 1 {
		t.Errorf("Stats().Registrations = %d, want 1", got)
	}
}

// TestRegisterNodeFalse: with RegisterNode false, Run never creates the
// Node; once the admin creates it, the next status sync posts status and
// the next lease pass creates the Lease.
func TestRegisterNodeFalse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := newCluster(t)
	clk := newRecordingClock()
	a := newAgent(t, c, node1Token, "node-1", machine("node-1", node1IP), clk, func(cfg *agent.Config) {
		cfg.RegisterNode = false
	})
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- a.Run(ctx) }()

	// The first status sync finds no Node; the first lease pass cannot
	// create a Lease without its owner, and waits a renew interval.
	c.waitForRequests(t, "first status sync", 1, func(r request) bool {
		return by(node1Token, http.MethodGet, "/api/v1/nodes/node-1")(r)
	})
	c.waitForRequests(t, "first lease pass", 1, by(node1Token, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1"))
	waits := clk.waitForTimers(t, 1)
	if waits[0] != 10200*time.Millisecond {
		t.Errorf("lease wait after a pass without owner = %v, want the renew interval with 2%% jitter, 10.2s", waits[0])
	}
	if posts := c.log(by(node1Token, http.MethodPost, "/api/v1/nodes")); len(posts) != 0 {
		t.Fatalf("RegisterNode=false created the Node: %v", posts)
	}
	if _, err := c.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease before the Node exists: %v, want NotFound", err)
	}

	if _, err := c.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"by": "admin"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(10200 * time.Millisecond) // the status ticker (10 s) and the lease timer fire
	c.waitForRequests(t, "status post", 1, by(node1Token, http.MethodPatch, "/api/v1/nodes/node-1/status"))
	c.waitForRequests(t, "lease create", 1, by(node1Token, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"))

	n := getNode(t, c, "node-1")
	if got := conditions(n)[corev1.NodeReady]; got.Status != corev1.ConditionTrue {
		t.Errorf("Ready after the first post = %+v, want True", got)
	}
	if len(n.Status.Addresses) == 0 || len(n.Status.Capacity) == 0 || n.Status.NodeInfo.BootID == "" {
		t.Errorf("posted status lacks addresses, capacity or nodeInfo: %+v", n.Status)
	}
	if d := cmp.Diff(map[string]string{"by": "admin"}, n.Labels); d != "" {
		t.Errorf("RegisterNode=false changed the labels (-want +got):\n%s", d)
	}
	if posts := c.log(by(node1Token, http.MethodPost, "/api/v1/nodes")); len(posts) != 0 {
		t.Errorf("RegisterNode=false created the Node: %v", posts)
	}
	l, err := c.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease after the Node exists: %v", err)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease owners %v, want the Node (uid %s)", l.OwnerReferences, n.UID)
	}
	// The server has answered the PATCH; the agent counts it once its
	// client has read the answer.
	for deadline := time.Now().Add(20 * time.Second); a.Stats().StatusPosts == 0 && time.Now().Before(deadline); {
		runtime.Gosched()
	}
	cancel()
	if err := <-result; err != nil {
		t.Errorf("Run = %v after cancel, want nil", err)
	}
	if got := a.Stats(); got.StatusPosts != 1 || got.StatusErrors != 0 {
		t.Errorf("Stats() = %+v, want 1 status post and no errors", got)
	}
}

// TestRunRegistersAndStops: Run waits 100 ms, registers, creates and renews
// the Lease, and returns nil when its context ends.
func TestRunRegistersAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(t)
	clk := newRecordingClock()
	a := newAgent(t, c, node1Token, "node-1", machine("node-1", node1IP), clk, nil)
	result := make(chan error, 1)
	go func() { result <- a.Run(ctx) }()

	if w := clk.waitForTimers(t, 1); w[0] != 100*time.Millisecond {
		t.Fatalf("first registration wait %v, want 100ms", w[0])
	}
	clk.Step(100 * time.Millisecond)
	c.waitForRequests(t, "node create", 1, by(node1Token, http.MethodPost, "/api/v1/nodes"))
	c.waitForRequests(t, "lease create", 1, by(node1Token, http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"))
	// Run's renewer starts with a pass at once, then waits.
	lease := "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1"
	c.waitForRequests(t, "first renewal", 1, by(node1Token, http.MethodPut, lease))
	if w := clk.waitForTimers(t, 2); w[1] != 10200*time.Millisecond {
		t.Errorf("renew wait %v, want 10.2s (10 s + 2%% jitter)", w[1])
	}
	clk.Step(10200 * time.Millisecond)
	c.waitForRequests(t, "second renewal", 2, by(node1Token, http.MethodPut, lease))

	cancel()
	select {
	case err := <-result:
		if err != nil {
			t.Errorf("Run = %v after cancel, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	l, err := c.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(100*time.Millisecond + 10200*time.Millisecond); l.Spec.RenewTime == nil || !l.Spec.RenewTime.Time.Equal(want) {
		t.Errorf("lease renewTime %v, want %v (the second renewal)", l.Spec.RenewTime, want)
	}
}

// registeredNode1 is node-1's agent on a fake machine and clock, registered.
func registeredNode1(t *testing.T) (*cluster, *testingclock.FakeClock, *fake.Host, *agent.Agent) {
	t.Helper()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	h := machine("node-1", node1IP)
	a := newAgent(t, c, node1Token, "node-1", h, clk, nil)
	if done, err := a.TryRegister(context.Background()); !done || err != nil {
		t.Fatalf("TryRegister = %v, %v", done, err)
	}
	return c, clk, h, a
}

// listerFunc is an agent.NodeLister.
type listerFunc func(name string) (*corev1.Node, error)

func (f listerFunc) Get(name string) (*corev1.Node, error) { return f(name) }

// A status pass starts from the local cache of the Node when it holds it,
// and reads the server only when it misses; a failed post is tried again
// from the Node as the server has it.
func TestSyncStatusReadsLocalCacheFirst(t *testing.T) {
	gets := func(c *cluster) int { return len(c.log(by(node1Token, http.MethodGet, "/api/v1/nodes/node-1"))) }
	patches := func(c *cluster) int {
		return len(c.log(func(r request) bool {
			return r.Token == node1Token && r.Method == http.MethodPatch && r.Code == http.StatusOK
		}))
	}
	for _, tc := range []struct {
		name string
		// hit: the cache holds the Node; else it answers NotFound.
		hit bool
		// failures is how many status PATCHes fail first.
		failures int32
		// wantGets are the server reads of node-1 the pass makes.
		wantGets int
	}{
		{name: "cache holds the Node", hit: true, wantGets: 0},
		{name: "cache misses", hit: false, wantGets: 1},
		{name: "post fails once", hit: true, failures: 1, wantGets: 1},
		{name: "post fails four times", hit: true, failures: 4, wantGets: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newCluster(t)
			clk := testingclock.NewFakeClock(t0)
			h := machine("node-1", node1IP)
			lookups := 0
			a := newAgent(t, c, node1Token, "node-1", h, clk, func(cfg *agent.Config) {
				cfg.Nodes = listerFunc(func(name string) (*corev1.Node, error) {
					lookups++
					if !tc.hit || name != "node-1" {
						return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
					}
					return c.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				})
			})
			if done, err := a.TryRegister(ctx); !done || err != nil {
				t.Fatalf("TryRegister = %v, %v", done, err)
			}
			// Memory pressure makes a post due.
			h.Update(func(s *fake.State) { s.Memory.Available = uint64(50 * mi) })
			c.failStatus.Store(tc.failures)
			getsBefore, patchesBefore := gets(c), patches(c)
			if err := a.SyncStatus(ctx); err != nil {
				t.Fatalf("SyncStatus = %v", err)
			}
			if lookups != 1 {
				t.Errorf("cache lookups = %d, want 1 (the first try only)", lookups)
			}
			if got := gets(c) - getsBefore; got != tc.wantGets {
				t.Errorf("server reads of node-1 = %d, want %d", got, tc.wantGets)
			}
			if got := patches(c) - patchesBefore; got != 1 {
				t.Errorf("successful status posts = %d, want 1", got)
			}
			if got := a.Stats(); got.StatusPosts != 1 || got.StatusErrors != int64(tc.failures) {
				t.Errorf("Stats = %+v, want 1 post and %d errors", got, tc.failures)
			}
			if got := conditions(getNode(t, c, "node-1"))[corev1.NodeMemoryPressure].Status; got != corev1.ConditionTrue {
				t.Errorf("MemoryPressure = %q after the pass, want True", got)
			}
		})
	}
}

// A status pass fills a copy of its own: the Node in the agent's cache,
// which a node informer shares with others, is left as it was, though the
// pass changes the status and drops an annotation.
func TestSyncStatusLeavesTheCachedNodeAlone(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	h := machine("node-1", node1IP)
	var cached *corev1.Node
	a := newAgent(t, c, node1Token, "node-1", h, clk, func(cfg *agent.Config) {
		cfg.Nodes = listerFunc(func(name string) (*corev1.Node, error) {
			if cached == nil || name != "node-1" {
				return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
			}
			return cached, nil
		})
	})
	if done, err := a.TryRegister(ctx); !done || err != nil {
		t.Fatalf("TryRegister = %v, %v", done, err)
	}
	cached = getNode(t, c, "node-1")
	if cached.Annotations == nil {
		cached.Annotations = map[string]string{}
	}
	// Without an external cloud provider the pass removes this annotation.
	cached.Annotations[nodestatus.AnnotationProvidedNodeIP] = "10.0.0.9"
	before := cached.DeepCopy()
	h.Update(func(s *fake.State) { s.Memory.Available = uint64(50 * mi) })
	if err := a.SyncStatus(ctx); err != nil {
		t.Fatalf("SyncStatus = %v", err)
	}
	if diff := cmp.Diff(before, cached); diff != "" {
		t.Errorf("the cached Node changed (-before +after):\n%s", diff)
	}
	if got := conditions(getNode(t, c, "node-1"))[corev1.NodeMemoryPressure].Status; got != corev1.ConditionTrue {
		t.Errorf("MemoryPressure = %q after the pass, want True", got)
	}
}

// Five failed tries end the pass with an error; the next pass tries again.
func TestSyncStatusGivesUpAfterFiveTries(t *testing.T) {
	ctx := context.Background()
	c, _, h, a := registeredNode1(t)
	h.Update(func(s *fake.State) { s.Memory.Available = uint64(50 * mi) })
	c.failStatus.Store(5)
	err := a.SyncStatus(ctx)
	if err == nil || !strings.Contains(err.Error(), "update node status exceeds retry count") {
		t.Fatalf("SyncStatus = %v, want the retry count exceeded", err)
	}
	if got := a.Stats(); got.StatusErrors != 5 {
		t.Errorf("StatusErrors = %d, want 5", got.StatusErrors)
	}
	if err := a.SyncStatus(ctx); err != nil {
		t.Fatalf("next SyncStatus = %v", err)
	}
	if got := conditions(getNode(t, c, "node-1"))[corev1.NodeMemoryPressure].Status; got != corev1.ConditionTrue {
		t.Errorf("MemoryPressure = %q after the next pass, want True", got)
	}
}

// Run follows the Node with a list and watch pinned to its name, and its
// status passes read the Node from there rather than from the server.
func TestRunReadsNodeFromItsWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := newCluster(t)
	clk := newRecordingClock()
	h := machine("node-1", node1IP)
	a := newAgent(t, c, node1Token, "node-1", h, clk, nil)
	result := make(chan error, 1)
	go func() { result <- a.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-result
		}
	}
	defer stop()
	clk.waitForTimers(t, 1)
	clk.Step(100 * time.Millisecond)
	pinned := func(r request) bool {
		return r.Token == node1Token && r.Path == "/api/v1/nodes" && strings.Contains(r.Query, "fieldSelector=metadata.name%3Dnode-1")
	}
	// The agent lists before it watches, and fills its cache between the
	// two: once the server sees the watch, the cache holds the Node.
	c.waitForWatch(t, "watch of node-1 pinned to its name", pinned)
	isPatch := by(node1Token, http.MethodPatch, "/api/v1/nodes/node-1/status")
	// Each step changes the CPU count, so each pass posts, whether or not
	// the watch has brought the last post yet.
	for i, cpus := range []int{5, 6, 7} {
		h.Update(func(s *fake.State) { s.CPUs = cpus })
		mark := len(c.log(nil))
		clk.Step(agent.DefaultNodeStatusUpdateFrequency)
		c.waitForRequests(t, "status post", i+1, isPatch)
		if i == 0 {
			// The pass before this one may have begun before the watch and
			// read the server after mark.
			continue
		}
		for _, r := range c.log(nil)[mark:] {
			if r.Token == node1Token && r.Method == http.MethodGet && r.Path == "/api/v1/nodes/node-1" {
				t.Errorf("pass %d read the server: %s", i+1, r)
			}
		}
	}
	// A watch is logged when the server sees it end.
	stop()
	c.waitForRequests(t, "watch of node-1 pinned to its name", 1, func(r request) bool {
		return pinned(r) && strings.Contains(r.Query, "watch=true")
	})
}

// TestSyncStatusPostsOnChangeOrReportInterval steps through a script:
// status is posted at once when a condition changes, not when nothing
// changed, and then once the report frequency has passed since the last
// post (the offset is 0: Rand is 0.5). A pass that starts from the same
// Node and machine facts as the last one, which found nothing to post, is
// quiet: it runs no setter, unless a report is due.
func TestSyncStatusPostsOnChangeOrReportInterval(t *testing.T) {
	ctx := context.Background()
	c, clk, h, a := registeredNode1(t)
	setAvailable := func(v int64) func() {
		return func() { h.Update(func(s *fake.State) { s.Memory.Available = uint64(v) }) }
	}

	// markReadyUnknown writes Ready Unknown as the node lifecycle
	// controller would: the Node changes under the agent.
	markReadyUnknown := func() {
		patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"Unknown","reason":"NodeStatusUnknown","message":"Kubelet stopped posting node status.","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
			t0.Format(time.RFC3339), clk.Now().Format(time.RFC3339))
		if _, err := c.admin.CoreV1().Nodes().PatchStatus(ctx, "node-1", []byte(patch)); err != nil {
			t.Fatalf("mark Ready Unknown: %v", err)
		}
	}

	steps := []struct {
		name     string
		advance  time.Duration
		change   func()
		wantPost bool
		// wantQuiet: the pass ran no setter.
		wantQuiet bool
		// wantMemoryPressure is checked on the stored Node after the step.
		wantMemoryPressure corev1.ConditionStatus
	}{
		{name: "nothing changed 10s after registering", advance: 10 * time.Second, wantMemoryPressure: "False"},
		{name: "nothing changed since the last pass", advance: 10 * time.Second, wantQuiet: true, wantMemoryPressure: "False"},
		{name: "memory.available drops below 100Mi", advance: 10 * time.Second, change: setAvailable(50 * mi), wantPost: true, wantMemoryPressure: "True"},
		{name: "still under pressure, nothing new", advance: 10 * time.Second, wantMemoryPressure: "True"},
		{name: "available memory moves but stays under", advance: 10 * time.Second, change: setAvailable(60 * mi), wantMemoryPressure: "True"},
		{name: "pressure clears", advance: 10 * time.Second, change: setAvailable(6 * gi), wantPost: true, wantMemoryPressure: "False"},
		{name: "4m40s after the last post", advance: 4*time.Minute + 40*time.Second, wantMemoryPressure: "False"},
		{name: "4m50s after the last post", advance: 10 * time.Second, wantQuiet: true, wantMemoryPressure: "False"},
		{name: "just before 5m", advance: 10*time.Second - time.Nanosecond, wantQuiet: true, wantMemoryPressure: "False"},
		{name: "5m after the last post", advance: time.Nanosecond, wantPost: true, wantMemoryPressure: "False"},
		{name: "10s later", advance: 10 * time.Second, wantMemoryPressure: "False"},
		{name: "20s later", advance: 10 * time.Second, wantQuiet: true, wantMemoryPressure: "False"},
		{name: "another writer marks Ready Unknown", advance: 10 * time.Second, change: markReadyUnknown, wantPost: true, wantMemoryPressure: "False"},
		{name: "10s after that", advance: 10 * time.Second, wantMemoryPressure: "False"},
		{name: "5m after that post", advance: 5*time.Minute - 10*time.Second, wantPost: true, wantMemoryPressure: "False"},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		if s.change != nil {
			s.change()
		}
		before := a.Stats()
		patchesBefore := len(c.log(by(node1Token, http.MethodPatch, "/api/v1/nodes/node-1/status")))
		if err := a.SyncStatus(ctx); err != nil {
			t.Fatalf("%s: SyncStatus: %v", s.name, err)
		}
		posted := a.Stats().StatusPosts - before.StatusPosts
		patches := len(c.log(by(node1Token, http.MethodPatch, "/api/v1/nodes/node-1/status"))) - patchesBefore
		if want := map[bool]int64{true: 1, false: 0}[s.wantPost]; posted != want || int64(patches) != want {
			t.Errorf("%s (t0+%v): StatusPosts +%d, PATCHes +%d; want %d", s.name, clk.Now().Sub(t0), posted, patches, want)
		}
		if quiet := a.Stats().QuietPasses - before.QuietPasses; quiet != map[bool]int64{true: 1, false: 0}[s.wantQuiet] {
			t.Errorf("%s (t0+%v): QuietPasses +%d, want quiet %v", s.name, clk.Now().Sub(t0), quiet, s.wantQuiet)
		}
		n := getNode(t, c, "node-1")
		conds := conditions(n)
		if got := conds[corev1.NodeMemoryPressure].Status; got != s.wantMemoryPressure {
			t.Errorf("%s: MemoryPressure %s, want %s", s.name, got, s.wantMemoryPressure)
		}
		if got := conds[corev1.NodeReady]; got.Status != corev1.ConditionTrue || got.Reason != "KubeletReady" {
			t.Errorf("%s: Ready %+v, want True/KubeletReady whatever the pressure", s.name, got)
		}
		if s.wantPost && !conds[corev1.NodeReady].Heartbeat.Equal(clk.Now()) {
			t.Errorf("%s: Ready heartbeat %v after a post at %v", s.name, conds[corev1.NodeReady].Heartbeat, clk.Now())
		}
	}
	n := getNode(t, c, "node-1")
	mp := conditions(n)[corev1.NodeMemoryPressure]
	if want := t0.Add(time.Minute); !mp.Transition.Equal(want) {
		t.Errorf("MemoryPressure lastTransitionTime %v, want %v (when pressure cleared)", mp.Transition, want)
	}
	if mp.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("MemoryPressure reason %q", mp.Reason)
	}
}

// TestSteadyStateWrites runs the two loops of an idle, registered agent
// in virtual time, as Run schedules them (status every 10 s, lease passes
// on the renewer's own jittered schedule), and counts the node's requests
// per minute over 10 minutes. The first 10 minutes are a warm-up, not
// counted: they hold the one-time random offset of the first report.
func TestSteadyStateWrites(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	rng := rand.New(rand.NewPCG(1, 2))
	a := newAgent(t, c, node1Token, "node-1", machine("node-1", node1IP), clk, func(cfg *agent.Config) {
		cfg.Rand = rng.Float64
	})
	if done, err := a.TryRegister(ctx); !done || err != nil {
		t.Fatalf("TryRegister = %v, %v", done, err)
	}
	wait, err := a.Lease().Step(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextLease := clk.Now().Add(wait)
	nextStatus := clk.Now().Add(agent.DefaultNodeStatusUpdateFrequency)
	// drive runs both loops until end, each pass at the time it is due.
	drive := func(end time.Time) {
		for {
			next := nextStatus
			if nextLease.Before(next) {
				next = nextLease
			}
			if next.After(end) {
				clk.SetTime(end)
				return
			}
			clk.SetTime(next)
			if !nextStatus.After(next) {
				if err := a.SyncStatus(ctx); err != nil {
					t.Fatalf("SyncStatus at t0+%v: %v", next.Sub(t0), err)
				}
				nextStatus = nextStatus.Add(agent.DefaultNodeStatusUpdateFrequency)
			}
			if !nextLease.After(next) {
				wait, err := a.Lease().Step(ctx)
				if err != nil {
					t.Fatalf("lease Step at t0+%v: %v", next.Sub(t0), err)
				}
				nextLease = next.Add(wait)
			}
		}
	}
	drive(clk.Now().Add(10 * time.Minute))
	postsBefore := a.Stats().StatusPosts
	mark := len(c.log(nil))
	start := clk.Now()
	end := start.Add(10 * time.Minute)
	drive(end)
	minutes := end.Sub(start).Minutes()
	counts := map[string]int{}
	for _, r := range c.log(nil)[mark:] {
		if r.Token != node1Token {
			continue
		}
		kind := "other"
		switch {
		case strings.Contains(r.Path, "/leases/"):
			kind = "lease"
		case strings.HasSuffix(r.Path, "/status"):
			kind = "status"
		case strings.Contains(r.Path, "/events"):
			kind = "event"
		case strings.HasPrefix(r.Path, "/api/v1/nodes/"):
			kind = "node"
		}
		counts[r.Method+" "+kind]++
	}
	writes := 0
	for k, v := range counts {
		if !strings.HasPrefix(k, http.MethodGet) {
			writes += v
		}
	}
	leasePerMin := float64(counts["PUT lease"]) / minutes
	statusPerMin := float64(counts["PATCH status"]) / minutes
	t.Logf("steady state over %.0f virtual minutes: %.2f lease renewals/min, %.2f status posts/min, %.2f writes/min in all, %.2f reads/min (requests: %v)",
		minutes, leasePerMin, statusPerMin, float64(writes)/minutes, float64(counts["GET node"])/minutes, counts)
	if leasePerMin < 5.5 || leasePerMin > 6.0 {
		t.Errorf("lease renewals %.2f/min, want 5.5–6 (every 10 s plus up to 4%% jitter)", leasePerMin)
	}
	if statusPerMin != 0.2 {
		t.Errorf("status posts %.2f/min, want 0.2 (one per 5 min once the first offset is spent)", statusPerMin)
	}
	if got := a.Stats().StatusPosts - postsBefore; got != int64(counts["PATCH status"]) {
		t.Errorf("Stats().StatusPosts = %d, but %d PATCHes were served", got, counts["PATCH status"])
	}
	if other := writes - counts["PUT lease"] - counts["PATCH status"]; other != 0 {
		t.Errorf("%d writes besides lease renewals and status posts at steady state: %v", other, counts)
	}
}

// TestSetterFailureDoesNotBlockStatus: like the kubelet, which logs a
// failing status setter ("Failed to set some node status fields") and
// goes on with the others, one unreadable machine fact must not keep the
// Node from being registered or its status from being posted.
func TestSetterFailureDoesNotBlockStatus(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	h := machine("node-1", node1IP)
	h.Update(func(s *fake.State) {
		s.Errs = map[host.Fact]error{host.FactOS: errors.New("reading /etc/os-release: permission denied")}
	})
	a := newAgent(t, c, node1Token, "node-1", h, clk, nil)
	done, err := a.TryRegister(ctx)
	if !done || err != nil {
		t.Errorf("TryRegister with the OS facts unreadable = %v, %v; want the Node registered with the other facts", done, err)
	} else if n := getNode(t, c, "node-1"); conditions(n)[corev1.NodeReady].Status != corev1.ConditionTrue || len(n.Status.Capacity) == 0 {
		t.Errorf("registered Node lacks status: %+v", n.Status)
	}

	// Status posting, with a Node the admin created.
	c2 := newCluster(t)
	if _, err := c2.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := newAgent(t, c2, node1Token, "node-1", h, clk, func(cfg *agent.Config) { cfg.RegisterNode = false })
	if err := b.SyncStatus(ctx); err != nil {
		t.Logf("SyncStatus: %v", err)
	}
	if got := b.Stats().StatusPosts; got != 1 {
		t.Errorf("status posts with the OS facts unreadable = %d, want 1 (conditions, capacity and addresses do not depend on them)", got)
	}
}

// The device plugins' resources are posted as soon as they change, even on
// a pass that would otherwise be quiet.
func TestSyncStatusReportsDevices(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	h := machine("node-1", node1IP)
	var mu sync.Mutex
	healthy := int64(4)
	a := newAgent(t, c, node1Token, "node-1", h, clk, func(cfg *agent.Config) {
		cfg.DeviceCapacity = func() (map[corev1.ResourceName]int64, map[corev1.ResourceName]int64, []string) {
			mu.Lock()
			defer mu.Unlock()
			return map[corev1.ResourceName]int64{"example.com/dev": 4}, map[corev1.ResourceName]int64{"example.com/dev": healthy}, nil
		}
	})
	if done, err := a.TryRegister(ctx); !done || err != nil {
		t.Fatalf("TryRegister = %v, %v", done, err)
	}
	devices := func() (string, string) {
		t.Helper()
		if err := a.SyncStatus(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := c.admin.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		capacity, allocatable := n.Status.Capacity["example.com/dev"], n.Status.Allocatable["example.com/dev"]
		return capacity.String(), allocatable.String()
	}
	if gotCap, gotAlloc := devices(); gotCap != "4" || gotAlloc != "4" {
		t.Errorf("capacity %s, allocatable %s; want 4 and 4", gotCap, gotAlloc)
	}
	// A quiet pass in between remembers the devices it saw.
	devices()
	mu.Lock()
	healthy = 3
	mu.Unlock()
	clk.Step(time.Second)
	if gotCap, gotAlloc := devices(); gotCap != "4" || gotAlloc != "3" {
		t.Errorf("after a device turned unhealthy: capacity %s, allocatable %s; want 4 and 3", gotCap, gotAlloc)
	}
}

// The runtime's readiness and its images reach the Node, and a quiet pass
// notices when either changes.
func TestSyncStatusReportsRuntime(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	h := machine("node-1", node1IP)
	var mu sync.Mutex
	var notReady []error
	images := []corev1.ContainerImage{{Names: []string{"127.0.0.1:5000/busybox:latest"}, SizeBytes: 1 << 20}}
	a := newAgent(t, c, node1Token, "node-1", h, clk, func(cfg *agent.Config) {
		cfg.RuntimeStatus = func() []error {
			mu.Lock()
			defer mu.Unlock()
			return notReady
		}
		cfg.Images = func() []corev1.ContainerImage {
			mu.Lock()
			defer mu.Unlock()
			return images
		}
	})
	if done, err := a.TryRegister(ctx); !done || err != nil {
		t.Fatalf("TryRegister = %v, %v", done, err)
	}
	sync := func() *corev1.Node {
		t.Helper()
		if err := a.SyncStatus(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := c.admin.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ready := func(n *corev1.Node) corev1.NodeCondition {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond
			}
		}
		t.Fatal("no Ready condition")
		return corev1.NodeCondition{}
	}
	n := sync()
	if r := ready(n); r.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %s %q, want True", r.Status, r.Message)
	}
	if len(n.Status.Images) != 1 || n.Status.Images[0].Names[0] != "127.0.0.1:5000/busybox:latest" {
		t.Errorf("images = %+v", n.Status.Images)
	}
	sync() // a quiet pass
	mu.Lock()
	notReady = []error{errors.New("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")}
	images = append(images, corev1.ContainerImage{Names: []string{"127.0.0.1:5000/web:1"}, SizeBytes: 2 << 20})
	mu.Unlock()
	clk.Step(time.Second)
	n = sync()
	if r := ready(n); r.Status != corev1.ConditionFalse || !strings.Contains(r.Message, "cni plugin not initialized") {
		t.Errorf("Ready = %s %q, want False naming the network", r.Status, r.Message)
	}
	if len(n.Status.Images) != 2 {
		t.Errorf("images after a pull = %+v", n.Status.Images)
	}
}
