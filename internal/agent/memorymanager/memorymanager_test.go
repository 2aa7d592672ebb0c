package memorymanager

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/host"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/topology"
)

const gi = 1 << 30

func q(s string) resource.Quantity { return resource.MustParse(s) }

func res(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = q(pairs[i+1])
	}
	return l
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "none default", cfg: Config{}},
		{name: "static", cfg: Config{Policy: PolicyStatic, ReservedMemory: []Reservation{{NUMANode: 0, Limits: res("memory", "1Gi")}}}},
		{name: "lowercase static is unknown", cfg: Config{Policy: "static"}, want: `unknown policy: "static"`},
		{name: "cpu limit", cfg: Config{Policy: PolicyStatic, ReservedMemory: []Reservation{{NUMANode: 1, Limits: res("cpu", "1")}}},
			want: `invalid configuration: the limit type "cpu" for NUMA node 1 is not supported, only [memory hugepages-<HugePageSize>] is accepted`},
		{name: "zero", cfg: Config{Policy: PolicyStatic, ReservedMemory: []Reservation{{NUMANode: 0, Limits: res("memory", "0")}}},
			want: `invalid configuration: reserved memory may not be zero for NUMA node 0 and resource "memory"`},
		{name: "duplicate", cfg: Config{Policy: PolicyStatic, ReservedMemory: []Reservation{{NUMANode: 0, Limits: res("memory", "1Gi")}, {NUMANode: 0, Limits: res("memory", "1Gi")}}},
			want: `invalid configuration: the reserved memory has a duplicate value for NUMA node 0 and resource "memory"`},
	}
	for _, tc := range cases {
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

func TestReservedByNode(t *testing.T) {
	cases := []struct {
		name    string
		cfg     Config
		want    map[int]map[corev1.ResourceName]uint64
		wantErr string
	}{
		{
			name: "sum equals node allocatable",
			cfg: Config{Policy: PolicyStatic,
				ReservedMemory:             []Reservation{{NUMANode: 0, Limits: res("memory", "1Gi")}, {NUMANode: 1, Limits: res("memory", "512Mi", "hugepages-2Mi", "4Mi")}},
				NodeAllocatableReservation: res("memory", "1536Mi", "hugepages-2Mi", "4Mi", "cpu", "1")},
			want: map[int]map[corev1.ResourceName]uint64{0: {"memory": gi}, 1: {"memory": 512 << 20, "hugepages-2Mi": 4 << 20}},
		},
		{
			name:    "sum differs",
			cfg:     Config{Policy: PolicyStatic, ReservedMemory: []Reservation{{NUMANode: 0, Limits: res("memory", "1Gi")}}, NodeAllocatableReservation: res("memory", "1100Mi")},
			wantErr: `the total amount "1Gi" of type "memory" is not equal to the value "1100Mi" determined by Node Allocatable feature`,
		},
		{
			name:    "reservation missing",
			cfg:     Config{Policy: PolicyStatic, NodeAllocatableReservation: res("memory", "100Mi")},
			wantErr: `the total amount "0" of type "memory" is not equal to the value "100Mi" determined by Node Allocatable feature`,
		},
		{
			name:    "unknown node",
			cfg:     Config{Policy: PolicyStatic, ReservedMemory: []Reservation{{NUMANode: 2, Limits: res("memory", "1Gi")}}, NodeAllocatableReservation: res("memory", "1Gi")},
			wantErr: "the reserved memory configuration references a NUMA node 2 that does not exist on this machine",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReservedByNode(fake.TopologyTwoSocketSMT(), tc.cfg)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestNewStaticNeedsReservation(t *testing.T) {
	_, err := NewStatic(StaticConfig{Config: Config{Policy: PolicyStatic}, Topology: fake.TopologyTwoSocketSMT()})
	if err == nil || err.Error() != "[memorymanager] you should specify the system reserved memory" {
		t.Fatalf("error = %v", err)
	}
}

// fourNUMA is the static policy on the 4-node fixture, 1Gi memory reserved
// on node 0, and 4 × 1Gi hugepages on node 1.
func fourNUMA(t *testing.T) (*Static, State) {
	t.Helper()
	p, err := NewStatic(StaticConfig{
		Config: Config{Policy: PolicyStatic,
			ReservedMemory:             []Reservation{{NUMANode: 0, Limits: res("memory", "1Gi")}},
			NodeAllocatableReservation: res("memory", "1Gi")},
		Topology:      fake.TopologyFourNUMA(),
		NodeHugepages: map[int][]host.Hugepages{1: {{PageSize: gi, Pages: 4}, {PageSize: 2 << 20, Pages: 0}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Restore(State{})
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

func TestDefaultMachineState(t *testing.T) {
	_, s := fourNUMA(t)
	n0, n1 := uint64(32617420<<10), uint64(33025132<<10)
	want := map[int]map[corev1.ResourceName]MemoryTable{
		0: {"memory": {Total: n0, SystemReserved: gi, Allocatable: n0 - gi, Free: n0 - gi}, "hugepages-1Gi": {}, "hugepages-2Mi": {}},
		1: {
			"memory":        {Total: n1, Allocatable: n1 - 4*gi, Free: n1 - 4*gi},
			"hugepages-1Gi": {Total: 4 * gi, Allocatable: 4 * gi, Free: 4 * gi},
			"hugepages-2Mi": {},
		},
	}
	for id, tables := range want {
		got := map[corev1.ResourceName]MemoryTable{}
		for name, tb := range s.Machine[id].Memory {
			got[name] = *tb
		}
		if d := cmp.Diff(tables, got); d != "" {
			t.Errorf("node %d (-want +got):\n%s", id, d)
		}
		if d := cmp.Diff([]int{id}, s.Machine[id].Cells); d != "" {
			t.Errorf("node %d cells (-want +got):\n%s", id, d)
		}
	}
	if len(s.Machine) != 4 || s.PolicyName != PolicyStatic {
		t.Errorf("machine has %d nodes, policy %q", len(s.Machine), s.PolicyName)
	}
}

func guaranteed(uid string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metaUID(uid), Spec: corev1.PodSpec{Containers: containers}}
}

func ctr(name, mem string, extra ...string) corev1.Container {
	l := res(append([]string{"cpu", "1", "memory", mem}, extra...)...)
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: l, Limits: l}}
}

func hint(preferred bool, ids ...int) topology.Hint {
	m, _ := topology.NewMask(ids...)
	return topology.NewHint(m, preferred)
}

func TestTopologyHints(t *testing.T) {
	p, s := fourNUMA(t)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want map[string][]topology.Hint
	}{
		{name: "burstable gets none", pod: &corev1.Pod{ObjectMeta: metaUID("b"), Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: res("memory", "1Gi")}}}}}},
		{name: "fits on one node", pod: guaranteed("a", ctr("c", "10Gi")), want: map[string][]topology.Hint{"memory": {
			hint(true, 0), hint(true, 1), hint(true, 2), hint(true, 3),
			hint(false, 0, 1), hint(false, 0, 2), hint(false, 0, 3), hint(false, 1, 2), hint(false, 1, 3), hint(false, 2, 3),
			hint(false, 0, 1, 2), hint(false, 0, 1, 3), hint(false, 0, 2, 3), hint(false, 1, 2, 3), hint(false, 0, 1, 2, 3)}}},
		{name: "needs two nodes", pod: guaranteed("a", ctr("c", "40Gi")), want: map[string][]topology.Hint{"memory": {
			hint(true, 0, 1), hint(true, 0, 2), hint(true, 0, 3), hint(true, 1, 2), hint(true, 1, 3), hint(true, 2, 3),
			hint(false, 0, 1, 2), hint(false, 0, 1, 3), hint(false, 0, 2, 3), hint(false, 1, 2, 3), hint(false, 0, 1, 2, 3)}}},
		{name: "hugepages only on node 1", pod: guaranteed("a", ctr("c", "1Gi", "hugepages-1Gi", "2Gi")), want: map[string][]topology.Hint{
			"memory":        {hint(true, 1), hint(false, 0, 1), hint(false, 1, 2), hint(false, 1, 3), hint(false, 0, 1, 2), hint(false, 0, 1, 3), hint(false, 1, 2, 3), hint(false, 0, 1, 2, 3)},
			"hugepages-1Gi": {hint(true, 1), hint(false, 0, 1), hint(false, 1, 2), hint(false, 1, 3), hint(false, 0, 1, 2), hint(false, 0, 1, 3), hint(false, 1, 2, 3), hint(false, 0, 1, 2, 3)}}},
		{name: "too big", pod: guaranteed("a", ctr("c", "200Gi")), want: map[string][]topology.Hint{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := p.TopologyHints(s, tc.pod, &tc.pod.Spec.Containers[0])
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestAllocateRemove(t *testing.T) {
	p, s0 := fourNUMA(t)
	big := guaranteed("big", ctr("c", "40Gi"))
	small := guaranteed("small", ctr("c", "10Gi"))

	// Cross-NUMA: nil affinity picks the best default hint, nodes 0 and 1.
	s1, err := p.Allocate(s0, big, &big.Spec.Containers[0], topology.Hint{})
	if err != nil {
		t.Fatal(err)
	}
	if got := Mems(s1, "big", "c"); got != "0-1" {
		t.Errorf("Mems = %q, want 0-1", got)
	}
	free0 := s0.Machine[0].Memory["memory"].Free
	if got := s1.Machine[0].Memory["memory"]; got.Free != 0 || got.Reserved != free0 {
		t.Errorf("node 0 = %+v, want all of it reserved", *got)
	}
	if got, want := s1.Machine[1].Memory["memory"].Reserved, uint64(40*gi)-free0; got != want {
		t.Errorf("node 1 reserved = %d, want %d", got, want)
	}
	if d := cmp.Diff([]int{0, 1}, s1.Machine[1].Cells); d != "" {
		t.Errorf("cells (-want +got):\n%s", d)
	}
	if s0.Machine[0].Memory["memory"].Reserved != 0 {
		t.Error("Allocate modified its input state")
	}
	// Existing assignment: its hints come back preferred.
	if d := cmp.Diff(map[string][]topology.Hint{"memory": {hint(true, 0, 1)}}, p.TopologyHints(s1, big, &big.Spec.Containers[0])); d != "" {
		t.Errorf("regenerated hints (-want +got):\n%s", d)
	}
	// Grouped nodes 0,1 are not offered alone or in other groups.
	// The group itself is still offered (node 1 has room left).
	wantSmall := map[string][]topology.Hint{"memory": {hint(true, 2), hint(true, 3), hint(false, 0, 1), hint(false, 2, 3)}}
	if d := cmp.Diff(wantSmall, p.TopologyHints(s1, small, &small.Spec.Containers[0])); d != "" {
		t.Errorf("hints after cross-NUMA allocation (-want +got):\n%s", d)
	}
	// A preferred hint on grouped node 0 alone can only be extended to the
	// non-preferred group, which upstream refuses.
	if _, err := p.Allocate(s1, small, &small.Spec.Containers[0], hint(true, 0)); err == nil {
		t.Error("allocating on grouped node 0 succeeded")
	}
	s2, err := p.Allocate(s1, small, &small.Spec.Containers[0], hint(true, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got := Mems(s2, "small", "c"); got != "3" {
		t.Errorf("Mems = %q, want 3", got)
	}
	// Idempotent.
	if again, err := p.Allocate(s2, small, &small.Spec.Containers[0], hint(true, 2)); err != nil || Mems(again, "small", "c") != "3" {
		t.Errorf("second Allocate = %q, %v", Mems(again, "small", "c"), err)
	}
	if _, err := p.Restore(s2); err != nil {
		t.Errorf("Restore of a consistent state: %v", err)
	}
	// Remove both: back to the initial machine.
	s3 := p.RemoveContainer(p.RemoveContainer(s2, "big", "c"), "small", "c")
	if d := cmp.Diff(s0, s3); d != "" {
		t.Errorf("after removal (-want +got):\n%s", d)
	}
}

func TestRestoreRejectsDrift(t *testing.T) {
	p, s := fourNUMA(t)
	s = s.Clone()
	s.Machine[2].Memory["memory"].Free -= 1
	s.Machine[2].Memory["memory"].Reserved += 1
	if _, err := p.Restore(s); err == nil || err.Error() != "[memorymanager] the expected machine state is different from the real one" {
		t.Errorf("Restore = %v", err)
	}
}

func TestChecksumVectors(t *testing.T) {
	cases := []struct {
		name string
		json string
		want uint64
	}{
		// From upstream state_checkpoint_test.go "Restore valid checkpoint".
		{name: "upstream", want: 4215593881, json: `{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}}}`},
		// Computed with go-spew and mirror types named as upstream.
		{name: "nil maps and slices", want: 3617791444, json: `{"policyName":"Static","machineState":{"1":{"numberOfAssignments":2,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024},"hugepages-1Gi":{"total":1,"systemReserved":0,"allocatable":1,"reserved":0,"free":1}},"cells":[1,0]},"0":{"numberOfAssignments":0,"memoryMap":null,"cells":null}},"entries":{"p":{"b":[],"a":null}}}`},
		{name: "nil pointers suppress the next type", want: 2943927110, json: `{"policyName":"Static","machineState":{"10":null,"2":{"numberOfAssignments":1,"memoryMap":{"memory":null},"cells":[2]}},"entries":{"p":null}}`},
		{name: "empty", want: 4236770233, json: `{"policyName":"None","machineState":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := checkpoint{MachineState: MachineState{}, Entries: map[string]map[string][]Block{}}
			if err := json.Unmarshal([]byte(tc.json), &cp); err != nil {
				t.Fatal(err)
			}
			if got := cp.checksum(); got != tc.want {
				t.Errorf("checksum = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDecodeUpstream(t *testing.T) {
	in := `{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum": 4215593881}`
	s, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := State{PolicyName: "static",
		Machine:     MachineState{0: {Memory: map[corev1.ResourceName]*MemoryTable{"memory": {Total: 2048, SystemReserved: 512, Allocatable: 1536, Reserved: 512, Free: 1024}}, Cells: []int{}}},
		Assignments: map[string]map[string][]Block{"pod": {"container1": {{NUMAAffinity: []int{0}, Type: "memory", Size: 512}}}}}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := Decode([]byte(strings.Replace(in, `"size":512`, `"size":513`, 1))); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Errorf("tampered checkpoint: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	p, s := fourNUMA(t)
	pod := guaranteed("u", ctr("c", "40Gi", "hugepages-1Gi", "1Gi"))
	s, err := p.Allocate(s, pod, &pod.Spec.Containers[0], topology.Hint{})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), StateFile)
	if err := Write(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(s, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := p.Restore(got); err != nil {
		t.Errorf("Restore: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"policyName":"static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"memory":{"total":2048,"systemReserved":512,"allocatable":1536,"reserved":512,"free":1024}},"cells":[]}},"entries":{"pod":{"container1":[{"numaAffinity":[0],"type":"memory","size":512}]}},"checksum": 4215593881}`))
	f.Add([]byte(`{"policyName":"None","machineState":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("decode of encoded state: %v", err)
		}
		if d := cmp.Diff(s.Machine, back.Machine); d != "" && len(s.Machine) != 0 {
			t.Errorf("machine changed (-want +got):\n%s", d)
		}
	})
}

func metaUID(uid string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: uid, UID: types.UID(uid)} }
