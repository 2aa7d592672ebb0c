package e2e

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"knode/internal/agent/shutdown/logind/logindtest"
)

// The graceful node shutdown tests run `knode agent` against a private
// dbus-daemon on which logindtest's fake systemd-logind announces
// shutdowns, next to a `knode server`. Without dbus-daemon they skip, or
// fail when KNODE_REQUIRE_DBUS=1.

// Strings of the shutdown contract, written out here rather than imported
// so that a change to them shows up as a failing test.
const (
	shuttingDownMessage  = "node is shutting down"
	shutdownEventMessage = "Shutdown manager detected shutdown event"
	cancelEventMessage   = "Shutdown manager detected shutdown cancellation"
	terminatedMessage    = "Pod was terminated in response to imminent node shutdown."
	rejectedMessage      = "Pod was rejected: Pod was rejected as the node is shutting down."
	lockWho              = "kubelet"
)

// threeGroups asks for three priority groups: ordinary pods, pods of
// priority class e2e-mid (100000), and critical pods (system-node-critical,
// 2000001000, falls in the 2000000000 group).
const threeGroups = `shutdownGracePeriodByPodPriority:
- {priority: 0, shutdownGracePeriodSeconds: %d}
- {priority: 100000, shutdownGracePeriodSeconds: 5}
- {priority: 2000000000, shutdownGracePeriodSeconds: 5}
`

// shutdownNode is one agent under test with its own bus and fake logind.
type shutdownNode struct {
	t       *testing.T
	name    string
	root    string // the agent's --root-dir
	dropIns string // --logind-drop-in-dir, also the fake's DropInDir
	bus     *logindtest.Bus
	fake    *logindtest.Fake
	s       *server
	client  kubernetes.Interface
	args    []string // the agent's flags beyond startAgent's
	agent   *process
}

type shutdownNodeOptions struct {
	// config is the KubeletConfiguration's body after apiVersion and kind.
	config          string
	inhibitDelayMax time.Duration
	refuseRaise     bool
	// args are extra agent flags.
	args []string
	// server is shared when not nil; else the node gets its own.
	server *server
	// statusEvery is nodeStatusUpdateFrequency; empty means 1s, so that a
	// restarted agent's heartbeat comes soon.
	statusEvery string
}

// startShutdownNode starts a bus, a fake logind on it, a server (unless
// one is given) and an agent for node name that reaches the bus through
// DBUS_SYSTEM_BUS_ADDRESS. It returns once the Node is Ready and the agent
// holds a delay lock, that is once it listens to the bus.
func startShutdownNode(t *testing.T, name string, opts shutdownNodeOptions) *shutdownNode {
	t.Helper()
	n := &shutdownNode{t: t, name: name, root: t.TempDir(), dropIns: t.TempDir(), s: opts.server}
	n.bus = logindtest.NewBus(t)
	fake, err := logindtest.StartFake(logindtest.Config{
		Address:         n.bus.Address,
		InhibitDelayMax: opts.inhibitDelayMax,
		DropInDir:       n.dropIns,
		RefuseRaise:     opts.refuseRaise,
	})
	if err != nil {
		t.Fatal(err)
	}
	n.fake = fake
	t.Cleanup(func() {
		fake.Close()
		if t.Failed() {
			t.Logf("--- dbus-daemon log of %s ---\n%s", name, tail(n.bus.Log(), 20))
		}
	})
	// The agent's only way to the bus; t.Setenv puts the old value back
	// at the end of the test.
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", n.bus.Address)
	if n.s == nil {
		n.s = startServer(t, serverOptions{})
	}
	n.client = n.s.Clientset(t)
	if opts.statusEvery == "" {
		opts.statusEvery = "1s"
	}
	config := writeFile(t, name+"-shutdown.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeStatusUpdateFrequency: "+opts.statusEvery+"\n"+opts.config)
	// startAgent passes a --config of its own first; the last one wins.
	n.args = append([]string{"--config", config, "--port", "0", "--address", "127.0.0.1", "--logind-drop-in-dir", n.dropIns}, opts.args...)
	n.startAgent()
	return n
}

// startAgent starts the agent with the node's flags and waits until the
// Node is Ready and the agent holds a lock.
func (n *shutdownNode) startAgent() {
	t := n.t
	t.Helper()
	n.agent = startAgent(t, n.s, n.name, n.root, n.args...)
	agent := n.agent
	eventually(t, n.name+" Ready", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
		if agent.hasExited() {
			t.Fatalf("agent %s exited: %v\n%s", n.name, agent.err, tail(agent.stderr.String(), 40))
		}
		node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return isReady(node), fmt.Sprintf("conditions %v", node.Status.Conditions)
	})
	n.waitLock("the agent holding a delay lock", 15*time.Second, func(ins []logindtest.Inhibitor) bool {
		return len(ins) > 0 && ins[len(ins)-1].Held()
	})
}

// waitLock waits until cond holds for the fake's locks.
func (n *shutdownNode) waitLock(what string, timeout time.Duration, cond func([]logindtest.Inhibitor) bool) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := n.fake.WaitFor(ctx, func(f *logindtest.Fake) bool { return cond(f.Inhibitors()) })
	if err != nil {
		n.t.Fatalf("%s: %v; locks %+v\n--- agent log (tail) ---\n%s", what, err, n.fake.Inhibitors(), tail(n.agent.stderr.String(), 30))
	}
}

// checkLock checks that a lock is what the agent asks logind for.
func checkLock(t *testing.T, in logindtest.Inhibitor) {
	t.Helper()
	if in.What != "shutdown" || in.Mode != "delay" || in.Who != lockWho || in.Why == "" {
		t.Errorf("lock %+v: want what=shutdown mode=delay who=%s and a reason", in, lockWho)
	}
}

