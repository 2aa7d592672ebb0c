package cloudnode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/cloudprovider"
)

var created = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

type nodeOpt func(*corev1.Node)

func ready(s corev1.ConditionStatus) nodeOpt {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: s})
	}
}

func taint(key string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect})
	}
}

func providerID(id string) nodeOpt { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

func node(opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(created)}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func TestLifecycleStep(t *testing.T) {
	const (
		shutdownKey = cloudprovider.TaintShutdown
		uninitKey   = cloudprovider.TaintUninitialized
		noSched     = corev1.TaintEffectNoSchedule
	)
	cases := []struct {
		name string
		node *corev1.Node
		age  time.Duration
		want step
	}{
		{name: "ready", node: node(ready(corev1.ConditionTrue)), want: stepNone},
		{name: "ready with the shutdown taint", node: node(ready(corev1.ConditionTrue), taint(shutdownKey, noSched)), want: stepUntaint},
		{name: "ready with a shutdown taint of another effect", node: node(ready(corev1.ConditionTrue), taint(shutdownKey, corev1.TaintEffectNoExecute)), want: stepNone},
		{name: "not ready", node: node(ready(corev1.ConditionFalse)), want: stepAskCloud},
		{name: "unknown", node: node(ready(corev1.ConditionUnknown)), want: stepAskCloud},
		{name: "no Ready condition counts as unknown", node: node(), want: stepAskCloud},
		{name: "not ready and already tainted: ask again", node: node(ready(corev1.ConditionFalse), taint(shutdownKey, noSched)), want: stepAskCloud},
		{name: "uninitialized, no provider ID, just under a minute", node: node(taint(uninitKey, noSched)), age: UninitializedGrace - time.Nanosecond, want: stepWait},
		{name: "uninitialized, no provider ID, exactly a minute", node: node(taint(uninitKey, noSched)), age: UninitializedGrace, want: stepAskCloud},
		{name: "uninitialized with a provider ID", node: node(taint(uninitKey, noSched), providerID("x://1")), want: stepAskCloud},
		{name: "uninitialized but ready", node: node(ready(corev1.ConditionTrue), taint(uninitKey, noSched)), want: stepNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lifecycleStep(tc.node, created.Add(tc.age)); got != tc.want {
				t.Errorf("lifecycleStep = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	cases := []struct {
		name                            string
		exists, shutdown, shutdownKnown bool
		want                            cloudVerdict
	}{
		{name: "gone", exists: false, want: verdictDelete},
		{name: "gone, whatever shutdown says", exists: false, shutdown: true, shutdownKnown: true, want: verdictDelete},
		{name: "running", exists: true, shutdownKnown: true, want: verdictKeep},
		{name: "shut down", exists: true, shutdown: true, shutdownKnown: true, want: verdictTaint},
		{name: "shutdown unknown counts as running", exists: true, shutdown: true, shutdownKnown: false, want: verdictKeep},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdict(tc.exists, tc.shutdown, tc.shutdownKnown); got != tc.want {
				t.Errorf("verdict = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTaintHelpers(t *testing.T) {
	other := corev1.Taint{Key: "example.com/x", Effect: corev1.TaintEffectNoExecute}
	taints := []corev1.Taint{other}
	added := withTaint(taints, shutdownTaint)
	if diff := cmp.Diff([]corev1.Taint{other, shutdownTaint}, added); diff != "" {
		t.Errorf("withTaint (-want +got):\n%s", diff)
	}
	if len(taints) != 1 {
		t.Errorf("withTaint changed its argument: %v", taints)
	}
	if diff := cmp.Diff(added, withTaint(added, corev1.Taint{Key: shutdownTaint.Key, Effect: corev1.TaintEffectNoSchedule, Value: "v"})); diff != "" {
		t.Errorf("withTaint added a duplicate key:effect (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Taint{other}, withoutTaint(added, shutdownTaint.Key, corev1.TaintEffectNoSchedule)); diff != "" {
		t.Errorf("withoutTaint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(added, withoutTaint(added, shutdownTaint.Key, corev1.TaintEffectNoExecute)); diff != "" {
		t.Errorf("withoutTaint removed another effect (-want +got):\n%s", diff)
	}
}

func TestInitialize(t *testing.T) {
	uninit := corev1.Taint{Key: cloudprovider.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	keep := corev1.Taint{Key: "example.com/dedicated", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		name string
		node *corev1.Node
		md   cloudprovider.InstanceMetadata
		want *corev1.Node
	}{
		{
			name: "everything",
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"example.com/taken": "mine"}},
				Spec:       corev1.NodeSpec{Taints: []corev1.Taint{keep, uninit}},
			},
			md: cloudprovider.InstanceMetadata{
				ProviderID: "ipmi://r1/n1", InstanceType: "r640", Zone: "rack1", Region: "dc-west",
				AdditionalLabels: map[string]string{
					"example.com/bmc":               "10.1.0.7",
					"example.com/taken":             "cloud",
					"node.kubernetes.io/sneaky":     "no",
					"kubernetes.io/hostname":        "no",
					"sub.k8s.io/also":               "no",
					"example.com/kubernetes.io-ish": "yes",
				},
			},
			want: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
					"example.com/taken":                        "mine",
					"example.com/bmc":                          "10.1.0.7",
					"example.com/kubernetes.io-ish":            "yes",
					"beta.kubernetes.io/instance-type":         "r640",
					"node.kubernetes.io/instance-type":         "r640",
					"failure-domain.beta.kubernetes.io/zone":   "rack1",
					"topology.kubernetes.io/zone":              "rack1",
					"failure-domain.beta.kubernetes.io/region": "dc-west",
					"topology.kubernetes.io/region":            "dc-west",
				}},
				Spec: corev1.NodeSpec{ProviderID: "ipmi://r1/n1", Taints: []corev1.Taint{keep}},
			},
		},
		{
			name: "a provider ID already set is kept; empty fields set nothing",
			node: &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n1"},
				Spec:       corev1.NodeSpec{ProviderID: "kubelet://given", Taints: []corev1.Taint{uninit}},
			},
			md:   cloudprovider.InstanceMetadata{ProviderID: "cloud://other"},
			want: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{ProviderID: "kubelet://given", Taints: []corev1.Taint{}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.node.DeepCopy()
			got := initialize(tc.node, &tc.md)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.node); diff != "" {
				t.Errorf("the input changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	addr := func(typ corev1.NodeAddressType, a string) corev1.NodeAddress {
		return corev1.NodeAddress{Type: typ, Address: a}
	}
	internal1, internal2 := addr(corev1.NodeInternalIP, "10.0.0.7"), addr(corev1.NodeInternalIP, "10.0.0.8")
	external := addr(corev1.NodeExternalIP, "203.0.113.7")
	internal6 := addr(corev1.NodeInternalIP, "fd00::7")
	withNode := func(annotation string, addrs ...corev1.NodeAddress) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: addrs}}
		if annotation != "" {
			n.Annotations = map[string]string{cloudprovider.AnnotationProvidedNodeIP: annotation}
		}
		return n
	}
	cases := []struct {
		name    string
		node    *corev1.Node
		cloud   []corev1.NodeAddress
		want    []corev1.NodeAddress
		wantErr string
	}{
		{name: "cloud gives none: leave the node's", node: withNode("", internal1), cloud: nil, want: nil},
		{
			name: "the node's hostname is kept when the cloud has none",
			node: withNode("", addr(corev1.NodeHostName, "n1"), internal2), cloud: []corev1.NodeAddress{internal1},
			want: []corev1.NodeAddress{internal1, addr(corev1.NodeHostName, "n1")},
		},
		{
			name: "the cloud's hostname wins",
			node: withNode("", addr(corev1.NodeHostName, "n1")), cloud: []corev1.NodeAddress{addr(corev1.NodeHostName, "cloud-n1")},
			want: []corev1.NodeAddress{addr(corev1.NodeHostName, "cloud-n1")},
		},
		{
			name: "provided node IP selects among addresses of its type",
			node: withNode("10.0.0.8"), cloud: []corev1.NodeAddress{internal1, external, internal2},
			want: []corev1.NodeAddress{internal2, external},
		},
		{
			name: "dual-stack provided node IPs",
			node: withNode("10.0.0.8,fd00::7"), cloud: []corev1.NodeAddress{internal1, internal6, internal2, external},
			want: []corev1.NodeAddress{internal2, internal6, external},
		},
		{
			name: "provided node IP unknown to the cloud",
			node: withNode("10.0.0.9"), cloud: []corev1.NodeAddress{internal1},
			wantErr: "failed to get node address from cloud provider that matches ip: 10.0.0.9",
		},
		{name: "unparsable provided node IP", node: withNode("ten"), cloud: []corev1.NodeAddress{internal1}, wantErr: `failed to parse node IP "ten"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := addresses(tc.node, tc.cloud)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
