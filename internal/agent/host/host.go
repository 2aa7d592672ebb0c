// Package host puts every machine fact the node agent reports behind one
// narrow interface, Host, and gathers them into a Facts snapshot once per
// status sync.
//
// What it owns: the shape of the facts (hostname, interfaces and default
// routes, CPU count, memory, hugepages, the filesystem under the agent's root
// directory, PID limits, machine/system/boot IDs, kernel and OS), and
// Snapshot, which reads them all and records which readings failed.
//
// Implementations: host/linux reads /proc, /sys, /etc and statfs; host/fake
// is a settable in-memory machine for tests and the simulator.
//
// What callers must do: call Snapshot (or the methods) from one place per
// sync; every method except Topology is cheap enough to call every 10 s,
// takes no lock the caller could deadlock on, and does not cache across
// calls unless its implementation says so. Topology (CPUs, cores, sockets,
// NUMA nodes and their distances) is not in Facts: whoever needs it reads it
// once at start; see Host.Topology.
//
// What it does not do: decide anything. Turning facts into node status
// (capacity, allocatable, pressure, addresses) is internal/agent/nodestatus.
package host

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// Host is the machine as the node agent sees it. Every method reads current
// values; a reading that cannot be taken returns an error that names what
// was read (for Linux, the file).
type Host interface {
	// Hostname is the kernel's host name, as os.Hostname returns it (not
	// lowercased; the agent applies --hostname-override and lowercasing).
	Hostname() (string, error)
	// Network lists the interfaces with their addresses and the default
	// routes, which node address detection needs.
	Network() (Network, error)
	// CPUs is the number of online logical CPUs of the machine (not the
	// cgroup quota or the process affinity), as cAdvisor reports cores.
	CPUs() (int, error)
	// Memory is the machine's memory capacity and what the eviction manager
	// counts as available.
	Memory() (Memory, error)
	// Hugepages lists every hugepage size the kernel supports, including
	// sizes with no pages reserved, ordered by page size.
	Hugepages() ([]Hugepages, error)
	// Filesystem describes the filesystem holding path (statfs).
	Filesystem(path string) (Filesystem, error)
	// PIDs is the task limit and the number of tasks now running.
	PIDs() (PIDs, error)
	// IDs are the machine, system and boot identifiers.
	IDs() (IDs, error)
	// OS describes the kernel, the distribution and the Go platform.
	OS() (OS, error)
	// Topology is the machine's CPU and NUMA layout: every online logical
	// CPU with its core, socket and NUMA node, and every online NUMA node
	// with its memory and distances. A machine without NUMA information
	// reports one node, 0, holding every CPU and all memory. The result
	// satisfies Topology.Validate.
	//
	// Topology is not part of Snapshot: the CPU, memory and topology
	// managers read it once when they start (a CPU or node coming online
	// later needs an agent restart, as upstream), and on a large machine it
	// reads several files per CPU, too many to repeat every status sync.
	Topology() (Topology, error)
}

// Family is an IP address family.
type Family int

const (
	// IPv4 is the IPv4 family.
	IPv4 Family = 4
	// IPv6 is the IPv6 family.
	IPv6 Family = 6
)

// String returns "IPv4" or "IPv6".
func (f Family) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("Family(%d)", int(f))
}

