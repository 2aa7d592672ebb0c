package cm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/cm"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/topology"
)

func TestStaticCPUsOnTwoCPUVM(t *testing.T) {
	root := t.TempDir()
	cfg := cm.Config{
		RootDir:    root,
		Topology:   fake.UniformTopology(2, 4<<30),
		CPUManager: cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"},
	}
	m := newManager(t, cfg)
	gen := m.SharedPoolGeneration()
	gu, be := guaranteed("pod-a", "1"), bestEffort("pod-b")
	admit(t, m, gu)
	admit(t, m, be)
	if got := cpusOf(t, m, gu, 0); got != "1" {
		t.Errorf("Guaranteed container: cpuset %q, want 1", got)
	}
	if got := cpusOf(t, m, be, 0); got != "0" {
		t.Errorf("BestEffort container: cpuset %q, want the shared pool 0", got)
	}
	if g := m.SharedPoolGeneration(); g == gen {
		t.Errorf("SharedPoolGeneration stayed %d after the pool shrank", g)
	}

	// The state file is upstream's v2 checkpoint.
	path := filepath.Join(root, cpumanager.StateFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`"checksum":[1-9][0-9]*}$`).ReplaceAllString(string(raw), `"checksum":N}`)
	if want := `{"policyName":"static","defaultCpuSet":"0","entries":{"pod-a":{"c0":"1"}},"checksum":N}`; got != want {
		t.Errorf("state file:\n got %s\nwant %s", raw, want)
	}
	if _, err := cpumanager.Read(path); err != nil {
		t.Errorf("state file does not verify: %v", err)
	}

	// A new Manager (an agent restart) restores the assignment before and
	// after the pod is admitted again, and admitting it takes nothing new.
	m2 := newManager(t, cfg)
	if got := cpusOf(t, m2, gu, 0); got != "1" {
		t.Errorf("after restart: cpuset %q, want 1", got)
	}
	admit(t, m2, gu)
	admit(t, m2, gu)
	if got, pool := cpusOf(t, m2, gu, 0), cpusOf(t, m2, be, 0); got != "1" || pool != "0" {
		t.Errorf("re-admitted: cpuset %q pool %q, want 1 and 0", got, pool)
	}
	gen = m2.SharedPoolGeneration()
	if err := m2.RemovePod(gu.UID); err != nil {
		t.Fatal(err)
	}
	if got := cpusOf(t, m2, be, 0); got != "0-1" {
		t.Errorf("after RemovePod: shared pool %q, want 0-1", got)
	}
	if g := m2.SharedPoolGeneration(); g == gen {
		t.Errorf("SharedPoolGeneration stayed %d after the pool grew", g)
	}
	s, err := cpumanager.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.DefaultCPUSet.String() != "0-1" || len(s.Assignments) != 0 {
		t.Errorf("state after RemovePod: %+v", s)
	}
}

func TestNonePolicyLeavesCPUSetEmpty(t *testing.T) {
	root := t.TempDir()
	m := newManager(t, cm.Config{RootDir: root, Topology: fake.UniformTopology(2, 4<<30)})
	gu := guaranteed("pod-a", "1")
	admit(t, m, gu)
	if got := cpusOf(t, m, gu, 0); got != "" {
		t.Errorf("none policy: cpuset %q, want none", got)
	}
	s, err := cpumanager.Read(filepath.Join(root, cpumanager.StateFile))
	if err != nil || s.PolicyName != cpumanager.PolicyNone {
		t.Errorf("none policy's state file: %+v, %v", s, err)
	}
	ms, err := memorymanager.Read(filepath.Join(root, memorymanager.StateFile))
	if err != nil || ms.PolicyName != memorymanager.PolicyNone {
		t.Errorf("None policy's state file: %+v, %v", ms, err)
	}
}

