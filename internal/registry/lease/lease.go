// Package lease holds the rules the API server applies to
// coordination.k8s.io/v1 Leases: validation, the coordinated-leader-election
// fields the server does not accept, the table kubectl prints and the
// selectable fields.
//
// Callers (the generic REST layer) must pass *coordinationv1.Lease values.
// Every function is pure.
//
// What it does not do: metadata, and whether a PUT may create (upstream
// allows create-on-update for leases; that choice is the REST layer's).
package lease

import (
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Upstream's literal messages.
const (
	msgPositive        = "must be greater than 0"
	msgNonNegative     = "must be greater than or equal to 0"
	msgPreferredHolder = "may only be specified if `strategy` is defined"
)

// knownStrategies are the unprefixed strategies Kubernetes defines.
var knownStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

// Kind returns the rules for the "leases" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: coordinationv1.SchemeGroupVersion,
		Resource:     "leases",
		Kind:         "Lease",
		ListKind:     "LeaseList",
		SingularName: "lease",
		Namespaced:   true,

		New:     func() runtime.Object { return &coordinationv1.Lease{} },
		NewList: func() runtime.Object { return &coordinationv1.LeaseList{} },

		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*coordinationv1.Lease)) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			prepareForUpdate(obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease))
		},
		Validate:       func(obj runtime.Object) field.ErrorList { return Validate(obj.(*coordinationv1.Lease)) },
		ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList { return Validate(obj.(*coordinationv1.Lease)) },

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*coordinationv1.Lease), true)
		},
	}
}

// prepareForCreate drops spec.strategy and spec.preferredHolder, as
// upstream does while its CoordinatedLeaderElection feature is off (the
// default): knode does not implement coordinated leader election.
func prepareForCreate(l *coordinationv1.Lease) {
	l.Spec.Strategy = nil
	l.Spec.PreferredHolder = nil
}

// prepareForUpdate drops those two fields unless old already had them.
func prepareForUpdate(l, old *coordinationv1.Lease) {
	if old.Spec.Strategy == nil {
		l.Spec.Strategy = nil
	}
	if old.Spec.PreferredHolder == nil {
		l.Spec.PreferredHolder = nil
	}
}

// Validate checks a lease's spec, on create and on every update
// (upstream ValidateLeaseSpec).
func Validate(l *coordinationv1.Lease) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(spec.Child("leaseDurationSeconds"), *d, msgPositive))
	}
	if n := l.Spec.LeaseTransitions; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(spec.Child("leaseTransitions"), *n, msgNonNegative))
	}
	if l.Spec.Strategy != nil {
		errs = append(errs, validateStrategy(*l.Spec.Strategy, spec.Child("strategy"))...)
	}
	if p := l.Spec.PreferredHolder; p != nil && *p != "" && (l.Spec.Strategy == nil || *l.Spec.Strategy == "") {
		errs = append(errs, field.Forbidden(spec.Child("preferredHolder"), msgPreferredHolder))
	}
	return errs
}

// validateStrategy: an unprefixed strategy must be one Kubernetes defines;
// a prefixed one must be a qualified name. Upstream appends "strategy" to a
// path that already ends in it, so clients see "spec.strategy.strategy";
// that path is kept.
func validateStrategy(s coordinationv1.CoordinatedLeaseStrategy, path *field.Path) field.ErrorList {
	p := path.Child("strategy")
	if !strings.Contains(string(s), "/") {
		for _, known := range knownStrategies {
			if s == known {
				return nil
			}
		}
		return field.ErrorList{field.NotSupported(p, s, knownStrategies)}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(s)) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// row: HOLDER is empty (not "<none>") when no one holds the lease, as
// upstream prints it.
func row(obj runtime.Object, now time.Time) []interface{} {
	l := obj.(*coordinationv1.Lease)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return []interface{}{l.Name, holder, age(l.CreationTimestamp, now)}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
