package persistentvolume

import (
	"fmt"
	pathpkg "path"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Upstream's literal messages.
const (
	msgInlineForbidden     = "may not be specified in the context of inline volumes"
	msgInlineCSIRequired   = "has to be specified in the context of inline volumes"
	msgRWOPWithOthers      = "may not use ReadWriteOncePod with other access modes"
	msgInlineRetainOnly    = "may only be Retain in the context of inline volumes"
	msgInlineFilesystem    = "may not specify volumeMode other than Filesystem in the context of inline volumes"
	msgMoreThanOneType     = "may not specify more than 1 volume type"
	msgNoVolumeType        = "must specify a volume type"
	msgRecycleRoot         = "may not be 'recycle' for a hostPath mount of '/'"
	msgLocalNeedsAffinity  = "Local volume requires node affinity"
	msgAffinityRequired    = "must specify required node constraints"
	msgNoSelectorTerms     = "must have at least one node selector term"
	msgAbsolutePath        = "must be an absolute path"
	msgBacksteps           = "must not contain '..'"
	msgNotPositive         = "must be greater than zero"
	msgNotQuantity         = "must be a valid resource quantity"
	msgSourceImmutable     = "spec.persistentvolumesource is immutable after creation"
	msgVACEmpty            = "an empty string is disallowed"
	msgVACNeedsCSI         = "has to be specified when using volumeAttributesClassName"
	msgVACGateOff          = "update is forbidden when the VolumeAttributesClass feature gate is disabled"
	msgVACToNil            = "update from non-nil value to nil is forbidden"
	msgMountOptions        = "may not specify mount options for this volume type"
	msgInOrNotInNeedValues = "must be specified when `operator` is 'In' or 'NotIn'"
	msgExistsNoValues      = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
	msgGtLtOneValue        = "must be specified single value when `operator` is 'Lt' or 'Gt'"
	msgBadOperator         = "not a valid selector operator"
	msgFieldOneValue       = "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"
	msgBadFieldKey         = "not a valid field selector key"
)

// AnnMountOptions is the deprecated annotation that carries mount options.
const AnnMountOptions = "volume.beta.kubernetes.io/mount-options"

// MaxCSIDriverNameLength is the longest CSI driver name.
const MaxCSIDriverNameLength = 63

// Supported values, in the sorted order upstream lists them.
var (
	accessModes = []corev1.PersistentVolumeAccessMode{
		corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod,
	}
	reclaimPolicies = []corev1.PersistentVolumeReclaimPolicy{
		corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain,
	}
	volumeModes   = []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}
	hostPathTypes = []corev1.HostPathType{
		corev1.HostPathUnset, corev1.HostPathBlockDev, corev1.HostPathCharDev, corev1.HostPathDirectory,
		corev1.HostPathDirectoryOrCreate, corev1.HostPathFile, corev1.HostPathFileOrCreate, corev1.HostPathSocket,
	}
)

var (
	accessModeSet    = sets.New(accessModes...)
	reclaimPolicySet = sets.New(reclaimPolicies...)
	volumeModeSet    = sets.New(volumeModes...)
	hostPathTypeSet  = sets.New(hostPathTypes...)
)

// IsAccessMode reports whether m is one of the four access modes.
func IsAccessMode(m corev1.PersistentVolumeAccessMode) bool {
	return accessModeSet.Has(m)
}

// ValidateAccessModes checks a non-empty list of known modes where
// ReadWriteOncePod stands alone; requiredDetail is the Required error's
// detail (volumes say nothing, claims say "at least 1 access mode is
// required").
func ValidateAccessModes(modes []corev1.PersistentVolumeAccessMode, requiredDetail string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(path, requiredDetail))
	}
	rwop, others := false, false
	for _, m := range modes {
		switch {
		case !IsAccessMode(m):
			errs = append(errs, field.NotSupported(path, m, accessModes))
		case m == corev1.ReadWriteOncePod:
			rwop = true
		default:
			others = true
		}
	}
	if rwop && others {
		errs = append(errs, field.Forbidden(path, msgRWOPWithOthers))
	}
	return errs
}

// Validate checks a volume on create (upstream ValidatePersistentVolume
// without the metadata part, plus its mount-option annotation check).
func Validate(pv *corev1.PersistentVolume) field.ErrorList {
	return validate(pv, false, false)
}