// FamilyOf reports the family of ip. An IPv4-mapped IPv6 address counts as
// IPv4, as net.IP.To4 treats it.
func FamilyOf(ip netip.Addr) Family {
	if ip.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Interface is one network interface.
type Interface struct {
	Name string
	// Flags carries net.FlagUp, net.FlagLoopback, net.FlagPointToPoint, ...
	Flags net.Flags
	// Addrs are the interface's addresses with their prefix lengths, in the
	// order the kernel lists them. IPv4 addresses are 4-byte (not mapped).
	Addrs []netip.Prefix
}

// Up reports whether the interface is administratively up.
func (i Interface) Up() bool { return i.Flags&net.FlagUp != 0 }

// Route is one default route (destination 0.0.0.0/0 or ::/0).
type Route struct {
	// Interface is the name of the interface the route leaves by.
	Interface string
	Family    Family
	// Gateway is the next hop; IPv6 default routes without one are not
	// listed (upstream treats them as loopback artefacts).
	Gateway netip.Addr
}

// Network is what node IP detection needs to know about the network.
type Network struct {
	// Interfaces lists every interface, in kernel index order.
	Interfaces []Interface
	// DefaultRoutes lists the default routes, IPv4 ones first, each family
	// in routing-table order.
	DefaultRoutes []Route
	// NoRouteTable is true when the machine has no IPv4 routing table to
	// read (no /proc/net/route). Detection then scans the interfaces instead
	// of following default routes, as upstream does.
	NoRouteTable bool
}

// DefaultRouteInterfaces returns the interfaces holding a default route of
// family f, in routing-table order, without duplicates.
func (n Network) DefaultRouteInterfaces(f Family) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range n.DefaultRoutes {
		if r.Family != f || seen[r.Interface] {
			continue
		}
		seen[r.Interface] = true
		names = append(names, r.Interface)
	}
	return names
}

// Memory describes the machine's memory, in bytes.
type Memory struct {
	// Capacity is MemTotal.
	Capacity uint64
	// Available is the eviction manager's memory.available signal: capacity
	// minus the working set of the whole machine. See the implementation for
	// how it is approximated.
	Available uint64
	// SwapTotal and SwapFree are /proc/meminfo's, 0 on a machine without
	// swap.
	SwapTotal, SwapFree uint64
}

// Hugepages is the reservation for one hugepage size.
type Hugepages struct {
	// PageSize is the size of one page in bytes (2097152 for 2Mi pages).
	PageSize uint64
	// Pages is the number of pages reserved (nr_hugepages).
	Pages uint64
}

// Filesystem describes one mounted filesystem. Sizes are bytes.
type Filesystem struct {
	Capacity   uint64
	Available  uint64 // to unprivileged users (f_bavail)
	Inodes     uint64
	InodesFree uint64
}

// PIDs describes the task limits of the machine.
type PIDs struct {
	// Max is the system-wide task limit: the smaller of kernel.pid_max and
	// kernel.threads-max.
	Max uint64
	// Running is the number of tasks (threads) that exist now.
	Running uint64
}

// Available is Max - Running, or 0 when more are running than the limit.
func (p PIDs) Available() uint64 {
	if p.Running >= p.Max {
		return 0
	}
	return p.Max - p.Running
}

// IDs identify the machine and the current boot.
type IDs struct {
	// MachineID is /etc/machine-id; empty when the machine has none.
	MachineID string
	// SystemUUID is the DMI product UUID; empty when unreadable (containers,
	// unprivileged users, machines without DMI).
	SystemUUID string
	// BootID changes on every boot; never empty when IDs succeeds.
	BootID string
}

// OS describes the software the node runs.
type OS struct {
	// KernelVersion is the kernel release, as `uname -r` prints it.
	KernelVersion string
	// OSImage is PRETTY_NAME from os-release.
	OSImage string
	// OperatingSystem and Architecture are runtime.GOOS and runtime.GOARCH.
	OperatingSystem string
	Architecture    string
}

// Fact names one reading in a Facts snapshot.
type Fact string

// The readings a Snapshot takes.
const (
	FactNetwork   Fact = "network"
	FactCPUs      Fact = "cpus"
	FactMemory    Fact = "memory"
	FactHugepages Fact = "hugepages"
	FactRootFS    Fact = "rootfs"
	FactPIDs      Fact = "pids"
	FactIDs       Fact = "ids"
	FactOS        Fact = "os"
)

