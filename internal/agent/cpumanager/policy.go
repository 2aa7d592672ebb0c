package cpumanager

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/host"
	"knode/internal/agent/topology"
	podreg "knode/internal/registry/pod"
)

// ErrorSMTAlignment is the Type of an SMTAlignmentError (the pod's
// admission rejection reason).
const ErrorSMTAlignment = "SMTAlignmentError"

// SMTAlignmentError rejects a request that full-pcpus-only cannot place on
// whole physical cores. Its Error text is upstream's.
type SMTAlignmentError struct {
	RequestedCPUs         int
	CpusPerCore           int
	AvailablePhysicalCPUs int
	CausedByPhysicalCPUs  bool
}

func (e SMTAlignmentError) Error() string {
	if e.CausedByPhysicalCPUs {
		return fmt.Sprintf("SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d", e.AvailablePhysicalCPUs, e.RequestedCPUs, e.CpusPerCore)
	}
	return fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d", e.RequestedCPUs, e.CpusPerCore)
}

// Type returns ErrorSMTAlignment.
func (e SMTAlignmentError) Type() string { return ErrorSMTAlignment }

// State is the CPU manager's state, the content of the checkpoint.
// Invariant (static policy): DefaultCPUSet and the assigned sets are
// disjoint and together are every CPU of the machine; the reserved CPUs are
// in DefaultCPUSet.
type State struct {
	// PolicyName is the policy that wrote the state.
	PolicyName string
	// DefaultCPUSet is the shared pool: every CPU not exclusively assigned,
	// reserved CPUs included.
	DefaultCPUSet cpuset.CPUSet
	// Assignments are the exclusive sets by pod UID and container name.
	// Nil means none.
	Assignments map[string]map[string]cpuset.CPUSet
}

// Clone returns a deep copy of s (cpuset.CPUSet values are immutable).
func (s State) Clone() State {
	out := s
	out.Assignments = nil
	if s.Assignments != nil {
		out.Assignments = make(map[string]map[string]cpuset.CPUSet, len(s.Assignments))
		for pod, cs := range s.Assignments {
			out.Assignments[pod] = maps.Clone(cs)
		}
	}
	return out
}

// Assignment returns the exclusive set of a container, if any.
func (s State) Assignment(podUID, container string) (cpuset.CPUSet, bool) {
	set, ok := s.Assignments[podUID][container]
	return set, ok
}

// Static is the static policy for one machine. It holds no state of its
// own; every method takes the State and is safe to call concurrently with
// different States.
type Static struct {
	m        *machine
	reserved cpuset.CPUSet
	opts     options
}

