package devicemanager

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"knode/internal/agent/topology"
)

// TopologyHints returns, for each device-plugin resource in the
// container's limits, the NUMA node sets that can hold the request among
// the healthy free devices (or, when the container already holds the
// resource, the sets that contain its devices). A hint is Preferred when
// its set is as small as any set that the resource's devices could fill.
// A resource whose devices report no topology gets nil (no preference); one
// that cannot be satisfied gets an empty list.
func (m *Manager) TopologyHints(pod *corev1.Pod, container *corev1.Container) map[string][]topology.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hintsLocked(string(pod.UID), []string{container.Name}, requests(container.Resources.Limits))
}

// PodTopologyHints is TopologyHints for the whole pod: the request is the
// larger of the biggest init container's and the sum of the app
// containers'.
func (m *Manager) PodTopologyHints(pod *corev1.Pod) map[string][]topology.Hint {
	req := map[string]int{}
	for _, c := range pod.Spec.Containers {
		for r, n := range requests(c.Resources.Limits) {
			req[r] += n
		}
	}
	for _, c := range pod.Spec.InitContainers {
		for r, n := range requests(c.Resources.Limits) {
			req[r] = max(req[r], n)
		}
	}
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hintsLocked(string(pod.UID), names, req)
}

func requests(limits corev1.ResourceList) map[string]int {
	out := map[string]int{}
	for r, q := range limits {
		out[string(r)] = int(q.Value())
	}
	return out
}

// hintsLocked builds the hints of req for the pod's containers. Call with
// mu held.
func (m *Manager) hintsLocked(podUID string, containers []string, req map[string]int) map[string][]topology.Hint {
	hints := map[string][]topology.Hint{}
	for _, resource := range slices.Sorted(maps.Keys(req)) {
		requested := req[resource]
		if !m.isPluginResourceLocked(resource) || requested == 0 {
			continue
		}
		if !m.hasTopologyLocked(resource) {
			hints[resource] = nil
			continue
		}
		held := sets.New[string]()
		for _, c := range containers {
			if a := m.pods[podUID][c][resource]; a != nil {
				held.Insert(allocatedIDs(a.devices)...)
			}
		}
		if held.Len() > 0 {
			if held.Len() != requested {
				m.log.Error("Resource already allocated to pod with different number than request", "resourceName", resource, "podUID", podUID, "request", requested, "allocated", held.Len())
				hints[resource] = []topology.Hint{}
				continue
			}
			hints[resource] = m.deviceHintsLocked(resource, held, requested)
			continue
		}
		available := m.availableLocked(resource)
		if available.Len() < requested {
			m.log.Error("Unable to generate topology hints: requested number of devices unavailable", "resourceName", resource, "request", requested, "available", available.Len())
			hints[resource] = []topology.Hint{}
			continue
		}
		hints[resource] = m.deviceHintsLocked(resource, available, requested)
	}
	return hints
}

// hasTopologyLocked: some device of resource reports NUMA nodes.
func (m *Manager) hasTopologyLocked(resource string) bool {
	for _, d := range m.devices[resource] {
		if d.Topology != nil {
			return true
		}
	}
	return false
}

// numaNodeSetLocked is Config.NUMANodes, or else the nodes the devices of
// every resource report, ascending.
func (m *Manager) numaNodeSetLocked() []int {
	if m.cfg.NUMANodes != nil {
		return m.cfg.NUMANodes
	}
	ids := sets.New[int]()
	for _, devs := range m.devices {
		for _, d := range devs {
			ids.Insert(numaNodes(d)...)
		}
	}
	return sets.List(ids)
}

// deviceHintsLocked is upstream's generateDeviceTopologyHints: every
// non-empty set of NUMA nodes on which at least request of the candidates
// sit (a device counts when any of its nodes is in the set); Preferred for
// the sets of minimal size among those that the resource's devices (all of
// them, free or not) could fill.
func (m *Manager) deviceHintsLocked(resource string, candidates sets.Set[string], request int) []topology.Hint {
	nodes := m.numaNodeSetLocked()
	minSize := len(nodes)
	hints := []topology.Hint{}
	for _, mask := range subsets(nodes) {
		inMask := 0
		for _, d := range m.devices[resource] {
			if slices.ContainsFunc(numaNodes(d), mask.IsSet) {
				inMask++
			}
		}
		if inMask >= request && mask.Count() < minSize {
			minSize = mask.Count()
		}
		matching := 0
		for id := range candidates {
			if slices.ContainsFunc(numaNodes(m.devices[resource][id]), mask.IsSet) {
				matching++
			}
		}
		if matching >= request {
			hints = append(hints, topology.NewHint(mask, false))
		}
	}
	for i := range hints {
		hints[i].Preferred = hints[i].Affinity.Count() == minSize
	}
	return hints
}

// subsets returns every non-empty set of nodes, in upstream's
// IterateBitMasks order: by size, then lexicographically.
func subsets(nodes []int) []topology.Mask {
	var out []topology.Mask
	var rec func(start, left int, acc []int)
	rec = func(start, left int, acc []int) {
		if left == 0 {
			if mk, err := topology.NewMask(acc...); err == nil {
				out = append(out, mk)
			}
			return
		}
		for i := start; i < len(nodes); i++ {
			rec(i+1, left-1, append(acc, nodes[i]))
		}
	}
	for size := 1; size <= len(nodes); size++ {
		rec(0, size, nil)
	}
	return out
}
