package noderestriction

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/registry"
)

var (
	claimKind   = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "persistentvolumeclaims", Namespaced: true, HasStatus: true}
	volumeKind  = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "persistentvolumes", HasStatus: true}
	csiNodeKind = &registry.Kind{GroupVersion: schema.GroupVersion{Group: "storage.k8s.io", Version: "v1"}, Resource: "csinodes"}
)

// boundClaim is a bound claim as the PV controller leaves it; change
// tweaks it.
func boundClaim(change func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: "data", ResourceVersion: "7",
			Labels:      map[string]string{"app": "db"},
			Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"},
			Finalizers:  []string{"kubernetes.io/pvc-protection"},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
			VolumeName:  "pv-data",
		},
		Status: corev1.PersistentVolumeClaimStatus{
			Phase:       corev1.ClaimBound,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			Conditions: []corev1.PersistentVolumeClaimCondition{{
				Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue,
			}},
			AllocatedResources:        corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AllocatedResourceStatuses: map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: corev1.PersistentVolumeClaimNodeResizePending},
		},
	}
	if change != nil {
		change(c)
	}
	return c
}

func csiNode(name string) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestAdmitStorage(t *testing.T) {
	// The kubelet after expanding the filesystem: new capacity, no
	// condition, the resize status cleared, and no resourceVersion (an
	// unconditional update).
	expanded := boundClaim(func(c *corev1.PersistentVolumeClaim) {
		c.ResourceVersion = ""
		c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
		c.Status.Conditions = nil
		c.Status.AllocatedResourceStatuses = nil
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	})
	const refusedClaim = `403 persistentvolumeclaims "data" is forbidden: node "node-2" is not allowed to update fields other than status.capacity and status.conditions: `

	tests := []struct {
		name string
		a    apiserver.AdmissionAttributes
		// want is the exact outcome; when prefix is set the outcome must
		// start with want instead (the message ends in a diff).
		want   string
		prefix bool
	}{
		// Claims.
		{name: "claim status: expansion fields",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Object: expanded, Old: boundClaim(nil)}},
		{name: "claim status: no change",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Object: boundClaim(nil), Old: boundClaim(nil)}},
		{name: "claim status: phase",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data",
				Object: boundClaim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimLost }), Old: boundClaim(nil)},
			want: refusedClaim, prefix: true},
		{name: "claim status: access modes",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data",
				Object: boundClaim(func(c *corev1.PersistentVolumeClaim) {
					c.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
				}), Old: boundClaim(nil)},
			want: refusedClaim, prefix: true},
		{name: "claim status: a label",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data",
				Object: boundClaim(func(c *corev1.PersistentVolumeClaim) { c.Labels["stolen"] = "yes" }), Old: boundClaim(nil)},
			want: refusedClaim, prefix: true},
		{name: "claim status: an annotation",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data",
				Object: boundClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations = nil }), Old: boundClaim(nil)},
			want: refusedClaim, prefix: true},
		{name: "claim status: the spec",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data",
				Object: boundClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-other" }), Old: boundClaim(nil)},
			want: refusedClaim, prefix: true},
		{name: "claim status: wrong old type",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Object: boundClaim(nil), Old: &corev1.Pod{}},
			want: `403 persistentvolumeclaims "data" is forbidden: unexpected type *v1.Pod`},
		{name: "claim status: wrong new type",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Object: &corev1.Pod{}, Old: boundClaim(nil)},
			want: `403 persistentvolumeclaims "data" is forbidden: unexpected type *v1.Pod`},
		{name: "claim status: delete",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Old: boundClaim(nil)},
			want: `403 persistentvolumeclaims "data" is forbidden: unexpected operation "DELETE"`},
		{name: "claim: update",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Namespace: "default", Name: "data", Object: boundClaim(nil), Old: boundClaim(nil)},
			want: `403 persistentvolumeclaims "data" is forbidden: may only update PVC status`},
		{name: "claim: create",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: boundClaim(nil)},
			want: `403 persistentvolumeclaims "data" is forbidden: may only update PVC status`},
		{name: "claim: delete",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: claimKind, Namespace: "default", Name: "data", Old: boundClaim(nil)},
			want: `403 persistentvolumeclaims "data" is forbidden: may only update PVC status`},
		{name: "claim status: not a node",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data",
				Object: boundClaim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimLost }), Old: boundClaim(nil),
				User: &auth.User{Name: "system:kube-controller-manager"}}},
		// PersistentVolumes are the node authorizer's to refuse.
		{name: "volume: not restricted here",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: volumeKind, Name: "pv-data", Object: &corev1.PersistentVolume{}, Old: &corev1.PersistentVolume{}}},

		// CSINodes.
		{name: "create own CSINode",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: csiNodeKind, Name: "node-2", Object: csiNode("node-2")}},
		{name: "create own CSINode, name only in the object",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: csiNodeKind, Object: csiNode("node-2")}},
		{name: "create other CSINode",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: csiNodeKind, Object: csiNode("node-1")},
			want: `403 csinodes.storage.k8s.io "node-1" is forbidden: can only access CSINode with the same name as the requesting node`},
		{name: "create CSINode of an unnamed type",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: csiNodeKind, Object: "node-2"},
			want: `403 csinodes.storage.k8s.io "Unknown/errorGettingName" is forbidden: unable to access the object name`},
		{name: "update own CSINode",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: csiNodeKind, Name: "node-2", Object: csiNode("node-2"), Old: csiNode("node-2")}},
		{name: "update other CSINode",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: csiNodeKind, Name: "node-1", Object: csiNode("node-1"), Old: csiNode("node-1")},
			want: `403 csinodes.storage.k8s.io "node-1" is forbidden: can only access CSINode with the same name as the requesting node`},
		{name: "delete own CSINode",
			a: apiserver.AdmissionAttributes{Operation: "DELETE", Kind: csiNodeKind, Name: "node-2", Old: csiNode("node-2")}},
		{name: "delete other CSINode",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: csiNodeKind, Name: "node-1", Old: csiNode("node-1")},
			want: `403 csinodes.storage.k8s.io "node-1" is forbidden: can only access CSINode with the same name as the requesting node`},
		{name: "other CSINode, not a node",
			a: apiserver.AdmissionAttributes{Operation: "DELETE", Kind: csiNodeKind, Name: "node-1", Old: csiNode("node-1"),
				User: &auth.User{Name: "admin", Groups: []string{auth.MastersGroup}}}},
	}
	p := testPlugin()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.a.User == nil {
				tc.a.User = nodeUser("node-2")
			}
			got := outcome(p.Admit(context.Background(), tc.a))
			if tc.prefix {
				if !strings.HasPrefix(got, tc.want) || len(got) == len(tc.want) {
					t.Errorf("got %q\nwant it to start with %q and go on with a diff", got, tc.want)
				}
				return
			}
			if got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// The comparison works on copies: the caller's objects are unchanged.
func TestClaimStatusChangeLeavesObjects(t *testing.T) {
	old, claim := boundClaim(nil), boundClaim(func(c *corev1.PersistentVolumeClaim) { c.Status.Phase = corev1.ClaimLost })
	if claimStatusChange(old, claim) == "" {
		t.Fatal("a phase change was not reported")
	}
	if old.Status.Capacity == nil || claim.Status.Conditions == nil || claim.ResourceVersion != "7" {
		t.Error("claimStatusChange changed its arguments")
	}
}
