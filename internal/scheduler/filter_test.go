package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// filterCase is one (pod, node) and the filter's expected verdict: nil
// for "fits".
type filterCase struct {
	name string
	pod  *corev1.Pod
	node *NodeInfo
	want *Status
}

func runFilterCases(t *testing.T, f Filter, cases []filterCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := f(NewPodInfo(tc.pod), tc.node)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func unresolvable(reasons ...string) *Status {
	return &Status{Code: UnschedulableAndUnresolvable, Reasons: reasons}
}

func resolvable(reasons ...string) *Status {
	return &Status{Code: Unschedulable, Reasons: reasons}
}

func TestNodeUnschedulable(t *testing.T) {
	node := nodeInfo(mkNode("n1", "4", "8Gi", cordoned))
	runFilterCases(t, NodeUnschedulable, []filterCase{
		{name: "schedulable node", pod: mkPod("p", "", ""), node: nodeInfo(mkNode("n1", "4", "8Gi"))},
		{name: "cordoned node", pod: mkPod("p", "", ""), node: node, want: unresolvable("node(s) were unschedulable")},
		{
			name: "tolerates unschedulable with Exists (DaemonSet pods)",
			pod: mkPod("p", "", "", withTolerations(corev1.Toleration{
				Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			})),
			node: node,
		},
		{
			name: "tolerates everything",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			node: node,
		},
		{
			name: "toleration for another effect does not help",
			pod: mkPod("p", "", "", withTolerations(corev1.Toleration{
				Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute,
			})),
			node: node,
			want: unresolvable(ReasonUnschedulable),
		},
		{
			name: "taint present but spec.unschedulable false: not this filter's business",
			pod:  mkPod("p", "", ""),
			node: nodeInfo(mkNode("n1", "4", "8Gi", withTaints(unschedulableTaint))),
		},
	})
}

func TestNodeName(t *testing.T) {
	node := nodeInfo(mkNode("n1", "4", "8Gi"))
	runFilterCases(t, NodeName, []filterCase{
		{name: "no node name", pod: mkPod("p", "", ""), node: node},
		{name: "this node", pod: mkPod("p", "", "", onNode("n1")), node: node},
		{name: "another node", pod: mkPod("p", "", "", onNode("n2")), node: node, want: unresolvable("node(s) didn't match the requested node name")},
	})
}

func TestTaintToleration(t *testing.T) {
	taint := func(key, value string, effect corev1.TaintEffect) corev1.Taint {
		return corev1.Taint{Key: key, Value: value, Effect: effect}
	}
	dedicated := nodeInfo(mkNode("n1", "4", "8Gi", withTaints(taint("dedicated", "gpu", corev1.TaintEffectNoSchedule))))
	untolerated := unresolvable("node(s) had untolerated taint(s)")
	runFilterCases(t, TaintToleration, []filterCase{
		{name: "no taints", pod: mkPod("p", "", ""), node: nodeInfo(mkNode("n1", "4", "8Gi"))},
		{name: "NoSchedule untolerated", pod: mkPod("p", "", ""), node: dedicated, want: untolerated},
		{
			name: "NoExecute untolerated",
			pod:  mkPod("p", "", ""),
			node: nodeInfo(mkNode("n1", "4", "8Gi", withTaints(taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute)))),
			want: untolerated,
		},
		{
			name: "PreferNoSchedule is ignored",
			pod:  mkPod("p", "", ""),
			node: nodeInfo(mkNode("n1", "4", "8Gi", withTaints(taint("soft", "x", corev1.TaintEffectPreferNoSchedule)))),
		},
		{
			name: "Equal with the value",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule})),
			node: dedicated,
		},
		{
			name: "empty operator means Equal",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "dedicated", Value: "gpu"})),
			node: dedicated,
		},
		{
			name: "Equal with another value",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "cpu"})),
			node: dedicated,
			want: untolerated,
		},
		{
			name: "Exists on the key, any effect",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists})),
			node: dedicated,
		},
		{
			name: "Exists with another effect",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			node: dedicated,
			want: untolerated,
		},
		{
			name: "Gt is alpha and off: never tolerates",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "level", Operator: "Gt", Value: "1"})),
			node: nodeInfo(mkNode("n1", "4", "8Gi", withTaints(taint("level", "5", corev1.TaintEffectNoSchedule)))),
			want: untolerated,
		},
		{
			name: "one of two taints untolerated",
			pod:  mkPod("p", "", "", withTolerations(corev1.Toleration{Key: "a", Operator: corev1.TolerationOpExists})),
			node: nodeInfo(mkNode("n1", "4", "8Gi", withTaints(taint("a", "", corev1.TaintEffectNoSchedule), taint("b", "", corev1.TaintEffectNoExecute)))),
			want: untolerated,
		},
		{
			name: "default NoExecute tolerations do not cover a NoSchedule not-ready taint",
			pod: mkPod("p", "", "", withTolerations(corev1.Toleration{
				Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300),
			})),
			node: nodeInfo(mkNode("n1", "4", "8Gi", withTaints(taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)))),
			want: untolerated,
		},
	})
}

