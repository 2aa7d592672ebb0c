package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"knode/internal/agent/runtime/cri/critest"
)

// criCluster is a server, a containerd of the test's own with an image in
// a registry on 127.0.0.1, and one agent running its pods through the CRI
// on a bridge of the test's own.
type criCluster struct {
	t       testing.TB
	s       *server
	client  kubernetes.Interface
	image   string
	subnet  *net.IPNet
	node    string
	agent   *process
	rootDir string
	args    []string
}

// newCRICluster starts everything. The node's pod CIDR is the bridge's
// /24 (a one-node cluster CIDR of that size), and the agent listens on the
// bridge's gateway address, where the API server reaches it.
func newCRICluster(t testing.TB, node string) *criCluster {
	t.Helper()
	critest.RequireTools(t)
	cgroupRoot := critest.CgroupRoot(t)
	work := t.TempDir()
	layout := critest.BuildImage(t, work)
	reg := critest.StartRegistry(t)
	image := reg + "/knode/busybox:" + critest.Tag
	critest.Push(t, layout, image)
	// The bridge and its address are the test's; the conflist the
	// harness writes beside it is not used: the agent writes its own.
	network := critest.BridgeNetwork(t, filepath.Join(work, "unused-net.d"))
	confDir := filepath.Join(work, "net.d")
	endpoint := critest.StartContainerd(t, critest.Options{SandboxImage: image, Mirrors: []string{reg}, CNIConfDir: confDir})
	// The API server verifies the agent's serving certificate, which the
	// agent gets from the cluster CA (--rotate-server-certificates).
	dataDir := t.TempDir()
	s := startServer(t, serverOptions{DataDir: dataDir, Args: []string{"--allocate-node-cidrs", "--cluster-cidr", network.Subnet.String(), "--node-cidr-mask-size", "24",
		"--kubelet-certificate-authority", filepath.Join(dataDir, "pki", "ca.crt")}})
	c := &criCluster{t: t, s: s, client: s.Clientset(t), image: image, subnet: network.Subnet, node: node, rootDir: t.TempDir()}
	gw := network.Gateway.String()
	c.args = []string{"--node-ip", gw, "--address", gw, "--cgroup-root", cgroupRoot,
		"--container-runtime-endpoint", endpoint, "--cni-conf-dir", confDir, "--cni-bridge", network.Bridge, "--cni-is-gateway=false",
		"--rotate-server-certificates"}
	c.startAgent()
	return c
}

// startAgent starts the agent and waits until it is Ready and serves a
// certificate of the cluster CA.
func (c *criCluster) startAgent() {
	c.t.Helper()
	c.agent = startAgent(c.t, c.s, c.node, c.rootDir, c.args...)
	(&resourcesCluster{t: c.t, s: c.s, client: c.client}).waitReady(c.agent, c.node)
	ca, err := os.ReadFile(c.s.CAFile)
	if err != nil {
		c.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	var addr string
	// The Node names the new agent's port once it posted its status.
	eventually(c.t, "the agent serving a certificate of the cluster CA", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		node, err := c.client.CoreV1().Nodes().Get(context.Background(), c.node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				addr = net.JoinHostPort(a.Address, fmt.Sprint(node.Status.DaemonEndpoints.KubeletEndpoint.Port))
			}
		}
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
		if err != nil {
			return false, err.Error()
		}
		conn.Close()
		return true, ""
	})
	// Without credentials the agent answers 401; another node's identity
	// asking for a pod's logs gets 403.
	get := func(cert []tls.Certificate, path string) int {
		c.t.Helper()
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: cert}}}
		resp, err := cl.Get("https://" + addr + path)
		if err != nil {
			c.t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(nil, "/pods"); code != http.StatusUnauthorized {
		c.t.Errorf("GET /pods without credentials: %d, want 401", code)
	}
	other := nodeCertificate(c.t, c.s, "cri-2")
	if code := get([]tls.Certificate{other}, "/containerLogs/default/web/web"); code != http.StatusForbidden {
		c.t.Errorf("another node's GET /containerLogs: %d, want 403", code)
	}
}

