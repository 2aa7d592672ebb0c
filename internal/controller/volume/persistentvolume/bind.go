package persistentvolume

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/volume"
)

// AnnPreResizeCapacity on a PV is the size its claim reported before an
// expansion that still needs a filesystem resize; a claim that becomes Bound
// reports it instead of the volume's capacity.
const AnnPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity"

// annotationValue is what the PV controller writes into the annotations
// whose presence alone counts.
const annotationValue = "yes"

// ClaimReference is the claimRef a volume bound to claim carries.
func ClaimReference(claim *corev1.PersistentVolumeClaim) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		Kind: "PersistentVolumeClaim", APIVersion: "v1",
		Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
	}
}

// BindVolume returns a copy of pv bound to claim, and whether it differs
// from pv: the claimRef is set (with the claim's UID) unless it already
// names the claim with its UID, and bound-by-controller is added when the
// volume was neither bound nor pre-bound to the claim. pv is not changed.
func BindVolume(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, bool) {
	out := pv.DeepCopy()
	changed := false
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name != claim.Name || ref.Namespace != claim.Namespace || ref.UID != claim.UID {
		out.Spec.ClaimRef = ClaimReference(claim)
		changed = true
	}
	if !BoundToClaim(pv, claim) && !metav1.HasAnnotation(out.ObjectMeta, volume.AnnBoundByController) {
		metav1.SetMetaDataAnnotation(&out.ObjectMeta, volume.AnnBoundByController, annotationValue)
		changed = true
	}
	return out, changed
}

// BindClaim returns a copy of claim bound to pv, and whether it differs
// from claim: spec.volumeName is set (with bound-by-controller when the
// claim did not already name pv) and bind-completed is added. claim is not
// changed.
func BindClaim(claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeClaim, bool) {
	out := claim.DeepCopy()
	changed := false
	if claim.Spec.VolumeName != pv.Name {
		out.Spec.VolumeName = pv.Name
		if !metav1.HasAnnotation(out.ObjectMeta, volume.AnnBoundByController) {
			metav1.SetMetaDataAnnotation(&out.ObjectMeta, volume.AnnBoundByController, annotationValue)
		}
		changed = true
	}
	if !metav1.HasAnnotation(out.ObjectMeta, volume.AnnBindCompleted) {
		metav1.SetMetaDataAnnotation(&out.ObjectMeta, volume.AnnBindCompleted, annotationValue)
		changed = true
	}
	return out, changed
}

// UnbindVolume returns a copy of pv with its binding rolled back: a
// binding the controller made (bound-by-controller) loses its claimRef and
// that annotation; a user's pre-binding keeps its claimRef without the UID.
func UnbindVolume(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	out := pv.DeepCopy()
	if metav1.HasAnnotation(pv.ObjectMeta, volume.AnnBoundByController) {
		out.Spec.ClaimRef = nil
		delete(out.Annotations, volume.AnnBoundByController)
		if len(out.Annotations) == 0 {
			out.Annotations = nil
		}
	} else if out.Spec.ClaimRef != nil {
		out.Spec.ClaimRef.UID = ""
	}
	return out
}

// ClaimStatus returns the status claim should have in phase, and whether
// it differs from its current one. With pv (a Bound claim) the access
// modes are the volume's, and the capacity becomes the volume's (or its
// pre-resize capacity) only as the phase changes, so that a later resize is
// not undone; without pv both are cleared. Other status fields are kept.
func ClaimStatus(claim *corev1.PersistentVolumeClaim, phase corev1.PersistentVolumeClaimPhase, pv *corev1.PersistentVolume) (corev1.PersistentVolumeClaimStatus, bool) {
	st := *claim.Status.DeepCopy()
	changed := false
	if st.Phase != phase {
		st.Phase = phase
		changed = true
	}
	if pv == nil {
		if st.AccessModes != nil {
			st.AccessModes = nil
			changed = true
		}
		if st.Capacity != nil {
			st.Capacity = nil
			changed = true
		}
		return st, changed
	}
	if !apiequality.Semantic.DeepEqual(st.AccessModes, pv.Spec.AccessModes) {
		st.AccessModes = append([]corev1.PersistentVolumeAccessMode(nil), pv.Spec.AccessModes...)
		changed = true
	}
	if claim.Status.Phase != phase {
		size, ok := pv.Spec.Capacity[corev1.ResourceStorage]
		if pre, has := pv.Annotations[AnnPreResizeCapacity]; has {
			if q, err := resource.ParseQuantity(pre); err == nil {
				size = q
			}
			if st.Capacity == nil {
				st.Capacity = corev1.ResourceList{}
			}
			st.Capacity[corev1.ResourceStorage] = size
			changed = true
		} else if have, set := claim.Status.Capacity[corev1.ResourceStorage]; ok && (!set || size.Cmp(have) != 0) {
			st.Capacity = pv.Spec.Capacity.DeepCopy()
			changed = true
		}
	}
	return st, changed
}

// VolumePhase returns a copy of pv in phase with message, its
// lastPhaseTransitionTime now, and true; or pv itself and false when it is
// already in phase (the message is then left as it is).
func VolumePhase(pv *corev1.PersistentVolume, phase corev1.PersistentVolumePhase, message string, now time.Time) (*corev1.PersistentVolume, bool) {
	if pv.Status.Phase == phase {
		return pv, false
	}
	out := pv.DeepCopy()
	out.Status.Phase = phase
	out.Status.Message = message
	t := metav1.NewTime(now)
	out.Status.LastPhaseTransitionTime = &t
	return out, true
}
