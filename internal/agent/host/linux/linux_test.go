package linux

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/host"
	"knode/internal/agent/host/fake"
)

// addrCmp compares netip values by value.
var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func fixedInterfaces() ([]host.Interface, error) {
	return []host.Interface{{Name: "eth0", Flags: net.FlagUp, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}}, nil
}

// TestFakeRoot reads every fact from the testdata trees.
func TestFakeRoot(t *testing.T) {
	type facts struct {
		Hostname  string
		Network   host.Network
		CPUs      int
		Memory    host.Memory
		Hugepages []host.Hugepages
		PIDs      host.PIDs
		IDs       host.IDs
		OS        host.OS
	}
	tests := []struct {
		name string
		root string
		want facts
	}{
		{
			name: "full machine",
			root: "testdata/full",
			want: facts{
				Hostname: "Test-Node",
				Network: host.Network{
					Interfaces: []host.Interface{{Name: "eth0", Flags: net.FlagUp, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}},
					DefaultRoutes: []host.Route{
						{Interface: "eth1", Family: host.IPv4, Gateway: netip.MustParseAddr("192.168.2.1")},
						{Interface: "eth0", Family: host.IPv4, Gateway: netip.MustParseAddr("10.0.0.1")},
						{Interface: "eth0", Family: host.IPv6, Gateway: netip.MustParseAddr("fd00::1")},
					},
				},
				CPUs: 5,
				// available = MemFree + Inactive(file) = 2048000 kB + 4900000 kB
				Memory:    host.Memory{Capacity: 16384000 * 1024, Available: (2048000 + 4900000) * 1024, SwapTotal: 2097148 * 1024, SwapFree: 2000000 * 1024},
				Hugepages: []host.Hugepages{{PageSize: 2 << 20, Pages: 512}, {PageSize: 1 << 30, Pages: 2}},
				// threads-max is lower than pid_max; running is the loadavg total.
				PIDs: host.PIDs{Max: 95432, Running: 1234},
				IDs: host.IDs{
					MachineID:  "3d1219c7c4c5404aaa1f6d2a48adfda4",
					SystemUUID: "4c4c4544-0042-3510-8052-b4c04f4e4d32",
					BootID:     "25d002f2-3d04-451a-a2e4-1be24d65595f",
				},
				OS: host.OS{KernelVersion: "6.1.0-13-amd64", OSImage: "Debian GNU/Linux 12 (bookworm)", OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH},
			},
		},
		{
			name: "minimal container: no routes, dbus machine id, usr/lib os-release, no DMI, no hugepages",
			root: "testdata/minimal",
			want: facts{
				Hostname: "minimal",
				Network: host.Network{
					Interfaces:   []host.Interface{{Name: "eth0", Flags: net.FlagUp, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}},
					NoRouteTable: true,
				},
				CPUs:   1,
				Memory: host.Memory{Capacity: 1000 * 1024, Available: 150 * 1024},
				PIDs:   host.PIDs{Max: 32768, Running: 40},
				IDs:    host.IDs{MachineID: "dbus-machine-id", BootID: "b0a7f1de-0000-4000-8000-000000000001"},
				OS:     host.OS{KernelVersion: "5.15.0", OSImage: "Linux", OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New(Config{Root: tt.root, Interfaces: fixedInterfaces})
			var got facts
			var err error
			must := func(what string) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			got.Hostname, err = h.Hostname()
			must("Hostname")
			got.Network, err = h.Network()
			must("Network")
			got.CPUs, err = h.CPUs()
			must("CPUs")
			got.Memory, err = h.Memory()
			must("Memory")
			got.Hugepages, err = h.Hugepages()
			must("Hugepages")
			got.PIDs, err = h.PIDs()
			must("PIDs")
			got.IDs, err = h.IDs()
			must("IDs")
			got.OS, err = h.OS()
			must("OS")
			if diff := cmp.Diff(tt.want, got, addrCmp, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMissingFilesNameTheFile checks that a reading that cannot be taken
// says which file it wanted.
func TestMissingFilesNameTheFile(t *testing.T) {
	root := t.TempDir()
	h := New(Config{Root: root, Interfaces: fixedInterfaces})
	tests := []struct {
		name string
		read func() error
		file string
	}{
		{"hostname", func() error { _, err := h.Hostname(); return err }, "/proc/sys/kernel/hostname"},
		{"cpus", func() error { _, err := h.CPUs(); return err }, "/sys/devices/system/cpu/online"},
		{"topology", func() error { _, err := h.Topology(); return err }, "/sys/devices/system/cpu/online"},
		{"memory", func() error { _, err := h.Memory(); return err }, "/proc/meminfo"},
		{"pids", func() error { _, err := h.PIDs(); return err }, "/proc/sys/kernel/pid_max"},
		{"ids", func() error { _, err := h.IDs(); return err }, "/proc/sys/kernel/random/boot_id"},
		{"os", func() error { _, err := h.OS(); return err }, "/proc/sys/kernel/osrelease"},
		{"filesystem", func() error { _, err := h.Filesystem(filepath.Join(root, "nope")); return err }, filepath.Join(root, "nope")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.read()
			if err == nil {
				t.Fatal("want an error for a missing file")
			}
			if !strings.Contains(err.Error(), tt.file) {
				t.Errorf("error %q does not name %s", err, tt.file)
			}
		})
	}
	// Optional facts are not errors when absent.
	if hp, err := h.Hugepages(); err != nil || hp != nil {
		t.Errorf("Hugepages() without hugetlb = %v, %v; want nil, nil", hp, err)
	}
	if n, err := h.Network(); err != nil || !n.NoRouteTable {
		t.Errorf("Network() without /proc/net/route = %+v, %v; want NoRouteTable", n, err)
	}
}

// TestBadContentNamesTheFile writes malformed files and checks the errors.
func TestBadContentNamesTheFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		content string
		read    func(h *Host) error
		want    string
	}{
		{"cpu list", "/sys/devices/system/cpu/online", "3-1\n", func(h *Host) error { _, err := h.CPUs(); return err }, `bad CPU list entry "3-1"`},
		{"meminfo without Inactive(file)", "/proc/meminfo", "MemTotal: 10 kB\nMemFree: 1 kB\n", func(h *Host) error { _, err := h.Memory(); return err }, "no Inactive(file) line"},
		{"loadavg", "/proc/loadavg", "0.1 0.2 0.3 12 5\n", func(h *Host) error {
			pidMax := filepath.Join(h.root, "proc/sys/kernel/pid_max")
			if err := os.MkdirAll(filepath.Dir(pidMax), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(pidMax, []byte("100\n"), 0o644); err != nil {
				return err
			}
			_, err := h.PIDs()
			return err
		}, `fourth field "12" is not running/total`},
		{"route", "/proc/net/route", "Iface\tDestination\tGateway\neth0\tZZ\t00000000\n", func(h *Host) error { _, err := h.Network(); return err }, "line 2: destination"},
		{"pid_max", "/proc/sys/kernel/pid_max", "lots\n", func(h *Host) error { _, err := h.PIDs(); return err }, "invalid syntax"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, tt.file)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			err := tt.read(New(Config{Root: root, Interfaces: fixedInterfaces}))
			if err == nil {
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), p) {
				t.Errorf("error %q: want it to contain %q and the path %s", err, tt.want, p)
			}
		})
	}
}

func TestCountCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{in: "0", want: 1},
		{in: "0-1", want: 2},
		{in: "0-3,8,10-11", want: 7},
		{in: "", wantErr: true},
		{in: "a", wantErr: true},
		{in: "2-1", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "0,", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := countCPUList(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("countCPUList(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("countCPUList(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	tests := map[string]string{
		`"Debian GNU/Linux 12 (bookworm)"`: "Debian GNU/Linux 12 (bookworm)",
		`'Fedora Linux 40'`:                "Fedora Linux 40",
		`Alpine`:                           "Alpine",
		`"say \"hi\""`:                     `say "hi"`,
		`""`:                               "",
		`"`:                                `"`,
	}
	for in, want := range tests {
		if got := unquote(in); got != want {
			t.Errorf("unquote(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestThisMachine checks the real implementation on the machine running the
// test for sanity, not exact values.
func TestThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	h := New(Config{})

	name, err := h.Hostname()
	if err != nil {
		t.Fatalf("Hostname: %v", err)
	}
	if osName, err := os.Hostname(); err == nil && osName != name {
		t.Errorf("Hostname() = %q, os.Hostname() = %q", name, osName)
	}

	cpus, err := h.CPUs()
	if err != nil || cpus <= 0 {
		t.Errorf("CPUs() = %d, %v; want > 0", cpus, err)
	}

	mem, err := h.Memory()
	if err != nil || mem.Capacity == 0 || mem.Available == 0 || mem.Available > mem.Capacity {
		t.Errorf("Memory() = %+v, %v; want 0 < available <= capacity", mem, err)
	}

	if _, err := h.Hugepages(); err != nil {
		t.Errorf("Hugepages: %v", err)
	}

	fs, err := h.Filesystem(t.TempDir())
	if err != nil || fs.Capacity == 0 || fs.Available > fs.Capacity || fs.InodesFree > fs.Inodes {
		t.Errorf("Filesystem(TempDir) = %+v, %v; want capacity > 0, available <= capacity", fs, err)
	}

	pids, err := h.PIDs()
	if err != nil || pids.Max == 0 || pids.Running == 0 {
		t.Errorf("PIDs() = %+v, %v; want max and running > 0", pids, err)
	}

	ids, err := h.IDs()
	if err != nil || ids.BootID == "" {
		t.Errorf("IDs() = %+v, %v; want a boot ID", ids, err)
	}

	osInfo, err := h.OS()
	if err != nil || osInfo.KernelVersion == "" || osInfo.OSImage == "" {
		t.Errorf("OS() = %+v, %v; want kernel and image", osInfo, err)
	}
	var uts syscall.Utsname
	if err := syscall.Uname(&uts); err == nil {
		var b strings.Builder
		for _, c := range uts.Release {
			if c == 0 {
				break
			}
			b.WriteByte(byte(c))
		}
		if b.String() != osInfo.KernelVersion {
			t.Errorf("KernelVersion = %q, uname release = %q", osInfo.KernelVersion, b.String())
		}
	}

	n, err := h.Network()
	if err != nil {
		t.Fatalf("Network: %v", err)
	}
	foundLoopback := false
	for _, i := range n.Interfaces {
		for _, a := range i.Addrs {
			if a.Addr().IsLoopback() {
				foundLoopback = true
			}
			if a.Addr().Is4In6() {
				t.Errorf("interface %s lists a mapped address %v", i.Name, a)
			}
		}
	}
	if !foundLoopback {
		t.Errorf("no loopback address among %+v", n.Interfaces)
	}
	for _, r := range n.DefaultRoutes {
		if _, ok := findInterface(n, r.Interface); !ok {
			t.Errorf("default route via %q, which is not an interface", r.Interface)
		}
	}
}

func findInterface(n host.Network, name string) (host.Interface, bool) {
	for _, i := range n.Interfaces {
		if i.Name == name {
			return i, true
		}
	}
	return host.Interface{}, false
}

// BenchmarkSnapshot measures one full reading of this machine, which the
// agent takes every nodeStatusUpdateFrequency (10 s).
func BenchmarkSnapshot(b *testing.B) {
	h := New(Config{})
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		if _, err := host.Snapshot(h, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTopologyFixtures reads the topology of every testdata machine.
func TestTopologyFixtures(t *testing.T) {
	tests := []struct {
		name string
		root string
		want host.Topology
	}{
		{
			// Copied from the 2-CPU VM these tests were written on: one
			// node, no SMT. Its node MemTotal is the node's meminfo, not
			// /proc/meminfo.
			name: "2-CPU VM with one node",
			root: "testdata/vm2cpu",
			want: host.Topology{
				CPUs: []host.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}},
				NUMANodes: []host.NUMANode{
					{ID: 0, MemoryBytes: 18835232 * 1024, Distances: map[int]int{0: 10}},
				},
			},
		},
		{
			name: "no node directory: one node with /proc/meminfo's MemTotal",
			root: "testdata/minimal",
			want: host.Topology{
				CPUs:      []host.CPU{{ID: 0, Core: 0}},
				NUMANodes: []host.NUMANode{{ID: 0, MemoryBytes: 1000 * 1024, Distances: map[int]int{0: 10}}},
			},
		},
		// The fake host's constructors are the same machines; fake's tests
		// pin their layout down.
		{name: "two sockets with SMT", root: "testdata/twosocket", want: fake.TopologyTwoSocketSMT()},
		{name: "four NUMA nodes", root: "testdata/fournuma", want: fake.TopologyFourNUMA()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New(Config{Root: tt.root}).Topology()
			if err != nil {
				t.Fatalf("Topology: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Topology (-want +got):\n%s", diff)
			}
		})
	}
}

// writeTree writes files (machine path to content) under a new root.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// oneNodeTree is a valid machine: CPUs 0 and 1 are SMT siblings on node 0.
func oneNodeTree() map[string]string {
	return map[string]string{
		"sys/devices/system/cpu/online":                             "0-1\n",
		"sys/devices/system/cpu/cpu0/topology/physical_package_id":  "0\n",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0-1\n",
		"sys/devices/system/cpu/cpu1/topology/physical_package_id":  "0\n",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "0-1\n",
		"sys/devices/system/node/online":                            "0\n",
		"sys/devices/system/node/node0/cpulist":                     "0-1\n",
		"sys/devices/system/node/node0/meminfo":                     "Node 0 MemTotal:  4 kB\nNode 0 MemFree:  1 kB\n",
		"sys/devices/system/node/node0/distance":                    "10\n",
	}
}

// TestTopologyEdges covers layouts the fixtures do not: offline CPUs and
// memory-only nodes.
func TestTopologyEdges(t *testing.T) {
	tests := []struct {
		name string
		edit func(files map[string]string)
		want host.Topology
	}{
		{
			name: "valid tree as written",
			edit: func(map[string]string) {},
			want: host.Topology{
				CPUs:      []host.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 0}},
				NUMANodes: []host.NUMANode{{ID: 0, MemoryBytes: 4096, Distances: map[int]int{0: 10}}},
			},
		},
		{
			// CPU 0 is offline: it is not listed, CPU 1 does not take it as
			// its core even though its sibling list names it, and the
			// node's cpulist may still name it.
			name: "offline CPU",
			edit: func(f map[string]string) {
				f["sys/devices/system/cpu/online"] = "1\n"
				delete(f, "sys/devices/system/cpu/cpu0/topology/physical_package_id")
				delete(f, "sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
			},
			want: host.Topology{
				CPUs:      []host.CPU{{ID: 1, Core: 1}},
				NUMANodes: []host.NUMANode{{ID: 0, MemoryBytes: 4096, Distances: map[int]int{0: 10}}},
			},
		},
		{
			name: "memory-only node with an empty cpulist",
			edit: func(f map[string]string) {
				f["sys/devices/system/node/online"] = "0-1\n"
				f["sys/devices/system/node/node0/distance"] = "10 20\n"
				f["sys/devices/system/node/node1/cpulist"] = "\n"
				f["sys/devices/system/node/node1/meminfo"] = "Node 1 MemTotal:  8 kB\n"
				f["sys/devices/system/node/node1/distance"] = "20 10\n"
			},
			want: host.Topology{
				CPUs: []host.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 0}},
				NUMANodes: []host.NUMANode{
					{ID: 0, MemoryBytes: 4096, Distances: map[int]int{0: 10, 1: 20}},
					{ID: 1, MemoryBytes: 8192, Distances: map[int]int{0: 20, 1: 10}},
				},
			},
		},
		{
			name: "sparse node IDs: distances follow the online order",
			edit: func(f map[string]string) {
				f["sys/devices/system/node/online"] = "0,2\n"
				f["sys/devices/system/node/node0/cpulist"] = "0\n"
				f["sys/devices/system/node/node0/distance"] = "10 31\n"
				f["sys/devices/system/node/node2/cpulist"] = "1\n"
				f["sys/devices/system/node/node2/meminfo"] = "Node 2 MemTotal:  8 kB\n"
				f["sys/devices/system/node/node2/distance"] = "32 10\n"
				f["sys/devices/system/cpu/cpu0/topology/thread_siblings_list"] = "0\n"
				f["sys/devices/system/cpu/cpu1/topology/thread_siblings_list"] = "1\n"
				f["sys/devices/system/cpu/cpu1/topology/physical_package_id"] = "1\n"
			},
			want: host.Topology{
				CPUs: []host.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1, Socket: 1, NUMANode: 2}},
				NUMANodes: []host.NUMANode{
					{ID: 0, MemoryBytes: 4096, Distances: map[int]int{0: 10, 2: 31}},
					{ID: 2, MemoryBytes: 8192, Distances: map[int]int{0: 32, 2: 10}},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := oneNodeTree()
			tt.edit(files)
			got, err := New(Config{Root: writeTree(t, files)}).Topology()
			if err != nil {
				t.Fatalf("Topology: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Topology (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTopologyErrorsNameTheFile breaks one file of a valid tree at a time.
func TestTopologyErrorsNameTheFile(t *testing.T) {
	tests := []struct {
		name string
		edit func(files map[string]string)
		file string // machine path the error must name
		want string
	}{
		{"no online list", func(f map[string]string) { delete(f, "sys/devices/system/cpu/online") },
			"sys/devices/system/cpu/online", "no such file"},
		{"bad online list", func(f map[string]string) { f["sys/devices/system/cpu/online"] = "0-\n" },
			"sys/devices/system/cpu/online", `bad CPU list entry "0-"`},
		{"no online CPUs", func(f map[string]string) { f["sys/devices/system/cpu/online"] = "\n" },
			"sys/devices/system/cpu/online", "no online CPUs"},
		{"no package ID", func(f map[string]string) { delete(f, "sys/devices/system/cpu/cpu1/topology/physical_package_id") },
			"sys/devices/system/cpu/cpu1/topology/physical_package_id", "no such file"},
		{"bad package ID", func(f map[string]string) { f["sys/devices/system/cpu/cpu1/topology/physical_package_id"] = "x\n" },
			"sys/devices/system/cpu/cpu1/topology/physical_package_id", "invalid syntax"},
		{"no siblings", func(f map[string]string) { delete(f, "sys/devices/system/cpu/cpu0/topology/thread_siblings_list") },
			"sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "no such file"},
		{"bad node list", func(f map[string]string) { f["sys/devices/system/node/online"] = "a\n" },
			"sys/devices/system/node/online", `bad CPU list entry "a"`},
		{"no node cpulist", func(f map[string]string) { delete(f, "sys/devices/system/node/node0/cpulist") },
			"sys/devices/system/node/node0/cpulist", "no such file"},
		{"CPU in no node", func(f map[string]string) { f["sys/devices/system/node/node0/cpulist"] = "0\n" },
			"sys/devices/system/node", "CPU 1 is online but in no online node's cpulist"},
		{"CPU in two nodes", func(f map[string]string) {
			f["sys/devices/system/node/online"] = "0-1\n"
			f["sys/devices/system/node/node0/distance"] = "10 20\n"
			f["sys/devices/system/node/node1/cpulist"] = "1\n"
		}, "sys/devices/system/node/node1/cpulist", "CPU 1 is also in node 0"},
		{"no node meminfo", func(f map[string]string) { delete(f, "sys/devices/system/node/node0/meminfo") },
			"sys/devices/system/node/node0/meminfo", "no such file"},
		{"meminfo of another node", func(f map[string]string) { f["sys/devices/system/node/node0/meminfo"] = "Node 1 MemTotal: 4 kB\n" },
			"sys/devices/system/node/node0/meminfo", "no Node 0 MemTotal line"},
		{"short distance row", func(f map[string]string) { f["sys/devices/system/node/node0/distance"] = "\n" },
			"sys/devices/system/node/node0/distance", "0 distances for 1 online nodes"},
		{"bad distance", func(f map[string]string) { f["sys/devices/system/node/node0/distance"] = "ten\n" },
			"sys/devices/system/node/node0/distance", `bad distance "ten"`},
		{"local distance is not 10", func(f map[string]string) { f["sys/devices/system/node/node0/distance"] = "20\n" },
			"sys/devices/system", "distance to itself is 20"},
		{"SMT siblings on two sockets", func(f map[string]string) { f["sys/devices/system/cpu/cpu1/topology/physical_package_id"] = "1\n" },
			"sys/devices/system", "CPU 1: shares core 0 with CPU 0"},
		{"no node directory and no /proc/meminfo", func(f map[string]string) {
			for p := range f {
				if strings.HasPrefix(p, "sys/devices/system/node/") {
					delete(f, p)
				}
			}
		}, "proc/meminfo", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := oneNodeTree()
			tt.edit(files)
			root := writeTree(t, files)
			_, err := New(Config{Root: root}).Topology()
			if err == nil {
				t.Fatal("want an error")
			}
			if p := filepath.Join(root, tt.file); !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want it to name %s and contain %q", err, p, tt.want)
			}
		})
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "0", want: []int{0}},
		{in: "0-3,8", want: []int{0, 1, 2, 3, 8}},
		{in: "0,4", want: []int{0, 4}},
		{in: "4,0-1,1", want: []int{0, 1, 4}},
		{in: "0-1048577", wantErr: true}, // beyond maxCPUID
		{in: "3-1", wantErr: true},
		{in: "0,", wantErr: true},
		{in: "x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCPUList(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseCPUList(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseCPUList(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
	if got, err := parseCPUList("0-1048576"); err != nil || len(got) != maxCPUID+1 {
		t.Errorf("parseCPUList up to maxCPUID = %d CPUs, %v; want %d", len(got), err, maxCPUID+1)
	}
}

// TestThisMachineTopology checks the real machine's topology for
// consistency, not exact values.
func TestThisMachineTopology(t *testing.T) {
	if _, err := os.Stat("/sys/devices/system/cpu"); err != nil {
		t.Skipf("no /sys/devices/system/cpu: %v", err)
	}
	h := New(Config{})
	topo, err := h.Topology()
	if err != nil {
		t.Fatalf("Topology: %v", err)
	}
	if err := topo.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	cpus, err := h.CPUs()
	if err != nil {
		t.Fatalf("CPUs: %v", err)
	}
	if len(topo.CPUs) != cpus {
		t.Errorf("Topology has %d CPUs, CPUs() = %d", len(topo.CPUs), cpus)
	}
	var mem uint64
	for _, n := range topo.NUMANodes {
		mem += n.MemoryBytes
	}
	if mem == 0 {
		t.Errorf("NUMA nodes %+v hold no memory", topo.NUMANodes)
	}
	if s, err := os.ReadFile("/sys/devices/system/node/online"); err == nil {
		n, err := countCPUList(strings.TrimSpace(string(s)))
		if err != nil || n != len(topo.NUMANodes) {
			t.Errorf("node/online %q lists %d nodes (%v), Topology has %d", s, n, err, len(topo.NUMANodes))
		}
	}
}
