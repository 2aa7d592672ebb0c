package cgroups

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/swap"
)

func TestMilliCPUToShares(t *testing.T) {
	for _, tc := range []struct {
		milli int64
		want  uint64
	}{
		{0, 2}, {-5, 2}, {1, 2}, {2, 2}, {3, 3}, {100, 102}, {1000, 1024},
		{256000, 262144}, {256001, 262144}, {1000000, 262144},
	} {
		if got := MilliCPUToShares(tc.milli); got != tc.want {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.want)
		}
	}
}

func TestMilliCPUToQuota(t *testing.T) {
	for _, tc := range []struct {
		milli  int64
		period uint64
		want   int64
	}{
		{0, 100000, 0}, {1, 100000, 1000}, {9, 100000, 1000}, {10, 100000, 1000},
		{11, 100000, 1100}, {250, 100000, 25000}, {1000, 100000, 100000},
		{3500, 100000, 350000}, {100, 50000, 5000}, {10, 50000, 1000},
	} {
		if got := MilliCPUToQuota(tc.milli, tc.period); got != tc.want {
			t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tc.milli, tc.period, got, tc.want)
		}
	}
}

func TestCPUWeight(t *testing.T) {
	for _, tc := range []struct{ shares, want uint64 }{
		{0, 0}, {1, 1}, {2, 1}, {3, 1}, {28, 1}, {29, 2}, {102, 4}, {1024, 39},
		{262143, 9999}, {262144, 10000}, {1 << 30, 10000},
	} {
		if got := CPUWeight(tc.shares); got != tc.want {
			t.Errorf("CPUWeight(%d) = %d, want %d", tc.shares, got, tc.want)
		}
	}
}

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func ctr(name string, req, lim corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func podOf(cs ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{Containers: cs}}
}

func TestPodResources(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	on := PodOptions{CPUCFSQuota: true}
	guaranteed := podOf(
		ctr("a", rl("cpu", "500m", "memory", "100Mi"), rl("cpu", "500m", "memory", "100Mi")),
		ctr("b", rl("cpu", "250m", "memory", "50Mi"), rl("cpu", "250m", "memory", "50Mi")))
	burstAll := podOf(
		ctr("a", rl("cpu", "100m", "memory", "10Mi"), rl("cpu", "1", "memory", "100Mi")),
		ctr("b", rl("cpu", "100m"), rl("cpu", "1", "memory", "100Mi")))
	burstPartial := podOf(
		ctr("a", rl("cpu", "100m"), rl("cpu", "1")),
		ctr("b", rl("memory", "10Mi"), rl("memory", "100Mi")))
	withInit := podOf(ctr("a", rl("cpu", "100m"), rl("cpu", "200m", "memory", "100Mi")))
	withInit.Spec.InitContainers = []corev1.Container{
		ctr("init", rl("cpu", "2"), rl("cpu", "3", "memory", "1Gi")),
	}
	withSidecar := podOf(ctr("a", rl("cpu", "100m"), rl("cpu", "200m", "memory", "100Mi")))
	sc := ctr("side", rl("cpu", "50m"), rl("cpu", "100m", "memory", "10Mi"))
	sc.RestartPolicy = &always
	withSidecar.Spec.InitContainers = []corev1.Container{sc}
	withOverhead := podOf(ctr("a", rl("cpu", "100m"), rl("memory", "100Mi")))
	withOverhead.Spec.Overhead = rl("cpu", "10m", "memory", "1Mi")
	// The recorded class wins over the spec (podreg.PodQOS): proves the
	// classification is the registry's.
	recorded := podOf(ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "1", "memory", "1Gi")))
	recorded.Status.QOSClass = corev1.PodQOSBestEffort
	podLevel := podOf(ctr("a", rl("cpu", "100m"), nil))
	podLevel.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "500m"), Limits: rl("cpu", "2", "memory", "1Gi")}

	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		opts PodOptions
		want Resources
	}{
		{"besteffort", podOf(ctr("a", nil, nil)), on, Resources{CPUShares: 2}},
		{"besteffort pids", podOf(ctr("a", nil, nil)), PodOptions{CPUCFSQuota: true, PodPidsLimit: 1024}, Resources{CPUShares: 2, PidsLimit: 1024}},
		{"guaranteed sums", guaranteed, on, Resources{CPUShares: 768, CPUQuota: 75000, CPUPeriod: 100000, MemoryLimit: 150 << 20}},
		{"guaranteed no cfs quota", guaranteed, PodOptions{}, Resources{CPUShares: 768, CPUQuota: -1, CPUPeriod: 100000, MemoryLimit: 150 << 20}},
		{"guaranteed period", guaranteed, PodOptions{CPUCFSQuota: true, CPUPeriod: 50000}, Resources{CPUShares: 768, CPUQuota: 37500, CPUPeriod: 50000, MemoryLimit: 150 << 20}},
		{"burstable all limits", burstAll, on, Resources{CPUShares: 204, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 200 << 20}},
		{"burstable partial limits", burstPartial, on, Resources{CPUShares: 102}},
		{"init max", withInit, on, Resources{CPUShares: 2048, CPUQuota: 300000, CPUPeriod: 100000, MemoryLimit: 1 << 30}},
		{"sidecar adds", withSidecar, on, Resources{CPUShares: 153, CPUQuota: 30000, CPUPeriod: 100000, MemoryLimit: 110 << 20}},
		{"overhead on stated limits", withOverhead, on, Resources{CPUShares: 112, MemoryLimit: 101 << 20}},
		{"recorded class", recorded, on, Resources{CPUShares: 2}},
		{"pod-level resources", podLevel, on, Resources{CPUShares: 512, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 1 << 30}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, PodResources(tc.pod, tc.opts)); d != "" {
				t.Errorf("PodResources (-want +got):\n%s", d)
			}
		})
	}
}

