package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"knode/internal/server/apiendpoints"
	"knode/internal/storage/etcd/etcdtest"
)

// The three-server test's node health: agents' Leases of 10 s (renewed
// every 2.5 s), a grace period of 12 s.
const (
	clusterNodeLease  = "10"
	clusterNodeGrace  = 12 * time.Second
	clusterEvictEvery = 10 * time.Second // --node-eviction-rate 0.1
)

// nodeLog follows every Node through a watch: when each was first seen
// Ready, when each went not Ready, and when each got the unreachable or
// not-ready NoExecute taint, as the test saw it.
type nodeLog struct {
	mu       sync.Mutex
	ready    map[string]bool
	notReady map[string]time.Time // first time a node seen Ready was seen otherwise
	tainted  map[string]time.Time
	zone     map[string]string
}

func followNodes(t *testing.T, c kubernetes.Interface) *nodeLog {
	l := &nodeLog{ready: map[string]bool{}, notReady: map[string]time.Time{}, tainted: map[string]time.Time{}, zone: map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
	})
	go func() {
		defer close(done)
		rv := ""
		for ctx.Err() == nil {
			if rv == "" {
				list, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				if err != nil {
					continue
				}
				for i := range list.Items {
					l.see(&list.Items[i])
				}
				rv = list.ResourceVersion
			}
			w, err := c.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				rv = ""
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					rv = ""
					break
				}
				if n, ok := ev.Object.(*corev1.Node); ok {
					l.see(n)
					rv = n.ResourceVersion
				}
			}
			w.Stop()
		}
	}()
	return l
}

func (l *nodeLog) see(n *corev1.Node) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.zone[n.Name] = n.Labels[corev1.LabelTopologyZone]
	status, _ := nodeReady(n)
	switch {
	case status == corev1.ConditionTrue:
		l.ready[n.Name] = true
	case l.ready[n.Name]:
		if _, ok := l.notReady[n.Name]; !ok {
			l.notReady[n.Name] = now
		}
	}
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoExecute && (taint.Key == corev1.TaintNodeUnreachable || taint.Key == corev1.TaintNodeNotReady) {
			if _, ok := l.tainted[n.Name]; !ok {
				l.tainted[n.Name] = now
			}
		}
	}
}

