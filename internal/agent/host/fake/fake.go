// Package fake implements host.Host as a settable, deterministic machine for
// tests and the simulator.
//
// A Host holds a State; Update changes it atomically and every host.Host
// method reads it. Values returned never alias the State, so a caller may
// keep or modify them. All methods are safe for concurrent use.
//
// Topology: State.Topology when it lists CPUs, else UniformTopology of
// State.CPUs and State.Memory.Capacity. SplitTopology makes a machine of
// several NUMA nodes for State.Topology. TopologyTwoSocketSMT and
// TopologyFourNUMA are the machines of host/linux's sysfs fixtures, for
// tests of the resource managers.
//
// What it does not do: simulate anything by itself. Memory does not fill up
// and disks do not drain unless a test or a scenario calls Update.
package fake

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"

	"knode/internal/agent/host"
)

// State is everything the fake machine reports.
type State struct {
	Hostname  string
	Network   host.Network
	CPUs      int
	Memory    host.Memory
	Hugepages []host.Hugepages
	// Filesystem is reported for every path not in Filesystems.
	Filesystem  host.Filesystem
	Filesystems map[string]host.Filesystem
	PIDs        host.PIDs
	IDs         host.IDs
	OS          host.OS
	// Topology is what Topology reports. Zero (no CPUs) means the uniform
	// machine UniformTopology(CPUs, Memory.Capacity), which follows CPUs
	// and Memory when they change.
	Topology host.Topology
	// Errs makes the reading of a fact fail with the given error. The
	// hostname and the topology have no Fact; set HostnameErr or
	// TopologyErr instead.
	Errs        map[host.Fact]error
	HostnameErr error
	TopologyErr error
}

// Host is a fake machine.
type Host struct {
	mu    sync.Mutex
	state State
}

var _ host.Host = (*Host)(nil)

// New returns a Host reporting s. New copies s.
func New(s State) *Host {
	return &Host{state: s.clone()}
}

// Machine returns the State of a plausible, deterministic Linux machine
// named name, with address ip (an IPv4 address on eth0 holding the default
// route): 4 CPUs, 8Gi of memory of which 6Gi available, 100Gi of disk of
// which 60Gi available, no hugepages reserved, and IDs derived from name.
func Machine(name string, ip netip.Addr) State {
	prefix := netip.PrefixFrom(ip, 24)
	if ip.Is6() {
		prefix = netip.PrefixFrom(ip, 64)
	}
	family := host.FamilyOf(ip)
	return State{
		Hostname: name,
		Network: host.Network{
			Interfaces: []host.Interface{
				{Name: "lo", Flags: net.FlagUp | net.FlagLoopback, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
				{Name: "eth0", Flags: net.FlagUp | net.FlagBroadcast | net.FlagMulticast, Addrs: []netip.Prefix{prefix}},
			},
			DefaultRoutes: []host.Route{{Interface: "eth0", Family: family}},
		},
		CPUs:   4,
		Memory: host.Memory{Capacity: 8 << 30, Available: 6 << 30},
		Hugepages: []host.Hugepages{
			{PageSize: 2 << 20, Pages: 0},
			{PageSize: 1 << 30, Pages: 0},
		},
		Filesystem: host.Filesystem{Capacity: 100 << 30, Available: 60 << 30, Inodes: 6553600, InodesFree: 6000000},
		PIDs:       host.PIDs{Max: 4194304, Running: 300},
		IDs: host.IDs{
			MachineID:  "machine-" + name,
			SystemUUID: "system-" + name,
			BootID:     "boot-" + name,
		},
		OS: host.OS{
			KernelVersion:   "6.1.0-knode",
			OSImage:         "knode simulated Linux",
			OperatingSystem: "linux",
			Architecture:    "amd64",
		},
	}
}

// Update calls fn with the state under the host's lock; fn may change any
// field. Readers see either the whole change or none of it.
func (h *Host) Update(fn func(s *State)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn(&h.state)
	h.state = h.state.clone()
}

// State returns a copy of the current state.
func (h *Host) State() State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state.clone()
}

// Hostname implements host.Host.
func (h *Host) Hostname() (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state.HostnameErr != nil {
		return "", h.state.HostnameErr
	}
	return h.state.Hostname, nil
}

