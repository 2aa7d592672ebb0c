// Package linux implements host.Host for a Linux machine by reading /proc,
// /sys and /etc, calling statfs, and listing interfaces through package net.
//
// Every file path is read under Config.Root, so tests point it at a fake tree
// in testdata; Filesystem paths and network interfaces are not rooted (they
// come from the real kernel unless Config.Interfaces is set).
//
// Choices, for the record:
//   - CPUs counts the online CPUs (/sys/devices/system/cpu/online), as
//     cAdvisor reports machine cores; cgroup cpu.max and affinity are ignored.
//   - Memory.Available is what the kubelet's eviction manager calls
//     memory.available: capacity minus the root cgroup's working set, where
//     working set = usage - inactive file pages and usage = MemTotal -
//     MemFree (how runc reads the cgroup v2 root). That is MemFree +
//     Inactive(file) from /proc/meminfo. It is a little lower than
//     MemAvailable, which also counts reclaimable slab and active file pages.
//   - PIDs.Max is min(kernel.pid_max, kernel.threads-max) and PIDs.Running
//     is the task count from /proc/loadavg, as the kubelet's pidlimit does.
//   - A missing machine-id or unreadable DMI product_uuid is an empty ID,
//     not an error (containers often have neither); a missing boot_id is an
//     error.
//   - Topology reads, for every online CPU, physical_package_id (Socket) and
//     thread_siblings_list; Core is the lowest online CPU among the
//     thread's SMT siblings, the unique core ID the upstream CPU manager
//     derives, so siblings share it without trusting core_id (which the
//     kernel only promises to be a platform identifier, not unique per
//     package). NUMA nodes are those in /sys/devices/system/node/online,
//     each with its cpulist, the MemTotal line of its meminfo and its
//     distance row (one value per online node, in that order). Without
//     /sys/devices/system/node (a kernel without CONFIG_NUMA) there is one
//     node 0 with every CPU, /proc/meminfo's MemTotal and distance 10.
//     Memory-only nodes (empty cpulist) are listed; a node's cpulist may
//     name offline CPUs, but no CPU may be in two nodes.
//   - Kernel version is /proc/sys/kernel/osrelease (the release uname(2)
//     returns) and the hostname /proc/sys/kernel/hostname (what os.Hostname
//     returns on Linux), so both can be faked under Root.
//
// Nothing is cached: every call reads the files again. A full Snapshot reads
// about a dozen small files and calls statfs once; Topology, which Snapshot
// does not call, reads 2 files per online CPU and 3 per NUMA node.
package linux

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"

	"knode/internal/agent/host"
)

// Config configures a Host. The zero value reads the real machine.
type Config struct {
	// Root is prepended to every file the host reads (/proc, /sys, /etc,
	// /usr/lib, /var/lib). Empty means "/".
	Root string
	// Interfaces lists the network interfaces. Nil means the real ones, from
	// net.Interfaces.
	Interfaces func() ([]host.Interface, error)
}

// Host reads machine facts from a Linux kernel. It is safe for concurrent
// use: it holds no mutable state.
type Host struct {
	root       string
	interfaces func() ([]host.Interface, error)
}

var _ host.Host = (*Host)(nil)

// New returns a Host configured by cfg.
func New(cfg Config) *Host {
	h := &Host{root: cfg.Root, interfaces: cfg.Interfaces}
	if h.root == "" {
		h.root = "/"
	}
	if h.interfaces == nil {
		h.interfaces = netInterfaces
	}
	return h
}

// path returns the rooted path of an absolute machine path.
func (h *Host) path(p string) string { return filepath.Join(h.root, p) }

// readTrimmed reads a small file and trims surrounding whitespace. Errors
// name the file (os.ReadFile's *PathError does).
func (h *Host) readTrimmed(p string) (string, error) {
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readUint reads a file holding one unsigned decimal number.
func (h *Host) readUint(p string) (uint64, error) {
	s, err := h.readTrimmed(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.path(p), err)
	}
	return n, nil
}

// Hostname reads /proc/sys/kernel/hostname.
func (h *Host) Hostname() (string, error) {
	name, err := h.readTrimmed("/proc/sys/kernel/hostname")
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("%s: empty hostname", h.path("/proc/sys/kernel/hostname"))
	}
	return name, nil
}

// CPUs counts the CPUs listed in /sys/devices/system/cpu/online.
func (h *Host) CPUs() (int, error) {
	p := "/sys/devices/system/cpu/online"
	s, err := h.readTrimmed(p)
	if err != nil {
		return 0, err
	}
	n, err := countCPUList(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.path(p), err)
	}
	return n, nil
}