// signal emits PrepareForShutdown(active) from the fake logind and returns
// when it started to.
func (n *shutdownNode) signal(active bool) time.Time {
	n.t.Helper()
	at := time.Now()
	if err := n.fake.PrepareForShutdown(active); err != nil {
		n.t.Fatal(err)
	}
	return at
}

func (n *shutdownNode) node() *corev1.Node {
	n.t.Helper()
	node, err := n.client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return node
}

// events lists the events about the Node with the given reason, oldest
// first.
func (n *shutdownNode) events(reason string) []corev1.Event {
	n.t.Helper()
	list, err := n.client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == n.name && e.Reason == reason {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

// waitEvent waits for an event about the Node with the reason and a
// message containing want, and returns it.
func (n *shutdownNode) waitEvent(reason, want string, timeout time.Duration) corev1.Event {
	n.t.Helper()
	var found corev1.Event
	eventually(n.t, "event "+reason+" "+want, timeout, 50*time.Millisecond, func() (bool, string) {
		evs := n.events(reason)
		for _, e := range evs {
			if strings.Contains(e.Message, want) {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("events with reason %s: %v", reason, eventMessages(evs))
	})
	return found
}

func eventMessages(evs []corev1.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %q (count %d)", e.Type, e.Message, e.Count))
	}
	return out
}

// countMessage is how many times (event counts included) message was
// recorded among evs.
func countMessage(evs []corev1.Event, message string) int {
	c := 0
	for _, e := range evs {
		if e.Message == message {
			c += int(max(e.Count, 1))
		}
	}
	return c
}

// shutdownState is graceful_node_shutdown_state.
type shutdownState struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// shutdownReport is shutdown-report.json, field names as documented.
type shutdownReport struct {
	Started               time.Time `json:"started"`
	Ended                 time.Time `json:"ended"`
	Cancelled             bool      `json:"cancelled"`
	DelayGrantedSeconds   float64   `json:"delayGrantedSeconds"`
	DelayRequestedSeconds float64   `json:"delayRequestedSeconds"`
	StatusReserveSeconds  float64   `json:"statusReserveSeconds"`
	Cuts                  []struct {
		Priority         int32   `json:"priority"`
		RequestedSeconds float64 `json:"requestedSeconds"`
		GrantedSeconds   float64 `json:"grantedSeconds"`
	} `json:"cuts"`
	Groups []struct {
		Priority      int32   `json:"priority"`
		BudgetSeconds float64 `json:"budgetSeconds"`
		WaitedSeconds float64 `json:"waitedSeconds"`
		Pods          []struct {
			Namespace        string  `json:"namespace"`
			Name             string  `json:"name"`
			UID              string  `json:"uid"`
			Priority         int32   `json:"priority"`
			GraceSeconds     float64 `json:"graceSeconds"`
			TookSeconds      float64 `json:"tookSeconds"`
			Stopped          bool    `json:"stopped"`
			KilledAfterGrace bool    `json:"killedAfterGrace"`
			StatusPosted     bool    `json:"statusPosted"`
			Gone             bool    `json:"gone"`
		} `json:"pods"`
	} `json:"groups"`
}

// readRootJSON decodes a JSON file of the agent's root dir.
func (n *shutdownNode) readRootJSON(name string, v any) {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join(n.root, name))
	if err != nil {
		n.t.Fatalf("reading the agent's %s: %v", name, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		n.t.Fatalf("decoding the agent's %s: %v\n%s", name, err, data)
	}
}

// waitReport waits for the report of a shutdown that started at or after
// since, and returns it.
func (n *shutdownNode) waitReport(since time.Time) shutdownReport {
	n.t.Helper()
	var rep shutdownReport
	eventually(n.t, "shutdown-report.json of the last shutdown", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(n.root, "shutdown-report.json"))
		if err != nil {
			return false, err.Error()
		}
		rep = shutdownReport{}
		if err := json.Unmarshal(data, &rep); err != nil {
			return false, err.Error()
		}
		return !rep.Started.Before(since), string(data)
	})
	return rep
}

// metrics scrapes the agent's /metrics (see agentMetrics).
func (n *shutdownNode) metrics() map[string]float64 {
	n.t.Helper()
	return agentMetrics(n.t, n.s, n.node(), n.root)
}

// agentMetrics scrapes the /metrics of node's agent (root dir root) with
// the admin's client certificate, trusting only the agent's self-signed
// serving certificate, and returns the samples without labels.
func agentMetrics(t *testing.T, s *server, node *corev1.Node, root string) map[string]float64 {
	t.Helper()
	port := node.Status.DaemonEndpoints.KubeletEndpoint.Port
	if port <= 0 {
		t.Fatalf("node %s reports no kubelet endpoint port", node.Name)
	}
	tlsConfig, err := rest.TLSConfigFor(s.RestConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if tlsConfig == nil || (len(tlsConfig.Certificates) == 0 && tlsConfig.GetClientCertificate == nil) {
		t.Fatalf("%s holds no client certificate", s.Kubeconfig)
	}
	servingCert := filepath.Join(root, "pki", "kubelet.crt")
	pem, err := os.ReadFile(servingCert)
	if err != nil {
		t.Fatalf("the agent's self-signed serving certificate: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no certificate", servingCert)
	}
	tlsConfig.RootCAs = pool
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", port)
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v\n%s", url, resp.StatusCode, err, body)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "#") || strings.Contains(f[0], "{") {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			samples[f[0]] = v
		}
	}
	return samples
}

// observed is one object a watch delivered, stamped when the test got it.
type observed[T any] struct {
	at  time.Time
	obj T
}

