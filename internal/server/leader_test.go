package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"knode/internal/server"
	"knode/internal/storage/etcd/etcdtest"
)

// waitLimit bounds every wait of these tests; nothing should take half.
const waitLimit = 30 * time.Second

func tailLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(ls[max(0, len(ls)-n):], "\n")
}

// running is one in-process server the test can stop.
type running struct {
	client kubernetes.Interface
	stop   func() // cancels Run and waits for it; safe to call twice
}

// runServer runs server.Run with cfg changed by opts, and returns once it
// is ready. It stops when the test ends, if not before.
func runServer(t *testing.T, opts ...func(*server.Config)) *running {
	t.Helper()
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, SecurePort: 0, Storage: server.StorageConfig{DataDir: filepath.Join(dir, "storage")}}
	for _, o := range opts {
		o(&cfg)
	}
	ready := make(chan *server.Server, 1)
	cfg.OnReady = func(s *server.Server) { ready <- s }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg) }()
	var srv *server.Server
	select {
	case srv = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("server stopped: %v", err)
	}
	var stopped bool
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	rc, err := clientcmd.BuildConfigFromFlags("", srv.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS = -1
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &running{client: client, stop: stop}
}

// elected runs the server on the shared etcd as identity, with short
// leader election timings and fast node monitoring.
func elected(endpoint, identity string) func(*server.Config) {
	return func(c *server.Config) {
		c.EtcdServers = []string{endpoint}
		// Servers of one cluster share its token (and so its CA).
		c.Token = "knode-test-cluster-token"
		c.LeaderElection = server.LeaderElection{LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 250 * time.Millisecond, Identity: identity}
		c.NodeMonitorPeriod = 200 * time.Millisecond
	}
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.After(waitLimit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: not after %s: %s", what, waitLimit, msg)
		case <-tick.C:
		}
	}
}

// holders are the holderIdentity of the controller manager's and the
// scheduler's Leases ("" when missing or released).
func holders(t *testing.T, c kubernetes.Interface) [2]string {
	t.Helper()
	var out [2]string
	for i, name := range []string{server.ControllerManagerLease, server.SchedulerLease} {
		l, err := c.CoordinationV1().Leases(server.LeaseNamespace).Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		default:
			out[i] = ptr.Deref(l.Spec.HolderIdentity, "")
		}
	}
	return out
}

func waitHolders(t *testing.T, c kubernetes.Interface, id string) {
	t.Helper()
	waitFor(t, id+" holds both Leases", func() (bool, string) {
		h := holders(t, c)
		return h == [2]string{id, id}, fmt.Sprintf("holders %q", h)
	})
}

// metrics is the server's /metrics, as its admin reads it.
func metrics(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

var statusLine = regexp.MustCompile(`(?m)^` + server.MetricLeaderStatus + `\{name="([^"]+)"\} (\S+)$`)

// leading is the leader_election_master_status of each Lease on c's server.
func leading(t *testing.T, c kubernetes.Interface) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range statusLine.FindAllStringSubmatch(metrics(t, c), -1) {
		out[m[1]] = m[2]
	}
	return out
}

func registeredEvents(t *testing.T, c kubernetes.Interface, node string) int {
	t.Helper()
	evs, err := c.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == "RegisteredNode" && e.InvolvedObject.Name == node {
			n++
		}
	}
	return n
}

