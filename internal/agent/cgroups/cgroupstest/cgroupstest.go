// Package cgroupstest holds test helpers for code that writes cgroups:
// fixture trees and the test process's own cgroups.
package cgroupstest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Tree writes files (path -> content; a path ending in "/" is a directory)
// under a new temporary directory and returns it.
func Tree(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// OwnCgroups is the test process's cgroup path per v1 controller, from
// /proc/self/cgroup; the test is skipped where there is none.
func OwnCgroups(t testing.TB) map[string]string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own
}

// OwnDirs is, for each v1 controller of controllers the test process has a
// cgroup in, that cgroup's directory under root (the hierarchies' mount,
// e.g. /sys/fs/cgroup): the place a test may make cgroups of its own.
func OwnDirs(t testing.TB, root string, controllers ...string) map[string]string {
	t.Helper()
	own := OwnCgroups(t)
	dirs := map[string]string{}
	for _, c := range controllers {
		if p, ok := own[c]; ok {
			dirs[c] = filepath.Join(root, c, p)
		}
	}
	return dirs
}

// Controllers is what RequireControllers reads of a cgroups.Manager.
type Controllers interface {
	Enforced() []string
	MissingWarning() string
}

// RequireControllers skips the test unless m can write every one of names.
func RequireControllers(t testing.TB, m Controllers, names ...string) {
	t.Helper()
	for _, need := range names {
		if !slices.Contains(m.Enforced(), need) {
			t.Skipf("controller %s not writable here (%s)", need, m.MissingWarning())
		}
	}
}

// UniqueName is prefix and 12 random hex digits: a cgroup name no other
// run uses.
func UniqueName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