func TestContainerResources(t *testing.T) {
	burstable := podOf(ctr("a", rl("cpu", "100m", "memory", "1Gi"), rl("cpu", "500m", "memory", "2Gi")))
	c := &burstable.Spec.Containers[0]
	limitOnly := ctr("l", nil, rl("cpu", "2", "memory", "64Mi"))
	none := ctr("n", nil, nil)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		c    *corev1.Container
		opts ContainerOptions
		want Resources
	}{
		{"requests and limits", burstable, c, ContainerOptions{CPUCFSQuota: true},
			Resources{CPUShares: 102, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 2 << 30}},
		{"no cfs quota", burstable, c, ContainerOptions{},
			Resources{CPUShares: 102, MemoryLimit: 2 << 30}},
		{"shares from limit", podOf(limitOnly), &limitOnly, ContainerOptions{CPUCFSQuota: true},
			Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, MemoryLimit: 64 << 20}},
		{"nothing", podOf(none), &none, ContainerOptions{CPUCFSQuota: true, CPUSetCPUs: "1", CPUSetMems: "0"},
			Resources{CPUShares: 2, CPUPeriod: 100000, CPUSetCPUs: "1", CPUSetMems: "0"}},
		{"v2 limited swap", burstable, c, ContainerOptions{CPUCFSQuota: true, SwapController: true, V2: true,
			SwapBehavior: swap.LimitedSwap, NodeMemory: 8 << 30, NodeSwap: 4 << 30},
			Resources{CPUShares: 102, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 2 << 30,
				Swap: map[string]string{swap.SwapMaxFile: "536870912"}}},
		{"v1 noswap", burstable, c, ContainerOptions{SwapController: true, SwapBehavior: swap.NoSwap},
			Resources{CPUShares: 102, MemoryLimit: 2 << 30, Swap: map[string]string{swap.MemswLimitFile: "2147483648"}}},
		{"no swap controller", burstable, c, ContainerOptions{SwapBehavior: swap.LimitedSwap, NodeMemory: 8 << 30, NodeSwap: 4 << 30},
			Resources{CPUShares: 102, MemoryLimit: 2 << 30}},
		{"swap error is noswap", burstable, c, ContainerOptions{SwapController: true, V2: true, SwapBehavior: swap.LimitedSwap, NodeMemory: 0},
			Resources{CPUShares: 102, MemoryLimit: 2 << 30, Swap: map[string]string{swap.SwapMaxFile: "0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, ContainerResources(tc.pod, tc.c, tc.opts)); d != "" {
				t.Errorf("ContainerResources (-want +got):\n%s", d)
			}
		})
	}
}

func TestQOSResources(t *testing.T) {
	b1 := podOf(ctr("a", rl("cpu", "100m"), nil))
	b2 := podOf(ctr("a", rl("cpu", "1", "memory", "1Gi"), rl("memory", "2Gi")))
	g := podOf(ctr("a", rl("cpu", "4", "memory", "1Gi"), rl("cpu", "4", "memory", "1Gi")))
	be := podOf(ctr("a", nil, nil))
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want uint64
	}{
		{"none", nil, 2},
		{"only others", []*corev1.Pod{g, be}, 2},
		{"burstable sum", []*corev1.Pod{b1, g, b2, be}, 1126},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, e := QOSResources(tc.pods)
			if d := cmp.Diff(Resources{CPUShares: tc.want}, b); d != "" {
				t.Errorf("burstable (-want +got):\n%s", d)
			}
			if d := cmp.Diff(Resources{CPUShares: 2}, e); d != "" {
				t.Errorf("besteffort (-want +got):\n%s", d)
			}
		})
	}
}

