package fake

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/host"
)

var cmpOpts = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

func TestReadsAndErrors(t *testing.T) {
	h := New(Machine("node-1", netip.MustParseAddr("192.0.2.10")))
	wantErr := errors.New("meminfo unreadable")
	h.Update(func(s *State) {
		s.Memory.Available = 1 << 20
		s.Errs = map[host.Fact]error{host.FactPIDs: wantErr}
		s.HostnameErr = errors.New("no hostname")
		s.Filesystems = map[string]host.Filesystem{"/data": {Capacity: 7}}
	})
	if m, err := h.Memory(); err != nil || m.Available != 1<<20 {
		t.Errorf("Memory() = %+v, %v; want the updated value", m, err)
	}
	if _, err := h.PIDs(); !errors.Is(err, wantErr) {
		t.Errorf("PIDs() error = %v, want %v", err, wantErr)
	}
	if _, err := h.Hostname(); err == nil {
		t.Error("Hostname() succeeded, want the set error")
	}
	if fs, _ := h.Filesystem("/data"); fs.Capacity != 7 {
		t.Errorf("Filesystem(/data) = %+v, want the per-path value", fs)
	}
	if fs, _ := h.Filesystem("/other"); fs.Capacity != 100<<30 {
		t.Errorf("Filesystem(/other) = %+v, want the default", fs)
	}
}

// TestNoAliasing checks that values handed out or handed in are copies.
func TestNoAliasing(t *testing.T) {
	s := Machine("node-1", netip.MustParseAddr("192.0.2.10"))
	h := New(s)
	s.Network.Interfaces[1].Addrs[0] = netip.MustParsePrefix("203.0.113.1/24")
	n, _ := h.Network()
	n.Interfaces[1].Addrs[0] = netip.MustParsePrefix("203.0.113.2/24")
	hp, _ := h.Hugepages()
	hp[0].Pages = 99

	want := Machine("node-1", netip.MustParseAddr("192.0.2.10"))
	if diff := cmp.Diff(want, h.State(), cmpOpts...); diff != "" {
		t.Errorf("state changed through an alias (-want +got):\n%s", diff)
	}
}

// TestConcurrentUse runs readers against a writer; run with -race.
func TestConcurrentUse(t *testing.T) {
	h := New(Machine("node-1", netip.MustParseAddr("192.0.2.10")))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				if _, err := host.Snapshot(h, "/"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for j := 0; j < 200; j++ {
		h.Update(func(s *State) {
			s.Memory.Available = uint64(j)
			s.Network.Interfaces[1].Addrs = append(s.Network.Interfaces[1].Addrs, netip.MustParsePrefix(fmt.Sprintf("10.0.%d.1/24", j%250)))
		})
	}
	wg.Wait()
	if m, _ := h.Memory(); m.Available != 199 {
		t.Errorf("Memory().Available = %d, want the last update 199", m.Available)
	}
}

func TestMachineIPv6(t *testing.T) {
	s := Machine("node-6", netip.MustParseAddr("fd00::6"))
	want := []host.Route{{Interface: "eth0", Family: host.IPv6}}
	if diff := cmp.Diff(want, s.Network.DefaultRoutes, cmpOpts...); diff != "" {
		t.Errorf("default routes (-want +got):\n%s", diff)
	}
	if got := s.Network.Interfaces[1].Addrs[0]; got != netip.MustParsePrefix("fd00::6/64") {
		t.Errorf("eth0 address = %v, want fd00::6/64", got)
	}
}
