package options

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/cm"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/swap"
	"knode/internal/agent/topology"
)

// Upstream's defaults for the resource settings.
const (
	DefaultCPUCFSQuotaPeriod         = 100 * time.Millisecond
	DefaultCPUManagerReconcilePeriod = 10 * time.Second
	// CgroupDriverCgroupfs is the only cgroup driver the agent has.
	CgroupDriverCgroupfs = "cgroupfs"
)

// ResourceOptions are the flags of the node's resource management.
type ResourceOptions struct {
	FailSwapOn                   bool
	CgroupsPerQOS                bool
	CgroupRoot                   string
	CgroupDriver                 string
	EnforceNodeAllocatable       []string
	CPUCFSQuota                  bool
	CPUCFSQuotaPeriod            time.Duration
	PodMaxPids                   int64
	CPUManagerPolicy             string
	CPUManagerPolicyOptions      map[string]string
	CPUManagerReconcilePeriod    time.Duration
	ReservedCPUs                 string
	MemoryManagerPolicy          string
	ReservedMemory               []string
	TopologyManagerPolicy        string
	TopologyManagerScope         string
	TopologyManagerPolicyOptions map[string]string
	TopologyRoot                 string
}

// ResourceSettings are the resource managers' settings, flags over file
// over upstream's defaults.
type ResourceSettings struct {
	FailSwapOn             bool
	SwapBehavior           string
	CgroupsPerQOS          bool
	CgroupRoot             string
	EnforceNodeAllocatable []string
	CPUCFSQuota            bool
	CPUCFSQuotaPeriod      time.Duration
	// PodPidsLimit is podPidsLimit; 0 or -1 is none.
	PodPidsLimit int64
	// CPUManager's ReservedCPU is kubeReserved cpu plus systemReserved cpu.
	CPUManager                cpumanager.Config
	CPUManagerReconcilePeriod time.Duration
	// MemoryManager's NodeAllocatableReservation is kubeReserved plus
	// systemReserved; the agent adds the hard eviction threshold once it
	// knows the machine's memory.
	MemoryManager                memorymanager.Config
	TopologyManagerPolicy        string
	TopologyManagerScope         string
	TopologyManagerPolicyOptions map[string]string
	// TopologyRoot, when set, is a directory holding a sys/ tree the
	// machine's CPU and NUMA topology is read from instead of /sys
	// (tests, with the fixture machines).
	TopologyRoot string
}

func (o *ResourceOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.FailSwapOn, "fail-swap-on", true, "refuse to start when swap is enabled on the machine")
	fs.BoolVar(&o.CgroupsPerQOS, "cgroups-per-qos", true, "place pods in the kubepods, burstable and besteffort cgroups, each pod in its own")
	fs.StringVar(&o.CgroupRoot, "cgroup-root", "", "cgroup under which kubepods is made (default: the hierarchy's root)")
	fs.StringVar(&o.CgroupDriver, "cgroup-driver", CgroupDriverCgroupfs, `cgroup driver; only "cgroupfs"`)
	fs.StringSliceVar(&o.EnforceNodeAllocatable, "enforce-node-allocatable", []string{cm.EnforcePods}, `what to limit to allocatable: "pods", or "none"`)
	fs.BoolVar(&o.CPUCFSQuota, "cpu-cfs-quota", true, "enforce cpu limits with CFS quota")
	fs.DurationVar(&o.CPUCFSQuotaPeriod, "cpu-cfs-quota-period", DefaultCPUCFSQuotaPeriod, "CFS quota period")
	fs.Int64Var(&o.PodMaxPids, "pod-max-pids", -1, "most processes a pod may have; -1 for no limit")
	fs.StringVar(&o.CPUManagerPolicy, "cpu-manager-policy", cpumanager.PolicyNone, `CPU manager policy: "none" or "static"`)
	fs.StringToStringVar(&o.CPUManagerPolicyOptions, "cpu-manager-policy-options", nil, `static policy options, e.g. full-pcpus-only=true`)
	fs.DurationVar(&o.CPUManagerReconcilePeriod, "cpu-manager-reconcile-period", DefaultCPUManagerReconcilePeriod, "how often running containers' cpusets are brought in line with the CPU manager")
	fs.StringVar(&o.ReservedCPUs, "reserved-cpus", "", "CPUs kept for the system, e.g. 0-1; overrides the cpu of kube-reserved and system-reserved for the static policy")
	fs.StringVar(&o.MemoryManagerPolicy, "memory-manager-policy", memorymanager.PolicyNone, `memory manager policy: "None" or "Static"`)
	fs.StringArrayVar(&o.ReservedMemory, "reserved-memory", nil, "memory reserved on a NUMA node, <node>:<resource>=<quantity>[,...]; repeat for more nodes")
	fs.StringVar(&o.TopologyManagerPolicy, "topology-manager-policy", topology.PolicyNone, `topology manager policy: "none", "best-effort", "restricted" or "single-numa-node"`)
	fs.StringVar(&o.TopologyManagerScope, "topology-manager-scope", topology.ScopeContainer, `topology manager scope: "container" or "pod"`)
	fs.StringToStringVar(&o.TopologyManagerPolicyOptions, "topology-manager-policy-options", nil, "topology manager options, e.g. prefer-closest-numa-nodes=true")
	fs.StringVar(&o.TopologyRoot, "topology-root", "", "read the CPU and NUMA topology from <dir>/sys instead of /sys (tests)")
	_ = fs.MarkHidden("topology-root")
}