// Facts is one snapshot of the machine, taken once per status sync and then
// read by pure code. A reading that failed keeps its zero value and has its
// error in Errs; every other field is valid.
type Facts struct {
	Network   Network
	CPUs      int
	Memory    Memory
	Hugepages []Hugepages
	// RootFS is the filesystem holding the agent's root directory (nodefs).
	RootFS Filesystem
	PIDs   PIDs
	IDs    IDs
	OS     OS
	// Errs holds the error of every reading that failed, by fact. Nil or
	// empty when every reading succeeded.
	Errs map[Fact]error
}

// Err returns the error of reading f, or nil when it succeeded.
func (f Facts) Err(fact Fact) error { return f.Errs[fact] }

// Equal reports whether f and g hold the same readings; failed readings
// compare by their error text. A status pass calls it on every tick, so it
// compares field by field rather than through reflection.
func (f Facts) Equal(g Facts) bool {
	return f.CPUs == g.CPUs && f.Memory == g.Memory && f.RootFS == g.RootFS &&
		f.PIDs == g.PIDs && f.IDs == g.IDs && f.OS == g.OS &&
		slices.Equal(f.Hugepages, g.Hugepages) && f.Network.equal(g.Network) &&
		errsEqual(f.Errs, g.Errs)
}

func (n Network) equal(m Network) bool {
	return n.NoRouteTable == m.NoRouteTable && slices.Equal(n.DefaultRoutes, m.DefaultRoutes) &&
		slices.EqualFunc(n.Interfaces, m.Interfaces, func(a, b Interface) bool {
			return a.Name == b.Name && a.Flags == b.Flags && slices.Equal(a.Addrs, b.Addrs)
		})
}

func errsEqual(a, b map[Fact]error) bool {
	if len(a) != len(b) {
		return false
	}
	for fact, err := range a {
		other, ok := b[fact]
		if !ok || (err == nil) != (other == nil) || (err != nil && err.Error() != other.Error()) {
			return false
		}
	}
	return true
}

// Snapshot reads every fact from h, with rootDir as the nodefs path. It
// always returns a usable Facts: failed readings are recorded in Facts.Errs
// and also joined into the returned error (nil when all succeeded), so the
// caller can log it once and still set the status from what was read.
func Snapshot(h Host, rootDir string) (Facts, error) {
	var f Facts
	record := func(fact Fact, err error) {
		if err == nil {
			return
		}
		if f.Errs == nil {
			f.Errs = map[Fact]error{}
		}
		f.Errs[fact] = err
	}
	var err error
	if f.Network, err = h.Network(); err != nil {
		f.Network = Network{}
		record(FactNetwork, err)
	}
	if f.CPUs, err = h.CPUs(); err != nil {
		f.CPUs = 0
		record(FactCPUs, err)
	}
	if f.Memory, err = h.Memory(); err != nil {
		f.Memory = Memory{}
		record(FactMemory, err)
	}
	if f.Hugepages, err = h.Hugepages(); err != nil {
		f.Hugepages = nil
		record(FactHugepages, err)
	}
	if f.RootFS, err = h.Filesystem(rootDir); err != nil {
		f.RootFS = Filesystem{}
		record(FactRootFS, err)
	}
	if f.PIDs, err = h.PIDs(); err != nil {
		f.PIDs = PIDs{}
		record(FactPIDs, err)
	}
	if f.IDs, err = h.IDs(); err != nil {
		f.IDs = IDs{}
		record(FactIDs, err)
	}
	if f.OS, err = h.OS(); err != nil {
		f.OS = OS{}
		record(FactOS, err)
	}
	return f, f.joined()
}

// joined returns the recorded errors as one, in a fixed order.
func (f Facts) joined() error {
	var errs []error
	for _, fact := range []Fact{FactNetwork, FactCPUs, FactMemory, FactHugepages, FactRootFS, FactPIDs, FactIDs, FactOS} {
		if err := f.Errs[fact]; err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", fact, err))
		}
	}
	return errors.Join(errs...)
}