// Network implements host.Host.
func (h *Host) Network() (host.Network, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactNetwork]; err != nil {
		return host.Network{}, err
	}
	return cloneNetwork(h.state.Network), nil
}

// CPUs implements host.Host.
func (h *Host) CPUs() (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactCPUs]; err != nil {
		return 0, err
	}
	return h.state.CPUs, nil
}

// Memory implements host.Host.
func (h *Host) Memory() (host.Memory, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactMemory]; err != nil {
		return host.Memory{}, err
	}
	return h.state.Memory, nil
}

// Hugepages implements host.Host.
func (h *Host) Hugepages() ([]host.Hugepages, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactHugepages]; err != nil {
		return nil, err
	}
	return slices.Clone(h.state.Hugepages), nil
}

// Filesystem implements host.Host. The error set for host.FactRootFS
// applies to every path.
func (h *Host) Filesystem(path string) (host.Filesystem, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactRootFS]; err != nil {
		return host.Filesystem{}, err
	}
	if fs, ok := h.state.Filesystems[path]; ok {
		return fs, nil
	}
	return h.state.Filesystem, nil
}

// PIDs implements host.Host.
func (h *Host) PIDs() (host.PIDs, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactPIDs]; err != nil {
		return host.PIDs{}, err
	}
	return h.state.PIDs, nil
}

// IDs implements host.Host.
func (h *Host) IDs() (host.IDs, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactIDs]; err != nil {
		return host.IDs{}, err
	}
	return h.state.IDs, nil
}

// OS implements host.Host.
func (h *Host) OS() (host.OS, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.state.Errs[host.FactOS]; err != nil {
		return host.OS{}, err
	}
	return h.state.OS, nil
}

// Topology implements host.Host.
func (h *Host) Topology() (host.Topology, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state.TopologyErr != nil {
		return host.Topology{}, h.state.TopologyErr
	}
	if len(h.state.Topology.CPUs) == 0 {
		return UniformTopology(h.state.CPUs, h.state.Memory.Capacity), nil
	}
	return cloneTopology(h.state.Topology), nil
}

// UniformTopology is a machine without SMT or NUMA: one socket, 0, and one
// node, 0, with memory bytes, holding cpus CPUs numbered from 0, each its
// own core. cpus < 1 counts as 1. It is SplitTopology(cpus, 1, memory).
func UniformTopology(cpus int, memory uint64) host.Topology {
	return SplitTopology(cpus, 1, memory)
}

// RemoteDistance is the distance SplitTopology gives between two different
// NUMA nodes (the kernel's usual value for the other socket).
const RemoteDistance = 20

// SplitTopology is a machine without SMT whose cpus CPUs (numbered from 0,
// each its own core) and memory bytes are split over numaNodes NUMA nodes,
// one socket each: node k holds the CPUs i with i*numaNodes/cpus == k, so
// consecutive blocks of cpus/numaNodes CPUs when that divides evenly, and
// memory/numaNodes bytes (the last node also the remainder). Nodes are
// LocalDistance from themselves and RemoteDistance from each other. cpus
// < 1 counts as 1; numaNodes is held between 1 and cpus, so every node has
// a CPU. Each call returns a new value.
func SplitTopology(cpus, numaNodes int, memory uint64) host.Topology {
	cpus = max(cpus, 1)
	numaNodes = min(max(numaNodes, 1), cpus)
	t := host.Topology{CPUs: make([]host.CPU, cpus), NUMANodes: make([]host.NUMANode, numaNodes)}
	per := memory / uint64(numaNodes)
	for k := range t.NUMANodes {
		d := make(map[int]int, numaNodes)
		for m := range numaNodes {
			d[m] = RemoteDistance
		}
		d[k] = host.LocalDistance
		t.NUMANodes[k] = host.NUMANode{ID: k, MemoryBytes: per, Distances: d}
	}
	t.NUMANodes[numaNodes-1].MemoryBytes += memory - per*uint64(numaNodes)
	for i := range t.CPUs {
		node := i * numaNodes / cpus
		t.CPUs[i] = host.CPU{ID: i, Core: i, Socket: node, NUMANode: node}
	}
	return t
}

