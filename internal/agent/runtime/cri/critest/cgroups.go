package critest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cgroupRoots counts the cgroup roots this process made, for unique names.
var cgroupRoots atomic.Int32

// CgroupRoot is a cgroup name of the test's own ("knode-critest-<pid>-<n>",
// a cgroups.Layout path) to put its pods' cgroups under. When the test
// ends, after the cleanups registered later (call it before
// StartContainerd or Setup), every cgroup at or under it is removed from
// every hierarchy, deepest first.
func CgroupRoot(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("knode-critest-%d-%d", os.Getpid(), cgroupRoots.Add(1))
	t.Cleanup(func() {
		dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
		var all []string
		for _, d := range dirs {
			_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					all = append(all, p)
				}
				return nil
			})
		}
		slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
		for _, d := range all {
			// A cgroup whose last process just died is busy for a moment.
			if !poll(5*time.Second, 10*time.Millisecond, func() bool {
				err := syscall.Rmdir(d)
				return err == nil || os.IsNotExist(err)
			}) {
				t.Errorf("removing cgroup %s: still busy", d)
			}
		}
	})
	return name
}
