package cpumanager

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/host"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/topology"
)

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	set, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// singleSocketHT is upstream's topoSingleSocketHT: 1 socket, 4 cores,
// CPU n and n+4 siblings.
func singleSocketHT() host.Topology {
	t := fake.UniformTopology(8, 1<<30)
	for i := range t.CPUs {
		t.CPUs[i].Core = i % 4
	}
	return t
}

func TestCPUSetFormat(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"0", "0"}, {"0-3,5", "0-3,5"}, {"5,0,1,2,3", "0-3,5"}, {"0,2,4-6", "0,2,4-6"},
	} {
		if got := mustParse(t, tc.in).String(); got != tc.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"a", "3-1", "1.3", "-1"} {
		if _, err := cpuset.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestTakeByTopology(t *testing.T) {
	for _, tc := range []struct {
		name      string
		topo      host.Topology
		available string
		n         int
		want      string
		wantErr   bool
	}{
		{"two-socket: 1 is the first thread of the first core", fake.TopologyTwoSocketSMT(), "0-7", 1, "0", false},
		{"two-socket: 2 is a whole core", fake.TopologyTwoSocketSMT(), "0-7", 2, "0,4", false},
		{"two-socket: 4 is a whole socket/NUMA node", fake.TopologyTwoSocketSMT(), "0-7", 4, "0-1,4-5", false},
		{"two-socket: 5 is a node plus one thread", fake.TopologyTwoSocketSMT(), "0-7", 5, "0-2,4-5", false},
		{"two-socket: 8 is everything", fake.TopologyTwoSocketSMT(), "0-7", 8, "0-7", false},
		{"two-socket: packs the fuller node (whole core)", fake.TopologyTwoSocketSMT(), "1-7", 2, "1,5", false},
		{"two-socket: packs the half-used core", fake.TopologyTwoSocketSMT(), "1-7", 1, "4", false},
		{"two-socket: 4 with node 0 broken is node 1", fake.TopologyTwoSocketSMT(), "1-7", 4, "2-3,6-7", false},
		{"two-socket: too many", fake.TopologyTwoSocketSMT(), "1-7", 8, "", true},
		{"two-socket: zero", fake.TopologyTwoSocketSMT(), "0-7", 0, "", false},
		{"four-numa: 4 is a NUMA node", fake.TopologyFourNUMA(), "0-15", 4, "0-1,8-9", false},
		{"four-numa: 8 is a socket", fake.TopologyFourNUMA(), "0-15", 8, "0-3,8-11", false},
		{"four-numa: 6 is a node plus a core of the same socket", fake.TopologyFourNUMA(), "0-15", 6, "0-2,8-10", false},
		{"four-numa: 12 is a socket plus a node", fake.TopologyFourNUMA(), "0-15", 12, "0-5,8-13", false},
		{"uniform: 2", fake.UniformTopology(4, 1<<30), "0-3", 2, "0-1", false},
		// Re-expressed from upstream cpu_assignment_test.go (topoSingleSocketHT).
		{"upstream: take one cpu from single socket with HT", singleSocketHT(), "0-7", 1, "0", false},
		{"upstream: take a core from single socket with HT", singleSocketHT(), "0-7", 2, "0,4", false},
		{"upstream: take one cpu, some cpus taken", singleSocketHT(), "1,3,5,6,7", 1, "6", false},
		{"upstream: take two cpus, some cpus taken", singleSocketHT(), "1,3,5,6,7", 2, "1,5", false},
		{"upstream: take all", singleSocketHT(), "0-7", 8, "0-7", false},
		{"upstream: take three cpus", singleSocketHT(), "0-7", 3, "0-1,4", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := TakeByTopology(tc.topo, mustParse(t, tc.available), tc.n)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !got.Equals(mustParse(t, tc.want)) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReservedCPUs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		topo    host.Topology
		cfg     Config
		want    string
		wantErr bool
	}{
		{"ceil of 100m is one thread", fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("100m")}, "0", false},
		{"1500m is a whole core", fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("1500m")}, "0,4", false},
		{"3 is a core plus a thread", fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("3")}, "0-1,4", false},
		{"4 on four-numa is a node", fake.TopologyFourNUMA(), Config{ReservedCPU: resource.MustParse("4")}, "0-1,8-9", false},
		{"reservedSystemCPUs as given", fake.TopologyTwoSocketSMT(), Config{ReservedSystemCPUs: "3,7", ReservedCPU: resource.MustParse("1")}, "3,7", false},
		{"reservedSystemCPUs off the machine", fake.TopologyTwoSocketSMT(), Config{ReservedSystemCPUs: "9"}, "", true},
		{"more than the machine", fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("9")}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReservedCPUs(tc.topo, tc.cfg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !got.Equals(mustParse(t, tc.want)) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"none by default", Config{}, ""},
		{"none", Config{Policy: "none"}, ""},
		{"static with quantity", Config{Policy: "static", ReservedCPU: resource.MustParse("1")}, ""},
		{"static with reservedSystemCPUs", Config{Policy: "static", ReservedSystemCPUs: "0-1"}, ""},
		{"static without reservation", Config{Policy: "static"}, "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"},
		{"unknown policy", Config{Policy: "dynamic"}, `unknown policy: "dynamic"`},
		{"bad reservedSystemCPUs", Config{Policy: "none", ReservedSystemCPUs: "x"}, `reservedSystemCPUs: unable to parse "x": strconv.Atoi: parsing "x": invalid syntax`},
		{"unknown option", Config{Policy: "static", ReservedCPU: resource.MustParse("1"), Options: map[string]string{"bogus": "true"}}, `unknown CPU Manager Policy option: "bogus"`},
		{"bad option value", Config{Policy: "static", ReservedCPU: resource.MustParse("1"), Options: map[string]string{OptionFullPCPUsOnly: "maybe"}}, `bad value for option "full-pcpus-only": strconv.ParseBool: parsing "maybe": invalid syntax`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func guPod(uid string, cpus ...string) *corev1.Pod {
	p := &corev1.Pod{}
	p.UID = types.UID(uid)
	for i, c := range cpus {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(c), corev1.ResourceMemory: resource.MustParse("1Gi")}
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name:      "c" + string(rune('0'+i)),
			Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()},
		})
	}
	return p
}

