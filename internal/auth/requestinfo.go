package auth

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// RequestAttributes reads a request URL the way kube-apiserver does (its
// RequestInfo) and returns the attributes to authorize; User is left nil.
//
// Resource requests are
//
//	/api/{version}/...            (the core group)
//	/apis/{group}/{version}/...
//
// followed by [namespaces/{ns}/]{resource}[/{name}[/{subresource}]], where
// namespaces/{ns} itself is resource "namespaces" named and namespaced {ns}
// (and namespaces/{ns}/status and /finalize are its subresources). A leading
// watch/ or proxy/ segment sets the verb. Otherwise the HTTP method sets it:
// POST create, GET and HEAD get (list without a name, watch when the watch
// parameter is set and not false or 0), PUT update, PATCH patch, DELETE
// delete (deletecollection without a name); any other method gives an empty
// verb.
//
// Every other path - /healthz, /version, /api, /api/v1, /apis/{group}/{version},
// /openapi/v2 - is a non-resource request whose verb is the lower-case
// method.
//
// Like upstream, a list or watch whose field selector pins metadata.name
// gets that Name, so authorizers can treat it as a request for one object.
// Unlike upstream, a path it cannot make sense of (such as /api/v1/watch)
// is not an error: it yields a resource request with an empty resource,
// which no authorizer but system:masters allows and no route serves.
func RequestAttributes(r *http.Request) Attributes {
	a := Attributes{Verb: strings.ToLower(r.Method)}
	if r.URL == nil {
		return a
	}
	a.Path = r.URL.Path

	parts := splitPath(r.URL.Path)
	// The shortest resource path is /api/{version}/{resource}.
	if len(parts) < 3 {
		return a
	}
	switch parts[0] {
	case "api":
		parts = parts[1:]
	case "apis":
		// One more segment, the group: /apis/{group}/{version}/{resource}.
		if len(parts) < 4 {
			return a
		}
		a.APIGroup = parts[1]
		parts = parts[2:]
	default:
		return a
	}
	a.ResourceRequest = true
	a.APIVersion = parts[0]
	parts = parts[1:]

	switch parts[0] {
	case "watch", "proxy":
		a.Verb = parts[0]
		parts = parts[1:]
	default:
		a.Verb = MethodVerb(r.Method)
	}
	if len(parts) == 0 {
		return a
	}

	if parts[0] == "namespaces" && len(parts) > 1 {
		a.Namespace = parts[1]
		// namespaces/{ns}/{resource}: a resource inside the namespace,
		// unless the segment is a subresource of the namespace itself.
		if len(parts) > 2 && parts[2] != "status" && parts[2] != "finalize" {
			parts = parts[2:]
		}
	}

	a.Resource = parts[0]
	if len(parts) > 1 {
		a.Name = parts[1]
	}
	if len(parts) > 2 && a.Verb != "proxy" {
		a.Subresource = parts[2]
	}

	if a.Name == "" && a.Verb == "get" {
		a.Verb = collectionReadVerb(r)
		if name, ok := selectedName(r); ok {
			a.Name = name
		}
	}
	if a.Name == "" && a.Verb == "delete" {
		a.Verb = "deletecollection"
	}
	switch a.Verb {
	case "list", "watch", "deletecollection":
		q := r.URL.Query()
		a.FieldSelector = q.Get("fieldSelector")
		a.LabelSelector = q.Get("labelSelector")
	}
	return a
}

// MethodVerb is the authorization verb of a request that names no
// resource: GET and HEAD get, POST create, PUT update, PATCH patch, DELETE
// delete; "" for any other method.
func MethodVerb(method string) string {
	switch method {
	case http.MethodPost:
		return "create"
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return ""
}

// collectionReadVerb is watch when the first watch parameter is present and
// not "false" or "0" (any case), list otherwise; apimachinery reads boolean
// parameters this way, so "?watch" and "?watch=yes" both watch.
func collectionReadVerb(r *http.Request) string {
	values := r.URL.Query()["watch"]
	if len(values) == 0 || values[0] == "0" || strings.EqualFold(values[0], "false") {
		return "list"
	}
	return "watch"
}

// selectedName returns the name a metadata.name field selector pins, when
// the selectors parse and the name could be a path segment.
func selectedName(r *http.Request) (string, bool) {
	q := r.URL.Query()
	if _, err := labels.Parse(q.Get("labelSelector")); err != nil {
		return "", false
	}
	sel, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return "", false
	}
	name, ok := sel.RequiresExactMatch("metadata.name")
	if !ok || len(path.IsValidPathSegmentName(name)) > 0 {
		return "", false
	}
	return name, true
}

// splitPath returns the segments of a URL path without leading or trailing
// slashes; empty for "/" and "".
func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// PublicPath reports whether path may be served without credentials:
// exactly /healthz, /livez, /readyz, /version and /version/, the
// non-resource URLs upstream's system:public-info-viewer role grants to
// everyone. Their sub-checks (/readyz/etcd) need credentials.
func PublicPath(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	return false
}
