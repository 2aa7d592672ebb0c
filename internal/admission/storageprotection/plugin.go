// Package storageprotection is upstream's StorageObjectInUseProtection
// admission plugin: every new PersistentVolumeClaim carries the finalizer
// kubernetes.io/pvc-protection and every new PersistentVolume
// kubernetes.io/pv-protection, so that neither disappears while in use.
// The PVC and PV protection controllers remove the finalizers once nothing
// uses the object any more.
//
// On create of a persistentvolumeclaims or persistentvolumes object (not a
// subresource) it appends the kind's finalizer unless the object already
// carries it. Other operations and kinds pass untouched, as does an
// object of an unexpected type.
//
// What the caller must do: run it after defaulting and before validation,
// with the typed object in Object; it changes that object in place and
// never refuses a write.
//
// It does not remove finalizers and does not decide whether an object is
// in use: that is the protection controllers' work.
package storageprotection

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/apiserver"
	"knode/internal/volume"
)

// Name is the plugin's name, as upstream's.
const Name = "StorageObjectInUseProtection"

// Plugin is the admission plugin; it has no state and is safe for
// concurrent use.
type Plugin struct{}

var _ apiserver.Admitter = (*Plugin)(nil)

// New returns the plugin.
func New() *Plugin { return &Plugin{} }

// Admit implements apiserver.Admitter.
func (*Plugin) Admit(_ context.Context, a apiserver.AdmissionAttributes) error {
	if a.Kind == nil || a.Kind.GroupVersion.Group != "" || a.Operation != "CREATE" || a.Subresource != "" {
		return nil
	}
	switch a.Kind.Resource {
	case "persistentvolumeclaims":
		if claim, ok := a.Object.(*corev1.PersistentVolumeClaim); ok {
			claim.Finalizers = withFinalizer(claim.Finalizers, volume.PVCProtectionFinalizer)
		}
	case "persistentvolumes":
		if pv, ok := a.Object.(*corev1.PersistentVolume); ok {
			pv.Finalizers = withFinalizer(pv.Finalizers, volume.PVProtectionFinalizer)
		}
	}
	return nil
}

// withFinalizer returns finalizers with f appended, unless it is there.
func withFinalizer(finalizers []string, f string) []string {
	if slices.Contains(finalizers, f) {
		return finalizers
	}
	return append(finalizers, f)
}
