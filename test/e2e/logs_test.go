package e2e

import (
	"bufio"
	"context"
	"strings"
	"testing"
	"time"
)

// TestKubectlLogs reads a process container's log through the API server
// and the agent with real kubectl: all of it, its tail, following it as
// it grows, and the errors for a container that is not there and for
// timestamps, which the process runtime's log files do not keep.
func TestKubectlLogs(t *testing.T) {
	c := newResourcesCluster(t)
	// The API server reaches the agent at its node IP, on a bridge of the
	// test's own.
	ip := testBridge(t)
	agent := startAgent(t, c.s, "logs-1", t.TempDir(), "--node-ip", ip, "--address", ip)
	c.waitReady(agent, "logs-1")
	c.apply(podYAML("talker", c.tag+"-talker", "Always", "{}", "sh", "-c",
		`echo one; echo two; echo three; i=0; while true; do i=$((i+1)); echo "tick $i"; sleep 0.2; done`))
	c.waitPod("talker", "Running", running)

	var out string
	eventually(t, "the first lines in kubectl logs", 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		res := kubectlWith(t, c.version, c.s.Home, c.s.Kubeconfig, "logs", "talker")
		out = res.Stdout
		return strings.HasPrefix(out, "one\ntwo\nthree\ntick 1\n"), res.String()
	})
	tail := c.kubectl("logs", "talker", "--tail=1").Stdout
	if n := strings.Count(tail, "\n"); n != 1 || !strings.HasPrefix(tail, "tick ") {
		t.Errorf("kubectl logs --tail=1 = %q, want one tick line", tail)
	}
	limited := c.kubectl("logs", "talker", "--limit-bytes=4").Stdout
	if limited != "one\n" {
		t.Errorf("kubectl logs --limit-bytes=4 = %q, want %q", limited, "one\n")
	}

	// kubectl logs -f prints the lines the container writes after it began.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	follow := c.s.kubectlCommand(ctx, c.version, "logs", "-f", "talker", "--tail=1")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = follow.Wait() }()
	sc := bufio.NewScanner(stdout)
	var seen []string
	for len(seen) < 4 && sc.Scan() {
		seen = append(seen, sc.Text())
	}
	if len(seen) < 4 {
		t.Fatalf("kubectl logs -f printed %q, then stopped: %v", seen, sc.Err())
	}
	for i := 1; i < len(seen); i++ {
		if !strings.HasPrefix(seen[i], "tick ") || seen[i] == seen[i-1] {
			t.Errorf("kubectl logs -f printed %q; want new tick lines", seen)
			break
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "talker", "-c", "nope"}, `container nope is not valid for pod talker`},
		{[]string{"logs", "talker", "--timestamps"}, "timestamps"},
		{[]string{"logs", "nobody"}, `pods "nobody" not found`},
	} {
		res := kubectlWith(t, c.version, c.s.Home, c.s.Kubeconfig, tc.args...)
		if res.ExitCode == 0 || !strings.Contains(res.Stderr, tc.want) {
			t.Errorf("kubectl %v: exit %d, stderr %q; want a failure saying %q", tc.args, res.ExitCode, res.Stderr, tc.want)
		}
	}
}
