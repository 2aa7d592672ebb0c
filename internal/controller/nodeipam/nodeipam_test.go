package nodeipam_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/controller/nodeipam"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func cidrs(t *testing.T, ss ...string) []*net.IPNet {
	t.Helper()
	var out []*net.IPNet
	for _, s := range ss {
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func newController(t *testing.T, client kubernetes.Interface, cfg nodeipam.Config) *nodeipam.Controller {
	t.Helper()
	cfg.Client = client
	if cfg.Clock == nil {
		cfg.Clock = clocktesting.NewFakeClock(epoch)
	}
	cfg.Logger = quiet
	c, err := nodeipam.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewRejectsBadRanges(t *testing.T) {
	client := newAPI(t, nil)
	cases := []struct {
		name    string
		cfg     nodeipam.Config
		wantErr string
	}{
		{name: "no cluster CIDR", cfg: nodeipam.Config{}, wantErr: "nodeipam: must specify --cluster-cidr if --allocate-node-cidrs is set"},
		{
			name:    "two IPv4",
			cfg:     nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16", "10.1.0.0/16")},
			wantErr: "nodeipam: len of ClusterCIDRs==2 and they are not configured as dual stack (at least one from each IPFamily",
		},
		{
			name:    "node mask shorter than cluster",
			cfg:     nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/25")},
			wantErr: "nodeipam: invalid --cluster-cidr 10.0.0.0/25, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family (24)",
		},
		{
			name:    "IPv6 too many subnets",
			cfg:     nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16", "fd00::/40")},
			wantErr: "nodeipam: New CIDR set failed; the node CIDR size is too big",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Client = client
			_, err := nodeipam.New(tc.cfg)
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("New error = %v\nwant %s", err, tc.wantErr)
			}
		})
	}
}

func TestDistinctCIDRsForSeveralNodes(t *testing.T) {
	ctx := context.Background()
	client := newAPI(t, nil)
	for _, name := range []string{"node-c", "node-a", "node-b", "node-d"} {
		createNode(t, client, name)
	}
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.244.0.0/16")})
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"node-a": {"10.244.0.0/24"},
		"node-b": {"10.244.1.0/24"},
		"node-c": {"10.244.2.0/24"},
		"node-d": {"10.244.3.0/24"},
	}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}
	// A second pass changes nothing.
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("after a second pass (-want +got):\n%s", diff)
	}
	if got := c.Sets()[0].Used(); got != 4 {
		t.Errorf("Used = %d, want 4", got)
	}
}

func TestRestartReoccupiesExistingCIDRs(t *testing.T) {
	ctx := context.Background()
	client := newAPI(t, nil)
	cfg := nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/22")} // 4 subnets
	// Nodes that already hold CIDRs (given by an earlier controller or by
	// hand), including one out of allocation order.
	createNode(t, client, "old-1", "10.0.0.0/24")
	createNode(t, client, "old-2", "10.0.2.0/24")
	first := newController(t, client, cfg)
	if err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	createNode(t, client, "new-1")
	if err := first.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	// A new controller (a restart) sees the same nodes.
	restarted := newController(t, client, cfg)
	createNode(t, client, "new-2")
	if err := restarted.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"old-1": {"10.0.0.0/24"},
		"old-2": {"10.0.2.0/24"},
		"new-1": {"10.0.1.0/24"},
		"new-2": {"10.0.3.0/24"},
	}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}
	if got := restarted.Sets()[0].Used(); got != 4 {
		t.Errorf("restarted controller: Used = %d, want 4", got)
	}
}

func TestReleaseOnDeleteAndReuse(t *testing.T) {
	ctx := context.Background()
	client := newAPI(t, nil)
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/23")}) // 2 subnets
	createNode(t, client, "a")
	createNode(t, client, "b")
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	// The range is exhausted: c gets nothing, an error and one event.
	createNode(t, client, "c")
	err := c.Sync(ctx)
	wantErr := "failed to allocate cidr from cluster cidr at idx:0: CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range"
	if err == nil || err.Error() != wantErr {
		t.Fatalf("Sync error = %v\nwant %s", err, wantErr)
	}
	if err := c.Sync(ctx); err == nil {
		t.Fatal("second Sync: no error, want exhaustion again")
	}
	wantEvents := []string{"Normal CIDRNotAvailable: Node c status is now: CIDRNotAvailable (cidrAllocator)"}
	if diff := cmp.Diff(wantEvents, nodeEvents(t, client, "c")); diff != "" {
		t.Errorf("events about c (-want +got):\n%s", diff)
	}

	// Deleting a frees its CIDR, and c gets it.
	deleteNode(t, client, "a")
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"b": {"10.0.1.0/24"}, "c": {"10.0.0.0/24"}}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}

	// A node re-created under a deleted node's name is a new node: the old
	// one's CIDR is released and the new one gets whatever is next.
	deleteNode(t, client, "b")
	createNode(t, client, "b")
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want = map[string][]string{"b": {"10.0.1.0/24"}, "c": {"10.0.0.0/24"}}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("after re-creating b (-want +got):\n%s", diff)
	}
	if got := c.Sets()[0].Used(); got != 2 {
		t.Errorf("Used = %d, want 2", got)
	}
}

