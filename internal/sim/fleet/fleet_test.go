package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"knode/internal/apitest"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/sim/fleet"
	"knode/internal/storage/memory"
)

// identities records who every request to the API server claimed to act
// as, by the lease it renewed.
type identities struct {
	mu sync.Mutex
	// renewals maps each renewed lease to the Impersonate-User and
	// Impersonate-Group headers its PUTs carried.
	renewals map[string][][]string
	// impersonated counts requests with an Impersonate-User header.
	impersonated int
}

func (r *identities) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if req.Header.Get("Impersonate-User") != "" {
			r.impersonated++
		}
		if lease, ok := strings.CutPrefix(req.URL.Path, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"); ok && req.Method == http.MethodPut {
			claim := append([]string{req.Header.Get("Impersonate-User")}, req.Header.Values("Impersonate-Group")...)
			r.renewals[lease] = append(r.renewals[lease], claim)
		}
		r.mu.Unlock()
		next.ServeHTTP(w, req)
	})
}

// TestFleetAsNodes runs 20 agents for two seconds with a 1 s lease
// (renewed every 250 ms) against an API server with the node authorizer
// and NodeRestriction: every agent registers as its own node, renews as
// that node, and nothing fails.
func TestFleetAsNodes(t *testing.T) {
	rec := &identities{renewals: map[string][][]string{}}
	s := apitest.Start(t, apitest.Options{NodeRules: true, Wrap: rec.wrap})
	var progress bytes.Buffer
	f, err := fleet.New(fleet.Config{
		Rest:                      s.AdminConfig,
		Nodes:                     20,
		Zones:                     fleet.ZoneNames(2),
		Duration:                  2 * time.Second,
		Ramp:                      200 * time.Millisecond,
		Connections:               3,
		KeepNodes:                 true,
		NodeLeaseDurationSeconds:  1,
		NodeStatusUpdateFrequency: 500 * time.Millisecond,
		ProgressInterval:          500 * time.Millisecond,
		Progress:                  &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result: %+v\nprogress:\n%s", res, progress.String())

	if res.Nodes != 20 || res.Errors != 0 || res.NotReadyMax != 0 || res.Ready != 20 || res.Interrupted {
		t.Errorf("nodes=%d errors=%d (%v) not_ready_max=%d ready=%d interrupted=%v; want 20 nodes, all ready, no errors",
			res.Nodes, res.Errors, res.ErrorsByKind, res.NotReadyMax, res.Ready, res.Interrupted)
	}
	// 20 nodes renewing every 250 ms for 2 s make about 160 renewals;
	// a loaded machine may make fewer, but not one per node.
	if res.LeaseRenewals < 40 || res.RenewP50Ms <= 0 || res.RenewP99Ms < res.RenewP50Ms {
		t.Errorf("renewals=%d p50=%vms p99=%vms; want at least 40 renewals and percentiles", res.LeaseRenewals, res.RenewP50Ms, res.RenewP99Ms)
	}
	if res.DurationS < 2 || res.Identity != fleet.IdentityNode || res.Connections != 3 {
		t.Errorf("duration_s=%v identity=%q connections=%d", res.DurationS, res.Identity, res.Connections)
	}
	if res.Servers != 1 || res.AgentsPerServer != nil || res.FailedOver != 0 || res.RenewP99WindowMaxMs <= 0 || res.RenewP99WindowS != 0.5 {
		t.Errorf("servers=%d agents_per_server=%v failed_over=%d renew_p99_window_max_ms=%v renew_p99_window_s=%v; want one server dialled directly and a window p99",
			res.Servers, res.AgentsPerServer, res.FailedOver, res.RenewP99WindowMaxMs, res.RenewP99WindowS)
	}
	if !strings.Contains(progress.String(), "fleet: ") {
		t.Errorf("no progress lines written")
	}

	rec.mu.Lock()
	renewed := len(rec.renewals)
	for lease, claims := range rec.renewals {
		want := []string{"system:node:" + lease, "system:nodes"}
		for _, c := range claims {
			if !slices.Equal(c, want) {
				t.Errorf("renewal of lease %s claimed %q, want %q", lease, c, want)
				break
			}
		}
	}
	rec.mu.Unlock()
	if renewed != 20 {
		t.Errorf("%d leases renewed, want 20", renewed)
	}

	nodes, err := s.Admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: fleet.FleetLabel + "=fleet"})
	if err != nil {
		t.Fatal(err)
	}
	zones := map[string]int{}
	for _, n := range nodes.Items {
		zones[n.Labels[corev1.LabelTopologyZone]]++
	}
	if diff := cmp.Diff(map[string]int{"zone-a": 10, "zone-b": 10}, zones); diff != "" {
		t.Errorf("nodes per zone (-want +got):\n%s", diff)
	}
}

