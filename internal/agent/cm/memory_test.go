package cm_test

import (
	"path/filepath"
	"strconv"
	"testing"

	"knode/internal/agent/cm"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/topology"
)

func TestMemoryManagerStatic(t *testing.T) {
	topo := fake.TopologyFourNUMA()
	cfg := cm.Config{
		RootDir:      t.TempDir(),
		Topology:     topo,
		KubeReserved: rl("cpu", "1", "memory", "1Gi"),
		CPUManager:   cpumanager.Config{Policy: cpumanager.PolicyStatic},
		MemoryManager: memorymanager.Config{
			Policy:         memorymanager.PolicyStatic,
			ReservedMemory: []memorymanager.Reservation{{NUMANode: 0, Limits: rl("memory", "1Gi")}},
		},
		TopologyManagerPolicy: topology.PolicySingleNUMANode,
	}
	m := newManager(t, cfg)
	gu := podOf("gu", rl("cpu", "2", "memory", "2Gi"), rl("cpu", "2", "memory", "2Gi"))
	be := bestEffort("be")
	admit(t, m, gu)
	admit(t, m, be)
	r := resources(t, m, gu, 0)
	node := numaOf(t, topo, r.CPUSetCPUs)
	if node < 0 || r.CPUSetMems != strconv.Itoa(node) {
		t.Errorf("Guaranteed container: cpus %q mems %q, want the mems of the CPUs' one node", r.CPUSetCPUs, r.CPUSetMems)
	}
	if got := resources(t, m, be, 0).CPUSetMems; got != "" {
		t.Errorf("BestEffort container: mems %q, want none", got)
	}

	// Restart: the placement comes back from memory_manager_state.
	m2 := newManager(t, cfg)
	if got := resources(t, m2, gu, 0).CPUSetMems; got != r.CPUSetMems {
		t.Errorf("after restart: mems %q, want %q", got, r.CPUSetMems)
	}
	admit(t, m2, gu)
	if err := m2.RemovePod(gu.UID); err != nil {
		t.Fatal(err)
	}
	if got := resources(t, m2, gu, 0).CPUSetMems; got != "" {
		t.Errorf("after RemovePod: mems %q, want none", got)
	}
	s, err := memorymanager.Read(filepath.Join(cfg.RootDir, memorymanager.StateFile))
	if err != nil || s.PolicyName != memorymanager.PolicyStatic || len(s.Assignments) != 0 {
		t.Errorf("state file after RemovePod: %+v, %v", s.Assignments, err)
	}
}
