//go:build linux

package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/cgroups/cgroupstest"
	"knode/internal/agent/swap"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSpace(string(b))
}

func v1Tree(t *testing.T, withPids bool) string {
	files := map[string]string{
		"cpu/": "", "cpuacct/": "", "memory/": "",
		"cpuset/cpuset.cpus": "0-1\n", "cpuset/cpuset.mems": "0\n",
		"unified/cgroup.controllers": "",
	}
	if withPids {
		files["pids/"] = ""
	}
	return cgroupstest.Tree(t, files)
}

func TestManagerV1(t *testing.T) {
	for _, mode := range []Mode{V1, Hybrid} {
		t.Run(mode.String(), func(t *testing.T) {
			root := v1Tree(t, true)
			m, err := New(Config{Mode: mode, Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]string{"cpu", "cpuset", "memory", "pids"}, m.Enforced()); d != "" {
				t.Errorf("Enforced (-want +got):\n%s", d)
			}
			if len(m.Missing()) != 0 || m.MissingWarning() != "" {
				t.Errorf("Missing = %v %q", m.Missing(), m.MissingWarning())
			}
			l := Layout{PerQOS: true}
			ctrPath := l.Container(l.Pod("Burstable", "u1"), "c1")
			r := Resources{CPUShares: 102, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 50 << 20, PidsLimit: 7,
				CPUSetCPUs: "1", Swap: map[string]string{swap.MemswLimitFile: "52428800"}}
			if err := m.Create(ctrPath, r); err != nil {
				t.Fatal(err)
			}
			leaf := func(ctl, f string) string { return read(t, filepath.Join(root, ctl, ctrPath, f)) }
			got := map[string]string{
				"cpu.shares":   leaf("cpu", "cpu.shares"),
				"cfs_period":   leaf("cpu", "cpu.cfs_period_us"),
				"cfs_quota":    leaf("cpu", "cpu.cfs_quota_us"),
				"memory":       leaf("memory", "memory.limit_in_bytes"),
				"memsw":        leaf("memory", "memory.memsw.limit_in_bytes"),
				"pids":         leaf("pids", "pids.max"),
				"leaf cpus":    leaf("cpuset", "cpuset.cpus"),
				"leaf mems":    leaf("cpuset", "cpuset.mems"),
				"pod cpus":     read(t, filepath.Join(root, "cpuset/kubepods/burstable/podu1/cpuset.cpus")),
				"kubepods mem": read(t, filepath.Join(root, "cpuset/kubepods/cpuset.mems")),
			}
			want := map[string]string{
				"cpu.shares": "102", "cfs_period": "100000", "cfs_quota": "50000", "memory": "52428800",
				"memsw": "52428800", "pids": "7", "leaf cpus": "1", "leaf mems": "0", "pod cpus": "0-1", "kubepods mem": "0",
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("files (-want +got):\n%s", d)
			}
			if _, err := os.Stat(filepath.Join(root, "cpuacct", ctrPath)); err != nil {
				t.Errorf("cpuacct cgroup: %v", err)
			}
			// Update lifts limits.
			if err := m.Update(ctrPath, Resources{}); err != nil {
				t.Fatal(err)
			}
			if q, mem := leaf("cpu", "cpu.cfs_quota_us"), leaf("memory", "memory.limit_in_bytes"); q != "-1" || mem != "-1" {
				t.Errorf("after Update: quota %s memory %s, want -1 -1", q, mem)
			}
			if err := m.AddProcess(ctrPath, 42); err != nil {
				t.Fatal(err)
			}
			for _, ctl := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
				if got := leaf(ctl, "cgroup.procs"); got != "42" {
					t.Errorf("%s cgroup.procs = %q", ctl, got)
				}
			}
			if pids, err := m.Pids(l.Kubepods()); err != nil || !cmp.Equal(pids, []int{42}) {
				t.Errorf("Pids = %v, %v", pids, err)
			}
			oom := filepath.Join(root, "memory", ctrPath, "memory.oom_control")
			if _, err := m.OOMKilled(ctrPath); err == nil || !strings.Contains(err.Error(), oom) {
				t.Errorf("OOMKilled without file: %v, want an error naming %s", err, oom)
			}
			for content, want := range map[string]bool{
				"oom_kill_disable 0\nunder_oom 0\noom_kill 0\n": false,
				"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n": true,
			} {
				if err := os.WriteFile(oom, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if got, err := m.OOMKilled(ctrPath); err != nil || got != want {
					t.Errorf("OOMKilled(%q) = %v, %v; want %v", content, got, err, want)
				}
			}
			if err := m.Update("kubepods/nope", r); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "cpu", "kubepods/nope")) {
				t.Errorf("Update of a missing cgroup: %v", err)
			}
			if err := m.Create("../escape", r); err == nil {
				t.Errorf("Create ../escape succeeded")
			}
			if err := m.Remove(l.Kubepods()); err != nil {
				t.Fatal(err)
			}
			for _, ctl := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
				if _, err := os.Stat(filepath.Join(root, ctl, "kubepods")); !os.IsNotExist(err) {
					t.Errorf("%s/kubepods still there: %v", ctl, err)
				}
			}
			if err := m.Remove(l.Kubepods()); err != nil {
				t.Errorf("second Remove: %v", err)
			}
		})
	}
}

