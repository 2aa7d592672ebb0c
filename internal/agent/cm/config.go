package cm

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/devicemanager"
	"knode/internal/agent/host"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/swap"
	"knode/internal/agent/topology"
)

// enforceNodeAllocatable values.
const (
	EnforcePods = "pods"
	EnforceNone = "none"
)

// Config builds a Manager. The zero value of every optional field is usable;
// RootDir and Topology are required.
type Config struct {
	// RootDir holds cpu_manager_state and memory_manager_state (upstream's
	// names); it is created if missing.
	RootDir string
	// Topology is the machine: CPUs, cores, sockets and NUMA nodes.
	Topology host.Topology
	// Capacity is the machine's cpu and memory, and "pid"
	// (cgroups.PIDsResource) when known. Nil means cpu and memory from
	// Topology (its CPU count and the sum of its NUMA nodes' memory).
	Capacity corev1.ResourceList
	// KubeReserved and SystemReserved are kubeReserved and systemReserved.
	KubeReserved, SystemReserved corev1.ResourceList
	// EnforceNodeAllocatable is enforceNodeAllocatable: with "pods" the
	// kubepods cgroup is limited to allocatable (capacity minus the
	// reservations); empty or "none" limits it to capacity.
	EnforceNodeAllocatable []string

	// CgroupsPerQOS and CgroupRoot are cgroupsPerQOS and cgroupRoot (the
	// cgroups.Layout). Without CgroupsPerQOS no kubepods, QoS or pod
	// cgroups are made and containers are placed under CgroupRoot.
	CgroupsPerQOS bool
	CgroupRoot    string
	// Cgroups writes the cgroups; nil means none are written (decisions are
	// still made, and CgroupParent is "").
	Cgroups *cgroups.Manager

	// CPUCFSQuota is cpuCFSQuota (upstream's default is true).
	CPUCFSQuota bool
	// CPUCFSQuotaPeriod is cpuCFSQuotaPeriod, between 1ms and 1s; 0 means
	// upstream's 100ms.
	CPUCFSQuotaPeriod time.Duration
	// PodPidsLimit is podPidsLimit; 0 or less is none.
	PodPidsLimit int64

	// CPUManager is cpuManagerPolicy, its options, reservedSystemCPUs and
	// the reserved cpu quantity. A zero ReservedCPU means KubeReserved cpu
	// plus SystemReserved cpu.
	CPUManager cpumanager.Config
	// MemoryManager is memoryManagerPolicy and reservedMemory. A nil
	// NodeAllocatableReservation means KubeReserved plus SystemReserved
	// (memory and hugepages); the caller adds the hard eviction threshold
	// for memory, as upstream's reservation holds it.
	MemoryManager memorymanager.Config
	// NUMAHugepages are the hugepages reserved on each NUMA node, by node
	// ID, for the memory manager; nil means none.
	NUMAHugepages map[int][]host.Hugepages

	// TopologyManagerPolicy, TopologyManagerScope and
	// TopologyManagerPolicyOptions are the topology manager's settings;
	// "" means none and container.
	TopologyManagerPolicy        string
	TopologyManagerScope         string
	TopologyManagerPolicyOptions map[string]string

	// Devices is the device manager, started by the caller; nil means no
	// device plugins. New points its affinity at the topology manager.
	Devices *devicemanager.Manager

	// SwapBehavior is memorySwap.swapBehavior.
	SwapBehavior string
	// NodeSwapBytes is the machine's swap; 0 means none, and then no swap
	// file is written.
	NodeSwapBytes int64

	// Clock times admissions for the topology manager's metrics; nil means
	// the real clock.
	Clock clock.PassiveClock
	// Metrics receives the kubelet_topology_manager_admission_* series; nil
	// registers nothing.
	Metrics prometheus.Registerer
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// complete checks c and fills its defaults. Every problem found is
// returned, joined; each names the configuration field and the rule.
func (c *Config) complete() error {
	var errs []error
	if c.RootDir == "" {
		errs = append(errs, errors.New("cm: Config.RootDir is required (it holds the CPU and memory managers' state files)"))
	}
	if err := c.Topology.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cm: Config.Topology: %w", err))
	}
	if err := ValidateEnforceNodeAllocatable(c.EnforceNodeAllocatable, c.CgroupsPerQOS); err != nil {
		errs = append(errs, err)
	}
	if p := c.CPUCFSQuotaPeriod; p != 0 && (p < time.Millisecond || p > time.Second) {
		errs = append(errs, fmt.Errorf("cpuCFSQuotaPeriod %v: must be between 1ms and 1s, inclusive", p))
	}
	if err := swap.ValidateBehavior(c.SwapBehavior); err != nil {
		errs = append(errs, err)
	}
	if c.NodeSwapBytes < 0 {
		errs = append(errs, fmt.Errorf("cm: Config.NodeSwapBytes %d: must not be negative", c.NodeSwapBytes))
	}
	if c.CPUManager.ReservedCPU.IsZero() {
		c.CPUManager.ReservedCPU = sumReserved(corev1.ResourceCPU, c.KubeReserved, c.SystemReserved)
	}
	if err := c.CPUManager.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("cpuManagerPolicy %q: %w", c.CPUManager.Policy, err))
	}
	if c.MemoryManager.NodeAllocatableReservation == nil {
		c.MemoryManager.NodeAllocatableReservation = memoryReservation(c.KubeReserved, c.SystemReserved)
	}
	if err := c.MemoryManager.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("memoryManagerPolicy %q: %w", c.MemoryManager.Policy, err))
	}
	if c.TopologyManagerPolicy == "" {
		c.TopologyManagerPolicy = topology.PolicyNone
	}
	if c.TopologyManagerScope == "" {
		c.TopologyManagerScope = topology.ScopeContainer
	}
	if err := topology.ValidateConfig(c.TopologyManagerPolicy, c.TopologyManagerScope, c.TopologyManagerPolicyOptions, len(topology.NodeIDsOf(c.Topology))); err != nil {
		errs = append(errs, err)
	}
	if c.Capacity == nil {
		c.Capacity = capacityOf(c.Topology)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// ValidateEnforceNodeAllocatable checks enforceNodeAllocatable: "pods" (which needs
// cgroupsPerQOS, as upstream), or "none" alone. knode makes no
// system-reserved or kube-reserved cgroup, so those values are refused.
func ValidateEnforceNodeAllocatable(values []string, perQOS bool) error {
	for _, v := range values {
		switch v {
		case EnforcePods:
			if !perQOS {
				return fmt.Errorf("enforceNodeAllocatable %q: %q needs cgroupsPerQOS", values, EnforcePods)
			}
		case EnforceNone:
			if len(values) > 1 {
				return fmt.Errorf("enforceNodeAllocatable %q: %q cannot be combined with other values", values, EnforceNone)
			}
		default:
			return fmt.Errorf("enforceNodeAllocatable %q: %q is not supported; knode enforces only %q (or %q)", values, v, EnforcePods, EnforceNone)
		}
	}
	return nil
}

// sumReserved adds resource name over the lists.
func sumReserved(name corev1.ResourceName, lists ...corev1.ResourceList) resource.Quantity {
	var sum resource.Quantity
	for _, l := range lists {
		if q, ok := l[name]; ok {
			sum.Add(q)
		}
	}
	return sum
}

// memoryReservation is the memory and hugepages of the lists, summed.
func memoryReservation(lists ...corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range lists {
		for name := range l {
			if name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				out[name] = sumReserved(name, lists...)
			}
		}
	}
	return out
}

// capacityOf is a machine's cpu (its CPU count) and memory (its NUMA
// nodes' memory).
func capacityOf(t host.Topology) corev1.ResourceList {
	var mem uint64
	for _, n := range t.NUMANodes {
		mem += n.MemoryBytes
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(len(t.CPUs)), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(mem), resource.BinarySI),
	}
}
