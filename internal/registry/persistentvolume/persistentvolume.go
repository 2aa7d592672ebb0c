// Package persistentvolume holds the API rules for core/v1
// PersistentVolumes (cluster-scoped, short name "pv", with /status): the v1
// defaults, what create and update may change, validation of the spec, the
// table kubectl prints and the selectable fields. It also exports the
// volume rules other storage kinds share: ValidateSpec (a VolumeAttachment's
// inline spec) and ValidateCSIDriverName (CSINode drivers, attachers).
//
// It follows Kubernetes 1.33 with its default feature gates:
// VolumeAttributesClass is off, so spec.volumeAttributesClassName is
// dropped unless the stored object already has it, and a change of it is
// refused.
//
// Callers (the generic REST layer) use Kind() and pass
// *corev1.PersistentVolume; every function is pure.
//
// What it does not do: bind, provision or reclaim (the PV controller
// does), or manage the kubernetes.io/pv-protection finalizer (the
// protection controller adds it; the REST layer's deletion rules honour
// it, and a PV without DeleteGracePeriod goes as soon as its finalizers
// are gone).
//
// Upstream deviations, on purpose:
//   - ValidateUpdate runs the spec checks once; upstream runs them twice,
//     so Status.details.causes lists each spec error twice there.
//   - Of the volume sources only hostPath, local, nfs and csi have their
//     fields checked; the other in-tree sources are counted (one source
//     only, at least one) but their fields are not.
//   - Only hostPath sources get defaults (type ""); upstream also defaults
//     fields of the rbd, iscsi, azureDisk and scaleIO sources.
//   - A status update that changes the phase keeps the
//     lastPhaseTransitionTime the client sent (or the old one when it sent
//     none and the phase is unchanged); upstream stamps the current time
//     when the phase changes, and the status rules here get no clock.
//   - spec.persistentvolumesource's immutability message ends with a diff
//     of the v1 types, where upstream diffs its internal types.
package persistentvolume

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Kind returns the rules for the "persistentvolumes" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "persistentvolumes",
		Kind:         "PersistentVolume",
		ListKind:     "PersistentVolumeList",
		SingularName: "persistentvolume",
		ShortNames:   []string{"pv"},
		HasStatus:    true,

		New:     func() runtime.Object { return &corev1.PersistentVolume{} },
		NewList: func() runtime.Object { return &corev1.PersistentVolumeList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*corev1.PersistentVolume)) },
		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*corev1.PersistentVolume)) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			prepareForUpdate(obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*corev1.PersistentVolume)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				prepareForStatusUpdate(obj.(*corev1.PersistentVolume), old.(*corev1.PersistentVolume))
			},
			// Upstream checks only metadata on a status update.
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList { return nil },
		},

		Columns: columns(),
		Row:     row,
		Fields:  func(obj runtime.Object) fields.Set { return Fields(obj.(*corev1.PersistentVolume)) },
	}
}

// Default applies upstream's v1 defaults: status.phase Pending,
// persistentVolumeReclaimPolicy Retain and volumeMode Filesystem when
// unset, and a hostPath source's type "" (no check) when unset.
func Default(pv *corev1.PersistentVolume) {
	if pv.Status.Phase == "" {
		pv.Status.Phase = corev1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
	DefaultSource(&pv.Spec.PersistentVolumeSource)
}

// DefaultSource applies the defaults of the volume sources this package
// knows: a hostPath source's type becomes "" when unset.
func DefaultSource(src *corev1.PersistentVolumeSource) {
	if src.HostPath != nil && src.HostPath.Type == nil {
		t := corev1.HostPathUnset
		src.HostPath.Type = &t
	}
}

// prepareForCreate: the creator's status is replaced by phase Pending,
// which starts at the creation time the REST layer already stamped.
func prepareForCreate(pv *corev1.PersistentVolume) {
	created := pv.CreationTimestamp
	pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &created}
	pv.Spec.VolumeAttributesClassName = nil
}

// prepareForUpdate: the main resource cannot change status, nor start
// using volumeAttributesClassName.
func prepareForUpdate(pv, old *corev1.PersistentVolume) {
	pv.Status = *old.Status.DeepCopy()
	if old.Spec.VolumeAttributesClassName == nil {
		pv.Spec.VolumeAttributesClassName = nil
	}
}

// prepareForStatusUpdate: the status subresource cannot change spec; an
// unchanged phase keeps its transition time unless the client sent one.
func prepareForStatusUpdate(pv, old *corev1.PersistentVolume) {
	pv.Spec = *old.Spec.DeepCopy()
	if pv.Status.Phase == old.Status.Phase && pv.Status.LastPhaseTransitionTime == nil {
		pv.Status.LastPhaseTransitionTime = old.Status.LastPhaseTransitionTime.DeepCopy()
	}
}

// Fields returns the selectable fields upstream offers for volumes:
// metadata.name and, for compatibility, "name".
func Fields(pv *corev1.PersistentVolume) fields.Set {
	set := registry.DefaultFields(pv, false)
	set["name"] = pv.Name
	return set
}
