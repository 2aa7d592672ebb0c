package cpumanager

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"

	"knode/internal/agent/host"
)

// accumulator is upstream's cpuAccumulator: it claims CPUs from the free
// set (free) until need reaches zero.
type accumulator struct {
	m      *machine
	whole  details // every CPU of the machine
	free   details // CPUs still claimable
	need   int
	result cpuset.CPUSet
	// numaFirst is true when NUMA nodes are at or above sockets in the
	// hierarchy (sockets >= NUMA nodes), as upstream decides.
	numaFirst bool
}

func newAccumulator(m *machine, available cpuset.CPUSet, n int) *accumulator {
	return &accumulator{
		m:         m,
		whole:     details{m, m.all},
		free:      details{m, m.all.Intersection(available)},
		need:      n,
		result:    cpuset.New(),
		numaFirst: m.numSockets >= m.numNUMA,
	}
}

func (a *accumulator) take(cpus cpuset.CPUSet) {
	a.result = a.result.Union(cpus)
	a.free = details{a.m, a.free.cpus.Difference(a.result)}
	a.need -= cpus.Size()
}

func (a *accumulator) satisfied() bool         { return a.need < 1 }
func (a *accumulator) failed() bool            { return a.need > a.free.cpus.Size() }
func (a *accumulator) needsAtLeast(n int) bool { return a.need >= n }

// sortByFree orders ids by ascending number of free CPUs, then by id.
func (a *accumulator) sortByFree(ids []int, cpusOf func(...int) cpuset.CPUSet) {
	sort.Slice(ids, func(i, j int) bool {
		si, sj := cpusOf(ids[i]).Size(), cpusOf(ids[j]).Size()
		if si != sj {
			return si < sj
		}
		return ids[i] < ids[j]
	})
}

func (a *accumulator) sortNUMANodes() []int {
	if a.numaFirst {
		numas := a.free.ids(numaOf)
		a.sortByFree(numas, a.free.inNUMA)
		return numas
	}
	var out []int
	for _, s := range a.sortSockets() {
		numas := a.free.sub(func(c host.CPU) bool { return c.Socket == s }, numaOf)
		a.sortByFree(numas, a.free.inNUMA)
		out = append(out, numas...)
	}
	return out
}

func (a *accumulator) sortSockets() []int {
	if !a.numaFirst {
		sockets := a.free.ids(socketOf)
		a.sortByFree(sockets, a.free.inSockets)
		return sockets
	}
	var out []int
	for _, n := range a.sortNUMANodes() {
		sockets := a.free.sub(func(c host.CPU) bool { return c.NUMANode == n }, socketOf)
		a.sortByFree(sockets, a.free.inSockets)
		out = append(out, sockets...)
	}
	return out
}

func (a *accumulator) sortCores() []int {
	var out []int
	if a.numaFirst {
		for _, s := range a.sortSockets() {
			cores := a.free.sub(func(c host.CPU) bool { return c.Socket == s }, coreOf)
			a.sortByFree(cores, a.free.inCores)
			out = append(out, cores...)
		}
		return out
	}
	for _, n := range a.sortNUMANodes() {
		cores := a.free.sub(func(c host.CPU) bool { return c.NUMANode == n }, coreOf)
		a.sortByFree(cores, a.free.inCores)
		out = append(out, cores...)
	}
	return out
}

func (a *accumulator) sortCPUs() []int {
	var out []int
	for _, core := range a.sortCores() {
		out = append(out, a.free.inCores(core).List()...)
	}
	return out
}

func (a *accumulator) takeFullNUMANodes() {
	var free []int
	for _, n := range a.sortNUMANodes() {
		if a.free.inNUMA(n).Size() == a.whole.inNUMA(n).Size() {
			free = append(free, n)
		}
	}
	for _, n := range free {
		cpus := a.whole.inNUMA(n)
		if !a.needsAtLeast(cpus.Size()) {
			continue
		}
		a.take(cpus)
	}
}

func (a *accumulator) takeFullSockets() {
	var free []int
	for _, s := range a.sortSockets() {
		if a.free.inSockets(s).Size() == a.m.cpusPerSocket() {
			free = append(free, s)
		}
	}
	for _, s := range free {
		cpus := a.whole.inSockets(s)
		if !a.needsAtLeast(cpus.Size()) {
			continue
		}
		a.take(cpus)
	}
}

func (a *accumulator) takeFullCores() {
	var free []int
	for _, c := range a.sortCores() {
		if a.free.inCores(c).Size() == a.m.cpusPerCore() {
			free = append(free, c)
		}
	}
	for _, c := range free {
		cpus := a.whole.inCores(c)
		if !a.needsAtLeast(cpus.Size()) {
			continue
		}
		a.take(cpus)
	}
}

func (a *accumulator) takeRemainingCPUs() {
	for _, c := range a.sortCPUs() {
		a.take(cpuset.New(c))
		if a.satisfied() {
			return
		}
	}
}

// TakeByTopology picks n CPUs from available on the machine t with
// upstream's packed algorithm (takeByTopologyNUMAPacked without options):
// whole NUMA nodes and whole sockets first (NUMA nodes first when sockets
// >= NUMA nodes, sockets first otherwise), then whole cores, then single
// threads, always preferring the groups with the fewest free CPUs so that
// allocations pack. CPUs in available that t does not know are ignored.
// n <= 0 returns the empty set.
func TakeByTopology(t host.Topology, available cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	return takeByTopology(newMachine(t), available, n)
}

func takeByTopology(m *machine, available cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	a := newAccumulator(m, available, n)
	if a.satisfied() {
		return a.result, nil
	}
	if a.failed() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d", n, available.Size())
	}
	if a.numaFirst {
		a.takeFullNUMANodes()
	} else {
		a.takeFullSockets()
	}
	if a.satisfied() {
		return a.result, nil
	}
	if a.numaFirst {
		a.takeFullSockets()
	} else {
		a.takeFullNUMANodes()
	}
	if a.satisfied() {
		return a.result, nil
	}
	a.takeFullCores()
	if a.satisfied() {
		return a.result, nil
	}
	a.takeRemainingCPUs()
	if a.satisfied() {
		return a.result, nil
	}
	return cpuset.New(), fmt.Errorf("failed to allocate cpus")
}