// maxCPUID bounds the CPU IDs a cpulist may name, so a corrupt file cannot
// make parseCPUList allocate without limit. The largest NR_CPUS any Linux
// architecture allows is 8192.
const maxCPUID = 1 << 20

// cpuListEntry parses one entry of a kernel cpulist, "N" or "N-M".
func cpuListEntry(part string) (first, last int, err error) {
	lo, hi, isRange := strings.Cut(part, "-")
	first, err = strconv.Atoi(lo)
	if err != nil || first < 0 || first > maxCPUID {
		return 0, 0, fmt.Errorf("bad CPU list entry %q", part)
	}
	last = first
	if isRange {
		if last, err = strconv.Atoi(hi); err != nil || last < first || last > maxCPUID {
			return 0, 0, fmt.Errorf("bad CPU list entry %q", part)
		}
	}
	return first, last, nil
}

// countCPUList counts the CPUs in a kernel cpulist such as "0-3,8,10-11".
func countCPUList(s string) (int, error) {
	if s == "" {
		return 0, errors.New("empty CPU list")
	}
	total := 0
	for _, part := range strings.Split(s, ",") {
		first, last, err := cpuListEntry(part)
		if err != nil {
			return 0, err
		}
		total += last - first + 1
	}
	return total, nil
}

// parseCPUList returns the CPUs of a kernel cpulist such as "0-3,8,10-11",
// ascending and without duplicates. The empty list (a node without CPUs)
// has none.
func parseCPUList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		first, last, err := cpuListEntry(part)
		if err != nil {
			return nil, err
		}
		for id := first; id <= last; id++ {
			cpus = append(cpus, id)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// readCPUList reads a file holding a kernel cpulist.
func (h *Host) readCPUList(p string) ([]int, error) {
	s, err := h.readTrimmed(p)
	if err != nil {
		return nil, err
	}
	cpus, err := parseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", h.path(p), err)
	}
	return cpus, nil
}

// readInt reads a file holding one signed decimal number.
func (h *Host) readInt(p string) (int, error) {
	s, err := h.readTrimmed(p)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.path(p), err)
	}
	return n, nil
}

const (
	cpuSysDir  = "/sys/devices/system/cpu"
	nodeSysDir = "/sys/devices/system/node"
)

// Topology reads the CPU and NUMA layout from /sys/devices/system/cpu and
// /sys/devices/system/node (see the package comment for the choices). An
// inconsistent layout, such as an online CPU in no node's cpulist or a
// distance row of the wrong length, is an error naming the file.
func (h *Host) Topology() (host.Topology, error) {
	online, err := h.readCPUList(cpuSysDir + "/online")
	if err != nil {
		return host.Topology{}, err
	}
	if len(online) == 0 {
		return host.Topology{}, fmt.Errorf("%s: no online CPUs", h.path(cpuSysDir+"/online"))
	}
	isOnline := make(map[int]bool, len(online))
	for _, id := range online {
		isOnline[id] = true
	}
	cpus := make([]host.CPU, 0, len(online))
	for _, id := range online {
		dir := fmt.Sprintf("%s/cpu%d/topology", cpuSysDir, id)
		socket, err := h.readInt(dir + "/physical_package_id")
		if err != nil {
			return host.Topology{}, err
		}
		siblings, err := h.readCPUList(dir + "/thread_siblings_list")
		if err != nil {
			return host.Topology{}, err
		}
		core := id
		for _, s := range siblings {
			if isOnline[s] && s < core {
				core = s
			}
		}
		cpus = append(cpus, host.CPU{ID: id, Core: core, Socket: socket})
	}
	nodes, nodeOf, err := h.numaNodes(isOnline)
	if err != nil {
		return host.Topology{}, err
	}
	for i := range cpus {
		n, ok := nodeOf[cpus[i].ID]
		if !ok {
			return host.Topology{}, fmt.Errorf("%s: CPU %d is online but in no online node's cpulist", h.path(nodeSysDir), cpus[i].ID)
		}
		cpus[i].NUMANode = n
	}
	t := host.Topology{CPUs: cpus, NUMANodes: nodes}
	if err := t.Validate(); err != nil {
		return host.Topology{}, fmt.Errorf("%s: %w", h.path("/sys/devices/system"), err)
	}
	return t, nil
}