func validate(pv *corev1.PersistentVolume, allowVAC, allowInvalidAffinityValues bool) field.ErrorList {
	errs := ValidateSpec(&pv.Spec, SpecOptions{
		VolumeAttributesClass:      allowVAC,
		InvalidAffinityLabelValues: allowInvalidAffinityValues,
	}, field.NewPath("spec"))
	return append(errs, validateMountOptionAnnotation(pv)...)
}

// SpecOptions relax ValidateSpec.
type SpecOptions struct {
	// Inline validates the spec of a VolumeAttachment's inline volume:
	// csi is required and claimRef, capacity, nodeAffinity and
	// storageClassName are forbidden.
	Inline bool
	// VolumeAttributesClass checks spec.volumeAttributesClassName (its
	// feature is off, so only a stored object that has it keeps it).
	VolumeAttributesClass bool
	// InvalidAffinityLabelValues accepts node affinity values that are not
	// label values, for updates of objects stored with such a value.
	InvalidAffinityLabelValues bool
}

// ValidateSpec checks a PersistentVolumeSpec at path (upstream
// ValidatePersistentVolumeSpec): access modes, capacity (exactly the
// storage resource, positive), the reclaim policy, node affinity, exactly
// one volume source and its fields, the class name and the volume mode.
func ValidateSpec(spec *corev1.PersistentVolumeSpec, opts SpecOptions, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if opts.Inline {
		if spec.ClaimRef != nil {
			errs = append(errs, field.Forbidden(path.Child("claimRef"), msgInlineForbidden))
		}
		if len(spec.Capacity) != 0 {
			errs = append(errs, field.Forbidden(path.Child("capacity"), msgInlineForbidden))
		}
		if spec.CSI == nil {
			errs = append(errs, field.Required(path.Child("csi"), msgInlineCSIRequired))
		}
	}
	errs = append(errs, ValidateAccessModes(spec.AccessModes, "", path.Child("accessModes"))...)

	if !opts.Inline {
		errs = append(errs, validateCapacity(spec.Capacity, path.Child("capacity"))...)
	}

	if p := spec.PersistentVolumeReclaimPolicy; p != "" {
		switch {
		case opts.Inline && p != corev1.PersistentVolumeReclaimRetain:
			errs = append(errs, field.Forbidden(path.Child("persistentVolumeReclaimPolicy"), msgInlineRetainOnly))
		case !opts.Inline && !reclaimPolicySet.Has(p):
			errs = append(errs, field.NotSupported(path.Child("persistentVolumeReclaimPolicy"), p, reclaimPolicies))
		}
	}

	affinity := false
	if spec.NodeAffinity != nil {
		if opts.Inline {
			errs = append(errs, field.Forbidden(path.Child("nodeAffinity"), msgInlineForbidden))
		} else {
			affinity = true
			errs = append(errs, validateVolumeNodeAffinity(spec.NodeAffinity, opts.InvalidAffinityLabelValues, path.Child("nodeAffinity"))...)
		}
	}

	errs = append(errs, validateSources(&spec.PersistentVolumeSource, affinity, path)...)

	if spec.HostPath != nil && pathpkg.Clean(spec.HostPath.Path) == "/" && spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle {
		errs = append(errs, field.Forbidden(path.Child("persistentVolumeReclaimPolicy"), msgRecycleRoot))
	}

	if c := spec.StorageClassName; c != "" {
		if opts.Inline {
			errs = append(errs, field.Forbidden(path.Child("storageClassName"), msgInlineForbidden))
		} else {
			for _, msg := range apivalidation.NameIsDNSSubdomain(c, false) {
				errs = append(errs, field.Invalid(path.Child("storageClassName"), c, msg))
			}
		}
	}

	if m := spec.VolumeMode; m != nil {
		switch {
		case opts.Inline && *m != corev1.PersistentVolumeFilesystem:
			errs = append(errs, field.Forbidden(path.Child("volumeMode"), msgInlineFilesystem))
		case !opts.Inline && !volumeModeSet.Has(*m):
			errs = append(errs, field.NotSupported(path.Child("volumeMode"), *m, volumeModes))
		}
	}

	if c := spec.VolumeAttributesClassName; c != nil && opts.VolumeAttributesClass {
		vacPath := path.Child("volumeAttributesClassName")
		if *c == "" {
			errs = append(errs, field.Required(vacPath, msgVACEmpty))
		} else {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*c, false) {
				errs = append(errs, field.Invalid(vacPath, *c, msg))
			}
		}
		if spec.CSI == nil {
			errs = append(errs, field.Required(path.Child("csi"), msgVACNeedsCSI))
		}
	}
	return errs
}