func TestManagerV1Missing(t *testing.T) {
	root := v1Tree(t, false)
	if err := os.Chmod(filepath.Join(root, "memory"), 0o555); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Mode: V1, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"pids"}
	if os.Geteuid() != 0 { // root writes anything
		want = []string{"memory", "pids"}
	}
	if d := cmp.Diff(want, m.Missing()); d != "" {
		t.Errorf("Missing (-want +got):\n%s", d)
	}
	if !strings.Contains(m.MissingWarning(), "pids limits") {
		t.Errorf("MissingWarning = %q", m.MissingWarning())
	}
	if err := m.Create("kubepods", Resources{PidsLimit: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "pids")); !os.IsNotExist(err) {
		t.Errorf("pids hierarchy written: %v", err)
	}
}

func TestManagerV1Dirs(t *testing.T) {
	root := v1Tree(t, true)
	own := filepath.Join(root, "memory", "own")
	if err := os.Mkdir(own, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Mode: V1, Root: root, Dirs: map[string]string{"memory": own}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Create("kubepods", Resources{MemoryLimit: 1000}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(own, "kubepods", "memory.limit_in_bytes")); got != "1000" {
		t.Errorf("memory limit = %q", got)
	}
	if _, err := New(Config{Mode: V1, Dirs: map[string]string{"blkio": "/x"}}); err == nil {
		t.Errorf("New accepted an unknown controller")
	}
	if _, err := New(Config{}); err == nil {
		t.Errorf("New accepted Mode Unknown")
	}
}

func TestManagerWriteErrorNamesFile(t *testing.T) {
	root := v1Tree(t, true)
	m, err := New(Config{Mode: V1, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Create("kubepods", Resources{}); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(root, "cpu", "kubepods", "cpu.shares")
	if err := os.Mkdir(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	err = m.Update("kubepods", Resources{CPUShares: 2})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Update = %v, want an error naming %s", err, bad)
	}
}

func TestManagerV2(t *testing.T) {
	root := cgroupstest.Tree(t, map[string]string{
		"cgroup.controllers":     "cpuset cpu io memory pids\n",
		"cgroup.subtree_control": "cpu memory\n",
	})
	m, err := New(Config{Mode: V2, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"cpu", "cpuset", "memory", "pids"}, m.Enforced()); d != "" {
		t.Errorf("Enforced (-want +got):\n%s", d)
	}
	l := Layout{PerQOS: true}
	p := l.Container(l.Pod("BestEffort", "u2"), "c2")
	r := Resources{CPUShares: 1024, CPUQuota: 25000, MemoryLimit: 1 << 20, PidsLimit: 9,
		Swap: map[string]string{swap.SwapMaxFile: "0"}}
	if err := m.Create(p, r); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, p)
	got := map[string]string{}
	for _, f := range []string{"cpu.weight", "cpu.max", "memory.max", "memory.swap.max", "pids.max"} {
		got[f] = read(t, filepath.Join(dir, f))
	}
	for _, sub := range []string{"", "kubepods", "kubepods/besteffort", "kubepods/besteffort/podu2"} {
		got["subtree "+sub] = read(t, filepath.Join(root, sub, "cgroup.subtree_control"))
	}
	want := map[string]string{
		"cpu.weight": "39", "cpu.max": "25000 100000", "memory.max": "1048576", "memory.swap.max": "0", "pids.max": "9",
		"subtree ":                          "+cpuset +pids",
		"subtree kubepods":                  "+cpu +cpuset +memory +pids",
		"subtree kubepods/besteffort":       "+cpu +cpuset +memory +pids",
		"subtree kubepods/besteffort/podu2": "+cpu +cpuset +memory +pids",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.subtree_control")); !os.IsNotExist(err) {
		t.Errorf("container cgroup got a subtree_control: %v", err)
	}
	if err := m.AddProcess(p, 7); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "cgroup.procs")); got != "7" {
		t.Errorf("cgroup.procs = %q", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := m.OOMKilled(p); err != nil || !got {
		t.Errorf("OOMKilled = %v, %v; want true", got, err)
	}
	if err := m.Remove("kubepods"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "kubepods")); !os.IsNotExist(err) {
		t.Errorf("kubepods still there: %v", err)
	}
}

func TestManagerV2Missing(t *testing.T) {
	root := cgroupstest.Tree(t, map[string]string{"cgroup.controllers": "cpu memory\n", "cgroup.subtree_control": ""})
	m, err := New(Config{Mode: V2, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"cpuset", "pids"}, m.Missing()); d != "" {
		t.Errorf("Missing (-want +got):\n%s", d)
	}
	if got := m.MissingWarning(); got != "not enforced: cpuset limits, pids limits" {
		t.Errorf("MissingWarning = %q", got)
	}
	if err := m.Create("kubepods", Resources{PidsLimit: 3, CPUSetCPUs: "0"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"pids.max", "cpuset.cpus"} {
		if _, err := os.Stat(filepath.Join(root, "kubepods", f)); !os.IsNotExist(err) {
			t.Errorf("%s written for a missing controller: %v", f, err)
		}
	}
	if got := read(t, filepath.Join(root, "cgroup.subtree_control")); got != "+cpu +memory" {
		t.Errorf("root subtree_control = %q", got)
	}
}
