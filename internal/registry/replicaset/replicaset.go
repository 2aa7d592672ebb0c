// Package replicaset holds the API rules for apps/v1 ReplicaSets: defaults,
// validation of the spec and of its pod template, the status and scale
// subresources' rules, generation, the table kubectl prints and the
// selectable fields.
//
// Callers (the generic REST layer) use Kind() and pass *appsv1.ReplicaSet.
// Every function is pure.
//
// What it does not do: keep the replicas running (the ReplicaSet
// controller does), and the extensions/v1beta1 compatibility upstream keeps
// (there the selector was mutable).
package replicaset

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
	"knode/internal/registry/podtemplate"
)

// Upstream's literal messages.
const (
	msgEmptySelector = "empty selector is invalid for deployment" // sic: upstream's ReplicaSet rule says "deployment"
	msgInvalidSel    = "invalid label selector"
	msgNotGreater    = "cannot be greater than status.replicas"
	msgNotAboveReady = "cannot be greater than readyReplicas"
	msgNonNegative   = "must be greater than or equal to 0"
)

// Kind returns the rules for the "replicasets" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "replicasets",
		Kind:         "ReplicaSet",
		ListKind:     "ReplicaSetList",
		SingularName: "replicaset",
		ShortNames:   []string{"rs"},
		Categories:   []string{"all"},
		Namespaced:   true,
		HasStatus:    true,

		New:     func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} },

		Default: func(obj runtime.Object) { Default(obj.(*appsv1.ReplicaSet)) },
		PrepareForCreate: func(obj runtime.Object) {
			rs := obj.(*appsv1.ReplicaSet)
			rs.Status = appsv1.ReplicaSetStatus{}
			rs.Generation = 1
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			rs, o := obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet)
			rs.Status = *o.Status.DeepCopy()
			if !apiequality.Semantic.DeepEqual(rs.Spec, o.Spec) {
				rs.Generation = o.Generation + 1
			}
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*appsv1.ReplicaSet)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*appsv1.ReplicaSet), old.(*appsv1.ReplicaSet))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*appsv1.ReplicaSet).Spec = *old.(*appsv1.ReplicaSet).Spec.DeepCopy()
			},
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateStatus(&obj.(*appsv1.ReplicaSet).Status, field.NewPath("status"))
			},
		},
		Scale: &registry.ScaleRules{
			Get: func(obj runtime.Object) (spec, status int32, selector string) {
				rs := obj.(*appsv1.ReplicaSet)
				if rs.Spec.Replicas != nil {
					spec = *rs.Spec.Replicas
				}
				return spec, rs.Status.Replicas, scaleSelector(rs.Spec.Selector)
			},
			Set: func(obj runtime.Object, replicas int32) {
				obj.(*appsv1.ReplicaSet).Spec.Replicas = &replicas
			},
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*appsv1.ReplicaSet), true)
		},
	}
}

// scaleSelector is the selector a Scale carries, as upstream's scale
// subresource words it: what metav1.FormatLabelSelector prints for every
// selector validation lets through, and "" for none (or an invalid one)
// where that prints "<none>" (or "<error>").
func scaleSelector(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	return s.String()
}

// Default is apps/v1's SetDefaults_ReplicaSet (replicas 1) plus the pod
// template's defaults.
func Default(rs *appsv1.ReplicaSet) {
	if rs.Spec.Replicas == nil {
		one := int32(1)
		rs.Spec.Replicas = &one
	}
	podtemplate.Default(&rs.Spec.Template)
}

// Validate checks a ReplicaSet's spec (upstream ValidateReplicaSetSpec).
func Validate(rs *appsv1.ReplicaSet) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if rs.Spec.Replicas != nil {
		errs = append(errs, nonNegative(int64(*rs.Spec.Replicas), spec.Child("replicas"))...)
	}
	errs = append(errs, nonNegative(int64(rs.Spec.MinReadySeconds), spec.Child("minReadySeconds"))...)
	if rs.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(rs.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
		if len(rs.Spec.Selector.MatchLabels)+len(rs.Spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(spec.Child("selector"), rs.Spec.Selector, msgEmptySelector))
		}
	}
	if _, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector); err != nil {
		errs = append(errs, field.Invalid(spec.Child("selector"), rs.Spec.Selector, msgInvalidSel))
	} else {
		errs = append(errs, podtemplate.ValidateForController(&rs.Spec.Template, rs.Spec.Selector, "ReplicaSet", spec.Child("template"))...)
	}
	return errs
}

// ValidateUpdate is Validate plus the apps/v1 rule that the selector never
// changes.
func ValidateUpdate(rs, old *appsv1.ReplicaSet) field.ErrorList {
	errs := Validate(rs)
	return append(errs, apivalidation.ValidateImmutableField(rs.Spec.Selector, old.Spec.Selector, field.NewPath("spec", "selector"))...)
}

// ValidateStatus checks the counters of a status update (upstream
// ValidateReplicaSetStatus).
func ValidateStatus(s *appsv1.ReplicaSetStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(int64(s.Replicas), path.Child("replicas"))...)
	errs = append(errs, nonNegative(int64(s.FullyLabeledReplicas), path.Child("fullyLabeledReplicas"))...)
	errs = append(errs, nonNegative(int64(s.ReadyReplicas), path.Child("readyReplicas"))...)
	errs = append(errs, nonNegative(int64(s.AvailableReplicas), path.Child("availableReplicas"))...)
	if s.TerminatingReplicas != nil {
		errs = append(errs, nonNegative(int64(*s.TerminatingReplicas), path.Child("terminatingReplicas"))...)
	}
	errs = append(errs, nonNegative(s.ObservedGeneration, path.Child("observedGeneration"))...)
	if s.FullyLabeledReplicas > s.Replicas {
		errs = append(errs, field.Invalid(path.Child("fullyLabeledReplicas"), s.FullyLabeledReplicas, msgNotGreater))
	}
	if s.ReadyReplicas > s.Replicas {
		errs = append(errs, field.Invalid(path.Child("readyReplicas"), s.ReadyReplicas, msgNotGreater))
	}
	if s.AvailableReplicas > s.Replicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), s.AvailableReplicas, msgNotGreater))
	}
	if s.AvailableReplicas > s.ReadyReplicas {
		errs = append(errs, field.Invalid(path.Child("availableReplicas"), s.AvailableReplicas, msgNotAboveReady))
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
	spec := appsv1.ReplicaSetSpec{}.SwaggerDoc()
	status := appsv1.ReplicaSetStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Desired", Type: "integer", Description: spec["replicas"]},
		{Name: "Current", Type: "integer", Description: status["replicas"]},
		{Name: "Ready", Type: "integer", Description: status["readyReplicas"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "Containers", Type: "string", Priority: 1, Description: "Names of each container in the template."},
		{Name: "Images", Type: "string", Priority: 1, Description: "Images referenced by each container in the template."},
		{Name: "Selector", Type: "string", Priority: 1, Description: spec["selector"]},
	}
}

// row is kubectl's ReplicaSet row; the last three cells are the -o wide
// ones.
func row(obj runtime.Object, now time.Time) []interface{} {
	rs := obj.(*appsv1.ReplicaSet)
	var desired int64
	if rs.Spec.Replicas != nil {
		desired = int64(*rs.Spec.Replicas)
	}
	names, images := podtemplate.ContainerCells(&rs.Spec.Template)
	return []interface{}{
		rs.Name, desired, int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas), age(rs.CreationTimestamp, now),
		names, images, metav1.FormatLabelSelector(rs.Spec.Selector),
	}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
