package protection

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hasFinalizer reports whether obj carries finalizer.
func hasFinalizer(obj metav1.Object, finalizer string) bool {
	for _, f := range obj.GetFinalizers() {
		if f == finalizer {
			return true
		}
	}
	return false
}

// DeletionCandidate reports whether obj is being deleted and still carries
// finalizer, so that the controller must decide whether to let it go.
func DeletionCandidate(obj metav1.Object, finalizer string) bool {
	return obj.GetDeletionTimestamp() != nil && hasFinalizer(obj, finalizer)
}

// NeedsFinalizer reports whether obj is not being deleted and lacks
// finalizer. Admission adds it at creation; the controller adds it to
// objects created without it.
func NeedsFinalizer(obj metav1.Object, finalizer string) bool {
	return obj.GetDeletionTimestamp() == nil && !hasFinalizer(obj, finalizer)
}

// withoutFinalizer is finalizers without every copy of f, in order.
func withoutFinalizer(finalizers []string, f string) []string {
	var out []string
	for _, x := range finalizers {
		if x != f {
			out = append(out, x)
		}
	}
	return out
}

// PodUsesClaim reports whether pod keeps claim (of the pod's namespace)
// from being deleted, as upstream decides it: the pod is scheduled (an
// agent sees only scheduled pods, and will not start one whose claim is
// being deleted) and one of its volumes is the claim, either as a
// persistentVolumeClaim volume or as the generic ephemeral volume the pod
// owns, unless the pod is shut down (PodShutDown). A scheduled pod that
// has finished but still exists keeps its claims: its volumes may still be
// mounted.
func PodUsesClaim(pod *corev1.Pod, claim *corev1.PersistentVolumeClaim) bool {
	if pod.Spec.NodeName == "" || pod.Namespace != claim.Namespace {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name {
			return true
		}
		if v.Ephemeral != nil && !PodShutDown(pod) && pod.Name+"-"+v.Name == claim.Name && metav1.IsControlledBy(claim, pod) {
			return true
		}
	}
	return false
}

// PodShutDown reports whether the pod is only waiting to be removed: it is
// being deleted with a grace period of zero, which its agent sets once its
// volumes are unmounted, or which a forced deletion sets.
func PodShutDown(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil && *pod.DeletionGracePeriodSeconds == 0
}

// VolumeInUse reports whether a PV being deleted must keep its protection
// finalizer: while its phase is Bound.
func VolumeInUse(pv *corev1.PersistentVolume) bool {
	return pv.Status.Phase == corev1.VolumeBound
}