// nodeKubeconfig is node's kubeconfig for s, as knode kubeconfig --node
// writes it.
func nodeKubeconfig(t testing.TB, s *server, node string) *clientcmdapi.Config {
	t.Helper()
	out, err := exec.Command(knodeBinary, "kubeconfig", "--data-dir", s.DataDir, "--node", node).Output()
	if err != nil {
		t.Fatalf("knode kubeconfig --node %s: %v", node, err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nodeCertificate is node's client certificate, as knode kubeconfig
// --node issues it.
func nodeCertificate(t testing.TB, s *server, node string) tls.Certificate {
	t.Helper()
	cfg := nodeKubeconfig(t, s, node)
	for _, auth := range cfg.AuthInfos {
		pair, err := tls.X509KeyPair(auth.ClientCertificateData, auth.ClientKeyData)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	t.Fatalf("no user in the kubeconfig of %s", node)
	return tls.Certificate{}
}

func (c *criCluster) kubectl(version string, args ...string) kubectlResult {
	c.t.Helper()
	return kubectlWith(c.t, version, c.s.Home, c.s.Kubeconfig, args...)
}

// pod waits until cond holds for pod name and returns it.
func (c *criCluster) pod(name, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	c.t.Helper()
	var p *corev1.Pod
	eventually(c.t, name+" "+what, timeout, 100*time.Millisecond, func() (bool, string) {
		if c.agent.hasExited() {
			c.t.Fatalf("the agent exited: %v\n%s", c.agent.err, tail(c.agent.stderr.String(), 40))
		}
		var err error
		p, err = c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cond(p), fmt.Sprintf("phase %s, statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	})
	return p
}

func isRunning(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil
}

func waitingReason(reason string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == reason
	}
}

// events are the pod's events, "<type> <reason> <message>".
func (c *criCluster) events(pod string) []string {
	c.t.Helper()
	list, err := c.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Type+" "+e.Reason+" "+e.Message)
	}
	return out
}

func hasEvent(events []string, prefix string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, prefix) })
}

// TestCRI is the container runtime's story with real kubectl, a real
// containerd and the built agent: kubectl run from an image in the local
// registry, the pod's own address in the node's pod CIDR, reached from
// the host; logs, exec and port-forward; probes; a missing image; and an
// agent killed with SIGKILL whose successor adopts the running container.
func TestCRI(t *testing.T) {
	c := newCRICluster(t, "cri-1")
	newest := newestKubectl(t)
	versions := []string{newest}
	if v := kubectlVersions[0]; v != newest && kubectlInstalled(v) {
		versions = append(versions, v)
	}
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), c.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rv := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(rv, "containerd://") {
		t.Errorf("containerRuntimeVersion %q, want containerd://...", rv)
	}
	if node.Spec.PodCIDR != c.subnet.String() {
		t.Fatalf("the node's pod CIDR is %q, want %s", node.Spec.PodCIDR, c.subnet)
	}

	// kubectl run, as every tutorial starts.
	if res := c.kubectl(newest, "run", "web", "--image="+c.image, "--", "httpd", "-f", "-p", "8080"); res.ExitCode != 0 {
		t.Fatalf("kubectl run: %s", res)
	}
	web := c.pod("web", "Running", 60*time.Second, isRunning)
	ip := net.ParseIP(web.Status.PodIP)
	if ip == nil || !c.subnet.Contains(ip) {
		t.Fatalf("pod IP %q is not in the node's pod CIDR %s", web.Status.PodIP, c.subnet)
	}
	firstID := web.Status.ContainerStatuses[0].ContainerID
	if !strings.HasPrefix(firstID, "containerd://") {
		t.Errorf("container ID %q", firstID)
	}
	// The host reaches httpd at the pod's address (busybox httpd serves
	// from /).
	var body string
	eventually(t, "httpd answering at the pod's IP", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		resp, err := http.Get("http://" + net.JoinHostPort(web.Status.PodIP, "8080") + "/etc/hostname")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == 200, fmt.Sprintf("%d %q", resp.StatusCode, b)
	})
	if body != "web\n" {
		t.Errorf("GET /etc/hostname from the pod: %q, want web", body)
	}
	node, _ = c.client.CoreV1().Nodes().Get(context.Background(), c.node, metav1.GetOptions{})
	found := false
	for _, img := range node.Status.Images {
		found = found || slices.Contains(img.Names, c.image)
	}
	if !found {
		t.Errorf("status.images %+v lacks %s", node.Status.Images, c.image)
	}

	for _, v := range versions {
		res := c.kubectl(v, "exec", "web", "--", "cat", "/etc/hostname")
		if res.ExitCode != 0 || res.Stdout != "web\n" {
			t.Errorf("kubectl %s exec web -- cat /etc/hostname: %s", v, res)
		}
		res = c.kubectl(v, "exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
		if res.ExitCode != 7 || res.Stdout != "out\n" || !strings.Contains(res.Stderr, "err") {
			t.Errorf("kubectl %s exec with exit 7: %s", v, res)
		}
		if in := kubectlStdin(t, v, c.s, "through stdin\n", "exec", "-i", "web", "--", "cat"); in != "through stdin\n" {
			t.Errorf("kubectl %s exec -i cat: %q", v, in)
		}
	}

	// kubectl port-forward reaches httpd in the pod.
	local := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pf := c.s.kubectlCommand(ctx, newest, "port-forward", "pod/web", fmt.Sprintf("%d:8080", local))
	pfOut, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(pfOut).ReadString('\n'); err != nil || !strings.Contains(line, fmt.Sprintf("Forwarding from 127.0.0.1:%d -> 8080", local)) {
		t.Fatalf("kubectl port-forward said %q, %v", line, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/etc/hostname", local))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "web\n" {
		t.Errorf("through kubectl port-forward: %d %q", resp.StatusCode, b)
	}
	cancel()
	_ = pf.Wait()

	// Logs: all, tail, timestamps (CRI logs keep them), and follow.
	c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: talker}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "echo one; echo two; echo oops >&2; i=0; while true; i=$((i+1)); do echo tick $i; sleep 0.2; done"]
