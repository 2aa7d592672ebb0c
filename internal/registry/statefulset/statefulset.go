// Package statefulset holds the API rules for apps/v1 StatefulSets: the
// defaults (those of the pod template and of each volume claim template
// included), validation of the spec, the few spec fields an update may
// change, the status subresource's rules, generation, the /scale mapping,
// the table kubectl prints and the selectable fields.
//
// It follows Kubernetes 1.33 with its default feature gates:
// MaxUnavailableStatefulSet is off, so spec.updateStrategy.rollingUpdate.
// maxUnavailable is neither defaulted nor kept (unless the stored object
// already has it); StatefulSetAutoDeletePVC and StatefulSetStartOrdinal are
// GA, so persistentVolumeClaimRetentionPolicy is defaulted and ordinals are
// kept. spec.serviceName is optional; a new StatefulSet's must be a DNS
// label, an update does not check it (it cannot change anyway). The name
// must be a DNS label (pod host names are made from it); the REST layer
// checks names as DNS subdomains, so Validate adds only what a label
// forbids beyond that. A negative revisionHistoryLimit is accepted, as
// upstream accepts it (its controller then prunes no history).
//
// Callers (the generic REST layer) use Kind() and pass *appsv1.StatefulSet.
// Every function is pure.
//
// Upstream deviations, on purpose (both are upstream's own 1.34 fixes, taken
// early because an object failing them can never run):
//   - The pod template is validated as a pod (podtemplate.ValidateForController),
//     with a volume for each claim template, as the pods the controller
//     makes will have them; upstream 1.33 checks only the template's labels
//     and annotations.
//   - A new StatefulSet's volumeClaimTemplates are validated as claims: a
//     DNS-label name and the claim spec rules of persistentvolumeclaim
//     (access modes, a storage request, ...). Updates skip them, as
//     upstream does (they are immutable).
//
// What it does not do: run the pods or create the claims (the StatefulSet
// controller does), keep the ControllerRevisions (package
// controllerrevision serves them), or drop disabled pod template fields.
package statefulset

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
	"knode/internal/registry/persistentvolume"
	"knode/internal/registry/persistentvolumeclaim"
	"knode/internal/registry/podtemplate"
)

// Defaults, upstream's.
const (
	DefaultReplicas             int32 = 1
	DefaultRevisionHistoryLimit int32 = 10
)

// Upstream's literal messages.
const (
	msgEmptySelector    = "empty selector is invalid for statefulset"
	msgOnlyRollingUpd   = "only allowed for updateStrategy 'RollingUpdate'"
	msgStrategyType     = "must be 'RollingUpdate' or 'OnDelete'"
	msgPodManagement    = "must be 'OrderedReady' or 'Parallel'"
	msgCannotBeZero     = "cannot be 0"
	msgPercentOver      = "must not be greater than 100%"
	msgNotIntOrPercent  = "must be an integer or percentage (e.g '5%')"
	msgSpecUpdate       = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
	msgNotAboveReplicas = "cannot be greater than status.replicas"
	msgNotAboveReady    = "cannot be greater than status.readyReplicas"
	msgNotDecremented   = "cannot be decremented"
)

var retentionPolicies = []string{
	string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType),
	string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType),
}

// Kind returns the rules for the "statefulsets" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "statefulsets",
		Kind:         "StatefulSet",
		ListKind:     "StatefulSetList",
		SingularName: "statefulset",
		ShortNames:   []string{"sts"},
		Categories:   []string{"all"},
		Namespaced:   true,
		HasStatus:    true,

		New:     func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList: func() runtime.Object { return &appsv1.StatefulSetList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*appsv1.StatefulSet)) },
		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*appsv1.StatefulSet)) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			prepareForUpdate(obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*appsv1.StatefulSet)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.StatefulSet).Spec = *old.(*appsv1.StatefulSet).Spec.DeepCopy()
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateStatusUpdate(obj.(*appsv1.StatefulSet), old.(*appsv1.StatefulSet))
			},
		},
		Scale: &registry.ScaleRules{Get: scaleGet, Set: scaleSet},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*appsv1.StatefulSet), true)
		},
	}
}

