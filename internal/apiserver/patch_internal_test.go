package apiserver

import (
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/kubernetes/scheme"

	"knode/internal/registry"
	"knode/internal/registry/daemonset"
	"knode/internal/registry/event"
	"knode/internal/registry/lease"
	"knode/internal/registry/namespace"
	"knode/internal/registry/node"
	"knode/internal/registry/pod"
	"knode/internal/registry/poddisruptionbudget"
	"knode/internal/registry/priorityclass"
	"knode/internal/registry/replicaset"
	"knode/internal/storage/memory"
)

// strategicMerge gives what the general way (applyPatch, then decodeBody)
// gives: the same object, warnings and error, for every patch.
func TestStrategicMergeMatchesGeneralPath(t *testing.T) {
	k := node.Kind()
	st := newObjectStore(&k, memory.New(memory.Config{}), nil)
	at := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	current := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", ResourceVersion: "5", Labels: map[string]string{"a": "b"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: at, LastTransitionTime: at},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: at, LastTransitionTime: at, Reason: "KubeletReady"},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		},
	}
	// A Node a protobuf client stored with bytes JSON cannot carry: JSON
	// reads them as U+FFFD, which the patch below then matches.
	mangled := current.DeepCopy()
	mangled.Status.Conditions[0].Type = "Memory\xffPressure"
	mangled.Labels["x"] = "\xff"
	currentJSON, err := patchTargetJSON(current)
	if err != nil {
		t.Fatal(err)
	}
	mangledJSON, err := patchTargetJSON(mangled)
	if err != nil {
		t.Fatal(err)
	}
	targets := []struct {
		name string
		obj  *corev1.Node
		json []byte
	}{{"node", current, currentJSON}, {"mangled node", mangled, mangledJSON}}
	patches := map[string]string{
		"heartbeat": `{"status":{"$setElementOrder/conditions":[{"type":"MemoryPressure"},{"type":"Ready"}],` +
			`"conditions":[{"lastHeartbeatTime":"2025-03-01T12:00:10Z","type":"MemoryPressure"},{"lastHeartbeatTime":"2025-03-01T12:00:10Z","type":"Ready"}]}}`,
		"reorder and add":    `{"status":{"$setElementOrder/conditions":[{"type":"Ready"},{"type":"DiskPressure"},{"type":"MemoryPressure"}],"conditions":[{"type":"DiskPressure","status":"False"}]}}`,
		"delete condition":   `{"status":{"conditions":[{"type":"Ready","$patch":"delete"}]}}`,
		"replace addresses":  `{"status":{"addresses":[{"type":"Hostname","address":"n1"},{"$patch":"replace"}]}}`,
		"labels":             `{"metadata":{"labels":{"a":null,"c":"d"}}}`,
		"null status":        `{"status":null}`,
		"unknown field":      `{"status":{"bogus":1,"phase":"Running"}}`,
		"wrong type":         `{"status":{"conditions":"x"}}`,
		"wrong value type":   `{"status":{"capacity":{"cpu":[1]}}}`,
		"kind change":        `{"kind":"Pod"}`,
		"apiVersion change":  `{"apiVersion":"v2"}`,
		"number kind":        `{"kind":3}`,
		"null kind":          `{"kind":null}`,
		"case-folded kind":   `{"Kind":"Pod"}`,
		"case-folded lower":  `{"apiversion":"v2"}`,
		"kelvin kind":        "{\"\u212aind\":\"Pod\"}",
		"bad directive":      `{"status":{"conditions":[{"type":"Ready","$patch":"bogus"}]}}`,
		"retain keys":        `{"spec":{"$retainKeys":["podCIDR"],"podCIDR":"10.0.1.0/24"}}`,
		"delete from list":   `{"spec":{"$deleteFromPrimitiveList/podCIDRs":["10.0.0.0/24"]}}`,
		"empty object":       `{}`,
		"null":               `null`,
		"array":              `[1]`,
		"string":             `"x"`,
		"empty":              ``,
		"malformed":          `{"status":`,
		"duplicate keys":     `{"metadata":{"labels":{"x":"1","x":"2"}}}`,
		"big number":         `{"spec":{"unschedulable":1e400}}`,
		"large integer":      `{"metadata":{"generation":123456789012345678901234567890}}`,
		"float generation":   `{"metadata":{"generation":1.5}}`,
		"name change":        `{"metadata":{"name":"other"}}`,
		"resourceVersion":    `{"metadata":{"resourceVersion":"5"}}`,
		"taint merge":        `{"spec":{"taints":[{"key":"k2","effect":"NoExecute"}]}}`,
		"invalid utf8 value": "{\"metadata\":{\"labels\":{\"x\":\"\xff\"}}}",
		"mangled condition":  `{"status":{"conditions":[{"type":"Memory\ufffdPressure","status":"True"}]}}`,
	}
	for _, target := range targets {
		for name, patch := range patches {
			for _, fv := range []fieldValidation{validationStrict, validationWarn, validationIgnore} {
				t.Run(target.name+"/"+name+"/"+string(fv), func(t *testing.T) {
					before := target.obj.DeepCopy()
					gotObj, gotWarnings, ok, gotErr := st.strategicMerge(target.obj, []byte(patch), fv)
					if diff := cmp.Diff(before, target.obj); diff != "" {
						t.Fatalf("strategicMerge changed the current object:\n%s", diff)
					}
					var wantObj any
					var wantWarnings []string
					patched, wantErr := applyPatch(types.StrategicMergePatchType, target.json, []byte(patch), k.New())
					if wantErr == nil {
						wantObj, wantWarnings, wantErr = decodeBody(&k, patched, fv)
					}
					if !ok {
						if wantErr == nil {
							t.Fatalf("strategicMerge declined a patch the general way applies")
						}
						return // the caller takes the general way
					}
					if diff := cmp.Diff(errString(wantErr), errString(gotErr)); diff != "" {
						t.Errorf("error (-general +strategicMerge):\n%s", diff)
					}
					if diff := cmp.Diff(wantWarnings, gotWarnings); diff != "" {
						t.Errorf("warnings (-general +strategicMerge):\n%s", diff)
					}
					if gotErr == nil {
						if diff := cmp.Diff(wantObj, any(gotObj)); diff != "" {
							t.Errorf("object (-general +strategicMerge):\n%s", diff)
						}
					}
				})
			}
		}
	}
}