func TestRestoreRefusesMismatchedState(t *testing.T) {
	staticCPU := cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"}
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, root string)
		cpu   cpumanager.Config
		want  string
	}{
		{
			name: "none file, static policy",
			write: func(t *testing.T, root string) {
				if err := cpumanager.Write(filepath.Join(root, cpumanager.StateFile), cpumanager.State{PolicyName: "none"}); err != nil {
					t.Fatal(err)
				}
			},
			cpu:  staticCPU,
			want: `cpuManagerPolicy "static": could not restore state from checkpoint: configured policy "static" differs from state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file`,
		},
		{
			name: "static file, none policy",
			write: func(t *testing.T, root string) {
				s := cpumanager.State{PolicyName: "static", DefaultCPUSet: cpuset.New(0, 1)}
				if err := cpumanager.Write(filepath.Join(root, cpumanager.StateFile), s); err != nil {
					t.Fatal(err)
				}
			},
			want: `cpuManagerPolicy "none": could not restore state from checkpoint: configured policy "none" differs from state checkpoint policy "static"`,
		},
		{
			name: "reserved CPU assigned in the file",
			write: func(t *testing.T, root string) {
				s := cpumanager.State{PolicyName: "static", DefaultCPUSet: cpuset.New(1),
					Assignments: map[string]map[string]cpuset.CPUSet{"p": {"c": cpuset.New(0)}}}
				if err := cpumanager.Write(filepath.Join(root, cpumanager.StateFile), s); err != nil {
					t.Fatal(err)
				}
			},
			cpu:  staticCPU,
			want: `not all reserved cpus: "0" are present in defaultCpuSet: "1", please drain this node`,
		},
		{
			name: "corrupt checksum",
			write: func(t *testing.T, root string) {
				data := `{"policyName":"static","defaultCpuSet":"0-1","checksum":1}`
				if err := os.WriteFile(filepath.Join(root, cpumanager.StateFile), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			cpu:  staticCPU,
			want: "checkpoint is corrupted",
		},
		{
			name: "memory Static file, None policy",
			write: func(t *testing.T, root string) {
				if err := memorymanager.Write(filepath.Join(root, memorymanager.StateFile), memorymanager.State{PolicyName: "Static"}); err != nil {
					t.Fatal(err)
				}
			},
			want: `memoryManagerPolicy "None": could not restore state from checkpoint: [memorymanager] configured policy "None" differs from state checkpoint policy "Static", please drain this node and delete the memory manager checkpoint file`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			tc.write(t, root)
			_, err := cm.New(cm.Config{RootDir: root, Topology: fake.UniformTopology(2, 4<<30), CPUManager: tc.cpu, Logger: quiet})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAdmitRejections(t *testing.T) {
	staticCPU := cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"}
	for _, tc := range []struct {
		name    string
		cfg     cm.Config
		pod     *corev1.Pod
		reason  string
		message string // a prefix
	}{
		{
			name:    "single-numa-node: more CPUs than a node has",
			cfg:     cm.Config{Topology: fake.TopologyFourNUMA(), CPUManager: staticCPU, TopologyManagerPolicy: topology.PolicySingleNUMANode},
			pod:     guaranteed("p", "5"),
			reason:  "TopologyAffinityError",
			message: "Resources cannot be allocated with Topology locality",
		},
		{
			name:    "single-numa-node: the second container does not fit; the first one's CPUs come back",
			cfg:     cm.Config{Topology: fake.TopologyFourNUMA(), CPUManager: staticCPU, TopologyManagerPolicy: topology.PolicySingleNUMANode},
			pod:     guaranteed("p", "4", "5"),
			reason:  "TopologyAffinityError",
			message: "Resources cannot be allocated with Topology locality",
		},
		{
			name: "full-pcpus-only: an odd request",
			cfg: cm.Config{Topology: fake.TopologyTwoSocketSMT(), CPUManager: cpumanager.Config{
				Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0,4", Options: map[string]string{cpumanager.OptionFullPCPUsOnly: "true"}}},
			pod:     guaranteed("p", "3"),
			reason:  "SMTAlignmentError",
			message: "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2",
		},
		{
			name: "memory manager: more memory than the machine has",
			cfg: cm.Config{Topology: fake.TopologyFourNUMA(), KubeReserved: rl("memory", "1Gi"), MemoryManager: memorymanager.Config{
				Policy: memorymanager.PolicyStatic, ReservedMemory: []memorymanager.Reservation{{NUMANode: 0, Limits: rl("memory", "1Gi")}}}},
			pod:     podOf("p", rl("cpu", "1", "memory", "1Ti"), rl("cpu", "1", "memory", "1Ti")),
			reason:  "UnexpectedAdmissionError",
			message: "Allocate failed due to [memorymanager] failed to get the default NUMA affinity",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.RootDir = t.TempDir()
			m := newManager(t, cfg)
			gen := m.SharedPoolGeneration()
			be := bestEffort("be")
			admit(t, m, be)
			before := cpusOf(t, m, be, 0)
			reason, message, ok := m.Admit(tc.pod)
			if ok || reason != tc.reason || !strings.HasPrefix(message, tc.message) {
				t.Errorf("Admit = %q, %q, %v; want %q, %q..., false", reason, message, ok, tc.reason, tc.message)
			}
			if after := cpusOf(t, m, be, 0); after != before {
				t.Errorf("shared pool %q after the rejection, want %q as before", after, before)
			}
			if g := m.SharedPoolGeneration(); g != gen {
				t.Errorf("SharedPoolGeneration %d, want %d: nothing changed for good", g, gen)
			}
			s, err := cpumanager.Read(filepath.Join(cfg.RootDir, cpumanager.StateFile))
			if err != nil || len(s.Assignments) != 0 {
				t.Errorf("state file: %+v, %v; want no assignments", s, err)
			}
		})
	}
}

func TestPodScopeAlignsContainers(t *testing.T) {
	topo := fake.TopologyFourNUMA()
	for _, policy := range []string{topology.PolicySingleNUMANode, topology.PolicyRestricted, topology.PolicyBestEffort} {
		t.Run(policy, func(t *testing.T) {
			m := newManager(t, cm.Config{
				Topology:              topo,
				CPUManager:            cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"},
				TopologyManagerPolicy: policy,
				TopologyManagerScope:  topology.ScopePod,
			})
			// 2+2 CPUs: node 0 has 3 free, so the pod goes to one of the
			// other nodes as a whole.
			pod := guaranteed("p", "2", "2")
			admit(t, m, pod)
			a, b := cpusOf(t, m, pod, 0), cpusOf(t, m, pod, 1)
			na, nb := numaOf(t, topo, a), numaOf(t, topo, b)
			if na < 1 || na != nb {
				t.Errorf("containers got %q (node %d) and %q (node %d), want one node other than 0", a, na, b, nb)
			}
		})
	}
}

func TestRemoveStale(t *testing.T) {
	cfg := cm.Config{
		RootDir:    t.TempDir(),
		Topology:   fake.UniformTopology(4, 8<<30),
		CPUManager: cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"},
	}
	m := newManager(t, cfg)
	a, b := guaranteed("a", "1"), guaranteed("b", "2")
	admit(t, m, a)
	admit(t, m, b)
	// Restart: pod b went away meanwhile.
	m2 := newManager(t, cfg)
	be := bestEffort("be")
	if got := cpusOf(t, m2, be, 0); got != "0" {
		t.Fatalf("restored pool %q, want 0", got)
	}
	if err := m2.RemoveStale([]types.UID{"a", "be"}); err != nil {
		t.Fatal(err)
	}
	if got, pool := cpusOf(t, m2, a, 0), cpusOf(t, m2, be, 0); got != "1" || pool != "0,2-3" {
		t.Errorf("after RemoveStale: a %q pool %q, want 1 and 0,2-3", got, pool)
	}
}

// TestConcurrentAdmitRemove admits and removes pods from many goroutines
// and checks the model: admitted pods' exclusive sets are disjoint and
// outside the reserved CPU, and once all are gone the pool is whole again.
func TestConcurrentAdmitRemove(t *testing.T) {
	topo := fake.TopologyFourNUMA()
	m := newManager(t, cm.Config{
		Topology:              topo,
		CPUManager:            cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"},
		TopologyManagerPolicy: topology.PolicyBestEffort,
	})
	const n = 7 // 7 pods × 2 CPUs fit the 15 free CPUs
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = guaranteed(fmt.Sprintf("p%d", i), "2")
	}
	sets := make([]string, n)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Go(func() {
			if reason, msg, ok := m.Admit(pods[i]); !ok {
				t.Errorf("Admit p%d: %s: %s", i, reason, msg)
				return
			}
			r, err := m.ContainerResources(pods[i], &pods[i].Spec.Containers[0])
			if err != nil {
				t.Error(err)
			}
			sets[i] = r.Linux.CPUSetCPUs
		})
	}
	wg.Wait()
	used := cpuset.New(0)
	for i, s := range sets {
		set, err := cpuset.Parse(s)
		if err != nil || set.Size() != 2 || !set.Intersection(used).IsEmpty() {
			t.Errorf("p%d got %q; overlaps %q or is not 2 CPUs", i, s, used)
		}
		used = used.Union(set)
	}
	for i := range pods {
		wg.Go(func() {
			if err := m.RemovePod(pods[i].UID); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := cpusOf(t, m, bestEffort("be"), 0); got != "0-15" {
		t.Errorf("pool after removing every pod: %q, want 0-15", got)
	}
}

func TestAdmissionMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newManager(t, cm.Config{
		Topology:              fake.TopologyFourNUMA(),
		CPUManager:            cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"},
		TopologyManagerPolicy: topology.PolicySingleNUMANode,
		Metrics:               reg,
	})
	admit(t, m, guaranteed("ok", "2"))
	admit(t, m, guaranteed("ok", "2")) // already admitted: not asked again
	if _, _, ok := m.Admit(guaranteed("big", "5")); ok {
		t.Fatal("a 5-CPU pod was admitted under single-numa-node")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if c := f.GetMetric()[0].GetCounter(); c != nil {
			got[f.GetName()] = c.GetValue()
		}
	}
	want := map[string]float64{
		"kubelet_topology_manager_admission_requests_total": 2,
		"kubelet_topology_manager_admission_errors_total":   1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}
