//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/runtime"
)

// The tests here play an agent restart inside one process: a second
// Runtime over the first one's root directory. The first one is abandoned
// as it is (its processes keep running; it only reaps them, since the
// second one's owner token supersedes it), as if its agent had got
// SIGKILL.

// waitPod waits, on the runtime's Changes, until cond holds for the pod.
func waitPod(t *testing.T, r *Runtime, uid types.UID, what string, cond func(runtime.PodStatus) bool) runtime.PodStatus {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		st, err := r.PodStatus(uid)
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		select {
		case <-r.Changes():
		case <-timeout:
			t.Fatalf("timed out waiting for %s; last status %+v", what, st)
		}
	}
}

func allRunning(st runtime.PodStatus) bool {
	for _, c := range st.Containers {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// pidOf reads a container's pid file.
func pidOf(t *testing.T, root string, uid types.UID, container string) (int, uint64) {
	t.Helper()
	pid, start, ok := readPidFile(filepath.Join(root, "pods", string(uid), container, pidFile))
	if !ok {
		t.Fatalf("no pid file for %s/%s", uid, container)
	}
	return pid, start
}

// waitExit waits until process pid (opened as a pidfd before it could
// exit) has exited.
func waitExit(t *testing.T, pidfd int) {
	t.Helper()
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int(waitTimeout/time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("timed out waiting for the process to be killed")
	}
}

func pidfdOf(t *testing.T, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// writeFifo opens the named pipe path for writing (which blocks until the
// container opens it for reading), writes a line and closes it.
func writeFifo(t *testing.T, path string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("go\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the container never opened " + path)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestNewAdoptsRunningContainers(t *testing.T) {
	root, marks := t.TempDir(), t.TempDir()
	old := newRuntime(t, testingclock.NewFakeClock(t0), root)
	fifoMain, readyMain := readyFifo(t, t.TempDir())
	fifoFlaky, readyFlaky := readyFifo(t, t.TempDir())
	// Each container, once ready, waits; on SIGTERM it says so in its log
	// and in a marker file, and exits 0. flaky fails its first run.
	onTerm := func(name string) string {
		return `trap "echo got TERM; echo ` + name + ` > ` + filepath.Join(marks, name+".term") + `; exit 0" TERM; `
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{
			{Name: "main", Command: []string{"sh", "-c", onTerm("main") + `echo started; sleep 1000 & echo > ` + fifoMain + `; wait`}},
			{Name: "flaky", Command: []string{"sh", "-c", `ran=` + filepath.Join(marks, "flaky.ran") + `; if [ ! -e $ran ]; then touch $ran; echo first run; exit 1; fi; ` +
				onTerm("flaky") + `echo second run; sleep 1000 & echo > ` + fifoFlaky + `; wait`}},
		}},
	}
	ctx := context.Background()
	if err := old.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	readyMain()
	readyFlaky()
	before := waitPod(t, old, pod.UID, "both running, flaky restarted once", func(st runtime.PodStatus) bool {
		return allRunning(st) && st.Containers[1].RestartCount == 1
	})
	mainPid, mainStart := pidOf(t, root, pod.UID, "main")
	flakyPid, flakyStart := pidOf(t, root, pod.UID, "flaky")

	// The agent restarts: a new Runtime, an hour later by its clock.
	r := newRuntime(t, testingclock.NewFakeClock(t0.Add(time.Hour)), root)
	after, err := r.PodStatus(pod.UID)
	if err != nil {
		t.Fatalf("the pod was not adopted: %v", err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("status after the restart (-before +after):\n%s", diff)
	}
	if got := r.ListPods(); len(got) != 1 || got[0].UID != pod.UID {
		t.Errorf("ListPods = %+v, want the adopted pod", got)
	}
	for _, c := range []struct {
		name       string
		pid        int
		start      uint64
		id         string
		restarts   int32
		finishedAt time.Time
	}{
		{"main", mainPid, mainStart, "process://u1/main/0", 0, time.Time{}},
		{"flaky", flakyPid, flakyStart, "process://u1/flaky/1", 1, t0},
	} {
		if pid, start := pidOf(t, root, pod.UID, c.name); pid != c.pid || start != c.start || !sameProcess(pid, start) {
			t.Errorf("%s: pid file %d %d, alive %v; want the running %d", c.name, pid, start, sameProcess(pid, start), c.pid)
		}
		cs := after.Containers[0]
		if c.name == "flaky" {
			cs = after.Containers[1]
		}
		if cs.ID != c.id || cs.RestartCount != c.restarts || cs.State.Running == nil || !cs.State.Running.StartedAt.Time.Equal(t0) {
			t.Errorf("%s: id %q, restarts %d, state %+v; want %q, %d, running since %v", c.name, cs.ID, cs.RestartCount, cs.State, c.id, c.restarts, t0)
		}
	}
	if last := after.Containers[1].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.ContainerID != "process://u1/flaky/0" {
		t.Errorf("flaky's last termination = %+v, want the first run's exit 1", last)
	}

	// The pod worker starts the pods it sees: for an adopted pod, nothing.
	if err := r.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.PodStatus(pod.UID); !cmp.Equal(before, st) {
		t.Errorf("StartPod of the adopted pod changed it: %s", cmp.Diff(before, st))
	}
	if pid, _ := pidOf(t, root, pod.UID, "main"); pid != mainPid {
		t.Errorf("StartPod of the adopted pod started main again (pid %d, was %d)", pid, mainPid)
	}

	// Deleting the pod stops it with SIGTERM, through the new runtime.
	if err := r.StopPod(ctx, pod.UID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := waitPod(t, r, pod.UID, "stopped", runtime.PodStatus.Stopped)
	for i, c := range stopped.Containers {
		term := c.State.Terminated
		if term == nil || term.Reason != runtime.ReasonContainerStatusUnknown || term.ExitCode != ExitCodeUnknown || term.ContainerID != before.Containers[i].ID {
			t.Errorf("%s: state %+v, want ContainerStatusUnknown/137 of %s", c.Name, c.State, before.Containers[i].ID)
		}
		if c.RestartCount != before.Containers[i].RestartCount {
			t.Errorf("%s restarted while stopping", c.Name)
		}
		if got := readFile(t, filepath.Join(marks, c.Name+".term")); got != c.Name+"\n" {
			t.Errorf("%s: TERM marker %q", c.Name, got)
		}
	}
	// The adopted processes went on writing to their logs.
	logs := map[string]string{
		"main/0.log":  "started\ngot TERM\n",
		"flaky/0.log": "first run\n",
		"flaky/1.log": "second run\ngot TERM\n",
	}
	for name, want := range logs {
		if got := readFile(t, filepath.Join(root, "pods", "u1", name)); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if err := r.RemovePod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "u1")); !os.IsNotExist(err) {
		t.Errorf("pod directory kept after RemovePod: %v", err)
	}
}

func TestAdoptedContainerThatExitsIsRestarted(t *testing.T) {
	root := t.TempDir()
	old := newRuntime(t, testingclock.NewFakeClock(t0), root)
	ready, waitReady := readyFifo(t, t.TempDir())
	goFifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(goFifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Each run leaves a child in its process group, says it is ready, and
	// exits 0 when told to go.
	childPid := filepath.Join(t.TempDir(), "child")
	pod := shPod("u2", corev1.RestartPolicyAlways, `sleep 1000 & echo $! > `+childPid+`; echo run; echo > `+ready+`; read x < `+goFifo+`; echo leaving; exit 0`)
	ctx := context.Background()
	if err := old.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitReady()
	var child int
	if _, err := fmt.Sscan(readFile(t, childPid), &child); err != nil {
		t.Fatal(err)
	}
	childfd := pidfdOf(t, child)
	restartedAt := t0.Add(time.Hour)
	r := newRuntime(t, testingclock.NewFakeClock(restartedAt), root)
	if st, err := r.PodStatus(pod.UID); err != nil || !allRunning(st) {
		t.Fatalf("adopted pod: %+v, %v; want it running", st, err)
	}
	writeFifo(t, goFifo)
	c := waitFor(t, r, pod.UID, "the restart", func(c runtime.ContainerStatus) bool {
		return c.RestartCount == 1 && c.State.Running != nil
	})
	wantLast := &corev1.ContainerStateTerminated{
		ExitCode:    ExitCodeUnknown,
		Reason:      runtime.ReasonContainerStatusUnknown,
		Message:     msgAdoptedExit,
		StartedAt:   metav1.NewTime(t0),
		FinishedAt:  metav1.NewTime(restartedAt),
		ContainerID: "process://u2/main/0",
	}
	if diff := cmp.Diff(wantLast, c.LastTerminationState.Terminated); diff != "" {
		t.Errorf("last termination (-want +got):\n%s", diff)
	}
	dir := filepath.Join(root, "pods", "u2", "main")
	if c.ID != "process://u2/main/1" || c.LogPath != filepath.Join(dir, "1.log") || c.PreviousLogPath != filepath.Join(dir, "0.log") {
		t.Errorf("new run: id %q, log %q, previous log %q; want run 1 after run 0", c.ID, c.LogPath, c.PreviousLogPath)
	}
	if got := readFile(t, filepath.Join(dir, "0.log")); got != "run\nleaving\n" {
		t.Errorf("the adopted run's log = %q", got)
	}
	// As for a container the agent started, the rest of its group died
	// with it.
	waitExit(t, childfd)

	// A third agent adopts what the second one restarted.
	third := newRuntime(t, testingclock.NewFakeClock(restartedAt.Add(time.Hour)), root)
	st, err := third.PodStatus(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, st.Containers[0]); diff != "" {
		t.Errorf("status after a second agent restart (-before +after):\n%s", diff)
	}
}

func TestNewDiscardsPodsItCannotRead(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, podDir string)
	}{
		{"corrupt state file", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "main", stateFile), []byte(`{"version":1,`), 0o640); err != nil {
				t.Fatal(err)
			}
		}},
		{"state file of another version", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "main", stateFile)
			data := strings.Replace(readFile(t, path), `"version":1`, `"version":2`, 1)
			if err := os.WriteFile(path, []byte(data), 0o640); err != nil {
				t.Fatal(err)
			}
		}},
		{"no pod file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, podFile)); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt pod file", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, podFile), []byte(`{"metadata":`), 0o640); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			old := newRuntime(t, testingclock.NewFakeClock(t0), root)
			ready, waitReady := readyFifo(t, t.TempDir())
			pod := shPod("u3", corev1.RestartPolicyAlways, `echo > `+ready+`; sleep 1000`)
			if err := old.StartPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			waitReady()
			pid, _ := pidOf(t, root, pod.UID, "main")
			pidfd := pidfdOf(t, pid)
			tt.spoil(t, filepath.Join(root, "pods", "u3"))
			r := newRuntime(t, testingclock.NewFakeClock(t0), root)
			if _, err := r.PodStatus(pod.UID); !errors.Is(err, runtime.ErrPodNotFound) {
				t.Errorf("PodStatus = %v, want ErrPodNotFound", err)
			}
			if _, err := os.Stat(filepath.Join(root, "pods", "u3")); !os.IsNotExist(err) {
				t.Errorf("pod directory kept: %v", err)
			}
			waitExit(t, pidfd)
		})
	}
}