// Two servers on one etcd: one runs the controllers and the scheduler;
// when it stops, the other takes both Leases at once (they were
// released) and its new node lifecycle controller registers the node
// afresh; when the other loses its Lease while running, it stops its
// controllers, campaigns again, and a new term starts new ones.
func TestTwoServersOneEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t)
	a := runServer(t, elected(endpoint, "host_a"))
	waitHolders(t, a.client, "host_a")
	b := runServer(t, elected(endpoint, "host_b"))

	ctx := context.Background()
	if _, err := a.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a registers n1", func() (bool, string) {
		n := registeredEvents(t, b.client, "n1")
		return n >= 1, fmt.Sprintf("%d RegisteredNode events", n)
	})
	// b campaigns all along and runs nothing: a's node lifecycle
	// controller has made passes (its zone metrics), b's has not.
	waitFor(t, "a's node lifecycle controller reports the zone", func() (bool, string) {
		return strings.Contains(metrics(t, a.client), "node_collector_zone_size"), "no node_collector_zone_size"
	})
	if m := metrics(t, b.client); strings.Contains(m, "node_collector_") {
		t.Errorf("b, which does not lead, serves node lifecycle metrics")
	}
	want := map[string]string{server.ControllerManagerLease: "1", server.SchedulerLease: "1"}
	if got := leading(t, a.client); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("a's %s %v, want %v", server.MetricLeaderStatus, got, want)
	}
	want = map[string]string{server.ControllerManagerLease: "0", server.SchedulerLease: "0"}
	if got := leading(t, b.client); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("b's %s %v, want %v", server.MetricLeaderStatus, got, want)
	}
	if n := registeredEvents(t, b.client, "n1"); n != 1 {
		t.Errorf("%d RegisteredNode events for n1 with one leader, want 1", n)
	}

	// a stops gracefully: the Leases are released and b needs no lease
	// duration to take them.
	a.stop()
	start := time.Now()
	waitHolders(t, b.client, "host_b")
	if took := time.Since(start); took >= 2*time.Second {
		t.Errorf("b took the Leases after %s, want less than the lease duration: a did not release them", took)
	}
	waitFor(t, "b's new node lifecycle controller registers n1", func() (bool, string) {
		n := registeredEvents(t, b.client, "n1")
		return n == 2, fmt.Sprintf("%d RegisteredNode events", n)
	})
	want = map[string]string{server.ControllerManagerLease: "1", server.SchedulerLease: "1"}
	if got := leading(t, b.client); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("b's %s %v, want %v", server.MetricLeaderStatus, got, want)
	}

	// Another holder takes the controller manager's Lease from under b:
	// b's renewals fail, its controllers stop, and once that holder's
	// lease runs out b leads a new term with new controllers.
	lease, err := b.client.CoordinationV1().Leases(server.LeaseNamespace).Get(ctx, server.ControllerManagerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec = coordinationv1.LeaseSpec{
		HolderIdentity: ptr.To("elsewhere_thief"), LeaseDurationSeconds: ptr.To[int32](2),
		AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To(*lease.Spec.LeaseTransitions + 1),
	}
	if _, err := b.client.CoordinationV1().Leases(server.LeaseNamespace).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b stops leading the controller manager", func() (bool, string) {
		got := leading(t, b.client)
		return got[server.ControllerManagerLease] == "0", fmt.Sprint(got)
	})
	if got := leading(t, b.client); got[server.SchedulerLease] != "1" {
		t.Errorf("b's scheduler Lease status %q, want 1: the Leases are independent", got[server.SchedulerLease])
	}
	waitHolders(t, b.client, "host_b")
	waitFor(t, "b's third node lifecycle controller registers n1", func() (bool, string) {
		n := registeredEvents(t, b.client, "n1")
		return n == 3, fmt.Sprintf("%d RegisteredNode events", n)
	})
}

// With leader election disabled the controllers run at once and no Lease
// is written.
func TestLeaderElectionDisabled(t *testing.T) {
	s := runServer(t, func(c *server.Config) {
		c.LeaderElection.Disabled = true
		c.NodeMonitorPeriod = 200 * time.Millisecond
	})
	if _, err := s.client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "n1 is registered", func() (bool, string) {
		n := registeredEvents(t, s.client, "n1")
		return n == 1, fmt.Sprintf("%d RegisteredNode events", n)
	})
	if h := holders(t, s.client); h != [2]string{} {
		t.Errorf("Leases held by %q with leader election disabled", h)
	}
	if m := metrics(t, s.client); strings.Contains(m, server.MetricLeaderStatus) {
		t.Errorf("%s served with leader election disabled", server.MetricLeaderStatus)
	}
}
