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

func TestTopology(t *testing.T) {
	h := New(Machine("node-1", netip.MustParseAddr("192.0.2.10")))
	got, err := h.Topology()
	if err != nil {
		t.Fatal(err)
	}
	want := host.Topology{
		CPUs:      []host.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1}, {ID: 2, Core: 2}, {ID: 3, Core: 3}},
		NUMANodes: []host.NUMANode{{ID: 0, MemoryBytes: 8 << 30, Distances: map[int]int{0: 10}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("default Topology (-want +got):\n%s", diff)
	}

	// The default follows CPUs and memory.
	h.Update(func(s *State) { s.CPUs, s.Memory.Capacity = 2, 1<<30 })
	got, _ = h.Topology()
	if diff := cmp.Diff(UniformTopology(2, 1<<30), got); diff != "" {
		t.Errorf("Topology after changing CPUs (-want +got):\n%s", diff)
	}

	// A set topology wins, and what is handed out is a copy.
	h.Update(func(s *State) { s.Topology = TopologyTwoSocketSMT() })
	got, _ = h.Topology()
	got.NUMANodes[0].Distances[1] = 99
	got.CPUs[0].Core = 99
	got, _ = h.Topology()
	if diff := cmp.Diff(TopologyTwoSocketSMT(), got); diff != "" {
		t.Errorf("set Topology after changing a copy (-want +got):\n%s", diff)
	}

	wantErr := errors.New("no sysfs")
	h.Update(func(s *State) { s.TopologyErr = wantErr })
	if _, err := h.Topology(); !errors.Is(err, wantErr) {
		t.Errorf("Topology() error = %v, want %v", err, wantErr)
	}
}

// TestTopologyNoAliasing checks that the topology handed in to New is copied.
func TestTopologyNoAliasing(t *testing.T) {
	s := Machine("node-1", netip.MustParseAddr("192.0.2.10"))
	s.Topology = TopologyFourNUMA()
	h := New(s)
	s.Topology.NUMANodes[3].Distances[0] = 99
	got, _ := h.Topology()
	if diff := cmp.Diff(TopologyFourNUMA(), got); diff != "" {
		t.Errorf("Topology changed through an alias (-want +got):\n%s", diff)
	}
}

