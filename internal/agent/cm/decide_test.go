package cm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/devicemanager"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/runtime"
)

func rl(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestKubepodsResources(t *testing.T) {
	capacity := rl("cpu", "8", "memory", "16Gi", "pid", "1000")
	for _, tc := range []struct {
		name         string
		kube, system corev1.ResourceList
		reservedCPUs string
		enforce      bool
		want         cgroups.Resources
	}{
		{"capacity when not enforced", rl("cpu", "1", "memory", "1Gi"), nil, "", false,
			cgroups.Resources{CPUShares: 8192, MemoryLimit: 16 << 30, PidsLimit: 1000}},
		{"allocatable when enforced", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "500m", "pid", "100"), "", true,
			cgroups.Resources{CPUShares: 6656, MemoryLimit: 15 << 30, PidsLimit: 900}},
		{"reservedSystemCPUs replaces the reserved cpu", rl("cpu", "1", "memory", "1Gi"), rl("cpu", "500m"), "0-1", true,
			cgroups.Resources{CPUShares: 6144, MemoryLimit: 15 << 30, PidsLimit: 1000}},
		{"reservedSystemCPUs with no reservations", nil, nil, "3", true,
			cgroups.Resources{CPUShares: 7168, MemoryLimit: 16 << 30, PidsLimit: 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube, system := tc.kube.DeepCopy(), tc.system.DeepCopy()
			got := kubepodsResources(capacity, tc.kube, tc.system, tc.reservedCPUs, tc.enforce)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if !cmp.Equal(kube, tc.kube) || !cmp.Equal(system, tc.system) {
				t.Errorf("the reservations were changed")
			}
		})
	}
}

func TestQuotaPeriod(t *testing.T) {
	for d, want := range map[time.Duration]uint64{0: 0, time.Millisecond: 1000, 100 * time.Millisecond: 100000, time.Second: 1000000} {
		if got := quotaPeriod(d); got != want {
			t.Errorf("quotaPeriod(%v) = %d, want %d", d, got, want)
		}
	}
}

