package host_test

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"knode/internal/agent/host"
	"knode/internal/agent/host/fake"
)

var addrCmp = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })
var prefixCmp = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

func TestSnapshot(t *testing.T) {
	errMem := errors.New("open /proc/meminfo: permission denied")
	errFS := errors.New("statfs /var/lib/knode: no such file or directory")
	tests := []struct {
		name      string
		errs      map[host.Fact]error
		wantErrs  map[host.Fact]error
		wantError string
	}{
		{name: "every reading succeeds"},
		{
			name:      "failed readings are recorded and joined in a fixed order",
			errs:      map[host.Fact]error{host.FactRootFS: errFS, host.FactMemory: errMem},
			wantErrs:  map[host.Fact]error{host.FactRootFS: errFS, host.FactMemory: errMem},
			wantError: "memory: open /proc/meminfo: permission denied\nrootfs: statfs /var/lib/knode: no such file or directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := fake.Machine("node-1", netip.MustParseAddr("192.0.2.10"))
			state.Filesystems = map[string]host.Filesystem{"/var/lib/knode": {Capacity: 10, Available: 5, Inodes: 4, InodesFree: 2}}
			state.Errs = tt.errs
			got, err := host.Snapshot(fake.New(state), "/var/lib/knode")

			want := host.Facts{
				Network:   state.Network,
				CPUs:      state.CPUs,
				Memory:    state.Memory,
				Hugepages: state.Hugepages,
				RootFS:    state.Filesystems["/var/lib/knode"],
				PIDs:      state.PIDs,
				IDs:       state.IDs,
				OS:        state.OS,
				Errs:      tt.wantErrs,
			}
			if tt.errs[host.FactMemory] != nil {
				want.Memory = host.Memory{}
			}
			if tt.errs[host.FactRootFS] != nil {
				want.RootFS = host.Filesystem{}
			}
			if diff := cmp.Diff(want, got, addrCmp, prefixCmp, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("Snapshot facts (-want +got):\n%s", diff)
			}
			gotError := ""
			if err != nil {
				gotError = err.Error()
			}
			if gotError != tt.wantError {
				t.Errorf("Snapshot error = %q, want %q", gotError, tt.wantError)
			}
			for fact, e := range tt.wantErrs {
				if !errors.Is(err, e) || !errors.Is(got.Err(fact), e) {
					t.Errorf("error for %s does not wrap %v", fact, e)
				}
			}
		})
	}
}

