//go:build linux

package cgroups

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"knode/internal/agent/cgroups/cgroupstest"
	"knode/internal/agent/swap"
)

// TestRealHost creates a test-owned subtree on this machine's cgroups,
// checks the limits read back, and OOM-kills a child under a 50 MiB limit.
func TestRealHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot create cgroups on this machine")
	}
	mode, err := Detect(DefaultRoot)
	if err != nil {
		t.Skipf("no cgroups on this machine: %v", err)
	}
	cfg := Config{Mode: mode}
	if mode.Legacy() {
		cfg.Dirs = cgroupstest.OwnDirs(t, DefaultRoot, v1Controllers...)
	}
	// On v2 the subtree goes under the root, whose subtree_control may
	// always be written (the test's own cgroup holds a process, so it may
	// not enable controllers for children).
	m, err := New(cfg)
	if err != nil {
		t.Skipf("cgroups not writable here: %v", err)
	}
	t.Logf("mode %s, enforced %v, missing %v", mode, m.Enforced(), m.Missing())
	cgroupstest.RequireControllers(t, m, "cpu", "memory")
	top := cgroupstest.UniqueName("knode-test-")
	t.Cleanup(func() {
		killAndWait(t, m, top)
		if err := m.Remove(top); err != nil {
			t.Errorf("cleanup remove: %v", err)
		}
	})
	l := Layout{Root: top, PerQOS: true}
	podPath := l.Pod("Burstable", "1234-abcd")
	ctrPath := l.Container(podPath, "ctr1")
	for _, step := range []struct {
		path string
		r    Resources
	}{
		{l.Kubepods(), Resources{CPUShares: 2048, MemoryLimit: 1 << 30}},
		{l.QOS("Burstable"), Resources{CPUShares: 1024}},
		{podPath, Resources{CPUShares: 512, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 200 << 20, PidsLimit: 64}},
		{ctrPath, Resources{CPUShares: 102, CPUQuota: 20000, CPUPeriod: 100000, MemoryLimit: 50 << 20,
			Swap: swap.CgroupValues(swap.NoSwap, 50<<20, 0, !mode.Legacy())}},
	} {
		if err := m.Create(step.path, step.r); err != nil {
			t.Fatalf("Create %s: %v", step.path, err)
		}
	}

	// Values read back from the kernel.
	file := func(ctl, path, name string) string {
		dir := filepath.Join(DefaultRoot, path)
		if mode.Legacy() {
			dir = filepath.Join(cfg.Dirs[ctl], path)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("read back: %v", err)
		}
		return strings.TrimSpace(string(b))
	}
	type check struct{ ctl, path, name, want string }
	var checks []check
	if mode.Legacy() {
		checks = []check{
			{"cpu", ctrPath, "cpu.cfs_quota_us", "20000"},
			{"cpu", ctrPath, "cpu.cfs_period_us", "100000"},
			{"cpu", ctrPath, "cpu.shares", "102"},
			{"cpu", podPath, "cpu.cfs_quota_us", "100000"},
			{"memory", ctrPath, "memory.limit_in_bytes", "52428800"},
			{"memory", podPath, "memory.limit_in_bytes", "209715200"},
		}
		if _, err := os.Stat(filepath.Join(cfg.Dirs["memory"], ctrPath, swap.MemswLimitFile)); err == nil {
			checks = append(checks, check{"memory", ctrPath, swap.MemswLimitFile, "52428800"})
		}
		if contains(m.Enforced(), "pids") {
			checks = append(checks, check{"pids", podPath, "pids.max", "64"})
		}
		if contains(m.Enforced(), "cpuset") {
			parent, _ := os.ReadFile(filepath.Join(cfg.Dirs["cpuset"], "cpuset.cpus"))
			checks = append(checks, check{"cpuset", ctrPath, "cpuset.cpus", strings.TrimSpace(string(parent))})
		}
	} else {
		checks = []check{
			{"cpu", ctrPath, "cpu.max", "20000 100000"},
			{"cpu", ctrPath, "cpu.weight", "4"},
			{"memory", ctrPath, "memory.max", "52428800"},
		}
	}
	for _, c := range checks {
		if got := file(c.ctl, c.path, c.name); got != c.want {
			t.Errorf("%s/%s = %q, want %q", c.path, c.name, got, c.want)
		}
	}

	// A child that waits on stdin until it is in the cgroup, then holds
	// 120 MB in a shell variable under the 50 MiB limit.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", `read go; x=$(head -c 120000000 /dev/zero | tr "\000" a); echo survived ${#x}`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() { // runs before the removal above
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	if err := m.AddProcess(ctrPath, cmd.Process.Pid); err != nil {
		t.Fatalf("AddProcess: %v", err)
	}
	if pids, err := m.Pids(top); err != nil || !contains(pids, cmd.Process.Pid) {
		t.Errorf("Pids(%s) = %v, %v; want the child %d", top, pids, err, cmd.Process.Pid)
	}
	if killed, err := m.OOMKilled(ctrPath); err != nil || killed {
		t.Fatalf("OOMKilled before the allocation = %v, %v", killed, err)
	}
	fmt.Fprintln(stdin, "go")
	stdin.Close()
	werr := cmd.Wait()
	waited = true
	if ctx.Err() != nil {
		t.Fatalf("child still running after %v (killed by the deadline)", 60*time.Second)
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		t.Fatalf("child exited with %v, output %q; want it OOM-killed", werr, out.String())
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("child ended with %v, want SIGKILL", werr)
	}
	killed, err := m.OOMKilled(ctrPath)
	if err != nil || !killed {
		t.Errorf("OOMKilled after the kill = %v, %v; want true", killed, err)
	}
	if killed, err := m.OOMKilled(podPath); err != nil {
		t.Errorf("OOMKilled(pod): %v", err)
	} else {
		t.Logf("OOMKilled(pod) = %v (v1 counts the victim's own cgroup; v2 its ancestors too)", killed)
	}
}

// killAndWait kills every process in path and waits (poll on pidfds, up
// to 10s per round) until they are gone, since rmdir fails while a killed
// process has not yet exited. Processes that are not the test's children
// (the child's orphaned pipeline) are waited for the same way.
func killAndWait(t *testing.T, m *Manager, path string) {
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
		var fds []unix.PollFd
		for _, pid := range pids {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue // already gone
			}
			defer unix.Close(fd)
			fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
		if err := m.Kill(path); err != nil {
			t.Errorf("cleanup kill: %v", err)
		}
		for _, f := range fds {
			if _, err := unix.Poll([]unix.PollFd{f}, 10000); err != nil && !errors.Is(err, unix.EINTR) {
				t.Errorf("cleanup poll: %v", err)
			}
		}
	}
	t.Errorf("cleanup: processes still in %s", path)
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
