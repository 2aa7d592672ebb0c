package cm

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/runtime"
	"knode/internal/agent/topology"
	podreg "knode/internal/registry/pod"
)

// Manager is the container manager. It is safe for concurrent use: one
// mutex serialises every method, and Admit holds it while the device
// plugins answer.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	layout cgroups.Layout
	topo   *topology.Manager
	// cpu and mem are nil with the none / None policies.
	cpu *cpuProvider
	mem *memoryProvider
	// swapController: swap files are written (see ContainerResources).
	swapController, v2 bool
	nodeMemory         int64

	mu sync.Mutex
	// active are the admitted pods, by UID; the caller's objects are copied.
	active map[types.UID]*corev1.Pod
	// pending are pod cgroups still to remove.
	pending map[string]bool
	// generation counts changes of the CPU manager's shared pool.
	generation uint64
}

// New checks cfg, restores the CPU and memory managers' state from RootDir,
// builds the topology manager over the hint providers and, with Cgroups and
// CgroupsPerQOS, creates the kubepods and QoS cgroups.
func New(cfg Config) (*Manager, error) {
	if err := cfg.complete(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.RootDir, 0o750); err != nil {
		return nil, fmt.Errorf("cm: %w", err)
	}
	m := &Manager{
		cfg:        cfg,
		log:        cfg.Logger,
		layout:     cgroups.Layout{Root: cfg.CgroupRoot, PerQOS: cfg.CgroupsPerQOS},
		nodeMemory: cfg.Capacity.Memory().Value(),
		active:     map[types.UID]*corev1.Pod{},
		pending:    map[string]bool{},
		generation: 1,
	}
	cpuPath := filepath.Join(cfg.RootDir, cpumanager.StateFile)
	cpuPolicy, cpuState, err := restoreCPU(cpuPath, cfg.Topology, cfg.CPUManager)
	if err != nil {
		return nil, err
	}
	memPath := filepath.Join(cfg.RootDir, memorymanager.StateFile)
	memPolicy, memState, err := restoreMemory(memPath, cfg.Topology, cfg.NUMAHugepages, cfg.MemoryManager)
	if err != nil {
		return nil, err
	}
	if cg := cfg.Cgroups; cg != nil {
		m.v2 = cg.Mode() == cgroups.V2
		m.swapController = cfg.NodeSwapBytes > 0 && slices.Contains(cg.Enforced(), "memory")
		if err := m.createNodeCgroups(); err != nil {
			return nil, err
		}
	}
	// Last, as it registers the metrics: a failed New can be retried.
	m.topo, err = topology.New(topology.Config{
		Policy:   cfg.TopologyManagerPolicy,
		Scope:    cfg.TopologyManagerScope,
		Options:  cfg.TopologyManagerPolicyOptions,
		Topology: cfg.Topology,
		Clock:    cfg.Clock,
		Metrics:  cfg.Metrics,
	})
	if err != nil {
		return nil, err
	}
	// Upstream's order: devices, then CPUs, then memory.
	if cfg.Devices != nil {
		cfg.Devices.SetAffinity(m.topo.Affinity)
		m.topo.AddHintProvider(cfg.Devices)
	}
	if cpuPolicy != nil {
		m.cpu = &cpuProvider{policy: cpuPolicy, state: cpuState, path: cpuPath, affinity: m.topo.Affinity}
		m.topo.AddHintProvider(m.cpu)
	}
	if memPolicy != nil {
		m.mem = &memoryProvider{policy: memPolicy, state: memState, path: memPath, affinity: m.topo.Affinity}
		m.topo.AddHintProvider(m.mem)
	}
	return m, nil
}

// createNodeCgroups makes kubepods and the QoS cgroups.
func (m *Manager) createNodeCgroups() error {
	if !m.layout.PerQOS {
		return nil
	}
	r := kubepodsResources(m.cfg.Capacity, m.cfg.KubeReserved, m.cfg.SystemReserved,
		m.cfg.CPUManager.ReservedSystemCPUs, slices.Contains(m.cfg.EnforceNodeAllocatable, EnforcePods))
	if err := m.cfg.Cgroups.Create(m.layout.Kubepods(), r); err != nil {
		return fmt.Errorf("cm: creating the %s cgroup: %w", cgroups.KubepodsName, err)
	}
	return m.updateQOSLocked()
}

// updateQOSLocked writes the burstable and besteffort cgroups for the
// active pods (creating them if missing). Call with mu held, or before the
// Manager is shared.
func (m *Manager) updateQOSLocked() error {
	if m.cfg.Cgroups == nil || !m.layout.PerQOS {
		return nil
	}
	burstable, bestEffort := cgroups.QOSResources(slices.Collect(maps.Values(m.active)))
	if err := m.cfg.Cgroups.Create(m.layout.QOS(corev1.PodQOSBurstable), burstable); err != nil {
		return fmt.Errorf("cm: updating the QoS cgroups: %w", err)
	}
	if err := m.cfg.Cgroups.Create(m.layout.QOS(corev1.PodQOSBestEffort), bestEffort); err != nil {
		return fmt.Errorf("cm: updating the QoS cgroups: %w", err)
	}
	return nil
}

