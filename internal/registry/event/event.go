// Package event holds the rules the API server applies to core/v1 Events:
// validation, the table kubectl prints and the fields selectors match on.
//
// Callers (the generic REST layer) must pass *v1.Event values. Every
// function is pure.
//
// Validation is upstream's for writes through core/v1, which is the
// permissive "legacy" check: creates and updates run the same rules, and
// nothing is immutable. (The stricter rules of events.k8s.io/v1 apply only
// to writes through that group, which knode does not serve.)
//
// What it does not do: metadata, and expiry of old events (upstream keeps
// events for an hour through a storage TTL; that is the REST layer's
// choice).
package event

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Length limits of the newer event shape (those with eventTime set).
const (
	reportingInstanceMaxLen = 128
	actionMaxLen            = 128
	reasonMaxLen            = 128
	messageMaxLen           = 1024
)

const msgNamespaceMismatch = "does not match event.namespace"

// Kind returns the rules for the core/v1 "events" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: v1.SchemeGroupVersion,
		Resource:     "events",
		Kind:         "Event",
		ListKind:     "EventList",
		SingularName: "event",
		ShortNames:   []string{"ev"},
		Namespaced:   true,

		New:     func() runtime.Object { return &v1.Event{} },
		NewList: func() runtime.Object { return &v1.EventList{} },

		Validate:       func(obj runtime.Object) field.ErrorList { return Validate(obj.(*v1.Event)) },
		ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList { return Validate(obj.(*v1.Event)) },

		Columns: columns(),
		Row:     row,
		Fields:  func(obj runtime.Object) fields.Set { return Fields(obj.(*v1.Event)) },
	}
}

// Validate checks an event written through core/v1, on create and update.
//
// An event without eventTime (the classic shape kubectl and client-go's
// record package write) must live in its involved object's namespace; an
// event about a cluster-scoped object may live in "default" (or carry no
// namespace). An event with eventTime (the newer shape) about a
// cluster-scoped object may live in "default" or "kube-system", and must
// name its reporting controller and instance, its action and its reason,
// within length limits.
func Validate(e *v1.Event) field.ErrorList {
	var errs field.ErrorList
	involvedNS := field.NewPath("involvedObject", "namespace")

	if e.EventTime.IsZero() {
		if e.InvolvedObject.Namespace == "" {
			if e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(involvedNS, e.InvolvedObject.Namespace, msgNamespaceMismatch))
			}
		} else if e.Namespace != e.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(involvedNS, e.InvolvedObject.Namespace, msgNamespaceMismatch))
		}
	} else {
		if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(involvedNS, e.InvolvedObject.Namespace, msgNamespaceMismatch))
		}

		controller := field.NewPath("reportingController")
		if e.ReportingController == "" {
			errs = append(errs, field.Required(controller, ""))
		}
		// Upstream also runs the name check on an empty controller, so an
		// empty one carries the qualified-name errors as well.
		for _, msg := range validation.IsQualifiedName(e.ReportingController) {
			errs = append(errs, field.Invalid(controller, e.ReportingController, msg))
		}
		errs = append(errs, requiredWithin(e.ReportingInstance, reportingInstanceMaxLen, field.NewPath("reportingInstance"))...)
		errs = append(errs, requiredWithin(e.Action, actionMaxLen, field.NewPath("action"))...)
		errs = append(errs, requiredWithin(e.Reason, reasonMaxLen, field.NewPath("reason"))...)
		if len(e.Message) > messageMaxLen {
			errs = append(errs, tooLong(field.NewPath("message"), messageMaxLen))
		}
	}

	for _, msg := range validation.IsDNS1123Subdomain(e.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), e.Namespace, msg))
	}
	return errs
}

// requiredWithin: s is set and at most max bytes long.
func requiredWithin(s string, max int, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s == "" {
		errs = append(errs, field.Required(path, ""))
	}
	if len(s) > max {
		errs = append(errs, tooLong(path, max))
	}
	return errs
}

// tooLong is upstream's length error: an Invalid with an empty value.
func tooLong(path *field.Path, max int) *field.Error {
	return field.Invalid(path, "", fmt.Sprintf("can have at most %d characters", max))
}

// Fields returns the selectable fields upstream offers for events.
// "source" is source.component, or reportingController when that is empty;
// "reportingComponent" is reportingController.
func Fields(e *v1.Event) fields.Set {
	set := registry.DefaultFields(e, true)
	source := e.Source.Component
	if source == "" {
		source = e.ReportingController
	}
	set["involvedObject.kind"] = e.InvolvedObject.Kind
	set["involvedObject.namespace"] = e.InvolvedObject.Namespace
	set["involvedObject.name"] = e.InvolvedObject.Name
	set["involvedObject.uid"] = string(e.InvolvedObject.UID)
	set["involvedObject.apiVersion"] = e.InvolvedObject.APIVersion
	set["involvedObject.resourceVersion"] = e.InvolvedObject.ResourceVersion
	set["involvedObject.fieldPath"] = e.InvolvedObject.FieldPath
	set["reason"] = e.Reason
	set["reportingComponent"] = e.ReportingController
	set["source"] = source
	set["type"] = e.Type
	return set
}

// columns are upstream's event columns, wide ones (Priority 1) included.
func columns() []metav1.TableColumnDefinition {
	ev := v1.Event{}.SwaggerDoc()
	ref := v1.ObjectReference{}.SwaggerDoc()
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: ev["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: ev["type"]},
		{Name: "Reason", Type: "string", Description: ev["reason"]},
		{Name: "Object", Type: "string", Description: ev["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: ref["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: ev["source"]},
		{Name: "Message", Type: "string", Description: ev["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: ev["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: ev["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: meta["name"]},
	}
}

// row follows upstream's printer:
//   - FIRST SEEN is firstTimestamp, else eventTime;
//   - LAST SEEN is lastTimestamp, else FIRST SEEN; for a series, the series'
//     last observation;
//   - COUNT is count, the series' count, or 1 for a singleton of the newer
//     shape (count 0); it is an int64 cell;
//   - OBJECT is "<lowercased kind>/<name>", or just the kind without a name;
//   - SOURCE is "component, host", each falling back to
//     reportingController and reportingInstance.
func row(obj runtime.Object, now time.Time) []interface{} {
	e := obj.(*v1.Event)

	first := since(e.FirstTimestamp.Time, now)
	if e.FirstTimestamp.IsZero() {
		first = since(e.EventTime.Time, now)
	}
	last := since(e.LastTimestamp.Time, now)
	if e.LastTimestamp.IsZero() {
		last = first
	}
	count := e.Count
	if e.Series != nil {
		last = since(e.Series.LastObservedTime.Time, now)
		count = e.Series.Count
	} else if count == 0 {
		count = 1
	}

	target := strings.ToLower(e.InvolvedObject.Kind)
	if e.InvolvedObject.Name != "" {
		target += "/" + e.InvolvedObject.Name
	}

	return []interface{}{
		last,
		e.Type,
		e.Reason,
		target,
		e.InvolvedObject.FieldPath,
		source(e),
		strings.TrimSpace(e.Message),
		first,
		int64(count),
		e.Name,
	}
}

func source(e *v1.Event) string {
	component := firstNonEmpty(e.Source.Component, e.ReportingController)
	instance := firstNonEmpty(e.Source.Host, e.ReportingInstance)
	if instance == "" {
		return component
	}
	return component + ", " + instance
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// since renders the time from t to now, or "<unknown>" when t is unset.
func since(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
