// Package persistentvolumeclaim holds the API rules for core/v1
// PersistentVolumeClaims (namespaced, short name "pvc", with /status): the
// v1 defaults, the data-source normalisation upstream applies on every
// write, validation of the spec and of status updates, the narrow set of
// spec changes an update may make, the table kubectl prints and the
// selectable fields.
//
// It follows Kubernetes 1.33 with its default feature gates:
// RecoverVolumeExpansionFailure is on (a bound claim's request may shrink,
// but not to or below status.capacity, and status.allocatedResources and
// allocatedResourceStatuses are checked); AnyVolumeDataSource is on;
// VolumeAttributesClass and CrossNamespaceVolumeDataSource are off, so
// spec.volumeAttributesClassName, spec.dataSourceRef.namespace,
// status.currentVolumeAttributesClassName and status.modifyVolumeStatus
// are dropped unless the stored object already has them.
//
// Callers (the generic REST layer) use Kind() and pass
// *corev1.PersistentVolumeClaim; every function is pure.
//
// What it does not do: bind or provision (the PV controller and the
// provisioners do), pick a default class (the DefaultStorageClass
// admission plugin does), or manage kubernetes.io/pvc-protection (the
// protection controller adds it; the REST layer honours it on delete).
//
// Upstream deviations, on purpose:
//   - ValidateUpdate runs the spec checks once; upstream runs them twice,
//     so Status.details.causes lists each spec error twice there.
//   - The "spec is immutable" message ends with a diff of the v1 types,
//     where upstream diffs its internal types.
package persistentvolumeclaim

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
	"knode/internal/registry/persistentvolume"
	"knode/internal/volume"
)

// Upstream's literal messages.
const (
	msgAccessModeRequired  = "at least 1 access mode is required"
	msgDataSourceKind      = "must be 'PersistentVolumeClaim' when referencing the default apiGroup"
	msgDataSourceWithNS    = "may not be specified when dataSourceRef.namespace is specified"
	msgDataSourceMismatch  = "must match dataSourceRef"
	msgSpecImmutable       = "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims"
	msgBelowStatusCapacity = "field can not be less than status.capacity"
	msgVACGateOff          = "update is forbidden when the VolumeAttributesClass feature gate is disabled"
	msgVACToNil            = "update from non-nil value to nil is forbidden"
	msgVACToEmpty          = "update from non-nil value to an empty string is forbidden"
	msgNotQuantity         = "must be a valid resource quantity"
	msgImmutable           = "field is immutable"
	snapshotGroup          = "snapshot.storage.k8s.io"
	kindClaim              = "PersistentVolumeClaim"
)

var resizeStatuses = []corev1.ClaimResourceStatus{
	corev1.PersistentVolumeClaimControllerResizeInProgress,
	corev1.PersistentVolumeClaimControllerResizeInfeasible,
	corev1.PersistentVolumeClaimNodeResizeInProgress,
	corev1.PersistentVolumeClaimNodeResizeInfeasible,
	corev1.PersistentVolumeClaimNodeResizePending,
}

// Kind returns the rules for the "persistentvolumeclaims" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: corev1.SchemeGroupVersion,
		Resource:     "persistentvolumeclaims",
		Kind:         "PersistentVolumeClaim",
		ListKind:     "PersistentVolumeClaimList",
		SingularName: "persistentvolumeclaim",
		ShortNames:   []string{"pvc"},
		Namespaced:   true,
		HasStatus:    true,

		New:     func() runtime.Object { return &corev1.PersistentVolumeClaim{} },
		NewList: func() runtime.Object { return &corev1.PersistentVolumeClaimList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*corev1.PersistentVolumeClaim)) },
		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*corev1.PersistentVolumeClaim)) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			prepareForUpdate(obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*corev1.PersistentVolumeClaim)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				prepareForStatusUpdate(obj.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateStatusUpdate(obj.(*corev1.PersistentVolumeClaim))
			},
		},

		Columns: columns(),
		Row:     row,
		Fields:  func(obj runtime.Object) fields.Set { return Fields(obj.(*corev1.PersistentVolumeClaim)) },
	}
}

// Default applies upstream's v1 defaults: status.phase Pending and
// spec.volumeMode Filesystem when unset.
func Default(pvc *corev1.PersistentVolumeClaim) {
	if pvc.Status.Phase == "" {
		pvc.Status.Phase = corev1.ClaimPending
	}
	if pvc.Spec.VolumeMode == nil {
		m := corev1.PersistentVolumeFilesystem
		pvc.Spec.VolumeMode = &m
	}
}