func TestNodeAllocatableResources(t *testing.T) {
	capacity := rl("cpu", "2", "memory", "4Gi", "pid", "4096")
	for _, tc := range []struct {
		name      string
		sys, kube corev1.ResourceList
		enforce   bool
		capacity  corev1.ResourceList
		want      Resources
	}{
		{"capacity without enforcement", rl("cpu", "500m"), nil, false, capacity,
			Resources{CPUShares: 2048, MemoryLimit: 4 << 30, PidsLimit: 4096}},
		{"reserved subtracted", rl("cpu", "500m", "memory", "1Gi"), rl("cpu", "100m", "pid", "96"), true, capacity,
			Resources{CPUShares: 1433, MemoryLimit: 3 << 30, PidsLimit: 4000}},
		{"never negative", rl("memory", "8Gi"), nil, true, capacity,
			Resources{CPUShares: 2048, PidsLimit: 4096}},
		{"unknown resources unlimited", nil, nil, true, rl("cpu", "1"),
			Resources{CPUShares: 1024}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeAllocatableResources(tc.capacity, tc.sys, tc.kube, tc.enforce)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	full := Resources{CPUShares: 1024, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 1 << 20, PidsLimit: 10,
		CPUSetCPUs: "0-1", CPUSetMems: "0", Swap: map[string]string{swap.MemswLimitFile: "1048576", "bogus": "1"}}
	wantV1 := map[string][]File{
		"cpu":    {{"cpu.shares", "1024"}, {"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "50000"}},
		"memory": {{"memory.limit_in_bytes", "1048576"}, {"memory.memsw.limit_in_bytes", "1048576"}},
		"pids":   {{"pids.max", "10"}},
		"cpuset": {{"cpuset.cpus", "0-1"}, {"cpuset.mems", "0"}},
	}
	if d := cmp.Diff(wantV1, V1Files(full)); d != "" {
		t.Errorf("V1Files full (-want +got):\n%s", d)
	}
	wantV1Zero := map[string][]File{
		"cpu":    {{"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "-1"}},
		"memory": {{"memory.limit_in_bytes", "-1"}},
		"pids":   {{"pids.max", "max"}},
	}
	if d := cmp.Diff(wantV1Zero, V1Files(Resources{})); d != "" {
		t.Errorf("V1Files zero (-want +got):\n%s", d)
	}
	full.Swap = map[string]string{swap.SwapMaxFile: "0"}
	wantV2 := []File{{"cpu.weight", "39"}, {"cpu.max", "50000 100000"}, {"memory.max", "1048576"},
		{"memory.swap.max", "0"}, {"pids.max", "10"}, {"cpuset.cpus", "0-1"}, {"cpuset.mems", "0"}}
	if d := cmp.Diff(wantV2, V2Files(full)); d != "" {
		t.Errorf("V2Files full (-want +got):\n%s", d)
	}
	wantV2Zero := []File{{"cpu.max", "max 100000"}, {"memory.max", "max"}, {"pids.max", "max"}}
	if d := cmp.Diff(wantV2Zero, V2Files(Resources{})); d != "" {
		t.Errorf("V2Files zero (-want +got):\n%s", d)
	}
}

func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l      Layout
		class  corev1.PodQOSClass
		wantQ  string
		wantP  string
		wantKP string
	}{
		{"guaranteed", Layout{Root: "/", PerQOS: true}, corev1.PodQOSGuaranteed, "kubepods", "kubepods/podu1", "kubepods"},
		{"burstable", Layout{PerQOS: true}, corev1.PodQOSBurstable, "kubepods/burstable", "kubepods/burstable/podu1", "kubepods"},
		{"besteffort root", Layout{Root: "/custom/root/", PerQOS: true}, corev1.PodQOSBestEffort, "custom/root/kubepods/besteffort", "custom/root/kubepods/besteffort/podu1", "custom/root/kubepods"},
		{"no per-qos", Layout{Root: "/r"}, corev1.PodQOSBurstable, "r", "r", "r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{tc.l.Kubepods(), tc.l.QOS(tc.class), tc.l.Pod(tc.class, "u1"), tc.l.Container(tc.l.Pod(tc.class, "u1"), "c1")}
			want := []string{tc.wantKP, tc.wantQ, tc.wantP, tc.wantP + "/c1"}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
