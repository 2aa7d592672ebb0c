// Package priorityclass holds the API rules for scheduling.k8s.io/v1
// PriorityClasses (cluster-scoped): the preemptionPolicy default, the
// reserved "system-" names, the ceiling on user-defined values, value and
// preemptionPolicy immutability, the table kubectl prints and the
// selectable fields. It also defines the two built-in classes,
// system-node-critical and system-cluster-critical.
//
// Callers (the generic REST layer) use Kind() and pass
// *schedulingv1.PriorityClass; every function is pure. The server must
// create the classes System returns at startup (an AlreadyExists answer
// means they are there), as upstream's API server does.
//
// What it does not do: the "only one globalDefault" rule and the refusal
// to delete the built-in classes need other objects or the delete path;
// the Priority admission plugin (internal/admission/priority) enforces
// them, as upstream's plugin does the former.
package priorityclass

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Upstream's values and names.
const (
	// HighestUserDefinablePriority is the largest value a class outside
	// the system- prefix may have.
	HighestUserDefinablePriority int32 = 1000000000
	// SystemCriticalPriority is the value of system-cluster-critical;
	// system-node-critical is 1000 more.
	SystemCriticalPriority int32 = 2 * HighestUserDefinablePriority
	// SystemPrefix starts every reserved class name.
	SystemPrefix = "system-"

	SystemNodeCritical    = "system-node-critical"
	SystemClusterCritical = "system-cluster-critical"
)

// System returns the built-in classes, new values each call, in upstream's
// order: system-node-critical (2000001000), system-cluster-critical
// (2000000000). Neither is a global default; both preempt lower
// priorities.
func System() []*schedulingv1.PriorityClass {
	policy := func() *corev1.PreemptionPolicy { p := corev1.PreemptLowerPriority; return &p }
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:       metav1.ObjectMeta{Name: SystemNodeCritical},
			Value:            SystemCriticalPriority + 1000,
			Description:      "Used for system critical pods that must not be moved from their current node.",
			PreemptionPolicy: policy(),
		},
		{
			ObjectMeta:       metav1.ObjectMeta{Name: SystemClusterCritical},
			Value:            SystemCriticalPriority,
			Description:      "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
			PreemptionPolicy: policy(),
		},
	}
}

// IsSystem reports whether name is one of the built-in classes.
func IsSystem(name string) bool {
	return name == SystemNodeCritical || name == SystemClusterCritical
}

// Kind returns the rules for the "priorityclasses" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: schedulingv1.SchemeGroupVersion,
		Resource:     "priorityclasses",
		Kind:         "PriorityClass",
		ListKind:     "PriorityClassList",
		SingularName: "priorityclass",
		ShortNames:   []string{"pc"},

		New:     func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList: func() runtime.Object { return &schedulingv1.PriorityClassList{} },

		Default:  func(obj runtime.Object) { Default(obj.(*schedulingv1.PriorityClass)) },
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*schedulingv1.PriorityClass)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass))
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*schedulingv1.PriorityClass), false)
		},
	}
}

// Default sets preemptionPolicy to PreemptLowerPriority when unset.
func Default(pc *schedulingv1.PriorityClass) {
	if pc.PreemptionPolicy == nil {
		p := corev1.PreemptLowerPriority
		pc.PreemptionPolicy = &p
	}
}

// Validate checks a class (upstream ValidatePriorityClass): a name with
// the system- prefix must be a built-in class with its exact value and
// globalDefault; any other class may not exceed
// HighestUserDefinablePriority; preemptionPolicy must be known.
func Validate(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	if strings.HasPrefix(pc.Name, SystemPrefix) {
		if err := checkSystem(pc); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
				"priority class names with '"+SystemPrefix+"' prefix are reserved for system use only. error: "+err.Error()))
		}
	} else if pc.Value > HighestUserDefinablePriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", HighestUserDefinablePriority)))
	}
	if p := pc.PreemptionPolicy; p != nil {
		path := field.NewPath("preemptionPolicy")
		switch *p {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		case "":
			errs = append(errs, field.Required(path, ""))
		default:
			errs = append(errs, field.NotSupported(path, *p, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	return errs
}

// checkSystem is upstream's IsKnownSystemPriorityClass: nil when pc is a
// built-in class as defined, else why not.
func checkSystem(pc *schedulingv1.PriorityClass) error {
	for _, s := range System() {
		if s.Name != pc.Name {
			continue
		}
		if s.Value != pc.Value {
			return fmt.Errorf("value of %v PriorityClass must be %v", s.Name, s.Value)
		}
		if s.GlobalDefault != pc.GlobalDefault {
			return fmt.Errorf("globalDefault of %v PriorityClass must be %v", s.Name, s.GlobalDefault)
		}
		return nil
	}
	return fmt.Errorf("%v is not a known system priority class", pc.Name)
}

// ValidateUpdate is Validate plus immutability of value and
// preemptionPolicy.
func ValidateUpdate(pc, old *schedulingv1.PriorityClass) field.ErrorList {
	errs := Validate(pc)
	if pc.Value != old.Value {
		errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
	}
	return append(errs, apivalidation.ValidateImmutableField(pc.PreemptionPolicy, old.PreemptionPolicy, field.NewPath("preemptionPolicy"))...)
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	doc := schedulingv1.PriorityClass{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Value", Type: "integer", Description: doc["value"]},
		{Name: "Global-Default", Type: "boolean", Description: doc["globalDefault"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "PreemptionPolicy", Type: "string", Description: doc["preemptionPolicy"]},
	}
}

// row is kubectl's class row.
func row(obj runtime.Object, now time.Time) []interface{} {
	pc := obj.(*schedulingv1.PriorityClass)
	policy := ""
	if pc.PreemptionPolicy != nil {
		policy = string(*pc.PreemptionPolicy)
	}
	return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp, now), policy}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