// sharedPoolLocked is the CPU manager's shared pool ("" with the none
// policy).
func (m *Manager) sharedPoolLocked() string {
	if m.cpu == nil {
		return ""
	}
	return m.cpu.state.DefaultCPUSet.String()
}

// Admit decides whether pod may run here: the topology manager merges the
// hint providers' hints under its policy and scope and has them allocate
// every container. On rejection reason and message are upstream's
// (TopologyAffinityError, SMTAlignmentError, UnexpectedAdmissionError) and
// whatever this admission allocated is released. A pod admitted before is
// admitted again without a new allocation; after a restart the providers
// find its allocations in their restored state. Admit blocks while device
// plugins answer.
func (m *Manager) Admit(pod *corev1.Pod) (reason, message string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.active[pod.UID]; ok {
		return "", "", true
	}
	before := m.sharedPoolLocked()
	defer m.noteSharedPoolLocked(before)
	r := m.topo.Admit(pod)
	if !r.Admit {
		if err := m.releaseLocked(pod.UID); err != nil {
			m.log.Error("releasing a rejected pod's resources", "pod", podRef(pod), "err", err)
		}
		return r.Reason, r.Message, false
	}
	m.active[pod.UID] = pod.DeepCopy()
	return "", "", true
}

func podRef(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// noteSharedPoolLocked counts a change of the shared pool since before.
func (m *Manager) noteSharedPoolLocked(before string) {
	if m.sharedPoolLocked() != before {
		m.generation++
	}
}

// releaseLocked frees the pod's CPUs, memory, devices and stored hints.
func (m *Manager) releaseLocked(uid types.UID) error {
	var errs []error
	if m.cfg.Devices != nil {
		m.cfg.Devices.RemovePod(string(uid))
	}
	if m.cpu != nil {
		errs = append(errs, m.cpu.removePod(string(uid)))
	}
	if m.mem != nil {
		errs = append(errs, m.mem.removePod(string(uid)))
	}
	m.topo.RemovePod(string(uid))
	return errors.Join(errs...)
}

// SharedPoolGeneration counts changes of the CPU manager's shared pool (the
// cpuset of every container without exclusive CPUs). It starts at 1; when
// it differs from the value the caller last acted on, the caller asks the
// runtime to apply ContainerResources again to running containers.
func (m *Manager) SharedPoolGeneration() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.generation
}

