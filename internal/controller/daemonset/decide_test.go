package daemonset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func testDS(mutate ...func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "agent", Namespace: "ns", UID: "ds-uid", Generation: 2,
			Annotations: map[string]string{appsv1.DeprecatedTemplateGeneration: "2"},
		},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
		},
	}
	for _, m := range mutate {
		m(ds)
	}
	return ds
}

func node(name string, mutate ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func tainted(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func labelledNode(k, v string) func(*corev1.Node) { return func(n *corev1.Node) { n.Labels[k] = v } }

// readyStatus gives a node a Ready condition.
func readyStatus(status corev1.ConditionStatus, reason, message string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: message})
	}
}

// shuttingDown is what an agent posts while its node shuts down.
var shuttingDown = readyStatus(corev1.ConditionFalse, "KubeletNotReady", NodeShuttingDownMessage)

func TestShuttingDown(t *testing.T) {
	pressure := func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Message: NodeShuttingDownMessage})
	}
	tests := []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{name: "Ready False with exactly the phrase", node: node("n", shuttingDown), want: true},
		{name: "Ready False, the phrase among other errors",
			node: node("n", readyStatus(corev1.ConditionFalse, "KubeletNotReady", "[container runtime is down, node is shutting down]")), want: true},
		{name: "Ready False, the phrase before a soft-requirement warning",
			node: node("n", readyStatus(corev1.ConditionFalse, "KubeletNotReady", "node is shutting down. WARNING: cgroup v1")), want: true},
		{name: "Ready False with another message",
			node: node("n", readyStatus(corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready")), want: false},
		{name: "Ready False, only part of the phrase",
			node: node("n", readyStatus(corev1.ConditionFalse, "KubeletNotReady", "node is shutting")), want: false},
		{name: "Ready False with the phrase but another reason",
			node: node("n", readyStatus(corev1.ConditionFalse, "SomethingElse", NodeShuttingDownMessage)), want: false},
		{name: "Ready Unknown with the phrase",
			node: node("n", readyStatus(corev1.ConditionUnknown, "NodeStatusUnknown", NodeShuttingDownMessage)), want: false},
		{name: "Ready True", node: node("n", readyStatus(corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")), want: false},
		{name: "Ready True with the phrase", node: node("n", readyStatus(corev1.ConditionTrue, "KubeletReady", NodeShuttingDownMessage)), want: false},
		{name: "no Ready condition", node: node("n"), want: false},
		{name: "the phrase on another condition only", node: node("n", pressure), want: false},
		{name: "Ready found after another condition", node: node("n", pressure, shuttingDown), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShuttingDown(tt.node); got != tt.want {
				t.Errorf("ShuttingDown = %v, want %v (conditions %+v)", got, tt.want, tt.node.Status.Conditions)
			}
		})
	}
}

func TestShouldRun(t *testing.T) {
	hostNet := func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.HostNetwork = true }
	selector := func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeSelector = map[string]string{"disk": "ssd"} }
	tolerates := func(key string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = append(ds.Spec.Template.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
		}
	}
	affinity := func(op corev1.NodeSelectorOperator, values ...string) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: op, Values: values}}},
				}},
			}}
		}
	}
	tests := []struct {
		name      string
		ds        *appsv1.DaemonSet
		node      *corev1.Node
		run, keep bool
	}{
		{name: "plain node", ds: testDS(), node: node("n"), run: true, keep: true},
		{name: "cordoned node (unschedulable taint is tolerated)", ds: testDS(),
			node: node("n", func(n *corev1.Node) { n.Spec.Unschedulable = true }, tainted(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)),
			run:  true, keep: true},
		{name: "not-ready NoExecute is tolerated", ds: testDS(), node: node("n", tainted(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)), run: true, keep: true},
		{name: "unreachable NoExecute is tolerated", ds: testDS(), node: node("n", tainted(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)), run: true, keep: true},
		{name: "not-ready NoSchedule is not tolerated", ds: testDS(), node: node("n", tainted(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "disk pressure", ds: testDS(), node: node("n", tainted(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)), run: true, keep: true},
		{name: "memory pressure", ds: testDS(), node: node("n", tainted(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)), run: true, keep: true},
		{name: "pid pressure", ds: testDS(), node: node("n", tainted(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)), run: true, keep: true},
		{name: "network unavailable, pod network", ds: testDS(), node: node("n", tainted(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "network unavailable, host network", ds: testDS(hostNet), node: node("n", tainted(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)), run: true, keep: true},
		{name: "other NoSchedule taint: no new pod, existing stays", ds: testDS(), node: node("n", tainted("dedicated", corev1.TaintEffectNoSchedule)), run: false, keep: true},
		{name: "other NoExecute taint: pod must go", ds: testDS(), node: node("n", tainted("dedicated", corev1.TaintEffectNoExecute)), run: false, keep: false},
		{name: "tolerated NoExecute taint", ds: testDS(tolerates("dedicated")), node: node("n", tainted("dedicated", corev1.TaintEffectNoExecute)), run: true, keep: true},
		{name: "PreferNoSchedule is ignored", ds: testDS(), node: node("n", tainted("soft", corev1.TaintEffectPreferNoSchedule)), run: true, keep: true},
		{name: "node selector matches", ds: testDS(selector), node: node("n", labelledNode("disk", "ssd")), run: true, keep: true},
		{name: "node selector does not match", ds: testDS(selector), node: node("n", labelledNode("disk", "hdd")), run: false, keep: false},
		{name: "affinity In matches", ds: testDS(affinity(corev1.NodeSelectorOpIn, "a", "b")), node: node("n", labelledNode("zone", "b")), run: true, keep: true},
		{name: "affinity NotIn excludes", ds: testDS(affinity(corev1.NodeSelectorOpNotIn, "b")), node: node("n", labelledNode("zone", "b")), run: false, keep: false},
		{name: "affinity Exists without the label", ds: testDS(affinity(corev1.NodeSelectorOpExists)), node: node("n"), run: false, keep: false},
		{name: "affinity Gt", ds: testDS(affinity(corev1.NodeSelectorOpGt, "3")), node: node("n", labelledNode("zone", "5")), run: true, keep: true},
		{name: "template nodeName elsewhere", ds: testDS(func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.NodeName = "other" }), node: node("n"), run: false, keep: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, keep := ShouldRun(tt.ds, tt.node)
			if run != tt.run || keep != tt.keep {
				t.Errorf("ShouldRun = (run %v, keep %v), want (%v, %v)", run, keep, tt.run, tt.keep)
			}
		})
	}
}

func TestMatchesNodeFieldsAndEmptyTerms(t *testing.T) {
	spec := func(terms ...corev1.NodeSelectorTerm) *corev1.PodSpec {
		return &corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}}
	}
	field := func(op corev1.NodeSelectorOperator, v string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: op, Values: []string{v}}}}
	}
	tests := []struct {
		name string
		spec *corev1.PodSpec
		want bool
	}{
		{name: "no terms matches nothing", spec: spec(), want: false},
		{name: "an empty term matches nothing", spec: spec(corev1.NodeSelectorTerm{}), want: false},
		{name: "terms are ORed", spec: spec(field(corev1.NodeSelectorOpIn, "x"), field(corev1.NodeSelectorOpIn, "n")), want: true},
		{name: "name In", spec: spec(field(corev1.NodeSelectorOpIn, "n")), want: true},
		{name: "name NotIn", spec: spec(field(corev1.NodeSelectorOpNotIn, "n")), want: false},
		{name: "unsupported field key", spec: spec(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.uid", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}}), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchesNode(tt.spec, node("n")); got != tt.want {
				t.Errorf("MatchesNode = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAddTolerations(t *testing.T) {
	plain := func(key string, effect corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
	}
	base := []corev1.Toleration{
		plain(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute),
		plain(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute),
		plain(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule),
		plain(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule),
		plain(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule),
		plain(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
	own := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []corev1.Toleration
	}{
		{name: "none before", want: base},
		{name: "host network adds network-unavailable", spec: corev1.PodSpec{HostNetwork: true},
			want: append(append([]corev1.Toleration{}, base...), plain(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule))},
		{name: "own tolerations stay first", spec: corev1.PodSpec{Tolerations: []corev1.Toleration{own}},
			want: append([]corev1.Toleration{own}, base...)},
		{
			name: "a matching toleration with seconds is replaced in place",
			spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{
				Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300),
			}}},
			want: append([]corev1.Toleration{plain(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), plain(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)}, base[2:]...),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := tt.spec
			AddTolerations(&spec)
			if diff := cmp.Diff(tt.want, spec.Tolerations); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPodPinsToNode(t *testing.T) {
	ds := testDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
		}}
	})
	p := NewPod(ds, "n1", "h4sh")
	want := &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}},
		}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 1}},
	}
	if diff := cmp.Diff(want, p.Spec.Affinity.NodeAffinity); diff != "" {
		t.Errorf("node affinity (-want +got):\n%s", diff)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("nodeName = %q, want empty (the scheduler binds)", p.Spec.NodeName)
	}
	wantLabels := map[string]string{"app": "agent", LabelHash: "h4sh", LabelTemplateGeneration: "2"}
	if diff := cmp.Diff(wantLabels, p.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if p.GenerateName != "agent-" || TargetNode(p) != "n1" || len(p.Spec.Tolerations) != 6 {
		t.Errorf("generateName %q, target %q, %d tolerations", p.GenerateName, TargetNode(p), len(p.Spec.Tolerations))
	}
	if ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions == nil {
		t.Error("NewPod changed the DaemonSet's template")
	}
}