// watchLog records what a watch delivers until the test ends.
type watchLog[T any] struct {
	mu    sync.Mutex
	seen  []observed[T]
	ended error // why the watch stopped early, if it did
}

func (l *watchLog[T]) snapshot() ([]observed[T], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen), l.ended
}

// first is the earliest observation, at or after since, for which match
// holds.
func (l *watchLog[T]) first(since time.Time, match func(T) bool) (observed[T], bool) {
	seen, _ := l.snapshot()
	for _, o := range seen {
		if !o.at.Before(since) && match(o.obj) {
			return o, true
		}
	}
	return observed[T]{}, false
}

// record runs a watch in the background and logs what it delivers, until
// the test ends.
func record[T any](t *testing.T, start func(ctx context.Context) (watch.Interface, error)) *watchLog[T] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := start(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l := &watchLog[T]{}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			at := time.Now()
			obj, ok := ev.Object.(T)
			l.mu.Lock()
			if ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				l.seen = append(l.seen, observed[T]{at: at, obj: obj})
			} else if ev.Type == watch.Error {
				l.ended = fmt.Errorf("watch error %v", ev.Object)
			}
			l.mu.Unlock()
		}
		l.mu.Lock()
		if l.ended == nil && ctx.Err() == nil {
			l.ended = fmt.Errorf("the watch closed")
		}
		l.mu.Unlock()
	}()
	return l
}

// watchNode logs the changes to the Node from now on.
func (n *shutdownNode) watchNode() *watchLog[*corev1.Node] {
	n.t.Helper()
	rv := n.node().ResourceVersion
	return record[*corev1.Node](n.t, func(ctx context.Context) (watch.Interface, error) {
		return n.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + n.name, ResourceVersion: rv})
	})
}

// watchPods logs the changes to the pods of namespace default from now on.
func (n *shutdownNode) watchPods() *watchLog[*corev1.Pod] {
	n.t.Helper()
	list, err := n.client.CoreV1().Pods(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return record[*corev1.Pod](n.t, func(ctx context.Context) (watch.Interface, error) {
		return n.client.CoreV1().Pods(metav1.NamespaceDefault).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	})
}

func shuttingDown(node *corev1.Node) bool {
	c := nodeCondition(node, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionFalse && c.Message == shuttingDownMessage
}

// waitShuttingDown waits until the watch has seen Ready=False "node is
// shutting down" after since, and returns when it saw it.
func (n *shutdownNode) waitShuttingDown(nodes *watchLog[*corev1.Node], since time.Time) observed[*corev1.Node] {
	n.t.Helper()
	var o observed[*corev1.Node]
	eventually(n.t, n.name+" Ready=False "+shuttingDownMessage, 10*time.Second, 5*time.Millisecond, func() (bool, string) {
		var ok bool
		o, ok = nodes.first(since, shuttingDown)
		seen, ended := nodes.snapshot()
		last := "nothing"
		if len(seen) > 0 {
			last = fmt.Sprint(nodeCondition(seen[len(seen)-1].obj, corev1.NodeReady))
		}
		return ok, fmt.Sprintf("last Ready seen: %s; watch ended: %v", last, ended)
	})
	if c := nodeCondition(o.obj, corev1.NodeReady); c.Reason != "KubeletNotReady" {
		n.t.Errorf("Ready=False while shutting down has reason %q, want KubeletNotReady", c.Reason)
	}
	return o
}

// shutdownPod is a pod whose shell writes "<name> <unix-nanos>" to
// termLog when it gets SIGTERM and exits 0; with hold, it first waits for
// the file hold to exist. It touches <files>/<name>.ready once its trap is
// set.
func shutdownPod(name, marker, files, hold string) *corev1.Pod {
	wait := ""
	if hold != "" {
		wait = `while [ ! -e "$HOLD" ]; do sleep 0.05; done; `
	}
	script := `trap 'echo "$NAME $(date +%s%N)" >> "$TERM_LOG"; ` + wait + `exit 0' TERM; touch "$READY"; while :; do sleep 0.1; done`
	return sleepPod(name, marker, []string{"sh", "-c", script},
		corev1.EnvVar{Name: "NAME", Value: name},
		corev1.EnvVar{Name: "TERM_LOG", Value: filepath.Join(files, "term.log")},
		corev1.EnvVar{Name: "READY", Value: filepath.Join(files, name+".ready")},
		corev1.EnvVar{Name: "HOLD", Value: hold})
}

// termLog is the shared file's lines: who got SIGTERM, and when.
type termLine struct {
	name string
	at   time.Time
}

func readTermLog(t *testing.T, files string) []termLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(files, "term.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []termLine
	for _, l := range lines(string(data)) {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("term.log line %q: want \"<name> <unix-nanos>\"", l)
		}
		ns, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("term.log line %q: want \"<name> <unix-nanos>\"", l)
		}
		out = append(out, termLine{name: f[0], at: time.Unix(0, ns)})
	}
	return out
}

// createShutdownPods creates pods with kubectl and waits until each is
// Running with its trap set.
func createShutdownPods(t *testing.T, n *shutdownNode, version, files string, pods ...*corev1.Pod) map[string]*corev1.Pod {
	t.Helper()
	var objects []any
	for _, p := range pods {
		objects = append(objects, p)
	}
	if res := kubectlWith(t, version, n.s.Home, n.s.Kubeconfig, "create", "-f", writeObjects(t, "pods.json", objects...)); res.ExitCode != 0 {
		t.Fatalf("want exit code 0:\n%s", res)
	}
	running := map[string]*corev1.Pod{}
	for _, p := range pods {
		eventually(t, "pod "+p.Name+" Running with its trap set", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
			got, err := n.client.CoreV1().Pods(metav1.NamespaceDefault).Get(context.Background(), p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			running[p.Name] = got
			_, err = os.Stat(filepath.Join(files, p.Name+".ready"))
			return got.Status.Phase == corev1.PodRunning && err == nil, fmt.Sprintf("%s; ready file: %v", describePods([]corev1.Pod{*got}), err)
		})
	}
	return running
}