// completeResources applies file, then the flags set on fs. kubeReserved and
// systemReserved are the settings already read.
func (o *ResourceOptions) completeResources(fs *pflag.FlagSet, file kubeletconfig.KubeletConfiguration, kubeReserved, systemReserved corev1.ResourceList) (ResourceSettings, []error) {
	s := ResourceSettings{
		FailSwapOn:                true,
		CgroupsPerQOS:             true,
		EnforceNodeAllocatable:    []string{cm.EnforcePods},
		CPUCFSQuota:               true,
		CPUCFSQuotaPeriod:         DefaultCPUCFSQuotaPeriod,
		PodPidsLimit:              -1,
		CPUManagerReconcilePeriod: DefaultCPUManagerReconcilePeriod,
		TopologyManagerPolicy:     topology.PolicyNone,
		TopologyManagerScope:      topology.ScopeContainer,
	}
	s.CPUManager.Policy = cpumanager.PolicyNone
	s.MemoryManager.Policy = memorymanager.PolicyNone
	driver := CgroupDriverCgroupfs
	var errs []error

	// The file.
	if file.FailSwapOn != nil {
		s.FailSwapOn = *file.FailSwapOn
	}
	s.SwapBehavior = file.MemorySwap.SwapBehavior
	if file.CgroupsPerQOS != nil {
		s.CgroupsPerQOS = *file.CgroupsPerQOS
	}
	s.CgroupRoot = file.CgroupRoot
	if file.CgroupDriver != "" {
		driver = file.CgroupDriver
	}
	if file.EnforceNodeAllocatable != nil {
		s.EnforceNodeAllocatable = file.EnforceNodeAllocatable
	}
	if file.CPUCFSQuota != nil {
		s.CPUCFSQuota = *file.CPUCFSQuota
	}
	if file.CPUCFSQuotaPeriod != nil {
		s.CPUCFSQuotaPeriod = file.CPUCFSQuotaPeriod.Duration
	}
	if file.PodPidsLimit != nil {
		s.PodPidsLimit = *file.PodPidsLimit
	}
	if file.CPUManagerPolicy != "" {
		s.CPUManager.Policy = file.CPUManagerPolicy
	}
	s.CPUManager.Options = file.CPUManagerPolicyOptions
	if file.CPUManagerReconcilePeriod.Duration != 0 {
		s.CPUManagerReconcilePeriod = file.CPUManagerReconcilePeriod.Duration
	}
	s.CPUManager.ReservedSystemCPUs = file.ReservedSystemCPUs
	if file.MemoryManagerPolicy != "" {
		s.MemoryManager.Policy = file.MemoryManagerPolicy
	}
	for _, r := range file.ReservedMemory {
		s.MemoryManager.ReservedMemory = append(s.MemoryManager.ReservedMemory, memorymanager.Reservation{NUMANode: r.NumaNode, Limits: r.Limits})
	}
	if file.TopologyManagerPolicy != "" {
		s.TopologyManagerPolicy = file.TopologyManagerPolicy
	}
	if file.TopologyManagerScope != "" {
		s.TopologyManagerScope = file.TopologyManagerScope
	}
	s.TopologyManagerPolicyOptions = file.TopologyManagerPolicyOptions

	// The flags set on the command line.
	overrides := []struct {
		flag  string
		apply func()
	}{
		{"fail-swap-on", func() { s.FailSwapOn = o.FailSwapOn }},
		{"cgroups-per-qos", func() { s.CgroupsPerQOS = o.CgroupsPerQOS }},
		{"cgroup-root", func() { s.CgroupRoot = o.CgroupRoot }},
		{"cgroup-driver", func() { driver = o.CgroupDriver }},
		{"enforce-node-allocatable", func() { s.EnforceNodeAllocatable = o.EnforceNodeAllocatable }},
		{"cpu-cfs-quota", func() { s.CPUCFSQuota = o.CPUCFSQuota }},
		{"cpu-cfs-quota-period", func() { s.CPUCFSQuotaPeriod = o.CPUCFSQuotaPeriod }},
		{"pod-max-pids", func() { s.PodPidsLimit = o.PodMaxPids }},
		{"cpu-manager-policy", func() { s.CPUManager.Policy = o.CPUManagerPolicy }},
		{"cpu-manager-policy-options", func() { s.CPUManager.Options = o.CPUManagerPolicyOptions }},
		{"cpu-manager-reconcile-period", func() { s.CPUManagerReconcilePeriod = o.CPUManagerReconcilePeriod }},
		{"reserved-cpus", func() { s.CPUManager.ReservedSystemCPUs = o.ReservedCPUs }},
		{"memory-manager-policy", func() { s.MemoryManager.Policy = o.MemoryManagerPolicy }},
		{"topology-manager-policy", func() { s.TopologyManagerPolicy = o.TopologyManagerPolicy }},
		{"topology-manager-scope", func() { s.TopologyManagerScope = o.TopologyManagerScope }},
		{"topology-manager-policy-options", func() { s.TopologyManagerPolicyOptions = o.TopologyManagerPolicyOptions }},
	}
	for _, ov := range overrides {
		if fs.Changed(ov.flag) {
			ov.apply()
		}
	}
	if fs.Changed("reserved-memory") {
		s.MemoryManager.ReservedMemory = nil
		for _, spec := range o.ReservedMemory {
			r, err := ParseReservedMemory(spec)
			if err != nil {
				errs = append(errs, fmt.Errorf("--reserved-memory %q: %w", spec, err))
				continue
			}
			s.MemoryManager.ReservedMemory = append(s.MemoryManager.ReservedMemory, r)
		}
	}

	// What the managers reserve.
	for _, l := range []corev1.ResourceList{kubeReserved, systemReserved} {
		if q, ok := l[corev1.ResourceCPU]; ok {
			s.CPUManager.ReservedCPU.Add(q)
		}
		for name, q := range l {
			if name != corev1.ResourceMemory && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				continue
			}
			if s.MemoryManager.NodeAllocatableReservation == nil {
				s.MemoryManager.NodeAllocatableReservation = corev1.ResourceList{}
			}
			sum := s.MemoryManager.NodeAllocatableReservation[name]
			sum.Add(q)
			s.MemoryManager.NodeAllocatableReservation[name] = sum
		}
	}

	// The rules.
	if driver != CgroupDriverCgroupfs {
		errs = append(errs, fmt.Errorf("cgroupDriver (--cgroup-driver) %q: knode has only the %q driver", driver, CgroupDriverCgroupfs))
	}
	if err := swap.ValidateBehavior(s.SwapBehavior); err != nil {
		errs = append(errs, fmt.Errorf("memorySwap.swapBehavior: %w", err))
	}
	if err := cm.ValidateEnforceNodeAllocatable(s.EnforceNodeAllocatable, s.CgroupsPerQOS); err != nil {
		errs = append(errs, fmt.Errorf("%w (--enforce-node-allocatable, --cgroups-per-qos)", err))
	}
	if s.CPUCFSQuotaPeriod < time.Millisecond || s.CPUCFSQuotaPeriod > time.Second {
		errs = append(errs, fmt.Errorf("cpuCFSQuotaPeriod (--cpu-cfs-quota-period) %v: must be between 1ms and 1s, inclusive", s.CPUCFSQuotaPeriod))
	}
	if s.PodPidsLimit < -1 {
		errs = append(errs, fmt.Errorf("podPidsLimit (--pod-max-pids) %d: must be -1 (no limit), 0 (no limit) or positive", s.PodPidsLimit))
	}
	if err := s.CPUManager.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cpuManagerPolicy (--cpu-manager-policy) %q: %w", s.CPUManager.Policy, err))
	}
	if s.CPUManagerReconcilePeriod <= 0 {
		errs = append(errs, fmt.Errorf("cpuManagerReconcilePeriod (--cpu-manager-reconcile-period) %v: must be greater than 0", s.CPUManagerReconcilePeriod))
	}
	if err := s.MemoryManager.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("memoryManagerPolicy (--memory-manager-policy) %q: %w", s.MemoryManager.Policy, err))
	}
	if s.MemoryManager.Policy == memorymanager.PolicyStatic && len(s.MemoryManager.ReservedMemory) == 0 {
		errs = append(errs, errors.New("reservedMemory (--reserved-memory): the Static memory manager policy needs memory reserved on at least one NUMA node"))
	}
	// The machine's NUMA node count is checked when the managers start; 1
	// passes every rule that does not depend on it.
	if err := topology.ValidateConfig(s.TopologyManagerPolicy, s.TopologyManagerScope, s.TopologyManagerPolicyOptions, 1); err != nil {
		errs = append(errs, err)
	}
	return s, errs
}