// Default is apps/v1's SetDefaults_StatefulSet (podManagementPolicy
// OrderedReady; updateStrategy RollingUpdate, whose rollingUpdate gets
// partition 0; persistentVolumeClaimRetentionPolicy Retain/Retain;
// replicas 1; revisionHistoryLimit 10) plus the pod template's defaults and
// each volume claim template's claim defaults. An explicit RollingUpdate
// type without rollingUpdate stays without it, as upstream.
func Default(ss *appsv1.StatefulSet) {
	spec := &ss.Spec
	if spec.PodManagementPolicy == "" {
		spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
	}
	s := &spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateStatefulSetStrategyType
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
	}
	if s.Type == appsv1.RollingUpdateStatefulSetStrategyType && s.RollingUpdate != nil && s.RollingUpdate.Partition == nil {
		zero := int32(0)
		s.RollingUpdate.Partition = &zero
	}
	if spec.PersistentVolumeClaimRetentionPolicy == nil {
		spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted == "" {
		p.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenScaled == "" {
		p.WhenScaled = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	}
	if spec.Replicas == nil {
		n := DefaultReplicas
		spec.Replicas = &n
	}
	if spec.RevisionHistoryLimit == nil {
		n := DefaultRevisionHistoryLimit
		spec.RevisionHistoryLimit = &n
	}
	podtemplate.Default(&spec.Template)
	for i := range spec.VolumeClaimTemplates {
		defaultClaimTemplate(&spec.VolumeClaimTemplates[i])
	}
}

// defaultClaimTemplate gives a claim template what upstream's decoder gives
// any claim: status.phase Pending, volumeMode Filesystem, and every
// quantity rounded up to whole milli-units. A zero written with an
// exponent ("0e99999999") becomes a plain zero, as the pod defaults do:
// it reads the same, and later comparisons stay cheap.
func defaultClaimTemplate(c *corev1.PersistentVolumeClaim) {
	persistentvolumeclaim.Default(c)
	for _, list := range []corev1.ResourceList{
		c.Spec.Resources.Requests, c.Spec.Resources.Limits, c.Status.Capacity, c.Status.AllocatedResources,
	} {
		for name, q := range list {
			q.RoundUp(resource.Milli)
			if q.IsZero() {
				q = resource.Quantity{Format: q.Format}
			}
			list[name] = q
		}
	}
}

func prepareForCreate(ss *appsv1.StatefulSet) {
	ss.Status = appsv1.StatefulSetStatus{}
	ss.Generation = 1
	dropMaxUnavailable(ss, nil)
}

// prepareForUpdate keeps the stored status and moves the generation on when
// the spec changed. Specs compare with persistentvolume.Semantic, which
// stays cheap on extreme quantities (apimachinery's takes minutes to
// compare "1e99999999" with "1").
func prepareForUpdate(ss, old *appsv1.StatefulSet) {
	ss.Status = *old.Status.DeepCopy()
	dropMaxUnavailable(ss, old)
	if !persistentvolume.Semantic.DeepEqual(ss.Spec, old.Spec) {
		ss.Generation = old.Generation + 1
	}
}

// dropMaxUnavailable clears rollingUpdate.maxUnavailable, a field of the
// MaxUnavailableStatefulSet gate (off in 1.33), unless old (nil on create)
// already uses it.
func dropMaxUnavailable(ss, old *appsv1.StatefulSet) {
	if old != nil && old.Spec.UpdateStrategy.RollingUpdate != nil && old.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil {
		return
	}
	if ru := ss.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		ru.MaxUnavailable = nil
	}
}

// Validate checks a new StatefulSet: its name as a DNS label, and its spec
// (upstream ValidateStatefulSet without the common metadata).
func Validate(ss *appsv1.StatefulSet) field.ErrorList {
	errs := validateLabelName(ss)
	return append(errs, validateSpec(&ss.Spec, true, field.NewPath("spec"))...)
}