func TestNewDoesNotAdoptAReusedPid(t *testing.T) {
	root := t.TempDir()
	old := newRuntime(t, testingclock.NewFakeClock(t0), root)
	dir := t.TempDir()
	ready, waitReady := readyFifo(t, dir)
	alive := filepath.Join(dir, "alive")
	if err := syscall.Mkfifo(alive, 0o600); err != nil {
		t.Fatal(err)
	}
	// On SIGTERM the process writes to the alive pipe: proof that it lives.
	pod := shPod("u4", corev1.RestartPolicyAlways, `trap "echo alive > `+alive+`; exit 0" TERM; echo > `+ready+`; sleep 1000 & wait`)
	if err := old.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitReady()
	// The pid file names the pid, but another process's start time: what
	// it says after the container died and its pid went to a newcomer.
	pid, start := pidOf(t, root, pod.UID, "main")
	pidPath := filepath.Join(root, "pods", "u4", "main", pidFile)
	if err := os.WriteFile(pidPath, []byte(fmt.Sprintf("%d %d\n", pid, start+1)), 0o640); err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, testingclock.NewFakeClock(t0.Add(time.Hour)), root)
	st, err := r.PodStatus(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Containers[0]
	wantLast := &corev1.ContainerStateTerminated{
		ExitCode: ExitCodeUnknown, Reason: runtime.ReasonContainerStatusUnknown, Message: msgExitedAway,
		StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(time.Hour)), ContainerID: "process://u4/main/0",
	}
	if diff := cmp.Diff(wantLast, c.LastTerminationState.Terminated); diff != "" {
		t.Errorf("last termination (-want +got):\n%s", diff)
	}
	if c.RestartCount != 1 || c.State.Running == nil {
		t.Errorf("restarts %d, state %+v; want restarted under Always", c.RestartCount, c.State)
	}
	if newPid, _ := pidOf(t, root, pod.UID, "main"); newPid == pid {
		t.Errorf("the pid file still names %d, the process that was not adopted", pid)
	}
	// The process that was not adopted was not killed either.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(alive)
		if err != nil {
			got <- err.Error()
			return
		}
		data, _ := io.ReadAll(f)
		f.Close()
		got <- string(data)
	}()
	select {
	case s := <-got:
		if s != "alive\n" {
			t.Errorf("alive pipe = %q", s)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the process that was not adopted is gone: New killed it")
	}
}