// TestFleetAdminModeCleansUp runs the agents as the kubeconfig's user and
// checks that nobody impersonated and that the fleet's nodes and leases
// are gone afterwards.
func TestFleetAdminModeCleansUp(t *testing.T) {
	rec := &identities{renewals: map[string][][]string{}}
	s := apitest.Start(t, apitest.Options{NodeRules: true, Wrap: rec.wrap})
	var progress bytes.Buffer
	f, err := fleet.New(fleet.Config{
		Rest:                     s.AdminConfig,
		Nodes:                    5,
		NamePrefix:               "adm",
		Identity:                 fleet.IdentityAdmin,
		Duration:                 time.Second,
		Ramp:                     50 * time.Millisecond,
		WithoutPods:              true,
		NodeLeaseDurationSeconds: 1,
		Progress:                 &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 || res.LeaseRenewals == 0 || res.Identity != fleet.IdentityAdmin {
		t.Errorf("errors=%d (%v) renewals=%d identity=%q", res.Errors, res.ErrorsByKind, res.LeaseRenewals, res.Identity)
	}
	rec.mu.Lock()
	if rec.impersonated != 0 {
		t.Errorf("%d requests impersonated in admin mode", rec.impersonated)
	}
	rec.mu.Unlock()
	if !strings.Contains(progress.String(), "fleet: deleted the leases and nodes of 5 agents\n") {
		t.Errorf("progress does not report the cleanup:\n%s", progress.String())
	}
	ctx := context.Background()
	nodes, err := s.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases, err := s.Admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 || len(leases.Items) != 0 {
		t.Errorf("%d nodes and %d leases left after cleanup", len(nodes.Items), len(leases.Items))
	}
}

// TestFleetPreflight: credentials that may not impersonate nodes fail the
// setup, before any agent runs.
func TestFleetPreflight(t *testing.T) {
	s := apitest.Start(t, apitest.Options{NodeRules: true, Tokens: []string{`bobtoken,bob,2,"developers"`}})
	f, err := fleet.New(fleet.Config{Rest: s.Config("bobtoken"), Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Run(context.Background())
	if !errors.Is(err, fleet.ErrPreflight) || !strings.Contains(err.Error(), `User "bob" cannot impersonate resource "users"`) {
		t.Errorf("error = %v, want ErrPreflight naming the refused impersonation", err)
	}
	nodes, err := s.Admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 0 {
		t.Errorf("%d nodes registered after a failed preflight", len(nodes.Items))
	}
}

// cancelOnWrite ends a context at the first progress line.
type cancelOnWrite struct{ cancel context.CancelFunc }

func (c cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel()
	return len(p), nil
}

// TestFleetInterrupted: ending ctx stops the run early and still returns
// a result.
func TestFleetInterrupted(t *testing.T) {
	s := apitest.Start(t, apitest.Options{NodeRules: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f, err := fleet.New(fleet.Config{Rest: s.AdminConfig, Nodes: 2, Duration: time.Hour, Ramp: time.Millisecond, WithoutPods: true,
		ProgressInterval: 50 * time.Millisecond, Progress: cancelOnWrite{cancel}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Interrupted || res.Nodes != 2 || res.DurationS >= 3600 {
		t.Errorf("result %+v, want an interrupted run of 2 nodes", res)
	}
}

// frontend serves one API server's handler on a listener of its own, so
// that the test can kill it, and records the leases renewed through it
// before and after the kill.
type frontend struct {
	ts *httptest.Server

	mu sync.Mutex
	// renewed[0] holds the leases renewed before the kill, renewed[1]
	// those after it.
	renewed [2]map[string]bool
	killed  *atomic.Bool
}

func newFrontend(t *testing.T, api http.Handler, killed *atomic.Bool) *frontend {
	f := &frontend{renewed: [2]map[string]bool{{}, {}}, killed: killed}
	f.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if lease, ok := strings.CutPrefix(req.URL.Path, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"); ok && req.Method == http.MethodPut {
			phase := 0
			if f.killed.Load() {
				phase = 1
			}
			f.mu.Lock()
			f.renewed[phase][lease] = true
			f.mu.Unlock()
		}
		api.ServeHTTP(w, req)
	}))
	t.Cleanup(f.ts.Close)
	return f
}

// kill stops the server as a SIGKILL would, seen from its clients: it
// takes no more connections and drops those it has.
func (f *frontend) kill() {
	_ = f.ts.Listener.Close()
	f.ts.CloseClientConnections()
}

func (f *frontend) leases(phase int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.renewed[phase]))
}

// killOnProgress kills a server at the first progress line of the first
// maxLine lines of the measured run at which when() holds, and keeps every
// line.
type killOnProgress struct {
	when    func() bool
	kill    func()
	maxLine int
	killed  *atomic.Bool

	mu    sync.Mutex
	buf   bytes.Buffer
	lines int
}

func (k *killOnProgress) Write(p []byte) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if bytes.Contains(p, []byte(" nodes=")) {
		k.lines++
		if !k.killed.Load() && k.lines <= k.maxLine && k.when() {
			k.kill()
			k.killed.Store(true)
		}
	}
	return k.buf.Write(p)
}

func (k *killOnProgress) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.buf.String()
}

// TestFleetFailsOverBetweenServers runs 8 agents over two API servers on
// one store, through two balancers (transport j through balancer j mod
// 2), with the node lifecycle controller judging their leases (1 s,
// renewed every 250 ms; grace 2 s). The agents of even index renew
// through server a and the others through b; once each has, at most 2 s
// into the 5 s run, a dies (listener and connections closed), and for the
// remaining 3 s or more every agent renews through b, no node goes
// NotReady, and the fleet cleans up through b.
func TestFleetFailsOverBetweenServers(t *testing.T) {
	store := memory.New(memory.Config{})
	sa := apitest.Start(t, apitest.Options{NodeRules: true, Store: store})
	sb := apitest.Start(t, apitest.Options{NodeRules: true, Store: store})
	var killed atomic.Bool
	a, b := newFrontend(t, sa.API, &killed), newFrontend(t, sb.API, &killed)

	// The lifecycle controller talks to b's own listener, which stays up.
	lifecycle, err := nodelifecycle.New(nodelifecycle.Config{
		Client:                 sb.Admin,
		NodeMonitorPeriod:      100 * time.Millisecond,
		NodeMonitorGracePeriod: 2 * time.Second,
		Logger:                 slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	lifecycleDone := make(chan error, 1)
	go func() { lifecycleDone <- lifecycle.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-lifecycleDone; err != nil {
			t.Errorf("node lifecycle controller: %v", err)
		}
	})

	const nodes = 8
	var even, odd, all []string
	for i := range nodes {
		name := fleet.Place(fleet.DefaultNamePrefix, fleet.ZoneNames(1), i).Name
		all = append(all, name)
		if i%2 == 0 {
			even = append(even, name)
		} else {
			odd = append(odd, name)
		}
	}
	slices.Sort(even)
	slices.Sort(odd)
	slices.Sort(all)
	// Kill a once every agent has renewed, at the latest at the fourth
	// progress line (2 s) of the measured run.
	progress := &killOnProgress{kill: a.kill, killed: &killed, maxLine: 4, when: func() bool {
		return len(a.leases(0)) == len(even) && len(b.leases(0)) == len(odd)
	}}
	hostport := func(u string) string { return strings.TrimPrefix(u, "http://") }
	f, err := fleet.New(fleet.Config{
		Rest:                      &rest.Config{Host: a.ts.URL, BearerToken: apitest.AdminToken},
		Servers:                   []string{hostport(a.ts.URL), hostport(b.ts.URL)},
		Nodes:                     nodes,
		Duration:                  5 * time.Second,
		Ramp:                      100 * time.Millisecond,
		Connections:               2,
		NodeLeaseDurationSeconds:  1,
		NodeStatusUpdateFrequency: 500 * time.Millisecond,
		ProgressInterval:          500 * time.Millisecond,
		Progress:                  progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("result: %+v\nprogress:\n%s", res, progress.String())
	if !killed.Load() {
		t.Fatalf("server a was not killed: by 2 s into the run it had renewed %q and b %q; want every agent's lease renewed",
			a.leases(0), b.leases(0))
	}

	if res.NotReadyMax != 0 || res.Ready != nodes || res.Interrupted {
		t.Errorf("not_ready_max=%d ready=%d interrupted=%v; want every node Ready throughout", res.NotReadyMax, res.Ready, res.Interrupted)
	}
	if res.Servers != 2 || !slices.Equal(res.AgentsPerServer, []int{4, 4}) || res.FailedOver != 1 {
		t.Errorf("servers=%d agents_per_server=%v failed_over=%d; want 2 servers, 4 agents each, balancer 0 failed over",
			res.Servers, res.AgentsPerServer, res.FailedOver)
	}
	if res.RenewP99WindowMaxMs <= 0 || res.RenewP99WindowMaxMs < res.RenewP50Ms || res.RenewP99WindowS != 0.5 {
		t.Errorf("renew_p99_window_max_ms=%v (p50 %v) renew_p99_window_s=%v; want a window p99 over 0.5 s windows",
			res.RenewP99WindowMaxMs, res.RenewP50Ms, res.RenewP99WindowS)
	}

	// Before the kill each server renewed its own half, and only that.
	if diff := cmp.Diff(even, a.leases(0)); diff != "" {
		t.Errorf("leases renewed through server a before its death (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(odd, b.leases(0)); diff != "" {
		t.Errorf("leases renewed through server b before a's death (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(all, b.leases(1)); diff != "" {
		t.Errorf("leases renewed through server b after a's death (-want +got):\n%s", diff)
	}

	left, err := sb.Admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 || !strings.Contains(progress.String(), "fleet: deleted the leases and nodes of 8 agents\n") {
		t.Errorf("%d nodes left; cleanup through the surviving server did not happen:\n%s", len(left.Items), progress.String())
	}
}