// numaNodes reads the online NUMA nodes and returns them with the node of
// every CPU their cpulists name (online or not). Without a node directory
// it returns the single node 0 holding every online CPU.
func (h *Host) numaNodes(isOnline map[int]bool) ([]host.NUMANode, map[int]int, error) {
	ids, err := h.readCPUList(nodeSysDir + "/online")
	if errors.Is(err, fs.ErrNotExist) {
		return h.singleNode(isOnline)
	}
	if err != nil {
		return nil, nil, err
	}
	if len(ids) == 0 {
		return nil, nil, fmt.Errorf("%s: no online NUMA nodes", h.path(nodeSysDir+"/online"))
	}
	nodes := make([]host.NUMANode, 0, len(ids))
	nodeOf := make(map[int]int, len(isOnline))
	for _, id := range ids {
		dir := fmt.Sprintf("%s/node%d", nodeSysDir, id)
		cpus, err := h.readCPUList(dir + "/cpulist")
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cpus {
			if other, ok := nodeOf[c]; ok {
				return nil, nil, fmt.Errorf("%s: CPU %d is also in node %d", h.path(dir+"/cpulist"), c, other)
			}
			nodeOf[c] = id
		}
		b, err := os.ReadFile(h.path(dir + "/meminfo"))
		if err != nil {
			return nil, nil, err
		}
		mem, err := parseMeminfo(b, fmt.Sprintf("Node %d MemTotal", id))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", h.path(dir+"/meminfo"), err)
		}
		s, err := h.readTrimmed(dir + "/distance")
		if err != nil {
			return nil, nil, err
		}
		distances, err := parseDistances(s, ids)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", h.path(dir+"/distance"), err)
		}
		nodes = append(nodes, host.NUMANode{ID: id, MemoryBytes: mem[0], Distances: distances})
	}
	return nodes, nodeOf, nil
}

// singleNode is the topology of a kernel without NUMA: node 0 holds every
// CPU and the machine's MemTotal.
func (h *Host) singleNode(isOnline map[int]bool) ([]host.NUMANode, map[int]int, error) {
	p := "/proc/meminfo"
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return nil, nil, err
	}
	mem, err := parseMeminfo(b, "MemTotal")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", h.path(p), err)
	}
	nodeOf := make(map[int]int, len(isOnline))
	for c := range isOnline {
		nodeOf[c] = 0
	}
	return []host.NUMANode{{ID: 0, MemoryBytes: mem[0], Distances: map[int]int{0: host.LocalDistance}}}, nodeOf, nil
}

// parseDistances parses a node's distance row, "10 21": one distance per
// online node, in the order of nodes, and returns them by node ID.
func parseDistances(s string, nodes []int) (map[int]int, error) {
	fields := strings.Fields(s)
	if len(fields) != len(nodes) {
		return nil, fmt.Errorf("%d distances for %d online nodes", len(fields), len(nodes))
	}
	out := make(map[int]int, len(nodes))
	for i, f := range fields {
		d, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad distance %q", f)
		}
		out[nodes[i]] = d
	}
	return out, nil
}

// Memory reads MemTotal, MemFree, Inactive(file), SwapTotal and SwapFree
// from /proc/meminfo.
func (h *Host) Memory() (host.Memory, error) {
	p := "/proc/meminfo"
	b, err := os.ReadFile(h.path(p))
	if err != nil {
		return host.Memory{}, err
	}
	values, err := parseMeminfo(b, "MemTotal", "MemFree", "Inactive(file)")
	if err != nil {
		return host.Memory{}, fmt.Errorf("%s: %w", h.path(p), err)
	}
	total, free, inactiveFile := values[0], values[1], values[2]
	available := free + inactiveFile
	if available > total {
		available = total
	}
	m := host.Memory{Capacity: total, Available: available}
	// A kernel built without swap has no Swap lines: no swap.
	if sw, err := parseMeminfo(b, "SwapTotal", "SwapFree"); err == nil {
		m.SwapTotal, m.SwapFree = sw[0], sw[1]
	}
	return m, nil
}

// parseMeminfo returns the named /proc/meminfo fields in bytes, in the
// order asked. Every name must be present.
func parseMeminfo(b []byte, names ...string) ([]uint64, error) {
	want := make(map[string]int, len(names))
	for i, n := range names {
		want[n] = i
	}
	out := make([]uint64, len(names))
	found := make([]bool, len(names))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		i, ok := want[key]
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("%s has no value", key)
		}
		v, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if len(fields) > 1 {
			if fields[1] != "kB" {
				return nil, fmt.Errorf("%s: unknown unit %q", key, fields[1])
			}
			v *= 1024
		}
		out[i], found[i] = v, true
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("no %s line", names[i])
		}
	}
	return out, nil
}

