// Package daemonset holds the API rules for apps/v1 DaemonSets: defaults
// (updateStrategy RollingUpdate with maxUnavailable 1 and maxSurge 0,
// revisionHistoryLimit 10), validation of the spec and of its pod template,
// the status subresource's rules, generation and template generation, the
// table kubectl prints and the selectable fields.
//
// The template generation is server-owned, as upstream: apps/v1 shows it as
// the annotation deprecated.daemonset.template.generation, "1" on create and
// one more on every update that changes spec.template; whatever a client
// writes there is replaced.
//
// Callers (the generic REST layer) use Kind() and pass *appsv1.DaemonSet.
// Every function is pure.
//
// What it does not do: run the daemon pods (the DaemonSet controller does)
// or keep ControllerRevisions (not served).
package daemonset

import (
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
	"knode/internal/registry/podtemplate"
)

// Defaults, upstream's.
const (
	DefaultRevisionHistoryLimit int32 = 10
	DefaultMaxUnavailable             = 1
)

// Upstream's literal messages.
const (
	msgEmptySelector  = "empty selector is invalid for daemonset"
	msgNonNegative    = "must be greater than or equal to 0"
	msgPercentOver    = "must not be greater than 100%"
	msgSurgeAndUnavl  = "may not be set when maxUnavailable is non-zero"
	msgBothZero       = "cannot be 0 when maxSurge is 0"
	msgNotDecremented = "cannot be decremented"
)

// Kind returns the rules for the "daemonsets" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "daemonsets",
		Kind:         "DaemonSet",
		ListKind:     "DaemonSetList",
		SingularName: "daemonset",
		ShortNames:   []string{"ds"},
		Categories:   []string{"all"},
		Namespaced:   true,
		HasStatus:    true,

		New:     func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList: func() runtime.Object { return &appsv1.DaemonSetList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*appsv1.DaemonSet)) },
		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*appsv1.DaemonSet)) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			prepareForUpdate(obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet))
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*appsv1.DaemonSet)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				ds, o := obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
				ds.Spec = *o.Spec.DeepCopy()
				setTemplateGeneration(ds, TemplateGeneration(o))
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateStatusUpdate(obj.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet))
			},
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*appsv1.DaemonSet), true)
		},
	}
}

// Default is apps/v1's SetDefaults_DaemonSet plus the pod template's
// defaults.
func Default(ds *appsv1.DaemonSet) {
	s := &ds.Spec.UpdateStrategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDaemonSetStrategyType
	}
	if s.Type == appsv1.RollingUpdateDaemonSetStrategyType {
		if s.RollingUpdate == nil {
			s.RollingUpdate = &appsv1.RollingUpdateDaemonSet{}
		}
		if s.RollingUpdate.MaxUnavailable == nil {
			v := intstr.FromInt32(DefaultMaxUnavailable)
			s.RollingUpdate.MaxUnavailable = &v
		}
		if s.RollingUpdate.MaxSurge == nil {
			v := intstr.FromInt32(0)
			s.RollingUpdate.MaxSurge = &v
		}
	}
	if ds.Spec.RevisionHistoryLimit == nil {
		limit := DefaultRevisionHistoryLimit
		ds.Spec.RevisionHistoryLimit = &limit
	}
	podtemplate.Default(&ds.Spec.Template)
}

// TemplateGeneration is the DaemonSet's template generation, read from the
// deprecated.daemonset.template.generation annotation; 0 when absent or not
// a number.
func TemplateGeneration(ds *appsv1.DaemonSet) int64 {
	g, err := strconv.ParseInt(ds.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

func setTemplateGeneration(ds *appsv1.DaemonSet, g int64) {
	if ds.Annotations == nil {
		ds.Annotations = map[string]string{}
	}
	ds.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(g, 10)
}

func prepareForCreate(ds *appsv1.DaemonSet) {
	ds.Status = appsv1.DaemonSetStatus{}
	ds.Generation = 1
	setTemplateGeneration(ds, 1)
}

// prepareForUpdate keeps the stored status, and moves the generation (and
// the template generation) on when the spec (the template) changed.
func prepareForUpdate(ds, old *appsv1.DaemonSet) {
	ds.Status = *old.Status.DeepCopy()
	gen := TemplateGeneration(old)
	switch {
	case !apiequality.Semantic.DeepEqual(ds.Spec.Template, old.Spec.Template):
		gen++
		ds.Generation = old.Generation + 1
	case !apiequality.Semantic.DeepEqual(ds.Spec, old.Spec):
		ds.Generation = old.Generation + 1
	}
	setTemplateGeneration(ds, gen)
}

// Validate checks a DaemonSet's spec (upstream ValidateDaemonSetSpec).
func Validate(ds *appsv1.DaemonSet) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if ds.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(ds.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
		if len(ds.Spec.Selector.MatchLabels)+len(ds.Spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(spec.Child("selector"), ds.Spec.Selector, msgEmptySelector))
		}
	}
	errs = append(errs, podtemplate.ValidateForController(&ds.Spec.Template, ds.Spec.Selector, "DaemonSet", spec.Child("template"))...)
	errs = append(errs, nonNegative(int64(ds.Spec.MinReadySeconds), spec.Child("minReadySeconds"))...)
	errs = append(errs, validateUpdateStrategy(&ds.Spec.UpdateStrategy, spec.Child("updateStrategy"))...)
	if ds.Spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*ds.Spec.RevisionHistoryLimit), spec.Child("revisionHistoryLimit"))...)
	}
	return errs
}

