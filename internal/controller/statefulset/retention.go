package statefulset

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The persistentVolumeClaimRetentionPolicy as upstream implements it: by
// owner references on the claims, which the garbage collector follows.
//
//	whenScaled Retain, whenDeleted Retain: no reference
//	whenScaled Retain, whenDeleted Delete: the StatefulSet controls the claim
//	whenScaled Delete, whenDeleted Retain: a condemned pod (ordinal out of range) controls it
//	whenScaled Delete, whenDeleted Delete: the set while the ordinal is in range, else the pod
//
// A claim another controller controls, or one whose reference to the set
// or pod names a different uid (a previous incarnation), is left alone.

const (
	retain = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	remove = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
)

// conflictingControllerMessage is upstream's event text, spelling kept.
const conflictingControllerMessage = "PersistentVolumeClaim %s has a conflicting OwnerReference that acts as a manging controller, the retention policy is ignored for this claim"

// retentionPolicy is set's policy, Retain for both when unset.
func retentionPolicy(set *appsv1.StatefulSet) appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy {
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		return *p
	}
	return appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: retain, WhenScaled: retain}
}

// matchesRef: ref names obj (same group/version, kind and name).
func matchesRef(ref *metav1.OwnerReference, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	return ref.APIVersion == gvk.GroupVersion().String() && ref.Kind == gvk.Kind && ref.Name == obj.GetName()
}

