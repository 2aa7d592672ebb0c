package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// newestKubectl is the newest installed kubectl of kubectlVersions; the
// test is skipped when there is none.
func newestKubectl(t testing.TB) string {
	t.Helper()
	for _, v := range slices.Backward(kubectlVersions) {
		if _, err := os.Stat(kubectlPath(v)); err == nil {
			return v
		}
	}
	t.Skip("no kubectl installed")
	return ""
}

// kubectlWith runs kubectl with the given kubeconfig and HOME. A run that
// cannot start or times out fails the test.
func kubectlWith(t testing.TB, version, home, kubeconfig string, args ...string) kubectlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath(version), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "KUBECONFIG=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := kubectlResult{Args: args, Stdout: stdout.String(), Stderr: stderr.String()}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		res.ExitCode = exitErr.ExitCode()
	default:
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, res)
	}
	return res
}

// eventually calls check every interval until it reports done, and fails
// the test with its last message after timeout.
func eventually(t testing.TB, what string, timeout, interval time.Duration, check func() (bool, string)) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		done, msg := check()
		if done {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: not done after %s: %s", what, timeout, msg)
		case <-tick.C:
		}
	}
}

// watchLease collects the changes to a node's Lease after resourceVersion
// rv, for d of real time (the agents under test run in real time).
func watchLease(t *testing.T, client kubernetes.Interface, node, rv string, d time.Duration) []*coordinationv1.Lease {
	t.Helper()
	if d <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	w, err := client.CoordinationV1().Leases("kube-node-lease").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node, ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var changes []*coordinationv1.Lease
	for {
		select {
		case <-ctx.Done():
			return changes
		case ev, ok := <-w.ResultChan():
			if !ok {
				return changes
			}
			if l, isLease := ev.Object.(*coordinationv1.Lease); isLease && ev.Type == watch.Modified {
				changes = append(changes, l)
			}
		}
	}
}

// localIPs are the addresses configured on this machine's interfaces that
// are up and not loopback, IPv4 first; link-local addresses are left out.
func localIPs(t *testing.T) []net.IP {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatalf("listing interfaces: %v", err)
	}
	var v4, v6 []net.IP
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok || !ipnet.IP.IsGlobalUnicast() {
				continue
			}
			if ipnet.IP.To4() != nil {
				v4 = append(v4, ipnet.IP.To4())
			} else {
				v6 = append(v6, ipnet.IP)
			}
		}
	}
	return append(v4, v6...)
}

func nodeCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func isReady(n *corev1.Node) bool {
	c := nodeCondition(n, corev1.NodeReady)
	return c != nil && c.Status == corev1.ConditionTrue
}

func decodeJSON[T any](t *testing.T, res kubectlResult) *T {
	t.Helper()
	v := new(T)
	if err := json.Unmarshal([]byte(res.Stdout), v); err != nil {
		t.Fatalf("decoding the output of kubectl %s: %v\n%s", strings.Join(res.Args, " "), err, res)
	}
	return v
}

