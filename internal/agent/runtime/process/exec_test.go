//go:build linux

package process

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/runtime"
)

func running(c runtime.ContainerStatus) bool { return c.State.Running != nil }

// Exec runs beside the container with its environment and working
// directory, passes stdin through, keeps stdout and stderr apart, and
// reports the exit code; with a terminal, both streams arrive on it.
func TestExec(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	pod := shPod("ex", corev1.RestartPolicyNever, "sleep 600")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, pod.UID, "running", running)
	ctx := context.Background()

	var out, errOut bytes.Buffer
	code, err := r.Exec(ctx, pod.UID, "main", []string{"sh", "-c", `echo "$POD in $(pwd)"; cat; echo bad >&2; exit 3`},
		runtime.ExecStreams{Stdin: strings.NewReader("from stdin\n"), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	dir := r.podsDir + "/ex/main"
	if code != 3 || out.String() != "p in "+dir+"\nfrom stdin\n" || errOut.String() != "bad\n" {
		t.Errorf("exec: code %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}

	out.Reset()
	code, err = r.Exec(ctx, pod.UID, "main", []string{"sh", "-c", "tty >/dev/null && echo on-a-terminal; echo err >&2"},
		runtime.ExecStreams{Stdout: &out, TTY: true})
	if err != nil || code != 0 {
		t.Fatalf("exec with a terminal: %d %v", code, err)
	}
	if got := strings.ReplaceAll(out.String(), "\r\n", "\n"); got != "on-a-terminal\nerr\n" {
		t.Errorf("terminal output %q", got)
	}

	if _, err := r.Exec(ctx, pod.UID, "main", []string{"no-such-command-here"}, runtime.ExecStreams{Stdout: &out}); err == nil || !strings.Contains(err.Error(), "no-such-command-here") {
		t.Errorf("a missing command: %v", err)
	}
	if _, err := r.Exec(ctx, pod.UID, "other", []string{"true"}, runtime.ExecStreams{Stdout: &out}); err == nil || !errors.Is(err, runtime.ErrContainerNotFound) {
		t.Errorf("exec in a container the pod lacks: %v, want ErrContainerNotFound", err)
	}
	if _, err := r.Exec(ctx, "nope", "main", []string{"true"}, runtime.ExecStreams{Stdout: &out}); !errors.Is(err, runtime.ErrPodNotFound) {
		t.Errorf("exec in an unknown pod: %v", err)
	}

	// A session whose context ends is killed.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		code, _ := r.Exec(cctx, pod.UID, "main", []string{"sleep", "600"}, runtime.ExecStreams{Stdout: io.Discard})
		done <- code
	}()
	cancel()
	select {
	case code := <-done:
		if code != 137 {
			t.Errorf("a cancelled exec exited %d, want 137", code)
		}
	case <-time.After(waitTimeout):
		t.Fatal("a cancelled exec kept running")
	}
}

// A stopped container cannot be exec'd into.
func TestExecNotRunning(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	pod := shPod("done", corev1.RestartPolicyNever, "exit 0")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, pod.UID, "exit", terminated)
	_, err := r.Exec(context.Background(), pod.UID, "main", []string{"true"}, runtime.ExecStreams{Stdout: io.Discard})
	var nr runtime.ErrContainerNotRunning
	if !errors.As(err, &nr) || err.Error() != "container main is not running" {
		t.Errorf("exec in an ended container: %v", err)
	}
}

// Port-forward reaches the host's port, which is the pod's.
func TestPortForward(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	pod := shPod("pf", corev1.RestartPolicyNever, "sleep 600")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line := make([]byte, 5)
		if _, err := io.ReadFull(c, line); err == nil {
			_, _ = c.Write(append([]byte("echo:"), line...))
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	client, server := net.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- r.PortForward(context.Background(), pod.UID, int32(port), server) }()
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 10)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "echo:hello" {
		t.Fatalf("forwarded %q, %v", got, err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("PortForward: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("PortForward did not end when the port closed")
	}
	client.Close()

	// A closed port is an error.
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	cport := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	c2, s2 := net.Pipe()
	defer c2.Close()
	if err := r.PortForward(context.Background(), pod.UID, int32(cport), s2); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a closed port: %v", err)
	}
}

// KillContainer ends the current run, which the restart policy restarts;
// the given reason stands in for the exit's own. A run that ignores
// SIGTERM is killed once grace has passed on the clock.
func TestKillContainer(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	r := newRuntime(t, clk, "")
	fifo, ready := readyFifo(t, t.TempDir())
	pod := shPod("kill", corev1.RestartPolicyAlways, "trap '' TERM; [ -p "+fifo+" ] && echo > "+fifo+"; rm -f "+fifo+"; sleep 600")
	ctx := context.Background()
	if err := r.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ready()
	if err := r.KillContainer(ctx, pod.UID, "main", 30*time.Second, "", ""); err != nil {
		t.Fatal(err)
	}
	// SIGTERM is ignored: the run goes on until grace has passed.
	st, _ := r.PodStatus(pod.UID)
	if st.Containers[0].State.Running == nil {
		t.Fatalf("the run ended before grace: %+v", st.Containers[0])
	}
	for !clk.HasWaiters() {
		runtimeGosched()
	}
	clk.Step(30 * time.Second)
	c := waitFor(t, r, pod.UID, "a restart", func(c runtime.ContainerStatus) bool { return c.RestartCount == 1 && c.State.Running != nil })
	if last := c.LastTerminationState.Terminated; last == nil || last.ExitCode != 137 || last.Reason != runtime.ReasonError {
		t.Errorf("last termination %+v, want 137 Error", last)
	}
	if err := r.KillContainer(ctx, pod.UID, "main", 0, "Probed", "failed liveness"); err != nil {
		t.Fatal(err)
	}
	// The second restart waits out the back-off on the fake clock.
	c = waitFor(t, r, pod.UID, "the second end", func(c runtime.ContainerStatus) bool {
		return c.LastTerminationState.Terminated != nil && c.LastTerminationState.Terminated.Reason == "Probed" || c.State.Terminated != nil && c.State.Terminated.Reason == "Probed"
	})
	end := c.LastTerminationState.Terminated
	if end == nil || end.Reason != "Probed" {
		end = c.State.Terminated
	}
	if end.ExitCode != 137 || end.Message != "failed liveness" {
		t.Errorf("end %+v, want 137 Probed \"failed liveness\"", end)
	}
	if err := r.KillContainer(ctx, pod.UID, "nope", 0, "", ""); err == nil || !errors.Is(err, runtime.ErrContainerNotFound) {
		t.Errorf("killing a container the pod lacks: %v, want ErrContainerNotFound", err)
	}
	if err := r.KillContainer(ctx, "ghost", "main", 0, "", ""); !errors.Is(err, runtime.ErrPodNotFound) {
		t.Errorf("killing in an unknown pod: %v", err)
	}
}

func runtimeGosched() { goruntime.Gosched() }
