package cgroups

import (
	"strings"
	"testing"
)

// FuzzDetectMountinfo: any mountinfo gives a mode or an error, never a
// panic, and a mode other than V2 comes with the controllers it found.
func FuzzDetectMountinfo(f *testing.F) {
	f.Add("30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n")
	f.Add("25 24 0:22 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n26 25 0:23 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n")
	f.Add("27 25 0:24 / /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory\n")
	f.Add("garbage\n")
	f.Fuzz(func(t *testing.T, mountinfo string) {
		mode, ctls, err := DetectMountinfo(strings.NewReader(mountinfo), DefaultRoot)
		if err != nil {
			return
		}
		if mode.Legacy() && len(ctls) == 0 {
			t.Errorf("mode %s without a controller mount", mode)
		}
	})
}