// prepareForCreate: the status becomes phase Pending and nothing else;
// disabled fields go; the data source fields are normalised.
func prepareForCreate(pvc *corev1.PersistentVolumeClaim) {
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
	dropDisabledSpecFields(&pvc.Spec, nil)
	enforceDataSourceCompatibility(&pvc.Spec, nil)
	NormalizeDataSources(&pvc.Spec)
}

// prepareForUpdate: the main resource cannot change status; disabled
// fields old did not use go; the data source fields are normalised.
func prepareForUpdate(pvc, old *corev1.PersistentVolumeClaim) {
	pvc.Status = *old.Status.DeepCopy()
	dropDisabledSpecFields(&pvc.Spec, &old.Spec)
	enforceDataSourceCompatibility(&pvc.Spec, &old.Spec)
	NormalizeDataSources(&pvc.Spec)
}

// prepareForStatusUpdate: the status subresource cannot change spec, nor
// start using the status fields of disabled features.
func prepareForStatusUpdate(pvc, old *corev1.PersistentVolumeClaim) {
	pvc.Spec = *old.Spec.DeepCopy()
	if old.Status.CurrentVolumeAttributesClassName == nil {
		pvc.Status.CurrentVolumeAttributesClassName = nil
	}
	if old.Status.ModifyVolumeStatus == nil {
		pvc.Status.ModifyVolumeStatus = nil
	}
}

// dropDisabledSpecFields removes volumeAttributesClassName and
// dataSourceRef.namespace unless old (nil on create) uses them.
func dropDisabledSpecFields(spec, old *corev1.PersistentVolumeClaimSpec) {
	if old == nil || old.VolumeAttributesClassName == nil {
		spec.VolumeAttributesClassName = nil
	}
	if spec.DataSourceRef != nil && (old == nil || old.DataSourceRef == nil || old.DataSourceRef.Namespace == nil || *old.DataSourceRef.Namespace == "") {
		spec.DataSourceRef.Namespace = nil
	}
}

// enforceDataSourceCompatibility drops a dataSource that is neither a
// claim nor a VolumeSnapshot when no dataSourceRef states intent, unless
// old already had a dataSource (an old client may resend it).
func enforceDataSourceCompatibility(spec, old *corev1.PersistentVolumeClaimSpec) {
	if old != nil && old.DataSource != nil {
		return
	}
	if spec.DataSourceRef != nil || spec.DataSource == nil {
		return
	}
	group := ""
	if spec.DataSource.APIGroup != nil {
		group = *spec.DataSource.APIGroup
	}
	claim := group == "" && spec.DataSource.Kind == kindClaim
	snapshot := group == snapshotGroup && spec.DataSource.Kind == "VolumeSnapshot"
	if !claim && !snapshot {
		spec.DataSource = nil
	}
}

// NormalizeDataSources fills whichever of dataSource and dataSourceRef is
// missing from the other, as upstream does on every write; a
// dataSourceRef into another namespace has no dataSource equivalent.
func NormalizeDataSources(spec *corev1.PersistentVolumeClaimSpec) {
	switch {
	case spec.DataSource != nil && spec.DataSourceRef == nil:
		spec.DataSourceRef = &corev1.TypedObjectReference{Kind: spec.DataSource.Kind, Name: spec.DataSource.Name}
		if g := spec.DataSource.APIGroup; g != nil {
			group := *g
			spec.DataSourceRef.APIGroup = &group
		}
	case spec.DataSourceRef != nil && spec.DataSource == nil:
		if ns := spec.DataSourceRef.Namespace; ns != nil && *ns != "" {
			return
		}
		spec.DataSource = &corev1.TypedLocalObjectReference{Kind: spec.DataSourceRef.Kind, Name: spec.DataSourceRef.Name}
		if g := spec.DataSourceRef.APIGroup; g != nil {
			group := *g
			spec.DataSource.APIGroup = &group
		}
	}
}

// options relax the spec checks for updates of objects stored under
// laxer rules (upstream's PersistentVolumeClaimSpecValidationOptions).
type options struct {
	invalidSelectorValues bool
	anyDataSourceGroup    bool
	volumeAttributesClass bool
}