// hasOwnerRef: target has a reference with owner's uid.
func hasOwnerRef(target, owner metav1.Object) bool {
	for _, r := range target.GetOwnerReferences() {
		if r.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// hasStaleOwnerRef: claim refers to obj's name and kind with another uid.
func hasStaleOwnerRef(claim *corev1.PersistentVolumeClaim, obj metav1.Object, gvk schema.GroupVersionKind) bool {
	for i := range claim.OwnerReferences {
		if matchesRef(&claim.OwnerReferences[i], obj, gvk) {
			return claim.OwnerReferences[i].UID != obj.GetUID()
		}
	}
	return false
}

// hasUnexpectedController: under a policy that deletes anything, claim has
// a controller other than set and pod, or a reference to their names with
// another uid.
func hasUnexpectedController(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	policy := retentionPolicy(set)
	if policy.WhenScaled == retain && policy.WhenDeleted == retain {
		return false
	}
	for i := range claim.OwnerReferences {
		ref := &claim.OwnerReferences[i]
		switch {
		case matchesRef(ref, set, controllerKind):
			if ref.UID != set.UID {
				return true
			}
		case matchesRef(ref, pod, podKind):
			if ref.UID != pod.UID {
				return true
			}
		case ref.Controller != nil && *ref.Controller:
			return true
		}
	}
	return false
}

// hasNonControllerOwner: set or pod owns claim without controlling it.
func hasNonControllerOwner(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	for _, r := range claim.OwnerReferences {
		if (r.UID == set.UID || r.UID == pod.UID) && (r.Controller == nil || !*r.Controller) {
			return true
		}
	}
	return false
}

// claimOwnerUpToDate reports whether claim's references already follow
// set's policy for pod (upstream's isClaimOwnerUpToDate). Claims with
// stale references, or another controller and none of ours, count as up
// to date: they are not to be touched.
func claimOwnerUpToDate(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) bool {
	if hasStaleOwnerRef(claim, set, controllerKind) || hasStaleOwnerRef(claim, pod, podKind) {
		return true
	}
	if hasUnexpectedController(claim, set, pod) {
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	}
	if hasNonControllerOwner(claim, set, pod) {
		return false
	}
	policy := retentionPolicy(set)
	scaledDown := !inRange(pod, set)
	switch {
	case policy.WhenScaled == retain && policy.WhenDeleted == remove:
		return hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	case policy.WhenScaled == remove && policy.WhenDeleted == retain:
		return !hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, pod)
	case policy.WhenScaled == remove && policy.WhenDeleted == remove:
		return scaledDown != hasOwnerRef(claim, set) && scaledDown == hasOwnerRef(claim, pod)
	default: // Retain, Retain, and unknown values as upstream treats them
		return !hasOwnerRef(claim, set) && !hasOwnerRef(claim, pod)
	}
}

// setClaimOwnerRefs rewrites claim's references to set and pod as set's
// policy wants them for pod (upstream's updateClaimOwnerRefForSetAndPod):
// ours are dropped, and added back as controller references unless
// another controller holds the claim.
func setClaimOwnerRefs(claim *corev1.PersistentVolumeClaim, set *appsv1.StatefulSet, pod *corev1.Pod) {
	unexpected := hasUnexpectedController(claim, set, pod)
	refs := []metav1.OwnerReference{}
	for _, r := range claim.OwnerReferences {
		if !matchesRef(&r, set, controllerKind) && !matchesRef(&r, pod, podKind) {
			refs = append(refs, r)
		}
	}
	if !unexpected {
		policy := retentionPolicy(set)
		scaledDown := !inRange(pod, set)
		switch {
		case policy.WhenScaled == retain && policy.WhenDeleted == remove:
			refs = addControllerRef(refs, set, controllerKind)
		case policy.WhenScaled == remove && policy.WhenDeleted == retain:
			if scaledDown {
				refs = addControllerRef(refs, pod, podKind)
			}
		case policy.WhenScaled == remove && policy.WhenDeleted == remove:
			if scaledDown {
				refs = addControllerRef(refs, pod, podKind)
			} else {
				refs = addControllerRef(refs, set, controllerKind)
			}
		}
	}
	claim.OwnerReferences = refs
}

// addControllerRef appends owner as controller unless a reference with
// its uid is there.
func addControllerRef(refs []metav1.OwnerReference, owner metav1.Object, gvk schema.GroupVersionKind) []metav1.OwnerReference {
	for _, r := range refs {
		if r.UID == owner.GetUID() {
			return refs
		}
	}
	return append(refs, *metav1.NewControllerRef(owner, gvk))
}

// claimsMatch reports whether every existing claim of pod follows set's
// policy (upstream's ClaimsMatchRetentionPolicy); missing claims match.
func claimsMatch(set *appsv1.StatefulSet, pod *corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim) bool {
	for _, c := range Claims(set, Ordinal(pod)) {
		if existing := claims[c.Name]; existing != nil && !claimOwnerUpToDate(existing, set, pod) {
			return false
		}
	}
	return true
}

// claimFixes are the existing claims of pod whose references must change
// to follow set's policy, as copies with the new references, and the
// names of those another controller holds (each gets upstream's
// ConflictingController warning).
func claimFixes(set *appsv1.StatefulSet, pod *corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim) (fixed []*corev1.PersistentVolumeClaim, conflicting []string) {
	for _, c := range Claims(set, Ordinal(pod)) {
		existing := claims[c.Name]
		if existing == nil {
			continue
		}
		if hasUnexpectedController(existing, set, pod) {
			conflicting = append(conflicting, c.Name)
		}
		if !claimOwnerUpToDate(existing, set, pod) {
			cp := existing.DeepCopy()
			setClaimOwnerRefs(cp, set, pod)
			fixed = append(fixed, cp)
		}
	}
	return fixed, conflicting
}

// missingClaims are the claims of pod to create (with the references
// set's policy wants) and errors for those being deleted, which hold back
// the pod (upstream's createPersistentVolumeClaims: "pvc <name> is being
// deleted").
func missingClaims(set *appsv1.StatefulSet, pod *corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim) (create []*corev1.PersistentVolumeClaim, deleting []error) {
	for _, c := range Claims(set, Ordinal(pod)) {
		existing := claims[c.Name]
		switch {
		case existing == nil:
			setClaimOwnerRefs(c, set, pod)
			if len(c.OwnerReferences) == 0 {
				c.OwnerReferences = nil
			}
			create = append(create, c)
		case existing.DeletionTimestamp != nil:
			deleting = append(deleting, fmt.Errorf("pvc %s is being deleted", c.Name))
		}
	}
	return create, deleting
}

// claimIsStale reports whether a claim of the pod about to be created
// still belongs to a previous pod of that name (upstream's
// PodClaimIsStale): under whenScaled Delete, it will be garbage
// collected, and the pod waits for it to go. pod has no uid yet, so any
// reference to its name is stale.
func claimIsStale(set *appsv1.StatefulSet, pod *corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim) bool {
	if retentionPolicy(set).WhenScaled == retain {
		return false
	}
	for _, c := range Claims(set, Ordinal(pod)) {
		if existing := claims[c.Name]; existing != nil && hasStaleOwnerRef(existing, pod, podKind) {
			return true
		}
	}
	return false
}
