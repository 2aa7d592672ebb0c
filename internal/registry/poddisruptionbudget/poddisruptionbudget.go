// Package poddisruptionbudget holds the API rules for policy/v1
// PodDisruptionBudgets: validation (minAvailable xor maxUnavailable, each a
// non-negative integer or a percentage up to 100%, a valid selector, a
// known unhealthyPodEvictionPolicy), the status subresource's rules,
// generation, the table kubectl prints and the selectable fields.
//
// Callers (the generic REST layer) use Kind() and pass
// *policyv1.PodDisruptionBudget. Every function is pure.
//
// What it does not do: compute the status (the disruption controller
// does) or decide evictions (the eviction subresource does, with
// internal/controller/disruption's helpers).
package poddisruptionbudget

import (
	"strconv"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Upstream's literal messages.
const (
	msgBoth        = "minAvailable and maxUnavailable cannot be both set"
	msgNonNegative = "must be greater than or equal to 0"
	msgPercentOver = "must not be greater than 100%"
)

var evictionPolicies = []string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}

// Kind returns the rules for the "poddisruptionbudgets" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: policyv1.SchemeGroupVersion,
		Resource:     "poddisruptionbudgets",
		Kind:         "PodDisruptionBudget",
		ListKind:     "PodDisruptionBudgetList",
		SingularName: "poddisruptionbudget",
		ShortNames:   []string{"pdb"},
		Namespaced:   true,
		HasStatus:    true,

		New:     func() runtime.Object { return &policyv1.PodDisruptionBudget{} },
		NewList: func() runtime.Object { return &policyv1.PodDisruptionBudgetList{} },

		PrepareForCreate: func(obj runtime.Object) {
			pdb := obj.(*policyv1.PodDisruptionBudget)
			pdb.Status = policyv1.PodDisruptionBudgetStatus{}
			pdb.Generation = 1
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			pdb, o := obj.(*policyv1.PodDisruptionBudget), old.(*policyv1.PodDisruptionBudget)
			pdb.Status = *o.Status.DeepCopy()
			if !apiequality.Semantic.DeepEqual(pdb.Spec, o.Spec) {
				pdb.Generation = o.Generation + 1
			}
		},
		Validate: func(obj runtime.Object) field.ErrorList {
			return Validate(obj.(*policyv1.PodDisruptionBudget), false)
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			// A selector stored under laxer rules may keep its label values.
			return Validate(obj.(*policyv1.PodDisruptionBudget), hasInvalidSelectorValue(old.(*policyv1.PodDisruptionBudget)))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*policyv1.PodDisruptionBudget).Spec = *old.(*policyv1.PodDisruptionBudget).Spec.DeepCopy()
			},
			ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList {
				return ValidateStatus(&obj.(*policyv1.PodDisruptionBudget).Status, field.NewPath("status"))
			},
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*policyv1.PodDisruptionBudget), true)
		},
	}
}

// Validate checks a budget's spec (upstream
// ValidatePodDisruptionBudgetSpec). allowInvalidLabelValues relaxes the
// selector's value rule, for updates of objects that already had such a
// value.
func Validate(pdb *policyv1.PodDisruptionBudget, allowInvalidLabelValues bool) field.ErrorList {
	spec := field.NewPath("spec")
	s := pdb.Spec
	var errs field.ErrorList
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(spec, s, msgBoth))
	}
	if s.MinAvailable != nil {
		errs = append(errs, validateIntOrPercent(*s.MinAvailable, spec.Child("minAvailable"))...)
	}
	if s.MaxUnavailable != nil {
		errs = append(errs, validateIntOrPercent(*s.MaxUnavailable, spec.Child("maxUnavailable"))...)
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValues}
	errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, opts, spec.Child("selector"))...)
	if p := s.UnhealthyPodEvictionPolicy; p != nil && *p != policyv1.AlwaysAllow && *p != policyv1.IfHealthyBudget {
		errs = append(errs, field.NotSupported(spec.Child("unhealthyPodEvictionPolicy"), *p, evictionPolicies))
	}
	return errs
}

func hasInvalidSelectorValue(pdb *policyv1.PodDisruptionBudget) bool {
	if pdb.Spec.Selector == nil {
		return false
	}
	return len(metav1validation.ValidateLabelSelector(pdb.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("spec", "selector"))) > 0
}

// validateIntOrPercent: a non-negative integer, or a percentage of at most
// 100%.
func validateIntOrPercent(v intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch v.Type {
	case intstr.String:
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(path, v, msg))
		}
		if len(errs) == 0 {
			if n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1]); n > 100 {
				errs = append(errs, field.Invalid(path, v, msgPercentOver))
			}
		}
	case intstr.Int:
		if v.IntVal < 0 {
			errs = append(errs, field.Invalid(path, int64(v.IntVal), msgNonNegative))
		}
	}
	return errs
}

// ValidateStatus checks a status update (upstream
// ValidatePodDisruptionBudgetStatusUpdate for policy/v1): the conditions,
// and counters that are not negative.
func ValidateStatus(s *policyv1.PodDisruptionBudgetStatus, path *field.Path) field.ErrorList {
	errs := metav1validation.ValidateConditions(s.Conditions, path.Child("conditions"))
	for _, c := range []struct {
		name string
		v    int32
	}{
		{"disruptionsAllowed", s.DisruptionsAllowed},
		{"currentHealthy", s.CurrentHealthy},
		{"desiredHealthy", s.DesiredHealthy},
		{"expectedPods", s.ExpectedPods},
	} {
		if c.v < 0 {
			errs = append(errs, field.Invalid(path.Child(c.name), int64(c.v), msgNonNegative))
		}
	}
	return errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Min Available", Type: "string", Description: "The minimum number of pods that must be available."},
		{Name: "Max Unavailable", Type: "string", Description: "The maximum number of pods that may be unavailable."},
		{Name: "Allowed Disruptions", Type: "integer", Description: "Calculated number of pods that may be disrupted at this time."},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// row is kubectl's budget row: an unset bound prints "N/A".
func row(obj runtime.Object, now time.Time) []interface{} {
	pdb := obj.(*policyv1.PodDisruptionBudget)
	return []interface{}{
		pdb.Name,
		orNA(pdb.Spec.MinAvailable),
		orNA(pdb.Spec.MaxUnavailable),
		int64(pdb.Status.DisruptionsAllowed),
		age(pdb.CreationTimestamp, now),
	}
}

func orNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
