package e2e

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// needsCgroupV1Root skips a test that writes the machine's cgroup v1
// hierarchies (under a root of its own) when it cannot.
func needsCgroupV1Root(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to write cgroups")
	}
	if isCgroup2(cgroupMount) {
		t.Skip("the machine has cgroup v2 only; the v2 path is covered by the cgroups and process runtime packages")
	}
}

// resourcesCluster is a server, one agent on this machine and kubectl.
type resourcesCluster struct {
	t       testing.TB
	s       *server
	client  kubernetes.Interface
	version string
	tag     string
}

func newResourcesCluster(t testing.TB) *resourcesCluster {
	t.Helper()
	tag := fmt.Sprintf("knode-e2e-res-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { killMarked(t, tag) })
	s := startServer(t, serverOptions{})
	return &resourcesCluster{t: t, s: s, client: s.Clientset(t), version: newestKubectl(t), tag: tag}
}

func (c *resourcesCluster) kubectl(args ...string) kubectlResult {
	c.t.Helper()
	res := kubectlWith(c.t, c.version, c.s.Home, c.s.Kubeconfig, args...)
	if res.ExitCode != 0 {
		c.t.Fatalf("want exit code 0:\n%s", res)
	}
	return res
}

// apply creates objects from YAML with kubectl.
func (c *resourcesCluster) apply(yaml string) {
	c.t.Helper()
	c.kubectl("apply", "-f", writeFile(c.t, fmt.Sprintf("res-%d.yaml", time.Now().UnixNano()), yaml))
}

// waitReady waits until node is Ready.
func (c *resourcesCluster) waitReady(agent *process, node string) *corev1.Node {
	c.t.Helper()
	var n *corev1.Node
	eventually(c.t, node+" Ready", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		if agent.hasExited() {
			c.t.Fatalf("agent %s exited: %v\n%s", node, agent.err, tail(agent.stderr.String(), 40))
		}
		got, err := c.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n = got
		status, _ := nodeReady(got)
		return status == corev1.ConditionTrue, string(status)
	})
	return n
}

// waitPod waits until done holds for pod name.
func (c *resourcesCluster) waitPod(name, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	c.t.Helper()
	var pod *corev1.Pod
	eventually(c.t, "pod "+name+" "+what, 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return done(p), fmt.Sprintf("phase=%s reason=%q message=%q statuses=%+v", p.Status.Phase, p.Status.Reason, p.Status.Message, p.Status.ContainerStatuses)
	})
	return pod
}

// waitAllocatable waits until node's allocatable holds n of resource.
func (c *resourcesCluster) waitAllocatable(node string, resource corev1.ResourceName, n int64) {
	c.t.Helper()
	eventually(c.t, fmt.Sprintf("%d %s allocatable on %s", n, resource, node), 30*time.Second, 100*time.Millisecond, func() (bool, string) {
		got, err := c.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		q := got.Status.Allocatable[resource]
		return q.Value() == n, "allocatable " + q.String()
	})
}

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// process finds the one live process of the pods carrying marker.
func (c *resourcesCluster) process(marker string) int {
	c.t.Helper()
	var pid int
	eventually(c.t, "the process of "+marker, 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		var found []int
		for _, p := range markedProcs(c.tag) {
			if p.marker == marker {
				found = append(found, p.pid)
			}
		}
		if len(found) == 1 {
			pid = found[0]
		}
		return len(found) == 1, fmt.Sprintf("processes: %v", found)
	})
	return pid
}

// procStatus is a field of /proc/<pid>/status.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return ""
}

// memoryCgroupFile reads a file of pid's memory cgroup (v1).
func memoryCgroupFile(t *testing.T, pid int, file string) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "memory") {
			value, err := os.ReadFile(filepath.Join(cgroupMount, "memory", parts[2], file))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(value))
		}
	}
	t.Fatalf("process %d has no memory cgroup:\n%s", pid, data)
	return ""
}

