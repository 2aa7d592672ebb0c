package cm_test

import (
	"fmt"
	"testing"

	"knode/internal/agent/cm"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/host/fake"
	"knode/internal/agent/topology"
)

// BenchmarkAdmit times the admission of a Guaranteed pod with a 2-CPU
// container on the 4-NUMA machine (what
// kubelet_topology_manager_admission_duration_ms measures), with the
// topology and CPU managers off (the baseline), and with the static CPU
// manager under each topology policy. An admission with the CPU manager on
// writes cpu_manager_state. The pod is released between admissions,
// outside the timer.
func BenchmarkAdmit(b *testing.B) {
	static := cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"}
	cases := []struct {
		name   string
		cpu    cpumanager.Config
		policy string
	}{
		{"baseline-none", cpumanager.Config{}, topology.PolicyNone},
		{"static-none", static, topology.PolicyNone},
		{"static-best-effort", static, topology.PolicyBestEffort},
		{"static-restricted", static, topology.PolicyRestricted},
		{"static-single-numa-node", static, topology.PolicySingleNUMANode},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			m, err := cm.New(cm.Config{
				RootDir:               b.TempDir(),
				Topology:              fake.TopologyFourNUMA(),
				CPUManager:            tc.cpu,
				TopologyManagerPolicy: tc.policy,
				Logger:                quiet,
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				pod := guaranteed(fmt.Sprintf("pod-%d", i), "2")
				if reason, msg, ok := m.Admit(pod); !ok {
					b.Fatalf("rejected: %s: %s", reason, msg)
				}
				b.StopTimer()
				if err := m.RemovePod(pod.UID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
