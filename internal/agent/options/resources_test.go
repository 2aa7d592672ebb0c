package options_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"knode/internal/agent/cpumanager"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/options"
)

// TestCompleteResources reads every resource field from a file, then lets
// the flags override them.
func TestCompleteResources(t *testing.T) {
	file := writeConfig(t, header+`failSwapOn: false
memorySwap:
  swapBehavior: LimitedSwap
cgroupsPerQOS: true
cgroupRoot: /knode
cgroupDriver: cgroupfs
enforceNodeAllocatable: [none]
cpuCFSQuota: false
cpuCFSQuotaPeriod: 50ms
podPidsLimit: 1024
cpuManagerPolicy: static
cpuManagerPolicyOptions:
  full-pcpus-only: "true"
cpuManagerReconcilePeriod: 5s
reservedSystemCPUs: "0"
systemReserved:
  cpu: 500m
  memory: 1Gi
memoryManagerPolicy: Static
reservedMemory:
- numaNode: 0
  limits:
    memory: 1Gi
topologyManagerPolicy: single-numa-node
topologyManagerScope: pod
topologyManagerPolicyOptions:
  prefer-closest-numa-nodes: "true"
`)
	fromFile := options.ResourceSettings{
		FailSwapOn:             false,
		SwapBehavior:           "LimitedSwap",
		CgroupsPerQOS:          true,
		CgroupRoot:             "/knode",
		EnforceNodeAllocatable: []string{"none"},
		CPUCFSQuota:            false,
		CPUCFSQuotaPeriod:      50 * time.Millisecond,
		PodPidsLimit:           1024,
		CPUManager: cpumanager.Config{
			Policy:             "static",
			Options:            map[string]string{"full-pcpus-only": "true"},
			ReservedSystemCPUs: "0",
			ReservedCPU:        q("500m"),
		},
		CPUManagerReconcilePeriod: 5 * time.Second,
		MemoryManager: memorymanager.Config{
			Policy:                     "Static",
			ReservedMemory:             []memorymanager.Reservation{{NUMANode: 0, Limits: corev1.ResourceList{"memory": q("1Gi")}}},
			NodeAllocatableReservation: corev1.ResourceList{"memory": q("1Gi")},
		},
		TopologyManagerPolicy:        "single-numa-node",
		TopologyManagerScope:         "pod",
		TopologyManagerPolicyOptions: map[string]string{"prefer-closest-numa-nodes": "true"},
	}
	fromFlags := fromFile
	fromFlags.FailSwapOn = true
	fromFlags.EnforceNodeAllocatable = []string{"pods"}
	fromFlags.CPUManager.Policy, fromFlags.CPUManager.ReservedSystemCPUs = "none", "1"
	fromFlags.CPUManager.Options = map[string]string{"full-pcpus-only": "false"}
	fromFlags.MemoryManager.ReservedMemory = []memorymanager.Reservation{
		{NUMANode: 0, Limits: corev1.ResourceList{"memory": q("512Mi"), "hugepages-2Mi": q("4Mi")}},
		{NUMANode: 1, Limits: corev1.ResourceList{"memory": q("512Mi")}},
	}
	fromFlags.TopologyManagerPolicy, fromFlags.TopologyManagerScope = "best-effort", "container"
	fromFlags.PodPidsLimit = -1

	cases := []struct {
		name string
		args []string
		want options.ResourceSettings
	}{
		{name: "the file", args: []string{"--config", file}, want: fromFile},
		{name: "flags over the file", args: []string{"--config", file,
			"--fail-swap-on=true",
			"--enforce-node-allocatable", "pods",
			"--cpu-manager-policy", "none",
			"--reserved-cpus", "1",
			"--cpu-manager-policy-options", "full-pcpus-only=false",
			"--reserved-memory", "0:memory=512Mi,hugepages-2Mi=4Mi",
			"--reserved-memory", "1:memory=512Mi",
			"--topology-manager-policy", "best-effort",
			"--topology-manager-scope", "container",
			"--pod-max-pids", "-1",
		}, want: fromFlags},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := complete(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, s.Resources); d != "" {
				t.Errorf("Resources (-want +got):\n%s", d)
			}
			// reservedSystemCPUs replaces the reserved cpu quantities.
			if d := cmp.Diff(corev1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, s.SystemReserved); d != "" {
				t.Errorf("systemReserved (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseReservedMemory(t *testing.T) {
	got, err := options.ParseReservedMemory("1:memory=1Gi, hugepages-1Gi=2Gi")
	if err != nil {
		t.Fatal(err)
	}
	want := memorymanager.Reservation{NUMANode: 1, Limits: corev1.ResourceList{"memory": q("1Gi"), "hugepages-1Gi": q("2Gi")}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for spec, wantErr := range map[string][]string{
		"x:memory=1Gi":           {`NUMA node "x"`},
		"-1:memory=1Gi":          {`NUMA node "-1"`},
		"0:memory":               {`"memory"`, "<resource>=<quantity>"},
		"0:memory=1Gi,memory=2G": {"memory", "twice"},
	} {
		_, err := options.ParseReservedMemory(spec)
		checkErr(t, err, wantErr)
	}
}

// FuzzParseReservedMemory: any --reserved-memory value parses or fails with
// an error, never a panic; what parses names a node and at least one
// resource.
func FuzzParseReservedMemory(f *testing.F) {
	for _, seed := range []string{"0:memory=1Gi", "1:memory=1Gi,hugepages-2Mi=4Mi", "x:memory=1", "0:", ":", "0:memory=1Gi,memory=2Gi", "2:=3"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		r, err := options.ParseReservedMemory(spec)
		if err != nil {
			return
		}
		if r.NUMANode < 0 || len(r.Limits) == 0 {
			t.Errorf("ParseReservedMemory(%q) = %+v", spec, r)
		}
	})
}
