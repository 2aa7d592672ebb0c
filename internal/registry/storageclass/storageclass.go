// Package storageclass holds the API rules for storage.k8s.io/v1
// StorageClasses (cluster-scoped, short name "sc"): the v1 defaults
// (reclaimPolicy Delete, volumeBindingMode Immediate), validation of the
// provisioner, parameters, reclaim policy, binding mode and allowed
// topologies, the fields an update may not change, the table kubectl
// prints (the default class's name carries " (default)") and the
// selectable fields.
//
// Callers (the generic REST layer) use Kind() and pass
// *storagev1.StorageClass; every function is pure.
//
// What it does not do: choose a default class for claims, or refuse a
// second default (the DefaultStorageClass admission plugin and the PV
// controller read the is-default-class annotation themselves).
package storageclass

import (
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
	"knode/internal/volume"
)

// Upstream's literal messages and limits.
const (
	msgParametersForbidden    = "updates to parameters are forbidden."
	msgProvisionerForbidden   = "updates to provisioner are forbidden."
	msgReclaimPolicyForbidden = "updates to reclaimPolicy are forbidden."
	msgEmptyParameterKey      = "field can not be empty."

	// maxParameters is the most parameters a class may have.
	maxParameters = 512
	// maxParametersSize bounds the summed length of the parameters' keys
	// and values, in bytes.
	maxParametersSize = 256 * (1 << 10)
)

// Supported values, in the sorted order upstream lists them.
var (
	reclaimPolicies = []string{string(corev1.PersistentVolumeReclaimDelete), string(corev1.PersistentVolumeReclaimRetain)}
	bindingModes    = []string{string(storagev1.VolumeBindingImmediate), string(storagev1.VolumeBindingWaitForFirstConsumer)}
)

// Kind returns the rules for the "storageclasses" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: storagev1.SchemeGroupVersion,
		Resource:     "storageclasses",
		Kind:         "StorageClass",
		ListKind:     "StorageClassList",
		SingularName: "storageclass",
		ShortNames:   []string{"sc"},

		New:     func() runtime.Object { return &storagev1.StorageClass{} },
		NewList: func() runtime.Object { return &storagev1.StorageClassList{} },

		Default:  func(obj runtime.Object) { Default(obj.(*storagev1.StorageClass)) },
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*storagev1.StorageClass)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*storagev1.StorageClass), old.(*storagev1.StorageClass))
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*storagev1.StorageClass), false)
		},
	}
}

// Default applies upstream's v1 defaults: reclaimPolicy Delete and
// volumeBindingMode Immediate when unset.
func Default(sc *storagev1.StorageClass) {
	if sc.ReclaimPolicy == nil {
		p := corev1.PersistentVolumeReclaimDelete
		sc.ReclaimPolicy = &p
	}
	if sc.VolumeBindingMode == nil {
		m := storagev1.VolumeBindingImmediate
		sc.VolumeBindingMode = &m
	}
}

