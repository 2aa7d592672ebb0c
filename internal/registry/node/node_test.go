package node

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream messages produced by apimachinery helpers, spelled out so a
// change in which helper runs shows up here.
const (
	msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	msgLabelValue    = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

// flat renders errors as "path|type|detail" for comparison.
func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func decodeNode(t *testing.T, s string) *v1.Node {
	t.Helper()
	n := &v1.Node{}
	if err := json.Unmarshal([]byte(s), n); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return n
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// goodNode is a fully populated node that passes every rule.
func goodNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}},
		Spec: v1.NodeSpec{
			PodCIDR:    "10.244.1.0/24",
			PodCIDRs:   []string{"10.244.1.0/24", "fd00:10:244:1::/64"},
			ProviderID: "kind://docker/kind/node-1",
			Taints: []v1.Taint{
				{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoExecute},
				{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectPreferNoSchedule},
			},
		},
		Status: v1.NodeStatus{
			Capacity: v1.ResourceList{
				v1.ResourceCPU: qty("4"), v1.ResourceMemory: qty("8Gi"), v1.ResourcePods: qty("110"),
				v1.ResourceEphemeralStorage: qty("100Gi"), "hugepages-2Mi": qty("0"), "example.com/gpu": qty("2"),
			},
			Allocatable: v1.ResourceList{v1.ResourceCPU: qty("3500m"), v1.ResourcePods: qty("110")},
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: "10.0.0.1"},
				{Type: v1.NodeHostName, Address: "node-1"},
			},
		},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(n *v1.Node)
		json   string // when set, decoded instead of goodNode
		want   []string
	}{
		{
			name: "documented example node",
			json: `{"kind":"Node","apiVersion":"v1","metadata":{"name":"10.240.79.157","labels":{"name":"my-first-k8s-node"}}}`,
		},
		{name: "fully populated node", mutate: func(n *v1.Node) {}},
		{
			name:   "taint without effect",
			mutate: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "a"}} },
			want:   []string{"metadata.taints[0].effect|Required value|"},
		},
		{
			name:   "taint with unknown effect",
			mutate: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "a", Effect: "NoScheduleNoAdmit"}} },
			want:   []string{`metadata.taints[0].effect|Unsupported value|supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
		},
		{
			name:   "taint key not a qualified name",
			mutate: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Key: "bad key!", Effect: v1.TaintEffectNoSchedule}} },
			want:   []string{"metadata.taints[0].key|Invalid value|" + msgQualifiedName},
		},
		{
			name:   "empty taint key",
			mutate: func(n *v1.Node) { n.Spec.Taints = []v1.Taint{{Effect: v1.TaintEffectNoSchedule}} },
			want: []string{
				"metadata.taints[0].key|Invalid value|name part must be non-empty",
				"metadata.taints[0].key|Invalid value|" + msgQualifiedName,
			},
		},
		{
			name: "taint value not a label value",
			mutate: func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{{Key: "a", Value: "bad value!", Effect: v1.TaintEffectNoSchedule}}
			},
			want: []string{"metadata.taints[0].value|Invalid value|" + msgLabelValue},
		},
		{
			name: "duplicate key and effect",
			mutate: func(n *v1.Node) {
				n.Spec.Taints = []v1.Taint{
					{Key: "a", Value: "1", Effect: v1.TaintEffectNoSchedule},
					{Key: "a", Value: "2", Effect: v1.TaintEffectNoExecute},
					{Key: "a", Value: "3", Effect: v1.TaintEffectNoSchedule},
				}
			},
			want: []string{"metadata.taints[2]|Duplicate value|taints must be unique by key and effect pair"},
		},
		{
			name:   "single IPv6 pod CIDR",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"fd00::/64"} },
		},
		{
			name:   "pod CIDR that does not parse",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0"} },
			want:   []string{"spec.podCIDRs[0]|Invalid value|must be valid CIDR"},
		},
		{
			name:   "two IPv4 pod CIDRs",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.245.1.0/24"} },
			want:   []string{"spec.podCIDRs|Invalid value|may specify no more than one CIDR for each IP family"},
		},
		{
			name:   "three pod CIDRs",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00::/64", "10.245.1.0/24"} },
			want:   []string{"spec.podCIDRs|Invalid value|may specify no more than one CIDR for each IP family"},
		},
		{
			name:   "repeated pod CIDR",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.1.0/24"} },
			want: []string{
				"spec.podCIDRs|Invalid value|may specify no more than one CIDR for each IP family",
				"spec.podCIDRs[1]|Duplicate value|",
			},
		},
		{
			name:   "bad CIDR in a pair",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"nope", "fd00::/64"} },
			want: []string{
				"spec.podCIDRs[0]|Invalid value|must be valid CIDR",
				`spec.podCIDRs|Internal error|invalid PodCIDRs. failed to check with dual stack with error:invalid CIDR[0]: <nil> (invalid CIDR address: nope)`,
				"spec.podCIDRs|Invalid value|may specify no more than one CIDR for each IP family",
			},
		},
		{
			name:   "negative capacity",
			mutate: func(n *v1.Node) { n.Status.Capacity[v1.ResourceCPU] = qty("-1") },
			want:   []string{"status.capacity.cpu|Invalid value|must be greater than or equal to 0"},
		},
		{
			name:   "negative allocatable",
			mutate: func(n *v1.Node) { n.Status.Allocatable[v1.ResourceMemory] = qty("-1Ki") },
			want:   []string{"status.allocatable.memory|Invalid value|must be greater than or equal to 0"},
		},
		{
			name:   "fractional pods",
			mutate: func(n *v1.Node) { n.Status.Capacity[v1.ResourcePods] = qty("1500m") },
			want:   []string{"status.capacity.pods|Invalid value|must be an integer"},
		},
		{
			name:   "fractional extended resource",
			mutate: func(n *v1.Node) { n.Status.Allocatable["example.com/gpu"] = qty("500m") },
			want:   []string{"status.allocatable.example.com/gpu|Invalid value|must be an integer"},
		},
		{
			name:   "fractional cpu is fine",
			mutate: func(n *v1.Node) { n.Status.Capacity[v1.ResourceCPU] = qty("1500m") },
		},
		{
			name:   "unprefixed resource name that is not standard",
			mutate: func(n *v1.Node) { n.Status.Capacity["gpus"] = qty("1") },
			want:   []string{"status.capacity.gpus|Invalid value|must be a standard resource type or fully qualified"},
		},
		{
			name:   "resource name that is not a qualified name",
			mutate: func(n *v1.Node) { n.Status.Capacity["example.com/bad gpu"] = qty("1") },
			want:   []string{"status.capacity.example.com/bad gpu|Invalid value|" + msgQualifiedName},
		},
		{
			name: "errors come out in resource name order",
			mutate: func(n *v1.Node) {
				n.Status.Capacity[v1.ResourceMemory] = qty("-1")
				n.Status.Capacity[v1.ResourceCPU] = qty("-1")
			},
			want: []string{
				"status.capacity.cpu|Invalid value|must be greater than or equal to 0",
				"status.capacity.memory|Invalid value|must be greater than or equal to 0",
			},
		},
		{
			name: "taints annotation that is not JSON",
			mutate: func(n *v1.Node) {
				n.Annotations = map[string]string{v1.TaintsAnnotationKey: "{"}
			},
			want: []string{"metadata.annotations|Invalid value|unexpected end of JSON input"},
		},
		{
			name: "taints annotation with a bad taint",
			mutate: func(n *v1.Node) {
				n.Annotations = map[string]string{v1.TaintsAnnotationKey: `[{"key":"a","effect":"Bogus"}]`}
			},
			want: []string{`metadata.annotations.scheduler.alpha.kubernetes.io/taints[0].effect|Unsupported value|supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
		},
		{
			name: "preferAvoidPods annotation that is not JSON",
			mutate: func(n *v1.Node) {
				n.Annotations = map[string]string{v1.PreferAvoidPodsAnnotationKey: "x"}
			},
			want: []string{"metadata.annotations.AvoidPods|Invalid value|invalid character 'x' looking for beginning of value"},
		},
		{
			name: "preferAvoidPods entries without a controller",
			mutate: func(n *v1.Node) {
				n.Annotations = map[string]string{v1.PreferAvoidPodsAnnotationKey: `{"preferAvoidPods":[
					{"podSignature":{}},
					{"podSignature":{"podController":{"kind":"ReplicaSet","name":"a","uid":"u","apiVersion":"apps/v1","controller":false}}},
					{"podSignature":{"podController":{"kind":"ReplicaSet","name":"a","uid":"u","apiVersion":"apps/v1"}}},
					{"podSignature":{"podController":{"kind":"ReplicaSet","name":"a","uid":"u","apiVersion":"apps/v1","controller":true}}}]}`}
			},
			want: []string{
				"metadata.annotations.scheduler.alpha.kubernetes.io/preferAvoidPods[0].PodSignature|Required value|",
				"metadata.annotations.scheduler.alpha.kubernetes.io/preferAvoidPods[1].PodSignature.PodController.Controller|Invalid value|must point to a controller",
				"metadata.annotations.scheduler.alpha.kubernetes.io/preferAvoidPods[2].PodSignature.PodController.Controller|Invalid value|must point to a controller",
			},
		},
		{
			name: "duplicate addresses are accepted on create",
			mutate: func(n *v1.Node) {
				n.Status.Addresses = append(n.Status.Addresses, n.Status.Addresses[0])
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n *v1.Node
			if tc.json != "" {
				n = decodeNode(t, tc.json)
			} else {
				n = goodNode()
				tc.mutate(n)
			}
			if diff := cmp.Diff(tc.want, flat(Validate(n))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(n *v1.Node)
		mutate func(n *v1.Node)
		want   []string
	}{
		{
			name:   "cordon and taint changes are free",
			mutate: func(n *v1.Node) { n.Spec.Unschedulable = true; n.Spec.Taints = nil },
		},
		{
			name:   "pod CIDRs assigned for the first time",
			old:    func(n *v1.Node) { n.Spec.PodCIDR = ""; n.Spec.PodCIDRs = nil },
			mutate: func(n *v1.Node) {},
		},
		{
			name:   "pod CIDR changed",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.2.0/24", "fd00:10:244:1::/64"} },
			want:   []string{`spec.podCIDRs|Forbidden|node updates may not change podCIDR except from "" to valid`},
		},
		{
			name:   "both pod CIDRs changed report once each",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = []string{"10.244.2.0/24", "fd00:10:244:2::/64"} },
			want: []string{
				`spec.podCIDRs|Forbidden|node updates may not change podCIDR except from "" to valid`,
				`spec.podCIDRs|Forbidden|node updates may not change podCIDR except from "" to valid`,
			},
		},
		{
			name:   "pod CIDRs removed",
			mutate: func(n *v1.Node) { n.Spec.PodCIDRs = nil },
			want:   []string{`spec.podCIDRs|Forbidden|node updates may not change podCIDR except from "" to valid`},
		},
		{
			name:   "provider ID set for the first time",
			old:    func(n *v1.Node) { n.Spec.ProviderID = "" },
			mutate: func(n *v1.Node) {},
		},
		{
			name:   "provider ID changed",
			mutate: func(n *v1.Node) { n.Spec.ProviderID = "aws:///i-123" },
			want:   []string{`spec.providerID|Forbidden|node updates may not change providerID except from "" to valid`},
		},
		{
			name:   "provider ID cleared",
			mutate: func(n *v1.Node) { n.Spec.ProviderID = "" },
			want:   []string{`spec.providerID|Forbidden|node updates may not change providerID except from "" to valid`},
		},
		{
			name:   "external ID changed",
			mutate: func(n *v1.Node) { n.Spec.DoNotUseExternalID = "x" },
			want:   []string{"spec.externalID|Forbidden|may not be updated"},
		},
		{
			name: "duplicate address",
			mutate: func(n *v1.Node) {
				n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeExternalIP, Address: "10.0.0.1"}, n.Status.Addresses[1])
			},
			want: []string{"status.addresses[3]|Duplicate value|"},
		},
		{
			name:   "create rules still apply",
			mutate: func(n *v1.Node) { n.Spec.Taints[0].Effect = "" },
			want:   []string{"metadata.taints[0].effect|Required value|"},
		},
		{
			name:   "empty config source",
			mutate: func(n *v1.Node) { n.Spec.ConfigSource = &v1.NodeConfigSource{} },
			want:   []string{"spec.configSource|Invalid value|exactly one reference subfield must be non-nil"},
		},
		{
			name: "config source with server-set fields and nothing named",
			mutate: func(n *v1.Node) {
				n.Spec.ConfigSource = &v1.NodeConfigSource{ConfigMap: &v1.ConfigMapNodeConfigSource{UID: "u", ResourceVersion: "1"}}
			},
			want: []string{
				"spec.configSource.configMap.uid|Forbidden|uid must not be set in spec",
				"spec.configSource.configMap.resourceVersion|Forbidden|resourceVersion must not be set in spec",
				"spec.configSource.configMap.namespace|Required value|namespace must be set",
				"spec.configSource.configMap.name|Required value|name must be set",
				"spec.configSource.configMap.kubeletConfigKey|Required value|kubeletConfigKey must be set",
			},
		},
		{
			name: "well-formed config source",
			mutate: func(n *v1.Node) {
				n.Spec.ConfigSource = &v1.NodeConfigSource{ConfigMap: &v1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cfg", KubeletConfigKey: "kubelet"}}
			},
		},
		{
			name: "config status without uid",
			mutate: func(n *v1.Node) {
				n.Status.Config = &v1.NodeConfigStatus{
					Active:   &v1.NodeConfigSource{ConfigMap: &v1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cfg", KubeletConfigKey: "kubelet"}},
					Assigned: &v1.NodeConfigSource{},
				}
			},
			want: []string{
				"status.config.assigned|Invalid value|exactly one reference subfield must be non-nil",
				"status.config.active.configMap.uid|Required value|uid must be set in status",
				"status.config.active.configMap.resourceVersion|Required value|resourceVersion must be set in status",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := goodNode()
			if tc.old != nil {
				tc.old(old)
			}
			n := goodNode()
			tc.mutate(n)
			if diff := cmp.Diff(tc.want, flat(ValidateUpdate(n, old))); diff != "" {
				t.Errorf("ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	old := goodNode()
	n := goodNode()
	n.Status.Addresses = append(n.Status.Addresses, n.Status.Addresses[0])
	n.Status.Capacity[v1.ResourcePods] = qty("-1")
	want := []string{
		"status.capacity.pods|Invalid value|must be greater than or equal to 0",
		"status.addresses[2]|Duplicate value|",
	}
	if diff := cmp.Diff(want, flat(ValidateStatusUpdate(n, old))); diff != "" {
		t.Errorf("ValidateStatusUpdate (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name               string
		podCIDR            string
		podCIDRs           []string
		wantCIDR           string
		wantCIDRs          []string
		capacity, alloc    v1.ResourceList
		wantAlloc          v1.ResourceList
		allocShouldBeEmpty bool
	}{
		{name: "nothing set"},
		{name: "podCIDR only", podCIDR: "10.0.0.0/24", wantCIDR: "10.0.0.0/24", wantCIDRs: []string{"10.0.0.0/24"}},
		{name: "podCIDRs only", podCIDRs: []string{"10.0.0.0/24", "fd00::/64"}, wantCIDR: "10.0.0.0/24", wantCIDRs: []string{"10.0.0.0/24", "fd00::/64"}},
		{name: "both agree", podCIDR: "10.0.0.0/24", podCIDRs: []string{"10.0.0.0/24", "fd00::/64"}, wantCIDR: "10.0.0.0/24", wantCIDRs: []string{"10.0.0.0/24", "fd00::/64"}},
		{name: "podCIDR wins when they differ", podCIDR: "10.1.0.0/24", podCIDRs: []string{"10.0.0.0/24", "fd00::/64"}, wantCIDR: "10.1.0.0/24", wantCIDRs: []string{"10.1.0.0/24"}},
		{
			name:      "allocatable copied from capacity",
			capacity:  v1.ResourceList{v1.ResourceCPU: qty("2")},
			wantAlloc: v1.ResourceList{v1.ResourceCPU: qty("2")},
		},
		{
			name:      "allocatable kept when present",
			capacity:  v1.ResourceList{v1.ResourceCPU: qty("2")},
			alloc:     v1.ResourceList{v1.ResourceCPU: qty("1")},
			wantAlloc: v1.ResourceList{v1.ResourceCPU: qty("1")},
		},
		{
			name:      "empty allocatable is not defaulted",
			capacity:  v1.ResourceList{v1.ResourceCPU: qty("2")},
			alloc:     v1.ResourceList{},
			wantAlloc: v1.ResourceList{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := &v1.Node{Spec: v1.NodeSpec{PodCIDR: tc.podCIDR, PodCIDRs: tc.podCIDRs}, Status: v1.NodeStatus{Capacity: tc.capacity, Allocatable: tc.alloc}}
			Default(n)
			if n.Spec.PodCIDR != tc.wantCIDR {
				t.Errorf("podCIDR = %q, want %q", n.Spec.PodCIDR, tc.wantCIDR)
			}
			if diff := cmp.Diff(tc.wantCIDRs, n.Spec.PodCIDRs); diff != "" {
				t.Errorf("podCIDRs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAlloc, n.Status.Allocatable, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("allocatable (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultAllocatableIsACopy(t *testing.T) {
	n := &v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{v1.ResourceCPU: qty("2")}}}
	Default(n)
	n.Status.Allocatable[v1.ResourceCPU] = qty("1")
	if got := n.Status.Capacity[v1.ResourceCPU]; got.Cmp(qty("2")) != 0 {
		t.Errorf("capacity changed with allocatable: %s", got.String())
	}
}

func TestPrepare(t *testing.T) {
	source := &v1.NodeConfigSource{ConfigMap: &v1.ConfigMapNodeConfigSource{Namespace: "kube-system", Name: "cfg", KubeletConfigKey: "k"}}

	t.Run("create drops deprecated config and keeps status", func(t *testing.T) {
		n := goodNode()
		n.Spec.ConfigSource = source.DeepCopy()
		n.Status.Config = &v1.NodeConfigStatus{Error: "x"}
		prepareForCreate(n)
		if n.Spec.ConfigSource != nil || n.Status.Config != nil {
			t.Errorf("config kept: %v %v", n.Spec.ConfigSource, n.Status.Config)
		}
		if len(n.Status.Addresses) != 2 {
			t.Errorf("status lost on create: %+v", n.Status)
		}
	})

	t.Run("update keeps old status and refuses new configSource", func(t *testing.T) {
		old := goodNode()
		n := goodNode()
		n.Status.Addresses = nil
		n.Spec.ConfigSource = source.DeepCopy()
		n.Spec.Unschedulable = true
		prepareForUpdate(n, old)
		if diff := cmp.Diff(old.Status, n.Status); diff != "" {
			t.Errorf("status not copied from old (-old +new):\n%s", diff)
		}
		if n.Spec.ConfigSource != nil {
			t.Errorf("configSource kept although old had none")
		}
		if !n.Spec.Unschedulable {
			t.Errorf("spec change lost")
		}
		n.Status.Addresses[0].Address = "changed"
		if old.Status.Addresses[0].Address == "changed" {
			t.Errorf("new status aliases old")
		}
	})

	t.Run("update keeps configSource already in use", func(t *testing.T) {
		old := goodNode()
		old.Spec.ConfigSource = source.DeepCopy()
		n := goodNode()
		n.Spec.ConfigSource = source.DeepCopy()
		prepareForUpdate(n, old)
		if n.Spec.ConfigSource == nil {
			t.Errorf("configSource in use was dropped")
		}
	})

	t.Run("status update keeps old spec", func(t *testing.T) {
		old := goodNode()
		n := goodNode()
		n.Spec.Unschedulable = true
		n.Spec.Taints = nil
		n.Status.Config = &v1.NodeConfigStatus{Error: "x"}
		n.Status.Addresses = nil
		prepareForStatusUpdate(n, old)
		if diff := cmp.Diff(old.Spec, n.Spec); diff != "" {
			t.Errorf("spec not copied from old (-old +new):\n%s", diff)
		}
		if n.Status.Config != nil {
			t.Errorf("status.config kept although old had none")
		}
		if n.Status.Addresses != nil {
			t.Errorf("status change lost")
		}
	})
}

func TestTable(t *testing.T) {
	now := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	ready := func(s v1.ConditionStatus) []v1.NodeCondition {
		return []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse}, {Type: v1.NodeReady, Status: s}}
	}
	tests := []struct {
		name string
		node v1.Node
		want []interface{}
	}{
		{
			name: "bare node",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			want: []interface{}{"a", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "ready worker with everything reported",
			node: v1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "w1", CreationTimestamp: metav1.NewTime(now.Add(-5*time.Minute - 3*time.Second))},
				Status: v1.NodeStatus{
					Conditions: ready(v1.ConditionTrue),
					Addresses: []v1.NodeAddress{
						{Type: v1.NodeHostName, Address: "w1"},
						{Type: v1.NodeExternalIP, Address: "203.0.113.7"},
						{Type: v1.NodeInternalIP, Address: "10.0.0.7"},
						{Type: v1.NodeInternalIP, Address: "10.0.0.8"},
					},
					NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.33.1", OSImage: "Debian GNU/Linux 12 (bookworm)", KernelVersion: "6.1.0", ContainerRuntimeVersion: "containerd://1.7.0"},
				},
			},
			want: []interface{}{"w1", "Ready", "<none>", "5m3s", "v1.33.1", "10.0.0.7", "203.0.113.7", "Debian GNU/Linux 12 (bookworm)", "6.1.0", "containerd://1.7.0"},
		},
		{
			name: "not ready when False",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", CreationTimestamp: metav1.NewTime(now.Add(-72 * time.Hour))}, Status: v1.NodeStatus{Conditions: ready(v1.ConditionFalse)}},
			want: []interface{}{"a", "NotReady", "<none>", "3d", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "not ready when Unknown",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: v1.NodeStatus{Conditions: ready(v1.ConditionUnknown)}},
			want: []interface{}{"a", "NotReady", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "cordoned ready node",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Conditions: ready(v1.ConditionTrue)}},
			want: []interface{}{"a", "Ready,SchedulingDisabled", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "cordoned dead node",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{Unschedulable: true}, Status: v1.NodeStatus{Conditions: ready(v1.ConditionUnknown)}},
			want: []interface{}{"a", "NotReady,SchedulingDisabled", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "cordoned node without conditions",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1.NodeSpec{Unschedulable: true}},
			want: []interface{}{"a", "Unknown,SchedulingDisabled", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "roles sorted and deduplicated",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{
				"node-role.kubernetes.io/worker":        "",
				"node-role.kubernetes.io/control-plane": "true",
				"node-role.kubernetes.io/":              "",
				"kubernetes.io/role":                    "worker",
				"node-role.kubernetes.io/etcd":          "",
				"other":                                 "x",
			}}},
			want: []interface{}{"a", "Unknown", "control-plane,etcd,worker", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "legacy role label only",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/role": "master"}}},
			want: []interface{}{"a", "Unknown", "master", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
		{
			name: "empty legacy role label is no role",
			node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/role": ""}}},
			want: []interface{}{"a", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"},
		},
	}
	kind := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := kind.Row(&tc.node, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Row (-want +got):\n%s", diff)
			}
			if len(got) != len(kind.Columns) {
				t.Errorf("%d cells for %d columns", len(got), len(kind.Columns))
			}
		})
	}
}

func TestColumns(t *testing.T) {
	type col struct {
		Name, Type, Format string
		Priority           int32
	}
	var got []col
	for _, c := range Kind().Columns {
		if c.Description == "" && c.Name != "Status" && c.Name != "Roles" {
			t.Errorf("column %s has no description", c.Name)
		}
		got = append(got, col{c.Name, c.Type, c.Format, c.Priority})
	}
	want := []col{
		{"Name", "string", "name", 0}, {"Status", "string", "", 0}, {"Roles", "string", "", 0},
		{"Age", "string", "", 0}, {"Version", "string", "", 0},
		{"Internal-IP", "string", "", 1}, {"External-IP", "string", "", 1}, {"OS-Image", "string", "", 1},
		{"Kernel-Version", "string", "", 1}, {"Container-Runtime", "string", "", 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}

func TestFields(t *testing.T) {
	n := goodNode()
	if diff := cmp.Diff(fields.Set{"metadata.name": "node-1", "spec.unschedulable": "false"}, Kind().Fields(n)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	n.Spec.Unschedulable = true
	if got := Kind().Fields(n)["spec.unschedulable"]; got != "true" {
		t.Errorf("spec.unschedulable = %q, want true", got)
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.Resource != "nodes" || k.Kind != "Node" || k.ListKind != "NodeList" || k.SingularName != "node" ||
		k.Namespaced || !k.HasStatus || k.Status == nil || k.GroupVersion.String() != "v1" {
		t.Errorf("unexpected kind data: %+v", k)
	}
	if diff := cmp.Diff([]string{"no"}, k.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	if _, ok := k.New().(*v1.Node); !ok {
		t.Errorf("New() = %T", k.New())
	}
	if _, ok := k.NewList().(*v1.NodeList); !ok {
		t.Errorf("NewList() = %T", k.NewList())
	}
}

// FuzzValidateNode feeds arbitrary JSON through every Kind function; none
// may panic.
func FuzzValidateNode(f *testing.F) {
	f.Add([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"10.240.79.157","labels":{"name":"my-first-k8s-node"}}}`))
	seed, _ := json.Marshal(goodNode())
	f.Add(seed)
	f.Add([]byte(`{"metadata":{"annotations":{"scheduler.alpha.kubernetes.io/preferAvoidPods":"{\"preferAvoidPods\":[{\"podSignature\":{\"podController\":{}}}]}","scheduler.alpha.kubernetes.io/taints":"[{}]"}},"spec":{"podCIDR":"x","podCIDRs":["::/0","0.0.0.0/0","zz"],"configSource":{}},"status":{"capacity":{"":"-1m"},"config":{"active":{"configMap":{}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := &v1.Node{}
		if err := json.Unmarshal(data, n); err != nil {
			return
		}
		k := Kind()
		old := n.DeepCopy()
		k.Default(n)
		k.PrepareForCreate(n)
		_ = k.Validate(n)
		upd := n.DeepCopy()
		k.PrepareForUpdate(upd, old)
		_ = k.ValidateUpdate(upd, old)
		st := n.DeepCopy()
		k.Status.PrepareForUpdate(st, old)
		_ = k.Status.ValidateUpdate(st, old)
		_ = k.ValidateUpdate(old, &v1.Node{})
		_ = k.Row(n, time.Now())
		_ = k.Fields(n)
		var _ runtime.Object = n
	})
}
