//go:build linux

package process

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/runtime"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// waitTimeout bounds every wait on a real process.
const waitTimeout = 20 * time.Second

func newRuntime(t *testing.T, clk clock.WithTicker, root string) *Runtime {
	t.Helper()
	return newRuntimeWith(t, Config{RootDir: root, Clock: clk})
}

// newRuntimeWith builds a Runtime from cfg, with a temporary RootDir and a
// quiet logger unless cfg sets them, and kills its containers when the
// test ends.
func newRuntimeWith(t *testing.T, cfg Config) *Runtime {
	t.Helper()
	if cfg.RootDir == "" {
		cfg.RootDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killAndSettle(t, r) })
	return r
}

// killAndSettle kills r's containers and waits until it recorded their
// exits, so that nothing writes to the test's directories afterwards. A
// superseded runtime records nothing: the newer one does.
func killAndSettle(t *testing.T, r *Runtime) {
	r.KillAll()
	if r.superseded() {
		return
	}
	timeout := time.After(waitTimeout)
	for {
		running := false
		for _, st := range r.ListPods() {
			running = running || st.Running()
		}
		if !running {
			return
		}
		select {
		case <-r.Changes():
		case <-timeout:
			t.Errorf("containers still running after KillAll: %+v", r.ListPods())
			return
		}
	}
}

func shPod(uid string, policy corev1.RestartPolicy, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID(uid)},
		Spec: corev1.PodSpec{
			RestartPolicy: policy,
			Containers: []corev1.Container{{
				Name: "main", Image: "ignored",
				Command: []string{"sh", "-c", script},
				Env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"},
				}}},
			}},
		},
	}
}

// waitFor waits, on the runtime's Changes, until cond holds for the pod.
func waitFor(t *testing.T, r *Runtime, uid types.UID, what string, cond func(runtime.ContainerStatus) bool) runtime.ContainerStatus {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		st, err := r.PodStatus(uid)
		if err != nil {
			t.Fatal(err)
		}
		if c := st.Containers[0]; cond(c) {
			return c
		}
		select {
		case <-r.Changes():
		case <-timeout:
			t.Fatalf("timed out waiting for %s; last status %+v", what, st.Containers[0])
		}
	}
}

func terminated(c runtime.ContainerStatus) bool { return c.State.Terminated != nil }

// readyFifo makes a named pipe in dir that the container writes to once it
// is ready; the returned function blocks until it did.
func readyFifo(t *testing.T, dir string) (string, func()) {
	t.Helper()
	path := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			f, err := os.Open(path) // blocks until the writer opens it
			if err == nil {
				_, err = io.ReadAll(f)
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("container never became ready")
		}
	}
}

func TestRunsCommandWithEnvAndLogs(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	pod := shPod("u1", corev1.RestartPolicyNever, `echo "hello $POD from $(pwd)"; echo oops >&2; exit 0`)
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "exit", terminated)
	if c.State.Terminated.ExitCode != 0 || c.State.Terminated.Reason != runtime.ReasonCompleted {
		t.Errorf("terminated = %+v, want exit 0 Completed", c.State.Terminated)
	}
	dir := filepath.Join(r.podsDir, "u1", "main")
	if c.LogPath != filepath.Join(dir, "0.log") {
		t.Errorf("LogPath = %q", c.LogPath)
	}
	data, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello p from " + dir + "\noops\n"; string(data) != want {
		t.Errorf("log = %q, want %q", data, want)
	}
}

func TestSIGTERMReachesTheProcessGroup(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	fifo, waitReady := readyFifo(t, t.TempDir())
	pod := shPod("u1", corev1.RestartPolicyAlways, `trap "echo got TERM; exit 0" TERM; sleep 100 & echo > `+fifo+`; wait`)
	ctx := context.Background()
	if err := r.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitReady()
	if err := r.StopPod(ctx, pod.UID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "exit", terminated)
	if c.State.Terminated.ExitCode != 0 {
		t.Errorf("exit code = %d, want 0 from the trap", c.State.Terminated.ExitCode)
	}
	data, _ := os.ReadFile(c.LogPath)
	if !strings.Contains(string(data), "got TERM") {
		t.Errorf("log = %q, want the trap's message", data)
	}
	st, _ := r.PodStatus(pod.UID)
	if !st.Stopped() || c.RestartCount != 0 {
		t.Errorf("stopped = %v, restarts = %d: a stopped pod must not restart", st.Stopped(), c.RestartCount)
	}
	if err := r.RemovePod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.podsDir, "u1")); !os.IsNotExist(err) {
		t.Errorf("pod directory still there after RemovePod: %v", err)
	}
}