// optionsFor returns the relaxations old earns; nil old (a create) earns
// none.
func optionsFor(old *corev1.PersistentVolumeClaim) options {
	if old == nil {
		return options{}
	}
	s := &old.Spec
	return options{
		invalidSelectorValues: s.Selector != nil && len(metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0,
		anyDataSourceGroup:    (s.DataSource != nil && s.DataSource.APIGroup != nil) || (s.DataSourceRef != nil && s.DataSourceRef.APIGroup != nil),
		volumeAttributesClass: s.VolumeAttributesClassName != nil,
	}
}

// Validate checks a new claim (upstream ValidatePersistentVolumeClaim
// without the metadata part).
func Validate(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	return validateSpec(&pvc.Spec, optionsFor(nil), field.NewPath("spec"))
}

// validateSpec checks access modes, the selector, a positive storage
// request, the class names, the volume mode and the data sources.
func validateSpec(spec *corev1.PersistentVolumeClaimSpec, opts options, path *field.Path) field.ErrorList {
	errs := persistentvolume.ValidateAccessModes(spec.AccessModes, msgAccessModeRequired, path.Child("accessModes"))
	if spec.Selector != nil {
		sopts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: opts.invalidSelectorValues}
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, sopts, path.Child("selector"))...)
	}
	storagePath := path.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(storagePath, ""))
	} else {
		errs = append(errs, persistentvolume.ValidatePositiveQuantity(q, false, storagePath)...)
	}
	if c := spec.StorageClassName; c != nil && *c != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*c, false) {
			errs = append(errs, field.Invalid(path.Child("storageClassName"), *c, msg))
		}
	}
	if m := spec.VolumeMode; m != nil && *m != corev1.PersistentVolumeBlock && *m != corev1.PersistentVolumeFilesystem {
		errs = append(errs, field.NotSupported(path.Child("volumeMode"), *m, []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}))
	}
	errs = append(errs, validateDataSources(spec, opts.anyDataSourceGroup, path)...)
	if c := spec.VolumeAttributesClassName; c != nil && *c != "" && opts.volumeAttributesClass {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*c, false) {
			errs = append(errs, field.Invalid(path.Child("volumeAttributesClassName"), *c, msg))
		}
	}
	return errs
}

// validateDataSources: each reference has a name and a kind, a reference
// in the core group is to a claim, an API group is a DNS subdomain (unless
// anyGroup), a dataSourceRef namespace is a namespace name; and with both
// fields set they agree, or dataSource is absent when dataSourceRef
// crosses namespaces.
func validateDataSources(spec *corev1.PersistentVolumeClaimSpec, anyGroup bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ds := spec.DataSource; ds != nil {
		errs = append(errs, validateReference(ds.Name, ds.Kind, ds.APIGroup, anyGroup, path.Child("dataSource"))...)
	}
	ref := spec.DataSourceRef
	if ref != nil {
		refPath := path.Child("dataSourceRef")
		errs = append(errs, validateReference(ref.Name, ref.Kind, ref.APIGroup, anyGroup, refPath)...)
		if ns := ref.Namespace; ns != nil && *ns != "" {
			for _, msg := range apivalidation.ValidateNamespaceName(*ns, false) {
				errs = append(errs, field.Invalid(refPath.Child("namespace"), *ns, msg))
			}
		}
	}
	dsPath := path.Child("dataSource").String()
	switch {
	case ref != nil && ref.Namespace != nil && *ref.Namespace != "":
		if spec.DataSource != nil {
			errs = append(errs, field.Invalid(path, dsPath, msgDataSourceWithNS))
		}
	case spec.DataSource != nil && ref != nil:
		ds := spec.DataSource
		if !persistentvolume.Semantic.DeepEqual(ds.APIGroup, ref.APIGroup) || ds.Kind != ref.Kind || ds.Name != ref.Name {
			errs = append(errs, field.Invalid(path, dsPath, msgDataSourceMismatch))
		}
	}
	return errs
}

func validateReference(name, kind string, apiGroup *string, anyGroup bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	if kind == "" {
		errs = append(errs, field.Required(path.Child("kind"), ""))
	}
	group := ""
	if apiGroup != nil {
		group = *apiGroup
	}
	if group == "" && kind != kindClaim {
		errs = append(errs, field.Invalid(path, kind, msgDataSourceKind))
	}
	if group != "" && !anyGroup {
		for _, msg := range validation.IsDNS1123Subdomain(group) {
			errs = append(errs, field.Invalid(path.Child("apiGroup"), group, msg))
		}
	}
	return errs
}

