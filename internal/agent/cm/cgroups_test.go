package cm_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cm"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/swap"
)

// sharesFile is where a cgroup's cpu shares are (cpu.shares on V1,
// cpu.weight on V2) and how a shares value reads there.
func sharesFile(mode cgroups.Mode) (ctl, file string, conv func(uint64) string) {
	if mode == cgroups.V2 {
		return "", "cpu.weight", func(s uint64) string { return strconv.FormatUint(cgroups.CPUWeight(s), 10) }
	}
	return "cpu", "cpu.shares", func(s uint64) string { return strconv.FormatUint(s, 10) }
}

func memoryFile(mode cgroups.Mode) string {
	if mode == cgroups.V2 {
		return "memory.max"
	}
	return "memory.limit_in_bytes"
}

func TestNodeCgroups(t *testing.T) {
	capacity := rl("cpu", "2", "memory", "4Gi", "pid", "4096")
	for _, tc := range []struct {
		name       string
		mode       cgroups.Mode
		enforce    []string
		root       string
		wantMemory string
		wantShares uint64
	}{
		{"v1 pods enforced", cgroups.V1, []string{cm.EnforcePods}, "", "3221225472", 1536},
		{"v1 not enforced", cgroups.V1, nil, "", "4294967296", 2048},
		{"v2 pods enforced under a cgroup root", cgroups.V2, []string{cm.EnforcePods}, "knode", "3221225472", 1536},
		{"v2 none", cgroups.V2, []string{cm.EnforceNone}, "", "4294967296", 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg, root := plainCgroups(t, tc.mode)
			m := newManager(t, cm.Config{
				Topology:               fake.UniformTopology(2, 4<<30),
				Capacity:               capacity,
				KubeReserved:           rl("cpu", "250m", "memory", "512Mi"),
				SystemReserved:         rl("cpu", "250m", "memory", "512Mi"),
				EnforceNodeAllocatable: tc.enforce,
				CgroupsPerQOS:          true,
				CgroupRoot:             tc.root,
				Cgroups:                cg,
				CPUCFSQuota:            true,
			})
			kubepods := filepath.Join(tc.root, "kubepods")
			burstable, besteffort := kubepods+"/burstable", kubepods+"/besteffort"
			sctl, sfile, conv := sharesFile(tc.mode)
			file := func(ctl, path, name string) string { return cgroupFile(t, tc.mode, root, ctl, path, name) }
			got := map[string]string{
				"kubepods memory":   file("memory", kubepods, memoryFile(tc.mode)),
				"kubepods shares":   file(sctl, kubepods, sfile),
				"kubepods pids":     file("pids", kubepods, "pids.max"),
				"burstable shares":  file(sctl, burstable, sfile),
				"besteffort shares": file(sctl, besteffort, sfile),
			}
			want := map[string]string{
				"kubepods memory":   tc.wantMemory,
				"kubepods shares":   conv(tc.wantShares),
				"kubepods pids":     "4096", // no pid reservation
				"burstable shares":  conv(cgroups.MinShares),
				"besteffort shares": conv(cgroups.MinShares),
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("node cgroups after New (-want +got):\n%s", d)
			}

			// A Burstable pod: its cgroup under burstable, whose shares now
			// count its 500m.
			bu := podOf("u1", rl("cpu", "500m", "memory", "128Mi"), rl("memory", "256Mi"))
			admit(t, m, bu)
			if err := m.PodStarting(bu); err != nil {
				t.Fatal(err)
			}
			podPath := burstable + "/podu1"
			got = map[string]string{
				"pod shares":       file(sctl, podPath, sfile),
				"pod memory":       file("memory", podPath, memoryFile(tc.mode)),
				"burstable shares": file(sctl, burstable, sfile),
			}
			want = map[string]string{
				"pod shares":       conv(512),
				"pod memory":       "268435456",
				"burstable shares": conv(512),
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("after PodStarting (-want +got):\n%s", d)
			}
			cr, err := m.ContainerResources(bu, &bu.Spec.Containers[0])
			if err != nil {
				t.Fatal(err)
			}
			if cr.CgroupParent != podPath {
				t.Errorf("CgroupParent %q, want %q", cr.CgroupParent, podPath)
			}

			// A Guaranteed pod lives in kubepods itself.
			gu := guaranteed("g1", "1")
			admit(t, m, gu)
			if err := m.PodStarting(gu); err != nil {
				t.Fatal(err)
			}
			if got := file("memory", kubepods+"/podg1", memoryFile(tc.mode)); got != "1073741824" {
				t.Errorf("Guaranteed pod memory %q, want 1073741824", got)
			}

			if err := m.RemovePod(bu.UID); err != nil {
				t.Fatal(err)
			}
			if got := file(sctl, burstable, sfile); got != conv(cgroups.MinShares) {
				t.Errorf("burstable shares after RemovePod: %s, want %s", got, conv(cgroups.MinShares))
			}
			if dir := filepath.Join(root, sctl, podPath); exists(dir) {
				t.Errorf("%s still there after RemovePod", dir)
			}
			if p := m.PendingRemovals(); len(p) != 0 {
				t.Errorf("PendingRemovals = %v, want none", p)
			}
		})
	}
}

