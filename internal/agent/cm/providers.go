package cm

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/cpumanager"
	"knode/internal/agent/host"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/topology"
)

// The two providers below adapt the CPU and memory managers' pure static
// policies to topology.HintProvider. Each owns its policy's State and file;
// the Manager's mutex serialises every call (the topology manager calls
// them from inside Manager.Admit). A State is committed only once it is on
// disk, so memory and file agree.

// affinityFunc reads the topology manager's chosen hint for a container.
type affinityFunc func(podUID, container string) topology.Hint

// cpuProvider is the static CPU policy as a hint provider.
type cpuProvider struct {
	policy   *cpumanager.Static
	state    cpumanager.State
	path     string
	affinity affinityFunc
}

func (p *cpuProvider) TopologyHints(pod *corev1.Pod, c *corev1.Container) map[string][]topology.Hint {
	return p.policy.TopologyHints(p.state, pod, c)
}

func (p *cpuProvider) PodTopologyHints(pod *corev1.Pod) map[string][]topology.Hint {
	return p.policy.PodTopologyHints(p.state, pod)
}

// Allocate gives the container its exclusive CPUs. A container that holds
// some already (restored from the state file) keeps them without being
// checked again.
func (p *cpuProvider) Allocate(pod *corev1.Pod, c *corev1.Container) error {
	uid := string(pod.UID)
	if _, ok := p.state.Assignment(uid, c.Name); ok {
		return nil
	}
	next := p.state // Static.Allocate copies the assignments before changing them
	set, err := p.policy.Allocate(&next, pod, c, p.affinity(uid, c.Name))
	if err != nil || set.IsEmpty() {
		return err
	}
	if err := cpumanager.Write(p.path, next); err != nil {
		return fmt.Errorf("writing the CPU manager state: %w", err)
	}
	p.state = next
	return nil
}

// removePod returns every CPU of the pod to the shared pool. The state is
// committed even when writing it fails: the CPUs are free.
func (p *cpuProvider) removePod(uid string) error {
	names := slices.Sorted(maps.Keys(p.state.Assignments[uid]))
	if len(names) == 0 {
		return nil
	}
	for _, name := range names {
		p.policy.RemoveContainer(&p.state, uid, name)
	}
	if err := cpumanager.Write(p.path, p.state); err != nil {
		return fmt.Errorf("writing the CPU manager state: %w", err)
	}
	return nil
}

// cpuset is the container's CPUs: its exclusive set, or the shared pool.
func (p *cpuProvider) cpuset(uid, container string) cpuset.CPUSet {
	if set, ok := p.state.Assignment(uid, container); ok {
		return set
	}
	return p.state.DefaultCPUSet
}

// memoryProvider is the Static memory policy as a hint provider.
type memoryProvider struct {
	policy   *memorymanager.Static
	state    memorymanager.State
	path     string
	affinity affinityFunc
}

func (p *memoryProvider) TopologyHints(pod *corev1.Pod, c *corev1.Container) map[string][]topology.Hint {
	return p.policy.TopologyHints(p.state, pod, c)
}

func (p *memoryProvider) PodTopologyHints(pod *corev1.Pod) map[string][]topology.Hint {
	return p.policy.PodTopologyHints(p.state, pod)
}

// Allocate places the container's memory. A container that holds blocks
// already keeps them.
func (p *memoryProvider) Allocate(pod *corev1.Pod, c *corev1.Container) error {
	uid := string(pod.UID)
	if p.state.Blocks(uid, c.Name) != nil {
		return nil
	}
	next, err := p.policy.Allocate(p.state, pod, c, p.affinity(uid, c.Name))
	if err != nil || next.Blocks(uid, c.Name) == nil {
		return err
	}
	if err := memorymanager.Write(p.path, next); err != nil {
		return fmt.Errorf("writing the memory manager state: %w", err)
	}
	p.state = next
	return nil
}

// removePod releases every block of the pod; see cpuProvider.removePod.
func (p *memoryProvider) removePod(uid string) error {
	names := slices.Sorted(maps.Keys(p.state.Assignments[uid]))
	if len(names) == 0 {
		return nil
	}
	for _, name := range names {
		p.state = p.policy.RemoveContainer(p.state, uid, name)
	}
	if err := memorymanager.Write(p.path, p.state); err != nil {
		return fmt.Errorf("writing the memory manager state: %w", err)
	}
	return nil
}

// restoreFailed is upstream's advice when a state file cannot be used.
func restoreFailed(what, path string, err error) error {
	return fmt.Errorf("could not restore state from checkpoint: %w, please drain this node and delete the %s checkpoint file %q before restarting Kubelet", err, what, path)
}

// restoreCPU reads the CPU manager's state file at path for cfg's policy
// and writes it back (a missing file becomes the initial state). With the
// none policy it returns a nil policy: there is nothing to allocate, but a
// file of another policy is refused as upstream does.
func restoreCPU(path string, t host.Topology, cfg cpumanager.Config) (*cpumanager.Static, cpumanager.State, error) {
	name := cfg.Policy
	if name == "" {
		name = cpumanager.PolicyNone
	}
	wrap := func(err error) error {
		return fmt.Errorf("cpuManagerPolicy %q: %w", name, err)
	}
	s, err := cpumanager.Read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, s, wrap(restoreFailed("CPU manager", path, err))
	}
	var policy *cpumanager.Static
	if name == cpumanager.PolicyNone {
		if s.PolicyName != "" && s.PolicyName != name {
			return nil, s, wrap(restoreFailed("CPU manager", path, fmt.Errorf("configured policy %q differs from state checkpoint policy %q", name, s.PolicyName)))
		}
		s = cpumanager.State{PolicyName: name}
	} else {
		if policy, err = cpumanager.NewStatic(t, cfg); err != nil {
			return nil, s, wrap(err)
		}
		if s, err = policy.Restore(s); err != nil {
			return nil, s, wrap(restoreFailed("CPU manager", path, err))
		}
	}
	if err := cpumanager.Write(path, s); err != nil {
		return nil, s, wrap(err)
	}
	return policy, s, nil
}

// restoreMemory is restoreCPU for the memory manager.
func restoreMemory(path string, t host.Topology, hugepages map[int][]host.Hugepages, cfg memorymanager.Config) (*memorymanager.Static, memorymanager.State, error) {
	name := cfg.Policy
	if name == "" {
		name = memorymanager.PolicyNone
	}
	wrap := func(err error) error {
		return fmt.Errorf("memoryManagerPolicy %q: %w", name, err)
	}
	s, err := memorymanager.Read(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, s, wrap(restoreFailed("memory manager", path, err))
	}
	var policy *memorymanager.Static
	if name == memorymanager.PolicyNone {
		if s.PolicyName != "" && s.PolicyName != name {
			return nil, s, wrap(restoreFailed("memory manager", path, fmt.Errorf("[memorymanager] configured policy %q differs from state checkpoint policy %q", name, s.PolicyName)))
		}
		s = memorymanager.State{PolicyName: name}
	} else {
		if _, err := memorymanager.ReservedByNode(t, cfg); err != nil {
			return nil, s, fmt.Errorf("reservedMemory: %w", err)
		}
		policy, err = memorymanager.NewStatic(memorymanager.StaticConfig{Config: cfg, Topology: t, NodeHugepages: hugepages})
		if err != nil {
			return nil, s, wrap(err)
		}
		if s, err = policy.Restore(s); err != nil {
			return nil, s, wrap(restoreFailed("memory manager", path, err))
		}
	}
	if err := memorymanager.Write(path, s); err != nil {
		return nil, s, wrap(err)
	}
	return policy, s, nil
}