// checkStopped checks the final status of a pod the shutdown stopped.
func checkStopped(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "Terminated" || p.Status.Message != terminatedMessage {
		t.Errorf("pod %s: phase %s reason %q message %q; want Failed, Terminated, %q", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message, terminatedMessage)
	}
	if c := podCondition(p, corev1.DisruptionTarget); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "TerminationByKubelet" {
		t.Errorf("pod %s: DisruptionTarget condition %+v; want True, TerminationByKubelet", p.Name, c)
	}
}

func stoppedByShutdown(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "Terminated"
}

// TestShutdownStopsPodsByPriority runs a shutdown on a node with pods in
// three priority groups: they get SIGTERM group by group, lowest first;
// Ready turns False at once; a pod that arrives meanwhile is rejected;
// every final status is on the server before the lock is released, which
// happens well within logind's delay; the state file, the gauges and the
// report agree; and a cancellation brings Ready and a lock back.
func TestShutdownStopsPodsByPriority(t *testing.T) {
	version := newestKubectl(t)
	tag := fmt.Sprintf("knode-e2e-shutdown-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { killMarked(t, tag) })
	const delay = 30 * time.Second // logind's InhibitDelayMaxUSec
	n := startShutdownNode(t, "shutdown-busy", shutdownNodeOptions{
		config:          fmt.Sprintf(threeGroups, 10),
		inhibitDelayMax: delay,
		args:            []string{"--shutdown-status-reserve", "3s"},
	})
	ctx := context.Background()
	kubectl := func(args ...string) kubectlResult {
		t.Helper()
		res := kubectlWith(t, version, n.s.Home, n.s.Kubeconfig, args...)
		if res.ExitCode != 0 {
			t.Fatalf("want exit code 0:\n%s", res)
		}
		return res
	}
	checkLock(t, n.fake.Inhibitors()[0])
	if got := len(n.fake.Inhibitors()); got != 1 {
		t.Errorf("the agent took %d locks at start, want 1: %+v", got, n.fake.Inhibitors())
	}
	if r := n.fake.Reloads(); r != 0 {
		t.Errorf("logind was reloaded %d times though its delay (%v) covers the 23 s asked", r, delay)
	}

	kubectl("create", "priorityclass", "e2e-mid", "--value=100000", "--description=shutdown e2e middle group")
	files := t.TempDir()
	hold := filepath.Join(files, "hold")
	// web-a holds the first group until the test creates hold: the group
	// is then surely still running when the late pod arrives.
	webA := shutdownPod("web-a", tag, files, hold)
	webB := shutdownPod("web-b", tag, files, "")
	mid := shutdownPod("mid", tag, files, "")
	mid.Spec.PriorityClassName = "e2e-mid"
	crit := shutdownPod("crit", tag, files, "")
	crit.Spec.PriorityClassName = "system-node-critical"
	pods := createShutdownPods(t, n, version, files, webA, webB, mid, crit)
	wantPriority := map[string]int32{"web-a": 0, "web-b": 0, "mid": 100000, "crit": 2000001000}
	for name, p := range pods {
		if got := ptr.Deref(p.Spec.Priority, 0); got != wantPriority[name] || p.Spec.NodeName != n.name {
			t.Errorf("pod %s: priority %d on node %q, want %d on %s", name, got, p.Spec.NodeName, wantPriority[name], n.name)
		}
	}

	nodes := n.watchNode()
	podLog := n.watchPods()
	signal := n.signal(true)
	down := n.waitShuttingDown(nodes, signal)
	toNotReady := down.at.Sub(signal)
	t.Logf("busy node: signal→Ready=False %v (seen through a watch)", toNotReady)
	if toNotReady > time.Second {
		t.Errorf("Ready turned False %v after the signal, want within 1 s", toNotReady)
	}
	if res := kubectl("get", "node", n.name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].message}`); res.Stdout != "False/"+shuttingDownMessage {
		t.Errorf("kubectl get node: Ready %q, want %q", res.Stdout, "False/"+shuttingDownMessage)
	}

	// A pod bound to the node while the first group is held is rejected.
	eventually(t, "web-a and web-b got SIGTERM", 10*time.Second, 20*time.Millisecond, func() (bool, string) {
		l := readTermLog(t, files)
		return len(l) >= 2, fmt.Sprint(l)
	})
	late := shutdownPod("late", tag+"-late", files, "")
	late.Spec.NodeName = n.name
	kubectl("create", "-f", writeObjects(t, "late.json", late))
	eventually(t, "late rejected", 10*time.Second, 20*time.Millisecond, func() (bool, string) {
		p, err := n.client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "late", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodFailed, describePods([]corev1.Pod{*p})
	})
	if p, err := n.client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, "late", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if p.Status.Reason != "NodeShutdown" || p.Status.Message != rejectedMessage {
		t.Errorf("late: reason %q message %q, want NodeShutdown, %q", p.Status.Reason, p.Status.Message, rejectedMessage)
	}
	if ins := n.fake.Inhibitors(); !ins[len(ins)-1].Held() {
		t.Errorf("the lock was released while web-a was still stopping")
	}
	if left := markedProcs(tag + "-late"); len(left) > 0 {
		t.Errorf("the rejected pod started processes: %v", left)
	}
	released := time.Now()
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// The lock is released once every final status is posted.
	n.waitLock("the lock released", delay, func(ins []logindtest.Inhibitor) bool { return !ins[len(ins)-1].Held() })
	lock := n.fake.Inhibitors()[len(n.fake.Inhibitors())-1]
	toRelease := lock.Released.Sub(signal)
	t.Logf("busy node: signal→lock release %v (web-a held its group for %v of it; hold lifted→lock release %v)",
		toRelease, released.Sub(signal).Round(time.Millisecond), lock.Released.Sub(released))
	if toRelease >= delay {
		t.Errorf("the lock was released %v after the signal, not within logind's delay %v", toRelease, delay)
	}
	for name := range pods {
		o, ok := podLog.first(signal, func(p *corev1.Pod) bool { return p.Name == name && stoppedByShutdown(p) })
		if !ok {
			_, ended := podLog.snapshot()
			t.Errorf("pod %s: the watch never saw it Failed/Terminated (watch ended: %v)", name, ended)
			continue
		}
		checkStopped(t, o.obj)
		if !o.at.Before(lock.Released) {
			t.Errorf("pod %s: its final status reached the server (seen %v after the signal) after the lock was released (%v after)", name, o.at.Sub(signal), toRelease)
		}
		t.Logf("pod %s: final status seen %v after the signal, %v before the release", name, o.at.Sub(signal).Round(time.Millisecond), lock.Released.Sub(o.at).Round(time.Millisecond))
	}

	// SIGTERM went group by group: both web pods, then mid, then crit.
	term := readTermLog(t, files)
	var order []string
	at := map[string]time.Time{}
	for _, l := range term {
		order = append(order, l.name)
		at[l.name] = l.at
	}
	t.Logf("SIGTERM order: %v", order)
	if len(term) != 4 || !slices.Contains(order[:2], "web-a") || !slices.Contains(order[:2], "web-b") || order[2] != "mid" || order[3] != "crit" {
		t.Errorf("SIGTERM order %v, want web-a and web-b (any order), then mid, then crit, once each", order)
	} else {
		if !at["mid"].After(released) {
			t.Errorf("mid got SIGTERM %v before web-a was let go: the first group was not waited for", released.Sub(at["mid"]))
		}
		t.Logf("SIGTERM after the signal: web-a %v, web-b %v, mid %v, crit %v", at["web-a"].Sub(signal).Round(time.Millisecond),
			at["web-b"].Sub(signal).Round(time.Millisecond), at["mid"].Sub(signal).Round(time.Millisecond), at["crit"].Sub(signal).Round(time.Millisecond))
	}

	// The state file, the gauges and the report.
	rep := n.waitReport(signal)
	var st shutdownState
	n.readRootJSON("graceful_node_shutdown_state", &st)
	if st.StartTime.Before(signal) || st.StartTime.After(down.at) || st.EndTime.Before(st.StartTime) || st.EndTime.After(lock.Released) {
		t.Errorf("state file %+v: want a start between the signal (%v) and Ready=False (%v), and an end between the start and the release (%v)", st, signal, down.at, lock.Released)
	}
	if !rep.Started.Equal(st.StartTime) || !rep.Ended.Equal(st.EndTime) {
		t.Errorf("report started %v ended %v; the state file says %v and %v", rep.Started, rep.Ended, st.StartTime, st.EndTime)
	}
	m := n.metrics()
	for name, want := range map[string]time.Time{"kubelet_graceful_shutdown_start_time_seconds": st.StartTime, "kubelet_graceful_shutdown_end_time_seconds": st.EndTime} {
		got, ok := m[name]
		w := float64(want.UnixNano()) / 1e9
		if !ok || got < w-1 || got > w+1 {
			t.Errorf("/metrics %s = %v (present %v), want %.3f ±1 from the state file", name, got, ok, w)
		}
	}
	if rep.Cancelled || rep.DelayGrantedSeconds != delay.Seconds() || rep.DelayRequestedSeconds != 23 || rep.StatusReserveSeconds != 3 || len(rep.Cuts) != 0 {
		t.Errorf("report: cancelled %v, delay granted %v requested %v, reserve %v, cuts %v; want false, 30, 23 (10+5+5+3), 3, none",
			rep.Cancelled, rep.DelayGrantedSeconds, rep.DelayRequestedSeconds, rep.StatusReserveSeconds, rep.Cuts)
	}
	wantGroups := []struct {
		priority int32
		budget   float64
		pods     []string
	}{{0, 10, []string{"web-a", "web-b"}}, {100000, 5, []string{"mid"}}, {2000000000, 5, []string{"crit"}}}
	if len(rep.Groups) != len(wantGroups) {
		t.Errorf("report has %d groups, want 3: %+v", len(rep.Groups), rep.Groups)
	} else {
		for i, g := range rep.Groups {
			want := wantGroups[i]
			var names []string
			for _, p := range g.Pods {
				names = append(names, p.Name)
				if !p.Stopped || p.KilledAfterGrace || !p.StatusPosted || p.Gone || p.UID != string(pods[p.Name].UID) || p.Priority != wantPriority[p.Name] || p.Namespace != metav1.NamespaceDefault {
					t.Errorf("report group %d pod %+v: want stopped, not killed after its grace, status posted, not gone, uid %s, priority %d", g.Priority, p, pods[p.Name].UID, wantPriority[p.Name])
				}
				if p.GraceSeconds != want.budget || p.TookSeconds <= 0 || p.TookSeconds >= p.GraceSeconds {
					t.Errorf("report pod %s: grace %vs took %vs; want grace %v and a positive time below it", p.Name, p.GraceSeconds, p.TookSeconds, want.budget)
				}
			}
			slices.Sort(names)
			if g.Priority != want.priority || g.BudgetSeconds != want.budget || !slices.Equal(names, want.pods) {
				t.Errorf("report group %d: priority %d budget %v pods %v; want priority %d budget %v pods %v", i, g.Priority, g.BudgetSeconds, names, want.priority, want.budget, want.pods)
			}
		}
	}
	if t.Failed() {
		data, _ := os.ReadFile(filepath.Join(n.root, "shutdown-report.json"))
		t.Logf("shutdown-report.json:\n%s", data)
	}
	if got := countMessage(n.events("Shutdown"), shutdownEventMessage); got != 1 {
		t.Errorf("%d Shutdown events %q, want 1", got, shutdownEventMessage)
	}
	if ev := n.waitEvent("ShutdownReport", "", 10*time.Second); ev.Type != corev1.EventTypeNormal || !strings.HasPrefix(ev.Message, "Shutdown finished") {
		t.Errorf("ShutdownReport event %s %q, want Normal \"Shutdown finished ...\"", ev.Type, ev.Message)
	}

	// The node stays shutting down until logind cancels; then Ready comes
	// back and a new lock is taken.
	if node := n.node(); !shuttingDown(node) {
		t.Errorf("after the shutdown ended the node is no longer shutting down: %v", nodeCondition(node, corev1.NodeReady))
	}
	cancelled := n.signal(false)
	var back time.Duration
	eventually(t, n.name+" Ready again", 10*time.Second, 20*time.Millisecond, func() (bool, string) {
		node := n.node()
		back = time.Since(cancelled)
		return isReady(node), fmt.Sprint(nodeCondition(node, corev1.NodeReady))
	})
	t.Logf("busy node: cancellation→Ready=True within %v", back.Round(time.Millisecond))
	n.waitLock("a new lock after the cancellation", 10*time.Second, func(ins []logindtest.Inhibitor) bool {
		return len(ins) == 2 && ins[1].Held() && !ins[1].Taken.Before(cancelled)
	})
	checkLock(t, n.fake.Inhibitors()[1])
	n.waitEvent("Shutdown", cancelEventMessage, 10*time.Second)
}

// TestShutdownIdleNode: on a node without pods, a PrepareForShutdown sent
// by another connection than logind's is ignored, and logind's own is
// acted on at once: Ready=False and the lock released quickly. It measures
// both over three shutdown/cancel rounds. Last, logind restarts and the
// agent takes a lock from the new logind.
func TestShutdownIdleNode(t *testing.T) {
	const delay = 10 * time.Second
	n := startShutdownNode(t, "shutdown-idle", shutdownNodeOptions{
		// The two durations, not the priority list: 2 s for ordinary
		// pods, 2 s for critical ones.
		config:          "shutdownGracePeriod: 4s\nshutdownGracePeriodCriticalPods: 2s\n",
		inhibitDelayMax: delay,
		// The default 10 s status period: Ready=False within 1 s of the
		// signal, and Ready again soon after a cancellation, come only
		// from the immediate posts the shutdown manager asks for.
		statusEvery: "10s",
	})
	nodes := n.watchNode()

	// A spoofed signal changes nothing.
	spoofed := time.Now()
	if err := n.fake.Spoof(true); err != nil {
		t.Fatal(err)
	}
	if node := n.node(); !isReady(node) {
		t.Errorf("after a spoofed PrepareForShutdown the node is not Ready: %v", nodeCondition(node, corev1.NodeReady))
	}
	if ins := n.fake.Inhibitors(); len(ins) != 1 || !ins[0].Held() {
		t.Errorf("after a spoofed PrepareForShutdown the locks are %+v, want the first one still held", ins)
	}
	if evs := n.events("Shutdown"); len(evs) > 0 {
		t.Errorf("a spoofed PrepareForShutdown recorded Shutdown events: %v", eventMessages(evs))
	}

	var toNotReady, toRelease []time.Duration
	for round := 1; round <= 3; round++ {
		signal := n.signal(true)
		down := n.waitShuttingDown(nodes, signal)
		n.waitLock(fmt.Sprintf("round %d: the lock released", round), delay, func(ins []logindtest.Inhibitor) bool { return !ins[len(ins)-1].Held() })
		ins := n.fake.Inhibitors()
		toNotReady = append(toNotReady, down.at.Sub(signal))
		toRelease = append(toRelease, ins[len(ins)-1].Released.Sub(signal))
		if round == 1 {
			// Signals are handled in order and the spoof went first: had
			// it been taken for logind's, the shutdown would have
			// started before this signal.
			var st shutdownState
			n.readRootJSON("graceful_node_shutdown_state", &st)
			if st.StartTime.Before(signal) {
				t.Errorf("the shutdown started at %v, before logind's signal (%v) and after the spoof (%v): the spoof was acted on", st.StartTime, signal, spoofed)
			}
			if got := countMessage(n.events("Shutdown"), shutdownEventMessage); got != 1 {
				t.Errorf("%d Shutdown events %q after the spoof and one real signal, want 1", got, shutdownEventMessage)
			}
			rep := n.waitReport(signal)
			if len(rep.Groups) != 0 || rep.Cancelled || rep.DelayRequestedSeconds != 6 || rep.DelayGrantedSeconds != delay.Seconds() {
				t.Errorf("report %+v: want no groups, not cancelled, 6 s asked (4 s + the 2 s reserve), %v granted", rep, delay)
			}
		}
		cancelled := n.signal(false)
		eventually(t, fmt.Sprintf("round %d: Ready again", round), 10*time.Second, 20*time.Millisecond, func() (bool, string) {
			node := n.node()
			return isReady(node), fmt.Sprint(nodeCondition(node, corev1.NodeReady))
		})
		n.waitLock(fmt.Sprintf("round %d: a new lock", round), 10*time.Second, func(ins []logindtest.Inhibitor) bool {
			return len(ins) == round+1 && ins[round].Held() && !ins[round].Taken.Before(cancelled)
		})
	}
	// logind restarts: it forgets every lock, and the agent takes a new one
	// from the new owner of its name.
	held := len(n.fake.Inhibitors())
	restarted := time.Now()
	if err := n.fake.Restart(); err != nil {
		t.Fatal(err)
	}
	n.waitLock("a new lock after logind restarted", 10*time.Second, func(ins []logindtest.Inhibitor) bool {
		return len(ins) == held+1 && ins[held].Held() && !ins[held].Taken.Before(restarted)
	})
	t.Logf("idle node: signal→Ready=False %v, signal→lock release %v (three rounds)", toNotReady, toRelease)
	t.Logf("idle node: worst of three: signal→Ready=False %v, signal→lock release %v", slices.Max(toNotReady), slices.Max(toRelease))
	for i := range toNotReady {
		if toNotReady[i] > time.Second {
			t.Errorf("round %d: Ready turned False %v after the signal, want within 1 s", i+1, toNotReady[i])
		}
		if toRelease[i] > time.Second {
			t.Errorf("round %d: an idle node released its lock %v after the signal, want within 1 s", i+1, toRelease[i])
		}
	}
}

// TestShutdownLogindDelay: when logind's InhibitDelayMaxUSec is shorter
// than the groups and the reserve, the agent writes a drop-in and reloads
// logind; when logind keeps its delay anyway, the plan is cut to fit and
// a Warning says so.
func TestShutdownLogindDelay(t *testing.T) {
	s := startServer(t, serverOptions{})
	const short = 5 * time.Second
	wantDropIn := "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=17\n" // 5+5+5 s and the 2 s reserve
	checkDropIn := func(t *testing.T, n *shutdownNode) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(n.dropIns, "99-kubelet.conf"))
		if err != nil || string(data) != wantDropIn {
			t.Errorf("drop-in 99-kubelet.conf: %q (%v), want %q", data, err, wantDropIn)
		}
		if r := n.fake.Reloads(); r != 1 {
			t.Errorf("logind reloaded %d times, want 1", r)
		}
	}

	t.Run("raised", func(t *testing.T) {
		n := startShutdownNode(t, "delay-raised", shutdownNodeOptions{config: fmt.Sprintf(threeGroups, 5), inhibitDelayMax: short, server: s})
		checkDropIn(t, n)
		if got := n.fake.InhibitDelayMax(); got != 17*time.Second {
			t.Errorf("logind's delay after the reload is %v, want 17s", got)
		}
		signal := n.signal(true)
		rep := n.waitReport(signal)
		if rep.DelayGrantedSeconds != 17 || rep.DelayRequestedSeconds != 17 || len(rep.Cuts) != 0 {
			t.Errorf("report: delay granted %v requested %v, cuts %+v; want 17, 17, none", rep.DelayGrantedSeconds, rep.DelayRequestedSeconds, rep.Cuts)
		}
		n.waitEvent("ShutdownReport", "", 10*time.Second)
		if evs := n.events("ShutdownGracePeriodTruncated"); len(evs) > 0 {
			t.Errorf("a raised delay still recorded %v", eventMessages(evs))
		}
	})

	t.Run("refused", func(t *testing.T) {
		n := startShutdownNode(t, "delay-refused", shutdownNodeOptions{config: fmt.Sprintf(threeGroups, 5), inhibitDelayMax: short, refuseRaise: true, server: s})
		checkDropIn(t, n)
		if got := n.fake.InhibitDelayMax(); got != short {
			t.Errorf("the fake serves %v after a refused raise, want %v", got, short)
		}
		ev := n.waitEvent("ShutdownGracePeriodTruncated", "", 10*time.Second)
		t.Logf("ShutdownGracePeriodTruncated: %s %q", ev.Type, ev.Message)
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("ShutdownGracePeriodTruncated is a %s event, want Warning", ev.Type)
		}
		// 5 s granted minus the 2 s reserve leaves 3 s: the two lower
		// groups lose everything, the critical group keeps 3 s.
		for _, want := range []string{"5s", "17s", "priority 0 from 5s to 0s", "priority 100000 from 5s to 0s", "priority 2000000000 from 5s to 3s"} {
			if !strings.Contains(ev.Message, want) {
				t.Errorf("ShutdownGracePeriodTruncated message %q does not say %q", ev.Message, want)
			}
		}
		signal := n.signal(true)
		rep := n.waitReport(signal)
		type cut struct {
			Priority         int32
			Requested, Grant float64
		}
		var cuts []cut
		for _, c := range rep.Cuts {
			cuts = append(cuts, cut{c.Priority, c.RequestedSeconds, c.GrantedSeconds})
		}
		wantCuts := []cut{{0, 5, 0}, {100000, 5, 0}, {2000000000, 5, 3}}
		if rep.DelayGrantedSeconds != 5 || rep.DelayRequestedSeconds != 17 || !slices.Equal(cuts, wantCuts) {
			t.Errorf("report: delay granted %v requested %v, cuts %+v; want 5, 17, %+v", rep.DelayGrantedSeconds, rep.DelayRequestedSeconds, cuts, wantCuts)
		}
		n.waitLock("the lock released", short, func(ins []logindtest.Inhibitor) bool { return !ins[len(ins)-1].Held() })
	})
}

// TestShutdownAgentRestartKeepsPods: SIGKILL, then SIGTERM, of the agent
// releases its lock
// (the pods it started did not inherit it) and stops no pod; the agent
// restarted on the same root dir adopts them (same pid, container id and
// restart count, still Running on the server), takes a new lock, and
// stops them at the next shutdown.
func TestShutdownAgentRestartKeepsPods(t *testing.T) {
	version := newestKubectl(t)
	tag := fmt.Sprintf("knode-e2e-shutdown-kill-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { killMarked(t, tag) })
	n := startShutdownNode(t, "shutdown-kill9", shutdownNodeOptions{config: fmt.Sprintf(threeGroups, 5), inhibitDelayMax: 30 * time.Second})
	ctx := context.Background()
	kubectl := func(args ...string) kubectlResult {
		t.Helper()
		res := kubectlWith(t, version, n.s.Home, n.s.Kubeconfig, args...)
		if res.ExitCode != 0 {
			t.Fatalf("want exit code 0:\n%s", res)
		}
		return res
	}
	files := t.TempDir()
	crit := shutdownPod("crit", tag, files, "")
	crit.Spec.PriorityClassName = "system-node-critical"
	before := createShutdownPods(t, n, version, files, shutdownPod("web", tag, files, ""), crit)

	type container struct {
		pid      int
		id       string
		restarts int32
	}
	look := func(p *corev1.Pod) container {
		t.Helper()
		pid, err := containerPID(n.root, string(p.UID), "c")
		if err != nil {
			t.Fatalf("pod %s: %v", p.Name, err)
		}
		if len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("pod %s: container statuses %+v", p.Name, p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0]
		return container{pid: pid, id: cs.ContainerID, restarts: cs.RestartCount}
	}
	was := map[string]container{}
	for name, p := range before {
		was[name] = look(p)
		if !processAlive(was[name].pid) || was[name].id == "" {
			t.Fatalf("pod %s: %+v; want a live pid and a container id", name, was[name])
		}
	}
	podLog := n.watchPods()

	// SIGKILL, then SIGTERM: after each, the restarted agent finds every
	// pod running as it was.
	for i, way := range []struct {
		name string
		stop func()
	}{
		{"SIGKILL", func() { n.agent.kill() }},
		{"SIGTERM", func() {
			if !n.agent.stop() {
				t.Fatal("the agent did not exit on SIGTERM")
			}
		}},
	} {
		way.stop()
		killed := time.Now()
		n.waitLock(way.name+" releasing the lock", 5*time.Second, func(ins []logindtest.Inhibitor) bool { return len(ins) == i+1 && !ins[i].Held() })
		n.startAgent()
		n.waitLock("a new lock after the restart", 10*time.Second, func(ins []logindtest.Inhibitor) bool { return len(ins) == i+2 && ins[i+1].Held() })
		t.Logf("agent back Ready with a new lock %v after %s", time.Since(killed).Round(time.Millisecond), way.name)
		// One more status pass from the new agent for each pod: wait until its
		// Node heartbeat is later than its start, then look at the pods.
		restarted := time.Now()
		eventually(t, "a heartbeat of the restarted agent", 10*time.Second, 50*time.Millisecond, func() (bool, string) {
			c := nodeCondition(n.node(), corev1.NodeReady)
			return c.LastHeartbeatTime.After(restarted.Add(time.Second)), fmt.Sprint(c.LastHeartbeatTime)
		})
		res := kubectl("get", "pods", "-o", `jsonpath={range .items[*]}{.metadata.name} {.status.phase} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].containerID}{"\n"}{end}`)
		t.Logf("kubectl get pods after %s and a restart:\n%s", way.name, res.Stdout)
		for name := range before {
			p, err := n.client.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			now := look(p)
			if now != was[name] || p.Status.Phase != corev1.PodRunning || !processAlive(now.pid) {
				t.Errorf("pod %s after %s and restart: %s %+v (alive %v), want Running %+v", name, way.name, p.Status.Phase, now, processAlive(now.pid), was[name])
			}
			if !slices.Contains(strings.Fields(res.Stdout), was[name].id) {
				t.Errorf("kubectl does not show pod %s's container id %s", name, was[name].id)
			}
		}
		seen, ended := podLog.snapshot()
		for _, o := range seen {
			if o.obj.Status.Phase != corev1.PodRunning {
				t.Errorf("%v after %s the server had pod %s %s", o.at.Sub(killed), way.name, o.obj.Name, o.obj.Status.Phase)
			}
		}
		if ended != nil {
			t.Errorf("the pod watch ended: %v", ended)
		}
		if got := readTermLog(t, files); len(got) > 0 {
			t.Errorf("%s of the agent and its restart sent SIGTERM to %v", way.name, got)
		}
	}

	// The restarted agent stops the pods it adopted at the next shutdown.
	signal := n.signal(true)
	n.waitLock("the lock released", 30*time.Second, func(ins []logindtest.Inhibitor) bool { return !ins[len(ins)-1].Held() })
	var order []string
	for _, l := range readTermLog(t, files) {
		order = append(order, l.name)
	}
	if !slices.Equal(order, []string{"web", "crit"}) {
		t.Errorf("adopted pods got SIGTERM in order %v, want [web crit]", order)
	}
	for name := range before {
		o, ok := podLog.first(signal, func(p *corev1.Pod) bool { return p.Name == name && stoppedByShutdown(p) })
		if !ok {
			t.Errorf("adopted pod %s was not seen Failed/Terminated", name)
			continue
		}
		checkStopped(t, o.obj)
		if ins := n.fake.Inhibitors(); !o.at.Before(ins[len(ins)-1].Released) {
			t.Errorf("adopted pod %s: final status seen after the lock release", name)
		}
	}
	rep := n.waitReport(signal)
	for _, g := range rep.Groups {
		for _, p := range g.Pods {
			if !p.Stopped || p.KilledAfterGrace || !p.StatusPosted {
				t.Errorf("report on adopted pod %+v: want stopped, not killed after its grace, status posted", p)
			}
		}
	}
}