// TestAgentUpNodeReady: after `knode up`, this machine is a Ready node
// whose status kubectl describes with real addresses, capacity,
// allocatable, system info and the four conditions. It measures exec to
// the ready line, which `knode up` prints once the Node is stored Ready.
func TestAgentUpNodeReady(t *testing.T) {
	version := newestKubectl(t)
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(hostname)
	dataDir := t.TempDir()
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	home := t.TempDir()
	port := freePort(t)

	start := time.Now()
	p := startProcess(t, "up", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--kubelet-port", "0", "--storage-dir", t.TempDir(), "--cgroup-root", testCgroupRoot(t))
	t.Cleanup(func() {
		if !p.stop() {
			t.Errorf("knode up did not exit within %s of SIGTERM", stopTimeout)
		}
		killContainers(filepath.Join(dataDir, "agent"))
		if t.Failed() {
			t.Logf("--- knode up stderr (tail) ---\n%s", tail(p.stderr.String(), 40))
		}
	})
	var readyLine string
	eventually(t, "knode up printing its ready line", 30*time.Second, 5*time.Millisecond, func() (bool, string) {
		if p.hasExited() {
			t.Fatalf("knode up exited (%v) before it was ready:\n%s", p.err, tail(p.stderr.String(), 40))
		}
		for _, l := range lines(p.stdout.String()) {
			if strings.Contains(l, "is Ready") {
				readyLine = l
				return true, ""
			}
		}
		return false, fmt.Sprintf("stdout %q", p.stdout.String())
	})
	toReady := time.Since(start)
	t.Logf("knode up: exec to %q in %s", readyLine, toReady)
	if want := fmt.Sprintf("node %s is Ready", name); !strings.Contains(readyLine, want) {
		t.Errorf("ready line %q does not say %q", readyLine, want)
	}
	if toReady > 20*time.Second {
		t.Errorf("knode up took %s to report the node Ready; the goal is 2 s", toReady)
	}

	// kubectl get nodes: this machine, Ready.
	res := kubectlWith(t, version, home, kubeconfig, "get", "nodes")
	if res.ExitCode != 0 {
		t.Fatalf("want exit code 0:\n%s", res)
	}
	found := false
	for _, l := range lines(res.Stdout)[1:] {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == name {
			found = true
			if f[1] != "Ready" {
				t.Errorf("kubectl get nodes: %s has STATUS %q, want Ready\n%s", name, f[1], res.Stdout)
			}
		}
	}
	if !found {
		t.Errorf("kubectl get nodes does not list %s:\n%s", name, res.Stdout)
	}

	// The stored Node holds this machine's facts.
	node := decodeJSON[corev1.Node](t, kubectlWith(t, version, home, kubeconfig, "get", "node", name, "-o", "json"))
	var internalIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internalIP = a.Address
		}
	}
	local := localIPs(t)
	if !slices.ContainsFunc(local, func(ip net.IP) bool { return ip.Equal(net.ParseIP(internalIP)) }) {
		t.Errorf("InternalIP %q is not one of this machine's addresses %v", internalIP, local)
	}
	if bootID, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		if got, want := node.Status.NodeInfo.BootID, strings.TrimSpace(string(bootID)); got != want {
			t.Errorf("bootID %q, want this machine's %q", got, want)
		}
	}
	if machineID, err := os.ReadFile("/etc/machine-id"); err == nil && len(bytes.TrimSpace(machineID)) > 0 {
		if got, want := node.Status.NodeInfo.MachineID, strings.TrimSpace(string(machineID)); got != want {
			t.Errorf("machineID %q, want this machine's %q", got, want)
		}
	}
	cpu, mem, pods := node.Status.Capacity[corev1.ResourceCPU], node.Status.Capacity[corev1.ResourceMemory], node.Status.Capacity[corev1.ResourcePods]
	if cpu.Value() < 1 || mem.Value() < 1<<20 || pods.Value() != 110 {
		t.Errorf("capacity cpu %s memory %s pods %s; want real cpu and memory, 110 pods", &cpu, &mem, &pods)
	}
	allocMem := node.Status.Allocatable[corev1.ResourceMemory]
	if allocMem.Cmp(mem) >= 0 {
		t.Errorf("allocatable memory %s is not below capacity %s (evictionHard memory.available<100Mi)", &allocMem, &mem)
	}

	// kubectl describe node shows it all.
	res = kubectlWith(t, version, home, kubeconfig, "describe", "node", name)
	if res.ExitCode != 0 {
		t.Fatalf("want exit code 0:\n%s", res)
	}
	for _, want := range []string{
		"InternalIP: " + internalIP, "Hostname: " + name,
		"Capacity:", "Allocatable:", "System Info:",
		"Machine ID:", "Boot ID:", "Kernel Version:", "OS Image:", "Operating System: linux",
		"Container Runtime Version:", "Kubelet Version:",
		"MemoryPressure", "KubeletHasSufficientMemory",
		"DiskPressure", "KubeletHasNoDiskPressure",
		"PIDPressure", "KubeletHasSufficientPID",
		"KubeletReady", "kubelet is posting ready status",
		"kubernetes.io/hostname=" + name,
	} {
		if !strings.Contains(collapse(res.Stdout), want) {
			t.Errorf("kubectl describe node %s does not show %q", name, want)
		}
	}
	if t.Failed() {
		t.Logf("kubectl describe node %s:\n%s", name, res.Stdout)
	}
}