// ValidateUpdate is Validate plus the apps/v1 rule that the selector never
// changes.
func ValidateUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	errs := Validate(ds)
	return append(errs, apivalidation.ValidateImmutableField(ds.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

func validateUpdateStrategy(s *appsv1.DaemonSetUpdateStrategy, path *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
		return nil
	case appsv1.RollingUpdateDaemonSetStrategyType:
		if s.RollingUpdate == nil {
			return field.ErrorList{field.Required(path.Child("rollingUpdate"), "")}
		}
		ru := path.Child("rollingUpdate")
		unavailable, surge := intOrZero(s.RollingUpdate.MaxUnavailable), intOrZero(s.RollingUpdate.MaxSurge)
		var errs field.ErrorList
		errs = append(errs, validateIntOrPercent(unavailable, ru.Child("maxUnavailable"))...)
		errs = append(errs, validateIntOrPercent(surge, ru.Child("maxSurge"))...)
		hasUnavailable, hasSurge := intOrPercentValue(unavailable) != 0, intOrPercentValue(surge) != 0
		switch {
		case hasUnavailable && hasSurge:
			errs = append(errs, field.Invalid(ru.Child("maxSurge"), surge, msgSurgeAndUnavl))
		case !hasUnavailable && !hasSurge:
			errs = append(errs, field.Required(ru.Child("maxUnavailable"), msgBothZero))
		}
		return errs
	}
	return field.ErrorList{field.NotSupported(path, *s, []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)})}
}

func intOrZero(v *intstr.IntOrString) intstr.IntOrString {
	if v == nil {
		return intstr.FromInt32(0)
	}
	return *v
}

// validateIntOrPercent: a non-negative integer, or a percentage of at most
// 100% (upstream ValidatePositiveIntOrPercent and IsNotMoreThan100Percent).
func validateIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v, msg))
		}
		if len(errs) == 0 && intOrPercentValue(v) > 100 {
			errs = append(errs, field.Invalid(path, v, msgPercentOver))
		}
	case intstr.Int:
		errs = append(errs, nonNegative(int64(v.IntVal), path)...)
	}
	return errs
}

// intOrPercentValue is the number in v, percent or not; 0 for a malformed
// percentage.
func intOrPercentValue(v intstr.IntOrString) int {
	if v.Type == intstr.Int {
		return int(v.IntVal)
	}
	if len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0
	}
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n
}

// ValidateStatusUpdate checks the counters of a status update (upstream
// ValidateDaemonSetStatusUpdate).
func ValidateStatusUpdate(ds, old *appsv1.DaemonSet) field.ErrorList {
	p := field.NewPath("status")
	s := &ds.Status
	var errs field.ErrorList
	errs = append(errs, nonNegative(int64(s.CurrentNumberScheduled), p.Child("currentNumberScheduled"))...)
	errs = append(errs, nonNegative(int64(s.NumberMisscheduled), p.Child("numberMisscheduled"))...)
	errs = append(errs, nonNegative(int64(s.DesiredNumberScheduled), p.Child("desiredNumberScheduled"))...)
	errs = append(errs, nonNegative(int64(s.NumberReady), p.Child("numberReady"))...)
	errs = append(errs, nonNegative(s.ObservedGeneration, p.Child("observedGeneration"))...)
	errs = append(errs, nonNegative(int64(s.UpdatedNumberScheduled), p.Child("updatedNumberScheduled"))...)
	errs = append(errs, nonNegative(int64(s.NumberAvailable), p.Child("numberAvailable"))...)
	errs = append(errs, nonNegative(int64(s.NumberUnavailable), p.Child("numberUnavailable"))...)
	if s.CollisionCount != nil {
		errs = append(errs, nonNegative(int64(*s.CollisionCount), p.Child("collisionCount"))...)
	}
	if old.Status.CollisionCount != nil && (s.CollisionCount == nil || *s.CollisionCount < *old.Status.CollisionCount) {
		var v int32
		if s.CollisionCount != nil {
			v = *s.CollisionCount
		}
		errs = append(errs, field.Invalid(p.Child("collisionCount"), v, msgNotDecremented))
	}
	return errs
}

func nonNegative(v int64, path *field.Path) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(path, v, msgNonNegative)}
	}
	return nil
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	status := appsv1.DaemonSetStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Desired", Type: "integer", Description: status["desiredNumberScheduled"]},
		{Name: "Current", Type: "integer", Description: status["currentNumberScheduled"]},
		{Name: "Ready", Type: "integer", Description: status["numberReady"]},
		{Name: "Up-to-date", Type: "integer", Description: status["updatedNumberScheduled"]},
		{Name: "Available", Type: "integer", Description: status["numberAvailable"]},
		{Name: "Node Selector", Type: "string", Description: corev1.PodSpec{}.SwaggerDoc()["nodeSelector"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DaemonSetSpec{}.SwaggerDoc()["selector"]},
	}
}

// row is kubectl's DaemonSet row; the last three cells are the -o wide
// ones.
func row(obj runtime.Object, now time.Time) []interface{} {
	ds := obj.(*appsv1.DaemonSet)
	s := ds.Status
	names, images := podtemplate.ContainerCells(&ds.Spec.Template)
	return []interface{}{
		ds.Name,
		int64(s.DesiredNumberScheduled), int64(s.CurrentNumberScheduled), int64(s.NumberReady),
		int64(s.UpdatedNumberScheduled), int64(s.NumberAvailable),
		labels.FormatLabels(ds.Spec.Template.Spec.NodeSelector),
		age(ds.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(ds.Spec.Selector),
	}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