// validateCapacity: capacity holds exactly "storage", with a positive
// quantity (every listed resource is checked).
func validateCapacity(capacity corev1.ResourceList, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(capacity) == 0 {
		errs = append(errs, field.Required(path, ""))
	}
	if _, ok := capacity[corev1.ResourceStorage]; !ok || len(capacity) > 1 {
		errs = append(errs, field.NotSupported(path, capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for _, name := range sets.List(sets.KeySet(capacity)) {
		errs = append(errs, ValidatePositiveQuantity(capacity[name], true, path.Key(string(name)))...)
	}
	return errs
}

// ValidatePositiveQuantity refuses a negative quantity ("must be a valid
// resource quantity", when basic is set) and one that is not above zero.
func ValidatePositiveQuantity(q resource.Quantity, basic bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if basic && q.Value() < 0 {
		errs = append(errs, field.Invalid(path, q.Value(), msgNotQuantity))
	}
	// Sign, not Cmp with zero: Cmp rescales, which takes seconds for
	// quantities like "1e9999999".
	if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(path, q.String(), msgNotPositive))
	}
	return errs
}

// source is one of the volume sources a spec may set.
type source struct {
	// name is the field name the "more than 1" error uses; check, when
	// set, validates the source's fields.
	name  string
	set   bool
	check func() field.ErrorList
}

// validateSources enforces exactly one source, walking them in
// upstream's order (the first set one counts, every later one is "may not
// specify more than 1 volume type"), and checks the fields of hostPath,
// nfs, local and csi. flexVolume is counted but never refused, as
// upstream.
func validateSources(s *corev1.PersistentVolumeSource, affinity bool, path *field.Path) field.ErrorList {
	sources := []source{
		{name: "hostPath", set: s.HostPath != nil, check: func() field.ErrorList { return validateHostPath(s.HostPath, path.Child("hostPath")) }},
		{name: "gcePersistentDisk", set: s.GCEPersistentDisk != nil},
		{name: "awsElasticBlockStore", set: s.AWSElasticBlockStore != nil},
		{name: "glusterfs", set: s.Glusterfs != nil},
		{name: "flocker", set: s.Flocker != nil},
		{name: "nfs", set: s.NFS != nil, check: func() field.ErrorList { return validateNFS(s.NFS, path.Child("nfs")) }},
		{name: "rbd", set: s.RBD != nil},
		{name: "quobyte", set: s.Quobyte != nil},
		{name: "cephFS", set: s.CephFS != nil},
		{name: "iscsi", set: s.ISCSI != nil},
		{name: "cinder", set: s.Cinder != nil},
		{name: "fc", set: s.FC != nil},
		{name: "flexVolume", set: s.FlexVolume != nil},
		{name: "azureFile", set: s.AzureFile != nil},
		{name: "vsphereVolume", set: s.VsphereVolume != nil},
		{name: "photonPersistentDisk", set: s.PhotonPersistentDisk != nil},
		{name: "portworxVolume", set: s.PortworxVolume != nil},
		{name: "azureDisk", set: s.AzureDisk != nil},
		{name: "scaleIO", set: s.ScaleIO != nil},
		{name: "local", set: s.Local != nil, check: func() field.ErrorList {
			errs := validateLocal(s.Local, path.Child("local"))
			if !affinity {
				errs = append(errs, field.Required(path.Child("nodeAffinity"), msgLocalNeedsAffinity))
			}
			return errs
		}},
		{name: "storageos", set: s.StorageOS != nil},
		{name: "csi", set: s.CSI != nil, check: func() field.ErrorList { return validateCSI(s.CSI, path.Child("csi")) }},
	}
	var errs field.ErrorList
	count := 0
	for _, src := range sources {
		if !src.set {
			continue
		}
		if count > 0 && src.name != "flexVolume" {
			errs = append(errs, field.Forbidden(path.Child(src.name), msgMoreThanOneType))
			continue
		}
		count++
		if src.check != nil {
			errs = append(errs, src.check()...)
		}
	}
	if count == 0 {
		errs = append(errs, field.Required(path, msgNoVolumeType))
	}
	return errs
}

func validateHostPath(h *corev1.HostPathVolumeSource, path *field.Path) field.ErrorList {
	if h.Path == "" {
		return field.ErrorList{field.Required(path.Child("path"), "")}
	}
	errs := validateNoBacksteps(h.Path, path.Child("path"))
	if t := h.Type; t != nil && !hostPathTypeSet.Has(*t) {
		errs = append(errs, field.NotSupported(path.Child("type"), *t, hostPathTypes))
	}
	return errs
}

func validateNFS(n *corev1.NFSVolumeSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n.Server == "" {
		errs = append(errs, field.Required(path.Child("server"), ""))
	}
	if n.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), ""))
	}
	if !pathpkg.IsAbs(n.Path) {
		errs = append(errs, field.Invalid(path.Child("path"), n.Path, msgAbsolutePath))
	}
	return errs
}

