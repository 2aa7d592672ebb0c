package cgroups

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/agent/swap"
	podreg "knode/internal/registry/pod"
	"knode/internal/scheduler"
)

// Upstream's CFS constants (pkg/kubelet/cm).
const (
	MinShares      = 2
	MaxShares      = 262144
	SharesPerCPU   = 1024
	QuotaPeriod    = 100000 // µs, the default cpuCFSQuotaPeriod
	MinQuotaPeriod = 1000   // µs, the least quota upstream writes
)

// Resources is one cgroup's limits: the full desired state, which the
// Manager writes whole (so Update can also lift a limit).
//
// Zero values: CPUShares 0 leaves the kernel's weight alone; CPUQuota 0 or
// less is no cpu limit ("-1" on v1, "max" on v2); CPUPeriod 0 means
// QuotaPeriod; MemoryLimit and PidsLimit 0 or less are unlimited; empty
// CPUSetCPUs/CPUSetMems are not written (v1 copies the parent's into a new
// cgroup, v2 inherits). Swap maps a memory-controller file name
// (swap.SwapMaxFile or swap.MemswLimitFile) to its value; nil writes none.
type Resources struct {
	CPUShares   uint64 // v1 cpu.shares; v2 cpu.weight via CPUWeight
	CPUQuota    int64  // µs per CPUPeriod
	CPUPeriod   uint64 // µs
	MemoryLimit int64  // bytes
	PidsLimit   int64
	CPUSetCPUs  string
	CPUSetMems  string
	Swap        map[string]string
}

// MilliCPUToShares is upstream's: 1024 shares per cpu, 2 for none, at
// least MinShares and at most MaxShares.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	shares := milliCPU * SharesPerCPU / 1000
	return uint64(min(max(shares, MinShares), MaxShares))
}

// MilliCPUToQuota is upstream's: 0 (no limit) for 0 millicores, otherwise
// milliCPU*period/1000 and at least MinQuotaPeriod.
func MilliCPUToQuota(milliCPU int64, period uint64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	quota := milliCPU * int64(period) / 1000
	return max(quota, MinQuotaPeriod)
}

// CPUWeight converts v1 cpu.shares to v2 cpu.weight as runc does:
// [2, 262144] maps linearly onto [1, 10000]; 0 stays 0 (not written).
func CPUWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	shares = min(max(shares, MinShares), MaxShares)
	return 1 + ((shares-2)*9999)/262142
}

// PodOptions are the kubelet settings PodResources follows.
type PodOptions struct {
	// CPUCFSQuota is cpuCFSQuota (upstream default true): when false no
	// cpu limit is written (CPUQuota -1).
	CPUCFSQuota bool
	// CPUPeriod is cpuCFSQuotaPeriod in µs; 0 means QuotaPeriod.
	CPUPeriod uint64
	// PodPidsLimit is podPidsLimit; 0 or less is none.
	PodPidsLimit int64
}

func period(p uint64) uint64 {
	if p == 0 {
		return QuotaPeriod
	}
	return p
}

// PodResources is the pod cgroup's limits, as upstream's
// ResourceConfigForPod: cpu shares from the pod's summed requests (as the
// scheduler sums them: sidecars, init maximum, pod-level requests,
// overhead); quota and memory from the summed limits (regular containers
// and sidecars added, the largest init container if more, pod-level limits
// instead when set, overhead added to stated limits). By QoS class
// (podreg.PodQOS):
//   - Guaranteed: shares, quota and memory;
//   - Burstable: shares; quota only when every container (init included)
//     limits cpu, memory only when every container limits memory;
//   - BestEffort: MinShares only.
//
// The pids limit is PodPidsLimit for every class.
func PodResources(pod *corev1.Pod, opts PodOptions) Resources {
	req := scheduler.PodRequests(pod, false)
	lim, cpuDeclared, memDeclared := podLimits(pod)
	r := Resources{PidsLimit: max(opts.PodPidsLimit, 0)}
	p := period(opts.CPUPeriod)
	quota := MilliCPUToQuota(lim.MilliCPU, p)
	if !opts.CPUCFSQuota {
		quota = -1
	}
	switch podreg.PodQOS(pod) {
	case corev1.PodQOSGuaranteed:
		r.CPUShares = MilliCPUToShares(req.MilliCPU)
		r.CPUQuota, r.CPUPeriod, r.MemoryLimit = quota, p, lim.Memory
	case corev1.PodQOSBurstable:
		r.CPUShares = MilliCPUToShares(req.MilliCPU)
		if cpuDeclared {
			r.CPUQuota, r.CPUPeriod = quota, p
		}
		if memDeclared {
			r.MemoryLimit = lim.Memory
		}
	default:
		r.CPUShares = MinShares
	}
	return r
}