`, c.image))
	c.pod("talker", "Running", 60*time.Second, isRunning)
	eventually(t, "kubectl logs", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		res := c.kubectl(newest, "logs", "talker")
		// stdout and stderr reach the log by separate pipes: their
		// order against each other is not kept.
		out := strings.Replace(res.Stdout, "oops\n", "", 1)
		return strings.HasPrefix(out, "one\ntwo\ntick 1\n") && strings.Contains(res.Stdout, "oops\n"), res.String()
	})
	for _, v := range versions {
		res := c.kubectl(v, "logs", "talker", "--tail=1", "--timestamps")
		fields := strings.Fields(res.Stdout)
		if res.ExitCode != 0 || len(fields) != 3 || fields[1] != "tick" {
			t.Errorf("kubectl %s logs --tail=1 --timestamps: %s", v, res)
		} else if _, err := time.Parse(time.RFC3339Nano, fields[0]); err != nil {
			t.Errorf("kubectl %s logs --timestamps: %q is not a time: %v", v, fields[0], err)
		}
	}
	// Once the talker has talked for a few seconds, --since=1s leaves its
	// first lines out.
	eventually(t, "a few seconds of ticks", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		res := c.kubectl(newest, "logs", "talker", "--tail=1")
		return strings.HasPrefix(res.Stdout, "tick ") && len(res.Stdout) >= len("tick 15\n"), res.String()
	})
	since := c.kubectl(newest, "logs", "talker", "--since=1s").Stdout
	if strings.Contains(since, "one\n") || !strings.Contains(since, "tick") {
		t.Errorf("kubectl logs --since=1s = %q: want only recent ticks", since)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	follow := c.s.kubectlCommand(fctx, newest, "logs", "-f", "talker", "--tail=1")
	fout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(fout)
	var seen []string
	for len(seen) < 3 && sc.Scan() {
		seen = append(seen, sc.Text())
	}
	fcancel()
	_ = follow.Wait()
	if len(seen) < 3 || seen[1] == seen[2] || !strings.HasPrefix(seen[2], "tick ") {
		t.Errorf("kubectl logs -f printed %q", seen)
	}

	// kubectl attach streams the container's output as it comes.
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	attach := c.s.kubectlCommand(actx, newest, "attach", "talker")
	aout, err := attach.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	asc := bufio.NewScanner(aout)
	var attached []string
	for len(attached) < 2 && asc.Scan() {
		if strings.HasPrefix(asc.Text(), "tick ") {
			attached = append(attached, asc.Text())
		}
	}
	acancel()
	_ = attach.Wait()
	if len(attached) < 2 || attached[0] == attached[1] {
		t.Errorf("kubectl attach printed %q, want new tick lines", attached)
	}

	// A readiness probe keeps the pod not Ready until it passes; a failing
	// liveness probe restarts the container.
	c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: sick}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["httpd", "-f", "-p", "8081"]
    livenessProbe:
      httpGet: {path: /no-such-page, port: 8081}
      periodSeconds: 1
      failureThreshold: 2
`, c.image, c.image))
	probed := c.pod("probed", "Running", 60*time.Second, isRunning)
	if podReady(probed) {
		t.Errorf("probed is Ready before its readiness probe passed")
	}
	if res := c.kubectl(newest, "exec", "probed", "--", "touch", "/tmp/ready"); res.ExitCode != 0 {
		t.Fatalf("touch /tmp/ready: %s", res)
	}
	c.pod("probed", "Ready", 30*time.Second, podReady)

	sick := c.pod("sick", "restarted twice", 90*time.Second, func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 2
	})
	cs := sick.Status.ContainerStatuses[0]
	if last := cs.LastTerminationState.Terminated; last == nil {
		t.Errorf("no last termination after restarts: %+v", cs)
	}
	// The restarts wait out the back-off.
	c.pod("sick", "in CrashLoopBackOff", 60*time.Second, waitingReason("CrashLoopBackOff"))
	ev := c.events("sick")
	for _, want := range []string{
		"Warning Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 404",
		"Normal Killing Container main failed liveness probe, will be restarted",
		"Warning BackOff Back-off restarting failed container main in pod sick_default(",
	} {
		if !hasEvent(ev, want) {
			t.Errorf("no event %q among %q", want, ev)
		}
	}

	// A missing image: ErrImagePull, then ImagePullBackOff.
	missing := strings.Replace(c.image, "busybox:", "no-such-image:", 1)
	if res := c.kubectl(newest, "run", "ghost", "--image="+missing); res.ExitCode != 0 {
		t.Fatalf("kubectl run ghost: %s", res)
	}
	c.pod("ghost", "ErrImagePull", 60*time.Second, waitingReason("ErrImagePull"))
	ghost := c.pod("ghost", "ImagePullBackOff", 60*time.Second, waitingReason("ImagePullBackOff"))
	if msg := ghost.Status.ContainerStatuses[0].State.Waiting.Message; msg != fmt.Sprintf("Back-off pulling image %q", missing) {
		t.Errorf("ImagePullBackOff message %q", msg)
	}

	// SIGKILL the agent; the next one adopts the running container: same
	// ID, same restart count, no restart.
	before := c.pod("web", "Running", 10*time.Second, isRunning).Status.ContainerStatuses[0]
	c.agent.kill()
	c.startAgent()
	// The worker passes over pods in creation order: once a pod created
	// now runs, the new agent has been over web.
	c.apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: later}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: %s, command: ["sleep", "3600"]}
`, c.image))
	c.pod("later", "Running", 60*time.Second, isRunning)
	after := c.pod("web", "still Running after the agent's restart", 20*time.Second, isRunning).Status.ContainerStatuses[0]
	if after.ContainerID != before.ContainerID || after.RestartCount != before.RestartCount {
		t.Errorf("after the agent's restart: %s restarts %d, before %s restarts %d", after.ContainerID, after.RestartCount, before.ContainerID, before.RestartCount)
	}
	resp, err = http.Get("http://" + net.JoinHostPort(web.Status.PodIP, "8080") + "/etc/hostname")
	if err != nil {
		t.Errorf("httpd after the agent's restart: %v", err)
	} else {
		resp.Body.Close()
	}
}

func (c *criCluster) apply(yaml string) {
	c.t.Helper()
	res := c.kubectl(newestKubectl(c.t), "apply", "-f", writeFile(c.t, fmt.Sprintf("cri-%d.yaml", time.Now().UnixNano()), yaml))
	if res.ExitCode != 0 {
		c.t.Fatalf("kubectl apply: %s", res)
	}
}
