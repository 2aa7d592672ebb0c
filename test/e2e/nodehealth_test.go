package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// startAgent runs `knode agent` for node name with its own identity and a
// 4 s Lease (renewed every second), and returns it running; extra flags
// are passed on.
func startAgent(t testing.TB, s *server, name, rootDir string, extra ...string) *process {
	t.Helper()
	return startAgentConfig(t, s, name, rootDir, "", extra...)
}

// startAgentConfig is startAgent with config appended to the agent's
// KubeletConfiguration.
func startAgentConfig(t testing.TB, s *server, name, rootDir, config string, extra ...string) *process {
	t.Helper()
	var kubeconfig bytes.Buffer
	cmd := exec.Command(knodeBinary, "kubeconfig", "--data-dir", s.DataDir, "--node", name)
	cmd.Stdout = &kubeconfig
	if err := cmd.Run(); err != nil {
		t.Fatalf("knode kubeconfig --node %s: %v", name, err)
	}
	kc := writeFile(t, name+".kubeconfig", kubeconfig.String())
	cfg := writeFile(t, name+"-config.yaml", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nnodeLeaseDurationSeconds: 4\n"+config)
	// The agent's cgroups go under a root of the test's own.
	args := []string{"agent", "--kubeconfig", kc, "--root-dir", rootDir, "--hostname-override", name, "--config", cfg, "--address", "127.0.0.1", "--port", "0", "--storage-dir", s.StorageDir}
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--cgroup-root") }) {
		args = append(args, "--cgroup-root", testCgroupRoot(t))
	}
	p := startProcess(t, append(args, extra...)...)
	t.Cleanup(func() {
		p.stop()
		killContainers(rootDir)
		// A failed test can leave its pods' volumes mounted; detach them
		// so the temp dir goes.
		unmountUnder(t, rootDir)
		if t.Failed() {
			t.Logf("--- agent %s log (tail) ---\n%s", name, tail(p.stderr.String(), 20))
		}
	})
	return p
}

func nodeReady(n *corev1.Node) (corev1.ConditionStatus, string) {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) *corev1.Taint {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].Key == key && n.Spec.Taints[i].Effect == effect {
			return &n.Spec.Taints[i]
		}
	}
	return nil
}

// TestNodeHealth kills one of two agents and follows what the controllers
// do with short settings: the node goes Unknown, is tainted unreachable,
// its pods are evicted by their tolerations, and a restarted agent brings
// it back and clears the taints. Both nodes get distinct pod CIDRs.
func TestNodeHealth(t *testing.T) {
	s := startServer(t, serverOptions{Args: []string{
		"--node-monitor-grace-period=4s", "--node-monitor-period=1s",
		"--default-unreachable-toleration-seconds=6",
		"--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16",
	}})
	client := s.Clientset(t)
	ctx := context.Background()
	// The agents only register, report and renew: this test sets its pods'
	// status itself, as an agent running them would.
	rootA := t.TempDir()
	agentA := startAgent(t, s, "node-a", rootA, "--runtime=none")
	startAgent(t, s, "node-b", t.TempDir(), "--runtime=none")

	getNode := func(name string) *corev1.Node {
		t.Helper()
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, name := range []string{"node-a", "node-b"} {
		eventually(t, name+" Ready with a pod CIDR", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			status, _ := nodeReady(n)
			return status == corev1.ConditionTrue && n.Spec.PodCIDR != "", string(status) + " " + n.Spec.PodCIDR
		})
	}
	if a, b := getNode("node-a").Spec.PodCIDR, getNode("node-b").Spec.PodCIDR; a == b {
		t.Errorf("node-a and node-b share pod CIDR %s", a)
	}

	// Pods bound to node-a: one with the default tolerations (6 s here), one
	// tolerating unreachable for 2 s, one tolerating it forever.
	unreachable := corev1.Toleration{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
	pods := map[string][]corev1.Toleration{
		"defaults": nil,
		"two-seconds": {func() corev1.Toleration {
			tol := unreachable
			tol.TolerationSeconds = ptr.To(int64(2))
			return tol
		}()},
		"forever": {unreachable},
	}
	for name, tolerations := range pods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       corev1.PodSpec{NodeName: "node-a", Tolerations: tolerations, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Report them running and Ready, as an agent running them would
		// (the controller flips an existing Ready condition to False).
		created.Status.Phase = corev1.PodRunning
		created.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	agentA.kill()
	killed := time.Now()
	// Grace (4 s) plus a monitor period (1 s), with slack for a loaded machine.
	eventually(t, "node-a Ready Unknown", 15*time.Second, 100*time.Millisecond, func() (bool, string) {
		status, reason := nodeReady(getNode("node-a"))
		return status == corev1.ConditionUnknown && reason == "NodeStatusUnknown", string(status) + " " + reason
	})
	unknownAfter := time.Since(killed)
	t.Logf("node-a Ready Unknown %s after its agent was killed", unknownAfter.Round(100*time.Millisecond))
	if unknownAfter < 3*time.Second {
		t.Errorf("node-a went Unknown %s after the kill, before its 4 s grace period", unknownAfter)
	}
	var noExecute *corev1.Taint
	eventually(t, "node-a tainted unreachable", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		n := getNode("node-a")
		noExecute = hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
		return noExecute != nil && hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule) != nil, strings.TrimSpace(strings.Join(taintStrings(n), ","))
	})
	if noExecute.TimeAdded == nil {
		t.Fatalf("the unreachable NoExecute taint has no timeAdded")
	}
	if status, _ := nodeReady(getNode("node-b")); status != corev1.ConditionTrue {
		t.Errorf("node-b is %s, want it to stay Ready", status)
	}
	// The controller marks the pods of a node that is not Ready not Ready.
	eventually(t, "pods on node-a marked not Ready", 10*time.Second, 100*time.Millisecond, func() (bool, string) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "forever", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionFalse, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})

	// Each pod goes when its toleration runs out; the one that tolerates
	// forever stays. Deleted pods bound to a dead node stay Terminating.
	deletedAt := func(name string) *metav1.Time {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return p.DeletionTimestamp
	}
	evicted := map[string]time.Duration{}
	eventually(t, "pods evicted", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		for _, name := range []string{"two-seconds", "defaults"} {
			if _, done := evicted[name]; !done && deletedAt(name) != nil {
				evicted[name] = time.Since(noExecute.TimeAdded.Time)
			}
		}
		return len(evicted) == 2, strings.Join(mapKeys(evicted), ",")
	})
	t.Logf("evicted after the NoExecute taint: %v", evicted)
	if evicted["two-seconds"] < time.Second || evicted["two-seconds"] > evicted["defaults"] {
		t.Errorf("pod tolerating 2 s went %s after the taint, the default one (6 s) %s", evicted["two-seconds"], evicted["defaults"])
	}
	if evicted["defaults"] < 5*time.Second {
		t.Errorf("pod with the default 6 s toleration went %s after the taint", evicted["defaults"])
	}
	if deletedAt("forever") != nil {
		t.Errorf("the pod that tolerates unreachable forever was evicted")
	}

	// The agent comes back: Ready again, taints removed.
	startAgent(t, s, "node-a", rootA, "--runtime=none")
	eventually(t, "node-a Ready and untainted", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		n := getNode("node-a")
		status, _ := nodeReady(n)
		return status == corev1.ConditionTrue && len(n.Spec.Taints) == 0, string(status) + " " + strings.Join(taintStrings(n), ",")
	})
}

func taintStrings(n *corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.ToString())
	}
	return out
}

func mapKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
