package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestKubectlExecPortForward: kubectl exec and port-forward reach a
// process container through the API server and the agent, with the oldest
// and the newest kubectl (SPDY, and WebSocket first from 1.30 on); and a
// failing liveness probe restarts it with the Unhealthy event.
func TestKubectlExecPortForward(t *testing.T) {
	c := newResourcesCluster(t)
	ip := testBridge(t)
	agent := startAgent(t, c.s, "exec-1", t.TempDir(), "--node-ip", ip, "--address", ip)
	c.waitReady(agent, "exec-1")
	port := freePort(t)
	// The pod serves HTTP on the host's loopback (process pods share the
	// host's network), from a directory of the test's.
	dir := filepath.Dir(writeFile(t, "index.html", "served by the pod\n"))
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.apply(podYAML("web", c.tag+"-web", "Always", "{}", "python3", "-m", "http.server", fmt.Sprint(port), "--bind", "127.0.0.1", "--directory", dir))
	c.waitPod("web", "Running", running)

	versions := []string{c.version}
	if v := kubectlVersions[0]; v != c.version && kubectlInstalled(v) {
		versions = append(versions, v)
	}
	for _, v := range versions {
		res := kubectlWith(t, v, c.s.Home, c.s.Kubeconfig, "exec", "web", "--", "sh", "-c", `echo "$HOSTNAME in $PWD"; echo oops >&2; exit 3`)
		if res.ExitCode != 3 || !strings.HasPrefix(res.Stdout, "web in ") || !strings.Contains(res.Stderr, "oops") {
			t.Errorf("kubectl %s exec: %s", v, res)
		}
		in := kubectlStdin(t, v, c.s, "typed through stdin\n", "exec", "-i", "web", "--", "cat")
		if in != "typed through stdin\n" {
			t.Errorf("kubectl %s exec -i cat printed %q", v, in)
		}
	}
	// A node's identity may not exec (the node authorizer), nor reach the
	// agent's exec without credentials.
	res := kubectlWith(t, c.version, c.s.Home, c.s.Kubeconfig, "exec", "web", "--as", "system:node:exec-1", "--as-group", "system:nodes", "--", "true")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, `cannot create resource "pods/exec"`) {
		t.Errorf("a node's kubectl exec: %s", res)
	}

	// kubectl port-forward to the pod's port.
	local := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pf := c.s.kubectlCommand(ctx, c.version, "port-forward", "pod/web", fmt.Sprintf("%d:%d", local, port))
	stdout, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = pf.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, fmt.Sprintf("Forwarding from 127.0.0.1:%d -> %d", local, port)) {
		t.Fatalf("kubectl port-forward said %q, %v", line, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/index.html", local))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "served by the pod\n" {
		t.Errorf("through kubectl port-forward: %d %q", resp.StatusCode, body)
	}

	// A liveness probe that fails restarts the container, with upstream's
	// events.
	c.apply(`apiVersion: v1
kind: Pod
metadata:
  name: sick
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    command: ["sleep", "600"]
    env:
    - {name: ` + markerEnv + `, value: "` + c.tag + `-sick"}
    livenessProbe:
      exec: {command: ["sh", "-c", "echo not well; exit 1"]}
      periodSeconds: 1
      failureThreshold: 2
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`)
	eventually(t, "a restart after the liveness probe failed", 60*time.Second, 200*time.Millisecond, func() (bool, string) {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), "sick", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) == 0 {
			return false, fmt.Sprint(err)
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount >= 1, fmt.Sprintf("restarts %d, state %+v", cs.RestartCount, cs.State)
	})
	events, err := c.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=sick"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range events.Items {
		seen = append(seen, e.Type+" "+e.Reason+" "+e.Message)
	}
	for _, want := range []string{
		corev1.EventTypeWarning + " Unhealthy Liveness probe failed: not well",
		corev1.EventTypeNormal + " Killing Container main failed liveness probe, will be restarted",
	} {
		found := false
		for _, s := range seen {
			found = found || strings.HasPrefix(s, want)
		}
		if !found {
			t.Errorf("no event %q among %q", want, seen)
		}
	}
}

// kubectlInstalled reports whether kubectl version is installed.
func kubectlInstalled(version string) bool {
	_, err := os.Stat(kubectlPath(version))
	return err == nil
}

// kubectlStdin runs kubectl version with args against s, input on its
// stdin, and returns its stdout; a failure fails the test.
func kubectlStdin(t testing.TB, version string, s *server, input string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := s.kubectlCommand(ctx, version, args...)
	cmd.Stdin = strings.NewReader(input)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl %s %v: %v\n%s", version, args, err, stderr.String())
	}
	return string(out)
}