// Hugepages reads nr_hugepages for every size under /sys/kernel/mm/hugepages.
// A kernel without hugetlb support (no such directory) has no sizes.
func (h *Host) Hugepages() ([]host.Hugepages, error) {
	dir := "/sys/kernel/mm/hugepages"
	entries, err := os.ReadDir(h.path(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []host.Hugepages
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, ok = strings.CutSuffix(kb, "kB")
		if !ok {
			continue
		}
		size, err := strconv.ParseUint(kb, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad hugepage size directory %q", h.path(dir), e.Name())
		}
		pages, err := h.readUint(dir + "/" + e.Name() + "/nr_hugepages")
		if err != nil {
			return nil, err
		}
		out = append(out, host.Hugepages{PageSize: size * 1024, Pages: pages})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PageSize < out[j].PageSize })
	return out, nil
}

// Filesystem calls statfs on path (not under Root).
func (h *Host) Filesystem(path string) (host.Filesystem, error) {
	return statfs(path)
}

// PIDs reads kernel.pid_max, kernel.threads-max and /proc/loadavg.
func (h *Host) PIDs() (host.PIDs, error) {
	max, err := h.readUint("/proc/sys/kernel/pid_max")
	if err != nil {
		return host.PIDs{}, err
	}
	// threads-max also caps the task count; it is optional, as upstream
	// uses whichever of the two limits it can read.
	if threads, err := h.readUint("/proc/sys/kernel/threads-max"); err == nil && threads < max {
		max = threads
	}
	p := "/proc/loadavg"
	s, err := h.readTrimmed(p)
	if err != nil {
		return host.PIDs{}, err
	}
	running, err := parseLoadavgTasks(s)
	if err != nil {
		return host.PIDs{}, fmt.Errorf("%s: %w", h.path(p), err)
	}
	return host.PIDs{Max: max, Running: running}, nil
}

// parseLoadavgTasks returns the total task count, the number after the
// slash in the fourth field ("0.10 0.20 0.30 2/345 6789").
func parseLoadavgTasks(s string) (uint64, error) {
	fields := strings.Fields(s)
	if len(fields) < 5 {
		return 0, errors.New("want 5 fields")
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("fourth field %q is not running/total", fields[3])
	}
	n, err := strconv.ParseUint(total, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fourth field %q: %w", fields[3], err)
	}
	return n, nil
}

// IDs reads the machine ID, the DMI product UUID and the boot ID.
func (h *Host) IDs() (host.IDs, error) {
	var ids host.IDs
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		id, err := h.readTrimmed(p)
		if err == nil && id != "" {
			ids.MachineID = id
			break
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return host.IDs{}, err
		}
	}
	// Unreadable without root on most machines, and absent in VMs without
	// DMI: an empty UUID is the documented result.
	if uuid, err := h.readTrimmed("/sys/class/dmi/id/product_uuid"); err == nil {
		ids.SystemUUID = uuid
	}
	p := "/proc/sys/kernel/random/boot_id"
	boot, err := h.readTrimmed(p)
	if err != nil {
		return host.IDs{}, err
	}
	if boot == "" {
		return host.IDs{}, fmt.Errorf("%s: empty boot ID", h.path(p))
	}
	ids.BootID = boot
	return ids, nil
}

// OS reads the kernel release and PRETTY_NAME from os-release.
func (h *Host) OS() (host.OS, error) {
	kernel, err := h.readTrimmed("/proc/sys/kernel/osrelease")
	if err != nil {
		return host.OS{}, err
	}
	image, err := h.osImage()
	if err != nil {
		return host.OS{}, err
	}
	return host.OS{
		KernelVersion:   kernel,
		OSImage:         image,
		OperatingSystem: runtime.GOOS,
		Architecture:    runtime.GOARCH,
	}, nil
}

// osImage returns PRETTY_NAME from /etc/os-release, or /usr/lib/os-release
// when the first does not exist (os-release(5)). A file without PRETTY_NAME
// gives "Linux", the default os-release(5) documents.
func (h *Host) osImage() (string, error) {
	b, err := os.ReadFile(h.path("/etc/os-release"))
	if errors.Is(err, fs.ErrNotExist) {
		b, err = os.ReadFile(h.path("/usr/lib/os-release"))
	}
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "PRETTY_NAME=")
		if !ok {
			continue
		}
		if v = unquote(v); v != "" {
			return v, nil
		}
	}
	return "Linux", nil
}