// TestAgentSecondNode runs `knode agent` for node-2 next to `knode
// server`, with its own node identity, and checks with kubectl what it
// registers, its Lease heartbeats (every 2 s for a lease of 8 s), that they
// stop when the agent is killed, and what node-2's identity may do.
func TestAgentSecondNode(t *testing.T) {
	version := newestKubectl(t)
	local := localIPs(t)
	if len(local) == 0 {
		t.Skip("this machine has no global unicast address on a non-loopback interface")
	}
	nodeIP := local[0].String()
	s := startServer(t, serverOptions{})
	admin := func(args ...string) kubectlResult { return kubectlWith(t, version, s.Home, s.Kubeconfig, args...) }
	mustAdmin := func(args ...string) kubectlResult {
		t.Helper()
		res := admin(args...)
		if res.ExitCode != 0 {
			t.Fatalf("want exit code 0:\n%s", res)
		}
		return res
	}

	out, err := exec.Command(knodeBinary, "kubeconfig", "--data-dir", s.DataDir, "--node", "node-2").Output()
	if err != nil {
		t.Fatalf("knode kubeconfig --node node-2: %v", err)
	}
	node2Kubeconfig := writeFile(t, "node2.kubeconfig", string(out))
	config := writeFile(t, "kubelet.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeLeaseDurationSeconds: 8\n")
	rootDir := t.TempDir()
	args := []string{"agent", "--kubeconfig", node2Kubeconfig, "--root-dir", rootDir,
		"--address", "127.0.0.1", "--port", "0", "--storage-dir", s.StorageDir,
		"--hostname-override", "node-2",
		"--node-labels", "team=blue,node.kubernetes.io/pool=p1",
		"--register-with-taints", "dedicated=infra:NoSchedule",
		"--node-ip", nodeIP,
		"--cgroup-root", testCgroupRoot(t),
		"--config", config}
	start := time.Now()
	agent := startProcess(t, args...)
	t.Cleanup(func() {
		agent.kill()
		killContainers(rootDir)
		if t.Failed() {
			t.Logf("knode %s\n--- agent stderr (tail) ---\n%s", strings.Join(args, " "), tail(agent.stderr.String(), 40))
		}
	})

	// Registered and Ready.
	client := s.Clientset(t)
	ctx := context.Background()
	eventually(t, "node-2 Ready", 30*time.Second, 20*time.Millisecond, func() (bool, string) {
		if agent.hasExited() {
			t.Fatalf("knode agent exited: %v\n%s", agent.err, tail(agent.stderr.String(), 40))
		}
		n, err := client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return isReady(n), fmt.Sprintf("conditions %v", n.Status.Conditions)
	})
	t.Logf("knode agent: exec to node-2 Ready in %s", time.Since(start))

	// Graceful shutdown is off by default, and the agent says so on its
	// Node.
	eventually(t, "node-2's GracefulShutdownDisabled event", 10*time.Second, 20*time.Millisecond, func() (bool, string) {
		list, err := client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=node-2,reason=GracefulShutdownDisabled"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeNormal && strings.Contains(e.Message, "shutdownGracePeriod and shutdownGracePeriodCriticalPods are both 0s") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v", list.Items)
	})

	node := decodeJSON[corev1.Node](t, mustAdmin("get", "node", "node-2", "-o", "json"))
	for k, v := range map[string]string{"team": "blue", "node.kubernetes.io/pool": "p1", "kubernetes.io/hostname": "node-2", "kubernetes.io/os": "linux"} {
		if got, ok := node.Labels[k]; !ok || got != v {
			t.Errorf("node-2 label %s = %q (present %v), want %q; labels %v", k, got, ok, v, node.Labels)
		}
	}
	wantTaint := corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&wantTaint) && t.Value == "infra" }) {
		t.Errorf("node-2 taints %v, want %v among them", node.Spec.Taints, wantTaint)
	}
	wantAddresses := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}, {Type: corev1.NodeHostName, Address: "node-2"}}
	if !slices.Equal(node.Status.Addresses, wantAddresses) {
		t.Errorf("node-2 addresses %v, want %v", node.Status.Addresses, wantAddresses)
	}
	res := mustAdmin("get", "node", "node-2", "--no-headers")
	if f := strings.Fields(res.Stdout); len(f) < 2 || f[1] != "Ready" {
		t.Errorf("kubectl get node node-2: %q, want STATUS Ready", res.Stdout)
	}

	// The Lease.
	getLease := func() *coordinationv1.Lease {
		t.Helper()
		return decodeJSON[coordinationv1.Lease](t, mustAdmin("get", "lease", "-n", "kube-node-lease", "node-2", "-o", "json"))
	}
	lease := getLease()
	if h := lease.Spec.HolderIdentity; h == nil || *h != "node-2" {
		t.Errorf("lease holderIdentity %v, want node-2", h)
	}
	if d := lease.Spec.LeaseDurationSeconds; d == nil || *d != 8 {
		t.Errorf("lease leaseDurationSeconds %v, want 8", d)
	}
	wantOwner := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node-2", UID: node.UID}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0] != wantOwner {
		t.Errorf("lease ownerReferences %v, want [%v]", lease.OwnerReferences, wantOwner)
	}

	// renewTime advances every 2 s (+ up to 4 % jitter): watch the Lease.
	renewals := []time.Time{lease.Spec.RenewTime.Time}
	pollStart := time.Now()
	for _, l := range watchLease(t, client, "node-2", lease.ResourceVersion, 5500*time.Millisecond) {
		if rt := l.Spec.RenewTime; rt != nil && !rt.Time.Equal(renewals[len(renewals)-1]) {
			renewals = append(renewals, rt.Time)
		}
	}
	var gaps []time.Duration
	for i := 1; i < len(renewals); i++ {
		gaps = append(gaps, renewals[i].Sub(renewals[i-1]).Round(time.Millisecond))
	}
	t.Logf("node-2 renewTime over %s: %d distinct values, gaps %v", time.Since(pollStart).Round(time.Millisecond), len(renewals), gaps)
	if len(renewals) < 3 {
		t.Errorf("renewTime took %d distinct values in ~5.5 s, want at least 3 (renewing every 2 s)", len(renewals))
	}
	for _, g := range gaps {
		if g < 1900*time.Millisecond || g > 4500*time.Millisecond {
			t.Errorf("renewTime gap %s, want about 2 s (a quarter of 8 s, plus jitter)", g)
		}
	}

	// Kill the agent: the renewals stop.
	agent.kill()
	killedAt := time.Now()
	stopped := getLease().Spec.RenewTime.Time

	// node-2's identity, meanwhile. node-1 is a Node and Lease the admin adds.
	node1 := writeFile(t, "node-1.yaml", `apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels:
    kubernetes.io/hostname: node-1
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: node-1
  namespace: kube-node-lease
spec:
  holderIdentity: node-1
  leaseDurationSeconds: 40
`)
	mustAdmin("apply", "-f", node1)
	asNode2 := func(args ...string) kubectlResult {
		return kubectlWith(t, version, t.TempDir(), node2Kubeconfig, args...)
	}
	forbidden := []struct {
		name   string
		args   []string
		wantIn string
	}{
		{"label node-1", []string{"label", "node", "node-1", "x=y"}, ""},
		{"patch node-1's Lease", []string{"patch", "lease", "node-1", "-n", "kube-node-lease", "--type=merge", "-p", `{"spec":{"holderIdentity":"node-2"}}`}, "node lease"},
		{"update node-1's Lease", []string{"replace", "-f", writeFile(t, "lease-node-1.yaml", `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: node-1
  namespace: kube-node-lease
spec:
  holderIdentity: node-2
  leaseDurationSeconds: 40
`)}, "node lease"},
		{"give itself a node-role label", []string{"label", "node", "node-2", "node-role.kubernetes.io/worker="}, "node-role.kubernetes.io/worker"},
		{"remove its own taint", []string{"taint", "node", "node-2", "dedicated-"}, "taints"},
		{"delete itself", []string{"delete", "node", "node-2"}, ""},
	}
	for _, tc := range forbidden {
		res := asNode2(tc.args...)
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Forbidden") || !strings.Contains(res.Stderr, tc.wantIn) {
			t.Errorf("node-2 may not %s: want a non-zero exit and Forbidden (mentioning %q) in stderr:\n%s", tc.name, tc.wantIn, res)
		}
	}
	if l := decodeJSON[coordinationv1.Lease](t, mustAdmin("get", "lease", "-n", "kube-node-lease", "node-1", "-o", "json")); *l.Spec.HolderIdentity != "node-1" {
		t.Errorf("node-1's lease holder is now %q", *l.Spec.HolderIdentity)
	}
	n1 := decodeJSON[corev1.Node](t, mustAdmin("get", "node", "node-1", "-o", "json"))
	if _, ok := n1.Labels["x"]; ok {
		t.Errorf("node-2 labelled node-1: %v", n1.Labels)
	}
	// NodeRestriction lets a node change labels outside kubernetes.io and
	// k8s.io on its own Node.
	if res := asNode2("label", "node", "node-2", "team=red", "--overwrite"); res.ExitCode != 0 {
		t.Errorf("node-2 relabelling itself team=red: want exit code 0:\n%s", res)
	}
	n2 := decodeJSON[corev1.Node](t, mustAdmin("get", "node", "node-2", "-o", "json"))
	if _, hasRole := n2.Labels["node-role.kubernetes.io/worker"]; n2.Labels["team"] != "red" || hasRole {
		t.Errorf("node-2 labels after the identity checks: %v; want team=red and no node-role", n2.Labels)
	}
	if len(n2.Spec.Taints) != len(node.Spec.Taints) {
		t.Errorf("node-2 taints changed: %v -> %v", node.Spec.Taints, n2.Spec.Taints)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Errorf("node-2 deleted itself")
	}

	// For more than two renew intervals after the kill, the Lease does not
	// change: watch it until then.
	current := getLease()
	if got := current.Spec.RenewTime.Time; !got.Equal(stopped) {
		t.Errorf("renewTime moved from %v to %v after the agent was killed", stopped, got)
	}
	if changes := watchLease(t, client, "node-2", current.ResourceVersion, 4500*time.Millisecond-time.Since(killedAt)); len(changes) > 0 {
		t.Errorf("the Lease changed %d times after the agent was killed, first renewTime %v", len(changes), changes[0].Spec.RenewTime)
	}
	t.Logf("renewTime unchanged %s after SIGKILL", time.Since(killedAt).Round(time.Millisecond))
}

