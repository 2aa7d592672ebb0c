// Package controllerrevision holds the API rules for apps/v1
// ControllerRevisions, the immutable snapshots of a workload's template that
// StatefulSets and DaemonSets keep as their history: validation of a new
// revision and of an update, the table kubectl prints and the selectable
// fields. The kind has no defaults, no status and no generation rules.
//
// It follows Kubernetes 1.33: a new revision's data must be a JSON object
// ("data is mandatory" when absent or null), revision must not be negative,
// and an update may change the revision number and the metadata but never
// the data.
//
// Callers (the generic REST layer) use Kind() and pass
// *appsv1.ControllerRevision. Every function is pure.
//
// Upstream deviation, on purpose: the data compare ignores insignificant
// JSON whitespace. Upstream compares the stored bytes, so writing back what
// a GET returned (always compact) fails there when the revision was created
// with spaced-out JSON.
//
// What it does not do: create or prune revisions (the workload controllers
// do), or check that data matches its owner's template.
package controllerrevision

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Upstream's literal messages and values.
const (
	msgDataRequired = "data is mandatory"
	msgDataObject   = "data must be a valid JSON object"
	msgDataParse    = "error parsing data: "
	valueOmitted    = "<value omitted>"
)

var (
	dataPath     = field.NewPath("data")
	revisionPath = field.NewPath("revision")
)

// Kind returns the rules for the "controllerrevisions" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: appsv1.SchemeGroupVersion,
		Resource:     "controllerrevisions",
		Kind:         "ControllerRevision",
		ListKind:     "ControllerRevisionList",
		SingularName: "controllerrevision",
		Namespaced:   true,

		New:     func() runtime.Object { return &appsv1.ControllerRevision{} },
		NewList: func() runtime.Object { return &appsv1.ControllerRevisionList{} },

		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*appsv1.ControllerRevision)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision))
		},

		Columns: columns(),
		Row:     row,
		Fields: func(obj runtime.Object) fields.Set {
			return registry.DefaultFields(obj.(*appsv1.ControllerRevision), true)
		},
	}
}

// Validate checks a new revision (upstream ValidateControllerRevisionCreate
// without the common metadata): revision is not negative and data.Raw
// holds a JSON object.
func Validate(cr *appsv1.ControllerRevision) field.ErrorList {
	errs := apivalidation.ValidateNonnegativeField(cr.Revision, revisionPath)
	if cr.Data.Raw == nil {
		return append(errs, field.Required(dataPath, msgDataRequired))
	}
	var v any
	switch err := json.Unmarshal(cr.Data.Raw, &v); {
	case err != nil:
		errs = append(errs, field.Invalid(dataPath, valueOmitted, msgDataParse+err.Error()))
	case v == nil:
		errs = append(errs, field.Required(dataPath, msgDataRequired))
	default:
		if _, isObject := v.(map[string]any); !isObject {
			errs = append(errs, field.Required(dataPath, msgDataObject))
		}
	}
	return errs
}

// ValidateUpdate checks an update (upstream
// ValidateControllerRevisionUpdate): revision is not negative and data did
// not change. Data stored before the JSON-object rule is not re-checked.
func ValidateUpdate(cr, old *appsv1.ControllerRevision) field.ErrorList {
	errs := apivalidation.ValidateNonnegativeField(cr.Revision, revisionPath)
	if !sameData(cr.Data, old.Data) {
		errs = append(errs, field.Invalid(dataPath, cr.Data, apivalidation.FieldImmutableErrorMsg))
	}
	return errs
}

// sameData: equal raw bytes, or equal JSON once insignificant whitespace is
// removed from both; the decoded Object (set only by in-process Go
// callers) must be semantically equal.
func sameData(a, b runtime.RawExtension) bool {
	if !apiequality.Semantic.DeepEqual(a.Object, b.Object) {
		return false
	}
	if bytes.Equal(a.Raw, b.Raw) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.Raw) != nil || json.Compact(&cb, b.Raw) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Controller", Type: "string", Description: "Controller of the object"},
		{Name: "Revision", Type: "string", Description: appsv1.ControllerRevision{}.SwaggerDoc()["revision"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
	}
}

// row is kubectl's ControllerRevision row. The REVISION cell is the number
// (an int64), as upstream sends it under a "string" column.
func row(obj runtime.Object, now time.Time) []interface{} {
	cr := obj.(*appsv1.ControllerRevision)
	return []interface{}{cr.Name, Controller(cr), cr.Revision, age(cr.CreationTimestamp, now)}
}

// Controller is the CONTROLLER cell: the controlling owner as
// "<kind>.<group>/<name>" in lower case, e.g. "statefulset.apps/web", the
// kind alone for the core group, or "<none>". Upstream fails the whole
// table when the owner's apiVersion does not parse; here the group is
// then left out.
func Controller(cr *appsv1.ControllerRevision) string {
	ref := metav1.GetControllerOfNoCopy(cr)
	if ref == nil {
		return "<none>"
	}
	gk := schema.GroupKind{Kind: ref.Kind}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err == nil {
		gk.Group = gv.Group
	}
	if gk.Empty() {
		return ref.Name
	}
	return strings.ToLower(gk.String()) + "/" + ref.Name
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