func TestAdoptedPodKeepsStopping(t *testing.T) {
	root := t.TempDir()
	old := newRuntime(t, testingclock.NewFakeClock(t0), root)
	ready, waitReady := readyFifo(t, t.TempDir())
	pod := shPod("u5", corev1.RestartPolicyAlways, `trap "" TERM; echo > `+ready+`; sleep 1000 & wait`)
	ctx := context.Background()
	if err := old.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitReady()
	if err := old.StopPod(ctx, pod.UID, time.Hour); err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, testingclock.NewFakeClock(t0), root)
	st, err := r.PodStatus(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Stopping || !st.Running() {
		t.Fatalf("adopted pod: stopping %v, running %v; want a stopping pod still running", st.Stopping, st.Running())
	}
	if err := r.RemovePod(ctx, pod.UID); !errors.Is(err, runtime.ErrPodRunning) {
		t.Errorf("RemovePod of a running adopted pod = %v, want ErrPodRunning", err)
	}
	if err := r.StopPod(ctx, pod.UID, 0); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "the kill", terminated)
	if c.RestartCount != 0 || c.State.Terminated.Reason != runtime.ReasonContainerStatusUnknown {
		t.Errorf("after the kill: restarts %d, state %+v; want no restart", c.RestartCount, c.State)
	}
}