// readyCount is how many nodes whose name starts with prefix are Ready now
// or were.
func (l *nodeLog) readyCount(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for name := range l.ready {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

// notReadyExcept lists the nodes that went not Ready, but those whose
// name starts with prefix (all of them when prefix is empty).
func (l *nodeLog) notReadyExcept(prefix string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for name := range l.notReady {
		if prefix == "" || !strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// taints are the taint times of the nodes whose name starts with prefix,
// in order, and the names of the others tainted.
func (l *nodeLog) taints(prefix string) (times []time.Time, others []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, at := range l.tainted {
		if strings.HasPrefix(name, prefix) {
			times = append(times, at)
		} else {
			others = append(others, name)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	return times, others
}

// startFleet runs `knode sim fleet` against the servers until the test
// ends or it is stopped, and returns its process.
func startFleet(t *testing.T, s *server, servers []*server, prefix string, nodes int, zone string, extra ...string) *process {
	t.Helper()
	args := []string{"sim", "fleet", "--kubeconfig", s.Kubeconfig, "--nodes", strconv.Itoa(nodes), "--name-prefix", prefix,
		"--duration", "30m", "--node-lease-duration-seconds", clusterNodeLease, "--ramp", "5s",
		"--runtime", "none", "--cleanup=false", "--progress-interval", "2s"}
	if zone != "" {
		args = append(args, "--zone", zone)
	}
	for _, srv := range servers {
		args = append(args, "--server", srv.URL)
	}
	p := startProcess(t, append(args, extra...)...)
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- fleet %s (tail) ---\n%s", prefix, tail(p.stderr.String(), 10))
		}
	})
	return p
}

var (
	logTime  = regexp.MustCompile(`time=(\S+) level=INFO msg="first monitor pass done"`)
	passTook = regexp.MustCompile(`msg="first monitor pass done".* took=(\S+)`)
)

// firstMonitorPasses are the times s logged a node lifecycle controller's
// first monitor pass, one per term it led.
func firstMonitorPasses(s *server) []time.Time {
	var out []time.Time
	for _, m := range logTime.FindAllStringSubmatch(s.Log(), -1) {
		if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
			out = append(out, at)
		}
	}
	return out
}

// registeredOnce waits for a RegisteredNode event for each of the n
// nodes whose name starts with prefix, and fails the test if a node has
// more than one: one node lifecycle controller registered them. The
// events are written a little after the nodes are seen.
func registeredOnce(t *testing.T, c kubernetes.Interface, prefix string, n int) {
	t.Helper()
	registered := map[string]int{}
	eventually(t, fmt.Sprintf("a RegisteredNode event for each of the %d nodes", n), 60*time.Second, 500*time.Millisecond, func() (bool, string) {
		evs, err := c.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		clear(registered)
		for _, e := range evs.Items {
			if e.Reason == "RegisteredNode" && e.InvolvedObject.Kind == "Node" && strings.HasPrefix(e.InvolvedObject.Name, prefix) {
				registered[e.InvolvedObject.Name]++
			}
		}
		return len(registered) == n, fmt.Sprintf("%d nodes have one", len(registered))
	})
	for name, count := range registered {
		if count != 1 {
			t.Errorf("node %s has %d RegisteredNode events, want 1", name, count)
		}
	}
}

// TestHAThreeServers runs three `knode server` on a three-member etcd
// cluster with two real agents and 500 simulated nodes, and kills the
// leading server with SIGKILL while 20 nodes of a 60-node zone are down:
//   - only one server runs the controllers: one RegisteredNode per node;
//   - another server leads within the lease duration and no live node
//     goes NotReady (the agents were told of the first server only, and
//     learned the others from default/kubernetes);
//   - the 20 dead nodes are tainted at 0.1/s, across the failover too.
func TestHAThreeServers(t *testing.T) {
	ec := etcdtest.StartCluster(t, 3)
	host := testBridge(t)
	args := append([]string{"--etcd-servers", strings.Join(ec.Endpoints(), ",")},
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s",
		"--node-monitor-period=1s", "--node-monitor-grace-period="+clusterNodeGrace.String())
	a := startServer(t, serverOptions{Host: host, Args: args})
	idA := a.identity(t)
	joinArgs := append(slices.Clone(args), "--token-file", filepath.Join(a.DataDir, "token"), "--storage-dir", a.StorageDir)
	b := startServer(t, serverOptions{Host: host, Args: joinArgs})
	c := startServer(t, serverOptions{Host: host, Args: joinArgs})
	servers := []*server{a, b, c}
	clientC := c.Clientset(t)
	waitLeaseHolders(t, clientC, idA, haLeaseDuration)

	// Every server is listed in default/kubernetes.
	var want []string
	for _, s := range servers {
		want = append(want, net.JoinHostPort(host, strconv.Itoa(s.Port)))
	}
	slices.Sort(want)
	eventually(t, "default/kubernetes lists the three servers", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		ep, err := clientC.CoreV1().Endpoints("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := apiendpoints.Addresses(ep)
		return slices.Equal(got, want), fmt.Sprintf("%q", got)
	})

	nodes := followNodes(t, clientC)
	// Two real agents, told of a only.
	for _, name := range []string{"ha3-agent-1", "ha3-agent-2"} {
		startAgent(t, a, name, t.TempDir(), "--runtime=none", "--server", a.URL)
	}
	// 440 nodes in four zones; zone-x holds 40 nodes that live and 20
	// that are killed.
	main := startFleet(t, a, servers, "ha3", 440, "", "--zones", "4")
	startFleet(t, a, servers, "ha3x-live", 40, "zone-x")
	victims := startFleet(t, a, servers, "ha3x-dead", 20, "zone-x")
	eventually(t, "502 nodes Ready", 120*time.Second, 500*time.Millisecond, func() (bool, string) {
		n := nodes.readyCount("ha3")
		return n == 502, fmt.Sprintf("%d Ready", n)
	})
	registeredOnce(t, clientC, "ha3", 502)

	// 20 of zone-x's 60 nodes die; a third of a zone leaves it Normal,
	// so they are tainted at 0.1/s once their grace period is over.
	victims.kill()
	eventually(t, "the first dead node tainted", clusterNodeGrace+30*time.Second, 100*time.Millisecond, func() (bool, string) {
		times, _ := nodes.taints("ha3x-dead")
		return len(times) >= 1, fmt.Sprintf("%d tainted", len(times))
	})
	// Then the leader dies, between two taints.
	a.Kill9()
	killed := time.Now()
	// The two Leases are campaigned for apart: b may win one and c the
	// other. The new leader is the controller manager's.
	var newLeader *server
	ids := map[string]*server{b.identity(t): b, c.identity(t): c}
	eventually(t, "other servers lead", haLeaseDuration+time.Duration(2.2*float64(haRetryPeriod))+3*time.Second, 20*time.Millisecond, func() (bool, string) {
		h, err := leaseHolders(t, clientC)
		if err != nil {
			return false, err.Error()
		}
		if ids[h[0]] == nil || ids[h[1]] == nil {
			return false, fmt.Sprintf("holders %q", h)
		}
		newLeader = ids[h[0]]
		return true, ""
	})
	led := time.Since(killed)
	var firstPass time.Time
	eventually(t, "the new leader's first monitor pass", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
		passes := firstMonitorPasses(newLeader)
		if len(passes) == 0 {
			return false, "not logged yet"
		}
		firstPass = passes[0]
		return true, ""
	})
	took := "?"
	if m := passTook.FindStringSubmatch(newLeader.Log()); m != nil {
		took = m[1]
	}
	t.Logf("failover: other servers hold both Leases %s after the SIGKILL, its first monitor pass ended %s after it (the pass took %s)",
		led.Round(time.Millisecond), firstPass.Sub(killed).Round(time.Millisecond), took)

	// Watch the taints past the new leader's grace period and two more
	// evictions.
	eventually(t, "three more dead nodes tainted", clusterNodeGrace+60*time.Second, 200*time.Millisecond, func() (bool, string) {
		times, _ := nodes.taints("ha3x-dead")
		return len(times) >= 4, fmt.Sprintf("%d tainted", len(times))
	})
	times, others := nodes.taints("ha3x-dead")
	if len(others) > 0 {
		t.Errorf("live nodes tainted: %q", others)
	}
	for i := 1; i < len(times); i++ {
		// The test sees each taint through a watch: allow it 1 s of
		// observation jitter against the 10 s the rate allows.
		if gap := times[i].Sub(times[i-1]); gap < clusterEvictEvery-time.Second {
			t.Errorf("dead nodes %d and %d tainted %s apart, faster than 0.1/s", i, i+1, gap.Round(time.Millisecond))
		}
	}
	var gaps []string
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]).Round(100*time.Millisecond).String())
	}
	t.Logf("dead nodes tainted %d, gaps %s", len(times), strings.Join(gaps, " "))
	if bad := nodes.notReadyExcept("ha3x-dead"); len(bad) > 0 {
		t.Errorf("%d live nodes went NotReady across the failover: %q", len(bad), bad[:min(len(bad), 10)])
	}

	// The main fleet's renewals through the failover.
	_ = main.cmd.Process.Signal(syscall.SIGINT)
	<-main.exited
	var res struct {
		Nodes       int     `json:"nodes"`
		P99         float64 `json:"renew_p99_ms"`
		WindowMax   float64 `json:"renew_p99_window_max_ms"`
		NotReadyMax int     `json:"not_ready_max"`
		Errors      int     `json:"errors"`
		FailedOver  int     `json:"failed_over"`
	}
	out := strings.TrimSpace(main.stdout.String())
	if err := json.Unmarshal([]byte(out[strings.LastIndex(out, "\n")+1:]), &res); err != nil {
		t.Fatalf("fleet result %q: %v", out, err)
	}
	t.Logf("fleet of %d through the failover: renewal p99 %.1f ms overall, worst 2 s window %.1f ms, %d errors, not_ready_max %d, %d balancers failed over",
		res.Nodes, res.P99, res.WindowMax, res.Errors, res.NotReadyMax, res.FailedOver)
	if res.NotReadyMax != 0 {
		t.Errorf("the fleet saw %d of its nodes NotReady at once", res.NotReadyMax)
	}
}
