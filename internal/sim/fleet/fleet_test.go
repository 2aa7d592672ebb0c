package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/apitest"
	"knode/internal/sim/fleet"
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