func validateLocal(l *corev1.LocalVolumeSource, path *field.Path) field.ErrorList {
	if l.Path == "" {
		return field.ErrorList{field.Required(path.Child("path"), "")}
	}
	return validateNoBacksteps(l.Path, path.Child("path"))
}

// validateNoBacksteps refuses a path with a ".." element.
func validateNoBacksteps(p string, path *field.Path) field.ErrorList {
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return field.ErrorList{field.Invalid(path, p, msgBacksteps)}
		}
	}
	return nil
}

func validateCSI(c *corev1.CSIPersistentVolumeSource, path *field.Path) field.ErrorList {
	errs := ValidateCSIDriverName(c.Driver, path.Child("driver"))
	if c.VolumeHandle == "" {
		errs = append(errs, field.Required(path.Child("volumeHandle"), ""))
	}
	for _, ref := range []struct {
		name string
		ref  *corev1.SecretReference
	}{
		{"controllerPublishSecretRef", c.ControllerPublishSecretRef},
		{"controllerExpandSecretRef", c.ControllerExpandSecretRef},
		{"nodePublishSecretRef", c.NodePublishSecretRef},
		{"nodeExpandSecretRef", c.NodeExpandSecretRef},
	} {
		if ref.ref != nil {
			errs = append(errs, validateSecretRef(ref.ref, path.Child(ref.name))...)
		}
	}
	return errs
}

// validateSecretRef: a secret reference names a DNS-subdomain secret in a
// DNS-label namespace.
func validateSecretRef(ref *corev1.SecretReference, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ref.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(ref.Name) {
			errs = append(errs, field.Invalid(path.Child("name"), ref.Name, msg))
		}
	}
	if ref.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(ref.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), ref.Namespace, msg))
		}
	}
	return errs
}

// ValidateCSIDriverName checks a CSI driver name as upstream's
// ValidateCSIDriverName does: required, at most 63 bytes, and a DNS
// subdomain once lowercased. Volumes, CSINode drivers and
// VolumeAttachment attachers share it.
func ValidateCSIDriverName(name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(path, ""))
	}
	if len(name) > MaxCSIDriverNameLength {
		errs = append(errs, field.TooLong(path, name, MaxCSIDriverNameLength))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// validateVolumeNodeAffinity: required node constraints must be there and
// be a valid node selector.
func validateVolumeNodeAffinity(a *corev1.VolumeNodeAffinity, allowInvalidValues bool, path *field.Path) field.ErrorList {
	if a.Required == nil {
		return field.ErrorList{field.Required(path.Child("required"), msgAffinityRequired)}
	}
	return validateNodeSelector(a.Required, allowInvalidValues, path.Child("required"))
}

func validateNodeSelector(ns *corev1.NodeSelector, allowInvalidValues bool, path *field.Path) field.ErrorList {
	termsPath := path.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, msgNoSelectorTerms)}
	}
	var errs field.ErrorList
	for i, term := range ns.NodeSelectorTerms {
		termPath := termsPath.Index(i)
		for j, req := range term.MatchExpressions {
			errs = append(errs, validateSelectorRequirement(req, allowInvalidValues, termPath.Child("matchExpressions").Index(j))...)
		}
		for j, req := range term.MatchFields {
			errs = append(errs, validateFieldRequirement(req, termPath.Child("matchFields").Index(j))...)
		}
	}
	return errs
}

