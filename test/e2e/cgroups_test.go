package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cgroupMount is where the machine's cgroup hierarchies are mounted.
const cgroupMount = "/sys/fs/cgroup"

var cgroupRoots atomic.Int64

// testCgroupRoot is a --cgroup-root of the test's own, so that an agent's
// kubepods tree is made under it and not at the machine's root. The tree is
// removed in every hierarchy when the test ends, after its processes were
// killed; whatever still lives in it then is killed too.
func testCgroupRoot(t testing.TB) string {
	t.Helper()
	root := fmt.Sprintf("knode-e2e-%d-%d", os.Getpid(), cgroupRoots.Add(1))
	t.Cleanup(func() { removeCgroupTree(t, root) })
	return root
}

// cgroupDirs are root's directories in every hierarchy that has one.
func cgroupDirs(root string) []string {
	var out []string
	if st, err := os.Stat(filepath.Join(cgroupMount, root)); err == nil && st.IsDir() && isCgroup2(cgroupMount) {
		return []string{filepath.Join(cgroupMount, root)}
	}
	entries, _ := os.ReadDir(cgroupMount)
	for _, e := range entries {
		dir := filepath.Join(cgroupMount, e.Name(), root)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

func isCgroup2(dir string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(dir, &st) == nil && st.Type == 0x63677270
}

// removeCgroupTree kills what is left in root's cgroups and removes them,
// deepest first; a process the kernel is still taking down is waited for.
func removeCgroupTree(t testing.TB, root string) {
	eventually(t, "removing the test's cgroups under "+root, 10*time.Second, 50*time.Millisecond, func() (bool, string) {
		var left []string
		for _, top := range cgroupDirs(root) {
			var dirs []string
			_ = filepath.WalkDir(top, func(path string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, path)
				}
				return nil
			})
			slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
			for _, dir := range dirs {
				killCgroupProcs(dir)
				if err := syscall.Rmdir(dir); err != nil && !os.IsNotExist(err) {
					left = append(left, dir)
				}
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
}

// killCgroupProcs kills every process listed in dir's cgroup.procs.
func killCgroupProcs(dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		var pid int
		if _, err := fmt.Sscanf(f, "%d", &pid); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

var bridges atomic.Int64

// testBridge makes a bridge of the test's own holding one address,
// 198.19.<n>.1/24 (a benchmarking range no real network uses), and returns
// that address; the bridge is deleted when the test ends. An agent told to
// listen and report its node IP there is reachable by the API server
// without traffic leaving the machine. Needs root and ip(8).
func testBridge(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a bridge")
	}
	n := (int64(os.Getpid())*7 + bridges.Add(1)) % 250
	name := fmt.Sprintf("knbr%d", n)
	addr := fmt.Sprintf("198.19.%d.1", n)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	run("link", "add", "name", name, "type", "bridge")
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip link del %s: %v\n%s", name, err, out)
		}
	})
	run("addr", "add", addr+"/24", "dev", name)
	run("link", "set", name, "up")
	return addr
}
