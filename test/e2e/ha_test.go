package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"knode/internal/storage/etcd/etcdtest"
)

// The HA tests' leader election: a lease of 4 s, renewed every second,
// given up after 3 s without a renewal.
const (
	haLeaseDuration = 4 * time.Second
	haRetryPeriod   = time.Second
)

var haLeaderArgs = []string{
	"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
	"--node-monitor-period=1s", "--node-monitor-grace-period=4s",
}

var campaignLine = regexp.MustCompile(`msg="campaigning for the lease" lease=kube-system/kube-controller-manager identity=(\S+)`)

// identity is the holder identity the server logged when it began to
// campaign.
func (s *server) identity(t *testing.T) string {
	t.Helper()
	var id string
	eventually(t, "the server logs its identity", 20*time.Second, 20*time.Millisecond, func() (bool, string) {
		if m := campaignLine.FindStringSubmatch(s.Log()); m != nil {
			id = m[1]
			return true, ""
		}
		return false, "no campaign line in the log"
	})
	return id
}

// leaseHolders are the holderIdentity of kube-controller-manager's and
// kube-scheduler's Leases ("" when missing or released).
func leaseHolders(t *testing.T, c kubernetes.Interface) ([2]string, error) {
	var out [2]string
	for i, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		l, err := c.CoordinationV1().Leases("kube-system").Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return out, err
		default:
			out[i] = ptr.Deref(l.Spec.HolderIdentity, "")
		}
	}
	return out, nil
}

func waitLeaseHolders(t *testing.T, c kubernetes.Interface, id string, timeout time.Duration) {
	t.Helper()
	eventually(t, id+" holds both Leases", timeout, 20*time.Millisecond, func() (bool, string) {
		h, err := leaseHolders(t, c)
		if err != nil {
			return false, err.Error()
		}
		return h == [2]string{id, id}, fmt.Sprintf("holders %q", h)
	})
}

// startedLeading counts the server's "started leading" lines for a Lease.
func startedLeading(s *server, lease string) int {
	return strings.Count(s.Log(), `msg="started leading" lease=kube-system/`+lease+" ")
}

func registeredNodeEvents(t *testing.T, c kubernetes.Interface, node string) (int, error) {
	evs, err := c.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == "RegisteredNode" && e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == node {
			n++
		}
	}
	return n, nil
}

// nodeLeaseRenewed is the renewTime of the node's Lease.
func nodeLeaseRenewed(c kubernetes.Interface, node string) (time.Time, error) {
	l, err := c.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, nil
	}
	return l.Spec.RenewTime.Time, nil
}

// healthy fails the test unless the node is Ready and carries neither the
// not-ready nor the unreachable taint.
func healthy(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if status, reason := nodeReady(n); status != corev1.ConditionTrue {
		t.Fatalf("node %s is Ready=%s (%s), want it to stay Ready", name, status, reason)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady {
			t.Fatalf("node %s is tainted %s:%s", name, taint.Key, taint.Effect)
		}
	}
}