// TestAgentBadFlags: a bad flag stops `knode agent` with a non-zero exit
// and a message that names the flag and the rule.
func TestAgentBadFlags(t *testing.T) {
	unknownField := writeFile(t, "bad.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nregisterNodes: false\n")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"taint without effect", []string{"--register-with-taints", "foo=bar"}, []string{"--register-with-taints", "foo=bar", "NoSchedule", "PreferNoSchedule", "NoExecute"}},
		{"node-role label", []string{"--node-labels", "node-role.kubernetes.io/worker="}, []string{"--node-labels", "node-role.kubernetes.io/worker"}},
		{"two IPv4 node IPs", []string{"--node-ip", "10.0.0.1,10.0.0.2"}, []string{"--node-ip", "dual-stack"}},
		{"unknown config field", []string{"--config", unknownField}, []string{"--config", "unknown field", "registerNodes"}},
		{"unknown CPU manager policy", []string{"--cpu-manager-policy", "dynamic"}, []string{"cpuManagerPolicy (--cpu-manager-policy)", `unknown policy: "dynamic"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"agent", "--kubeconfig", filepath.Join(t.TempDir(), "none.kubeconfig"), "--root-dir", t.TempDir()}, tc.args...)
			cmd := exec.CommandContext(ctx, knodeBinary, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || ctx.Err() != nil {
				t.Fatalf("knode %s: %v, want a non-zero exit\n%s", strings.Join(args, " "), err, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("knode %s: stderr does not mention %q:\n%s", strings.Join(args, " "), w, stderr.String())
				}
			}
		})
	}
}