// podLimits sums the pod's cpu and memory limits as upstream's PodLimits
// and reports whether every container (init ones included) states a
// non-zero cpu (memory) limit, or the pod-level limits name it.
func podLimits(pod *corev1.Pod) (sum scheduler.Resources, cpuDeclared, memDeclared bool) {
	cpuDeclared, memDeclared = true, true
	note := func(l corev1.ResourceList) scheduler.Resources {
		if l.Cpu().IsZero() {
			cpuDeclared = false
		}
		if l.Memory().IsZero() {
			memDeclared = false
		}
		return scheduler.Resources{MilliCPU: l.Cpu().MilliValue(), Memory: l.Memory().Value()}
	}
	var sidecars, initPeak scheduler.Resources
	for i := range pod.Spec.Containers {
		c := note(pod.Spec.Containers[i].Resources.Limits)
		sum.MilliCPU += c.MilliCPU
		sum.Memory += c.Memory
	}
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		c := note(ic.Resources.Limits)
		if ic.RestartPolicy != nil && *ic.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum.MilliCPU += c.MilliCPU
			sum.Memory += c.Memory
			sidecars.MilliCPU += c.MilliCPU
			sidecars.Memory += c.Memory
			initPeak.MilliCPU = max(initPeak.MilliCPU, sidecars.MilliCPU)
			initPeak.Memory = max(initPeak.Memory, sidecars.Memory)
			continue
		}
		initPeak.MilliCPU = max(initPeak.MilliCPU, c.MilliCPU+sidecars.MilliCPU)
		initPeak.Memory = max(initPeak.Memory, c.Memory+sidecars.Memory)
	}
	sum.MilliCPU = max(sum.MilliCPU, initPeak.MilliCPU)
	sum.Memory = max(sum.Memory, initPeak.Memory)
	if pl := pod.Spec.Resources; pl != nil {
		if q, ok := pl.Limits[corev1.ResourceCPU]; ok && !q.IsZero() {
			sum.MilliCPU, cpuDeclared = q.MilliValue(), true
		}
		if q, ok := pl.Limits[corev1.ResourceMemory]; ok && !q.IsZero() {
			sum.Memory, memDeclared = q.Value(), true
		}
	}
	if oh := pod.Spec.Overhead; oh != nil {
		if sum.MilliCPU > 0 {
			sum.MilliCPU += oh.Cpu().MilliValue()
		}
		if sum.Memory > 0 {
			sum.Memory += oh.Memory().Value()
		}
	}
	return sum, cpuDeclared, memDeclared
}

// ContainerOptions are the kubelet settings and node facts
// ContainerResources follows.
type ContainerOptions struct {
	CPUCFSQuota bool   // as PodOptions
	CPUPeriod   uint64 // as PodOptions
	// CPUSetCPUs and CPUSetMems are the cpu and memory managers' decision
	// for the container ("" for none).
	CPUSetCPUs, CPUSetMems string
	// SwapController: the node has swap accounting (v2 memory.swap.max in
	// the kubelet's cgroup; v1 memory.memsw.*). Without it no swap file is
	// written, as upstream.
	SwapController bool
	// SwapBehavior, NodeMemory and NodeSwap (bytes) feed swap.Limit.
	SwapBehavior         string
	NodeMemory, NodeSwap int64
	// V2 selects the swap file (memory.swap.max rather than memsw).
	V2 bool
}

// ContainerResources is a container cgroup's limits, as kuberuntime sets a
// container's: shares from the cpu request (from the limit when only that
// is set); quota from the cpu limit (none without one, or without
// CPUCFSQuota); memory from the memory limit; swap from swap.Limit and
// swap.CgroupValues. No pids limit (that is the pod's).
func ContainerResources(pod *corev1.Pod, c *corev1.Container, opts ContainerOptions) Resources {
	cpuReq, cpuLim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	shares := MilliCPUToShares(cpuReq.MilliValue())
	if cpuReq.IsZero() && !cpuLim.IsZero() {
		shares = MilliCPUToShares(cpuLim.MilliValue())
	}
	r := Resources{
		CPUShares:   shares,
		MemoryLimit: c.Resources.Limits.Memory().Value(),
		CPUSetCPUs:  opts.CPUSetCPUs,
		CPUSetMems:  opts.CPUSetMems,
	}
	if opts.CPUCFSQuota {
		r.CPUPeriod = period(opts.CPUPeriod)
		r.CPUQuota = MilliCPUToQuota(cpuLim.MilliValue(), r.CPUPeriod)
	}
	if opts.SwapController {
		sw, err := swap.Limit(pod, c, opts.SwapBehavior, opts.NodeMemory, opts.NodeSwap)
		if err != nil {
			sw = 0 // upstream: "disallowing swap"
		}
		r.Swap = swap.CgroupValues(opts.SwapBehavior, r.MemoryLimit, sw, opts.V2)
	}
	return r
}

// QOSResources is the limits of the burstable and besteffort QoS cgroups
// for the pods active on the node, as upstream's QoS container manager
// sets them: besteffort gets MinShares; burstable gets the shares of the
// Burstable pods' summed cpu requests (MinShares for none). Upstream's
// QOSReserved memory limits (an alpha gate) are not computed. Guaranteed
// pods live in kubepods, whose limits come from NodeAllocatableResources.
func QOSResources(pods []*corev1.Pod) (burstable, bestEffort Resources) {
	var milli int64
	for _, p := range pods {
		if podreg.PodQOS(p) == corev1.PodQOSBurstable {
			milli += scheduler.PodRequests(p, false).MilliCPU
		}
	}
	return Resources{CPUShares: MilliCPUToShares(milli)}, Resources{CPUShares: MinShares}
}

