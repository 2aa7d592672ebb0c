package nodestatus

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/host"
)

func TestMachineInfo(t *testing.T) {
	const gi = int64(1) << 30
	// The default eviction reservation of a 100Gi root filesystem
	// (nodefs.available<10%, float32 percentage as upstream).
	const nodefs10 = 10737418400
	defaultCapacity := func() corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:              q("4"),
			corev1.ResourceMemory:           q("8Gi"),
			corev1.ResourcePods:             q("110"),
			corev1.ResourceEphemeralStorage: q("100Gi"),
			"hugepages-2Mi":                 q("0"),
			"hugepages-1Gi":                 q("0"),
		}
	}
	defaultAllocatable := func() corev1.ResourceList {
		return corev1.ResourceList{
			corev1.ResourceCPU:              q("4"),
			corev1.ResourceMemory:           q("8092Mi"),
			corev1.ResourcePods:             q("110"),
			corev1.ResourceEphemeralStorage: qb(100*gi - nodefs10),
			"hugepages-2Mi":                 q("0"),
			"hugepages-1Gi":                 q("0"),
		}
	}
	with := func(l corev1.ResourceList, kv ...any) corev1.ResourceList {
		out := l.DeepCopy()
		for i := 0; i < len(kv); i += 2 {
			name := corev1.ResourceName(kv[i].(string))
			if kv[i+1] == nil {
				delete(out, name)
				continue
			}
			out[name] = kv[i+1].(resource.Quantity)
		}
		return out
	}
	noThresholds := []Threshold{}

	tests := []struct {
		name            string
		cfg             func(c *Config)
		facts           host.Facts
		capacity        corev1.ResourceList
		allocatable     corev1.ResourceList
		nodeInfo        corev1.NodeSystemInfo
		wantCapacity    corev1.ResourceList
		wantAllocatable corev1.ResourceList
		wantNodeInfo    corev1.NodeSystemInfo
	}{
		{
			name:            "defaults: memory less 100Mi, ephemeral-storage less 10%",
			facts:           machine(),
			wantCapacity:    defaultCapacity(),
			wantAllocatable: defaultAllocatable(),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name: "kube and system reserved add up with the eviction reservation",
			cfg: func(c *Config) {
				c.KubeReserved = corev1.ResourceList{corev1.ResourceCPU: q("100m"), corev1.ResourceMemory: q("500Mi"), corev1.ResourceEphemeralStorage: q("1Gi")}
				c.SystemReserved = corev1.ResourceList{corev1.ResourceCPU: q("200m"), corev1.ResourceMemory: q("500Mi"), "pid": q("1000")}
			},
			facts:        machine(),
			wantCapacity: defaultCapacity(),
			wantAllocatable: with(defaultAllocatable(),
				"cpu", q("3700m"),
				"memory", q("7092Mi"),
				"ephemeral-storage", qb(100*gi-nodefs10-gi),
			),
			wantNodeInfo: corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name: "reserved larger than capacity clamps at zero",
			cfg: func(c *Config) {
				c.KubeReserved = corev1.ResourceList{corev1.ResourceCPU: q("10"), corev1.ResourceMemory: q("16Gi"), corev1.ResourcePods: q("200")}
			},
			facts:           machine(),
			wantCapacity:    defaultCapacity(),
			wantAllocatable: with(defaultAllocatable(), "cpu", q("0"), "memory", q("0"), "pods", q("0")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name:            "no thresholds: allocatable equals capacity",
			cfg:             func(c *Config) { c.EvictionHard = noThresholds },
			facts:           machine(),
			wantCapacity:    defaultCapacity(),
			wantAllocatable: defaultCapacity(),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name: "percentage memory threshold and absolute nodefs threshold",
			cfg: func(c *Config) {
				c.EvictionHard = []Threshold{{Signal: SignalMemoryAvailable, Percentage: 0.1}, {Signal: SignalNodeFsAvailable, Quantity: qp("5Gi")}, {Signal: SignalPIDAvailable, Quantity: qp("100")}}
			},
			facts:        machine(),
			wantCapacity: defaultCapacity(),
			// 10% (float32) of 8Gi is 858993472 bytes.
			wantAllocatable: with(defaultAllocatable(), "memory", qb(8*gi-858993472), "ephemeral-storage", q("95Gi")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name: "hugepages are capacity and come out of allocatable memory",
			facts: func() host.Facts {
				f := machine()
				f.Hugepages = []host.Hugepages{{PageSize: 2 << 20, Pages: 512}, {PageSize: uint64(gi), Pages: 2}}
				return f
			}(),
			wantCapacity:    with(defaultCapacity(), "hugepages-2Mi", q("1Gi"), "hugepages-1Gi", q("2Gi")),
			wantAllocatable: with(defaultAllocatable(), "hugepages-2Mi", q("1Gi"), "hugepages-1Gi", q("2Gi"), "memory", q("5020Mi")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name: "hugepages larger than memory leave no allocatable memory",
			facts: func() host.Facts {
				f := machine()
				f.Hugepages = []host.Hugepages{{PageSize: uint64(gi), Pages: 9}}
				return f
			}(),
			wantCapacity:    with(defaultCapacity(), "hugepages-2Mi", nil, "hugepages-1Gi", q("9Gi")),
			wantAllocatable: with(defaultAllocatable(), "hugepages-2Mi", nil, "hugepages-1Gi", q("9Gi"), "memory", q("0")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name:            "a hugepage size the machine no longer has is removed",
			facts:           func() host.Facts { f := machine(); f.Hugepages = f.Hugepages[:1]; return f }(),
			capacity:        defaultCapacity(),
			allocatable:     defaultAllocatable(),
			wantCapacity:    with(defaultCapacity(), "hugepages-1Gi", nil),
			wantAllocatable: with(defaultAllocatable(), "hugepages-1Gi", nil),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name:            "a failed hugepages reading keeps the entries",
			facts:           withErr(func() host.Facts { f := machine(); f.Hugepages = nil; return f }(), host.FactHugepages, errors.New("x")),
			capacity:        defaultCapacity(),
			wantCapacity:    defaultCapacity(),
			wantAllocatable: defaultAllocatable(),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name:            "failed cpu and memory readings report zero, as upstream without machine info",
			facts:           withErr(withErr(machine(), host.FactCPUs, errors.New("x")), host.FactMemory, errors.New("y")),
			wantCapacity:    with(defaultCapacity(), "cpu", q("0"), "memory", q("0")),
			wantAllocatable: with(defaultAllocatable(), "cpu", q("0"), "memory", q("0")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1"},
		},
		{
			name:            "a failed filesystem reading keeps the previous ephemeral-storage",
			facts:           withErr(machine(), host.FactRootFS, errors.New("x")),
			capacity:        corev1.ResourceList{corev1.ResourceEphemeralStorage: q("50Gi")},
			wantCapacity:    with(defaultCapacity(), "ephemeral-storage", q("50Gi")),
			wantAllocatable: with(defaultAllocatable(), "ephemeral-storage", qb(50*gi-int64(float64(float32(0.1))*float64(50*gi)))),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name:            "a failed filesystem reading on a new node reports no ephemeral-storage",
			facts:           withErr(machine(), host.FactRootFS, errors.New("x")),
			wantCapacity:    with(defaultCapacity(), "ephemeral-storage", nil),
			wantAllocatable: with(defaultAllocatable(), "ephemeral-storage", nil),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name:            "failed IDs keep the previous ones",
			facts:           withErr(machine(), host.FactIDs, errors.New("x")),
			nodeInfo:        corev1.NodeSystemInfo{MachineID: "old-m", BootID: "old-b", KernelVersion: "kept"},
			wantCapacity:    defaultCapacity(),
			wantAllocatable: defaultAllocatable(),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "old-m", BootID: "old-b", KernelVersion: "kept", Swap: swapOf(0)},
		},
		{
			name:            "other resources are kept and fully allocatable",
			facts:           machine(),
			capacity:        corev1.ResourceList{"example.com/gpu": q("2")},
			wantCapacity:    with(defaultCapacity(), "example.com/gpu", q("2")),
			wantAllocatable: with(defaultAllocatable(), "example.com/gpu", q("2")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
		{
			name: "swap capacity is the machine's SwapTotal",
			facts: func() host.Facts {
				f := machine()
				f.Memory.SwapTotal, f.Memory.SwapFree = 2*uint64(gi), uint64(gi)
				return f
			}(),
			wantCapacity:    defaultCapacity(),
			wantAllocatable: defaultAllocatable(),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(2 * gi)},
		},
		{
			name:            "maxPods",
			cfg:             func(c *Config) { c.MaxPods = 20 },
			facts:           machine(),
			wantCapacity:    with(defaultCapacity(), "pods", q("20")),
			wantAllocatable: with(defaultAllocatable(), "pods", q("20")),
			wantNodeInfo:    corev1.NodeSystemInfo{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1", Swap: swapOf(0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			node := newNode()
			node.Status.Capacity = tt.capacity.DeepCopy()
			node.Status.Allocatable = tt.allocatable.DeepCopy()
			node.Status.NodeInfo = tt.nodeInfo
			if err := MachineInfo(cfg)(node, Facts{Host: tt.facts}, t0); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantCapacity, node.Status.Capacity, cmpOpts...); diff != "" {
				t.Errorf("capacity (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAllocatable, node.Status.Allocatable, cmpOpts...); diff != "" {
				t.Errorf("allocatable (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNodeInfo, node.Status.NodeInfo, cmpOpts...); diff != "" {
				t.Errorf("nodeInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionInfoAndFriends(t *testing.T) {
	tests := []struct {
		name    string
		cfg     func(c *Config)
		facts   host.Facts
		before  corev1.NodeStatus
		want    corev1.NodeStatus
		wantErr string
	}{
		{
			name:  "all fields",
			facts: machine(),
			before: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{
				KubeProxyVersion: "v1.29.0", MachineID: "kept",
			}},
			want: corev1.NodeStatus{
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
				NodeInfo: corev1.NodeSystemInfo{
					MachineID:               "kept",
					KernelVersion:           "6.1.0",
					OSImage:                 "Debian GNU/Linux 12 (bookworm)",
					ContainerRuntimeVersion: "knode://0.1.0",
					KubeletVersion:          "v1.34.1",
					OperatingSystem:         "linux",
					Architecture:            "arm64",
				},
			},
		},
		{
			name:  "unknown runtime version and another port",
			cfg:   func(c *Config) { c.RuntimeVersion = ""; c.KubeletPort = 10350 },
			facts: machine(),
			want: corev1.NodeStatus{
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10350}},
				NodeInfo: corev1.NodeSystemInfo{
					KernelVersion:           "6.1.0",
					OSImage:                 "Debian GNU/Linux 12 (bookworm)",
					ContainerRuntimeVersion: "knode://Unknown",
					KubeletVersion:          "v1.34.1",
					OperatingSystem:         "linux",
					Architecture:            "arm64",
				},
			},
		},
		{
			name:    "failed OS reading: VersionInfo fails, GoRuntime falls back to the agent's platform",
			facts:   withErr(machine(), host.FactOS, errors.New("open /proc/sys/kernel/osrelease: no such file or directory")),
			before:  corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KernelVersion: "old"}},
			wantErr: "error getting version info: open /proc/sys/kernel/osrelease: no such file or directory",
			want: corev1.NodeStatus{
				DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
				NodeInfo: corev1.NodeSystemInfo{
					KernelVersion:   "old",
					OperatingSystem: goos(),
					Architecture:    goarch(),
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			node := newNode()
			node.Status = tt.before
			err := Apply([]Setter{VersionInfo(cfg), DaemonEndpoints(cfg), GoRuntime()}, node, Facts{Host: tt.facts}, t0)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("error = %q, want %q", gotErr, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, node.Status, cmpOpts...); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPressureConditions(t *testing.T) {
	type cond = corev1.NodeCondition
	memFacts := func(available uint64) host.Facts { f := machine(); f.Memory.Available = available; return f }
	diskFacts := func(available uint64) host.Facts { f := machine(); f.RootFS.Available = available; return f }
	pidFacts := func(running uint64) host.Facts {
		f := machine()
		f.PIDs = host.PIDs{Max: 1000, Running: running}
		return f
	}
	memFalse := func(transition, heartbeat timeT) cond {
		return cond{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available", LastTransitionTime: mt(transition), LastHeartbeatTime: mt(heartbeat)}
	}
	memTrue := func(transition, heartbeat timeT) cond {
		return cond{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientMemory", Message: "kubelet has insufficient memory available", LastTransitionTime: mt(transition), LastHeartbeatTime: mt(heartbeat)}
	}

	tests := []struct {
		name       string
		setter     func(Config) Setter
		thresholds string
		facts      host.Facts
		before     []cond
		want       []cond
	}{
		{
			name:   "first evaluation: Unknown to False is a transition",
			setter: MemoryPressureCondition,
			facts:  machine(),
			want:   []cond{memFalse(t1, t1)},
		},
		{
			name:   "first evaluation under pressure",
			setter: MemoryPressureCondition,
			facts:  memFacts(50 << 20),
			want:   []cond{memTrue(t1, t1)},
		},
		{
			name:   "unchanged status keeps the transition time and refreshes the heartbeat",
			setter: MemoryPressureCondition,
			facts:  machine(),
			before: []cond{memFalse(t0, t0)},
			want:   []cond{memFalse(t0, t1)},
		},
		{
			name:   "exactly at the threshold is no pressure",
			setter: MemoryPressureCondition,
			facts:  memFacts(100 << 20),
			before: []cond{memFalse(t0, t0)},
			want:   []cond{memFalse(t0, t1)},
		},
		{
			name:   "one byte below the threshold turns it True",
			setter: MemoryPressureCondition,
			facts:  memFacts(100<<20 - 1),
			before: []cond{memFalse(t0, t0)},
			want:   []cond{memTrue(t1, t1)},
		},
		{
			name:   "pressure relieved turns it False",
			setter: MemoryPressureCondition,
			facts:  machine(),
			before: []cond{memTrue(t0, t0)},
			want:   []cond{memFalse(t1, t1)},
		},
		{
			name:   "Unknown from the node lifecycle controller becomes False",
			setter: MemoryPressureCondition,
			facts:  machine(),
			before: []cond{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastTransitionTime: mt(t0), LastHeartbeatTime: mt(t0)}},
			want:   []cond{memFalse(t1, t1)},
		},
		{
			name:   "failed reading keeps True",
			setter: MemoryPressureCondition,
			facts:  withErr(machine(), host.FactMemory, errors.New("x")),
			before: []cond{memTrue(t0, t0)},
			want:   []cond{memTrue(t0, t1)},
		},
		{
			name:   "failed reading on a new condition is False",
			setter: MemoryPressureCondition,
			facts:  withErr(machine(), host.FactMemory, errors.New("x")),
			want:   []cond{memFalse(t1, t1)},
		},
		{
			name:       "no thresholds, no pressure",
			setter:     MemoryPressureCondition,
			thresholds: "none",
			facts:      memFacts(0),
			want:       []cond{memFalse(t1, t1)},
		},
		{
			name:   "other conditions are left alone",
			setter: MemoryPressureCondition,
			facts:  machine(),
			before: []cond{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: mt(t0)}},
			want:   []cond{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: mt(t0)}, memFalse(t1, t1)},
		},
		{
			name:   "disk: default imagefs.available<15% fires before nodefs 10%",
			setter: DiskPressureCondition,
			facts:  diskFacts(14 << 30),
			want:   []cond{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "kubelet has disk pressure", LastTransitionTime: mt(t1), LastHeartbeatTime: mt(t1)}},
		},
		{
			name:       "disk: exactly at 10% is no pressure",
			setter:     DiskPressureCondition,
			thresholds: "nodefs.available<10%",
			facts:      diskFacts(10737418400),
			want:       []cond{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastTransitionTime: mt(t1), LastHeartbeatTime: mt(t1)}},
		},
		{
			name:   "disk: inodes below 5%",
			setter: DiskPressureCondition,
			facts:  func() host.Facts { f := machine(); f.RootFS.InodesFree = 49999; return f }(),
			want:   []cond{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasDiskPressure", Message: "kubelet has disk pressure", LastTransitionTime: mt(t1), LastHeartbeatTime: mt(t1)}},
		},
		{
			name:   "pid: the defaults have no pid threshold",
			setter: PIDPressureCondition,
			facts:  pidFacts(1000),
			want:   []cond{{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available", LastTransitionTime: mt(t1), LastHeartbeatTime: mt(t1)}},
		},
		{
			name:       "pid: below the threshold",
			setter:     PIDPressureCondition,
			thresholds: "pid.available<10%",
			facts:      pidFacts(901),
			want:       []cond{{Type: corev1.NodePIDPressure, Status: corev1.ConditionTrue, Reason: "KubeletHasInsufficientPID", Message: "kubelet has insufficient PID available", LastTransitionTime: mt(t1), LastHeartbeatTime: mt(t1)}},
		},
		{
			name:       "memory thresholds do not drive disk pressure",
			setter:     DiskPressureCondition,
			thresholds: "memory.available<100Gi",
			facts:      machine(),
			want:       []cond{{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure", LastTransitionTime: mt(t1), LastHeartbeatTime: mt(t1)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := baseConfig()
			switch tt.thresholds {
			case "":
			case "none":
				cfg.EvictionHard = []Threshold{}
			default:
				th, err := ParseThresholds(tt.thresholds)
				if err != nil {
					t.Fatal(err)
				}
				cfg.EvictionHard = th
			}
			node := newNode()
			node.Status.Conditions = tt.before
			if err := tt.setter(cfg)(node, Facts{Host: tt.facts}, t1); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, node.Status.Conditions, cmpOpts...); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadyCondition(t *testing.T) {
	type cond = corev1.NodeCondition
	ready := func(transition, heartbeat timeT, message string) cond {
		return cond{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: message, LastTransitionTime: mt(transition), LastHeartbeatTime: mt(heartbeat)}
	}
	notReady := func(transition, heartbeat timeT, message string) cond {
		return cond{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: message, LastTransitionTime: mt(transition), LastHeartbeatTime: mt(heartbeat)}
	}
	full := corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi"), corev1.ResourcePods: q("110"), corev1.ResourceEphemeralStorage: q("1Gi")}
	errRuntime := errors.New("container runtime is down")
	errNetwork := errors.New("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")

	tests := []struct {
		name     string
		capacity corev1.ResourceList
		facts    Facts
		before   []cond
		want     []cond
	}{
		{
			name:     "first sync, healthy",
			capacity: full,
			want:     []cond{ready(t1, t1, "kubelet is posting ready status")},
		},
		{
			name:     "still ready keeps the transition time",
			capacity: full,
			before:   []cond{ready(t0, t0, "kubelet is posting ready status")},
			want:     []cond{ready(t0, t1, "kubelet is posting ready status")},
		},
		{
			name:     "one error: its bare message",
			capacity: full,
			facts:    Facts{ReadyErrors: []error{errRuntime, nil}},
			before:   []cond{ready(t0, t0, "kubelet is posting ready status")},
			want:     []cond{notReady(t1, t1, "container runtime is down")},
		},
		{
			name:     "two errors: aggregated",
			capacity: full,
			facts:    Facts{ReadyErrors: []error{errRuntime, errNetwork}},
			want:     []cond{notReady(t1, t1, "[container runtime is down, "+errNetwork.Error()+"]")},
		},
		{
			name:     "still not ready with a new message keeps the transition time",
			capacity: full,
			facts:    Facts{ReadyErrors: []error{errNetwork}},
			before:   []cond{notReady(t0, t0, "container runtime is down")},
			want:     []cond{notReady(t0, t1, errNetwork.Error())},
		},
		{
			name:     "missing ephemeral-storage",
			capacity: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi"), corev1.ResourcePods: q("110")},
			want:     []cond{notReady(t1, t1, "missing node capacity for resources: ephemeral-storage")},
		},
		{
			name:  "missing everything, after the other errors",
			facts: Facts{ReadyErrors: []error{errRuntime}},
			want:  []cond{notReady(t1, t1, "[container runtime is down, missing node capacity for resources: cpu, memory, pods, ephemeral-storage]")},
		},
		{
			name:     "soft requirements warn on a ready node",
			capacity: full,
			facts:    Facts{SoftRequirements: errors.New("cgroup v1 is deprecated")},
			want:     []cond{ready(t1, t1, "kubelet is posting ready status. WARNING: cgroup v1 is deprecated")},
		},
		{
			name:     "soft requirements warn on a not-ready node",
			capacity: full,
			facts:    Facts{ReadyErrors: []error{errRuntime}, SoftRequirements: errors.New("cgroup v1 is deprecated")},
			want:     []cond{notReady(t1, t1, "container runtime is down. WARNING: cgroup v1 is deprecated")},
		},
		{
			name:     "Unknown from the node lifecycle controller to True is a transition",
			capacity: full,
			before:   []cond{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: "Kubelet stopped posting node status.", LastTransitionTime: mt(t0), LastHeartbeatTime: mt(t0)}},
			want:     []cond{ready(t1, t1, "kubelet is posting ready status")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := newNode()
			node.Status.Capacity = tt.capacity
			node.Status.Conditions = tt.before
			if err := ReadyCondition()(node, tt.facts, t1); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, node.Status.Conditions, cmpOpts...); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func swapOf(bytes int64) *corev1.NodeSwapStatus {
	return &corev1.NodeSwapStatus{Capacity: &bytes}
}

func TestDeviceResources(t *testing.T) {
	node := newNode()
	node.Status.Capacity = corev1.ResourceList{"cpu": q("4"), "example.com/old": q("2")}
	node.Status.Allocatable = corev1.ResourceList{"cpu": q("4"), "example.com/old": q("2")}
	DeviceResources(node,
		map[corev1.ResourceName]int64{"example.com/gpu": 4, "example.com/nic": 2},
		map[corev1.ResourceName]int64{"example.com/gpu": 3},
		[]string{"example.com/old"})
	wantCapacity := corev1.ResourceList{"cpu": q("4"), "example.com/gpu": q("4"), "example.com/nic": q("2"), "example.com/old": q("0")}
	wantAllocatable := corev1.ResourceList{"cpu": q("4"), "example.com/gpu": q("3"), "example.com/nic": q("0"), "example.com/old": q("0")}
	if d := cmp.Diff(wantCapacity, node.Status.Capacity, cmpOpts...); d != "" {
		t.Errorf("capacity (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantAllocatable, node.Status.Allocatable, cmpOpts...); d != "" {
		t.Errorf("allocatable (-want +got):\n%s", d)
	}
}