// Topology is the machine's CPU and memory layout, as the CPU, memory and
// topology managers need it: every online logical CPU with the core,
// socket and NUMA node it belongs to, and every NUMA node with its memory
// and its distances to the others.
type Topology struct {
	// CPUs are the online logical CPUs, ordered by ID.
	CPUs []CPU
	// NUMANodes are the NUMA nodes, ordered by ID. A machine without NUMA
	// information has one node, 0, holding every CPU and all memory.
	NUMANodes []NUMANode
}

// CPU is one logical CPU (a hardware thread).
type CPU struct {
	// ID is the kernel's CPU number (cpuN).
	ID int
	// Core identifies the physical core, unique across the machine: two
	// CPUs with the same Core are SMT siblings.
	Core int
	// Socket is the physical package ID.
	Socket int
	// NUMANode is the ID of the NUMA node the CPU belongs to.
	NUMANode int
}

// NUMANode is one NUMA node.
type NUMANode struct {
	// ID is the kernel's node number (nodeN).
	ID int
	// MemoryBytes is the node's total memory.
	MemoryBytes uint64
	// Distances are the node's distances (the kernel's SLIT values, 10 to
	// itself) to every node, by node ID.
	Distances map[int]int
}

// LocalDistance is the distance of a NUMA node to itself (the kernel's
// LOCAL_DISTANCE, the SLIT diagonal). Every other distance is larger.
const LocalDistance = 10

// Validate checks the invariants every Host's Topology holds: at least one
// CPU and one node; CPUs and nodes ordered by unique, non-negative IDs;
// every CPU on a listed node; CPUs sharing a Core share its Socket and
// NUMA node; and every node has a distance to every node and no other,
// LocalDistance to itself and more than that to the others (distances need
// not be symmetric). The error names the first CPU or node that breaks one.
func (t Topology) Validate() error {
	if len(t.CPUs) == 0 {
		return errors.New("topology has no CPUs")
	}
	if len(t.NUMANodes) == 0 {
		return errors.New("topology has no NUMA nodes")
	}
	nodes := make(map[int]bool, len(t.NUMANodes))
	for i, n := range t.NUMANodes {
		if n.ID < 0 || (i > 0 && n.ID <= t.NUMANodes[i-1].ID) {
			return fmt.Errorf("NUMA node %d: IDs must be non-negative, unique and ascending", n.ID)
		}
		nodes[n.ID] = true
	}
	for _, n := range t.NUMANodes {
		if len(n.Distances) != len(t.NUMANodes) {
			return fmt.Errorf("NUMA node %d: has %d distances, want one to each of %d nodes", n.ID, len(n.Distances), len(t.NUMANodes))
		}
		for to, d := range n.Distances {
			switch {
			case !nodes[to]:
				return fmt.Errorf("NUMA node %d: distance to unknown node %d", n.ID, to)
			case to == n.ID && d != LocalDistance:
				return fmt.Errorf("NUMA node %d: distance to itself is %d, want %d", n.ID, d, LocalDistance)
			case to != n.ID && d <= LocalDistance:
				return fmt.Errorf("NUMA node %d: distance to node %d is %d, want more than %d", n.ID, to, d, LocalDistance)
			}
		}
	}
	cores := map[int]CPU{}
	for i, c := range t.CPUs {
		if c.ID < 0 || (i > 0 && c.ID <= t.CPUs[i-1].ID) {
			return fmt.Errorf("CPU %d: IDs must be non-negative, unique and ascending", c.ID)
		}
		if !nodes[c.NUMANode] {
			return fmt.Errorf("CPU %d: on NUMA node %d, which is not listed", c.ID, c.NUMANode)
		}
		first, ok := cores[c.Core]
		if !ok {
			cores[c.Core] = c
			continue
		}
		if first.Socket != c.Socket || first.NUMANode != c.NUMANode {
			return fmt.Errorf("CPU %d: shares core %d with CPU %d but is on socket %d, node %d, not socket %d, node %d",
				c.ID, c.Core, first.ID, c.Socket, c.NUMANode, first.Socket, first.NUMANode)
		}
	}
	return nil
}