func TestAdoptedCgroup(t *testing.T) {
	m, _ := fixtureCgroups(t, cgroups.V1)
	decide := func(pod *corev1.Pod, _ *corev1.Container) (runtime.ContainerResources, error) {
		if pod.UID == "u-undecided" {
			return runtime.ContainerResources{}, errors.New("no decision")
		}
		return runtime.ContainerResources{CgroupParent: "kubepods/burstable/pod" + string(pod.UID)}, nil
	}
	clk := testingclock.NewFakeClock(t0)
	on := newRuntimeWith(t, Config{Clock: clk, Cgroups: m, Resources: decide})
	noDecider := newRuntimeWith(t, Config{Clock: clk, Cgroups: m})
	off := newRuntimeWith(t, Config{Clock: clk, Resources: decide})
	const podPath = "kubepods/burstable/podu1"
	tests := []struct {
		name     string
		r        *Runtime
		uid      types.UID
		recorded string
		want     string
	}{
		{"none recorded", on, "u1", "", ""},
		{"in the pod's cgroup", on, "u1", podPath + "/main-3", podPath + "/main-3"},
		{"another pod's", on, "u1", "kubepods/burstable/podu2/main-3", ""},
		{"an older agent's cgroup2 directory", on, "u1", "/sys/fs/cgroup/knode/podu1/main-3", ""},
		{"absolute", on, "u1", "/" + podPath + "/main-3", ""},
		{"escaping the pod's", on, "u1", podPath + "/../../x", ""},
		{"the pod's own", on, "u1", podPath, ""},
		{"below a container's", on, "u1", podPath + "/main-3/x", ""},
		{"no decision", on, "u-undecided", "kubepods/burstable/podu-undecided/main-3", ""},
		{"no decider", noDecider, "u1", podPath + "/main-3", ""},
		{"no cgroup manager", off, "u1", podPath + "/main-3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: tt.uid}}
			if got := tt.r.adoptedCgroup(pod, &corev1.Container{Name: "main"}, tt.recorded); got != tt.want {
				t.Errorf("adoptedCgroup(%q) = %q, want %q", tt.recorded, got, tt.want)
			}
		})
	}
}
