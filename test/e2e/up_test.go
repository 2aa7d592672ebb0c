package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestUp measures `knode up` from exec to /readyz ok, on a fresh data
// directory (PKI generated, etcd created) and on a restart, and checks
// what it prints.
func TestUp(t *testing.T) {
	const runs = 3
	var cold, warm []time.Duration
	for i := range runs {
		dataDir := t.TempDir()
		for _, restart := range []bool{false, true} {
			var whileUp func([]string)
			if i == 0 && !restart {
				whileUp = func(out []string) { checkUpOutput(t, dataDir, out) }
			}
			elapsed := upOnce(t, dataDir, whileUp)
			if restart {
				warm = append(warm, elapsed)
			} else {
				cold = append(cold, elapsed)
			}
		}
	}
	t.Logf("knode up, exec to /readyz ok: median %s on a fresh data dir %v, median %s on a restart %v",
		median(cold), cold, median(warm), warm)
}

// upOnce runs `knode up` on dataDir until it is ready and has printed its
// three lines, calls whileUp (if not nil) with them, then stops it with
// SIGTERM. It returns the time from exec to the first /readyz ok.
func upOnce(t *testing.T, dataDir string, whileUp func(out []string)) time.Duration {
	t.Helper()
	port := freePort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	start := time.Now()
	p := startProcess(t, "up", "--data-dir", dataDir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--kubelet-port", "0", "--kubelet-address", "127.0.0.1", "--storage-dir", t.TempDir(), "--cgroup-root", testCgroupRoot(t))
	t.Cleanup(func() {
		p.kill()
		killContainers(filepath.Join(dataDir, "agent"))
	})
	if err := waitReady(url, filepath.Join(dataDir, "pki", "ca.crt"), p, readyTimeout); err != nil {
		t.Fatalf("knode up: %v\n--- stderr ---\n%s", err, tail(p.stderr.String(), 40))
	}
	elapsed := time.Since(start)
	if elapsed > 30*time.Second {
		t.Errorf("knode up took %s to answer /readyz ok; want well under 30s", elapsed)
	}

	// The lines are printed once the server is ready; give them a moment.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(lines(p.stdout.String())) < 3 {
		select {
		case <-deadline:
			t.Fatalf("knode up printed %q; want three lines once ready", p.stdout.String())
		case <-tick.C:
		}
	}
	out := lines(p.stdout.String())
	// The ready line comes once the local agent's node is Ready.
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := fmt.Sprintf("knode is up at %s; node %s is Ready", url, strings.ToLower(host))
	if out[0] != wantFirst {
		t.Errorf("knode up: first line %q, want %q", out[0], wantFirst)
	}
	if whileUp != nil {
		whileUp(out)
	}

	stopStart := time.Now()
	defer func() {
		t.Logf("knode up on %s: ready after %s, exited %s after SIGTERM", dataDir, elapsed, time.Since(stopStart))
	}()
	if !p.stop() {
		t.Errorf("knode up did not exit within %s of SIGTERM", stopTimeout)
	} else if p.err != nil {
		t.Errorf("knode up exited with %v after SIGTERM; want exit code 0\n--- stderr ---\n%s", p.err, tail(p.stderr.String(), 20))
	}
	return elapsed
}

// checkUpOutput checks the kubeconfig line and runs the suggested kubectl
// command.
func checkUpOutput(t *testing.T, dataDir string, out []string) {
	t.Helper()
	kubeconfig := filepath.Join(dataDir, "admin.kubeconfig")
	if len(out) < 3 || out[1] != "kubeconfig: "+kubeconfig {
		t.Fatalf("knode up: second line of %q, want %q", out, "kubeconfig: "+kubeconfig)
	}
	if _, err := os.Stat(kubeconfig); err != nil {
		t.Errorf("knode up named %s: %v", kubeconfig, err)
	}
	try, ok := strings.CutPrefix(out[2], "try: ")
	args := strings.Fields(try)
	if !ok || len(args) < 2 || args[0] != "kubectl" {
		t.Fatalf("knode up: third line %q, want a `try: kubectl ...` suggestion", out[2])
	}

	if !slices.Contains(args, kubeconfig) {
		t.Errorf("knode up: suggestion %q does not name the kubeconfig %s", try, kubeconfig)
	}

	// Run the suggestion against the running `knode up`.
	var version string
	for _, v := range slices.Backward(kubectlVersions) {
		if _, err := os.Stat(kubectlPath(v)); err == nil {
			version = v
			break
		}
	}
	if version == "" {
		t.Logf("no kubectl installed; not running %q", try)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath(version), args[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=")
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("running the suggested %q with kubectl %s: %v\n%s", try, version, err, res)
	}
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestKubeconfigAndVersionCommands checks `knode kubeconfig` and
// `knode version`.
func TestKubeconfigAndVersionCommands(t *testing.T) {
	s := startServer(t, serverOptions{})

	out, err := exec.Command(knodeBinary, "kubeconfig", "--data-dir", s.DataDir).Output()
	if err != nil {
		t.Fatalf("knode kubeconfig --data-dir %s: %v", s.DataDir, err)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatalf("knode kubeconfig printed no kubeconfig (%v):\n%s", err, out)
	}
	ctxName := cfg.CurrentContext
	kctx, ok := cfg.Contexts[ctxName]
	if !ok {
		t.Fatalf("knode kubeconfig: current-context %q is not defined:\n%s", ctxName, out)
	}
	if cluster := cfg.Clusters[kctx.Cluster]; cluster == nil || cluster.Server != s.URL || len(cluster.CertificateAuthorityData) == 0 {
		t.Errorf("knode kubeconfig: cluster %q = %+v, want server %s with CA data", kctx.Cluster, cluster, s.URL)
	}
	if user := cfg.AuthInfos[kctx.AuthInfo]; user == nil || len(user.ClientCertificateData) == 0 || len(user.ClientKeyData) == 0 {
		t.Errorf("knode kubeconfig: user %q has no client certificate", kctx.AuthInfo)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(out)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("listing nodes with the printed kubeconfig: %v", err)
	}

	out, err = exec.Command(knodeBinary, "version").Output()
	if err != nil {
		t.Fatalf("knode version: %v", err)
	}
	if !strings.HasPrefix(string(out), "knode ") || !strings.Contains(string(out), "Kubernetes API v1.") {
		t.Errorf("knode version printed %q, want `knode VERSION (Kubernetes API v1.N...)`", out)
	}

	// Without a data dir that holds credentials it refuses, naming the dir.
	empty := t.TempDir()
	cmd := exec.Command(knodeBinary, "kubeconfig", "--data-dir", empty)
	res, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(res), empty) {
		t.Errorf("knode kubeconfig on an empty dir: err %v, output %q; want a failure naming %s", err, res, empty)
	}
}
