package garbagecollector

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// OwnerKey names a possible owner of a pod: its group, kind, namespace
// and name.
type OwnerKey struct {
	Group, Kind, Namespace, Name string
}

// Owner is what the collector knows of an existing owner.
type Owner struct {
	UID types.UID
	// Finalizers matter only while Deleting.
	Deleting   bool
	Finalizers []string
}

// Orphaning: the owner is being deleted with propagationPolicy Orphan; its
// dependents must lose their reference to it and stay.
func (o Owner) Orphaning() bool {
	return o.Deleting && slices.Contains(o.Finalizers, metav1.FinalizerOrphanDependents)
}

// Foreground: the owner is being deleted with propagationPolicy
// Foreground; it waits for its dependents to be deleted.
func (o Owner) Foreground() bool {
	return o.Deleting && slices.Contains(o.Finalizers, metav1.FinalizerDeleteDependents)
}

// Action is what becomes of a dependent.
type Action int

const (
	// Keep leaves the pod as it is.
	Keep Action = iota
	// Delete deletes the pod: every owner it names is gone, or waits for
	// its dependents to go.
	Delete
	// Trim removes the references Judge returns and keeps the pod: those
	// owners are gone (or orphan their dependents) while another owner
	// stays.
	Trim
)

func (a Action) String() string {
	switch a {
	case Delete:
		return "Delete"
	case Trim:
		return "Trim"
	}
	return "Keep"
}

// Judge decides the fate of pod from its ownerReferences, background
// propagation: an owner of a kind known reports is present when owners
// has it under the same UID; an owner of another kind is taken as present
// (the collector cannot look it up). A pod whose every owner is gone (or is
// being deleted in the foreground) is deleted; references to gone or
// orphaning owners are removed from a pod that keeps another owner; a pod
// whose owners all orphan it just loses those references.
func Judge(pod *corev1.Pod, owners map[OwnerKey]Owner, known func(group, kind string) bool) (Action, []metav1.OwnerReference) {
	if len(pod.OwnerReferences) == 0 {
		return Keep, nil
	}
	var remove []metav1.OwnerReference
	solid, gone := 0, 0
	for _, ref := range pod.OwnerReferences {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || !known(gv.Group, ref.Kind) {
			solid++
			continue
		}
		o, ok := owners[OwnerKey{Group: gv.Group, Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name}]
		switch {
		case !ok || o.UID != ref.UID:
			gone++
			remove = append(remove, ref)
		case o.Orphaning():
			remove = append(remove, ref)
		case o.Foreground():
			gone++
		default:
			solid++
		}
	}
	switch {
	case solid == 0 && gone > 0:
		return Delete, nil
	case len(remove) > 0:
		return Trim, remove
	}
	return Keep, nil
}
