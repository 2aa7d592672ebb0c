// Package registry describes, for each kind the API server serves, the rules
// the generic REST layer applies: defaults, validation, what the main resource
// and the status subresource may change, table columns and selectable fields.
//
// A Kind is plain data plus pure functions. Each function works on the typed
// k8s.io/api object (the caller passes the right type) and must not do I/O or
// read the clock: the REST layer passes now where time matters. Functions may
// mutate the object they are given (obj), never old.
//
// The REST layer owns metadata common to every kind (name generation, uid,
// creationTimestamp, resourceVersion, generation, deletion) and calls
// ValidateObjectMeta itself; a Kind validates only what is specific to it.
package registry

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Kind is everything the REST layer needs to serve one resource.
type Kind struct {
	// GroupVersion and Resource name the endpoint, e.g. {"", "v1"}, "nodes".
	GroupVersion schema.GroupVersion
	Resource     string
	// Kind and ListKind are the type names, e.g. "Node", "NodeList".
	Kind     string
	ListKind string
	// SingularName is the lowercase singular, e.g. "node".
	SingularName string
	ShortNames   []string
	Categories   []string
	Namespaced   bool
	// HasStatus: the resource has a /status subresource, and then the main
	// resource ignores status changes (PrepareForUpdate copies it from old).
	HasStatus bool

	// New and NewList return empty typed objects (e.g. &v1.Node{}).
	New     func() runtime.Object
	NewList func() runtime.Object

	// Default fills defaulted fields, as upstream's defaulters do on decode.
	// Called on create and on every update of obj. May be nil.
	Default func(obj runtime.Object)
	// PrepareForCreate clears or sets fields the server owns on create
	// (for example a pod's status phase). May be nil.
	PrepareForCreate func(obj runtime.Object)
	// PrepareForUpdate adjusts obj from old on an update of the main
	// resource, e.g. copying status from old. May be nil.
	PrepareForUpdate func(obj, old runtime.Object)
	// Validate checks a new object; ValidateUpdate checks an update of the
	// main resource. Errors name the field path from the object root, e.g.
	// field.NewPath("spec", "taints").Index(0).Child("effect").
	Validate       func(obj runtime.Object) field.ErrorList
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// Status rules for the /status subresource; nil when HasStatus is false.
	Status *StatusRules
	// Scale maps the object to and from autoscaling/v1 Scale for the
	// /scale subresource; nil means the kind has none.
	Scale *ScaleRules
	// Approval rules for an /approval subresource (GET, PUT and PATCH),
	// through which a CertificateSigningRequest's Approved and Denied
	// conditions are set; nil means the kind has none. The REST layer
	// treats an approval update as it treats a /status one (finalizers and
	// owner references are kept from old); these rules decide what else
	// it may change.
	Approval *StatusRules
	// RecordRequester, when set, is called on create after
	// PrepareForCreate with the user who makes the request (the zero User
	// when the request carries none), for kinds that record it (a
	// CertificateSigningRequest's spec.username, uid, groups and extra).
	// It must replace whatever the client sent there. May be nil.
	RecordRequester func(obj runtime.Object, user User)

	// DeleteGracePeriod decides graceful deletion. Given the stored object
	// and the grace period the request asked for (nil when it named none),
	// it returns the grace period in seconds to apply: 0 deletes at once,
	// more sets deletionTimestamp and deletionGracePeriodSeconds and leaves
	// the object for its owner (the agent) to finish. nil means every
	// delete is immediate.
	DeleteGracePeriod func(obj runtime.Object, requested *int64) int64

	// Columns and Row produce the server-side Table kubectl prints.
	// Row returns one cell per column; now is for AGE-like cells.
	Columns []metav1.TableColumnDefinition
	Row     func(obj runtime.Object, now time.Time) []interface{}

	// Fields returns the values field selectors match on. It must include
	// metadata.name and, for namespaced kinds, metadata.namespace.
	Fields func(obj runtime.Object) fields.Set
}

// ScaleRules are what the /scale subresource needs from a kind whose
// spec.replicas it exposes, as upstream's apps/v1 ReplicaSets and
// StatefulSets do. Both functions are pure.
type ScaleRules struct {
	// Get returns spec.replicas (nil counts as 0 only if the kind's
	// defaults leave it nil), status.replicas and the label selector in
	// its string form (metav1.FormatLabelSelector of the spec's selector,
	// "" when it has none), the three things a Scale carries.
	Get func(obj runtime.Object) (spec, status int32, selector string)
	// Set writes spec.replicas into obj.
	Set func(obj runtime.Object, replicas int32)
}

// User is the authenticated user of a request, as the REST layer hands it
// to RecordRequester. The kind may keep the slices and the map.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// StatusRules govern updates through the /status subresource (and, with
// Kind.Approval, through /approval).
type StatusRules struct {
	// PrepareForUpdate keeps old's spec (and anything else the status
	// subresource may not change) in obj.
	PrepareForUpdate func(obj, old runtime.Object)
	ValidateUpdate   func(obj, old runtime.Object) field.ErrorList
}

// DefaultFields returns the selectable fields every object has.
func DefaultFields(meta metav1.Object, namespaced bool) fields.Set {
	set := fields.Set{"metadata.name": meta.GetName()}
	if namespaced {
		set["metadata.namespace"] = meta.GetNamespace()
	}
	return set
}