func TestDualStack(t *testing.T) {
	cases := []struct {
		name     string
		clusters []string
		want     map[string][]string
	}{
		{
			name:     "IPv4 first",
			clusters: []string{"10.244.0.0/16", "fd00:10:244::/56"},
			want: map[string][]string{
				"n1": {"10.244.0.0/24", "fd00:10:244::/64"},
				"n2": {"10.244.1.0/24", "fd00:10:244:1::/64"},
			},
		},
		{
			name:     "IPv6 first",
			clusters: []string{"fd00:10:244::/56", "10.244.0.0/16"},
			want: map[string][]string{
				"n1": {"fd00:10:244::/64", "10.244.0.0/24"},
				"n2": {"fd00:10:244:1::/64", "10.244.1.0/24"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := newAPI(t, nil)
			createNode(t, client, "n1")
			createNode(t, client, "n2")
			c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, tc.clusters...)})
			if err := c.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, podCIDRs(t, client)); diff != "" {
				t.Errorf("pod CIDRs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDualStackExhaustionOfOneFamilyTakesNothing(t *testing.T) {
	ctx := context.Background()
	client := newAPI(t, nil)
	// Plenty of IPv4, one IPv6 subnet.
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16", "fd00::/64")})
	createNode(t, client, "n1")
	createNode(t, client, "n2")
	if err := c.Sync(ctx); err == nil || !strings.HasPrefix(err.Error(), "failed to allocate cidr from cluster cidr at idx:1: ") {
		t.Fatalf("Sync error = %v, want exhaustion at idx:1", err)
	}
	if got := c.Sets()[0].Used(); got != 1 {
		t.Errorf("IPv4 Used = %d, want 1 (n2's IPv4 CIDR given back)", got)
	}
	want := map[string][]string{"n1": {"10.0.0.0/24", "fd00::/64"}, "n2": nil}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}
}

func TestFirstPassRefusesCIDRsItCannotOccupy(t *testing.T) {
	ctx := context.Background()
	client := newAPI(t, nil)
	createNode(t, client, "good", "10.0.0.0/24")
	createNode(t, client, "stray", "192.168.3.0/24")
	createNode(t, client, "waiting")
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16")})
	err := c.Sync(ctx)
	wantErr := "cannot occupy existing node pod CIDRs: failed to mark cidr[192.168.3.0/24] at idx [0] as occupied for node: stray: cidr 192.168.3.0/24 is out the range of cluster cidr 10.0.0.0/16"
	if !errors.Is(err, nodeipam.ErrCannotOccupy) || err.Error() != wantErr {
		t.Fatalf("Sync error = %v\nwant %s", err, wantErr)
	}
	if got := podCIDRs(t, client)["waiting"]; got != nil {
		t.Errorf("waiting got %v before the controller started", got)
	}
	if got := c.Sets()[0].Used(); got != 0 {
		t.Errorf("Used = %d after a failed start, want 0", got)
	}
	// Once the stray node is gone the controller starts.
	deleteNode(t, client, "stray")
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"good": {"10.0.0.0/24"}, "waiting": {"10.0.1.0/24"}}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}
}