func TestPodCgroupRemovalWaitsForProcesses(t *testing.T) {
	for _, mode := range []cgroups.Mode{cgroups.V1, cgroups.V2} {
		t.Run(mode.String(), func(t *testing.T) {
			cg, root := plainCgroups(t, mode)
			m := newManager(t, cm.Config{Topology: fake.UniformTopology(2, 4<<30), CgroupsPerQOS: true, Cgroups: cg})
			pod := bestEffort("u1")
			admit(t, m, pod)
			if err := m.PodStarting(pod); err != nil {
				t.Fatal(err)
			}
			path := "kubepods/besteffort/podu1"
			// A fixture tree's cgroup.procs is a plain file: the pid is only
			// written there, no process is moved.
			if err := cg.AddProcess(path, 999999); err != nil {
				t.Fatal(err)
			}
			if err := m.RemovePod(pod.UID); err != nil {
				t.Fatal(err)
			}
			if got := m.PendingRemovals(); !cmp.Equal(got, []string{path}) {
				t.Fatalf("PendingRemovals = %v, want [%s]", got, path)
			}
			if err := m.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := m.PendingRemovals(); len(got) != 1 {
				t.Fatalf("PendingRemovals after Sync with the process left = %v", got)
			}
			// The process is gone.
			var procs []string
			if mode == cgroups.V2 {
				procs = []string{filepath.Join(root, path, "cgroup.procs")}
			} else {
				for _, ctl := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
					procs = append(procs, filepath.Join(root, ctl, path, "cgroup.procs"))
				}
			}
			for _, f := range procs {
				if err := os.WriteFile(f, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := m.PendingRemovals(); len(got) != 0 {
				t.Errorf("PendingRemovals after the process left = %v", got)
			}
			if exists(filepath.Dir(procs[0])) {
				t.Errorf("%s still there", filepath.Dir(procs[0]))
			}
		})
	}
}

func TestNoCgroups(t *testing.T) {
	for _, perQOS := range []bool{false, true} {
		m := newManager(t, cm.Config{Topology: fake.UniformTopology(2, 4<<30), CgroupsPerQOS: perQOS, CPUCFSQuota: true})
		pod := guaranteed("u1", "1")
		admit(t, m, pod)
		if err := m.PodStarting(pod); err != nil {
			t.Fatal(err)
		}
		r, err := m.ContainerResources(pod, &pod.Spec.Containers[0])
		if err != nil {
			t.Fatal(err)
		}
		want := cgroups.Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 1 << 30}
		if r.CgroupParent != "" || !cmp.Equal(r.Linux, want) {
			t.Errorf("perQOS %v: %+v, want no parent and %+v", perQOS, r, want)
		}
		if err := m.RemovePod(pod.UID); err != nil || m.Sync() != nil || len(m.PendingRemovals()) != 0 {
			t.Errorf("perQOS %v: RemovePod %v, pending %v", perQOS, err, m.PendingRemovals())
		}
	}
}

func TestWithoutCgroupsPerQOS(t *testing.T) {
	cg, root := plainCgroups(t, cgroups.V2)
	m := newManager(t, cm.Config{Topology: fake.UniformTopology(2, 4<<30), Cgroups: cg, CgroupRoot: "knode"})
	pod := bestEffort("u1")
	admit(t, m, pod)
	if err := m.PodStarting(pod); err != nil {
		t.Fatal(err)
	}
	r, err := m.ContainerResources(pod, &pod.Spec.Containers[0])
	if err != nil || r.CgroupParent != "knode" {
		t.Errorf("CgroupParent %q, %v; want the cgroup root", r.CgroupParent, err)
	}
	if err := m.RemovePod(pod.UID); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.IsDir() {
			t.Errorf("made %s without cgroupsPerQOS", e.Name())
		}
	}
}

func TestSwap(t *testing.T) {
	// 1Gi request of 4Gi memory: a quarter of the 1Gi of swap.
	const limit, share = 2 << 30, 1 << 28
	burstable := podOf("b", rl("memory", "1Gi"), rl("memory", "2Gi"))
	for _, tc := range []struct {
		name     string
		mode     cgroups.Mode // 0: no Cgroups
		behavior string
		swap     int64
		pod      string
		want     map[string]string
	}{
		{"v1 LimitedSwap Burstable", cgroups.V1, swap.LimitedSwap, 1 << 30, "burstable", map[string]string{swap.MemswLimitFile: strconv.Itoa(limit + share)}},
		{"v1 NoSwap Burstable", cgroups.V1, swap.NoSwap, 1 << 30, "burstable", map[string]string{swap.MemswLimitFile: strconv.Itoa(limit)}},
		{"v2 LimitedSwap Burstable", cgroups.V2, swap.LimitedSwap, 1 << 30, "burstable", map[string]string{swap.SwapMaxFile: strconv.Itoa(share)}},
		{"v2 LimitedSwap Guaranteed", cgroups.V2, swap.LimitedSwap, 1 << 30, "guaranteed", map[string]string{swap.SwapMaxFile: "0"}},
		{"v2 default behavior", cgroups.V2, "", 1 << 30, "burstable", map[string]string{swap.SwapMaxFile: "0"}},
		{"v2 no swap on the node", cgroups.V2, swap.LimitedSwap, 0, "burstable", nil},
		{"no cgroups", 0, swap.LimitedSwap, 1 << 30, "burstable", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := cm.Config{
				Topology:      fake.UniformTopology(2, 4<<30),
				Capacity:      rl("cpu", "2", "memory", "4Gi"),
				CgroupsPerQOS: true,
				SwapBehavior:  tc.behavior,
				NodeSwapBytes: tc.swap,
			}
			if tc.mode != 0 {
				cfg.Cgroups, _ = plainCgroups(t, tc.mode)
			}
			m := newManager(t, cfg)
			pod := burstable
			if tc.pod == "guaranteed" {
				pod = guaranteed("g", "1")
			}
			admit(t, m, pod)
			if got := resources(t, m, pod, 0).Swap; !cmp.Equal(got, tc.want) {
				t.Errorf("Swap = %v, want %v", got, tc.want)
			}
		})
	}
}
