//go:build linux

package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// cgroup v2 constants, as the kernel and upstream's cgroup manager use them.
const (
	cgroup2SuperMagic = 0x63677270
	cpuPeriod         = 100000 // µs
	minCPUQuota       = 1000   // µs, the kernel's least quota
	minShares         = 2
	maxShares         = 262144
)

// cpuMax is the cpu.max value for limits: "<quota> <period>" with the quota
// in proportion to the cpu limit, or "max <period>" without one.
func cpuMax(limits corev1.ResourceList) string {
	q, ok := limits[corev1.ResourceCPU]
	if !ok || q.IsZero() {
		return fmt.Sprintf("max %d", cpuPeriod)
	}
	quota := q.MilliValue() * cpuPeriod / 1000
	if quota < minCPUQuota {
		quota = minCPUQuota
	}
	return fmt.Sprintf("%d %d", quota, cpuPeriod)
}

// memoryMax is the memory.max value for limits: bytes, or "max".
func memoryMax(limits corev1.ResourceList) string {
	q, ok := limits[corev1.ResourceMemory]
	if !ok || q.IsZero() {
		return "max"
	}
	return strconv.FormatInt(q.Value(), 10)
}

// cpuWeight is the cpu.weight for requests: upstream's cpu shares (1024 per
// cpu, at least 2) mapped onto cgroup v2's 1..10000 range.
func cpuWeight(requests corev1.ResourceList) string {
	shares := int64(minShares)
	if q, ok := requests[corev1.ResourceCPU]; ok {
		shares = max(q.MilliValue()*1024/1000, minShares)
	}
	shares = min(shares, maxShares)
	return strconv.FormatInt(1+((shares-minShares)*9999)/(maxShares-minShares), 10)
}

// cgroups places containers in a cgroup v2 tree:
// <root>/<parent>/pod<uid>/<container>-<run>.
type cgroups struct {
	root   string
	parent string
	// plain: root is an ordinary directory (tests), whose directories are
	// removed with their files.
	plain bool
}

// newCgroups checks that root is a writable cgroup2 tree with the cpu and
// memory controllers, creates parent under it and enables the controllers
// down to it. checkMount false skips the filesystem type check (tests point
// root at a plain directory).
func newCgroups(root, parent string, checkMount bool) (*cgroups, error) {
	if checkMount {
		ok, err := isCgroup2(root)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s is not a cgroup2 mount", root)
		}
	}
	avail, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	fields := strings.Fields(string(avail))
	for _, want := range []string{"cpu", "memory"} {
		found := false
		for _, f := range fields {
			found = found || f == want
		}
		if !found {
			return nil, fmt.Errorf("%s: controller %q is not available", root, want)
		}
	}
	c := &cgroups{root: root, parent: filepath.Clean(parent), plain: !checkMount}
	dir := root
	if err := enableControllers(dir); err != nil {
		return nil, err
	}
	for _, part := range strings.Split(c.parent, string(filepath.Separator)) {
		if part == "" || part == "." {
			continue
		}
		dir = filepath.Join(dir, part)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if err := enableControllers(dir); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func enableControllers(dir string) error {
	return writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+cpu +memory")
}

func writeFile(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (c *cgroups) podDir(uid string) string {
	return filepath.Join(c.root, c.parent, "pod"+uid)
}

// create makes the cgroup of one run of a container with its limits and
// returns its directory.
func (c *cgroups) create(uid, name string, run int, res corev1.ResourceRequirements) (string, error) {
	pod := c.podDir(uid)
	if err := os.Mkdir(pod, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := enableControllers(pod); err != nil {
		return "", err
	}
	dir := filepath.Join(pod, fmt.Sprintf("%s-%d", name, run))
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	for file, value := range map[string]string{
		"cpu.max":    cpuMax(res.Limits),
		"cpu.weight": cpuWeight(res.Requests),
		"memory.max": memoryMax(res.Limits),
	} {
		if err := writeFile(filepath.Join(dir, file), value); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// kill kills every process in the cgroup dir (cgroup.kill, Linux 5.14+);
// it reports false when the kernel lacks it.
func (c *cgroups) kill(dir string) bool {
	return writeFile(filepath.Join(dir, "cgroup.kill"), "1") == nil
}

// oomKilled reports whether the kernel's OOM killer struck in dir.
func oomKilled(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "memory.events"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), " ")
		if name == "oom_kill" {
			n, _ := strconv.Atoi(strings.TrimSpace(value))
			return n > 0
		}
	}
	return false
}

// removePod removes the pod's cgroups; a cgroup that still holds a process
// stays (its removal is retried by the next call).
func (c *cgroups) removePod(uid string) error {
	pod := c.podDir(uid)
	entries, err := os.ReadDir(pod)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			if err := c.rmdir(filepath.Join(pod, e.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := c.rmdir(pod); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// remove removes one run's cgroup, which must hold no process.
func (c *cgroups) remove(dir string) error { return c.rmdir(dir) }

func (c *cgroups) rmdir(dir string) error {
	if c.plain {
		return os.RemoveAll(dir)
	}
	return os.Remove(dir)
}