// validateLabelName reports what NameIsDNSLabel refuses in the name and
// generateName beyond what NameIsDNSSubdomain (the REST layer's rule, which
// reports those errors itself) already refuses: dots and length.
func validateLabelName(ss *appsv1.StatefulSet) field.ErrorList {
	meta := field.NewPath("metadata")
	var errs field.ErrorList
	check := func(value string, prefix bool, path *field.Path) {
		if value == "" || len(apivalidation.NameIsDNSSubdomain(value, prefix)) > 0 {
			return
		}
		for _, msg := range apivalidation.NameIsDNSLabel(value, prefix) {
			errs = append(errs, field.Invalid(path, value, msg))
		}
	}
	check(ss.GenerateName, true, meta.Child("generateName"))
	check(ss.Name, false, meta.Child("name"))
	return errs
}

// ValidateUpdate checks an update of the main resource (upstream
// ValidateStatefulSetUpdate): the spec rules (without the serviceName
// format and the claim templates), and that only replicas, ordinals,
// template, updateStrategy, revisionHistoryLimit,
// persistentVolumeClaimRetentionPolicy and minReadySeconds changed.
func ValidateUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	errs := validateSpec(&ss.Spec, false, field.NewPath("spec"))
	rest := ss.Spec.DeepCopy()
	rest.Replicas = old.Spec.Replicas
	rest.Ordinals = old.Spec.Ordinals
	rest.Template = old.Spec.Template
	rest.UpdateStrategy = old.Spec.UpdateStrategy
	rest.RevisionHistoryLimit = old.Spec.RevisionHistoryLimit
	rest.PersistentVolumeClaimRetentionPolicy = old.Spec.PersistentVolumeClaimRetentionPolicy
	rest.MinReadySeconds = old.Spec.MinReadySeconds
	if !persistentvolume.Semantic.DeepEqual(*rest, old.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), msgSpecUpdate))
	}
	return errs
}

// validateSpec is upstream's ValidateStatefulSetSpec plus the two checks
// the package comment lists. create adds what only a new object must pass:
// the serviceName format and the claim templates.
func validateSpec(spec *appsv1.StatefulSetSpec, create bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(path.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(path.Child("podManagementPolicy"), spec.PodManagementPolicy, msgPodManagement))
	}
	errs = append(errs, validateUpdateStrategy(&spec.UpdateStrategy, path.Child("updateStrategy"))...)
	if p := spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		rp := path.Child("persistentVolumeClaimRetentionPolicy")
		errs = append(errs, validateRetention(p.WhenDeleted, rp.Child("whenDeleted"))...)
		errs = append(errs, validateRetention(p.WhenScaled, rp.Child("whenScaled"))...)
	}
	if create {
		errs = append(errs, validateClaimTemplates(spec.VolumeClaimTemplates, path.Child("volumeClaimTemplates"))...)
	}
	if spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*spec.Replicas), path.Child("replicas"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.MinReadySeconds), path.Child("minReadySeconds"))...)
	if spec.Ordinals != nil {
		// Upstream names the field with one child, "ordinals.start".
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(spec.Ordinals.Start), path.Child("ordinals.start"))...)
	}
	if create && spec.ServiceName != "" {
		for _, msg := range validation.IsDNS1123Label(spec.ServiceName) {
			errs = append(errs, field.Invalid(path.Child("serviceName"), spec.ServiceName, msg))
		}
	}

	selPath := path.Child("selector")
	if spec.Selector == nil {
		errs = append(errs, field.Required(selPath, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, spec.Selector, msgEmptySelector))
		}
	}
	selector := spec.Selector
	if _, err := metav1.LabelSelectorAsSelector(spec.Selector); err != nil {
		errs = append(errs, field.Invalid(selPath, spec.Selector, ""))
		// Upstream skips the template when the selector does not parse but
		// still checks restartPolicy and activeDeadlineSeconds; an empty
		// selector keeps those checks without a spurious label mismatch.
		selector = &metav1.LabelSelector{}
	}
	errs = append(errs, podtemplate.ValidateForController(withClaimVolumes(spec), selector, "StatefulSet", path.Child("template"))...)
	return errs
}

