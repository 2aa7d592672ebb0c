// Package csidriver holds the API rules for storage.k8s.io/v1 CSIDrivers
// (cluster-scoped): the v1 defaults, validation of the spec, the fields an
// update may not change (attachRequired and volumeLifecycleModes), the
// generation, the table kubectl prints and the selectable fields.
//
// It follows Kubernetes 1.33 with its default feature gates:
// SELinuxMountReadWriteOncePod is on, so seLinuxMount defaults to false and
// is required; MutableCSINodeAllocatableCount is off, so
// spec.nodeAllocatableUpdatePeriodSeconds is dropped unless the stored
// object already has it.
//
// Callers (the generic REST layer) use Kind() and pass
// *storagev1.CSIDriver; every function is pure.
//
// What it does not do: act on a driver's settings. The attach/detach
// controller reads attachRequired, the agent reads the rest.
package csidriver

import (
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Upstream's literal messages and limits.
const (
	msgTokenTooShort   = "may not specify a duration less than 10 minutes"
	msgTokenTooLong    = "may not specify a duration larger than 2^32 seconds"
	msgPeriodTooShort  = "must be greater than or equal to 10 seconds"
	minTokenExpiration = int64(10 * time.Minute / time.Second)
	maxTokenExpiration = int64(1) << 32
	minUpdatePeriod    = 10
)

// Supported values in upstream's order.
var (
	fsGroupPolicies = []string{string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy), string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)}
	lifecycleModes  = []string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}
)

// Kind returns the rules for the "csidrivers" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: storagev1.SchemeGroupVersion,
		Resource:     "csidrivers",
		Kind:         "CSIDriver",
		ListKind:     "CSIDriverList",
		SingularName: "csidriver",

		New:     func() runtime.Object { return &storagev1.CSIDriver{} },
		NewList: func() runtime.Object { return &storagev1.CSIDriverList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*storagev1.CSIDriver)) },
		PrepareForCreate: func(obj runtime.Object) { obj.(*storagev1.CSIDriver).Spec.NodeAllocatableUpdatePeriodSeconds = nil },
		PrepareForUpdate: func(obj, old runtime.Object) {
			prepareForUpdate(obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver))
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*storagev1.CSIDriver)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*storagev1.CSIDriver), old.(*storagev1.CSIDriver))
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*storagev1.CSIDriver), false)
		},
	}
}