// PodStarting prepares the pod's cgroup before its first container: it
// refreshes the QoS cgroups' cpu shares for the active pods, then creates
// the pod's cgroup (or updates it, when it exists) with
// cgroups.PodResources. Without Cgroups or CgroupsPerQOS it does nothing.
func (m *Manager) PodStarting(pod *corev1.Pod) error {
	if m.cfg.Cgroups == nil || !m.layout.PerQOS {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.updateQOSLocked(); err != nil {
		return err
	}
	path := m.layout.Pod(podreg.PodQOS(pod), string(pod.UID))
	delete(m.pending, path)
	r := cgroups.PodResources(pod, cgroups.PodOptions{
		CPUCFSQuota:  m.cfg.CPUCFSQuota,
		CPUPeriod:    quotaPeriod(m.cfg.CPUCFSQuotaPeriod),
		PodPidsLimit: m.cfg.PodPidsLimit,
	})
	if err := m.cfg.Cgroups.Create(path, r); err != nil {
		return fmt.Errorf("cm: creating the cgroup of pod %s: %w", podRef(pod), err)
	}
	return nil
}

// ContainerResources is the container's runtime.ContainerResources (it has
// the runtime.ResourceDecider signature): its pod's cgroup as parent ("" without
// Cgroups), cgroups.ContainerResources with the container's exclusive CPUs
// or else the shared pool (nothing with the none CPU policy), its memory
// nodes (Static memory policy), its swap, and the device plugins' env
// (sorted by name), mounts and device nodes. Swap files are decided only
// when Cgroups has the memory controller and NodeSwapBytes is above 0 (on
// v2 memory.swap.max, on v1 memory.memsw.limit_in_bytes; see
// swap.CgroupValues). A container of a pod that was not admitted gets the
// shared pool.
func (m *Manager) ContainerResources(pod *corev1.Pod, c *corev1.Container) (runtime.ContainerResources, error) {
	if pod == nil || c == nil {
		return runtime.ContainerResources{}, errors.New("cm: ContainerResources needs a pod and a container")
	}
	uid := string(pod.UID)
	opts := cgroups.ContainerOptions{
		CPUCFSQuota:    m.cfg.CPUCFSQuota,
		CPUPeriod:      quotaPeriod(m.cfg.CPUCFSQuotaPeriod),
		SwapController: m.swapController,
		SwapBehavior:   m.cfg.SwapBehavior,
		NodeMemory:     m.nodeMemory,
		NodeSwap:       m.cfg.NodeSwapBytes,
		V2:             m.v2,
	}
	m.mu.Lock()
	if m.cpu != nil {
		opts.CPUSetCPUs = m.cpu.cpuset(uid, c.Name).String()
	}
	if m.mem != nil {
		opts.CPUSetMems = memorymanager.Mems(m.mem.state, uid, c.Name)
	}
	m.mu.Unlock()
	out := runtime.ContainerResources{Linux: cgroups.ContainerResources(pod, c, opts)}
	if m.cfg.Cgroups != nil {
		out.CgroupParent = m.layout.Pod(podreg.PodQOS(pod), uid)
	}
	if m.cfg.Devices != nil {
		out.Env, out.Mounts, out.Devices = deviceOptions(m.cfg.Devices.RunOptions(uid, c.Name))
	}
	return out, nil
}

// RemovePod forgets the pod: it releases its CPUs, memory and devices
// (writing the state files), refreshes the QoS cgroups and removes the
// pod's cgroup. A cgroup that still holds a process is kept for Sync to
// retry (see PendingRemovals). A pod the Manager does not know (one of an
// earlier run) is released too, and its cgroup looked for under every QoS
// class. The error joins what failed; the pod is forgotten regardless.
func (m *Manager) RemovePod(uid types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.removePodLocked(uid)
}

func (m *Manager) removePodLocked(uid types.UID) error {
	before := m.sharedPoolLocked()
	pod := m.active[uid]
	delete(m.active, uid)
	errs := []error{m.releaseLocked(uid)}
	m.noteSharedPoolLocked(before)
	if m.cfg.Cgroups != nil {
		errs = append(errs, m.updateQOSLocked())
		for _, path := range podCgroups(m.layout, pod, string(uid)) {
			m.pending[path] = true
			errs = append(errs, m.removeCgroupLocked(path))
		}
	}
	return errors.Join(errs...)
}

// RemoveStale removes (as RemovePod) every pod that is admitted or holds
// CPUs or memory in the state files but is not in keep, and frees the
// devices of every pod not in keep. After a restart the caller passes the
// pods that still exist, as upstream's removeStaleState does. Cgroups of
// unknown pods are not searched for.
func (m *Manager) RemoveStale(keep []types.UID) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	stale := map[types.UID]bool{}
	for uid := range m.active {
		stale[uid] = true
	}
	if m.cpu != nil {
		for uid := range m.cpu.state.Assignments {
			stale[types.UID(uid)] = true
		}
	}
	if m.mem != nil {
		for uid := range m.mem.state.Assignments {
			stale[types.UID(uid)] = true
		}
	}
	for _, uid := range keep {
		delete(stale, uid)
	}
	if m.cfg.Devices != nil {
		pods := make([]*corev1.Pod, len(keep))
		for i, uid := range keep {
			pods[i] = &corev1.Pod{}
			pods[i].UID = uid
		}
		m.cfg.Devices.UpdateAllocated(pods)
	}
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(stale)) {
		errs = append(errs, m.removePodLocked(uid))
	}
	return errors.Join(errs...)
}

// removeCgroupLocked removes a pending pod cgroup unless a process is still
// in it. A cgroup that is busy stays pending without an error; any other
// failure keeps it pending and is returned.
func (m *Manager) removeCgroupLocked(path string) error {
	pids, err := m.cfg.Cgroups.Pids(path)
	if err != nil {
		return fmt.Errorf("cm: listing the processes of %s: %w", path, err)
	}
	if len(pids) > 0 {
		return nil
	}
	if err := m.cfg.Cgroups.Remove(path); err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return nil
		}
		return fmt.Errorf("cm: removing %s: %w", path, err)
	}
	delete(m.pending, path)
	return nil
}

// Sync is the Manager's synchronous step: it retries the removal of every
// pending pod cgroup. A cgroup whose processes linger stays pending without
// an error. It does not block otherwise.
func (m *Manager) Sync() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg.Cgroups == nil {
		return nil
	}
	var errs []error
	for _, path := range slices.Sorted(maps.Keys(m.pending)) {
		errs = append(errs, m.removeCgroupLocked(path))
	}
	return errors.Join(errs...)
}

// PendingRemovals lists the pod cgroups still to remove, sorted.
func (m *Manager) PendingRemovals() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.pending))
}
