package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"knode/internal/registry"
	"knode/internal/registry/lease"
	"knode/internal/registry/node"
	"knode/internal/registry/pod"
	"knode/internal/storage/memory"
)

// codecStores returns the object stores of nodes, pods and leases of a
// server over a fresh memory store, and that store.
func codecStores(t testing.TB) (map[string]*objectStore, *memory.Store) {
	t.Helper()
	store := memory.New(memory.Config{})
	s, err := New(Config{Storage: store, Kinds: []registry.Kind{node.Kind(), pod.Kind(), lease.Kind()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Cleanup(func() { store.Close() })
	out := map[string]*objectStore{}
	for gvr, st := range s.stores {
		out[gvr.Resource] = st
	}
	return out, store
}

// stamp is a time with whole seconds, as the API keeps metav1.Time.
var stamp = metav1.NewTime(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))

// codecMeta is metadata with every kind of field storage must keep.
func codecMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              name,
		Namespace:         namespace,
		UID:               "6f2c1f0e-1111-4a6b-9c3d-000000000001",
		ResourceVersion:   "12345",
		Generation:        3,
		CreationTimestamp: stamp,
		DeletionTimestamp: &stamp,
		// Grace 0 survives: protobuf keeps a set pointer to zero.
		DeletionGracePeriodSeconds: ptr.To[int64](0),
		Labels:                     map[string]string{"a": "1", "b": "2", "kubernetes.io/hostname": name},
		Annotations:                map[string]string{"note": "x", "empty": ""},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u-rs",
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false),
		}},
		Finalizers: []string{"example.com/hold"},
		ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager:     "kubelet",
			Operation:   metav1.ManagedFieldsOperationUpdate,
			APIVersion:  "v1",
			Time:        &stamp,
			FieldsType:  "FieldsV1",
			FieldsV1:    &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{}}}`)},
			Subresource: "status",
		}},
	}
}

// realisticNode is a node as a kubelet reports it.
func realisticNode(name string) *corev1.Node {
	n := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: codecMeta(name, ""),
		Spec: corev1.NodeSpec{
			PodCIDR:    "10.244.3.0/24",
			PodCIDRs:   []string{"10.244.3.0/24"},
			ProviderID: "knode://" + name,
			Taints:     []corev1.Taint{{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute, TimeAdded: &stamp}},
		},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("7800m"), corev1.ResourceMemory: resource.MustParse("31Gi"),
				corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("90Gi"),
			},
			Phase:           corev1.NodeRunning,
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.7"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: "m", SystemUUID: "s", BootID: "b", KernelVersion: "6.1.0", OSImage: "Debian GNU/Linux 12",
				ContainerRuntimeVersion: "containerd://1.7.0", KubeletVersion: "v1.35.0", OperatingSystem: "linux", Architecture: "amd64",
			},
		},
	}
	n.Labels["kubernetes.io/os"] = "linux"
	n.Labels["kubernetes.io/arch"] = "amd64"
	n.Labels["node.kubernetes.io/instance-type"] = "m5.2xlarge"
	n.Labels["topology.kubernetes.io/zone"] = "zone-a"
	for _, c := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: c, Status: corev1.ConditionFalse, LastHeartbeatTime: stamp, LastTransitionTime: stamp,
			Reason: "KubeletHasSufficient" + string(c), Message: "kubelet reports " + string(c) + " is fine",
		})
	}
	for i := range 20 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{
			Names:     []string{fmt.Sprintf("registry.example/team/image-%d@sha256:%064d", i, i), fmt.Sprintf("registry.example/team/image-%d:v%d", i, i)},
			SizeBytes: int64(1e6 * (i + 1)),
		})
	}
	return n
}

func codecPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: codecMeta("web-0", "default"),
		Spec: corev1.PodSpec{
			NodeName:                      "n1",
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox", Command: []string{"sh", "-c", "sleep 1"},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				Env:       []corev1.EnvVar{{Name: "A", Value: "b"}},
			}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: stamp}},
			PodIP:      "10.244.3.9",
			PodIPs:     []corev1.PodIP{{IP: "10.244.3.9"}},
			StartTime:  &stamp,
		},
	}
}

func codecLease() *coordinationv1.Lease {
	renew := metav1.NewMicroTime(time.Date(2025, 6, 1, 12, 0, 1, 123456000, time.UTC))
	return &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: codecMeta("n1", "kube-node-lease"),
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &renew, AcquireTime: &renew, LeaseTransitions: ptr.To[int32](0),
		},
	}
}

func TestStorageRoundTrip(t *testing.T) {
	stores, _ := codecStores(t)
	for _, tt := range []struct {
		name     string
		resource string
		obj      runtime.Object
		// bare is a new empty object of the type, for reading the raw
		// protobuf inside the envelope.
		bare protoObject
	}{
		{"node", "nodes", realisticNode("n1"), &corev1.Node{}},
		{"pod", "pods", codecPod(), &corev1.Pod{}},
		{"lease", "leases", codecLease(), &coordinationv1.Lease{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := stores[tt.resource]
			want := tt.obj.DeepCopyObject()
			data, err := st.encode(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, tt.obj); diff != "" {
				t.Errorf("encode changed the object (-before +after):\n%s", diff)
			}
			if !bytes.HasPrefix(data, []byte("k8s\x00")) {
				t.Fatalf("stored value starts %q, want the k8s\\x00 prefix", data[:min(len(data), 8)])
			}

			// The envelope names the object and holds its plain protobuf,
			// without resourceVersion or type metadata.
			var unk runtime.Unknown
			if err := unk.Unmarshal(data[4:]); err != nil {
				t.Fatalf("envelope: %v", err)
			}
			gvk := want.GetObjectKind().GroupVersionKind()
			if unk.APIVersion != gvk.GroupVersion().String() || unk.Kind != gvk.Kind {
				t.Errorf("envelope names %s %s, want %s", unk.APIVersion, unk.Kind, gvk)
			}
			if unk.ContentType != "" || unk.ContentEncoding != "" {
				t.Errorf("envelope content type %q encoding %q, want both empty", unk.ContentType, unk.ContentEncoding)
			}
			if err := tt.bare.Unmarshal(unk.Raw); err != nil {
				t.Fatalf("raw object: %v", err)
			}
			bareMeta := tt.bare.(metav1.Object)
			if rv := bareMeta.GetResourceVersion(); rv != "" {
				t.Errorf("stored resourceVersion %q, want none", rv)
			}

			got, err := st.decode(data, 777)
			if err != nil {
				t.Fatal(err)
			}
			wantRead := want.DeepCopyObject()
			setRevision(wantRead, 777)
			if diff := cmp.Diff(wantRead, got); diff != "" {
				t.Errorf("decoded object (-want +got):\n%s", diff)
			}
			// Reading without a revision leaves resourceVersion empty:
			// nothing else put it there.
			got, err = st.decode(data, 0)
			if err != nil {
				t.Fatal(err)
			}
			if rv := got.(metav1.Object).GetResourceVersion(); rv != "" {
				t.Errorf("decoded without a revision: resourceVersion %q, want empty", rv)
			}
			// Writing what was read gives the same bytes, so an update
			// that changes nothing is seen as one.
			again, err := st.encode(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, data) {
				t.Errorf("re-encoding the decoded object changed the stored bytes")
			}
		})
	}
}

// TestStorageEncodingIsDeterministic encodes one object with many map
// entries repeatedly: map order must not leak into the bytes.
func TestStorageEncodingIsDeterministic(t *testing.T) {
	stores, _ := codecStores(t)
	n := realisticNode("n1")
	for i := range 50 {
		n.Labels[fmt.Sprintf("label-%02d", i)] = fmt.Sprint(i)
		n.Annotations[fmt.Sprintf("annotation-%02d", i)] = fmt.Sprint(i)
	}
	first, err := stores["nodes"].encode(n)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		data, err := stores["nodes"].encode(n.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, first) {
			t.Fatal("two encodings of the same node differ")
		}
	}
}

// TestJSONStoredObjectsStillRead checks that values written as JSON, as
// every value was before protobuf storage, still read, and that the next
// write stores protobuf.
func TestJSONStoredObjectsStillRead(t *testing.T) {
	ctx := context.Background()
	stores, store := codecStores(t)
	nodes := stores["nodes"]
	old := realisticNode("n1")
	old.ResourceVersion = ""
	old.DeletionTimestamp, old.DeletionGracePeriodSeconds, old.Finalizers = nil, nil, nil
	jsonValue, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	key := nodes.key("", "n1")
	rev, err := store.Create(ctx, key, jsonValue)
	if err != nil {
		t.Fatal(err)
	}

	got, err := nodes.Get(ctx, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := old.DeepCopy()
	setRevision(want, rev)
	if diff := cmp.Diff(runtime.Object(want), got); diff != "" {
		t.Errorf("node read from JSON (-want +got):\n%s", diff)
	}

	relabel := func(cur runtime.Object) (runtime.Object, error) {
		n := cur.(*corev1.Node)
		n.Labels["changed"] = "yes"
		return n, nil
	}
	if _, err := nodes.Update(ctx, "", "n1", relabel, updateOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(kv.Value, []byte("k8s\x00")) {
		t.Errorf("value after an update starts %q, want protobuf", kv.Value[:8])
	}
	got, err = nodes.Get(ctx, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if l := got.(*corev1.Node).Labels["changed"]; l != "yes" {
		t.Errorf("label after update = %q, want yes", l)
	}
}

// TestStoredValuesAreProtobuf goes through the store's own writes: a
// created pod is stored in kube-apiserver's form, as etcdctl would show.
func TestStoredValuesAreProtobuf(t *testing.T) {
	ctx := context.Background()
	stores, store := codecStores(t)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := stores["pods"].Create(ctx, "default", p, createOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := store.Get(ctx, "/registry/pods/default/web")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(kv.Value, []byte("k8s\x00\x0a\x09\x0a\x02v1\x12\x03Pod")) {
		t.Errorf("stored pod starts %q, want k8s\\x00 and an envelope naming v1 Pod", kv.Value[:min(len(kv.Value), 20)])
	}
	// A second server (one that does not remember the write) reads it back.
	other, _ := codecStores(t)
	got, err := other["pods"].decode(kv.Value, kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Errorf("pod read by another server (-created +read):\n%s", diff)
	}
}

// plainObject is an API-like type with no protobuf form.
type plainObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
}

func (o *plainObject) DeepCopyObject() runtime.Object {
	cp := *o
	o.ObjectMeta.DeepCopyInto(&cp.ObjectMeta)
	cp.Data = map[string]string{}
	for k, v := range o.Data {
		cp.Data[k] = v
	}
	return &cp
}

func TestKindsWithoutProtobufStayJSON(t *testing.T) {
	k := &registry.Kind{
		GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1"},
		Resource:     "plains", Kind: "Plain",
		New: func() runtime.Object { return &plainObject{} },
	}
	st := newObjectStore(k, memory.New(memory.Config{}), nil)
	obj := &plainObject{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "9"}, Data: map[string]string{"z": "1", "a": "2"}}
	data, err := st.encode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"Plain","apiVersion":"example.com/v1","metadata":{"name":"a"},"data":{"a":"2","z":"1"}}`; string(data) != want {
		t.Errorf("stored %s, want %s", data, want)
	}
	got, err := st.decode(data, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := obj.DeepCopyObject().(*plainObject)
	want.ResourceVersion = "10"
	if diff := cmp.Diff(runtime.Object(want), got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	if _, err := st.decode([]byte("k8s\x00\x0a\x00"), 1); !errors.Is(err, errStoredValue) {
		t.Errorf("protobuf for a kind without a protobuf form: err = %v, want errStoredValue", err)
	}
}

func TestStoredValueErrors(t *testing.T) {
	stores, _ := codecStores(t)
	podData, err := stores["pods"].encode(codecPod())
	if err != nil {
		t.Fatal(err)
	}
	nodeData, err := stores["nodes"].encode(realisticNode("n1"))
	if err != nil {
		t.Fatal(err)
	}
	badType := bytes.Replace(nodeData, []byte("\x12\x04Node"), []byte("\x12\x04Nodf"), 1)
	badRaw := append([]byte{}, nodeData[:len(nodeData)-6]...) // cuts into the object
	for _, tt := range []struct {
		name  string
		value []byte
	}{
		{"a pod read as a node", podData},
		{"another kind in the envelope", badType},
		{"truncated", badRaw},
		{"prefix only", []byte("k8s\x00")},
		{"not JSON either", []byte("k8s")},
		{"empty", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if obj, err := stores["nodes"].decode(tt.value, 1); err == nil {
				t.Errorf("decode succeeded with %#v", obj)
			}
		})
	}
}