// podYAML is a pod running command with marker in its environment.
func podYAML(name, marker, restart, resources string, command ...string) string {
	quoted := make([]string, len(command))
	for i, a := range command {
		quoted[i] = strconv.Quote(a)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: [%s]
    env:
    - {name: %s, value: %q}
    resources: %s
`, name, restart, strings.Join(quoted, ", "), markerEnv, marker, resources)
}

// TestNodeResources runs one agent on this cgroup v1 machine with the
// static CPU manager (CPU 0 reserved) and a device plugin of the test's:
// a container past its memory limit is OOMKilled; a Guaranteed pod gets
// CPU 1 alone while a BestEffort one runs on CPU 0, and gets CPU 1 back
// when the Guaranteed pod goes; the plugin's devices are allocatable, a
// pod gets two of them with the environment Allocate returned, and the
// allocation outlives an agent restart.
func TestNodeResources(t *testing.T) {
	needsCgroupV1Root(t)
	c := newResourcesCluster(t)
	root := t.TempDir()
	cgroupRoot := testCgroupRoot(t)
	agentArgs := []string{"--cgroup-root", cgroupRoot, "--cpu-manager-policy", "static", "--reserved-cpus", "0"}
	agent := startAgent(t, c.s, "res-1", root, agentArgs...)
	node := c.waitReady(agent, "res-1")
	if got := node.Status.Allocatable.Cpu().String(); got != "1" {
		t.Errorf("allocatable cpu = %s, want 1 (CPU 0 reserved)", got)
	}

	t.Run("OOMKilled", func(t *testing.T) {
		c.apply(podYAML("oom", c.tag+"-oom", "Never", "{limits: {memory: 32Mi}}", "tail", "/dev/zero"))
		p := c.waitPod("oom", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.Reason != "OOMKilled" || term.ExitCode != 137 {
			t.Errorf("container state %+v, want terminated OOMKilled with exit code 137", p.Status.ContainerStatuses[0].State)
		}
		out := c.kubectl("get", "pod", "oom", "-o", "jsonpath={.status.containerStatuses[0].state.terminated.reason}")
		if out.Stdout != "OOMKilled" {
			t.Errorf("kubectl says %q, want OOMKilled", out.Stdout)
		}
	})

	t.Run("static CPU manager", func(t *testing.T) {
		guaranteed := "{limits: {cpu: 1, memory: 64Mi}, requests: {cpu: 1, memory: 64Mi}}"
		c.apply(podYAML("exclusive", c.tag+"-exclusive", "Always", guaranteed, "sleep", "3600"))
		c.apply(podYAML("shared", c.tag+"-shared", "Always", "{}", "sleep", "3600"))
		c.waitPod("exclusive", "Running", running)
		c.waitPod("shared", "Running", running)
		if got := procStatus(t, c.process(c.tag+"-exclusive"), "Cpus_allowed_list"); got != "1" {
			t.Errorf("Guaranteed pod's Cpus_allowed_list = %q, want 1", got)
		}
		shared := c.process(c.tag + "-shared")
		if got := procStatus(t, shared, "Cpus_allowed_list"); got != "0" {
			t.Errorf("BestEffort pod's Cpus_allowed_list = %q, want 0", got)
		}
		state, err := os.ReadFile(filepath.Join(root, "cpu_manager_state"))
		if err != nil || !strings.Contains(string(state), `"policyName":"static"`) || !strings.Contains(string(state), `"main":"1"`) {
			t.Errorf("cpu_manager_state = %s, %v; want the static policy and main on CPU 1", state, err)
		}
		c.kubectl("delete", "pod", "exclusive", "--wait=true")
		eventually(t, "CPU 1 back in the shared pool", 30*time.Second, 100*time.Millisecond, func() (bool, string) {
			got := procStatus(t, shared, "Cpus_allowed_list")
			return got == "0-1", "Cpus_allowed_list " + got
		})
	})

	t.Run("device plugin", func(t *testing.T) {
		plugin := startDevicePlugin(t, root, "example.com/dev", map[string]int64{"dev-0": 0, "dev-1": 0, "dev-2": 0, "dev-3": 0})
		c.waitAllocatable("res-1", "example.com/dev", 4)
		devices := "{limits: {example.com/dev: 2}}"
		c.apply(podYAML("dev-a", c.tag+"-dev-a", "Always", devices, "sleep", "3600"))
		c.waitPod("dev-a", "Running", running)
		pid := c.process(c.tag + "-dev-a")
		first := environ(t, pid)["E2E_DEVICES"]
		if len(strings.Split(first, ",")) != 2 {
			t.Fatalf("dev-a's E2E_DEVICES = %q, want two devices from Allocate", first)
		}

		if n := plugin.allocations.Load(); n != 1 {
			t.Fatalf("Allocate was called %d times for one pod", n)
		}

		// A restarted agent keeps the pod and its devices, from its
		// checkpoint: it does not ask the plugin again for dev-a, and the
		// next pod gets the other two.
		agent.stop()
		agent = startAgent(t, c.s, "res-1", root, agentArgs...)
		c.waitReady(agent, "res-1")
		plugin.register(t)
		c.apply(podYAML("dev-b", c.tag+"-dev-b", "Always", devices, "sleep", "3600"))
		c.waitPod("dev-b", "Running", running)
		if got := c.process(c.tag + "-dev-a"); got != pid {
			t.Errorf("dev-a's process is %d after the restart, want %d still", got, pid)
		}
		if n := plugin.allocations.Load(); n != 2 {
			t.Errorf("Allocate was called %d times in all, want 2 (dev-a before the restart, dev-b after)", n)
		}
		if log := agent.stderr.String(); strings.Contains(log, "could not be restored") {
			t.Errorf("the restarted agent did not restore dev-a's resources:\n%s", tail(log, 10))
		}
		second := environ(t, c.process(c.tag+"-dev-b"))["E2E_DEVICES"]
		all := append(strings.Split(first, ","), strings.Split(second, ",")...)
		slices.Sort(all)
		if !slices.Equal(all, []string{"dev-0", "dev-1", "dev-2", "dev-3"}) {
			t.Errorf("dev-a has %q and dev-b %q; want all four devices between them", first, second)
		}
	})
}

// TestTopologyAffinityError runs an agent on the 4-NUMA fixture machine
// with the single-numa-node policy: a pod asking for 3 devices, when each
// NUMA node has 2, is rejected with TopologyAffinityError.
func TestTopologyAffinityError(t *testing.T) {
	needsCgroupV1Root(t)
	c := newResourcesCluster(t)
	root := t.TempDir()
	fixture, err := filepath.Abs("../../internal/agent/host/linux/testdata/fournuma")
	if err != nil {
		t.Fatal(err)
	}
	agent := startAgent(t, c.s, "numa-1", root, "--topology-root", fixture, "--topology-manager-policy", "single-numa-node")
	c.waitReady(agent, "numa-1")
	startDevicePlugin(t, root, "example.com/dev", map[string]int64{"dev-0": 0, "dev-1": 0, "dev-2": 1, "dev-3": 1})
	c.waitAllocatable("numa-1", "example.com/dev", 4)
	c.apply(podYAML("wide", c.tag+"-wide", "Never", "{limits: {example.com/dev: 3}}", "sleep", "3600"))
	p := c.waitPod("wide", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "TopologyAffinityError" || p.Status.Message != "Pod was rejected: Resources cannot be allocated with Topology locality" {
		t.Errorf("reason %q, message %q; want TopologyAffinityError and upstream's message", p.Status.Reason, p.Status.Message)
	}
	c.apply(podYAML("narrow", c.tag+"-narrow", "Never", "{limits: {example.com/dev: 2}}", "sleep", "3600"))
	c.waitPod("narrow", "Running", running)
	node, err := c.client.CoreV1().Nodes().Get(context.Background(), "numa-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := agentMetrics(t, c.s, node, root)
	if m["kubelet_topology_manager_admission_requests_total"] != 2 || m["kubelet_topology_manager_admission_errors_total"] != 1 || m["kubelet_topology_manager_admission_duration_ms_count"] != 2 {
		t.Errorf("admission metrics: requests %v, errors %v, timed %v; want 2, 1 and 2",
			m["kubelet_topology_manager_admission_requests_total"], m["kubelet_topology_manager_admission_errors_total"], m["kubelet_topology_manager_admission_duration_ms_count"])
	}
	t.Logf("admission: %.3f ms in all over %v admissions", m["kubelet_topology_manager_admission_duration_ms_sum"], m["kubelet_topology_manager_admission_duration_ms_count"])
}

// environ is a process's environment.
func environ(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range strings.Split(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// devicePlugin is a device plugin of the test's: it serves
// deviceplugin/v1beta1 on a socket beside the agent's kubelet.sock, lists
// its devices (ID -> NUMA node) once, and answers Allocate with
// E2E_DEVICES=<the IDs, comma-separated>.
type devicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	dir, socket, resource string
	devices               map[string]int64
	// allocations counts the containers Allocate was asked for.
	allocations atomic.Int64
}

func startDevicePlugin(t *testing.T, agentRoot, resource string, devices map[string]int64) *devicePlugin {
	t.Helper()
	p := &devicePlugin{dir: filepath.Join(agentRoot, "device-plugins"), socket: "e2e-dev.sock", resource: resource, devices: devices}
	ln, err := net.Listen("unix", filepath.Join(p.dir, p.socket))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	p.register(t)
	return p
}

// register registers the plugin with the agent (again, after a restart).
func (p *devicePlugin) register(t *testing.T) {
	t.Helper()
	eventually(t, "registering the device plugin", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		conn, err := grpc.NewClient("unix://"+filepath.Join(p.dir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
			Version: pluginapi.Version, Endpoint: p.socket, ResourceName: p.resource,
		})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

func (p *devicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *devicePlugin) ListAndWatch(_ *pluginapi.Empty, s grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	var list []*pluginapi.Device
	for _, id := range slices.Sorted(maps.Keys(p.devices)) {
		list = append(list, &pluginapi.Device{ID: id, Health: pluginapi.Healthy,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: p.devices[id]}}}})
	}
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (p *devicePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range r.ContainerRequests {
		p.allocations.Add(1)
		ids := slices.Sorted(slices.Values(cr.DevicesIds))
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"E2E_DEVICES": strings.Join(ids, ",")},
		})
	}
	return resp, nil
}

// swapOn makes a swap file of the test's own, switches it on, and switches
// it off and removes it when the test ends, even when it fails.
func swapOn(t *testing.T, size int64) {
	t.Helper()
	if _, err := exec.LookPath("mkswap"); err != nil {
		t.Skip("mkswap is not installed")
	}
	path := filepath.Join(t.TempDir(), "swapfile")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	// A swap file must have no holes: write it out.
	_, err = f.Write(make([]byte, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkswap", path).CombinedOutput(); err != nil {
		t.Fatalf("mkswap: %v\n%s", err, out)
	}
	if out, err := exec.Command("swapon", path).CombinedOutput(); err != nil {
		t.Skipf("this machine cannot switch a swap file on: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("swapoff", path).CombinedOutput(); err != nil {
			t.Errorf("swapoff %s: %v\n%s", path, err, out)
		}
	})
}

// meminfo is a /proc/meminfo field in bytes.
func meminfo(t *testing.T, field string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatalf("/proc/meminfo has no %s", field)
	return 0
}

// TestSwap switches a swap file of the test's on: an agent with the default
// failSwapOn refuses to start and says how to fix it; one with failSwapOn
// false and LimitedSwap reports the swap capacity, and a Burstable
// container's memory.memsw.limit_in_bytes is its limit plus its share of
// swap, (request / node memory) x node swap.
func TestSwap(t *testing.T) {
	needsCgroupV1Root(t)
	c := newResourcesCluster(t)
	swapOn(t, 64<<20)
	swapTotal := meminfo(t, "SwapTotal")

	refused := startAgent(t, c.s, "swap-1", t.TempDir())
	eventually(t, "the agent refusing to start", 30*time.Second, 50*time.Millisecond, func() (bool, string) {
		return refused.hasExited(), "still running"
	})
	const want = "running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"
	if log := refused.stderr.String(); !strings.Contains(log, want) || !strings.Contains(log, "failSwapOn: false") {
		t.Errorf("the agent's output does not say %q and how to fix it:\n%s", want, tail(log, 10))
	}

	agentRoot := t.TempDir()
	agent := startAgentConfig(t, c.s, "swap-1", agentRoot, "failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n")
	node := c.waitReady(agent, "swap-1")
	if sw := node.Status.NodeInfo.Swap; sw == nil || sw.Capacity == nil || *sw.Capacity != swapTotal {
		t.Errorf("nodeInfo.swap = %+v, want capacity %d", sw, swapTotal)
	}
	out := c.kubectl("get", "node", "swap-1", "-o", "jsonpath={.status.nodeInfo.swap.capacity}")
	if out.Stdout != strconv.FormatInt(swapTotal, 10) {
		t.Errorf("kubectl says swap capacity %q, want %d", out.Stdout, swapTotal)
	}

	if got, ok := agentMetrics(t, c.s, node, agentRoot)["node_swap_usage_bytes"]; !ok || got < 0 || got > float64(swapTotal) {
		t.Errorf("node_swap_usage_bytes = %v (present %v), want between 0 and %d", got, ok, swapTotal)
	}

	c.apply(podYAML("burstable", c.tag+"-burstable", "Always", "{requests: {memory: 64Mi}, limits: {memory: 128Mi}}", "sleep", "3600"))
	c.waitPod("burstable", "Running", running)
	pid := c.process(c.tag + "-burstable")
	memory := node.Status.Capacity.Memory().Value()
	swapLimit := int64(float64(64<<20) / float64(memory) * float64(swapTotal))
	if got := memoryCgroupFile(t, pid, "memory.limit_in_bytes"); got != strconv.Itoa(128<<20) {
		t.Errorf("memory.limit_in_bytes = %s, want %d", got, 128<<20)
	}
	// The kernel keeps a limit in whole pages, rounding down.
	page := int64(os.Getpagesize())
	if got, want := memoryCgroupFile(t, pid, "memory.memsw.limit_in_bytes"), strconv.FormatInt((128<<20+swapLimit)/page*page, 10); got != want {
		t.Errorf("memory.memsw.limit_in_bytes = %s, want %s (128Mi + %d of swap, in whole pages)", got, want, swapLimit)
	}
}
