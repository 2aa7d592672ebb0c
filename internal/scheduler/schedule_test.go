package scheduler

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestFitErrorMessage(t *testing.T) {
	cpu := resolvable("Insufficient cpu")
	cases := []struct {
		name string
		err  FitError
		want string
	}{
		{
			name: "one reason on every node",
			err:  FitError{NumAllNodes: 2, Statuses: map[string]*Status{"n1": cpu, "n2": cpu}},
			want: "0/2 nodes are available: 2 Insufficient cpu.",
		},
		{
			name: "reasons counted per node, sorted as strings",
			err: FitError{NumAllNodes: 4, Statuses: map[string]*Status{
				"n1": cpu,
				"n2": unresolvable(ReasonUntoleratedTaint),
				"n3": resolvable("Insufficient cpu", "Insufficient memory"),
				"n4": unresolvable(ReasonUnschedulable),
			}},
			want: "0/4 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable, 2 Insufficient cpu.",
		},
		{
			name: "counts sort as strings: 10 before 2",
			err: func() FitError {
				e := FitError{NumAllNodes: 12, Statuses: map[string]*Status{}}
				for i := range 10 {
					e.Statuses[fmt.Sprint("a", i)] = unresolvable(ReasonUnschedulable)
				}
				e.Statuses["b0"], e.Statuses["b1"] = cpu, cpu
				return e
			}(),
			want: "0/12 nodes are available: 10 node(s) were unschedulable, 2 Insufficient cpu.",
		},
		{
			name: "absent nodes share one status",
			err:  FitError{NumAllNodes: 3, Statuses: map[string]*Status{"n1": cpu}, Absent: statusPreFilter},
			want: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity].",
		},
		{
			name: "a pre-filter message replaces the counts",
			err:  FitError{NumAllNodes: 3, PreFilterMsg: ReasonAffinityConflict, Absent: unresolvable(ReasonAffinityConflict)},
			want: "0/3 nodes are available: pod affinity terms conflict.",
		},
		{
			name: "post-filter message follows",
			err:  FitError{NumAllNodes: 1, Statuses: map[string]*Status{"n1": cpu}, PostFilterMsg: "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
			want: "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("message:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestScheduleUnschedulableMessages checks whole messages, preemption part
// included, against the shapes upstream's default scheduler writes.
func TestScheduleUnschedulableMessages(t *testing.T) {
	two := func(opts ...func(*corev1.Node)) []*corev1.Node {
		return []*corev1.Node{mkNode("n1", "2", "4Gi", opts...), mkNode("n2", "2", "4Gi", opts...)}
	}
	bound := func(name, node, cpu string, prio int32) *corev1.Pod {
		return mkPod(name, cpu, "", onNode(node), withPriority(prio))
	}
	cases := []struct {
		name  string
		nodes []*corev1.Node
		bound []*corev1.Pod
		pod   *corev1.Pod
		want  string
	}{
		{
			name:  "more cpu than any node has",
			nodes: two(),
			pod:   mkPod("p", "3", ""),
			want:  "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		},
		{
			name:  "nodes full of pods of equal priority",
			nodes: two(),
			bound: []*corev1.Pod{bound("a", "n1", "1500m", 0), bound("b", "n2", "1500m", 0)},
			pod:   mkPod("p", "1", ""),
			want:  "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
		},
		{
			name:  "evicting the lower-priority pod would not be enough",
			nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			bound: []*corev1.Pod{bound("low", "n1", "1", 0), bound("peer", "n1", "600m", 10)},
			pod:   mkPod("p", "1500m", "", withPriority(10)),
			want:  "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name:  "evicting would make room: upstream would preempt, so no preemption part",
			nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			bound: []*corev1.Pod{bound("low", "n1", "1500m", 0)},
			pod:   mkPod("p", "1", "", withPriority(10)),
			want:  "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name:  "preemptionPolicy Never",
			nodes: []*corev1.Node{mkNode("n1", "2", "4Gi")},
			bound: []*corev1.Pod{bound("low", "n1", "1500m", 0)},
			pod: mkPod("p", "1", "", withPriority(10), func(p *corev1.Pod) {
				p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
			}),
			want: "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name:  "pods capacity",
			nodes: []*corev1.Node{mkNode("n1", "2", "4Gi", withAllocatable(corev1.ResourcePods, "1"))},
			bound: []*corev1.Pod{bound("a", "n1", "", 0)},
			pod:   mkPod("p", "", ""),
			want:  "0/1 nodes are available: 1 Too many pods. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
		},
		{
			name: "mixed reasons; the first filter to reject a node speaks for it",
			nodes: []*corev1.Node{
				mkNode("n1", "1", "4Gi", cordoned), // also short of cpu: not reported
				mkNode("n2", "2", "4Gi", withTaints(corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})),
				mkNode("n3", "2", "4Gi"),
				mkNode("n4", "2", "4Gi", withLabels("disk", "ssd")),
			},
			bound: []*corev1.Pod{bound("a", "n4", "1500m", 0)},
			pod:   mkPod("p", "1500m", "", withNodeSelector("disk", "ssd")),
			want: "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. " +
				"preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.",
		},
		{
			name:  "a DaemonSet-style pod pinned to a full node",
			nodes: []*corev1.Node{mkNode("n1", "2", "4Gi"), mkNode("n2", "2", "4Gi"), mkNode("n3", "2", "4Gi")},
			bound: []*corev1.Pod{bound("a", "n2", "2", 0)},
			pod: mkPod("ds", "500m", "", withRequiredTerms(corev1.NodeSelectorTerm{
				MatchFields: []corev1.NodeSelectorRequirement{expr("metadata.name", corev1.NodeSelectorOpIn, "n2")},
			})),
			want: "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't satisfy plugin(s) [NodeAffinity]. " +
				"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
		},
		{
			name:  "terms pinning disjoint node names",
			nodes: two(),
			pod: mkPod("p", "", "", withRequiredTerms(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				expr("metadata.name", corev1.NodeSelectorOpIn, "n1"),
				expr("metadata.name", corev1.NodeSelectorOpIn, "n2"),
			}})),
			want: "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		},
		{
			name:  "cordoned nodes",
			nodes: two(cordoned),
			pod:   mkPod("p", "", ""),
			want:  "0/2 nodes are available: 2 node(s) were unschedulable. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node, err := Schedule(NewPodInfo(tc.pod), snapshotOf(tc.nodes, tc.bound...))
			if err == nil {
				t.Fatalf("scheduled to %s, want unschedulable", node)
			}
			var fe *FitError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FitError", err)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("message:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestScheduleNoNodes(t *testing.T) {
	_, err := Schedule(NewPodInfo(mkPod("p", "", "")), NewSnapshot())
	if !errors.Is(err, ErrNoNodes) || err.Error() != "no nodes available to schedule pods" {
		t.Fatalf("err = %v, want ErrNoNodes", err)
	}
}

func TestSchedulePicks(t *testing.T) {
	cases := []struct {
		name  string
		nodes []*corev1.Node
		bound []*corev1.Pod
		pod   *corev1.Pod
		want  string
	}{
		{
			name:  "the least allocated node",
			nodes: []*corev1.Node{mkNode("n1", "4", "8Gi"), mkNode("n2", "4", "8Gi")},
			bound: []*corev1.Pod{mkPod("a", "2", "1Gi", onNode("n1"))},
			pod:   mkPod("p", "100m", ""),
			want:  "n2",
		},
		{
			name:  "a bigger node scores higher",
			nodes: []*corev1.Node{mkNode("n1", "2", "4Gi"), mkNode("n2", "8", "16Gi")},
			pod:   mkPod("p", "1", "1Gi"),
			want:  "n2",
		},
		{
			name:  "the only node that fits, though fuller",
			nodes: []*corev1.Node{mkNode("n1", "4", "8Gi", cordoned), mkNode("n2", "4", "8Gi")},
			bound: []*corev1.Pod{mkPod("a", "3", "", onNode("n2"))},
			pod:   mkPod("p", "500m", ""),
			want:  "n2",
		},
		{
			name:  "equal scores: the node with fewer pods",
			nodes: []*corev1.Node{mkNode("n1", "64", "256Gi"), mkNode("n2", "64", "256Gi")},
			bound: []*corev1.Pod{mkPod("a", "0", "0", onNode("n1"))},
			pod:   mkPod("p", "", ""),
			want:  "n2",
		},
		{
			name:  "equal scores and pods: the first by name",
			nodes: []*corev1.Node{mkNode("n2", "4", "8Gi"), mkNode("n1", "4", "8Gi")},
			pod:   mkPod("p", "", ""),
			want:  "n1",
		},
		{
			name:  "spec.nodeName is honoured",
			nodes: []*corev1.Node{mkNode("n1", "4", "8Gi"), mkNode("n2", "4", "8Gi")},
			pod:   mkPod("p", "", "", onNode("n2")),
			want:  "n2",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Schedule(NewPodInfo(tc.pod), snapshotOf(tc.nodes, tc.bound...))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("scheduled to %s, want %s", got, tc.want)
			}
		})
	}
}

func TestLeastAllocated(t *testing.T) {
	cases := []struct {
		name string
		node *NodeInfo
		pod  *corev1.Pod
		want int64
	}{
		{name: "a quarter of each used", node: nodeInfo(mkNode("n", "4", "8Gi")), pod: mkPod("p", "1", "2Gi"), want: 75},
		{name: "cpu and memory weigh the same", node: nodeInfo(mkNode("n", "4", "8Gi")), pod: mkPod("p", "2", "0"), want: (50 + 100) / 2},
		{name: "defaults count for unstated requests, rounded down", node: nodeInfo(mkNode("n", "4", "8Gi")), pod: mkPod("p", "", ""), want: 97},
		{name: "pods on the node count", node: nodeInfo(mkNode("n", "4", "8Gi"), mkPod("a", "2", "4Gi")), pod: mkPod("p", "1", "2Gi"), want: 25},
		{name: "over capacity scores 0", node: nodeInfo(mkNode("n", "1", "1Gi")), pod: mkPod("p", "2", "2Gi"), want: 0},
		{name: "no allocatable scores 0", node: nodeInfo(&corev1.Node{}), pod: mkPod("p", "1", "1Gi"), want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := LeastAllocated(NewPodInfo(tc.pod), tc.node); got != tc.want {
				t.Errorf("score %d, want %d", got, tc.want)
			}
		})
	}
}

// Assuming pod after pod onto what Schedule picks spreads them evenly
// over identical nodes, whatever their size.
func TestScheduleSpreads(t *testing.T) {
	for _, size := range []struct{ cpu, memory string }{{"2", "4Gi"}, {"96", "512Gi"}} {
		t.Run(size.cpu+"cpu", func(t *testing.T) {
			var nodes []*corev1.Node
			for i := range 7 {
				nodes = append(nodes, mkNode(fmt.Sprintf("n%d", i), size.cpu, size.memory))
			}
			snap := snapshotOf(nodes)
			counts := map[string]int{}
			for i := range 70 {
				pi := NewPodInfo(mkPod(fmt.Sprint("p", i), "", ""))
				node, err := Schedule(pi, snap)
				if err != nil {
					t.Fatal(err)
				}
				snap.Assume(pi, node)
				counts[node]++
			}
			want := map[string]int{}
			for _, n := range nodes {
				want[n.Name] = 10
			}
			if diff := cmp.Diff(want, counts); diff != "" {
				t.Errorf("pods per node (-want +got):\n%s", diff)
			}
		})
	}
}