func TestSIGKILLAfterGrace(t *testing.T) {
	tests := []struct {
		name string
		// clock and how the grace period passes
		clk  func() clock.WithTicker
		pass func(clock.WithTicker)
	}{
		{"fake clock", func() clock.WithTicker { return testingclock.NewFakeClock(t0) }, func(c clock.WithTicker) {
			c.(*testingclock.FakeClock).Step(30 * time.Second)
		}},
		{"real clock", func() clock.WithTicker { return clock.RealClock{} }, func(clock.WithTicker) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := tt.clk()
			r := newRuntime(t, clk, "")
			fifo, waitReady := readyFifo(t, t.TempDir())
			pod := shPod("u1", corev1.RestartPolicyAlways, `trap "" TERM; sleep 100 & echo > `+fifo+`; wait`)
			ctx := context.Background()
			if err := r.StartPod(ctx, pod); err != nil {
				t.Fatal(err)
			}
			waitReady()
			grace := 30 * time.Second
			if _, real := clk.(clock.RealClock); real {
				grace = time.Second
			}
			if err := r.StopPod(ctx, pod.UID, grace); err != nil {
				t.Fatal(err)
			}
			if err := r.RemovePod(ctx, pod.UID); !errors.Is(err, runtime.ErrPodRunning) {
				t.Errorf("RemovePod during grace = %v, want ErrPodRunning", err)
			}
			tt.pass(clk)
			c := waitFor(t, r, pod.UID, "kill", terminated)
			if c.State.Terminated.ExitCode != 137 {
				t.Errorf("exit code = %d, want 137 (SIGKILL), not 143 (SIGTERM)", c.State.Terminated.ExitCode)
			}
		})
	}
}

func TestRestartWithBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	r := newRuntime(t, clk, "")
	pod := shPod("u1", corev1.RestartPolicyOnFailure, `echo run; exit 3`)
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// First failure: restarted at once; second: CrashLoopBackOff for 10 s
	// of the (fake) clock.
	c := waitFor(t, r, pod.UID, "back-off", func(c runtime.ContainerStatus) bool {
		return c.State.Waiting != nil && c.State.Waiting.Reason == runtime.ReasonCrashLoopBackOff
	})
	if c.RestartCount != 1 || c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.ExitCode != 3 {
		t.Fatalf("in back-off: restarts %d, last state %+v", c.RestartCount, c.LastTerminationState)
	}
	if want := "back-off 10s restarting failed container=main pod=p_default(u1)"; c.State.Waiting.Message != want {
		t.Errorf("message = %q, want %q", c.State.Waiting.Message, want)
	}
	clk.Step(10 * time.Second)
	c = waitFor(t, r, pod.UID, "third run", func(c runtime.ContainerStatus) bool { return c.RestartCount == 2 })
	if !strings.HasSuffix(c.LogPath, "2.log") {
		t.Errorf("LogPath = %q, want the third run's log", c.LogPath)
	}
	for _, old := range []string{"0.log", "1.log"} {
		_, err := os.Stat(filepath.Join(filepath.Dir(c.LogPath), old))
		if old == "0.log" && !os.IsNotExist(err) {
			t.Errorf("%s kept; only the previous run's log should be", old)
		}
		if old == "1.log" && err != nil {
			t.Errorf("previous run's log: %v", err)
		}
	}
}

func TestContainersThatCannotStart(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{
			{Name: "image-only", Image: "nginx"},
			{Name: "missing", Command: []string{"no-such-command-knode"}},
		}},
	}
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	st, _ := r.PodStatus(pod.UID)
	if w := st.Containers[0].State.Waiting; w == nil || w.Reason != runtime.ReasonCreateContainerConfigError {
		t.Errorf("image-only: %+v, want CreateContainerConfigError", st.Containers[0].State)
	}
	term := st.Containers[1].State.Terminated
	if term == nil || term.Reason != runtime.ReasonStartError || term.ExitCode != 128 ||
		term.Message != `exec: "no-such-command-knode": executable file not found in $PATH` {
		t.Errorf("missing: %+v, want StartError", st.Containers[1].State)
	}
}
