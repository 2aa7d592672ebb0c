package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// usage is what a test expects a node to count.
type usage struct {
	Pods      int
	Requested Resources
}

func usageOf(s *Snapshot) map[string]usage {
	out := map[string]usage{}
	for name, n := range s.nodes {
		label := name
		if n.Node == nil {
			label += " (no node)"
		}
		out[label] = usage{Pods: n.NumPods(), Requested: n.Requested}
	}
	return out
}

func TestSnapshotAccounting(t *testing.T) {
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "default", Name: name} }
	cases := []struct {
		name  string
		steps func(s *Snapshot)
		want  map[string]usage
	}{
		{
			name: "bound pods add up per node",
			steps: func(s *Snapshot) {
				s.SetNode(mkNode("n1", "4", "8Gi"))
				s.SetNode(mkNode("n2", "4", "8Gi"))
				s.AddPod(mkPod("a", "1", "1Gi", onNode("n1")))
				s.AddPod(mkPod("b", "500m", "", onNode("n1")))
				s.AddPod(mkPod("c", "2", "", onNode("n2")))
			},
			want: map[string]usage{
				"n1": {Pods: 2, Requested: Resources{MilliCPU: 1500, Memory: 1 << 30}},
				"n2": {Pods: 1, Requested: Resources{MilliCPU: 2000}},
			},
		},
		{
			name: "a new version replaces the old; a move changes node",
			steps: func(s *Snapshot) {
				s.SetNode(mkNode("n1", "4", "8Gi"))
				s.SetNode(mkNode("n2", "4", "8Gi"))
				s.AddPod(mkPod("a", "1", "", onNode("n1")))
				s.AddPod(mkPod("a", "3", "", onNode("n1")))
				s.AddPod(mkPod("b", "1", "", onNode("n1")))
				s.AddPod(mkPod("b", "1", "", onNode("n2")))
			},
			want: map[string]usage{
				"n1": {Pods: 1, Requested: Resources{MilliCPU: 3000}},
				"n2": {Pods: 1, Requested: Resources{MilliCPU: 1000}},
			},
		},
		{
			name: "an assumption is replaced by the confirmed pod",
			steps: func(s *Snapshot) {
				s.SetNode(mkNode("n1", "4", "8Gi"))
				s.Assume(NewPodInfo(mkPod("a", "1", "")), "n1")
				s.AddPod(mkPod("a", "1", "", onNode("n1")))
			},
			want: map[string]usage{"n1": {Pods: 1, Requested: Resources{MilliCPU: 1000}}},
		},
		{
			name: "finished pods and removed pods hold nothing",
			steps: func(s *Snapshot) {
				s.SetNode(mkNode("n1", "4", "8Gi"))
				s.AddPod(mkPod("a", "1", "", onNode("n1")))
				s.AddPod(mkPod("b", "1", "", onNode("n1")))
				s.AddPod(mkPod("c", "1", "", onNode("n1")))
				s.AddPod(mkPod("a", "1", "", onNode("n1"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))
				s.RemovePod(key("b"))
				s.RemovePod(key("never-seen"))
			},
			want: map[string]usage{"n1": {Pods: 1, Requested: Resources{MilliCPU: 1000}}},
		},
		{
			name: "terminating pods still count",
			steps: func(s *Snapshot) {
				s.SetNode(mkNode("n1", "4", "8Gi"))
				s.AddPod(mkPod("a", "1", "", onNode("n1"), func(p *corev1.Pod) { p.DeletionTimestamp = &p.CreationTimestamp }))
			},
			want: map[string]usage{"n1": {Pods: 1, Requested: Resources{MilliCPU: 1000}}},
		},
		{
			name: "pods seen before their node, and kept when it goes",
			steps: func(s *Snapshot) {
				s.AddPod(mkPod("a", "1", "", onNode("n1")))
				s.SetNode(mkNode("n2", "4", "8Gi"))
				s.AddPod(mkPod("b", "2", "", onNode("n2")))
				s.RemoveNode("n2")
				s.SetNode(mkNode("n3", "4", "8Gi"))
				s.RemoveNode("n3")
			},
			want: map[string]usage{
				"n1 (no node)": {Pods: 1, Requested: Resources{MilliCPU: 1000}},
				"n2 (no node)": {Pods: 1, Requested: Resources{MilliCPU: 2000}},
			},
		},
		{
			name: "scalar resources come and go",
			steps: func(s *Snapshot) {
				s.SetNode(mkNode("n1", "4", "8Gi"))
				gpu := func(p *corev1.Pod) {
					p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": mustQ("1")}
				}
				s.AddPod(mkPod("a", "", "", onNode("n1"), gpu))
				s.AddPod(mkPod("b", "", "", onNode("n1"), gpu))
				s.RemovePod(key("a"))
			},
			want: map[string]usage{"n1": {Pods: 1, Requested: Resources{Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 1}}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSnapshot()
			tc.steps(s)
			if diff := cmp.Diff(tc.want, usageOf(s)); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSnapshotNodesSortedAndCurrent(t *testing.T) {
	s := NewSnapshot()
	names := func() []string {
		var out []string
		for _, n := range s.Nodes() {
			out = append(out, n.Node.Name)
		}
		return out
	}
	s.SetNode(mkNode("b", "1", "1Gi"))
	s.SetNode(mkNode("a", "1", "1Gi"))
	s.AddPod(mkPod("p", "1", "", onNode("c"))) // a pod on an unknown node adds no node
	if diff := cmp.Diff([]string{"a", "b"}, names()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	s.SetNode(mkNode("c", "1", "1Gi"))
	s.RemoveNode("a")
	if diff := cmp.Diff([]string{"b", "c"}, names()); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	s.SetNode(mkNode("b", "8", "1Gi"))
	if got := s.Node("b").Allocatable.MilliCPU; got != 8000 {
		t.Errorf("updated node's cpu %d, want 8000", got)
	}
	if s.Node("a") != nil {
		t.Error("removed node still there")
	}
}

// TestSnapshotModel drives the snapshot with random operations and checks
// every node's counts against a sum recomputed from scratch.
func TestSnapshotModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	s := NewSnapshot()
	model := map[types.NamespacedName]*corev1.Pod{} // counted pods
	nodes := map[string]bool{}
	cpus := []string{"", "100m", "250m", "1", "2"}
	for step := range 5000 {
		node := fmt.Sprint("n", rng.IntN(6))
		name := fmt.Sprint("p", rng.IntN(40))
		key := types.NamespacedName{Namespace: "default", Name: name}
		switch op := rng.IntN(10); {
		case op < 5:
			p := mkPod(name, cpus[rng.IntN(len(cpus))], cpus[rng.IntN(len(cpus))], onNode(node))
			if rng.IntN(8) == 0 {
				p.Status.Phase = corev1.PodFailed
			}
			s.AddPod(p)
			if isTerminal(p) {
				delete(model, key)
			} else {
				model[key] = p
			}
		case op < 7:
			p := mkPod(name, cpus[rng.IntN(len(cpus))], "", onNode(node))
			s.Assume(NewPodInfo(p), node)
			model[key] = p
		case op < 8:
			s.RemovePod(key)
			delete(model, key)
		case op < 9:
			s.SetNode(mkNode(node, "4", "8Gi"))
			nodes[node] = true
		default:
			s.RemoveNode(node)
			delete(nodes, node)
		}

		want := map[string]usage{}
		for _, p := range model {
			u := want[p.Spec.NodeName]
			u.Pods++
			u.Requested.plus(PodRequests(p, false))
			want[p.Spec.NodeName] = u
		}
		for n := range nodes {
			if _, ok := want[n]; !ok {
				want[n] = usage{}
			}
		}
		got := map[string]usage{}
		for name, n := range s.nodes {
			got[name] = usage{Pods: n.NumPods(), Requested: n.Requested}
			if (n.Node != nil) != nodes[name] {
				t.Fatalf("step %d: node %s present=%v, want %v", step, name, n.Node != nil, nodes[name])
			}
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(sameResources)); diff != "" {
			t.Fatalf("step %d: usage (-want +got):\n%s", step, diff)
		}
		var listed []string
		for _, n := range s.Nodes() {
			listed = append(listed, n.Node.Name)
		}
		if !slices.IsSorted(listed) || len(listed) != len(nodes) {
			t.Fatalf("step %d: Nodes() = %v, want the %d present nodes sorted", step, listed, len(nodes))
		}
	}
}

// sameResources compares amounts, treating a missing scalar as zero.
func sameResources(a, b Resources) bool {
	if a.MilliCPU != b.MilliCPU || a.Memory != b.Memory || a.EphemeralStorage != b.EphemeralStorage || a.Pods != b.Pods {
		return false
	}
	for k, v := range a.Scalar {
		if b.Scalar[k] != v {
			return false
		}
	}
	for k, v := range b.Scalar {
		if a.Scalar[k] != v {
			return false
		}
	}
	return true
}
