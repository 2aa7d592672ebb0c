package memorymanager

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/agent/host"
	"knode/internal/agent/topology"
	podreg "knode/internal/registry/pod"
)

// StaticConfig builds the static policy.
type StaticConfig struct {
	// Config must name PolicyStatic.
	Config Config
	// Topology is the machine.
	Topology host.Topology
	// NodeHugepages are the hugepages reserved on each NUMA node, by node
	// ID. A node without an entry has none.
	NodeHugepages map[int][]host.Hugepages
}

// Static is the static policy for one machine. It holds no state of its
// own; every method takes the State and returns the new one.
type Static struct {
	initial MachineState
}

// NewStatic validates cfg, checks the reservation against the machine
// (ReservedByNode) and that some memory is reserved, and returns the policy.
func NewStatic(cfg StaticConfig) (*Static, error) {
	if cfg.Config.policy() != PolicyStatic {
		return nil, fmt.Errorf("memoryManagerPolicy %q is not %q", cfg.Config.policy(), PolicyStatic)
	}
	if err := cfg.Config.Validate(); err != nil {
		return nil, err
	}
	reserved, err := ReservedByNode(cfg.Topology, cfg.Config)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, r := range reserved {
		total += r[corev1.ResourceMemory]
	}
	if total == 0 {
		return nil, fmt.Errorf("[memorymanager] you should specify the system reserved memory")
	}
	return &Static{initial: DefaultMachineState(cfg.Topology, cfg.NodeHugepages, reserved)}, nil
}

// DefaultMachineState is the state of an empty machine (upstream's
// getDefaultMachineState): for every node, each hugepages size and memory
// with Total, SystemReserved from reserved, Allocatable = Total -
// SystemReserved (memory also minus the node's hugepages) and all of it
// free; Cells is the node alone. Every node gets a table for every hugepage
// size any node has (empty where it has none), as cAdvisor lists every
// size on every node. Allocatable that would go below zero is 0.
func DefaultMachineState(t host.Topology, hugepages map[int][]host.Hugepages, reserved map[int]map[corev1.ResourceName]uint64) MachineState {
	sizes := map[uint64]bool{}
	for _, hps := range hugepages {
		for _, hp := range hps {
			sizes[hp.PageSize] = true
		}
	}
	m := MachineState{}
	for _, n := range t.NUMANodes {
		ns := &NodeState{Memory: map[corev1.ResourceName]*MemoryTable{}, Cells: []int{n.ID}}
		for size := range sizes {
			ns.Memory[HugepagesResource(size)] = table(0, reserved[n.ID][HugepagesResource(size)], 0)
		}
		var inHugepages uint64
		for _, hp := range hugepages[n.ID] {
			name := HugepagesResource(hp.PageSize)
			total := hp.Pages * hp.PageSize
			ns.Memory[name] = table(total, reserved[n.ID][name], 0)
			inHugepages += total
		}
		ns.Memory[corev1.ResourceMemory] = table(n.MemoryBytes, reserved[n.ID][corev1.ResourceMemory], inHugepages)
		m[n.ID] = ns
	}
	return m
}

func table(total, systemReserved, other uint64) *MemoryTable {
	var allocatable uint64
	if total > systemReserved+other {
		allocatable = total - systemReserved - other
	}
	return &MemoryTable{Total: total, SystemReserved: systemReserved, Allocatable: allocatable, Free: allocatable}
}

// Restore checks a state read from the checkpoint against the machine
// (upstream's validateState): an empty machine state becomes the default
// one (an error if there are assignments); otherwise replaying the
// assignments onto the default state must give the stored one.
func (p *Static) Restore(s State) (State, error) {
	s = s.Clone()
	if s.PolicyName != "" && s.PolicyName != PolicyStatic {
		return s, fmt.Errorf("[memorymanager] configured policy %q differs from state checkpoint policy %q", PolicyStatic, s.PolicyName)
	}
	s.PolicyName = PolicyStatic
	if len(s.Machine) == 0 {
		if len(s.Assignments) != 0 {
			return s, fmt.Errorf("[memorymanager] machine state can not be empty when it has memory assignments")
		}
		s.Machine = p.initial.Clone()
		return s, nil
	}
	want := p.initial.Clone()
	for _, pod := range slices.Sorted(maps.Keys(s.Assignments)) {
		for _, c := range slices.Sorted(maps.Keys(s.Assignments[pod])) {
			for _, b := range s.Assignments[pod][c] {
				for _, id := range b.NUMAAffinity {
					if want[id] == nil {
						return s, fmt.Errorf("[memorymanager] (pod: %s, container: %s) the memory assignment uses the NUMA that does not exist", pod, c)
					}
					if want[id].Memory[b.Type] == nil {
						return s, fmt.Errorf("[memorymanager] (pod: %s, container: %s) the memory assignment uses memory resource that does not exist", pod, c)
					}
				}
				charge(want, b.NUMAAffinity, b.Type, b.Size)
			}
		}
	}
	if !machineStatesEqual(s.Machine, want) {
		return s, fmt.Errorf("[memorymanager] the expected machine state is different from the real one")
	}
	return s, nil
}

