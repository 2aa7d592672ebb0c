package lease

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// desiredLease returns the Lease this node should write now: a copy of
// existing (nil when the Lease does not exist yet) with holderIdentity,
// leaseDurationSeconds and renewTime asserted. The owner reference is
// added only when existing has no owner references at all and owner is
// known; references someone else set are left alone. existing is not
// modified.
func desiredLease(existing *coordinationv1.Lease, namespace, holder string, durationSeconds int32, owner *metav1.OwnerReference, now time.Time) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if existing == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: holder, Namespace: namespace}}
	} else {
		l = existing.DeepCopy()
	}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = &durationSeconds
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if len(l.OwnerReferences) == 0 && owner != nil {
		l.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return l
}

// needsOwner reports whether writing over existing needs the Node's owner
// reference, which costs a lookup of the Node.
func needsOwner(existing *coordinationv1.Lease) bool {
	return existing == nil || len(existing.OwnerReferences) == 0
}

// NodeOwnerReference is the owner reference a node Lease carries, so that
// the garbage collector deletes the Lease with its Node. Like upstream it
// sets neither controller nor blockOwnerDeletion.
func NodeOwnerReference(nodeName string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: corev1.SchemeGroupVersion.Version,
		Kind:       "Node",
		Name:       nodeName,
		UID:        uid,
	}
}

// jittered returns the wait between two renewals: interval plus up to
// factor×interval, scaled by r in [0, 1), as upstream's jittered loop does.
func jittered(interval time.Duration, factor, r float64) time.Duration {
	if factor <= 0 {
		return interval
	}
	return interval + time.Duration(r*factor*float64(interval))
}
