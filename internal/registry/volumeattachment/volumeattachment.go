// Package volumeattachment holds the API rules for storage.k8s.io/v1
// VolumeAttachments (cluster-scoped, with /status): validation of the
// attacher, the source (exactly one of persistentVolumeName and
// inlineVolumeSpec), the node name and the status (attachment metadata
// and error sizes), the rule that the spec never changes, what each of the
// main resource and /status may change, the table kubectl prints and the
// selectable fields.
//
// It follows Kubernetes 1.33 with its default feature gates:
// MutableCSINodeAllocatableCount is off, so a status update cannot start
// setting attachError.errorCode or detachError.errorCode.
//
// Callers (the generic REST layer) use Kind() and pass
// *storagev1.VolumeAttachment; every function is pure.
//
// What it does not do: attach anything. The attach/detach controller
// creates and deletes these objects, an attacher (knode's own or
// csi-attacher) fills in the status and owns the external-attacher
// finalizer; the REST layer honours finalizers on delete.
//
// Upstream deviation, on purpose: ValidateUpdate reports each error once;
// upstream runs the object checks twice on update, so Status.details.causes
// lists them twice there.
package volumeattachment

import (
	"math"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
	"knode/internal/registry/persistentvolume"
)

// Upstream's literal messages and limits.
const (
	msgExactlyOneSource = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
	msgEmptyPVName      = "must specify non empty persistentVolumeName"
	msgImmutable        = "field is immutable"

	// MaxAttachmentMetadataSize bounds the summed length of
	// status.attachmentMetadata's keys and values, in bytes.
	MaxAttachmentMetadataSize = 256 * (1 << 10)
	// MaxErrorMessageSize bounds attachError.message and
	// detachError.message, in bytes.
	MaxErrorMessageSize = 1024
)

// Kind returns the rules for the "volumeattachments" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: storagev1.SchemeGroupVersion,
		Resource:     "volumeattachments",
		Kind:         "VolumeAttachment",
		ListKind:     "VolumeAttachmentList",
		SingularName: "volumeattachment",
		HasStatus:    true,

		New:     func() runtime.Object { return &storagev1.VolumeAttachment{} },
		NewList: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },

		Default: func(obj runtime.Object) {
			if s := obj.(*storagev1.VolumeAttachment).Spec.Source.InlineVolumeSpec; s != nil {
				persistentvolume.DefaultSource(&s.PersistentVolumeSource)
			}
		},
		PrepareForCreate: func(obj runtime.Object) {
			obj.(*storagev1.VolumeAttachment).Status = storagev1.VolumeAttachmentStatus{}
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			obj.(*storagev1.VolumeAttachment).Status = *old.(*storagev1.VolumeAttachment).Status.DeepCopy()
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*storagev1.VolumeAttachment)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				prepareForStatusUpdate(obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateUpdate(obj.(*storagev1.VolumeAttachment), old.(*storagev1.VolumeAttachment))
			},
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*storagev1.VolumeAttachment), false)
		},
	}
}

// prepareForStatusUpdate: a status update keeps old's spec and metadata
// (labels, annotations, finalizers, owners included) and cannot start
// setting an error code.
func prepareForStatusUpdate(va, old *storagev1.VolumeAttachment) {
	va.Spec = *old.Spec.DeepCopy()
	metav1.ResetObjectMetaForStatus(&va.ObjectMeta, &old.ObjectMeta)
	if e := va.Status.AttachError; e != nil && (old.Status.AttachError == nil || old.Status.AttachError.ErrorCode == nil) {
		e.ErrorCode = nil
	}
	if e := va.Status.DetachError; e != nil && (old.Status.DetachError == nil || old.Status.DetachError.ErrorCode == nil) {
		e.ErrorCode = nil
	}
}

// Validate checks a new attachment: the shared rules, then the stricter
// ones upstream applies only to v1 creates (the attacher is a CSI driver
// name, persistentVolumeName a DNS subdomain).
func Validate(va *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateObject(va)
	errs = append(errs, persistentvolume.ValidateCSIDriverName(va.Spec.Attacher, field.NewPath("spec", "attacher"))...)
	if name := va.Spec.Source.PersistentVolumeName; name != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*name, false) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "source", "persistentVolumeName"), *name, msg))
		}
	}
	return errs
}

