// Package namespace holds the rules the API server applies to core/v1
// Namespaces: defaulting, what create, update, /status and /finalize may
// change, validation, the table kubectl prints and selectable fields.
//
// Callers (the generic REST layer) must pass *v1.Namespace values. Every
// function is pure. The name rule (a DNS-1123 label) is applied by the REST
// layer with the rest of metadata, so Validate does not repeat it.
//
// What it does not do: deleting a namespace (phase Terminating, emptying
// it, removing the "kubernetes" finalizer) belongs to the REST layer and the
// namespace controller; this package only supplies the rules for the
// /finalize endpoint (PrepareForFinalize, ValidateFinalizeUpdate).
package namespace

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Upstream's literal messages.
const (
	msgNotStandardFinalizer = "name is neither a standard finalizer name nor is it fully qualified"
	msgActiveOnly           = "may only be 'Active' if `deletionTimestamp` is empty"
	msgTerminatingOnly      = "may only be 'Terminating' if `deletionTimestamp` is not empty"
)

// standardFinalizers may appear without a domain prefix.
var standardFinalizers = sets.New(string(v1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents)

// Kind returns the rules for the "namespaces" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: schema.GroupVersion{Group: "", Version: "v1"},
		Resource:     "namespaces",
		Kind:         "Namespace",
		ListKind:     "NamespaceList",
		SingularName: "namespace",
		ShortNames:   []string{"ns"},
		Namespaced:   false,
		HasStatus:    true,

		New:     func() runtime.Object { return &v1.Namespace{} },
		NewList: func() runtime.Object { return &v1.NamespaceList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*v1.Namespace)) },
		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*v1.Namespace)) },
		PrepareForUpdate: func(obj, old runtime.Object) { prepareForUpdate(obj.(*v1.Namespace), old.(*v1.Namespace)) },
		Validate:         func(obj runtime.Object) field.ErrorList { return Validate(obj.(*v1.Namespace)) },
		ValidateUpdate:   func(obj, _ runtime.Object) field.ErrorList { return Validate(obj.(*v1.Namespace)) },
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) {
				obj.(*v1.Namespace).Spec = *old.(*v1.Namespace).Spec.DeepCopy()
			},
			ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList {
				return ValidateStatusUpdate(obj.(*v1.Namespace))
			},
		},

		Columns: columns(),
		Row:     row,
		Fields:  func(obj runtime.Object) fields.Set { return Fields(obj.(*v1.Namespace)) },
	}
}

// Default applies upstream's v1 defaults: the label
// kubernetes.io/metadata.name always equals the name (once there is one),
// and an empty status.phase is Active.
//
// It deliberately leaves spec.finalizers alone: the "kubernetes" finalizer
// is added on create only (prepareForCreate), because it is removed over the
// namespace's life and must not come back on a later write.
func Default(ns *v1.Namespace) {
	if ns.Name != "" {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[v1.LabelMetadataName] = ns.Name
	}
	if ns.Status.Phase == "" {
		ns.Status.Phase = v1.NamespaceActive
	}
}

// prepareForCreate: a new namespace is Active and carries the "kubernetes"
// finalizer, appended if the creator listed others.
func prepareForCreate(ns *v1.Namespace) {
	ns.Status = v1.NamespaceStatus{Phase: v1.NamespaceActive}
	for _, f := range ns.Spec.Finalizers {
		if f == v1.FinalizerKubernetes {
			return
		}
	}
	ns.Spec.Finalizers = append(ns.Spec.Finalizers, v1.FinalizerKubernetes)
}

// prepareForUpdate: the main resource changes neither status nor
// spec.finalizers (those go through /status and /finalize).
func prepareForUpdate(ns, old *v1.Namespace) {
	ns.Spec.Finalizers = append([]v1.FinalizerName(nil), old.Spec.Finalizers...)
	ns.Status = *old.Status.DeepCopy()
}

// PrepareForFinalize adjusts an update through namespaces/<name>/finalize:
// only spec.finalizers (and metadata) may change, so status is old's.
func PrepareForFinalize(obj, old runtime.Object) {
	obj.(*v1.Namespace).Status = *old.(*v1.Namespace).Status.DeepCopy()
}

// ValidateFinalizeUpdate checks an update through
// namespaces/<name>/finalize: every spec.finalizers entry is a valid
// finalizer name.
func ValidateFinalizeUpdate(obj, _ runtime.Object) field.ErrorList {
	ns := obj.(*v1.Namespace)
	var errs field.ErrorList
	path := field.NewPath("spec", "finalizers")
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), path.Index(i))...)
	}
	return errs
}

// Validate checks spec.finalizers on create and on update of the main
// resource. Upstream reports these errors at "spec.finalizers" without an
// index; so do we.
func Validate(ns *v1.Namespace) field.ErrorList {
	var errs field.ErrorList
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// ValidateStatusUpdate: the phase matches whether the namespace is being
// deleted. The path is upstream's, capital P included.
func ValidateStatusUpdate(ns *v1.Namespace) field.ErrorList {
	path := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != v1.NamespaceActive {
			return field.ErrorList{field.Invalid(path, ns.Status.Phase, msgActiveOnly)}
		}
		return nil
	}
	if ns.Status.Phase != v1.NamespaceTerminating {
		return field.ErrorList{field.Invalid(path, ns.Status.Phase, msgTerminatingOnly)}
	}
	return nil
}

// validateFinalizerName: a qualified name, and an unprefixed one must be a
// standard finalizer ("kubernetes", "orphan", "foregroundDeletion").
func validateFinalizerName(name string, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, path)
	if !strings.Contains(name, "/") && !standardFinalizers.Has(name) {
		errs = append(errs, field.Invalid(path, name, msgNotStandardFinalizer))
	}
	return errs
}

// Fields returns the selectable fields upstream accepts for namespaces:
// metadata.name and status.phase. (Upstream's storage also records a bare
// "name", but its field-label check rejects selectors on it, so it is left
// out here.)
func Fields(ns *v1.Namespace) fields.Set {
	set := registry.DefaultFields(ns, false)
	set["status.phase"] = string(ns.Status.Phase)
	return set
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Status", Type: "string", Description: "The status of the namespace"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

func row(obj runtime.Object, now time.Time) []interface{} {
	ns := obj.(*v1.Namespace)
	return []interface{}{ns.Name, string(ns.Status.Phase), age(ns.CreationTimestamp, now)}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
