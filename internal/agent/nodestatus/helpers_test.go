package nodestatus

import (
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/agent/host"
)

// cmpOpts compares quantities by their serialized form (value and format),
// times by instant, and netip values by value.
var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.String() == b.String() }),
	cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmpopts.EquateEmpty(),
}

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(10 * time.Second)
)

// timeT shortens test tables.
type timeT = time.Time

func goos() string   { return runtime.GOOS }
func goarch() string { return runtime.GOARCH }

func mt(t time.Time) metav1.Time { return metav1.NewTime(t) }

func q(s string) resource.Quantity { return resource.MustParse(s) }

// qb is a byte count in BinarySI, as capacity and allocatable carry bytes.
func qb(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.BinarySI) }

func ip(s string) net.IP { return net.ParseIP(s) }

// machine is the host used by most tests: 4 CPUs, 8Gi memory (6Gi
// available), a 100Gi root filesystem (60Gi available), two hugepage sizes
// with nothing reserved, and eth0 with 192.0.2.10 and 2001:db8::10 holding
// both default routes.
func machine() host.Facts {
	return host.Facts{
		Network: host.Network{
			Interfaces: []host.Interface{
				{Name: "lo", Flags: net.FlagUp | net.FlagLoopback, Addrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8"), netip.MustParsePrefix("::1/128")}},
				{Name: "eth0", Flags: net.FlagUp | net.FlagBroadcast, Addrs: []netip.Prefix{
					netip.MustParsePrefix("fe80::1/64"),
					netip.MustParsePrefix("192.0.2.10/24"),
					netip.MustParsePrefix("2001:db8::10/64"),
				}},
				{Name: "eth1", Flags: 0, Addrs: []netip.Prefix{netip.MustParsePrefix("198.51.100.20/24")}},
			},
			DefaultRoutes: []host.Route{
				{Interface: "eth0", Family: host.IPv4},
				{Interface: "eth0", Family: host.IPv6},
			},
		},
		CPUs:      4,
		Memory:    host.Memory{Capacity: 8 << 30, Available: 6 << 30},
		Hugepages: []host.Hugepages{{PageSize: 2 << 20}, {PageSize: 1 << 30}},
		RootFS:    host.Filesystem{Capacity: 100 << 30, Available: 60 << 30, Inodes: 1000000, InodesFree: 900000},
		PIDs:      host.PIDs{Max: 4194304, Running: 300},
		IDs:       host.IDs{MachineID: "m-1", SystemUUID: "u-1", BootID: "b-1"},
		OS:        host.OS{KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12 (bookworm)", OperatingSystem: "linux", Architecture: "arm64"},
	}
}

// withErr returns f with the reading of fact failed.
func withErr(f host.Facts, fact host.Fact, err error) host.Facts {
	errs := map[host.Fact]error{}
	for k, v := range f.Errs {
		errs[k] = v
	}
	errs[fact] = err
	f.Errs = errs
	return f
}

func baseConfig() Config {
	return Config{NodeName: "node-1", Hostname: "node-1", KubeletVersion: "v1.34.1", RuntimeName: "knode", RuntimeVersion: "0.1.0"}
}

func newNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
}