// ValidateUpdate checks an update of either the main resource or /status:
// the shared rules, and a spec equal to old's ("field is immutable").
func ValidateUpdate(va, old *storagev1.VolumeAttachment) field.ErrorList {
	errs := validateObject(va)
	if !persistentvolume.Semantic.DeepEqual(va.Spec, old.Spec) {
		errs = append(errs, field.Invalid(field.NewPath("spec"), va.Spec, msgImmutable))
	}
	return errs
}

// validateObject holds upstream's ValidateVolumeAttachment: an attacher,
// exactly one source, a node name that is a DNS subdomain, and a status
// within its size limits.
func validateObject(va *storagev1.VolumeAttachment) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if va.Spec.Attacher == "" {
		errs = append(errs, field.Required(spec.Child("attacher"), ""))
	}
	errs = append(errs, validateSource(&va.Spec.Source, spec.Child("source"))...)
	for _, msg := range apivalidation.NameIsDNSSubdomain(va.Spec.NodeName, false) {
		errs = append(errs, field.Invalid(spec.Child("nodeName"), va.Spec.NodeName, msg))
	}
	return append(errs, ValidateStatus(&va.Status, field.NewPath("status"))...)
}

func validateSource(src *storagev1.VolumeAttachmentSource, path *field.Path) field.ErrorList {
	switch {
	case src.InlineVolumeSpec == nil && src.PersistentVolumeName == nil:
		return field.ErrorList{field.Required(path, msgExactlyOneSource)}
	case src.InlineVolumeSpec != nil && src.PersistentVolumeName != nil:
		return field.ErrorList{field.Forbidden(path, msgExactlyOneSource)}
	case src.PersistentVolumeName != nil:
		if *src.PersistentVolumeName == "" {
			return field.ErrorList{field.Required(path.Child("persistentVolumeName"), msgEmptyPVName)}
		}
		return nil
	default:
		return persistentvolume.ValidateSpec(src.InlineVolumeSpec, persistentvolume.SpecOptions{Inline: true}, path.Child("inlineVolumeSpec"))
	}
}

// ValidateStatus checks a status: attachmentMetadata of at most 256 KiB,
// error messages of at most 1024 bytes and non-negative error codes. The
// limit quoted for a long message is upstream's (it names the metadata
// limit).
func ValidateStatus(s *storagev1.VolumeAttachmentStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for k, v := range s.AttachmentMetadata {
		size += len(k) + len(v)
	}
	if size > MaxAttachmentMetadataSize {
		errs = append(errs, field.TooLong(path.Child("attachmentMetadata"), "", MaxAttachmentMetadataSize))
	}
	errs = append(errs, validateVolumeError(s.AttachError, path.Child("attachError"))...)
	errs = append(errs, validateVolumeError(s.DetachError, path.Child("detachError"))...)
	return errs
}

func validateVolumeError(e *storagev1.VolumeError, path *field.Path) field.ErrorList {
	if e == nil {
		return nil
	}
	var errs field.ErrorList
	if len(e.Message) > MaxErrorMessageSize {
		errs = append(errs, field.TooLong(path.Child("message"), "", MaxAttachmentMetadataSize))
	}
	if e.ErrorCode != nil && *e.ErrorCode < 0 {
		errs = append(errs, field.Invalid(path.Child("errorCode"), *e.ErrorCode, validation.InclusiveRangeError(0, math.MaxInt32)))
	}
	return errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := storagev1.VolumeAttachmentSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Attacher", Type: "string", Format: "name", Description: spec["attacher"]},
		{Name: "PV", Type: "string", Description: storagev1.VolumeAttachmentSource{}.SwaggerDoc()["persistentVolumeName"]},
		{Name: "Node", Type: "string", Description: spec["nodeName"]},
		{Name: "Attached", Type: "boolean", Description: storagev1.VolumeAttachmentStatus{}.SwaggerDoc()["attached"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// row is kubectl's attachment row; PV is "" for an inline volume.
func row(obj runtime.Object, now time.Time) []interface{} {
	va := obj.(*storagev1.VolumeAttachment)
	pv := ""
	if n := va.Spec.Source.PersistentVolumeName; n != nil {
		pv = *n
	}
	return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp, now)}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