// dpod is a daemon pod of testDS for node.
func dpod(name, nodeName string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", UID: types.UID(name), Labels: map[string]string{"app": "agent", LabelHash: "current"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds-uid", Controller: ptr.To(true)}},
			CreationTimestamp: metav1.NewTime(now.Add(-time.Hour)),
		},
		Spec: corev1.PodSpec{NodeName: nodeName},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func readyPod(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
}

func oldTemplate(p *corev1.Pod) { p.Labels[LabelHash] = "old"; p.Labels[LabelTemplateGeneration] = "1" }

func names(pods []*corev1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestManage(t *testing.T) {
	tests := []struct {
		name     string
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		createOn []string
		del      []string
		failed   []string
	}{
		{name: "every eligible node gets one", nodes: []*corev1.Node{node("b"), node("a"), node("c", tainted("x", corev1.TaintEffectNoSchedule))}, createOn: []string{"a", "b"}},
		{name: "a node with its pod needs nothing", nodes: []*corev1.Node{node("a")}, pods: []*corev1.Pod{dpod("p", "a")}},
		{
			name:  "an unbound pod pinned to the node counts",
			nodes: []*corev1.Node{node("a")},
			pods: []*corev1.Pod{func() *corev1.Pod {
				p := dpod("p", "")
				p.Spec.Affinity = pinToNode(nil, "a")
				return p
			}()},
		},
		{
			name: "extra pods: all but the oldest go", nodes: []*corev1.Node{node("a")},
			pods: []*corev1.Pod{dpod("young", "a", func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now) }), dpod("old", "a")},
			del:  []string{"young"},
		},
		{
			name: "a pod being deleted still holds the node", nodes: []*corev1.Node{node("a")},
			pods: []*corev1.Pod{dpod("going", "a", func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) })},
		},
		{name: "untolerated NoExecute: the pod goes", nodes: []*corev1.Node{node("a", tainted("x", corev1.TaintEffectNoExecute))}, pods: []*corev1.Pod{dpod("p", "a")}, del: []string{"p"}},
		{name: "untolerated NoSchedule: the pod stays", nodes: []*corev1.Node{node("a", tainted("x", corev1.TaintEffectNoSchedule))}, pods: []*corev1.Pod{dpod("p", "a")}},
		{name: "failed pods are deleted with back-off", nodes: []*corev1.Node{node("a")}, pods: []*corev1.Pod{dpod("p", "a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })}, failed: []string{"p"}},
		{name: "succeeded pods are deleted", nodes: []*corev1.Node{node("a")}, pods: []*corev1.Pod{dpod("p", "a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, del: []string{"p"}},
		{name: "a shutting-down node gets no pod, a Ready one does", nodes: []*corev1.Node{node("a", shuttingDown), node("b", readyStatus(corev1.ConditionTrue, "KubeletReady", ""))}, createOn: []string{"b"}},
		{name: "a shutting-down node keeps its running pod", nodes: []*corev1.Node{node("a", shuttingDown)}, pods: []*corev1.Pod{dpod("p", "a", readyPod)}},
		{
			name: "a shutting-down node still sheds surplus pods", nodes: []*corev1.Node{node("a", shuttingDown)},
			pods: []*corev1.Pod{dpod("young", "a", func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(now) }), dpod("old", "a")},
			del:  []string{"young"},
		},
		{
			name: "a failed pod on a shutting-down node is deleted with back-off, nothing replaces it", nodes: []*corev1.Node{node("a", shuttingDown)},
			pods:   []*corev1.Pod{dpod("p", "a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed; p.Status.Reason = "NodeShutdown" })},
			failed: []string{"p"},
		},
		{
			name: "a failed pod being deleted on a shutting-down node: no replacement", nodes: []*corev1.Node{node("a", shuttingDown)},
			pods: []*corev1.Pod{dpod("p", "a", func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodFailed
				p.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			})},
		},
		{name: "untolerated NoExecute on a shutting-down node: the pod goes", nodes: []*corev1.Node{node("a", shuttingDown, tainted("x", corev1.TaintEffectNoExecute))}, pods: []*corev1.Pod{dpod("p", "a")}, del: []string{"p"}},
		{name: "Ready Unknown is not shutting down", nodes: []*corev1.Node{node("a", readyStatus(corev1.ConditionUnknown, "NodeStatusUnknown", NodeShuttingDownMessage))}, createOn: []string{"a"}},
		{name: "Ready False for another reason still gets a pod", nodes: []*corev1.Node{node("a", readyStatus(corev1.ConditionFalse, "KubeletNotReady", "PLEG is not healthy"))}, createOn: []string{"a"}},
		{
			name:  "an unbound pod for a node that is gone is deleted; a bound one is left",
			nodes: []*corev1.Node{},
			pods: []*corev1.Pod{dpod("bound", "gone"), func() *corev1.Pod {
				p := dpod("unbound", "")
				p.Spec.Affinity = pinToNode(nil, "gone")
				return p
			}()},
			del: []string{"unbound"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claim := ClaimPods(testDS(), tt.pods)
			plan := Manage(testDS(), tt.nodes, claim.ByNode)
			got := []any{append([]string{}, plan.CreateOn...), names(plan.Delete), names(plan.Failed)}
			want := []any{orEmpty(tt.createOn), orEmpty(tt.del), orEmpty(tt.failed)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("create on, delete, failed (-want +got):\n%s", diff)
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestRollingUpdate(t *testing.T) {
	nodes := []*corev1.Node{node("a"), node("b"), node("c"), node("d")}
	unready := func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }
	tests := []struct {
		name     string
		mutate   func(*appsv1.DaemonSet)
		pods     []*corev1.Pod
		want     []string
		onDelete bool
	}{
		{
			name: "one available old pod at a time",
			pods: []*corev1.Pod{dpod("a1", "a", readyPod, oldTemplate), dpod("b1", "b", readyPod, oldTemplate), dpod("c1", "c", readyPod, oldTemplate), dpod("d1", "d", readyPod, oldTemplate)},
			want: []string{"a1"},
		},
		{
			name: "an unavailable new pod uses the budget",
			pods: []*corev1.Pod{dpod("a1", "a", unready), dpod("b1", "b", readyPod, oldTemplate), dpod("c1", "c", readyPod, oldTemplate), dpod("d1", "d", readyPod, oldTemplate)},
		},
		{
			name: "unavailable old pods are replaced regardless",
			pods: []*corev1.Pod{dpod("a1", "a", unready), dpod("b1", "b", unready, oldTemplate), dpod("c1", "c", readyPod, oldTemplate), dpod("d1", "d", readyPod)},
			want: []string{"b1"},
		},
		{
			name: "maxUnavailable 50% of 4 nodes",
			mutate: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("50%"))
			},
			pods: []*corev1.Pod{dpod("a1", "a", readyPod, oldTemplate), dpod("b1", "b", readyPod, oldTemplate), dpod("c1", "c", readyPod, oldTemplate), dpod("d1", "d", readyPod)},
			want: []string{"a1", "b1"},
		},
		{
			name: "all current: nothing",
			pods: []*corev1.Pod{dpod("a1", "a", readyPod), dpod("b1", "b", readyPod)},
		},
		{
			name: "OnDelete never deletes",
			mutate: func(ds *appsv1.DaemonSet) {
				ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
			},
			pods: []*corev1.Pod{dpod("a1", "a", readyPod, oldTemplate)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := testDS()
			if tt.mutate != nil {
				tt.mutate(ds)
			}
			claim := ClaimPods(ds, tt.pods)
			got := RollingUpdate(ds, nodes, claim.ByNode, "current", now)
			if diff := cmp.Diff(orEmpty(tt.want), names(got)); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	nodes := []*corev1.Node{node("a"), node("b"), node("c"), node("d", tainted("x", corev1.TaintEffectNoSchedule))}
	pods := []*corev1.Pod{
		dpod("a1", "a", readyPod),
		dpod("b1", "b", readyPod, oldTemplate),
		dpod("d1", "d"), // on a node it should not start on: misscheduled
	}
	ds := testDS()
	ds.Status.CollisionCount = ptr.To[int32](1)
	claim := ClaimPods(ds, pods)
	got, next := Status(ds, nodes, claim.ByNode, "current", now)
	want := appsv1.DaemonSetStatus{
		DesiredNumberScheduled: 3, CurrentNumberScheduled: 2, NumberReady: 2, NumberAvailable: 2,
		UpdatedNumberScheduled: 1, NumberMisscheduled: 1, NumberUnavailable: 1, ObservedGeneration: 2,
		CollisionCount: ptr.To[int32](1),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if !next.IsZero() {
		t.Errorf("next = %v, want none", next)
	}

	ds.Spec.MinReadySeconds = 7200
	got, next = Status(ds, nodes, claim.ByNode, "current", now)
	if got.NumberAvailable != 0 || !next.Equal(now.Add(time.Hour)) {
		t.Errorf("with minReadySeconds 2h: available %d, next %v; want 0 and %v", got.NumberAvailable, next, now.Add(time.Hour))
	}
}

// A shutting-down node counts as one that should run a pod: desired, and
// unavailable while it has no available pod; never misscheduled.
func TestStatusShuttingDown(t *testing.T) {
	tests := []struct {
		name string
		pods []*corev1.Pod
		want appsv1.DaemonSetStatus
	}{
		{
			name: "no pod there",
			want: appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberUnavailable: 1, ObservedGeneration: 2},
		},
		{
			name: "its Ready pod is still there",
			pods: []*corev1.Pod{dpod("a1", "a", readyPod)},
			want: appsv1.DaemonSetStatus{
				DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, NumberReady: 1, NumberAvailable: 1,
				UpdatedNumberScheduled: 1, ObservedGeneration: 2,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := testDS()
			claim := ClaimPods(ds, tt.pods)
			got, _ := Status(ds, []*corev1.Node{node("a", shuttingDown)}, claim.ByNode, "current", now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTolerates(t *testing.T) {
	taint := corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		tol  corev1.Toleration
		want bool
	}{
		{name: "exists on the key", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists}, want: true},
		{name: "empty key with exists tolerates all", tol: corev1.Toleration{Operator: corev1.TolerationOpExists}, want: true},
		{name: "equal value", tol: corev1.Toleration{Key: "k", Value: "v"}, want: true},
		{name: "other value", tol: corev1.Toleration{Key: "k", Value: "w"}, want: false},
		{name: "other effect", tol: corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, want: false},
		{name: "other key", tol: corev1.Toleration{Key: "j", Operator: corev1.TolerationOpExists}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tolerates(&tt.tol, &taint); got != tt.want {
				t.Errorf("Tolerates = %v, want %v", got, tt.want)
			}
		})
	}
}