// unquote strips one level of shell-style quotes from an os-release value.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
		if v != "" {
			v = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`").Replace(v)
		}
	}
	return v
}

// Network lists the interfaces and reads the default routes from
// /proc/net/route and /proc/net/ipv6_route.
func (h *Host) Network() (host.Network, error) {
	ifaces, err := h.interfaces()
	if err != nil {
		return host.Network{}, err
	}
	n := host.Network{Interfaces: ifaces}
	v4, err := os.ReadFile(h.path("/proc/net/route"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		n.NoRouteTable = true
		return n, nil
	case err != nil:
		return host.Network{}, err
	}
	if n.DefaultRoutes, err = parseIPv4Routes(v4); err != nil {
		return host.Network{}, fmt.Errorf("%s: %w", h.path("/proc/net/route"), err)
	}
	// The IPv6 table is optional: a kernel without IPv6 has no file.
	v6, err := os.ReadFile(h.path("/proc/net/ipv6_route"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return n, nil
	case err != nil:
		return host.Network{}, err
	}
	routes6, err := parseIPv6Routes(v6)
	if err != nil {
		return host.Network{}, fmt.Errorf("%s: %w", h.path("/proc/net/ipv6_route"), err)
	}
	n.DefaultRoutes = append(n.DefaultRoutes, routes6...)
	return n, nil
}

// parseIPv4Routes returns the default routes of /proc/net/route: lines whose
// destination (field 1, little-endian hex) is 0.0.0.0.
func parseIPv4Routes(b []byte) ([]host.Route, error) {
	var routes []host.Route
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] == "Iface" {
			continue
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("line %d: want at least 3 fields", line)
		}
		dest, err := parseRouteAddr(fields[1], true)
		if err != nil {
			return nil, fmt.Errorf("line %d: destination: %w", line, err)
		}
		gw, err := parseRouteAddr(fields[2], true)
		if err != nil {
			return nil, fmt.Errorf("line %d: gateway: %w", line, err)
		}
		if !dest.IsUnspecified() {
			continue
		}
		routes = append(routes, host.Route{Interface: fields[0], Family: host.IPv4, Gateway: gw})
	}
	return routes, nil
}

// parseIPv6Routes returns the default routes of /proc/net/ipv6_route: ::/0
// with a gateway. Routes to ::/0 without a gateway are the kernel's
// unreachable or loopback entries and are skipped, as upstream does.
func parseIPv6Routes(b []byte) ([]host.Route, error) {
	var routes []host.Route
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) < 10 {
			return nil, fmt.Errorf("line %d: want 10 fields", line)
		}
		dest, err := parseRouteAddr(fields[0], false)
		if err != nil {
			return nil, fmt.Errorf("line %d: destination: %w", line, err)
		}
		gw, err := parseRouteAddr(fields[4], false)
		if err != nil {
			return nil, fmt.Errorf("line %d: gateway: %w", line, err)
		}
		if !dest.IsUnspecified() || fields[1] != "00" || gw.IsUnspecified() {
			continue
		}
		routes = append(routes, host.Route{Interface: fields[9], Family: host.IPv6, Gateway: gw})
	}
	return routes, nil
}

// parseRouteAddr decodes a hex address from a route table. IPv4 addresses
// are stored little-endian.
func parseRouteAddr(s string, v4 bool) (netip.Addr, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if v4 {
		if len(b) != 4 {
			return netip.Addr{}, fmt.Errorf("invalid IPv4 address %q", s)
		}
		return netip.AddrFrom4([4]byte{b[3], b[2], b[1], b[0]}), nil
	}
	if len(b) != 16 {
		return netip.Addr{}, fmt.Errorf("invalid IPv6 address %q", s)
	}
	return netip.AddrFrom16([16]byte(b)), nil
}

// netInterfaces lists the real interfaces through package net.
func netInterfaces() ([]host.Interface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	out := make([]host.Interface, 0, len(ifaces))
	for _, i := range ifaces {
		addrs, err := i.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of interface %s: %w", i.Name, err)
		}
		hi := host.Interface{Name: i.Name, Flags: i.Flags}
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipnet.IP)
			if !ok {
				continue
			}
			ones, _ := ipnet.Mask.Size()
			hi.Addrs = append(hi.Addrs, netip.PrefixFrom(ip.Unmap(), ones))
		}
		out = append(out, hi)
	}
	return out, nil
}