func newStatic(t *testing.T, topo host.Topology, cfg Config) (*Static, State) {
	t.Helper()
	cfg.Policy = PolicyStatic
	p, err := NewStatic(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Restore(State{})
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

func TestAllocateRemove(t *testing.T) {
	p, s := newStatic(t, fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("1")})
	steps := []struct {
		name        string
		do          func() (cpuset.CPUSet, error)
		wantSet     string
		wantDefault string
	}{
		{"2 cpus: the free core of the reserved CPU's node", func() (cpuset.CPUSet, error) {
			return p.Allocate(&s, guPod("a", "2"), &guPod("a", "2").Spec.Containers[0], topology.Hint{})
		}, "1,5", "0,2-4,6-7"},
		{"again: same set, no change", func() (cpuset.CPUSet, error) {
			return p.Allocate(&s, guPod("a", "2"), &guPod("a", "2").Spec.Containers[0], topology.Hint{})
		}, "1,5", "0,2-4,6-7"},
		{"4 cpus: node 1", func() (cpuset.CPUSet, error) {
			return p.Allocate(&s, guPod("b", "4"), &guPod("b", "4").Spec.Containers[0], topology.Hint{})
		}, "2-3,6-7", "0,4"},
		{"fractional request: shared pool", func() (cpuset.CPUSet, error) {
			return p.Allocate(&s, guPod("c", "1500m"), &guPod("c", "1500m").Spec.Containers[0], topology.Hint{})
		}, "", "0,4"},
		{"1 cpu: only the reserved CPU's sibling is left", func() (cpuset.CPUSet, error) {
			return p.Allocate(&s, guPod("d", "1"), &guPod("d", "1").Spec.Containers[0], topology.Hint{})
		}, "4", "0"},
		{"1 more: nothing left (reserved is never exclusive)", func() (cpuset.CPUSet, error) {
			set, err := p.Allocate(&s, guPod("e", "1"), &guPod("e", "1").Spec.Containers[0], topology.Hint{})
			if err == nil {
				t.Errorf("allocated %q from an empty pool", set)
			}
			return set, nil
		}, "", "0"},
		{"remove a: its CPUs return to the shared pool", func() (cpuset.CPUSet, error) {
			p.RemoveContainer(&s, "a", "c0")
			return cpuset.New(), nil
		}, "", "0-1,5"},
		{"remove unknown: no change", func() (cpuset.CPUSet, error) {
			p.RemoveContainer(&s, "zz", "c0")
			return cpuset.New(), nil
		}, "", "0-1,5"},
	}
	for _, st := range steps {
		set, err := st.do()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !set.Equals(mustParse(t, st.wantSet)) {
			t.Errorf("%s: set %q, want %q", st.name, set, st.wantSet)
		}
		if !s.DefaultCPUSet.Equals(mustParse(t, st.wantDefault)) {
			t.Errorf("%s: default %q, want %q", st.name, s.DefaultCPUSet, st.wantDefault)
		}
	}
	if _, ok := s.Assignment("a", "c0"); ok {
		t.Error("a/c0 still assigned after RemoveContainer")
	}
}

func TestAllocateWithAffinity(t *testing.T) {
	p, s := newStatic(t, fake.TopologyFourNUMA(), Config{ReservedCPU: resource.MustParse("1")})
	m, _ := topology.NewMask(3)
	pod := guPod("a", "2")
	set, err := p.Allocate(&s, pod, &pod.Spec.Containers[0], topology.NewHint(m, true))
	if err != nil {
		t.Fatal(err)
	}
	if want := mustParse(t, "6,14"); !set.Equals(want) {
		t.Errorf("got %q, want %q (a core of node 3)", set, want)
	}
}

func TestFullPCPUsOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reserved string
		cpu      string
		want     string
	}{
		{"odd request rejected", "1", "3", "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"},
		{"too few free cores", "1", "8", "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 6, requested CPUs = 8, CPUs per core = 2"},
		{"whole cores accepted", "1", "2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := newStatic(t, fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse(tc.reserved), Options: map[string]string{OptionFullPCPUsOnly: "true"}})
			before := s.Clone()
			pod := guPod("a", tc.cpu)
			_, err := p.Allocate(&s, pod, &pod.Spec.Containers[0], topology.Hint{})
			got := ""
			if err != nil {
				got = err.Error()
				var smt SMTAlignmentError
				if !errors.As(err, &smt) || smt.Type() != ErrorSMTAlignment {
					t.Errorf("error %v is not an SMTAlignmentError", err)
				}
				if !s.DefaultCPUSet.Equals(before.DefaultCPUSet) {
					t.Errorf("state changed on error")
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func masks(t *testing.T, hints []topology.Hint) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, h := range hints {
		out[h.Affinity.String()] = h.Preferred
	}
	return out
}

func TestTopologyHints(t *testing.T) {
	mk := func(ids ...int) string { m, _ := topology.NewMask(ids...); return m.String() }
	all := func(pref func(n int) bool, fits func(ids []int) bool) map[string]bool {
		out := map[string]bool{}
		nodes := []int{0, 1, 2, 3}
		for k := 1; k <= 4; k++ {
			combinations(nodes, k, func(c []int) {
				if fits(c) {
					out[mk(c...)] = pref(len(c))
				}
			})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		cpu  string
		want map[string]bool
		nil_ bool
	}{
		{"2 cpus: every mask, single nodes preferred", "2", all(func(n int) bool { return n == 1 }, func([]int) bool { return true }), false},
		{"4 cpus: node 0 (reserved CPU) cannot hold it", "4", all(func(n int) bool { return n == 1 }, func(c []int) bool { return !(len(c) == 1 && c[0] == 0) }), false},
		{"5 cpus: pairs preferred", "5", all(func(n int) bool { return n == 2 }, func(c []int) bool { return len(c) >= 2 }), false},
		{"fractional: no preference", "500m", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := newStatic(t, fake.TopologyFourNUMA(), Config{ReservedCPU: resource.MustParse("1")})
			pod := guPod("a", tc.cpu)
			got := p.TopologyHints(s, pod, &pod.Spec.Containers[0])
			if tc.nil_ {
				if got != nil {
					t.Fatalf("got %v, want nil", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, masks(t, got[ResourceCPU])); diff != "" {
				t.Errorf("hints (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("allocated container with a changed request", func(t *testing.T) {
		p, s := newStatic(t, fake.TopologyFourNUMA(), Config{ReservedCPU: resource.MustParse("1")})
		pod := guPod("a", "2")
		if _, err := p.Allocate(&s, pod, &pod.Spec.Containers[0], topology.Hint{}); err != nil {
			t.Fatal(err)
		}
		got := p.TopologyHints(s, pod, &pod.Spec.Containers[0])
		if diff := cmp.Diff(map[string]bool{mk(0): true, mk(0, 1): false, mk(0, 2): false, mk(0, 3): false, mk(0, 1, 2): false, mk(0, 1, 3): false, mk(0, 2, 3): false, mk(0, 1, 2, 3): false}, masks(t, got[ResourceCPU])); diff != "" {
			t.Errorf("hints for allocated set (-want +got):\n%s", diff)
		}
		bigger := guPod("a", "4")
		if got := p.TopologyHints(s, bigger, &bigger.Spec.Containers[0]); got == nil || got[ResourceCPU] == nil || len(got[ResourceCPU]) != 0 {
			t.Errorf("got %v, want an empty cpu hint list", got)
		}
	})
}

func TestChecksumUpstreamVectors(t *testing.T) {
	// From upstream pkg/kubelet/cm/cpumanager/state/state_checkpoint_test.go.
	for _, tc := range []struct {
		name string
		json string
		want State
	}{
		{"Restore default cpu set", `{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 354655845}`,
			State{PolicyName: "none", DefaultCPUSet: cpuset.New(4, 5, 6)}},
		{"Restore valid checkpoint", `{"policyName": "none", "defaultCPUSet": "1-3", "entries": {"pod": {"container1": "4-6", "container2": "1-3"}}, "checksum": 3610638499}`,
			State{PolicyName: "none", DefaultCPUSet: cpuset.New(1, 2, 3), Assignments: map[string]map[string]cpuset.CPUSet{"pod": {"container1": cpuset.New(4, 5, 6), "container2": cpuset.New(1, 2, 3)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Our encoder produces the same checksum.
			data, err := Encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(data); err != nil {
				t.Errorf("re-encoded checkpoint does not verify: %v\n%s", err, data)
			}
		})
	}
	if _, err := Decode([]byte(`{"policyName": "none", "defaultCPUSet": "4-7", "entries": {}, "checksum": 354655845}`)); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("tampered checkpoint: err = %v, want ErrCorruptCheckpoint", err)
	}
	if _, err := Decode([]byte(`{"policyName": "none", "defaultCPUSet": "4-7"}`)); err != nil {
		t.Errorf("zero checksum must be accepted: %v", err)
	}
}

func TestEncodeFormat(t *testing.T) {
	s := State{PolicyName: "static", DefaultCPUSet: mustParse(t, "0,3-5"), Assignments: map[string]map[string]cpuset.CPUSet{"uid": {"c": mustParse(t, "1-2")}}}
	data, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpoint{PolicyName: "static", DefaultCPUSet: "0,3-5", Entries: map[string]map[string]string{"uid": {"c": "1-2"}}}
	want := `{"policyName":"static","defaultCpuSet":"0,3-5","entries":{"uid":{"c":"1-2"}},"checksum":` + uitoa(cp.checksum()) + `}`
	if string(data) != want {
		t.Errorf("Encode = %s, want %s", data, want)
	}
	empty, _ := Encode(State{PolicyName: "none", DefaultCPUSet: cpuset.New(4, 5, 6)})
	if want := `{"policyName":"none","defaultCpuSet":"4-6","checksum":354655845}`; string(empty) != want {
		t.Errorf("Encode = %s, want %s (upstream's checksum for 4-6)", empty, want)
	}
}

func uitoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}

func TestReadWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), StateFile)
	p, s := newStatic(t, fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("1")})
	pod := guPod("a", "2")
	if _, err := p.Allocate(&s, pod, &pod.Spec.Containers[0], topology.Hint{}); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err = p.Restore(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got, cmp.Comparer(func(a, b cpuset.CPUSet) bool { return a.Equals(b) })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestRestore(t *testing.T) {
	p, _ := newStatic(t, fake.TopologyTwoSocketSMT(), Config{ReservedCPU: resource.MustParse("1")})
	for _, tc := range []struct {
		name    string
		s       State
		wantErr bool
	}{
		{"empty becomes all shared", State{}, false},
		{"consistent", State{PolicyName: "static", DefaultCPUSet: mustParse(t, "0,2-4,6-7"), Assignments: map[string]map[string]cpuset.CPUSet{"a": {"c": mustParse(t, "1,5")}}}, false},
		{"reserved missing from default", State{DefaultCPUSet: mustParse(t, "1-7"), Assignments: map[string]map[string]cpuset.CPUSet{"a": {"c": mustParse(t, "0")}}}, true},
		{"overlap", State{DefaultCPUSet: mustParse(t, "0-7"), Assignments: map[string]map[string]cpuset.CPUSet{"a": {"c": mustParse(t, "1")}}}, true},
		{"CPUs missing", State{DefaultCPUSet: mustParse(t, "0-6")}, true},
		{"other policy", State{PolicyName: "none", DefaultCPUSet: mustParse(t, "0-7")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Restore(tc.s)
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"policyName": "none", "defaultCPUSet": "4-6", "entries": {}, "checksum": 354655845}`))
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0,3-5","entries":{"u":{"c":"1-2"}}}`))
	f.Add([]byte(`{"entries":null,"checksum":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		enc2, _ := Encode(again)
		if string(enc) != string(enc2) {
			t.Fatalf("not stable: %s vs %s", enc, enc2)
		}
	})
}

func TestPodGuaranteedCPUs(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	withInit := func(p *corev1.Pod, sidecar bool, cpu string) *corev1.Pod {
		rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
		c := corev1.Container{Name: "i" + string(rune('0'+len(p.Spec.InitContainers))), Resources: corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}}
		if sidecar {
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		return p
	}
	burstable := guPod("b", "2")
	delete(burstable.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want int
	}{
		{"app containers summed", guPod("a", "2", "3"), 5},
		{"fractional container counts 0", guPod("a", "2", "500m"), 2},
		{"init larger than the apps", withInit(guPod("a", "2"), false, "6"), 6},
		{"init smaller than the apps", withInit(guPod("a", "4"), false, "3"), 4},
		{"sidecar adds to the apps and to a later init", withInit(withInit(guPod("a", "2"), true, "1"), false, "4"), 5},
		{"not guaranteed", burstable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodGuaranteedCPUs(tc.pod); got != tc.want {
				t.Errorf("PodGuaranteedCPUs = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPodTopologyHints(t *testing.T) {
	mk := func(ids ...int) string { m, _ := topology.NewMask(ids...); return m.String() }
	p, s := newStatic(t, fake.TopologyFourNUMA(), Config{ReservedCPU: resource.MustParse("1")})
	// 2+2 CPUs: node 0 (3 free: CPU 0 is reserved) cannot hold 4.
	pod := guPod("a", "2", "2")
	got := masks(t, p.PodTopologyHints(s, pod)[ResourceCPU])
	if _, ok := got[mk(0)]; ok || !got[mk(1)] || !got[mk(3)] || got[mk(1, 2)] {
		t.Errorf("hints for 4 CPUs: %v", got)
	}
	if h := p.PodTopologyHints(s, guPod("b", "500m")); h != nil {
		t.Errorf("fractional pod: %v, want nil", h)
	}
	// Once both containers hold CPUs on node 1, the hints are for those.
	one, _ := topology.NewMask(1)
	for i := range pod.Spec.Containers {
		if _, err := p.Allocate(&s, pod, &pod.Spec.Containers[i], topology.NewHint(one, true)); err != nil {
			t.Fatal(err)
		}
	}
	got = masks(t, p.PodTopologyHints(s, pod)[ResourceCPU])
	if !got[mk(1)] || len(got) != 8 {
		t.Errorf("hints for the allocated CPUs: %v, want node 1 preferred and the 7 wider masks holding it", got)
	}
	bigger := guPod("a", "4", "2")
	if h := p.PodTopologyHints(s, bigger); h == nil || h[ResourceCPU] == nil || len(h[ResourceCPU]) != 0 {
		t.Errorf("changed request: %v, want an empty list", h)
	}
}