func machineStatesEqual(a, b MachineState) bool {
	if len(a) != len(b) {
		return false
	}
	for id, na := range a {
		nb := b[id]
		if na == nil || nb == nil || na.Assignments != nb.Assignments || !sameGroup(na.Cells, nb.Cells) || len(na.Memory) != len(nb.Memory) {
			return false
		}
		for name, ta := range na.Memory {
			tb := nb.Memory[name]
			if ta == nil || tb == nil || ta.Total != tb.Total || ta.SystemReserved != tb.SystemReserved || ta.Allocatable != tb.Allocatable {
				return false
			}
			var fa, ra, fb, rb uint64
			for _, c := range na.Cells {
				if a[c] == nil || b[c] == nil || a[c].Memory[name] == nil || b[c].Memory[name] == nil {
					return false
				}
				fa, ra = fa+a[c].Memory[name].Free, ra+a[c].Memory[name].Reserved
				fb, rb = fb+b[c].Memory[name].Free, rb+b[c].Memory[name].Reserved
			}
			if fa != fb || ra != rb {
				return false
			}
		}
	}
	return true
}

func sameGroup(a, b []int) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// charge places size bytes of resource on nodes, filling them in order
// (upstream's updateMachineState); every node counts one more assignment
// and joins the group.
func charge(m MachineState, nodes []int, resource corev1.ResourceName, size uint64) {
	for _, id := range nodes {
		m[id].Assignments++
		m[id].Cells = slices.Clone(nodes)
		if size == 0 {
			continue
		}
		t := m[id].Memory[resource]
		if t == nil || t.Free == 0 {
			continue
		}
		take := min(t.Free, size)
		t.Reserved += take
		t.Free -= take
		size -= take
	}
}

// Requests returns the container's memory and hugepages requests in bytes.
func Requests(c *corev1.Container) (map[corev1.ResourceName]uint64, error) {
	out := map[corev1.ResourceName]uint64{}
	for name, q := range c.Resources.Requests {
		if !isMemoryResource(name) {
			continue
		}
		v, ok := q.AsInt64()
		if !ok || v < 0 {
			return nil, fmt.Errorf("[memorymanager] failed to represent quantity as int64")
		}
		out[name] = uint64(v)
	}
	return out, nil
}

// PodRequests is the pod's effective request (upstream's
// getPodRequestedResources): per resource, the larger of the app
// containers plus the restartable init containers, and the largest need of
// any regular init container (with the restartable ones started before it).
func PodRequests(pod *corev1.Pod) (map[corev1.ResourceName]uint64, error) {
	initMax := map[corev1.ResourceName]uint64{}
	sidecars := map[corev1.ResourceName]uint64{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req, err := Requests(c)
		if err != nil {
			return nil, err
		}
		for name, v := range req {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				sidecars[name] += v
			} else if sidecars[name]+v > initMax[name] {
				initMax[name] = sidecars[name] + v
			}
		}
	}
	app := map[corev1.ResourceName]uint64{}
	for i := range pod.Spec.Containers {
		req, err := Requests(&pod.Spec.Containers[i])
		if err != nil {
			return nil, err
		}
		for name, v := range req {
			app[name] += v
		}
	}
	out := map[corev1.ResourceName]uint64{}
	for name, v := range app {
		out[name] = max(v+sidecars[name], initMax[name])
	}
	return out, nil
}

// TopologyHints returns the container's hints by resource (upstream's
// GetTopologyHints): nil for a pod that is not Guaranteed; a container that
// already has blocks gets them back as preferred hints; otherwise every
// NUMA combination that fits (calculateHints).
func (p *Static) TopologyHints(s State, pod *corev1.Pod, c *corev1.Container) map[string][]topology.Hint {
	if podreg.PodQOS(pod) != corev1.PodQOSGuaranteed {
		return nil
	}
	req, err := Requests(c)
	if err != nil {
		return nil
	}
	if blocks := s.Blocks(string(pod.UID), c.Name); blocks != nil {
		return regenerateHints(blocks, req)
	}
	return calculateHints(s.Machine, req)
}