// TestTopologyMachines checks the documented layout of the machine
// constructors: how many sockets, nodes, cores and threads, which CPUs are
// siblings, and the distance matrix.
func TestTopologyMachines(t *testing.T) {
	type layout struct {
		Sockets, Nodes, Cores int
		// Siblings lists the CPUs of every core, by core.
		Siblings map[int][]int
		// NodeCPUs lists the CPUs of every node, by node.
		NodeCPUs map[int][]int
		// Distances is the distance matrix, by node ID.
		Distances [][]int
	}
	summarize := func(topo host.Topology) layout {
		l := layout{Siblings: map[int][]int{}, NodeCPUs: map[int][]int{}}
		sockets := map[int]bool{}
		for _, c := range topo.CPUs {
			sockets[c.Socket] = true
			l.Siblings[c.Core] = append(l.Siblings[c.Core], c.ID)
			l.NodeCPUs[c.NUMANode] = append(l.NodeCPUs[c.NUMANode], c.ID)
		}
		l.Sockets, l.Nodes, l.Cores = len(sockets), len(topo.NUMANodes), len(l.Siblings)
		for _, n := range topo.NUMANodes {
			row := make([]int, len(topo.NUMANodes))
			for to, d := range n.Distances {
				row[to] = d
			}
			l.Distances = append(l.Distances, row)
		}
		return l
	}
	tests := []struct {
		name string
		topo host.Topology
		want layout
	}{
		{
			name: "two sockets with SMT",
			topo: TopologyTwoSocketSMT(),
			want: layout{
				Sockets: 2, Nodes: 2, Cores: 4,
				Siblings:  map[int][]int{0: {0, 4}, 1: {1, 5}, 2: {2, 6}, 3: {3, 7}},
				NodeCPUs:  map[int][]int{0: {0, 1, 4, 5}, 1: {2, 3, 6, 7}},
				Distances: [][]int{{10, 21}, {21, 10}},
			},
		},
		{
			name: "four NUMA nodes",
			topo: TopologyFourNUMA(),
			want: layout{
				Sockets: 2, Nodes: 4, Cores: 8,
				Siblings: map[int][]int{0: {0, 8}, 1: {1, 9}, 2: {2, 10}, 3: {3, 11}, 4: {4, 12}, 5: {5, 13}, 6: {6, 14}, 7: {7, 15}},
				NodeCPUs: map[int][]int{0: {0, 1, 8, 9}, 1: {2, 3, 10, 11}, 2: {4, 5, 12, 13}, 3: {6, 7, 14, 15}},
				Distances: [][]int{
					{10, 12, 20, 22},
					{12, 10, 22, 20},
					{20, 22, 10, 12},
					{22, 20, 12, 10},
				},
			},
		},
		{
			name: "split in two",
			topo: SplitTopology(8, 2, 8<<30),
			want: layout{
				Sockets: 2, Nodes: 2, Cores: 8,
				Siblings:  map[int][]int{0: {0}, 1: {1}, 2: {2}, 3: {3}, 4: {4}, 5: {5}, 6: {6}, 7: {7}},
				NodeCPUs:  map[int][]int{0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}},
				Distances: [][]int{{10, 20}, {20, 10}},
			},
		},
		{
			name: "split unevenly",
			topo: SplitTopology(5, 3, 1),
			want: layout{
				Sockets: 3, Nodes: 3, Cores: 5,
				Siblings:  map[int][]int{0: {0}, 1: {1}, 2: {2}, 3: {3}, 4: {4}},
				NodeCPUs:  map[int][]int{0: {0, 1}, 1: {2, 3}, 2: {4}},
				Distances: [][]int{{10, 20, 20}, {20, 10, 20}, {20, 20, 10}},
			},
		},
		{
			name: "more nodes than CPUs",
			topo: SplitTopology(2, 4, 1),
			want: layout{
				Sockets: 2, Nodes: 2, Cores: 2,
				Siblings:  map[int][]int{0: {0}, 1: {1}},
				NodeCPUs:  map[int][]int{0: {0}, 1: {1}},
				Distances: [][]int{{10, 20}, {20, 10}},
			},
		},
		{
			name: "uniform",
			topo: UniformTopology(0, 1),
			want: layout{
				Sockets: 1, Nodes: 1, Cores: 1,
				Siblings:  map[int][]int{0: {0}},
				NodeCPUs:  map[int][]int{0: {0}},
				Distances: [][]int{{10}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.topo.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(tt.topo)); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
		})
	}
	// Socket and node pairing: in the four-node machine nodes 0-1 are socket 0.
	for _, c := range TopologyFourNUMA().CPUs {
		if want := c.NUMANode / 2; c.Socket != want {
			t.Errorf("four-node CPU %d on node %d is on socket %d, want %d", c.ID, c.NUMANode, c.Socket, want)
		}
	}
}

// SplitTopology shares the memory out evenly, the remainder on the last
// node, and a host set to it reports it.
func TestSplitTopologyMemory(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nodes     int
		memory    uint64
		wantBytes []uint64
	}{
		{name: "even", nodes: 2, memory: 8 << 30, wantBytes: []uint64{4 << 30, 4 << 30}},
		{name: "remainder on the last node", nodes: 3, memory: 10, wantBytes: []uint64{3, 3, 4}},
		{name: "one node", nodes: 1, memory: 7, wantBytes: []uint64{7}},
		{name: "no node counts as one", nodes: 0, memory: 7, wantBytes: []uint64{7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Machine("node-1", netip.MustParseAddr("192.0.2.10"))
			s.Topology = SplitTopology(s.CPUs, tc.nodes, tc.memory)
			got, err := New(s).Topology()
			if err != nil {
				t.Fatal(err)
			}
			var bytes []uint64
			for _, n := range got.NUMANodes {
				bytes = append(bytes, n.MemoryBytes)
			}
			if diff := cmp.Diff(tc.wantBytes, bytes); diff != "" {
				t.Errorf("memory by node (-want +got):\n%s", diff)
			}
		})
	}
}
