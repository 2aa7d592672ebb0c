package cpumanager

import (
	"slices"

	"k8s.io/utils/cpuset"

	"knode/internal/agent/host"
)

// machine is an indexed view of a host.Topology.
type machine struct {
	cpus       map[int]host.CPU
	all        cpuset.CPUSet
	numCores   int
	numSockets int
	numNUMA    int
}

func newMachine(t host.Topology) *machine {
	m := &machine{cpus: make(map[int]host.CPU, len(t.CPUs))}
	cores, sockets, numas := map[int]bool{}, map[int]bool{}, map[int]bool{}
	ids := make([]int, 0, len(t.CPUs))
	for _, c := range t.CPUs {
		m.cpus[c.ID] = c
		ids = append(ids, c.ID)
		cores[c.Core], sockets[c.Socket], numas[c.NUMANode] = true, true, true
	}
	m.all = cpuset.New(ids...)
	m.numCores, m.numSockets, m.numNUMA = len(cores), len(sockets), len(numas)
	return m
}

func (m *machine) cpusPerCore() int {
	if m.numCores == 0 {
		return 0
	}
	return m.all.Size() / m.numCores
}

func (m *machine) cpusPerSocket() int {
	if m.numSockets == 0 {
		return 0
	}
	return m.all.Size() / m.numSockets
}

// details is a subset of the machine's CPUs (upstream's CPUDetails).
type details struct {
	m    *machine
	cpus cpuset.CPUSet
}

func (d details) filter(keep func(host.CPU) bool) cpuset.CPUSet {
	var ids []int
	for _, id := range d.cpus.UnsortedList() {
		if keep(d.m.cpus[id]) {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

func (d details) ids(get func(host.CPU) int) []int {
	seen := map[int]bool{}
	var out []int
	for _, id := range d.cpus.List() {
		v := get(d.m.cpus[id])
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func coreOf(c host.CPU) int   { return c.Core }
func socketOf(c host.CPU) int { return c.Socket }
func numaOf(c host.CPU) int   { return c.NUMANode }

func (d details) inCores(ids ...int) cpuset.CPUSet {
	return d.filter(func(c host.CPU) bool { return slices.Contains(ids, c.Core) })
}
func (d details) inSockets(ids ...int) cpuset.CPUSet {
	return d.filter(func(c host.CPU) bool { return slices.Contains(ids, c.Socket) })
}
func (d details) inNUMA(ids ...int) cpuset.CPUSet {
	return d.filter(func(c host.CPU) bool { return slices.Contains(ids, c.NUMANode) })
}

// sub returns the ids of kind `get` of the CPUs that also match `in`.
func (d details) sub(in func(host.CPU) bool, get func(host.CPU) int) []int {
	return details{d.m, d.filter(in)}.ids(get)
}