func TestDeviceOptions(t *testing.T) {
	env, mounts, devices := deviceOptions(nil)
	if env != nil || mounts != nil || devices != nil {
		t.Errorf("nil RunOptions: %v %v %v", env, mounts, devices)
	}
	env, mounts, devices = deviceOptions(&devicemanager.RunOptions{
		Envs:        map[string]string{"Z": "1", "A": "2", "M": "3"},
		Mounts:      []devicemanager.Mount{{ContainerPath: "/c", HostPath: "/h", ReadOnly: true}},
		Devices:     []devicemanager.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/y", Permissions: "rwm"}},
		Annotations: map[string]string{"a": "b"},
		CDIDevices:  []string{"vendor.com/dev=1"},
	})
	if d := cmp.Diff([]corev1.EnvVar{{Name: "A", Value: "2"}, {Name: "M", Value: "3"}, {Name: "Z", Value: "1"}}, env); d != "" {
		t.Errorf("env (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]runtime.Mount{{HostPath: "/h", ContainerPath: "/c", ReadOnly: true}}, mounts); d != "" {
		t.Errorf("mounts (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]runtime.Device{{HostPath: "/dev/y", ContainerPath: "/dev/x", Permissions: "rwm"}}, devices); d != "" {
		t.Errorf("devices (-want +got):\n%s", d)
	}
}

func TestPodCgroups(t *testing.T) {
	bu := &corev1.Pod{}
	bu.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}
	for _, tc := range []struct {
		name   string
		layout cgroups.Layout
		pod    *corev1.Pod
		want   []string
	}{
		{"known pod", cgroups.Layout{PerQOS: true}, bu, []string{"kubepods/burstable/podu"}},
		{"unknown pod: every class", cgroups.Layout{Root: "/r", PerQOS: true}, nil,
			[]string{"r/kubepods/podu", "r/kubepods/burstable/podu", "r/kubepods/besteffort/podu"}},
		{"no per-QoS cgroups: none (never the root)", cgroups.Layout{}, bu, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, podCgroups(tc.layout, tc.pod, "u")); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	ok := func() Config {
		return Config{RootDir: t.TempDir(), Topology: fake.UniformTopology(2, 4<<30)}
	}
	for _, tc := range []struct {
		name string
		mut  func(*Config)
		want string // "" for no error
	}{
		{"valid", func(*Config) {}, ""},
		{"no root dir", func(c *Config) { c.RootDir = "" }, "Config.RootDir is required"},
		{"no topology", func(c *Config) { c.Topology.CPUs = nil }, "cm: Config.Topology:"},
		{"cpu manager policy", func(c *Config) { c.CPUManager.Policy = "x" }, `cpuManagerPolicy "x": unknown policy: "x"`},
		{"static without reservation", func(c *Config) { c.CPUManager.Policy = cpumanager.PolicyStatic },
			`cpuManagerPolicy "static": [cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero`},
		{"static with kubeReserved cpu", func(c *Config) {
			c.CPUManager.Policy = cpumanager.PolicyStatic
			c.KubeReserved = rl("cpu", "1")
		}, ""},
		{"reservedSystemCPUs off the machine", func(c *Config) {
			c.CPUManager = cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "5"}
		}, `cpuManagerPolicy "static": reservedSystemCPUs "5": CPUs "5" are not on this machine`},
		{"memory manager policy", func(c *Config) { c.MemoryManager.Policy = "static" }, `memoryManagerPolicy "static": unknown policy: "static"`},
		{"reservedMemory that does not add up", func(c *Config) {
			c.KubeReserved = rl("memory", "1Gi")
			c.MemoryManager = memorymanager.Config{Policy: memorymanager.PolicyStatic,
				ReservedMemory: []memorymanager.Reservation{{NUMANode: 0, Limits: rl("memory", "512Mi")}}}
		}, `reservedMemory: the total amount "512Mi" of type "memory" is not equal to the value "1Gi" determined by Node Allocatable feature`},
		{"topology manager policy", func(c *Config) { c.TopologyManagerPolicy = "tight" }, `topologyManagerPolicy (--topology-manager-policy) "tight" must be one of`},
		{"topology manager scope", func(c *Config) { c.TopologyManagerScope = "node" }, `topologyManagerScope (--topology-manager-scope) "node"`},
		{"swap behavior", func(c *Config) { c.SwapBehavior = "UnlimitedSwap" }, `memorySwap.swapBehavior "UnlimitedSwap" must be one of`},
		{"negative swap", func(c *Config) { c.NodeSwapBytes = -1 }, "Config.NodeSwapBytes -1: must not be negative"},
		{"pods without cgroupsPerQOS", func(c *Config) { c.EnforceNodeAllocatable = []string{EnforcePods} }, `enforceNodeAllocatable ["pods"]: "pods" needs cgroupsPerQOS`},
		{"none with pods", func(c *Config) {
			c.CgroupsPerQOS = true
			c.EnforceNodeAllocatable = []string{EnforceNone, EnforcePods}
		}, `enforceNodeAllocatable ["none" "pods"]: "none" cannot be combined with other values`},
		{"kube-reserved enforcement", func(c *Config) {
			c.CgroupsPerQOS = true
			c.EnforceNodeAllocatable = []string{"kube-reserved"}
		}, `enforceNodeAllocatable ["kube-reserved"]: "kube-reserved" is not supported`},
		{"quota period too long", func(c *Config) { c.CPUCFSQuotaPeriod = 2 * time.Second }, "cpuCFSQuotaPeriod 2s: must be between 1ms and 1s, inclusive"},
		{"quota period at the bounds", func(c *Config) { c.CPUCFSQuotaPeriod = time.Millisecond }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok()
			tc.mut(&cfg)
			_, err := New(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("New: %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}