func validateSelectorRequirement(req corev1.NodeSelectorRequirement, allowInvalidValues bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	valuesPath := path.Child("values")
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, msgInOrNotInNeedValues))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(valuesPath, msgExistsNoValues))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(valuesPath, msgGtLtOneValue))
		}
	default:
		errs = append(errs, field.Invalid(path.Child("operator"), req.Operator, msgBadOperator))
	}
	errs = append(errs, metav1validation.ValidateLabelName(req.Key, path.Child("key"))...)
	if !allowInvalidValues {
		for i, v := range req.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(valuesPath.Index(i), v, msg))
			}
		}
	}
	return errs
}

// validateFieldRequirement: only metadata.name may be matched, with In or
// NotIn and exactly one value.
func validateFieldRequirement(req corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(path.Child("values"), msgFieldOneValue))
		}
	default:
		errs = append(errs, field.Invalid(path.Child("operator"), req.Operator, msgBadOperator))
	}
	if req.Key != "metadata.name" {
		return append(errs, field.Invalid(path.Child("key"), req.Key, msgBadFieldKey))
	}
	for i, v := range req.Values {
		for _, msg := range apivalidation.NameIsDNSSubdomain(v, false) {
			errs = append(errs, field.Invalid(path.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

// validateMountOptionAnnotation refuses the mount-options annotation on
// volume types that upstream says cannot take mount options (csi,
// hostPath and local among them).
func validateMountOptionAnnotation(pv *corev1.PersistentVolume) field.ErrorList {
	s := &pv.Spec
	if s.GCEPersistentDisk != nil || s.AWSElasticBlockStore != nil || s.Glusterfs != nil || s.NFS != nil ||
		s.RBD != nil || s.Quobyte != nil || s.ISCSI != nil || s.Cinder != nil || s.CephFS != nil ||
		s.AzureFile != nil || s.VsphereVolume != nil || s.AzureDisk != nil || s.PhotonPersistentDisk != nil {
		return nil
	}
	if _, ok := pv.Annotations[AnnMountOptions]; ok {
		return field.ErrorList{field.Forbidden(field.NewPath("metadata", "annotations", AnnMountOptions), msgMountOptions)}
	}
	return nil
}

// ValidateUpdate checks an update of the main resource: every create rule
// plus the update rules. The volume source never changes (except that a
// csi source may gain a controllerExpandSecretRef), nor does volumeMode; a
// node affinity, once set, never changes; volumeAttributesClassName never
// changes (its feature is off). The volumeMode and nodeAffinity paths are
// upstream's, without "spec.".
func ValidateUpdate(pv, old *corev1.PersistentVolume) field.ErrorList {
	errs := validate(pv, old.Spec.VolumeAttributesClassName != nil, hasInvalidAffinityValue(old))

	src := &pv.Spec.PersistentVolumeSource
	if old.Spec.CSI != nil && old.Spec.CSI.ControllerExpandSecretRef == nil && src.CSI != nil && src.CSI.ControllerExpandSecretRef != nil {
		src = src.DeepCopy()
		src.CSI.ControllerExpandSecretRef = nil
	}
	if !apiequality.Semantic.DeepEqual(*src, old.Spec.PersistentVolumeSource) {
		diff := cmp.Diff(old.Spec.PersistentVolumeSource, *src)
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"), fmt.Sprintf("%s\n%v", msgSourceImmutable, diff)))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.NodeAffinity, old.Spec.NodeAffinity, field.NewPath("nodeAffinity"))...)
	}
	if !apiequality.Semantic.DeepEqual(pv.Spec.VolumeAttributesClassName, old.Spec.VolumeAttributesClassName) {
		vacPath := field.NewPath("spec", "volumeAttributesClassName")
		errs = append(errs, field.Forbidden(vacPath, msgVACGateOff))
		if old.Spec.VolumeAttributesClassName != nil && pv.Spec.VolumeAttributesClassName == nil {
			errs = append(errs, field.Forbidden(vacPath, msgVACToNil))
		}
	}
	return errs
}

// hasInvalidAffinityValue reports whether pv's node affinity holds a value
// that is not a label value, which an update may then keep.
func hasInvalidAffinityValue(pv *corev1.PersistentVolume) bool {
	a := pv.Spec.NodeAffinity
	if a == nil || a.Required == nil {
		return false
	}
	for _, term := range a.Required.NodeSelectorTerms {
		for _, req := range term.MatchExpressions {
			for _, v := range req.Values {
				if len(validation.IsValidLabelValue(v)) > 0 {
					return true
				}
			}
		}
	}
	return false
}