// Validate checks a class (upstream ValidateStorageClass without the
// metadata part): a provisioner that is a qualified name once lowercased,
// at most 512 parameters of at most 256 KiB in all with no empty key, a
// known reclaim policy and binding mode, and well-formed allowed
// topologies.
func Validate(sc *storagev1.StorageClass) field.ErrorList {
	errs := validateProvisioner(sc.Provisioner, field.NewPath("provisioner"))
	errs = append(errs, validateParameters(sc.Parameters, field.NewPath("parameters"))...)
	errs = append(errs, validateReclaimPolicy(sc.ReclaimPolicy, field.NewPath("reclaimPolicy"))...)
	errs = append(errs, validateBindingMode(sc.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	errs = append(errs, validateAllowedTopologies(sc.AllowedTopologies, field.NewPath("allowedTopologies"))...)
	return errs
}

// ValidateUpdate is Validate plus the update rules: parameters,
// provisioner, reclaimPolicy and volumeBindingMode never change.
func ValidateUpdate(sc, old *storagev1.StorageClass) field.ErrorList {
	errs := Validate(sc)
	// Upstream compares with reflect, so a nil and an empty map differ.
	if !reflect.DeepEqual(sc.Parameters, old.Parameters) {
		errs = append(errs, field.Forbidden(field.NewPath("parameters"), msgParametersForbidden))
	}
	if sc.Provisioner != old.Provisioner {
		errs = append(errs, field.Forbidden(field.NewPath("provisioner"), msgProvisionerForbidden))
	}
	if deref(sc.ReclaimPolicy) != deref(old.ReclaimPolicy) {
		errs = append(errs, field.Forbidden(field.NewPath("reclaimPolicy"), msgReclaimPolicyForbidden))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(sc.VolumeBindingMode, old.VolumeBindingMode, field.NewPath("volumeBindingMode"))...)
	return errs
}

func deref[T ~string](p *T) T {
	if p == nil {
		return ""
	}
	return *p
}

func validateProvisioner(provisioner string, path *field.Path) field.ErrorList {
	if provisioner == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	lower := strings.ToLower(provisioner)
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(lower) {
		errs = append(errs, field.Invalid(path, lower, msg))
	}
	return errs
}

func validateParameters(params map[string]string, path *field.Path) field.ErrorList {
	if len(params) > maxParameters {
		return field.ErrorList{field.TooLong(path, "", maxParameters)}
	}
	var errs field.ErrorList
	size := 0
	for k, v := range params {
		if k == "" {
			errs = append(errs, field.Invalid(path, k, msgEmptyParameterKey))
		}
		size += len(k) + len(v)
	}
	if size > maxParametersSize {
		errs = append(errs, field.TooLong(path, "", maxParametersSize))
	}
	return errs
}

// validateReclaimPolicy: an empty policy passes (upstream checks only a
// non-empty one); Recycle is not allowed for classes.
func validateReclaimPolicy(p *corev1.PersistentVolumeReclaimPolicy, path *field.Path) field.ErrorList {
	if p == nil || *p == "" {
		return nil
	}
	if *p != corev1.PersistentVolumeReclaimDelete && *p != corev1.PersistentVolumeReclaimRetain {
		return field.ErrorList{field.NotSupported(path, *p, reclaimPolicies)}
	}
	return nil
}

func validateBindingMode(m *storagev1.VolumeBindingMode, path *field.Path) field.ErrorList {
	switch {
	case m == nil:
		return field.ErrorList{field.Required(path, "")}
	case *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer:
		return field.ErrorList{field.NotSupported(path, *m, bindingModes)}
	}
	return nil
}

// validateAllowedTopologies checks each term (every expression needs
// values, no value twice, a valid label key, no key twice in a term) and
// refuses a term equal to an earlier one.
//
// Upstream seeds its list of seen terms with one empty entry per term, so
// a term without expressions equals each of those and is reported as a
// duplicate once per term in the list (plus once per earlier empty term).
// That is kept: clients see the same errors.
func validateAllowedTopologies(terms []corev1.TopologySelectorTerm, path *field.Path) field.ErrorList {
	if len(terms) == 0 {
		return nil
	}
	var errs field.ErrorList
	seen := make([]map[string]sets.Set[string], len(terms))
	for i, term := range terms {
		termPath := path.Index(i)
		exprs, termErrs := validateTopologyTerm(term, termPath)
		errs = append(errs, termErrs...)
		for _, s := range seen {
			if apiequality.Semantic.DeepEqual(exprs, s) {
				errs = append(errs, field.Duplicate(termPath.Child("matchLabelExpressions"), ""))
			}
		}
		seen = append(seen, exprs)
	}
	return errs
}

// validateTopologyTerm returns the term's expressions as key -> values,
// and its errors.
func validateTopologyTerm(term corev1.TopologySelectorTerm, path *field.Path) (map[string]sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	exprs := map[string]sets.Set[string]{}
	exprsPath := path.Child("matchLabelExpressions")
	for i, req := range term.MatchLabelExpressions {
		reqPath := exprsPath.Index(i)
		valuesPath := reqPath.Child("values")
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(valuesPath, ""))
		}
		values := sets.New[string]()
		for j, v := range req.Values {
			if values.Has(v) {
				errs = append(errs, field.Duplicate(valuesPath.Index(j), v))
			}
			values.Insert(v)
		}
		errs = append(errs, metav1validation.ValidateLabelName(req.Key, reqPath.Child("key"))...)
		if _, dup := exprs[req.Key]; dup {
			errs = append(errs, field.Duplicate(reqPath.Child("key"), req.Key))
		}
		exprs[req.Key] = values
	}
	return exprs, errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	doc := storagev1.StorageClass{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Provisioner", Type: "string", Description: doc["provisioner"]},
		{Name: "ReclaimPolicy", Type: "string", Description: doc["reclaimPolicy"]},
		{Name: "VolumeBindingMode", Type: "string", Description: doc["volumeBindingMode"]},
		{Name: "AllowVolumeExpansion", Type: "string", Description: doc["allowVolumeExpansion"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// row is kubectl's class row: the default class is "<name> (default)";
// unset fields print their defaults (Delete, Immediate, false).
func row(obj runtime.Object, now time.Time) []interface{} {
	sc := obj.(*storagev1.StorageClass)
	name := sc.Name
	if volume.IsDefaultClass(sc) {
		name += " (default)"
	}
	reclaim := string(corev1.PersistentVolumeReclaimDelete)
	if sc.ReclaimPolicy != nil {
		reclaim = string(*sc.ReclaimPolicy)
	}
	mode := string(storagev1.VolumeBindingImmediate)
	if sc.VolumeBindingMode != nil {
		mode = string(*sc.VolumeBindingMode)
	}
	expansion := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
	return []interface{}{name, sc.Provisioner, reclaim, mode, expansion, age(sc.CreationTimestamp, now)}
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