func validateUpdateStrategy(s *appsv1.StatefulSetUpdateStrategy, path *field.Path) field.ErrorList {
	switch s.Type {
	case "":
		return field.ErrorList{field.Required(path, "")}
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Invalid(path.Child("rollingUpdate"), s.RollingUpdate, msgOnlyRollingUpd)}
		}
		return nil
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if s.RollingUpdate == nil {
			return nil
		}
		ru := path.Child("rollingUpdate")
		var errs field.ErrorList
		if s.RollingUpdate.Partition != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.RollingUpdate.Partition), ru.Child("partition"))...)
		}
		if mu := s.RollingUpdate.MaxUnavailable; mu != nil {
			errs = append(errs, validateMaxUnavailable(*mu, ru.Child("maxUnavailable"))...)
		}
		return errs
	}
	return field.ErrorList{field.Invalid(path, *s, msgStrategyType)}
}

// validateMaxUnavailable: a non-negative integer or a valid percentage, not
// 0 (0% included), at most 100%.
func validateMaxUnavailable(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v, msg))
		}
	case intstr.Int:
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(v.IntVal), path)...)
	default:
		errs = append(errs, field.Invalid(path, v, msgNotIntOrPercent))
	}
	percent, isPercent := percentValue(v)
	value := percent
	if !isPercent {
		// As upstream: a malformed string counts by its leading number.
		value = v.IntValue()
	}
	if value == 0 {
		errs = append(errs, field.Invalid(path, v, msgCannotBeZero))
	}
	if isPercent && percent > 100 {
		errs = append(errs, field.Invalid(path, v, msgPercentOver))
	}
	return errs
}

// percentValue is the number of a well-formed percentage.
func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	// As upstream, an out-of-range number counts as the largest int.
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, true
}

func validateRetention(p appsv1.PersistentVolumeClaimRetentionPolicyType, path *field.Path) field.ErrorList {
	switch p {
	case appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.DeletePersistentVolumeClaimRetentionPolicyType:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, p, retentionPolicies)}
}

// validateClaimTemplates checks each claim template's name (a DNS label:
// it names a pod volume) and its spec by the claim rules, reported under
// <path>[i].spec.
func validateClaimTemplates(claims []corev1.PersistentVolumeClaim, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range claims {
		c := &claims[i]
		p := path.Index(i)
		namePath := p.Child("metadata", "name")
		if c.Name == "" {
			errs = append(errs, field.Required(namePath, ""))
		}
		for _, msg := range claimNameErrors(c.Name) {
			errs = append(errs, field.Invalid(namePath, c.Name, msg))
		}
		specPath := p.Child("spec").String()
		for _, e := range persistentvolumeclaim.Validate(c) {
			if rest, ok := strings.CutPrefix(e.Field, "spec"); ok {
				e.Field = specPath + rest
			} else {
				e.Field = p.String() + "." + e.Field
			}
			errs = append(errs, e)
		}
	}
	return errs
}

// claimNameErrors are the DNS-label errors of a non-empty claim template
// name.
func claimNameErrors(name string) []string {
	if name == "" {
		return nil
	}
	return validation.IsDNS1123Label(name)
}

// withClaimVolumes returns the template as the controller's pods will have
// it: a template volume named like a claim template becomes that claim (in
// place, so error paths stay right), and each other claim template with a
// valid name is appended as a volume. Without claim templates it returns
// the template itself.
func withClaimVolumes(spec *appsv1.StatefulSetSpec) *corev1.PodTemplateSpec {
	if len(spec.VolumeClaimTemplates) == 0 {
		return &spec.Template
	}
	t := spec.Template.DeepCopy()
	at := make(map[string]int, len(t.Spec.Volumes))
	for i, v := range t.Spec.Volumes {
		if _, dup := at[v.Name]; !dup {
			at[v.Name] = i
		}
	}
	for _, c := range spec.VolumeClaimTemplates {
		if c.Name == "" || len(claimNameErrors(c.Name)) > 0 {
			continue
		}
		v := corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name},
		}}
		if i, ok := at[c.Name]; ok {
			t.Spec.Volumes[i] = v
			continue
		}
		at[c.Name] = len(t.Spec.Volumes)
		t.Spec.Volumes = append(t.Spec.Volumes, v)
	}
	return t
}