// FuzzDecodeStored feeds arbitrary stored values to the decoder of every
// kind. Decoding may fail but never panics; what it reads is of the kind,
// and writing it again gives bytes that read back to the same bytes.
func FuzzDecodeStored(f *testing.F) {
	stores, _ := codecStores(f)
	seeds := map[string]runtime.Object{"nodes": realisticNode("n1"), "pods": codecPod(), "leases": codecLease()}
	for resource, obj := range seeds {
		data, err := stores[resource].encode(obj)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint8(0))
		j, _ := json.Marshal(obj)
		f.Add(j, uint8(1))
	}
	f.Add([]byte("k8s\x00"), uint8(2))
	f.Add([]byte("k8s\x00\x0a\x0a\x0a\x02v1\x12\x04Node\x12\x02\x0a\x00"), uint8(0))
	resources := []string{"nodes", "pods", "leases"}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		st := stores[resources[int(which)%len(resources)]]
		obj, err := st.decode(data, 5)
		if err != nil {
			return
		}
		if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != st.kind.Kind {
			t.Fatalf("decoded kind %q from the %s store", gvk.Kind, st.kind.Resource)
		}
		once, err := st.encode(obj)
		if err != nil {
			return // JSON may carry what protobuf cannot, such as a bad quantity
		}
		back, err := st.decode(once, 5)
		if err != nil {
			t.Fatalf("decoding what was just encoded: %v", err)
		}
		twice, err := st.encode(back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("encoding is not stable across a round trip")
		}
	})
}

// BenchmarkStorageCodec encodes and decodes a realistic node in each
// storage form.
func BenchmarkStorageCodec(b *testing.B) {
	stores, _ := codecStores(b)
	nodes := stores["nodes"]
	n := realisticNode("n1")
	n.ResourceVersion = ""
	for _, form := range []struct {
		name   string
		encode func(runtime.Object) ([]byte, error)
	}{
		{"json", func(obj runtime.Object) ([]byte, error) { return json.Marshal(obj) }},
		{"protobuf", nodes.encode},
	} {
		b.Run(form.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				data, err := form.encode(n)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := nodes.decode(data, 5); err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			b.ReportMetric(float64(size), "bytes")
		})
	}
}