// TestHA runs two `knode server` on one external etcd with one agent: one
// server runs the controllers and the scheduler, and when it is killed the
// other takes both Leases over and the node stays Ready.
func TestHA(t *testing.T) {
	endpoint := etcdtest.Start(t)
	args := append([]string{"--etcd-servers", endpoint}, haLeaderArgs...)
	a := startServer(t, serverOptions{Args: args})
	idA := a.identity(t)
	clientA := a.Clientset(t)
	// a is alone: it takes both Leases at once, without waiting a lease
	// duration.
	waitLeaseHolders(t, clientA, idA, haLeaseDuration)

	// b joins with only the etcd endpoints and a's cluster token (and the
	// built-in driver's directory, which servers of one cluster share).
	b := startServer(t, serverOptions{Args: append(append([]string(nil), args...), "--storage-dir", a.StorageDir,
		"--token-file", filepath.Join(a.DataDir, "token"))})
	// b serves a's CA: a's admin kubeconfig works against it.
	aAtB, err := clientcmd.BuildConfigFromFlags(b.URL, a.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigOrDie(aAtB).CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("a's admin kubeconfig against b: %v", err)
	}
	idB := b.identity(t)
	if idA == idB {
		t.Fatalf("both servers have identity %q", idA)
	}
	clientB := b.Clientset(t)

	// The agents know both servers and fail over from a, which is killed
	// below, to b: node is told of them with --server, and kcNode by a
	// kubeconfig with two cluster entries of one CA, a's current.
	const node, kcNode = "ha-node", "ha-node-kubeconfig"
	startAgent(t, b, node, t.TempDir(), "--runtime=none", "--server", a.URL, "--server", b.URL)
	startAgent(t, b, kcNode, t.TempDir(), "--runtime=none", "--kubeconfig", kubeconfigNaming(t, a, kcNode, b))
	for _, name := range []string{node, kcNode} {
		eventually(t, name+" Ready", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
			n, err := clientB.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			status, reason := nodeReady(n)
			return status == corev1.ConditionTrue, string(status) + " " + reason
		})
	}
	// Let a few of the agent's renewals (every second) and of the node
	// monitor's passes (every second) go by: with two node lifecycle
	// controllers there would be two RegisteredNode events by then.
	var first time.Time
	eventually(t, "the agent's first renewal", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		var err error
		first, err = nodeLeaseRenewed(clientB, node)
		return err == nil && !first.IsZero(), fmt.Sprint(err)
	})
	eventually(t, "the agent renews for 3 s", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		renewed, err := nodeLeaseRenewed(clientB, node)
		if err != nil {
			return false, err.Error()
		}
		return renewed.Sub(first) >= 3*time.Second, renewed.String()
	})
	for _, name := range []string{node, kcNode} {
		if n, err := registeredNodeEvents(t, clientB, name); err != nil || n != 1 {
			t.Fatalf("%d RegisteredNode events for %s (%v), want exactly 1", n, name, err)
		}
	}
	for _, lease := range []string{"kube-controller-manager", "kube-scheduler"} {
		if na, nb := startedLeading(a, lease), startedLeading(b, lease); na != 1 || nb != 0 {
			t.Errorf("%s: a logged started leading %d times and b %d, want 1 and 0", lease, na, nb)
		}
	}
	if h, err := leaseHolders(t, clientB); err != nil || h != [2]string{idA, idA} {
		t.Fatalf("Lease holders %q (%v), want a (%s) for both", h, err, idA)
	}

	a.Kill9()
	killed := time.Now()
	// a's Leases expire a lease duration after its last renewal, and b
	// looks every retry period, jittered by up to 1.2 times more.
	bound := haLeaseDuration + time.Duration(2.2*float64(haRetryPeriod)) + 2*time.Second
	waitLeaseHolders(t, clientB, idB, bound)
	took := time.Since(killed)
	t.Logf("b holds both Leases %s after a was killed (lease duration %s)", took.Round(100*time.Millisecond), haLeaseDuration)
	eventually(t, "b logs that it leads", 10*time.Second, 20*time.Millisecond, func() (bool, string) {
		nc, ns := startedLeading(b, "kube-controller-manager"), startedLeading(b, "kube-scheduler")
		if nc > 1 || ns > 1 {
			t.Fatalf("b logged started leading %d times for the controller manager and %d for the scheduler, want once each", nc, ns)
		}
		return nc == 1 && ns == 1, fmt.Sprintf("controller manager %d, scheduler %d", nc, ns)
	})
	// b's node lifecycle controller is new: it registers the node and
	// gives it a fresh grace period (4 s), which the agent keeps meeting.
	for _, name := range []string{node, kcNode} {
		eventually(t, "b registers "+name, 20*time.Second, 100*time.Millisecond, func() (bool, string) {
			healthy(t, clientB, node)
			healthy(t, clientB, kcNode)
			n, err := registeredNodeEvents(t, clientB, name)
			if err != nil {
				return false, err.Error()
			}
			return n == 2, fmt.Sprintf("%d RegisteredNode events", n)
		})
	}
	tookOver := time.Now()
	for _, name := range []string{node, kcNode} {
		eventually(t, name+" stays Ready past a grace period under b", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
			healthy(t, clientB, node)
			healthy(t, clientB, kcNode)
			renewed, err := nodeLeaseRenewed(clientB, name)
			if err != nil {
				return false, err.Error()
			}
			return renewed.After(tookOver.Add(5 * time.Second)), renewed.String()
		})
		if n, err := registeredNodeEvents(t, clientB, name); err != nil || n != 2 {
			t.Errorf("%d RegisteredNode events for %s after the takeover (%v), want 2", n, name, err)
		}
	}
}

