package pods

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func requesting(name string, requests corev1.ResourceList) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests}}}},
	}
}

func TestAdmit(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{
			"kubernetes.io/os": "linux", "zone": "a", "rank": "5",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute},
			{Key: "soft", Effect: corev1.TaintEffectNoSchedule},
		}},
	}
	tolerateDedicated := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "db", Effect: corev1.TaintEffectNoExecute}}
	alloc := list("cpu", "2", "memory", "1Gi", "pods", "3", "example.com/gpu", "1")
	admissible := func(p *corev1.Pod) *corev1.Pod {
		p.Spec.Tolerations = tolerateDedicated
		return p
	}
	withNodeSelector := func(sel map[string]string) *corev1.Pod {
		p := admissible(requesting("p", nil))
		p.Spec.NodeSelector = sel
		return p
	}
	withAffinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Pod {
		p := admissible(requesting("p", nil))
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
		return p
	}
	expr := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	withHostPort := func(ip string, port int32) *corev1.Pod {
		p := admissible(requesting("p", nil))
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: ip}}
		return p
	}
	other := func(requests corev1.ResourceList) *corev1.Pod { return admissible(requesting("other", requests)) }

	affinityMiss := &Rejection{"NodeAffinity", "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		others []*corev1.Pod
		want   *Rejection
	}{
		{name: "fits", pod: admissible(requesting("p", list("cpu", "1", "memory", "512Mi")))},
		{name: "no requests fit while pods are left", pod: admissible(requesting("p", nil)), others: []*corev1.Pod{other(nil), other(nil)}},
		{name: "pod count", pod: admissible(requesting("p", nil)), others: []*corev1.Pod{other(nil), other(nil), other(nil)},
			want: &Rejection{"OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"}},
		{name: "cpu", pod: admissible(requesting("p", list("cpu", "3"))),
			want: &Rejection{"OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"}},
		{name: "cpu counting others", pod: admissible(requesting("p", list("cpu", "600m"))), others: []*corev1.Pod{other(list("cpu", "1500m"))},
			want: &Rejection{"OutOfcpu", "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"}},
		{name: "cpu exactly full fits", pod: admissible(requesting("p", list("cpu", "500m"))), others: []*corev1.Pod{other(list("cpu", "1500m"))}},
		{name: "memory", pod: admissible(requesting("p", list("memory", "2Gi"))),
			want: &Rejection{"OutOfmemory", "Node didn't have enough resource: memory, requested: 2147483648, used: 0, capacity: 1073741824"}},
		{name: "ephemeral storage the node lacks", pod: admissible(requesting("p", list("ephemeral-storage", "1Gi"))),
			want: &Rejection{"OutOfephemeral-storage", "Node didn't have enough resource: ephemeral-storage, requested: 1073741824, used: 0, capacity: 0"}},
		{name: "extended resource short", pod: admissible(requesting("p", list("example.com/gpu", "2"))),
			want: &Rejection{"OutOfexample.com/gpu", "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1"}},
		{name: "extended resource the node does not list is ignored", pod: admissible(requesting("p", list("other.io/fpga", "4")))},
		{name: "hugepages the node lacks", pod: admissible(requesting("p", list("hugepages-2Mi", "2Mi"))),
			want: &Rejection{"OutOfhugepages-2Mi", "Node didn't have enough resource: hugepages-2Mi, requested: 2097152, used: 0, capacity: 0"}},
		{name: "pod count is checked before cpu", pod: admissible(requesting("p", list("cpu", "3"))), others: []*corev1.Pod{other(nil), other(nil), other(nil)},
			want: &Rejection{"OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"}},
		{name: "resources are checked before affinity", pod: func() *corev1.Pod {
			p := withNodeSelector(map[string]string{"zone": "b"})
			p.Spec.Containers[0].Resources.Requests = list("cpu", "3")
			return p
		}(), want: &Rejection{"OutOfcpu", "Node didn't have enough resource: cpu, requested: 3000, used: 0, capacity: 2000"}},
		{name: "node selector matches", pod: withNodeSelector(map[string]string{"zone": "a"})},
		{name: "node selector value differs", pod: withNodeSelector(map[string]string{"zone": "b"}), want: affinityMiss},
		{name: "node selector key missing", pod: withNodeSelector(map[string]string{"disk": "ssd"}), want: affinityMiss},
		{name: "affinity In", pod: withAffinity(expr("zone", corev1.NodeSelectorOpIn, "a", "b"))},
		{name: "affinity NotIn", pod: withAffinity(expr("zone", corev1.NodeSelectorOpNotIn, "a")), want: affinityMiss},
		{name: "affinity terms are ORed", pod: withAffinity(expr("zone", corev1.NodeSelectorOpIn, "b"), expr("disk", corev1.NodeSelectorOpDoesNotExist))},
		{name: "affinity Gt", pod: withAffinity(expr("rank", corev1.NodeSelectorOpGt, "4"))},
		{name: "affinity Lt", pod: withAffinity(expr("rank", corev1.NodeSelectorOpLt, "5")), want: affinityMiss},
		{name: "affinity matchFields name", pod: withAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}}})},
		{name: "affinity matchFields other name", pod: withAffinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-2"}}}}), want: affinityMiss},
		{name: "affinity with no terms matches nothing", pod: withAffinity(), want: affinityMiss},
		{name: "affinity empty term matches nothing", pod: withAffinity(corev1.NodeSelectorTerm{}), want: affinityMiss},
		{name: "untolerated NoExecute taint", pod: requesting("p", nil),
			want: &Rejection{"TaintToleration", "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"}},
		{name: "NoExecute tolerated by Exists", pod: func() *corev1.Pod {
			p := requesting("p", nil)
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			return p
		}()},
		{name: "host port free", pod: withHostPort("", 8080), others: []*corev1.Pod{withHostPort("", 9090)}},
		{name: "host port taken", pod: withHostPort("", 8080), others: []*corev1.Pod{withHostPort("10.0.0.1", 8080)},
			want: &Rejection{"NodePorts", "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"}},
		{name: "host port on different IPs", pod: withHostPort("10.0.0.2", 8080), others: []*corev1.Pod{withHostPort("10.0.0.1", 8080)}},
		{name: "os label of another OS", pod: func() *corev1.Pod {
			p := admissible(requesting("p", nil))
			p.Labels = map[string]string{"kubernetes.io/os": "windows"}
			return p
		}(), want: &Rejection{"PodOSSelectorNodeLabelDoesNotMatch", "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}},
		{name: "os field of another OS", pod: func() *corev1.Pod {
			p := admissible(requesting("p", nil))
			p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
			return p
		}(), want: &Rejection{"PodOSNotSupported", "Failed to admit pod as the OS field doesn't match node OS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Admit(tt.pod, node, alloc, tt.others)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequests(t *testing.T) {
	c := func(cpu string, sidecar bool) corev1.Container {
		out := corev1.Container{Resources: corev1.ResourceRequirements{Requests: list("cpu", cpu)}}
		if sidecar {
			out.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		return out
	}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want map[corev1.ResourceName]int64
	}{
		{"sum of containers", corev1.PodSpec{Containers: []corev1.Container{c("100m", false), c("200m", false)}}, map[corev1.ResourceName]int64{"cpu": 300}},
		{"largest init container wins", corev1.PodSpec{InitContainers: []corev1.Container{c("1", false)}, Containers: []corev1.Container{c("200m", false)}}, map[corev1.ResourceName]int64{"cpu": 1000}},
		{"sidecars add to both", corev1.PodSpec{
			InitContainers: []corev1.Container{c("100m", true), c("500m", false)},
			Containers:     []corev1.Container{c("200m", false)},
		}, map[corev1.ResourceName]int64{"cpu": 600}},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{c("100m", false)}, Overhead: list("cpu", "50m", "memory", "1Ki")}, map[corev1.ResourceName]int64{"cpu": 150, "memory": 1024}},
		{"pod-level requests replace", corev1.PodSpec{Containers: []corev1.Container{c("100m", false)}, Resources: &corev1.ResourceRequirements{Requests: list("cpu", "1")}}, map[corev1.ResourceName]int64{"cpu": 1000}},
		{"nothing", corev1.PodSpec{Containers: []corev1.Container{{}}}, map[corev1.ResourceName]int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Requests(&corev1.Pod{Spec: tt.spec})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostIPs(t *testing.T) {
	addr := func(t corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: t, Address: a}
	}
	tests := []struct {
		name  string
		addrs []corev1.NodeAddress
		want  []string
	}{
		{"none", nil, nil},
		{"internal first", []corev1.NodeAddress{addr(corev1.NodeHostName, "h"), addr(corev1.NodeExternalIP, "1.2.3.4"), addr(corev1.NodeInternalIP, "10.0.0.1")}, []string{"10.0.0.1"}},
		{"external without internal", []corev1.NodeAddress{addr(corev1.NodeExternalIP, "1.2.3.4")}, []string{"1.2.3.4"}},
		{"dual stack", []corev1.NodeAddress{addr(corev1.NodeInternalIP, "10.0.0.1"), addr(corev1.NodeInternalIP, "10.0.0.2"), addr(corev1.NodeInternalIP, "fd00::1")}, []string{"10.0.0.1", "fd00::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HostIPs(&corev1.Node{Status: corev1.NodeStatus{Addresses: tt.addrs}})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