// NewStatic returns the static policy for machine t. cfg must name
// PolicyStatic; its reservation is resolved with ReservedCPUs.
func NewStatic(t host.Topology, cfg Config) (*Static, error) {
	if cfg.policy() != PolicyStatic {
		return nil, fmt.Errorf("cpuManagerPolicy %q is not %q", cfg.policy(), PolicyStatic)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts, _ := cfg.parseOptions()
	m := newMachine(t)
	reserved, err := reservedCPUs(m, cfg)
	if err != nil {
		return nil, err
	}
	return &Static{m: m, reserved: reserved, opts: opts}, nil
}

// Reserved returns the reserved CPUs: in the shared pool, never exclusive.
func (p *Static) Reserved() cpuset.CPUSet { return p.reserved }

// Restore checks a state read from the checkpoint against the machine (the
// upstream static policy's validateState). An empty state (no default set,
// no assignments) becomes the initial state: every CPU shared.
func (p *Static) Restore(s State) (State, error) {
	s = s.Clone()
	if s.PolicyName != "" && s.PolicyName != PolicyStatic {
		return s, fmt.Errorf("configured policy %q differs from state checkpoint policy %q", PolicyStatic, s.PolicyName)
	}
	s.PolicyName = PolicyStatic
	if s.DefaultCPUSet.IsEmpty() && len(s.Assignments) == 0 {
		s.DefaultCPUSet = p.m.all
		return s, nil
	}
	if !p.reserved.Intersection(s.DefaultCPUSet).Equals(p.reserved) {
		return s, fmt.Errorf("not all reserved cpus: %q are present in defaultCpuSet: %q", p.reserved, s.DefaultCPUSet)
	}
	all := s.DefaultCPUSet
	for pod, cs := range s.Assignments {
		for c, set := range cs {
			if !set.Intersection(s.DefaultCPUSet).IsEmpty() {
				return s, fmt.Errorf("pod: %s, container: %s cpuset: %q overlaps with default cpuset %q", pod, c, set, s.DefaultCPUSet)
			}
			all = all.Union(set)
		}
	}
	if !all.Equals(p.m.all) {
		return s, fmt.Errorf("current set of available CPUs %q doesn't match with CPUs in state %q", p.m.all, all)
	}
	return s, nil
}

// Available returns the CPUs exclusive allocation may use: the shared pool
// minus the reserved CPUs.
func (p *Static) Available(s State) cpuset.CPUSet {
	return s.DefaultCPUSet.Difference(p.reserved)
}

// availablePhysical returns the available CPUs whose whole core is
// available.
func (p *Static) availablePhysical(s State) cpuset.CPUSet {
	free := details{p.m, p.Available(s)}
	var ids []int
	for _, core := range free.ids(coreOf) {
		if cpus := free.inCores(core); cpus.Size() == p.m.cpusPerCore() {
			ids = append(ids, cpus.List()...)
		}
	}
	return cpuset.New(ids...)
}

// GuaranteedCPUs is the number of exclusive CPUs the static policy gives
// the container: its CPU request when the pod's QoS class is Guaranteed and
// the request is a whole number of CPUs, else 0 (the shared pool).
func GuaranteedCPUs(pod *corev1.Pod, c *corev1.Container) int {
	if podreg.PodQOS(pod) != corev1.PodQOSGuaranteed {
		return 0
	}
	q := c.Resources.Requests[corev1.ResourceCPU]
	if q.Value()*1000 != q.MilliValue() {
		return 0
	}
	return int(q.Value())
}

// Allocate gives the container its exclusive CPUs and records them in s,
// removing them from the shared pool. It returns the container's set, or the
// empty set and no change when the container belongs in the shared pool. A
// container already in s keeps its set. affinity is the topology manager's
// merged hint: CPUs on its NUMA nodes are taken first (a nil Affinity is no
// preference). On error s is unchanged; the error is an SMTAlignmentError
// when full-pcpus-only rejects the request.
func (p *Static) Allocate(s *State, pod *corev1.Pod, c *corev1.Container, affinity topology.Hint) (cpuset.CPUSet, error) {
	n := GuaranteedCPUs(pod, c)
	if n == 0 {
		return cpuset.New(), nil
	}
	if p.opts.fullPCPUsOnly {
		perCore := p.m.cpusPerCore()
		if n%perCore != 0 {
			return cpuset.New(), SMTAlignmentError{RequestedCPUs: n, CpusPerCore: perCore}
		}
		if avail := p.availablePhysical(*s).Size(); n > avail {
			return cpuset.New(), SMTAlignmentError{RequestedCPUs: n, CpusPerCore: perCore, AvailablePhysicalCPUs: avail, CausedByPhysicalCPUs: true}
		}
	}
	if set, ok := s.Assignment(string(pod.UID), c.Name); ok {
		return set, nil
	}
	allocatable := p.Available(*s)
	result := cpuset.New()
	if affinity.Affinity != nil {
		var nodes []int
		for id := 0; id < topology.MaxNUMANodes; id++ {
			if affinity.Affinity.IsSet(id) {
				nodes = append(nodes, id)
			}
		}
		aligned := details{p.m, allocatable}.inNUMA(nodes...)
		take := min(n, aligned.Size())
		got, err := takeByTopology(p.m, aligned, take)
		if err != nil {
			return cpuset.New(), err
		}
		result = got
	}
	rest, err := takeByTopology(p.m, allocatable.Difference(result), n-result.Size())
	if err != nil {
		return cpuset.New(), err
	}
	result = result.Union(rest)
	s.DefaultCPUSet = s.DefaultCPUSet.Difference(result)
	s.Assignments = cloneAssignments(s.Assignments)
	if s.Assignments[string(pod.UID)] == nil {
		s.Assignments[string(pod.UID)] = map[string]cpuset.CPUSet{}
	}
	s.Assignments[string(pod.UID)][c.Name] = result
	return result, nil
}

// cloneAssignments returns a deep, non-nil copy of a, so a State copied
// by value before a change keeps its own assignments.
func cloneAssignments(a map[string]map[string]cpuset.CPUSet) map[string]map[string]cpuset.CPUSet {
	if a == nil {
		return map[string]map[string]cpuset.CPUSet{}
	}
	return State{Assignments: a}.Clone().Assignments
}

// RemoveContainer forgets the container's exclusive set and returns its CPUs
// to the shared pool (except any still assigned to another container of the
// same pod). Removing an unknown container does nothing.
func (p *Static) RemoveContainer(s *State, podUID, container string) {
	set, ok := s.Assignment(podUID, container)
	if !ok {
		return
	}
	s.Assignments = cloneAssignments(s.Assignments)
	delete(s.Assignments[podUID], container)
	inUse := cpuset.New()
	for _, other := range s.Assignments[podUID] {
		inUse = inUse.Union(other)
	}
	if len(s.Assignments[podUID]) == 0 {
		delete(s.Assignments, podUID)
	}
	s.DefaultCPUSet = s.DefaultCPUSet.Union(set.Difference(inUse))
}

// ResourceCPU is the hint key of the CPU manager.
const ResourceCPU = string(corev1.ResourceCPU)

// TopologyHints returns the CPU hints for one container: nil (no
// preference) when it uses the shared pool; for an allocated container,
// hints for its current set, or an empty list when its request changed;
// otherwise one hint per NUMA node combination whose available CPUs can
// hold the request, Preferred when it has the fewest nodes any combination
// of the machine (free or not) needs.
func (p *Static) TopologyHints(s State, pod *corev1.Pod, c *corev1.Container) map[string][]topology.Hint {
	n := GuaranteedCPUs(pod, c)
	if n == 0 {
		return nil
	}
	if set, ok := s.Assignment(string(pod.UID), c.Name); ok {
		if set.Size() != n {
			return map[string][]topology.Hint{ResourceCPU: {}}
		}
		return map[string][]topology.Hint{ResourceCPU: p.hints(set, n)}
	}
	return map[string][]topology.Hint{ResourceCPU: p.hints(p.Available(s), n)}
}

// PodGuaranteedCPUs is the number of exclusive CPUs the pod scope places
// for the whole pod (upstream's podGuaranteedCPUs): the larger of the
// biggest regular init container's GuaranteedCPUs (plus the restartable
// init containers started before it) and the app containers' plus every
// restartable init container's. Allocate still charges every container in
// full, because init containers' CPUs are not reused.
func PodGuaranteedCPUs(pod *corev1.Pod) int {
	initPeak, sidecars := 0, 0
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		n := GuaranteedCPUs(pod, c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars += n
			continue
		}
		initPeak = max(initPeak, sidecars+n)
	}
	app := 0
	for i := range pod.Spec.Containers {
		app += GuaranteedCPUs(pod, &pod.Spec.Containers[i])
	}
	return max(initPeak, app+sidecars)
}