// PodTopologyHints is TopologyHints for the pod scope, over PodRequests;
// if any container already has blocks, its hints are regenerated.
func (p *Static) PodTopologyHints(s State, pod *corev1.Pod) map[string][]topology.Hint {
	if podreg.PodQOS(pod) != corev1.PodQOSGuaranteed {
		return nil
	}
	req, err := PodRequests(pod)
	if err != nil {
		return nil
	}
	for _, c := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if blocks := s.Blocks(string(pod.UID), c.Name); blocks != nil {
			return regenerateHints(blocks, req)
		}
	}
	return calculateHints(s.Machine, req)
}

func regenerateHints(blocks []Block, req map[corev1.ResourceName]uint64) map[string][]topology.Hint {
	if len(blocks) != len(req) {
		return nil
	}
	hints := map[string][]topology.Hint{}
	for name := range req {
		hints[string(name)] = []topology.Hint{}
	}
	for _, b := range blocks {
		want, ok := req[b.Type]
		if !ok || b.Size != want {
			return nil
		}
		m, err := topology.NewMask(b.NUMAAffinity...)
		if err != nil {
			return nil
		}
		hints[string(b.Type)] = append(hints[string(b.Type)], topology.NewHint(m, true))
	}
	return hints
}

// calculateHints is upstream's calculateHints: every combination of nodes
// (by increasing mask value within each size) whose allocatable covers the
// request, that respects the groups (a node used alone is not combined; a
// node in a group is used only with exactly that group; a grouped node is
// not used alone) and whose free memory covers the request. Preferred are
// the hints with the fewest nodes that could hold the request by
// allocatable.
func calculateHints(m MachineState, req map[corev1.ResourceName]uint64) map[string][]topology.Hint {
	ids := make([]int, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	minSize := len(ids)
	hints := map[string][]topology.Hint{}
	for _, mask := range masks(ids) {
		bits := mask.Bits()
		single := len(bits) == 1
		free := map[corev1.ResourceName]uint64{}
		allocatable := map[corev1.ResourceName]uint64{}
		for _, id := range bits {
			for name := range req {
				if t := m[id].Memory[name]; t != nil {
					free[name] += t.Free
					allocatable[name] += t.Allocatable
				}
			}
		}
		fits := true
		for name, v := range req {
			if allocatable[name] < v {
				fits = false
			}
		}
		if !fits {
			continue
		}
		minSize = min(minSize, mask.Count())
		if single && len(m[bits[0]].Cells) > 1 {
			continue
		}
		if !single && violatesGroups(m, bits) {
			continue
		}
		for name, v := range req {
			if free[name] < v {
				fits = false
			}
		}
		if !fits {
			continue
		}
		for name := range req {
			hints[string(name)] = append(hints[string(name)], topology.NewHint(mask, false))
		}
	}
	for name := range hints {
		for i := range hints[name] {
			hints[name][i].Preferred = hints[name][i].Affinity.Count() == minSize
		}
	}
	return hints
}

// violatesGroups reports whether a multi-node placement on bits would mix
// with a node used alone or with a different group.
func violatesGroups(m MachineState, bits []int) bool {
	if len(bits) == 1 {
		return false
	}
	for _, id := range bits {
		if m[id].Assignments == 0 {
			continue
		}
		if len(m[id].Cells) == 1 || !sameGroup(m[id].Cells, bits) {
			return true
		}
	}
	return false
}

// masks lists every non-empty subset of ids as upstream's IterateBitMasks
// does: by size, and within a size in lexicographic order of the ids.
func masks(ids []int) []topology.Mask {
	var out []topology.Mask
	var rec func(start int, cur []int, size int)
	rec = func(start int, cur []int, size int) {
		if len(cur) == size {
			m, _ := topology.NewMask(cur...)
			out = append(out, m)
			return
		}
		for i := start; i < len(ids); i++ {
			rec(i+1, append(cur, ids[i]), size)
		}
	}
	for size := 1; size <= len(ids); size++ {
		rec(0, nil, size)
	}
	return out
}

// Allocate places a Guaranteed pod's container (upstream's Allocate) and
// returns the new state; other pods and containers already placed return s
// unchanged. hint is the topology manager's merged affinity: with a nil
// Affinity the best of the policy's own hints is used; an affinity that
// does not hold the request is extended to the narrowest fitting hint that
// contains it. The blocks record every requested resource on the chosen
// nodes. s is not modified.
func (p *Static) Allocate(s State, pod *corev1.Pod, c *corev1.Container, hint topology.Hint) (State, error) {
	if podreg.PodQOS(pod) != corev1.PodQOSGuaranteed {
		return s, nil
	}
	uid := string(pod.UID)
	if s.Blocks(uid, c.Name) != nil {
		return s, nil
	}
	req, err := Requests(c)
	if err != nil {
		return s, err
	}
	best := hint
	if best.Affinity == nil {
		hints := calculateHints(s.Machine, req)
		if len(hints) < 1 {
			return s, fmt.Errorf("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available")
		}
		def := bestHint(hints[string(corev1.ResourceMemory)])
		if !def.Preferred && best.Preferred {
			return s, fmt.Errorf("[memorymanager] failed to find the default preferred hint")
		}
		best = def
	}
	if best.Affinity == nil || !satisfies(s.Machine, *best.Affinity, req) {
		var within []topology.Hint
		for _, h := range calculateHints(s.Machine, req)[string(corev1.ResourceMemory)] {
			if best.Affinity == nil || best.Affinity.IsSubsetOf(*h.Affinity) {
				within = append(within, h)
			}
		}
		if len(within) < 1 {
			return s, fmt.Errorf("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
		}
		ext := bestHint(within)
		if !ext.Preferred && best.Preferred {
			return s, fmt.Errorf("[memorymanager] failed to find the extended preferred hint")
		}
		best = ext
	}
	bits := best.Affinity.Bits()
	if violatesGroups(s.Machine, bits) {
		return s, fmt.Errorf("[memorymanager] preferred hint violates NUMA node allocation")
	}
	out := s.Clone()
	var blocks []Block
	for _, name := range sortedResourceNames(req) {
		blocks = append(blocks, Block{NUMAAffinity: slices.Clone(bits), Type: name, Size: req[name]})
		charge(out.Machine, bits, name, req[name])
	}
	if out.Assignments == nil {
		out.Assignments = map[string]map[string][]Block{}
	}
	if out.Assignments[uid] == nil {
		out.Assignments[uid] = map[string][]Block{}
	}
	out.Assignments[uid][c.Name] = blocks
	return out, nil
}

// satisfies reports whether the free memory of mask's nodes holds req
// (upstream's isAffinitySatisfyRequest). A node missing from m holds
// nothing.
func satisfies(m MachineState, mask topology.Mask, req map[corev1.ResourceName]uint64) bool {
	free := map[corev1.ResourceName]uint64{}
	for _, id := range mask.Bits() {
		if m[id] == nil {
			continue
		}
		for name := range req {
			if t := m[id].Memory[name]; t != nil {
				free[name] += t.Free
			}
		}
	}
	for name, v := range req {
		if free[name] < v {
			return false
		}
	}
	return true
}

// bestHint is upstream's findBestHint: preferred first, then narrowest.
func bestHint(hints []topology.Hint) topology.Hint {
	var best topology.Hint
	for _, h := range hints {
		switch {
		case best.Affinity == nil:
			best = h
		case h.Preferred && !best.Preferred:
			best = h
		case h.Preferred == best.Preferred && h.Affinity.IsNarrowerThan(*best.Affinity):
			best = h
		}
	}
	return best
}

// RemoveContainer releases the container's blocks (upstream's
// RemoveContainer) and returns the new state; a node left with no
// assignment leaves its group. s is not modified.
func (p *Static) RemoveContainer(s State, podUID, container string) State {
	blocks := s.Blocks(podUID, container)
	if blocks == nil {
		return s
	}
	out := s.Clone()
	delete(out.Assignments[podUID], container)
	if len(out.Assignments[podUID]) == 0 {
		delete(out.Assignments, podUID)
	}
	if len(out.Assignments) == 0 {
		out.Assignments = nil
	}
	for _, b := range blocks {
		size := b.Size
		for _, id := range b.NUMAAffinity {
			n := out.Machine[id]
			if n == nil {
				continue
			}
			n.Assignments--
			if n.Assignments == 0 {
				n.Cells = []int{id}
			}
			t := n.Memory[b.Type]
			if size == 0 || t == nil || t.Reserved == 0 {
				continue
			}
			give := min(t.Reserved, size)
			t.Reserved -= give
			t.Free += give
			size -= give
		}
	}
	return out
}

// Mems is the container's cpuset.mems: the NUMA nodes of its blocks in
// cpuset list syntax ("0-1", "0,2"); empty when it has none (the None
// policy, or a pod that is not Guaranteed).
func Mems(s State, podUID, container string) string {
	var ids []int
	for _, b := range s.Blocks(podUID, container) {
		ids = append(ids, b.NUMAAffinity...)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ids[i]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i])+"-"+strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