// Default applies upstream's v1 defaults to unset fields: attachRequired
// true; podInfoOnMount, storageCapacity, requiresRepublish and
// seLinuxMount false; fsGroupPolicy ReadWriteOnceWithFSType;
// volumeLifecycleModes [Persistent] when empty.
func Default(d *storagev1.CSIDriver) {
	s := &d.Spec
	setBool := func(p **bool, v bool) {
		if *p == nil {
			*p = &v
		}
	}
	setBool(&s.AttachRequired, true)
	setBool(&s.PodInfoOnMount, false)
	setBool(&s.StorageCapacity, false)
	setBool(&s.RequiresRepublish, false)
	setBool(&s.SELinuxMount, false)
	if s.FSGroupPolicy == nil {
		p := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
		s.FSGroupPolicy = &p
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
}

// prepareForUpdate drops a newly set nodeAllocatableUpdatePeriodSeconds
// (its feature is off) and bumps the generation on any spec change.
func prepareForUpdate(d, old *storagev1.CSIDriver) {
	if old.Spec.NodeAllocatableUpdatePeriodSeconds == nil {
		d.Spec.NodeAllocatableUpdatePeriodSeconds = nil
	}
	if !apiequality.Semantic.DeepEqual(d.Spec, old.Spec) {
		d.Generation = old.Generation + 1
	}
}

// Validate checks a driver's spec (upstream ValidateCSIDriver without the
// metadata part). The path of attachRequired is upstream's
// "spec.attachedRequired", as clients see it.
func Validate(d *storagev1.CSIDriver) field.ErrorList {
	spec := field.NewPath("spec")
	s := &d.Spec
	var errs field.ErrorList
	for _, b := range []struct {
		v    *bool
		name string
	}{{s.AttachRequired, "attachedRequired"}, {s.PodInfoOnMount, "podInfoOnMount"}, {s.StorageCapacity, "storageCapacity"}} {
		if b.v == nil {
			errs = append(errs, field.Required(spec.Child(b.name), ""))
		}
	}
	if p := s.FSGroupPolicy; p != nil {
		switch *p {
		case storagev1.FileFSGroupPolicy, storagev1.NoneFSGroupPolicy, storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy:
		default:
			errs = append(errs, field.NotSupported(spec.Child("fsGroupPolicy"), *p, fsGroupPolicies))
		}
	}
	errs = append(errs, validateTokenRequests(s.TokenRequests, spec.Child("tokenRequests"))...)
	for _, m := range s.VolumeLifecycleModes {
		if m != storagev1.VolumeLifecyclePersistent && m != storagev1.VolumeLifecycleEphemeral {
			errs = append(errs, field.NotSupported(spec.Child("volumeLifecycleModes"), m, lifecycleModes))
		}
	}
	if s.SELinuxMount == nil {
		errs = append(errs, field.Required(spec.Child("seLinuxMount"), ""))
	}
	if p := s.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < minUpdatePeriod {
		errs = append(errs, field.Invalid(spec.Child("nodeAllocatableUpdatePeriodSeconds"), *p, msgPeriodTooShort))
	}
	return errs
}

// validateTokenRequests: audiences are unique (a repeated one is reported
// and its entry not checked further), and an expiration is between 10
// minutes and 2^32 seconds.
func validateTokenRequests(reqs []storagev1.TokenRequest, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	audiences := map[string]bool{}
	for i, r := range reqs {
		p := path.Index(i)
		if audiences[r.Audience] {
			errs = append(errs, field.Duplicate(p.Child("audience"), r.Audience))
			continue
		}
		audiences[r.Audience] = true
		if r.ExpirationSeconds == nil {
			continue
		}
		if *r.ExpirationSeconds < minTokenExpiration {
			errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *r.ExpirationSeconds, msgTokenTooShort))
		}
		if *r.ExpirationSeconds > maxTokenExpiration {
			errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *r.ExpirationSeconds, msgTokenTooLong))
		}
	}
	return errs
}

// ValidateUpdate is Validate plus immutability of attachRequired (at
// upstream's path "spec.attachedRequired") and volumeLifecycleModes.
func ValidateUpdate(d, old *storagev1.CSIDriver) field.ErrorList {
	errs := Validate(d)
	errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.AttachRequired, old.Spec.AttachRequired, field.NewPath("spec", "attachedRequired"))...)
	errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, field.NewPath("spec", "volumeLifecycleModes"))...)
	return errs
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	doc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "AttachRequired", Type: "boolean", Description: doc["attachRequired"]},
		{Name: "PodInfoOnMount", Type: "boolean", Description: doc["podInfoOnMount"]},
		{Name: "StorageCapacity", Type: "boolean", Description: doc["storageCapacity"]},
		{Name: "TokenRequests", Type: "string", Description: doc["tokenRequests"]},
		{Name: "RequiresRepublish", Type: "boolean", Description: doc["requiresRepublish"]},
		{Name: "Modes", Type: "string", Description: doc["volumeLifecycleModes"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// row is kubectl's driver row. Unset booleans print their defaults;
// TOKENREQUESTS is the comma-joined audiences or "<unset>"; MODES is the
// comma-joined modes or "<none>".
func row(obj runtime.Object, now time.Time) []interface{} {
	d := obj.(*storagev1.CSIDriver)
	s := &d.Spec
	tokens := "<unset>"
	if s.TokenRequests != nil {
		tokens = ""
		for i, t := range s.TokenRequests {
			if i > 0 {
				tokens += ","
			}
			tokens += t.Audience
		}
	}
	modes := ""
	for i, m := range s.VolumeLifecycleModes {
		if i > 0 {
			modes += ","
		}
		modes += string(m)
	}
	if modes == "" {
		modes = "<none>"
	}
	return []interface{}{
		d.Name,
		boolOr(s.AttachRequired, true),
		boolOr(s.PodInfoOnMount, false),
		boolOr(s.StorageCapacity, false),
		tokens,
		boolOr(s.RequiresRepublish, false),
		modes,
		age(d.CreationTimestamp, now),
	}
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