// kubeconfigNaming writes node's kubeconfig for s (`knode kubeconfig
// --node`) with one more cluster entry for each of others, a copy of s's
// cluster with the other's URL: a kubeconfig that names several servers
// of one cluster, which the agent fails over between.
func kubeconfigNaming(t *testing.T, s *server, node string, others ...*server) string {
	t.Helper()
	cfg := nodeKubeconfig(t, s, node)
	current := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	if current == nil || current.Server != s.URL {
		t.Fatalf("knode kubeconfig --node %s: the current cluster is %+v, want server %s", node, current, s.URL)
	}
	for i, o := range others {
		c := current.DeepCopy()
		c.Server = o.URL
		cfg.Clusters[fmt.Sprintf("other-%d", i)] = c
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, node+"-servers.kubeconfig", string(data))
}

// freeze stops s with SIGSTOP: its kernel still completes connections to
// its port, but nothing answers them. It is killed at the end of the test
// (before its own cleanup, which would wait out a SIGTERM it cannot see).
func (s *server) freeze(t *testing.T) {
	t.Helper()
	if err := s.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill9)
}

// TestHAStoppedServer stops the leading server with SIGSTOP rather than
// killing it: dials to it still succeed, so only the agent balancer's
// health check (GET /readyz) tells it from a live one. The agent fails
// over to the other server on that check, and its node stays Ready
// through the takeover.
func TestHAStoppedServer(t *testing.T) {
	endpoint := etcdtest.Start(t)
	// Agents' Leases of 4 s (renewed every second); a grace period of
	// 12 s, more than a health check's period and timeout (5 s and 2 s).
	args := append(append([]string{"--etcd-servers", endpoint}, haLeaderArgs...), "--node-monitor-grace-period=12s")
	a := startServer(t, serverOptions{Args: args})
	idA := a.identity(t)
	waitLeaseHolders(t, a.Clientset(t), idA, haLeaseDuration)
	b := startServer(t, serverOptions{Args: append(slices.Clone(args), "--storage-dir", a.StorageDir,
		"--token-file", filepath.Join(a.DataDir, "token"))})
	idB := b.identity(t)
	clientB := b.Clientset(t)

	const node = "ha-stopped"
	agent := startAgent(t, b, node, t.TempDir(), "--runtime=none", "--server", a.URL, "--server", b.URL)
	eventually(t, node+" Ready", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		n, err := clientB.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		status, reason := nodeReady(n)
		return status == corev1.ConditionTrue, string(status) + " " + reason
	})

	a.freeze(t)
	stopped := time.Now()
	waitLeaseHolders(t, clientB, idB, haLeaseDuration+time.Duration(2.2*float64(haRetryPeriod))+2*time.Second)
	// The agent's balancer passed a over on its check, not on a dial.
	eventually(t, "the agent's balancer fails over on a health check", 15*time.Second, 100*time.Millisecond, func() (bool, string) {
		log := agent.stderr.String()
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, `msg="failed over"`) && strings.Contains(line, `reason="health check"`) &&
				strings.Contains(line, "from="+strings.TrimPrefix(a.URL, "https://")) {
				return true, ""
			}
		}
		return false, tail(log, 5)
	})
	eventually(t, node+" renews a grace period past the stop and stays Ready", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		healthy(t, clientB, node)
		renewed, err := nodeLeaseRenewed(clientB, node)
		if err != nil {
			return false, err.Error()
		}
		return renewed.After(stopped.Add(14 * time.Second)), renewed.String()
	})
	t.Logf("the agent failed over from the stopped server; %s Ready %s after the SIGSTOP", node, time.Since(stopped).Round(100*time.Millisecond))
}

// TestHAFlags: the leader election flags are checked by upstream's rules,
// and the error names the flag.
func TestHAFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--leader-elect-renew-deadline=20s"}, `--leader-elect-lease-duration: Invalid value: "15s": must be greater than --leader-elect-renew-deadline (20s)`},
		{[]string{"--leader-elect-retry-period=9s"}, `--leader-elect-renew-deadline: Invalid value: "10s": must be greater than --leader-elect-retry-period (9s) times 1.2`},
	} {
		p := startProcess(t, append([]string{"server", "--data-dir", t.TempDir(), "--secure-port=0", "--storage-dir", t.TempDir()}, tc.args...)...)
		select {
		case <-p.exited:
		case <-time.After(readyTimeout):
			p.kill()
			t.Fatalf("knode server %s did not exit", strings.Join(tc.args, " "))
		}
		if p.err == nil || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("knode server %s: %v\n%s\nwant an error naming %q", strings.Join(tc.args, " "), p.err, p.stderr.String(), tc.want)
		}
	}
}