// The unstructured converter reads every kind knode serves as the JSON
// does, so patchTarget may take it.
func TestPatchTargetMatchesJSON(t *testing.T) {
	kinds := []registry.Kind{
		namespace.Kind(), node.Kind(), pod.Kind(), event.Kind(), lease.Kind(),
		replicaset.Kind(), daemonset.Kind(), poddisruptionbudget.Kind(), priorityclass.Kind(),
	}
	filler := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(1), serializer.NewCodecFactory(scheme.Scheme)).NilChance(0.2).NumElements(0, 3)
	for _, k := range kinds {
		for i := 0; i < 40; i++ {
			obj := k.New()
			filler.Fill(obj)
			accessor, err := meta.Accessor(obj)
			if err != nil {
				t.Fatal(err)
			}
			accessor.SetManagedFields(nil) // patchTarget takes the JSON for those
			setTypeMeta(&k, obj)
			data, err := patchTargetJSON(obj)
			if err != nil {
				t.Fatalf("%s: %v", k.Kind, err)
			}
			want := map[string]interface{}{}
			if err := utiljson.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			if !validUTF8(want) {
				t.Fatalf("%s: the filler made a string that is not UTF-8", k.Kind)
			}
			got, err := patchTarget(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%s %d: map (-JSON +patchTarget):\n%s", k.Kind, i, cmp.Diff(want, got))
			}
		}
	}
}