// ValidateStatusUpdate checks an update through /status (upstream
// ValidateStatefulSetStatusUpdate): the counters, and that
// collisionCount never goes down.
func ValidateStatusUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	p := field.NewPath("status")
	errs := ValidateStatus(&ss.Status, p)
	if oc := old.Status.CollisionCount; oc != nil {
		nc := ss.Status.CollisionCount
		if nc == nil || *nc < *oc {
			var v int32
			if nc != nil {
				v = *nc
			}
			errs = append(errs, field.Invalid(p.Child("collisionCount"), v, msgNotDecremented))
		}
	}
	return errs
}

// ValidateStatus checks a status's counters (upstream
// ValidateStatefulSetStatus): none negative, none of ready, current,
// updated and available above replicas, available not above ready.
func ValidateStatus(s *appsv1.StatefulSetStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	nonNegative := func(v int64, name string) {
		errs = append(errs, apivalidation.ValidateNonnegativeField(v, path.Child(name))...)
	}
	nonNegative(int64(s.Replicas), "replicas")
	nonNegative(int64(s.ReadyReplicas), "readyReplicas")
	nonNegative(int64(s.CurrentReplicas), "currentReplicas")
	nonNegative(int64(s.UpdatedReplicas), "updatedReplicas")
	nonNegative(int64(s.AvailableReplicas), "availableReplicas")
	nonNegative(s.ObservedGeneration, "observedGeneration")
	if s.CollisionCount != nil {
		nonNegative(int64(*s.CollisionCount), "collisionCount")
	}
	for _, c := range []struct {
		name  string
		value int32
	}{
		{"readyReplicas", s.ReadyReplicas},
		{"currentReplicas", s.CurrentReplicas},
		{"updatedReplicas", s.UpdatedReplicas},
		{"availableReplicas", s.AvailableReplicas},
	} {
		if c.value > s.Replicas {
			errs = append(errs, field.Invalid(path.Child(c.name), c.value, msgNotAboveReplicas))
		}
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), s.AvailableReplicas, msgNotAboveReady))
	}
	return errs
}

// scaleGet maps a StatefulSet to a Scale: spec.replicas (0 when unset),
// status.replicas and the selector as upstream's scale subresource writes
// it ("" when there is none or it does not parse).
func scaleGet(obj runtime.Object) (spec, status int32, selector string) {
	ss := obj.(*appsv1.StatefulSet)
	if ss.Spec.Replicas != nil {
		spec = *ss.Spec.Replicas
	}
	if sel, err := metav1.LabelSelectorAsSelector(ss.Spec.Selector); err == nil {
		selector = sel.String()
	}
	return spec, ss.Status.Replicas, selector
}

func scaleSet(obj runtime.Object, replicas int32) {
	obj.(*appsv1.StatefulSet).Spec.Replicas = &replicas
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
	}
}

// row is kubectl's StatefulSet row: READY is "<ready>/<spec.replicas>";
// the last two cells are the -o wide ones.
func row(obj runtime.Object, now time.Time) []interface{} {
	ss := obj.(*appsv1.StatefulSet)
	var desired int32
	if ss.Spec.Replicas != nil {
		desired = *ss.Spec.Replicas
	}
	names, images := podtemplate.ContainerCells(&ss.Spec.Template)
	return []interface{}{
		ss.Name, fmt.Sprintf("%d/%d", ss.Status.ReadyReplicas, desired), age(ss.CreationTimestamp, now),
		names, images,
	}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
