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
				Memory:    host.Memory{Capacity: 16384000 * 1024, Available: (2048000 + 4900000) * 1024},
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
