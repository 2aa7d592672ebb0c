package noderestriction

import (
	"fmt"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	"knode/internal/apiserver"
)

// admitClaim lets a node change a PersistentVolumeClaim only through its
// status, and there only what the kubelet's filesystem expansion records
// (see claimStatusChange). The node authorizer has already limited the
// node to claims its pods use.
func admitClaim(nodeName string, a apiserver.AdmissionAttributes) error {
	if a.Subresource != "status" {
		return forbidden(a, "may only update PVC status")
	}
	if a.Operation != opUpdate {
		return forbidden(a, fmt.Sprintf("unexpected operation %q", a.Operation))
	}
	old, ok := a.Old.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, fmt.Sprintf("unexpected type %T", a.Old))
	}
	claim, ok := a.Object.(*corev1.PersistentVolumeClaim)
	if !ok {
		return forbidden(a, fmt.Sprintf("unexpected type %T", a.Object))
	}
	if diff := claimStatusChange(old, claim); diff != "" {
		return forbidden(a, fmt.Sprintf("node %q is not allowed to update fields other than status.capacity and status.conditions: %v", nodeName, diff))
	}
	return nil
}

// claimStatusChange returns, as a cmp.Diff of old and claim, what an
// update changes beyond the fields a node may write: status.capacity,
// status.conditions, and (RecoverVolumeExpansionFailure, GA since 1.34)
// status.allocatedResources and status.allocatedResourceStatuses. The
// resourceVersion and managedFields are not compared either. "" means the
// update stays within them. Neither argument is changed.
func claimStatusChange(old, claim *corev1.PersistentVolumeClaim) string {
	old, claim = old.DeepCopy(), claim.DeepCopy()
	for _, c := range []*corev1.PersistentVolumeClaim{old, claim} {
		c.ResourceVersion = ""
		c.ManagedFields = nil
		c.Status.Capacity = nil
		c.Status.Conditions = nil
		c.Status.AllocatedResources = nil
		c.Status.AllocatedResourceStatuses = nil
	}
	if apiequality.Semantic.DeepEqual(old, claim) {
		return ""
	}
	return cmp.Diff(old, claim)
}

// admitCSINode lets a node create, update and delete only the CSINode
// named after itself.
func admitCSINode(nodeName string, a apiserver.AdmissionAttributes) error {
	name := a.Name
	if a.Operation == opCreate {
		accessor, err := meta.Accessor(a.Object)
		if err != nil {
			return forbidden(a, "unable to access the object name")
		}
		name = accessor.GetName()
	}
	if name != nodeName {
		return forbidden(a, "can only access CSINode with the same name as the requesting node")
	}
	return nil
}