// ParseReservedMemory parses one --reserved-memory value:
// <numa node>:<resource>=<quantity>[,<resource>=<quantity>...].
func ParseReservedMemory(spec string) (memorymanager.Reservation, error) {
	node, list, ok := strings.Cut(spec, ":")
	if !ok {
		return memorymanager.Reservation{}, errors.New("must be <numa node>:<resource>=<quantity>[,...]")
	}
	id, err := strconv.ParseInt(strings.TrimSpace(node), 10, 32)
	if err != nil || id < 0 {
		return memorymanager.Reservation{}, fmt.Errorf("NUMA node %q: must be a non-negative integer", node)
	}
	r := memorymanager.Reservation{NUMANode: int32(id), Limits: corev1.ResourceList{}}
	for _, item := range strings.Split(list, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return memorymanager.Reservation{}, fmt.Errorf("%q: must be <resource>=<quantity>", item)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return memorymanager.Reservation{}, fmt.Errorf("%s %q: %w", name, value, err)
		}
		if _, dup := r.Limits[corev1.ResourceName(name)]; dup {
			return memorymanager.Reservation{}, fmt.Errorf("%s: given twice for NUMA node %d", name, id)
		}
		r.Limits[corev1.ResourceName(name)] = q
	}
	return r, nil
}

// EnforcesPods reports whether enforceNodeAllocatable holds "pods".
func (s ResourceSettings) EnforcesPods() bool {
	return slices.Contains(s.EnforceNodeAllocatable, cm.EnforcePods)
}

// reserveCPUs applies reservedSystemCPUs to the reservations as the kubelet
// does: when it names CPUs, their count replaces the cpu of both
// kubeReserved and systemReserved (as systemReserved cpu), so allocatable
// cpu leaves them out. A set that does not parse is left to the CPU
// manager's rules, which report it.
func reserveCPUs(reservedSystemCPUs string, kubeReserved, systemReserved corev1.ResourceList) (corev1.ResourceList, corev1.ResourceList) {
	set, err := cpuset.Parse(reservedSystemCPUs)
	if err != nil || set.Size() == 0 {
		return kubeReserved, systemReserved
	}
	kube := kubeReserved.DeepCopy()
	delete(kube, corev1.ResourceCPU)
	if len(kube) == 0 {
		kube = nil
	}
	system := systemReserved.DeepCopy()
	if system == nil {
		system = corev1.ResourceList{}
	}
	system[corev1.ResourceCPU] = *resource.NewQuantity(int64(set.Size()), resource.DecimalSI)
	return kube, system
}
