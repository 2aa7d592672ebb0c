//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cgroups/cgroupstest"
	"knode/internal/agent/runtime"
	"knode/internal/agent/swap"
)

// The tests here run containers under real cgroup v1 limits on this
// machine. Each makes its own subtree below the test process's own cgroups
// and removes it when it ends, failed or not.

// realV1 is a cgroup tree the test owns on this machine's v1 hierarchies.
type realV1 struct {
	m *cgroups.Manager
	// own is the test process's cgroup per controller, as
	// /proc/self/cgroup names it.
	own map[string]string
	// dirs is each controller's base directory: the test's own cgroup.
	dirs map[string]string
	// pod is the test's pod cgroup, as the container manager would make it.
	pod string
}

// newRealV1 makes a pod cgroup below the test's own cgroups. It skips
// unless the test runs as root on a cgroup v1 (or hybrid) host whose cpu,
// cpuset and memory controllers it can write.
func newRealV1(t *testing.T) *realV1 {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot create cgroups on this machine")
	}
	mode, err := cgroups.Detect("")
	if err != nil || !mode.Legacy() {
		t.Skipf("not a cgroup v1 host (%v, %v)", mode, err)
	}
	own := cgroupstest.OwnCgroups(t)
	dirs := cgroupstest.OwnDirs(t, cgroups.DefaultRoot, "cpu", "cpuacct", "cpuset", "memory", "pids")
	m, err := cgroups.New(cgroups.Config{Mode: mode, Dirs: dirs})
	if err != nil {
		t.Skipf("cgroups not writable here: %v", err)
	}
	cgroupstest.RequireControllers(t, m, "cpu", "cpuset", "memory")
	top := cgroupstest.UniqueName("knode-process-test-")
	// Registered first, so it runs after the runtimes' cleanups.
	t.Cleanup(func() {
		killAndWaitCgroup(t, m, top)
		if err := m.Remove(top); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	pod := top + "/pod"
	if err := m.Create(pod, cgroups.Resources{}); err != nil {
		t.Fatal(err)
	}
	return &realV1{m: m, own: own, dirs: dirs, pod: pod}
}

// killAndWaitCgroup kills what is left in path and waits (on pidfds, as a
// hang guard up to waitTimeout per round) until it is gone: a cgroup that
// holds a process cannot be removed.
func killAndWaitCgroup(t *testing.T, m *cgroups.Manager, path string) {
	t.Helper()
	for round := 0; round < 5; round++ {
		pids, err := m.Pids(path)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if len(pids) == 0 {
			return
		}
		var fds []int
		for _, pid := range pids {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				fds = append(fds, fd)
			}
		}
		if err := m.Kill(path); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, fd := range fds {
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(pfd, int(waitTimeout/time.Millisecond)); err != nil && !errors.Is(err, unix.EINTR) {
				t.Errorf("cleanup: %v", err)
			}
			unix.Close(fd)
		}
	}
	t.Errorf("cleanup: processes still in %s", path)
}

// runtimeFor is a Runtime whose containers get res, under the test's pod
// cgroup.
func (v *realV1) runtimeFor(t *testing.T, res runtime.ContainerResources) (*Runtime, *decider) {
	t.Helper()
	res.CgroupParent = v.pod
	d := &decider{res: res}
	return newRuntimeWith(t, Config{Clock: testingclock.NewFakeClock(t0), Cgroups: v.m, Resources: d.decide}), d
}

// TestRealV1OOMKilled: a container that allocates past its 32 MiB limit
// is killed by the kernel and reported OOMKilled with SIGKILL's 137.
func TestRealV1OOMKilled(t *testing.T) {
	v := newRealV1(t)
	limit := int64(32 << 20)
	res := runtime.ContainerResources{Linux: cgroups.Resources{MemoryLimit: limit}}
	// With swap accounting the limit must cover swap too, or the
	// container would swap rather than be killed.
	if _, err := os.Stat(filepath.Join(v.dirs["memory"], v.pod, swap.MemswLimitFile)); err == nil {
		res.Linux.Swap = swap.CgroupValues(swap.NoSwap, limit, 0, false)
	}
	r, _ := v.runtimeFor(t, res)
	// tail keeps the "last line" of a stream without newlines: all of it.
	pod := shPod("u1", corev1.RestartPolicyNever, "exec tail /dev/zero")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "the OOM kill", terminated)
	if term := c.State.Terminated; term.Reason != runtime.ReasonOOMKilled || term.ExitCode != 137 {
		t.Errorf("terminated = %+v, want OOMKilled with exit code 137\nlog: %s", term, readFile(t, c.LogPath))
	}
	if _, err := os.Stat(filepath.Join(v.dirs["memory"], v.pod, "main-0")); !os.IsNotExist(err) {
		t.Errorf("the run's memory cgroup is still there: %v", err)
	}
}

// cpusAllowed is Cpus_allowed_list of pid.
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	for _, line := range strings.Split(readFile(t, fmt.Sprintf("/proc/%d/status", pid)), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list for %d", pid)
	return ""
}

// TestRealV1Cpuset: a container's cpuset holds from its start, and
// UpdateResources moves it to the decider's new answer while it runs.
func TestRealV1Cpuset(t *testing.T) {
	v := newRealV1(t)
	if got := strings.TrimSpace(readFile(t, filepath.Join(v.dirs["cpuset"], v.pod, "cpuset.cpus"))); got != "0-1" {
		t.Skipf("the test's cpuset is %q; want 0-1 (two CPUs)", got)
	}
	r, d := v.runtimeFor(t, runtime.ContainerResources{Linux: cgroups.Resources{CPUSetCPUs: "0"}})
	pod := shPod("u1", corev1.RestartPolicyAlways, "exec sleep 1000")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	st, err := r.PodStatus(pod.UID)
	if err != nil || !allRunning(st) {
		t.Fatalf("status %+v, %v; want the container running", st, err)
	}
	pid, _ := pidOf(t, r.cfg.RootDir, pod.UID, "main")
	if got := cpusAllowed(t, pid); got != "0" {
		t.Errorf("Cpus_allowed_list = %q, want 0", got)
	}
	d.set(func(res *runtime.ContainerResources) { res.Linux.CPUSetCPUs = "0-1" }, nil)
	if err := r.UpdateResources(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := cpusAllowed(t, pid); got != "0-1" {
		t.Errorf("Cpus_allowed_list after UpdateResources = %q, want 0-1", got)
	}
}

// TestRealV1InCgroupBeforeExec: the command itself finds itself in the
// container's cgroup in every hierarchy limits are written to.
func TestRealV1InCgroupBeforeExec(t *testing.T) {
	v := newRealV1(t)
	r, _ := v.runtimeFor(t, runtime.ContainerResources{Linux: cgroups.Resources{MemoryLimit: 256 << 20}})
	pod := shPod("u1", corev1.RestartPolicyNever, "exec cat /proc/self/cgroup")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "exit", terminated)
	log := readFile(t, c.LogPath)
	if c.State.Terminated.ExitCode != 0 {
		t.Fatalf("terminated = %+v\n%s", c.State.Terminated, log)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			got[ctl] = parts[2]
		}
	}
	for _, ctl := range v.m.Enforced() {
		if want := path.Join(v.own[ctl], v.pod, "main-0"); got[ctl] != want {
			t.Errorf("the command's %s cgroup = %q, want %q\nlog:\n%s", ctl, got[ctl], want, log)
		}
	}
}