// ValidateUpdate checks an update of the main resource: every create rule
// (relaxed for what old already had) plus the update rules. The spec is
// immutable except that volumeName may be set once, storageClassName may
// go from unset to set (to the beta annotation's class when old has the
// annotation), and a bound claim's storage request may change; the
// request may not drop to or below status.capacity; volumeMode and the
// beta class annotation never change.
func ValidateUpdate(pvc, old *corev1.PersistentVolumeClaim) field.ErrorList {
	opts := optionsFor(old)
	errs := validateSpec(&pvc.Spec, opts, field.NewPath("spec"))

	// Compare against old as upstream's preparation leaves it: with its
	// data sources normalised.
	newSpec := pvc.Spec.DeepCopy()
	oldSpec := old.Spec.DeepCopy()
	NormalizeDataSources(oldSpec)
	if oldSpec.VolumeName == "" {
		oldSpec.VolumeName = newSpec.VolumeName
	}
	if classUpgradeFromAnnotation(old, pvc) {
		newSpec.StorageClassName = nil
	} else {
		oldAnn, newAnn := old.Annotations[volume.AnnBetaStorageClass], pvc.Annotations[volume.AnnBetaStorageClass]
		if oldAnn != newAnn {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations", volume.AnnBetaStorageClass), newAnn, msgImmutable))
		}
		if classUpgradeFromNil(old, pvc) {
			newSpec.StorageClassName = oldSpec.StorageClassName
		}
	}
	bound := pvc.Status.Phase == corev1.ClaimBound
	if bound && newSpec.Resources.Requests != nil {
		newSpec.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	if bound && newSpec.VolumeAttributesClassName != nil {
		newSpec.VolumeAttributesClassName = oldSpec.VolumeAttributesClassName
	}
	if !persistentvolume.Semantic.DeepEqual(*newSpec, *oldSpec) {
		diff := cmp.Diff(*oldSpec, *newSpec, quantityComparer)
		errs = append(errs, field.Forbidden(field.NewPath("spec"), fmt.Sprintf("%s\n%v", msgSpecImmutable, diff)))
	}

	oldSize := old.Spec.Resources.Requests[corev1.ResourceStorage]
	newSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	statusSize := old.Status.Capacity[corev1.ResourceStorage]
	if persistentvolume.CompareQuantities(newSize, oldSize) < 0 && persistentvolume.CompareQuantities(newSize, statusSize) <= 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), msgBelowStatusCapacity))
	}

	errs = append(errs, apivalidation.ValidateImmutableField(pvc.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)

	if !persistentvolume.Semantic.DeepEqual(old.Spec.VolumeAttributesClassName, pvc.Spec.VolumeAttributesClassName) {
		vacPath := field.NewPath("spec", "volumeAttributesClassName")
		errs = append(errs, field.Forbidden(vacPath, msgVACGateOff))
		if old.Spec.VolumeAttributesClassName != nil {
			switch {
			case pvc.Spec.VolumeAttributesClassName == nil:
				errs = append(errs, field.Forbidden(vacPath, msgVACToNil))
			case *pvc.Spec.VolumeAttributesClassName == "":
				errs = append(errs, field.Forbidden(vacPath, msgVACToEmpty))
			}
		}
	}
	return errs
}

// quantityComparer lets cmp.Diff compare quantities by value, cheaply.
var quantityComparer = cmp.Comparer(func(a, b resource.Quantity) bool {
	return persistentvolume.CompareQuantities(a, b) == 0
})

// classUpgradeFromAnnotation: old names its class only in the beta
// annotation, the update sets storageClassName to that class and keeps
// (or drops) the annotation unchanged.
func classUpgradeFromAnnotation(old, pvc *corev1.PersistentVolumeClaim) bool {
	oldClass, oldHas := old.Annotations[volume.AnnBetaStorageClass]
	newAnn, newHas := pvc.Annotations[volume.AnnBetaStorageClass]
	return oldHas && old.Spec.StorageClassName == nil &&
		pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == oldClass &&
		(!newHas || newAnn == oldClass)
}

// classUpgradeFromNil: old has no storageClassName and the update sets
// one, which must be the beta annotation's class when old has that
// annotation (retroactive default class assignment).
func classUpgradeFromNil(old, pvc *corev1.PersistentVolumeClaim) bool {
	oldAnn, oldHas := old.Annotations[volume.AnnBetaStorageClass]
	return pvc.Spec.StorageClassName != nil && old.Spec.StorageClassName == nil &&
		(!oldHas || *pvc.Spec.StorageClassName == oldAnn)
}