func TestDefaultRouteInterfaces(t *testing.T) {
	n := host.Network{DefaultRoutes: []host.Route{
		{Interface: "eth1", Family: host.IPv4},
		{Interface: "eth0", Family: host.IPv4},
		{Interface: "eth1", Family: host.IPv4},
		{Interface: "eth0", Family: host.IPv6},
	}}
	tests := []struct {
		family host.Family
		want   []string
	}{
		{host.IPv4, []string{"eth1", "eth0"}},
		{host.IPv6, []string{"eth0"}},
	}
	for _, tt := range tests {
		t.Run(tt.family.String(), func(t *testing.T) {
			if diff := cmp.Diff(tt.want, n.DefaultRouteInterfaces(tt.family)); diff != "" {
				t.Errorf("DefaultRouteInterfaces (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPIDsAvailable(t *testing.T) {
	tests := []struct {
		name string
		pids host.PIDs
		want uint64
	}{
		{"some running", host.PIDs{Max: 100, Running: 30}, 70},
		{"exactly at the limit", host.PIDs{Max: 100, Running: 100}, 0},
		{"over the limit", host.PIDs{Max: 100, Running: 130}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.pids.Available(); got != tt.want {
				t.Errorf("Available() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFamilyOf(t *testing.T) {
	tests := map[string]host.Family{
		"10.0.0.1":        host.IPv4,
		"::ffff:10.0.0.1": host.IPv4,
		"fd00::1":         host.IPv6,
		"::":              host.IPv6,
	}
	for in, want := range tests {
		if got := host.FamilyOf(netip.MustParseAddr(in)); got != want {
			t.Errorf("FamilyOf(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestFactsEqual(t *testing.T) {
	base := func() host.Facts {
		return host.Facts{
			Network: host.Network{Interfaces: []host.Interface{{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}}},
			CPUs:    4,
			Memory:  host.Memory{Capacity: 8 << 30, Available: 6 << 30},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(*host.Facts)
		want bool
	}{
		{name: "same readings", edit: func(*host.Facts) {}, want: true},
		{name: "another address", edit: func(f *host.Facts) {
			f.Network.Interfaces[0].Addrs[0] = netip.MustParsePrefix("10.0.0.6/24")
		}, want: false},
		{name: "less memory available", edit: func(f *host.Facts) { f.Memory.Available-- }, want: false},
		{name: "a reading failed", edit: func(f *host.Facts) {
			f.Errs = map[host.Fact]error{host.FactPIDs: errors.New("no /proc")}
		}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base()
			tc.edit(&f)
			if got := base().Equal(f); got != tc.want {
				t.Errorf("Equal = %v, want %v", got, tc.want)
			}
		})
	}
	failed := func(msg string) host.Facts {
		f := base()
		f.Errs = map[host.Fact]error{host.FactPIDs: errors.New(msg)}
		return f
	}
	if !failed("no /proc").Equal(failed("no /proc")) {
		t.Error("the same failure read twice is not Equal")
	}
	if failed("no /proc").Equal(failed("permission denied")) {
		t.Error("different failures are Equal")
	}
}

// Equal compares field by field; a reading added to Facts must be compared
// too. Setting any leaf field of a snapshot to another value makes it
// unequal to the original.
func TestFactsEqualSeesEveryField(t *testing.T) {
	base := func() host.Facts {
		return host.Facts{
			Network: host.Network{
				Interfaces:    []host.Interface{{Name: "eth0", Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")}}},
				DefaultRoutes: []host.Route{{Interface: "eth0", Gateway: netip.MustParseAddr("10.0.0.1")}},
			},
			Hugepages: []host.Hugepages{{PageSize: 2 << 20}},
			Errs:      map[host.Fact]error{host.FactOS: errors.New("no os-release")},
		}
	}
	var paths []string
	var visit func(v reflect.Value, path string)
	visit = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Struct:
			if v.Type() == reflect.TypeOf(netip.Prefix{}) || v.Type() == reflect.TypeOf(netip.Addr{}) {
				paths = append(paths, path)
				return
			}
			for i := range v.NumField() {
				visit(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			for i := range v.Len() {
				visit(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		default:
			paths = append(paths, path)
		}
	}
	visit(reflect.ValueOf(base()), "Facts")
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			f := base()
			changeLeaf(t, reflect.ValueOf(&f).Elem(), strings.Split(path, ".")[1:])
			if base().Equal(f) {
				t.Errorf("changing %s leaves the facts Equal", path)
			}
		})
	}
	if len(paths) < 20 {
		t.Errorf("visited %d fields, want every leaf of Facts: %v", len(paths), paths)
	}
}

// changeLeaf sets the field at path (names, with [i] for slice elements)
// to a value other than its own.
func changeLeaf(t *testing.T, v reflect.Value, path []string) {
	t.Helper()
	for _, step := range path {
		name, index, hasIndex := strings.Cut(step, "[")
		v = v.FieldByName(name)
		if hasIndex {
			i, err := strconv.Atoi(strings.TrimSuffix(index, "]"))
			if err != nil {
				t.Fatal(err)
			}
			v = v.Index(i)
		}
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(v.Uint() + 1)
	case reflect.Map:
		v.Set(reflect.ValueOf(map[host.Fact]error{host.FactOS: errors.New("another failure")}))
	default:
		switch x := v.Interface().(type) {
		case netip.Prefix:
			v.Set(reflect.ValueOf(netip.PrefixFrom(x.Addr().Next(), x.Bits())))
		case netip.Addr:
			v.Set(reflect.ValueOf(x.Next()))
		default:
			t.Fatalf("no way to change a %s", v.Type())
		}
	}
}

func TestTopologyValidate(t *testing.T) {
	// valid is two nodes, CPUs 0 and 2 sharing core 0 on node 0, CPU 1 on node 1.
	valid := func() host.Topology {
		return host.Topology{
			CPUs: []host.CPU{{ID: 0, Core: 0}, {ID: 1, Core: 1, Socket: 1, NUMANode: 1}, {ID: 2, Core: 0}},
			NUMANodes: []host.NUMANode{
				{ID: 0, Distances: map[int]int{0: 10, 1: 11}},
				{ID: 1, Distances: map[int]int{0: 21, 1: 10}},
			},
		}
	}
	tests := []struct {
		name string
		edit func(*host.Topology)
		want string // "" for valid
	}{
		{name: "valid, distances need not be symmetric", edit: func(*host.Topology) {}},
		{name: "fake two-socket SMT machine", edit: func(t *host.Topology) { *t = fake.TopologyTwoSocketSMT() }},
		{name: "fake four-node machine", edit: func(t *host.Topology) { *t = fake.TopologyFourNUMA() }},
		{name: "fake uniform machine", edit: func(t *host.Topology) { *t = fake.UniformTopology(3, 1) }},
		{name: "no CPUs", edit: func(t *host.Topology) { t.CPUs = nil }, want: "topology has no CPUs"},
		{name: "no nodes", edit: func(t *host.Topology) { t.NUMANodes = nil }, want: "topology has no NUMA nodes"},
		{name: "CPUs out of order", edit: func(t *host.Topology) { t.CPUs[0], t.CPUs[1] = t.CPUs[1], t.CPUs[0] },
			want: "CPU 0: IDs must be non-negative, unique and ascending"},
		{name: "duplicate CPU", edit: func(t *host.Topology) { t.CPUs[2].ID = 1 },
			want: "CPU 1: IDs must be non-negative, unique and ascending"},
		{name: "negative CPU", edit: func(t *host.Topology) { t.CPUs[0].ID = -1 },
			want: "CPU -1: IDs must be non-negative, unique and ascending"},
		{name: "nodes out of order", edit: func(t *host.Topology) { t.NUMANodes[0], t.NUMANodes[1] = t.NUMANodes[1], t.NUMANodes[0] },
			want: "NUMA node 0: IDs must be non-negative, unique and ascending"},
		{name: "CPU on an unlisted node", edit: func(t *host.Topology) { t.CPUs[1].NUMANode = 2 },
			want: "CPU 1: on NUMA node 2, which is not listed"},
		{name: "siblings on two sockets", edit: func(t *host.Topology) { t.CPUs[2].Socket = 1 },
			want: "CPU 2: shares core 0 with CPU 0 but is on socket 1, node 0, not socket 0, node 0"},
		{name: "siblings on two nodes", edit: func(t *host.Topology) { t.CPUs[2].NUMANode = 1 },
			want: "CPU 2: shares core 0 with CPU 0 but is on socket 0, node 1, not socket 0, node 0"},
		{name: "missing distance", edit: func(t *host.Topology) { delete(t.NUMANodes[1].Distances, 0) },
			want: "NUMA node 1: has 1 distances, want one to each of 2 nodes"},
		{name: "distance to an unknown node", edit: func(t *host.Topology) {
			delete(t.NUMANodes[1].Distances, 0)
			t.NUMANodes[1].Distances[5] = 20
		}, want: "NUMA node 1: distance to unknown node 5"},
		{name: "local distance not 10", edit: func(t *host.Topology) { t.NUMANodes[0].Distances[0] = 11 },
			want: "NUMA node 0: distance to itself is 11, want 10"},
		{name: "remote distance exactly 10", edit: func(t *host.Topology) { t.NUMANodes[1].Distances[0] = 10 },
			want: "NUMA node 1: distance to node 0 is 10, want more than 10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := valid()
			tt.edit(&topo)
			err := topo.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() = %q, want %q", got, tt.want)
			}
		})
	}
}
