package scheduler

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// mkNode is a node with allocatable cpu, memory and 110 pods, changed by
// the options.
func mkNode(name, cpu, memory string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(memory),
			corev1.ResourcePods:   resource.MustParse("110"),
		}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func withLabels(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := 0; i < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withTaints(taints ...corev1.Taint) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = taints }
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func withAllocatable(name corev1.ResourceName, q string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Status.Allocatable[name] = resource.MustParse(q) }
}

// mkPod is a pending pod in default with one container requesting
// cpu and memory ("" for no request), changed by the options.
func mkPod(name, cpu, memory string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec: corev1.PodSpec{
			SchedulerName: corev1.DefaultSchedulerName,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: requests(cpu, memory)}}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func requests(cpu, memory string) corev1.ResourceList {
	rl := corev1.ResourceList{}
	if cpu != "" {
		rl[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		rl[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	if len(rl) == 0 {
		return nil
	}
	return rl
}

func onNode(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

func withPriority(v int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Priority = &v }
}

func withTolerations(ts ...corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = ts }
}

func withNodeSelector(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func withRequiredTerms(terms ...corev1.NodeSelectorTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

// nodeInfo is a snapshot's view of node with pods bound to it.
func nodeInfo(n *corev1.Node, pods ...*corev1.Pod) *NodeInfo {
	s := NewSnapshot()
	s.SetNode(n)
	for _, p := range pods {
		p = p.DeepCopy()
		p.Spec.NodeName = n.Name
		s.AddPod(p)
	}
	return s.Node(n.Name)
}

// snapshotOf builds a snapshot of nodes and bound pods.
func snapshotOf(nodes []*corev1.Node, pods ...*corev1.Pod) *Snapshot {
	s := NewSnapshot()
	for _, n := range nodes {
		s.SetNode(n)
	}
	for _, p := range pods {
		s.AddPod(p)
	}
	return s
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