func TestPatchConflictKeepsCIDRsSetByOthers(t *testing.T) {
	ctx := context.Background()
	var before hook
	client := newAPI(t, &before)
	createNode(t, client, "n1")
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16")})

	// Between the controller's list and its patch, someone else gives n1
	// a CIDR.
	var once sync.Once
	before = func(r *http.Request) {
		if r.Method != http.MethodPatch {
			return
		}
		once.Do(func() {
			before = nil
			n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.0.5.0/24", []string{"10.0.5.0/24"}
			if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	createNode(t, client, "n2")
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// n1 keeps the other writer's CIDR; the one reserved for it went back
	// to the pool, and round-robin hands out the next one to n2.
	want := map[string][]string{"n1": {"10.0.5.0/24"}, "n2": {"10.0.1.0/24"}}
	if diff := cmp.Diff(want, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}
	s := c.Sets()[0]
	if s.InUse(net.ParseIP("10.0.0.1")) || !s.InUse(net.ParseIP("10.0.5.1")) || s.Used() != 2 {
		t.Errorf("allocator: 10.0.0.0 used %v, 10.0.5.0 used %v, Used %d; want false, true, 2",
			s.InUse(net.ParseIP("10.0.0.1")), s.InUse(net.ParseIP("10.0.5.1")), s.Used())
	}
}

func TestAssignmentFailureEventAndRelease(t *testing.T) {
	ctx := context.Background()
	var before hook
	client := newAPI(t, &before)
	createNode(t, client, "n1")
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16")})
	patches := 0
	before = func(r *http.Request) {
		if r.Method == http.MethodPatch {
			patches++
			r.Header.Set("Content-Type", "application/unknown") // the server refuses it
		}
	}
	err := c.Sync(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "failed to update node n1 pod CIDRs [10.0.0.0/24] after 3 attempts: ") {
		t.Fatalf("Sync error = %v", err)
	}
	if patches != 3 {
		t.Errorf("%d patch attempts, want 3", patches)
	}
	wantEvents := []string{"Normal CIDRAssignmentFailed: Node n1 status is now: CIDRAssignmentFailed (cidrAllocator)"}
	if diff := cmp.Diff(wantEvents, nodeEvents(t, client, "n1")); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if got := c.Sets()[0].Used(); got != 0 {
		t.Errorf("Used = %d, want 0 (released after the failure)", got)
	}
	before = nil
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"n1": {"10.0.1.0/24"}}, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs after recovery (-want +got):\n%s", diff)
	}
}

// waitForNode blocks until the named node satisfies cond, following a
// watch (no polling, no sleeps). The context bounds a broken test.
func waitForNode(t *testing.T, ctx context.Context, client kubernetes.Interface, name string, cond func(*corev1.Node) bool) {
	t.Helper()
	n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond(n) {
		return
	}
	w, err := client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: n.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if n, ok := ev.Object.(*corev1.Node); ok && cond(n) {
			return
		}
	}
	t.Fatalf("node %s: watch ended before the condition held: %v", name, ctx.Err())
}

// waitForEvent blocks until an event with reason about the node exists.
func waitForEvent(t *testing.T, ctx context.Context, client kubernetes.Interface, node, reason string) {
	t.Helper()
	w, err := client.CoreV1().Events(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", node).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if e, ok := ev.Object.(*corev1.Event); ok && e.Reason == reason {
			return
		}
	}
	t.Fatalf("no %s event about %s: %v", reason, node, ctx.Err())
}

func hasCIDR(n *corev1.Node) bool { return len(n.Spec.PodCIDRs) > 0 }

func TestRunFollowsNodesAndResyncsOnTheClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := newAPI(t, nil)
	clk := clocktesting.NewFakeClock(epoch)
	c := newController(t, client, nodeipam.Config{
		ClusterCIDRs: cidrs(t, "10.0.0.0/24"), // a single subnet
		Clock:        clk,
		ResyncPeriod: time.Minute,
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()

	createNode(t, client, "a")
	waitForNode(t, ctx, client, "a", hasCIDR)

	createNode(t, client, "b")
	waitForEvent(t, ctx, client, "b", nodeipam.ReasonCIDRNotAvailable)

	// a goes; b gets its CIDR on the next full pass, which the clock
	// paces.
	deleteNode(t, client, "a")
	clk.Step(time.Minute)
	waitForNode(t, ctx, client, "b", hasCIDR)
	if diff := cmp.Diff(map[string][]string{"b": {"10.0.0.0/24"}}, podCIDRs(t, client)); diff != "" {
		t.Errorf("pod CIDRs (-want +got):\n%s", diff)
	}

	// Between passes the watch alone serves: b's delete frees the subnet
	// for d without any clock step.
	deleteNode(t, client, "b")
	createNode(t, client, "d")
	waitForNode(t, ctx, client, "d", hasCIDR)

	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
}

func TestRunRefusesToStartOverStrayCIDRs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := newAPI(t, nil)
	createNode(t, client, "stray", "fd00::/64")
	c := newController(t, client, nodeipam.Config{ClusterCIDRs: cidrs(t, "10.0.0.0/16")})
	err := c.Run(ctx)
	if !errors.Is(err, nodeipam.ErrCannotOccupy) {
		t.Fatalf("Run = %v, want ErrCannotOccupy", err)
	}
}
