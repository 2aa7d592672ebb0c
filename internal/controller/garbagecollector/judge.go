package garbagecollector

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// OwnerKey names a possible owner of a dependent: its group ("" for
// core), kind, namespace and name.
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
	// Keep leaves the dependent as it is.
	Keep Action = iota
	// Delete deletes the dependent: every owner it names is gone, or waits
	// for its dependents to go.
	Delete
	// Trim removes the references Judge returns and keeps the dependent:
	// those owners are gone (or orphan their dependents) while another
	// owner stays.
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

// Judge decides the fate of dep (a pod, claim or revision) from its
// ownerReferences, background propagation: an owner of a kind known
// reports is present when owners has it, in dep's namespace, under the
// same UID; an owner of another kind is taken as present (the collector
// cannot look it up). A dependent whose every owner is gone (or is being
// deleted in the foreground) is deleted; references to gone or orphaning
// owners are removed from a dependent that keeps another owner; a
// dependent whose owners all orphan it just loses those references. An
// owner being deleted without those finalizers is present. Judge reads dep
// and owners and changes neither.
func Judge(dep metav1.Object, owners map[OwnerKey]Owner, known func(group, kind string) bool) (Action, []metav1.OwnerReference) {
	refs := dep.GetOwnerReferences()
	if len(refs) == 0 {
		return Keep, nil
	}
	var remove []metav1.OwnerReference
	solid, gone := 0, 0
	for _, ref := range refs {
		group, ok := refGroup(ref)
		if !ok || !known(group, ref.Kind) {
			solid++
			continue
		}
		o, ok := owners[OwnerKey{Group: group, Kind: ref.Kind, Namespace: dep.GetNamespace(), Name: ref.Name}]
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

// refGroup is the API group of ref's owner ("" for core); ok is false when
// ref's apiVersion is not a group/version or a core version.
func refGroup(ref metav1.OwnerReference) (group string, ok bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Version == "" {
		return "", false
	}
	return gv.Group, true
}
