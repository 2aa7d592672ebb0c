package cgroups

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/cgroups/cgroupstest"
)

func TestDetect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Mode
		err   error
	}{
		{"v2", map[string]string{"cgroup.controllers": "cpu memory pids\n"}, V2, nil},
		{"v1", map[string]string{"memory/": "", "cpu/": ""}, V1, nil},
		{"hybrid", map[string]string{"memory/": "", "unified/cgroup.controllers": ""}, Hybrid, nil},
		{"only unified", map[string]string{"unified/cgroup.controllers": ""}, Unknown, ErrNoCgroups},
		{"empty", map[string]string{}, Unknown, ErrNoCgroups},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(cgroupstest.Tree(t, tc.files))
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("Detect = %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

const mountinfoHybrid = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 31 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
36 31 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,memory
37 31 0:32 / /sys/fs/cgroup/my\040pids rw,relatime shared:17 - cgroup cgroup rw,pids
33 31 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
`

func TestDetectMountinfo(t *testing.T) {
	mode, mounts, err := DetectMountinfo(strings.NewReader(mountinfoHybrid), "")
	if err != nil || mode != Hybrid {
		t.Fatalf("hybrid: %v, %v", mode, err)
	}
	want := map[string]string{
		"cpu": "/sys/fs/cgroup/cpu,cpuacct", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct",
		"memory": "/sys/fs/cgroup/memory", "pids": "/sys/fs/cgroup/my pids", "name=systemd": "/sys/fs/cgroup/systemd",
	}
	if d := cmp.Diff(want, mounts); d != "" {
		t.Errorf("mounts (-want +got):\n%s", d)
	}
	v1only := strings.ReplaceAll(mountinfoHybrid, "cgroup2 cgroup2", "tmpfs tmpfs")
	if mode, _, err := DetectMountinfo(strings.NewReader(v1only), ""); err != nil || mode != V1 {
		t.Errorf("v1: %v, %v", mode, err)
	}
	v2 := "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n"
	if mode, _, err := DetectMountinfo(strings.NewReader(v2), "/sys/fs/cgroup/"); err != nil || mode != V2 {
		t.Errorf("v2: %v, %v", mode, err)
	}
	if _, _, err := DetectMountinfo(strings.NewReader("garbage\n"), ""); !errors.Is(err, ErrNoCgroups) {
		t.Errorf("none: %v", err)
	}
}