// TopologyTwoSocketSMT is an Intel-style two-socket machine, the linux
// fixture testdata/twosocket: 2 sockets × 2 cores × 2 threads, one NUMA
// node per socket at distance 21. CPUs 0-3 are the first thread of each
// core and 4-7 their siblings (CPU n and n+4 share a core), so socket 0
// and node 0 hold CPUs 0,1,4,5 and socket 1 and node 1 hold 2,3,6,7.
// Node memory is 65755740 kB and 66058960 kB. Each call returns a new
// value.
func TopologyTwoSocketSMT() host.Topology {
	t := host.Topology{NUMANodes: []host.NUMANode{
		{ID: 0, MemoryBytes: 65755740 << 10, Distances: map[int]int{0: 10, 1: 21}},
		{ID: 1, MemoryBytes: 66058960 << 10, Distances: map[int]int{0: 21, 1: 10}},
	}}
	for id := 0; id < 8; id++ {
		core := id % 4
		t.CPUs = append(t.CPUs, host.CPU{ID: id, Core: core, Socket: core / 2, NUMANode: core / 2})
	}
	return t
}

// TopologyFourNUMA is an AMD-style two-socket machine with two NUMA nodes
// per socket (NPS2 or sub-NUMA clustering), the linux fixture
// testdata/fournuma: 16 CPUs, 2 sockets × 2 nodes × 2 cores × 2 threads.
// CPUs 0-7 are the first thread of each core and 8-15 their siblings (CPU
// n and n+8 share a core); node k holds CPUs 2k, 2k+1, 2k+8 and 2k+9, and
// nodes 0-1 are socket 0, nodes 2-3 socket 1. Distances are 10 to itself,
// 12 to the other node of its socket, and 20 or 22 to the nodes of the
// other socket (the nearer one is the node with the same index there):
//
//	10 12 20 22
//	12 10 22 20
//	20 22 10 12
//	22 20 12 10
//
// Each call returns a new value.
func TopologyFourNUMA() host.Topology {
	rows := [4][4]int{{10, 12, 20, 22}, {12, 10, 22, 20}, {20, 22, 10, 12}, {22, 20, 12, 10}}
	memKB := [4]uint64{32617420, 33025132, 33025132, 32993388}
	var t host.Topology
	for n, row := range rows {
		d := map[int]int{}
		for m, v := range row {
			d[m] = v
		}
		t.NUMANodes = append(t.NUMANodes, host.NUMANode{ID: n, MemoryBytes: memKB[n] << 10, Distances: d})
	}
	for id := 0; id < 16; id++ {
		core := id % 8
		t.CPUs = append(t.CPUs, host.CPU{ID: id, Core: core, Socket: core / 4, NUMANode: core / 2})
	}
	return t
}

// clone returns a deep copy of s, so no slice or map is shared.
func (s State) clone() State {
	out := s
	out.Topology = cloneTopology(s.Topology)
	out.Network = cloneNetwork(s.Network)
	out.Hugepages = slices.Clone(s.Hugepages)
	if s.Filesystems != nil {
		out.Filesystems = make(map[string]host.Filesystem, len(s.Filesystems))
		for k, v := range s.Filesystems {
			out.Filesystems[k] = v
		}
	}
	if s.Errs != nil {
		out.Errs = make(map[host.Fact]error, len(s.Errs))
		for k, v := range s.Errs {
			out.Errs[k] = v
		}
	}
	return out
}

// cloneNetwork returns a deep copy of n.
func cloneNetwork(n host.Network) host.Network {
	out := n
	out.Interfaces = nil
	if n.Interfaces != nil {
		out.Interfaces = make([]host.Interface, 0, len(n.Interfaces))
	}
	for _, i := range n.Interfaces {
		i.Addrs = slices.Clone(i.Addrs)
		out.Interfaces = append(out.Interfaces, i)
	}
	out.DefaultRoutes = slices.Clone(n.DefaultRoutes)
	return out
}

// cloneTopology returns a deep copy of t.
func cloneTopology(t host.Topology) host.Topology {
	out := host.Topology{CPUs: slices.Clone(t.CPUs), NUMANodes: slices.Clone(t.NUMANodes)}
	for i, n := range out.NUMANodes {
		out.NUMANodes[i].Distances = maps.Clone(n.Distances)
	}
	return out
}
