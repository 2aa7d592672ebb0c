// Package csinode holds the API rules for storage.k8s.io/v1 CSINodes
// (cluster-scoped, one per Node and named after it): validation of the
// drivers, the update rule that a driver's entry never changes once listed,
// the table kubectl prints and the selectable fields.
//
// It follows Kubernetes 1.33 with its default feature gates:
// MutableCSINodeAllocatableCount is off, so allocatable.count is as
// immutable as the rest of a driver's entry. Node IDs may be up to 256
// characters, as upstream's REST strategy allows (its validation alone
// would stop at 192).
//
// Callers (the generic REST layer) use Kind() and pass *storagev1.CSINode;
// every function is pure.
//
// What it does not do: keep the object in step with the drivers a node
// runs (the agent does), or check who writes it (the node authorizer and
// NodeRestriction do).
package csinode

import (
	"fmt"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
	"knode/internal/registry/persistentvolume"
)

// MaxNodeIDLength is the longest nodeID a driver entry may have.
const MaxNodeIDLength = 256

// Kind returns the rules for the "csinodes" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: storagev1.SchemeGroupVersion,
		Resource:     "csinodes",
		Kind:         "CSINode",
		ListKind:     "CSINodeList",
		SingularName: "csinode",

		New:     func() runtime.Object { return &storagev1.CSINode{} },
		NewList: func() runtime.Object { return &storagev1.CSINodeList{} },

		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*storagev1.CSINode)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*storagev1.CSINode), old.(*storagev1.CSINode))
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*storagev1.CSINode), false)
		},
	}
}

// Validate checks the drivers (upstream ValidateCSINode without the
// metadata part): each has a valid driver name, listed once, a nodeID of
// 1 to 256 characters, a non-negative allocatable.count, and topology keys
// that are non-empty, unique qualified names.
func Validate(n *storagev1.CSINode) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec", "drivers")
	names := sets.New[string]()
	for i, d := range n.Spec.Drivers {
		errs = append(errs, validateDriver(d, names, path.Index(i))...)
	}
	return errs
}

func validateDriver(d storagev1.CSINodeDriver, names sets.Set[string], path *field.Path) field.ErrorList {
	errs := persistentvolume.ValidateCSIDriverName(d.Name, path.Child("name"))
	idPath := path.Child("nodeID")
	if d.NodeID == "" {
		errs = append(errs, field.Required(idPath, ""))
	}
	if len(d.NodeID) > MaxNodeIDLength {
		errs = append(errs, field.Invalid(idPath, d.NodeID, fmt.Sprintf("must be %d characters or less", MaxNodeIDLength)))
	}
	if d.Allocatable != nil && d.Allocatable.Count != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*d.Allocatable.Count), path.Child("allocatable", "count"))...)
	}
	if names.Has(d.Name) {
		errs = append(errs, field.Duplicate(path.Child("name"), d.Name))
	}
	names.Insert(d.Name)
	// Upstream reports topology key errors at the driver's path.
	keys := sets.New[string]()
	for _, k := range d.TopologyKeys {
		if k == "" {
			errs = append(errs, field.Required(path, ""))
		}
		if keys.Has(k) {
			errs = append(errs, field.Duplicate(path, k))
		}
		keys.Insert(k)
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
	}
	return errs
}

// ValidateUpdate is Validate plus the update rule: a driver listed in old
// keeps its entry unchanged (drivers may be added or removed). The error
// is upstream's "field is immutable" at spec.drivers.
func ValidateUpdate(n, old *storagev1.CSINode) field.ErrorList {
	errs := Validate(n)
	for _, o := range old.Spec.Drivers {
		for _, d := range n.Spec.Drivers {
			if d.Name == o.Name {
				errs = append(errs, apivalidation.ValidateImmutableField(d, o, field.NewPath("spec", "drivers"))...)
			}
		}
	}
	return errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

func row(obj runtime.Object, now time.Time) []interface{} {
	n := obj.(*storagev1.CSINode)
	return []interface{}{n.Name, int64(len(n.Spec.Drivers)), age(n.CreationTimestamp, now)}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