// PIDsResource is the internal resource upstream reserves process IDs
// with (pidlimit.PIDs).
const PIDsResource corev1.ResourceName = "pid"

// NodeAllocatableResources is the kubepods cgroup's limits, as upstream's
// enforceNodeAllocatableCgroups: with enforcePods (enforceNodeAllocatable
// holds "pods") from capacity minus systemReserved and kubeReserved per
// resource (never below zero; hard eviction thresholds are not
// subtracted), otherwise from capacity. cpu gives shares (no quota), memory
// the memory limit, "pid" the pids limit; a resource capacity lacks is not
// limited.
func NodeAllocatableResources(capacity, systemReserved, kubeReserved corev1.ResourceList, enforcePods bool) Resources {
	value := func(name corev1.ResourceName) (int64, int64, bool) {
		q, ok := capacity[name]
		if !ok {
			return 0, 0, false
		}
		v := q.DeepCopy()
		if enforcePods {
			if s, ok := systemReserved[name]; ok {
				v.Sub(s)
			}
			if k, ok := kubeReserved[name]; ok {
				v.Sub(k)
			}
			if v.Sign() < 0 {
				v.Set(0)
			}
		}
		return v.Value(), v.MilliValue(), true
	}
	var r Resources
	if _, milli, ok := value(corev1.ResourceCPU); ok {
		r.CPUShares = MilliCPUToShares(milli)
	}
	if b, _, ok := value(corev1.ResourceMemory); ok {
		r.MemoryLimit = b
	}
	if n, _, ok := value(PIDsResource); ok {
		r.PidsLimit = n
	}
	return r
}

// File is one control file and the value written to it.
type File struct {
	Name, Value string
}

// V1Files is what the Manager writes for r on cgroup v1, per controller
// ("cpu", "cpuset", "memory", "pids"), in write order.
func V1Files(r Resources) map[string][]File {
	out := map[string][]File{}
	if r.CPUShares > 0 {
		out["cpu"] = append(out["cpu"], File{"cpu.shares", strconv.FormatUint(r.CPUShares, 10)})
	}
	quota := "-1"
	if r.CPUQuota > 0 {
		quota = strconv.FormatInt(r.CPUQuota, 10)
	}
	out["cpu"] = append(out["cpu"],
		File{"cpu.cfs_period_us", strconv.FormatUint(period(r.CPUPeriod), 10)},
		File{"cpu.cfs_quota_us", quota})
	mem := "-1"
	if r.MemoryLimit > 0 {
		mem = strconv.FormatInt(r.MemoryLimit, 10)
	}
	out["memory"] = append(out["memory"], File{"memory.limit_in_bytes", mem})
	out["memory"] = append(out["memory"], swapFiles(r.Swap)...)
	out["pids"] = []File{{"pids.max", pidsMax(r.PidsLimit)}}
	out["cpuset"] = cpusetFiles(r)
	if len(out["cpuset"]) == 0 {
		delete(out, "cpuset")
	}
	return out
}

// V2Files is what the Manager writes for r on cgroup v2, in write order.
func V2Files(r Resources) []File {
	var out []File
	if w := CPUWeight(r.CPUShares); w > 0 {
		out = append(out, File{"cpu.weight", strconv.FormatUint(w, 10)})
	}
	quota := "max"
	if r.CPUQuota > 0 {
		quota = strconv.FormatInt(r.CPUQuota, 10)
	}
	out = append(out, File{"cpu.max", quota + " " + strconv.FormatUint(period(r.CPUPeriod), 10)})
	mem := "max"
	if r.MemoryLimit > 0 {
		mem = strconv.FormatInt(r.MemoryLimit, 10)
	}
	out = append(out, File{"memory.max", mem})
	out = append(out, swapFiles(r.Swap)...)
	out = append(out, File{"pids.max", pidsMax(r.PidsLimit)})
	return append(out, cpusetFiles(r)...)
}

func pidsMax(n int64) string {
	if n > 0 {
		return strconv.FormatInt(n, 10)
	}
	return "max"
}

func cpusetFiles(r Resources) []File {
	var out []File
	if r.CPUSetCPUs != "" {
		out = append(out, File{"cpuset.cpus", r.CPUSetCPUs})
	}
	if r.CPUSetMems != "" {
		out = append(out, File{"cpuset.mems", r.CPUSetMems})
	}
	return out
}

// swapFiles lists the known swap files of m (swap.MemswLimitFile,
// swap.SwapMaxFile) in that order; other keys are ignored.
func swapFiles(m map[string]string) []File {
	var out []File
	for _, k := range []string{swap.MemswLimitFile, swap.SwapMaxFile} {
		if v, ok := m[k]; ok {
			out = append(out, File{k, v})
		}
	}
	return out
}