// PodTopologyHints returns the CPU hints for the whole pod, for the
// topology manager's pod scope (upstream's GetPodTopologyHints without
// reusable CPUs): nil when PodGuaranteedCPUs is 0; an empty list when an
// allocated container holds a different number of CPUs than it asks for;
// hints for the pod's allocated CPUs when they are all it needs (a restart);
// otherwise hints over the available CPUs for PodGuaranteedCPUs.
func (p *Static) PodTopologyHints(s State, pod *corev1.Pod) map[string][]topology.Hint {
	n := PodGuaranteedCPUs(pod)
	if n == 0 {
		return nil
	}
	assigned := cpuset.New()
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for i := range all {
		set, ok := s.Assignment(string(pod.UID), all[i].Name)
		if !ok {
			continue
		}
		if set.Size() != GuaranteedCPUs(pod, &all[i]) {
			return map[string][]topology.Hint{ResourceCPU: {}}
		}
		assigned = assigned.Union(set)
	}
	if assigned.Size() == n {
		return map[string][]topology.Hint{ResourceCPU: p.hints(assigned, n)}
	}
	return map[string][]topology.Hint{ResourceCPU: p.hints(p.Available(s), n)}
}

// hints is upstream's generateCPUTopologyHints without reusable CPUs.
func (p *Static) hints(available cpuset.CPUSet, n int) []topology.Hint {
	whole := details{p.m, p.m.all}
	nodes := whole.ids(numaOf)
	minSize := len(nodes)
	hints := []topology.Hint{}
	avail := details{p.m, available}
	for k := 1; k <= len(nodes); k++ {
		combinations(nodes, k, func(combo []int) {
			if whole.inNUMA(combo...).Size() >= n && len(combo) < minSize {
				minSize = len(combo)
			}
			if avail.inNUMA(combo...).Size() < n {
				return
			}
			mask, _ := topology.NewMask(combo...)
			hints = append(hints, topology.NewHint(mask, false))
		})
	}
	for i := range hints {
		if hints[i].Affinity.Count() == minSize {
			hints[i].Preferred = true
		}
	}
	return hints
}

// combinations calls f with every k-subset of ids, in lexicographic order
// (upstream's bitmask.IterateBitMasks order within one size).
func combinations(ids []int, k int, f func([]int)) {
	var rec func(start int, acc []int)
	rec = func(start int, acc []int) {
		if len(acc) == k {
			f(acc)
			return
		}
		for i := start; i < len(ids); i++ {
			rec(i+1, append(acc, ids[i]))
		}
	}
	rec(0, make([]int, 0, k))
}

// podQOS is the pod's QoS class: Status.QOSClass when set, else computed
// from the requests and limits of all its containers like upstream
