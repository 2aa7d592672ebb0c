package sim

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/cpumanager"
	"knode/internal/agent/pods"
	"knode/internal/sim/script"
)

// numaWorld is a World of one node, a-1, a machine of 8 CPUs on 2 NUMA
// nodes (0-3 and 4-7), with the given settings, running n pods of 2
// whole CPUs (Guaranteed) for a minute.
func numaWorld(t *testing.T, n int, settings ...string) *World {
	t.Helper()
	w := settingsWorld(t, settings...)
	if err := w.AddMachines(script.Nodes{Zone: "a", Count: 1, CPUs: 8, NUMANodes: 2}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddPods(script.Pods{Count: n, Resources: script.Resources{CPU: resource.MustParse("2")}}); err != nil {
		t.Fatal(err)
	}
	runTo(t, w, time.Minute)
	return w
}

// cpuState is node's cpu_manager_state as its container manager wrote it.
func cpuState(t *testing.T, w *World, node string) cpumanager.State {
	t.Helper()
	dir, err := w.rootDir(node)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cpumanager.Read(filepath.Join(dir, cpumanager.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// podsByPhase is the names of the pods in each phase.
func podsByPhase(w *World) map[corev1.PodPhase][]string {
	out := map[corev1.PodPhase][]string{}
	for _, p := range w.mirror.pods {
		out[p.Status.Phase] = append(out[p.Status.Phase], p.Name)
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out
}

// The static CPU manager and the single-numa-node topology policy run in
// the simulated agent: with CPUs 0 and 4 reserved, each NUMA node has 3
// CPUs to give, so of three pods of 2 CPUs (which the scheduler fits, 6 of
// 6 allocatable) two get a NUMA node each and the third, which would need
// both, is rejected as the kubelet rejects it.
func TestStaticCPUManagerWithSingleNUMANode(t *testing.T) {
	w := numaWorld(t, 3, "cpu-manager-policy=static", "reserved-cpus=0,4", "topology-manager-policy=single-numa-node")

	node := w.mirror.nodes["a-1"]
	if got, want := node.Status.Allocatable.Cpu().String(), "6"; got != want {
		t.Errorf("allocatable cpu %s, want %s (8 CPUs less the 2 reserved)", got, want)
	}
	byPhase := podsByPhase(w)
	if len(byPhase[corev1.PodRunning]) != 2 || len(byPhase[corev1.PodFailed]) != 1 {
		t.Fatalf("pods by phase %v, want 2 Running and 1 Failed", byPhase)
	}
	rejected := pod(t, w, byPhase[corev1.PodFailed][0])
	if rejected.Status.Reason != "TopologyAffinityError" || rejected.Status.Message != pods.RejectedMessagePrefix+"Resources cannot be allocated with Topology locality" {
		t.Errorf("rejected pod's status: reason %q, message %q; want TopologyAffinityError, %q", rejected.Status.Reason, rejected.Status.Message, "Pod was rejected: Resources cannot be allocated with Topology locality")
	}

	// Each admitted pod holds 2 CPUs of its own, all on one NUMA node; the
	// rejected one holds none.
	state := cpuState(t, w, "a-1")
	numa := []cpuset.CPUSet{cpuset.New(1, 2, 3), cpuset.New(5, 6, 7)}
	var held []cpuset.CPUSet
	for _, name := range byPhase[corev1.PodRunning] {
		cpus := state.Assignments[string(pod(t, w, name).UID)]["app"]
		if cpus.Size() != 2 || !slices.ContainsFunc(numa, cpus.IsSubsetOf) {
			t.Errorf("pod %s holds CPUs %q, want 2 of one NUMA node (%v)", name, cpus, numa)
		}
		held = append(held, cpus)
	}
	if len(held) == 2 && held[0].Union(held[1]).Size() != 4 {
		t.Errorf("the admitted pods share CPUs: %v", held)
	}
	if _, ok := state.Assignments[string(rejected.UID)]; ok {
		t.Errorf("the rejected pod holds CPUs: %v", state.Assignments[string(rejected.UID)])
	}

	if got := w.Snapshot()[0].PodsRejected; got != 1 {
		t.Errorf("pods_rejected = %d, want 1", got)
	}
	if diff := cmp.Diff(map[string]int{"TopologyAffinityError": 1}, w.Summary()[0].Rejections); diff != "" {
		t.Errorf("rejections by reason (-want +got):\n%s", diff)
	}
}

// With best-effort the same third pod runs, on a CPU of each NUMA node.
func TestStaticCPUManagerWithBestEffort(t *testing.T) {
	w := numaWorld(t, 3, "cpu-manager-policy=static", "reserved-cpus=0,4", "topology-manager-policy=best-effort")
	byPhase := podsByPhase(w)
	if len(byPhase[corev1.PodRunning]) != 3 {
		t.Fatalf("pods by phase %v, want 3 Running", byPhase)
	}
	state := cpuState(t, w, "a-1")
	spanning := 0
	for _, name := range byPhase[corev1.PodRunning] {
		cpus := state.Assignments[string(pod(t, w, name).UID)]["app"]
		if cpus.Size() != 2 {
			t.Errorf("pod %s holds CPUs %q, want 2", name, cpus)
		}
		if !cpus.IsSubsetOf(cpuset.New(1, 2, 3)) && !cpus.IsSubsetOf(cpuset.New(5, 6, 7)) {
			spanning++
		}
	}
	if spanning != 1 {
		t.Errorf("%d pods hold CPUs of both NUMA nodes, want 1: %v", spanning, state.Assignments)
	}
	if got := w.Snapshot()[0].PodsRejected; got != 0 {
		t.Errorf("pods_rejected = %d, want 0", got)
	}
}

// A machine that reboots keeps its state files: the new agent process's
// container manager restores them, and the pods that had not ended run
// again on the CPUs they held.
func TestCPUAssignmentsSurviveAReboot(t *testing.T) {
	w := numaWorld(t, 2, "cpu-manager-policy=static", "reserved-cpus=0,4", "topology-manager-policy=single-numa-node")
	before := cpuState(t, w, "a-1").Assignments
	if len(before) != 2 {
		t.Fatalf("assignments %v, want the 2 pods'", before)
	}
	for _, action := range []script.Action{script.Shutdown, script.Start} {
		if err := w.Act(script.At{Action: action, Zone: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	runTo(t, w, 2*time.Minute)
	a := w.byName["a-1"]
	if a.boots != 1 || len(a.rt.ListPods()) != 2 {
		t.Fatalf("after the reboot: %d boots, the new runtime runs %d pods; want 1 boot and both pods", a.boots, len(a.rt.ListPods()))
	}
	if byPhase := podsByPhase(w); len(byPhase[corev1.PodRunning]) != 2 {
		t.Fatalf("after the reboot, pods by phase %v; want 2 Running", byPhase)
	}
	if diff := cmp.Diff(before, cpuState(t, w, "a-1").Assignments, cmp.Comparer(cpuset.CPUSet.Equals)); diff != "" {
		t.Errorf("assignments after the reboot (-before +after):\n%s", diff)
	}
}

// Without a resource setting no container manager runs: the 8-CPU machine
// has 8 allocatable CPUs, both pods run, and no state file is written.
func TestNoContainerManagerByDefault(t *testing.T) {
	w := numaWorld(t, 2)
	if got := w.mirror.nodes["a-1"].Status.Allocatable.Cpu().String(); got != "8" {
		t.Errorf("allocatable cpu %s, want 8", got)
	}
	if byPhase := podsByPhase(w); len(byPhase[corev1.PodRunning]) != 2 {
		t.Errorf("pods by phase %v, want 2 Running", byPhase)
	}
	dir, err := w.rootDir("a-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cpumanager.StateFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want no file", cpumanager.StateFile, err)
	}
}

// Guaranteed pods ask for their cpu and memory as requests and limits;
// the one not named keeps the default request.
func TestPodsResources(t *testing.T) {
	q := resource.MustParse
	for _, tc := range []struct {
		name string
		r    script.Resources
		want corev1.ResourceRequirements
	}{
		{name: "default", want: corev1.ResourceRequirements{Requests: PodRequests}},
		{name: "cpu and memory", r: script.Resources{CPU: q("2"), Memory: q("1Gi")}, want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1Gi")},
		}},
		{name: "cpu only", r: script.Resources{CPU: q("4")}, want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("10Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("4"), corev1.ResourceMemory: q("10Mi")},
		}},
		{name: "memory only", r: script.Resources{Memory: q("512Mi")}, want: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("512Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("512Mi")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, resources(tc.r)); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}