func TestNodeAffinity(t *testing.T) {
	zoneA := nodeInfo(mkNode("n1", "4", "8Gi", withLabels("zone", "a", "gen", "5")))
	mismatch := unresolvable("node(s) didn't match Pod's node affinity/selector")
	term := func(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: exprs}
	}
	fields := func(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: exprs}
	}
	runFilterCases(t, NodeAffinity, []filterCase{
		{name: "nothing asked", pod: mkPod("p", "", ""), node: zoneA},
		{name: "nodeSelector matches", pod: mkPod("p", "", "", withNodeSelector("zone", "a")), node: zoneA},
		{name: "nodeSelector value differs", pod: mkPod("p", "", "", withNodeSelector("zone", "b")), node: zoneA, want: mismatch},
		{name: "nodeSelector key missing", pod: mkPod("p", "", "", withNodeSelector("disk", "ssd")), node: zoneA, want: mismatch},
		{name: "In", pod: mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpIn, "b", "a")))), node: zoneA},
		{name: "NotIn", pod: mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpNotIn, "a")))), node: zoneA, want: mismatch},
		{name: "NotIn on a missing label matches", pod: mkPod("p", "", "", withRequiredTerms(term(expr("disk", corev1.NodeSelectorOpNotIn, "hdd")))), node: zoneA},
		{name: "Exists", pod: mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpExists)))), node: zoneA},
		{name: "DoesNotExist", pod: mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpDoesNotExist)))), node: zoneA, want: mismatch},
		{name: "Gt", pod: mkPod("p", "", "", withRequiredTerms(term(expr("gen", corev1.NodeSelectorOpGt, "4")))), node: zoneA},
		{name: "Gt at the boundary", pod: mkPod("p", "", "", withRequiredTerms(term(expr("gen", corev1.NodeSelectorOpGt, "5")))), node: zoneA, want: mismatch},
		{name: "Lt", pod: mkPod("p", "", "", withRequiredTerms(term(expr("gen", corev1.NodeSelectorOpLt, "6")))), node: zoneA},
		{name: "Gt on a non-number label", pod: mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpGt, "1")))), node: zoneA, want: mismatch},
		{
			name: "expressions in a term are ANDed",
			pod:  mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpIn, "a"), expr("gen", corev1.NodeSelectorOpIn, "4")))),
			node: zoneA,
			want: mismatch,
		},
		{
			name: "terms are ORed",
			pod:  mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpIn, "b")), term(expr("gen", corev1.NodeSelectorOpIn, "5")))),
			node: zoneA,
		},
		{name: "no terms matches nothing", pod: mkPod("p", "", "", withRequiredTerms()), node: zoneA, want: mismatch},
		{name: "an empty term matches nothing", pod: mkPod("p", "", "", withRequiredTerms(corev1.NodeSelectorTerm{})), node: zoneA, want: mismatch},
		{
			name: "nodeSelector and affinity must both match",
			pod:  mkPod("p", "", "", withNodeSelector("zone", "b"), withRequiredTerms(term(expr("gen", corev1.NodeSelectorOpIn, "5")))),
			node: zoneA,
			want: mismatch,
		},
		{name: "matchFields name In", pod: mkPod("p", "", "", withRequiredTerms(fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n1")))), node: zoneA},
		{name: "matchFields name In another", pod: mkPod("p", "", "", withRequiredTerms(fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n2")))), node: zoneA, want: mismatch},
		{name: "matchFields name NotIn", pod: mkPod("p", "", "", withRequiredTerms(fields(expr("metadata.name", corev1.NodeSelectorOpNotIn, "n1")))), node: zoneA, want: mismatch},
		{
			name: "matchFields with two values is invalid",
			pod:  mkPod("p", "", "", withRequiredTerms(fields(expr("metadata.name", corev1.NodeSelectorOpIn, "n1", "n2")))),
			node: zoneA,
			want: mismatch,
		},
		{
			name: "an invalid term before a matching one fails the whole affinity",
			pod:  mkPod("p", "", "", withRequiredTerms(term(expr("zone", "Bogus", "a")), term(expr("zone", corev1.NodeSelectorOpIn, "a")))),
			node: zoneA,
			want: mismatch,
		},
		{
			name: "a matching term before an invalid one matches",
			pod:  mkPod("p", "", "", withRequiredTerms(term(expr("zone", corev1.NodeSelectorOpIn, "a")), term(expr("zone", "Bogus", "a")))),
			node: zoneA,
		},
	})
}

func TestNodeResourcesFit(t *testing.T) {
	node := mkNode("n1", "2", "4Gi", withAllocatable(corev1.ResourcePods, "3"), withAllocatable("example.com/gpu", "2"))
	gpu := func(n string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/gpu": mustQ(n)}
		}
	}
	runFilterCases(t, NodeResourcesFit, []filterCase{
		{name: "fits an empty node", pod: mkPod("p", "2", "4Gi"), node: nodeInfo(node)},
		{name: "cpu exactly at allocatable", pod: mkPod("p", "1", ""), node: nodeInfo(node, mkPod("a", "1", ""))},
		{name: "1m too much cpu", pod: mkPod("p", "1001m", ""), node: nodeInfo(node, mkPod("a", "1", "")), want: resolvable("Insufficient cpu")},
		{name: "more cpu than the whole node", pod: mkPod("p", "3", ""), node: nodeInfo(node), want: unresolvable("Insufficient cpu")},
		{name: "memory short", pod: mkPod("p", "", "3Gi"), node: nodeInfo(node, mkPod("a", "", "2Gi")), want: resolvable("Insufficient memory")},
		{
			name: "cpu and memory short, one unresolvable",
			pod:  mkPod("p", "1500m", "5Gi"),
			node: nodeInfo(node, mkPod("a", "1", "")),
			want: unresolvable("Insufficient cpu", "Insufficient memory"),
		},
		{
			name: "pods capacity reached even for a pod that requests nothing",
			pod:  mkPod("p", "", ""),
			node: nodeInfo(node, mkPod("a", "", ""), mkPod("b", "", ""), mkPod("c", "", "")),
			want: resolvable("Too many pods"),
		},
		{
			name: "too many pods and insufficient cpu",
			pod:  mkPod("p", "500m", ""),
			node: nodeInfo(node, mkPod("a", "1", ""), mkPod("b", "1", ""), mkPod("c", "", "")),
			want: resolvable("Too many pods", "Insufficient cpu"),
		},
		{name: "extended resource", pod: mkPod("p", "", "", gpu("1")), node: nodeInfo(node, mkPod("a", "", "", gpu("1")))},
		{name: "extended resource short", pod: mkPod("p", "", "", gpu("2")), node: nodeInfo(node, mkPod("a", "", "", gpu("1"))), want: resolvable("Insufficient example.com/gpu")},
		{
			name: "extended resource the node lacks",
			pod:  mkPod("p", "", "", gpu("1")),
			node: nodeInfo(mkNode("n2", "2", "4Gi")),
			want: unresolvable("Insufficient example.com/gpu"),
		},
		{
			name: "node without pods capacity",
			pod:  mkPod("p", "", ""),
			node: nodeInfo(&corev1.Node{}),
			want: resolvable("Too many pods"),
		},
		{
			name: "overhead counts",
			pod: mkPod("p", "1900m", "", func(p *corev1.Pod) {
				p.Spec.Overhead = requests("200m", "")
			}),
			node: nodeInfo(node),
			want: unresolvable("Insufficient cpu"),
		},
	})
}