// ValidateStatusUpdate checks an update through /status: the spec still
// has access modes (reported at upstream's "Spec.accessModes"), capacities
// are not negative, and the resize bookkeeping names only storage (or a
// qualified non-native resource) with known resize states.
func ValidateStatusUpdate(pvc *corev1.PersistentVolumeClaim) field.ErrorList {
	var errs field.ErrorList
	if len(pvc.Spec.AccessModes) == 0 {
		errs = append(errs, field.Required(field.NewPath("Spec", "accessModes"), ""))
	}
	capPath := field.NewPath("status", "capacity")
	for _, name := range sets.List(sets.KeySet(pvc.Status.Capacity)) {
		q := pvc.Status.Capacity[name]
		if q.Value() < 0 {
			errs = append(errs, field.Invalid(capPath.Key(string(name)), q.Value(), msgNotQuantity))
		}
	}
	statusPath := field.NewPath("status", "allocatedResourceStatus")
	known := sets.New(resizeStatuses...)
	for _, name := range sets.List(sets.KeySet(pvc.Status.AllocatedResourceStatuses)) {
		errs = append(errs, validateResourceKey(string(name), statusPath)...)
		if !known.Has(pvc.Status.AllocatedResourceStatuses[name]) {
			errs = append(errs, field.NotSupported(statusPath, name, resizeStatuses))
		}
	}
	allocPath := field.NewPath("status", "allocatedResources")
	for _, name := range sets.List(sets.KeySet(pvc.Status.AllocatedResources)) {
		if keyErrs := validateResourceKey(string(name), allocPath); len(keyErrs) > 0 {
			errs = append(errs, keyErrs...)
			continue
		}
		q := pvc.Status.AllocatedResources[name]
		if q.Value() < 0 {
			errs = append(errs, field.Invalid(allocPath.Key(string(name)), q.Value(), msgNotQuantity))
		}
	}
	return errs
}

// validateResourceKey: a qualified name; a native one (no "/" or a
// kubernetes.io/ prefix) must be "storage".
func validateResourceKey(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) > 0 {
		return errs
	}
	native := !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
	if native && name != string(corev1.ResourceStorage) {
		errs = append(errs, field.NotSupported(path, name, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	return errs
}

// Fields returns the selectable fields upstream offers for claims:
// metadata.name, metadata.namespace and, for compatibility, "name".
func Fields(pvc *corev1.PersistentVolumeClaim) fields.Set {
	set := registry.DefaultFields(pvc, true)
	set["name"] = pvc.Name
	return set
}

// columns are the server-side printer's claim columns, upstream's
// spelling; VolumeMode is a wide column.
func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := corev1.PersistentVolumeClaimSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeClaimStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Volume", Type: "string", Description: spec["volumeName"]},
		{Name: "Capacity", Type: "string", Description: status["capacity"]},
		{Name: "Access Modes", Type: "string", Description: status["accessModes"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pvc"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pvc"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
}

// row returns one cell per column, the wide one included. A claim being
// deleted shows STATUS Terminating; CAPACITY and ACCESS MODES come from
// status and are empty until the claim names a volume.
func row(obj runtime.Object, now time.Time) []interface{} {
	pvc := obj.(*corev1.PersistentVolumeClaim)
	phase := string(pvc.Status.Phase)
	if pvc.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	capacity, modes := "", ""
	if pvc.Spec.VolumeName != "" {
		q := pvc.Status.Capacity[corev1.ResourceStorage]
		capacity = q.String()
		modes = persistentvolume.AccessModes(pvc.Status.AccessModes)
	}
	return []interface{}{
		pvc.Name,
		phase,
		pvc.Spec.VolumeName,
		capacity,
		modes,
		Class(pvc),
		orUnset(pvc.Spec.VolumeAttributesClassName),
		age(pvc.CreationTimestamp, now),
		orUnset((*string)(pvc.Spec.VolumeMode)),
	}
}

// Class is the STORAGECLASS cell, read as kubectl reads it: the beta
// annotation when present (even empty), else spec.storageClassName, else
// "".
func Class(pvc *corev1.PersistentVolumeClaim) string {
	if c, ok := pvc.Annotations[volume.AnnBetaStorageClass]; ok {
		return c
	}
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return ""
}

func orUnset(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
