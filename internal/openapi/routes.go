package openapi

import (
	"net/http"
	"reflect"
	"strings"
	"unicode"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/common"

	"knode/internal/registry"
)

// The extensions kubectl reads on an operation.
const (
	extensionAction = "x-kubernetes-action"
	extensionGVK    = "x-kubernetes-group-version-kind"
)

// Media types the operations list. Clients pick their own content type, so
// these only describe; they do not steer any client.
var (
	mediaTypes      = []string{"application/json", "application/yaml"}
	listMediaTypes  = []string{"application/json", "application/yaml", "application/json;stream=watch"}
	anyMediaType    = []string{"*/*"}
	patchMediaTypes = []string{
		"application/json-patch+json",
		"application/merge-patch+json",
		"application/strategic-merge-patch+json",
		"application/apply-patch+yaml",
	}
)

// route is one operation: an HTTP method on a path. It implements
// kube-openapi's common.Route so that builder (v2) and builder3 (v3) turn
// it into an operation and collect the schemas its samples reach.
type route struct {
	method      string
	path        string
	operationID string
	tags        []string
	description string
	// action is x-kubernetes-action; gvk is x-kubernetes-group-version-kind.
	// Both are empty for the discovery endpoints.
	action    string
	gvk       *metav1.GroupVersionKind
	params    []parameter
	consumes  []string
	produces  []string
	body      interface{} // request body sample; nil when there is none
	responses []response
}

func (r *route) Method() string                     { return r.method }
func (r *route) Path() string                       { return r.path }
func (r *route) OperationName() string              { return r.operationID }
func (r *route) Description() string                { return r.description }
func (r *route) Consumes() []string                 { return r.consumes }
func (r *route) Produces() []string                 { return r.produces }
func (r *route) RequestPayloadSample() interface{}  { return r.body }
func (r *route) ResponsePayloadSample() interface{} { return nil }

func (r *route) Parameters() []common.Parameter {
	out := make([]common.Parameter, len(r.params))
	for i := range r.params {
		out[i] = r.params[i]
	}
	return out
}

func (r *route) StatusCodeResponses() []common.StatusCodeResponse {
	out := make([]common.StatusCodeResponse, len(r.responses))
	for i := range r.responses {
		out[i] = r.responses[i]
	}
	return out
}

func (r *route) Metadata() map[string]interface{} {
	m := map[string]interface{}{}
	if r.action != "" {
		m[extensionAction] = r.action
	}
	if r.gvk != nil {
		m[extensionGVK] = *r.gvk
	}
	return m
}

// parameter implements common.Parameter. dataType is "string", "integer"
// or "boolean" (or unused, for the body).
type parameter struct {
	name        string
	description string
	kind        common.ParameterKind
	dataType    string
	required    bool
}

func (p parameter) Name() string               { return p.name }
func (p parameter) Description() string        { return p.description }
func (p parameter) Required() bool             { return p.required }
func (p parameter) Kind() common.ParameterKind { return p.kind }
func (p parameter) DataType() string           { return p.dataType }
func (p parameter) AllowMultiple() bool        { return false }

// response implements common.StatusCodeResponse; model is a sample of the
// body, whose type names the schema.
type response struct {
	code    int
	message string
	model   interface{}
}

func (r response) Code() int          { return r.code }
func (r response) Message() string    { return r.message }
func (r response) Model() interface{} { return r.model }

// container is a set of routes under one root path; it implements
// common.RouteContainer. Each container becomes one OpenAPI v3 document.
type container struct {
	root   string
	routes []*route
}

func (c *container) RootPath() string                   { return c.root }
func (c *container) PathParameters() []common.Parameter { return nil }

func (c *container) Routes() []common.Route {
	out := make([]common.Route, len(c.routes))
	for i, r := range c.routes {
		out[i] = r
	}
	return out
}

// v3Name is the key of the container's document in the v3 discovery
// document, e.g. "api/v1" or "apis/apps/v1".
func (c *container) v3Name() string { return strings.TrimPrefix(c.root, "/") }

// Parameters every upstream API server takes.
var (
	prettyParam = parameter{
		name:        "pretty",
		description: "If 'true', the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
		kind:        common.QueryParameterKind,
		dataType:    "string",
	}
	namespaceParam = parameter{
		name:        "namespace",
		description: "object name and auth scope, such as for teams and projects",
		kind:        common.PathParameterKind,
		dataType:    "string",
		required:    true,
	}
)

func nameParam(kind string) parameter {
	return parameter{
		name:        "name",
		description: "name of the " + kind,
		kind:        common.PathParameterKind,
		dataType:    "string",
		required:    true,
	}
}

func bodyParam(required bool) parameter {
	return parameter{name: "body", kind: common.BodyParameterKind, required: required}
}

// documented is what the metav1 option types implement (generated
// SwaggerDoc), the source of the query parameter descriptions.
type documented interface {
	SwaggerDoc() map[string]string
}

// queryParams lists the query parameters an options type accepts: one per
// JSON field of a simple type, described by the type's SwaggerDoc. Fields
// named in skip, and struct-valued fields, are left out.
func queryParams(options documented, skip ...string) []parameter {
	docs := options.SwaggerDoc()
	t := reflect.TypeOf(options)
	var out []parameter
fields:
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		for _, s := range skip {
			if s == name {
				continue fields
			}
		}
		dataType := jsonDataType(f.Type)
		if dataType == "" {
			continue
		}
		out = append(out, parameter{
			name:        name,
			description: docs[name],
			kind:        common.QueryParameterKind,
			dataType:    dataType,
		})
	}
	return out
}

// jsonDataType returns the OpenAPI type of a query parameter of Go type t,
// or "" when t cannot travel in a query string.
func jsonDataType(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.String:
		return "string"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "string"
		}
	}
	return ""
}

func concat(lists ...[]parameter) []parameter {
	var out []parameter
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var (
	listParams             = queryParams(metav1.ListOptions{})
	deleteCollectionParams = concat(queryParams(metav1.ListOptions{}, "watch", "allowWatchBookmarks"), queryParams(metav1.DeleteOptions{}))
	deleteParams           = queryParams(metav1.DeleteOptions{})
	createParams           = queryParams(metav1.CreateOptions{})
	updateParams           = queryParams(metav1.UpdateOptions{})
	patchParams            = queryParams(metav1.PatchOptions{})
	// podLogParams leave out sinceTime, a struct, as upstream's document
	// does.
	podLogParams = queryParams(corev1.PodLogOptions{})
)

// operationGroupVersion is the group-version part of upstream operation
// ids, e.g. "CoreV1" or "CoordinationV1"; groupVersionTag is the tag, e.g.
// "core_v1" or "coordination_v1".
func operationGroupVersion(gv schema.GroupVersion) string {
	return camelCase(groupWord(gv.Group), true) + camelCase(gv.Version, true)
}

func groupVersionTag(gv schema.GroupVersion) string {
	return camelCase(groupWord(gv.Group), false) + "_" + camelCase(gv.Version, false)
}

func groupWord(group string) string {
	if group == "" {
		return "core"
	}
	return strings.TrimSuffix(group, ".k8s.io")
}

// camelCase keeps letters, underscores and non-leading digits, drops
// everything else, and upper-cases the letter after each dropped run (and
// the first letter when upperFirst).
func camelCase(s string, upperFirst bool) string {
	var b strings.Builder
	upper := upperFirst
	for i, r := range s {
		if !unicode.IsLetter(r) && r != '_' && (i == 0 || !unicode.IsDigit(r)) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// groupVersionPath is the URL prefix of a group-version: "/api/v1" for the
// core group, "/apis/<group>/<version>" otherwise.
func groupVersionPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

var (
	statusOK = []response{{http.StatusOK, "OK", &metav1.Status{}}}
	scaleGVK = &metav1.GroupVersionKind{Group: autoscalingv1.GroupName, Version: "v1", Kind: "Scale"}
)

func okCreatedAccepted(model interface{}, accepted bool) []response {
	out := []response{{http.StatusOK, "OK", model}, {http.StatusCreated, "Created", model}}
	if accepted {
		out = append(out, response{http.StatusAccepted, "Accepted", model})
	}
	return out
}

// kindRoutes returns the operations a real API server lists for one kind:
// list, create and deletecollection on the collection; read, replace, patch
// and delete on the item; read, replace and patch on /status and on /scale
// (an autoscaling/v1 Scale) when the kind has them; the read of pods/log
// for core pods; and, for namespaced kinds, the list across all
// namespaces.
func kindRoutes(k registry.Kind) []*route {
	gv := k.GroupVersion
	opGV := operationGroupVersion(gv)
	tags := []string{groupVersionTag(gv)}
	gvk := &metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: k.Kind}

	prefix := groupVersionPath(gv)
	scope := ""
	var scopeParams []parameter
	if k.Namespaced {
		prefix += "/namespaces/{namespace}"
		scope = "Namespaced"
		scopeParams = []parameter{namespaceParam}
	}
	collection := prefix + "/" + k.Resource
	item := collection + "/{name}"
	itemParams := append(append([]parameter(nil), scopeParams...), nameParam(k.Kind))

	obj, list := k.New(), k.NewList()
	var routes []*route
	add := func(r route) {
		r.tags = tags
		if r.gvk == nil {
			r.gvk = gvk
		}
		if r.consumes == nil {
			r.consumes = anyMediaType
		}
		if r.produces == nil {
			r.produces = mediaTypes
		}
		routes = append(routes, &r)
	}

	add(route{
		method: http.MethodGet, path: collection, action: "list",
		operationID: "list" + opGV + scope + k.Kind,
		description: "list or watch objects of kind " + k.Kind,
		params:      concat(scopeParams, []parameter{prettyParam}, listParams),
		produces:    listMediaTypes,
		responses:   []response{{http.StatusOK, "OK", list}},
	})
	add(route{
		method: http.MethodPost, path: collection, action: "post",
		operationID: "create" + opGV + scope + k.Kind,
		description: "create " + article(k.Kind) + " " + k.Kind,
		params:      concat(scopeParams, []parameter{prettyParam, bodyParam(true)}, createParams),
		body:        obj,
		responses:   okCreatedAccepted(obj, true),
	})
	add(route{
		method: http.MethodDelete, path: collection, action: "deletecollection",
		operationID: "delete" + opGV + "Collection" + scope + k.Kind,
		description: "delete collection of " + k.Kind,
		params:      concat(scopeParams, []parameter{prettyParam, bodyParam(false)}, deleteCollectionParams),
		body:        &metav1.DeleteOptions{},
		responses:   statusOK,
	})
	add(route{
		method: http.MethodGet, path: item, action: "get",
		operationID: "read" + opGV + scope + k.Kind,
		description: "read the specified " + k.Kind,
		params:      concat(itemParams, []parameter{prettyParam}),
		responses:   []response{{http.StatusOK, "OK", obj}},
	})
	add(route{
		method: http.MethodPut, path: item, action: "put",
		operationID: "replace" + opGV + scope + k.Kind,
		description: "replace the specified " + k.Kind,
		params:      concat(itemParams, []parameter{prettyParam, bodyParam(true)}, updateParams),
		body:        obj,
		responses:   okCreatedAccepted(obj, false),
	})
	add(route{
		method: http.MethodPatch, path: item, action: "patch",
		operationID: "patch" + opGV + scope + k.Kind,
		description: "partially update the specified " + k.Kind,
		params:      concat(itemParams, []parameter{prettyParam, bodyParam(true)}, patchParams),
		consumes:    patchMediaTypes,
		body:        &metav1.Patch{},
		responses:   okCreatedAccepted(obj, false),
	})
	add(route{
		method: http.MethodDelete, path: item, action: "delete",
		operationID: "delete" + opGV + scope + k.Kind,
		description: "delete " + article(k.Kind) + " " + k.Kind,
		params:      concat(itemParams, []parameter{prettyParam, bodyParam(false)}, deleteParams),
		body:        &metav1.DeleteOptions{},
		responses: []response{
			{http.StatusOK, "OK", &metav1.Status{}},
			{http.StatusAccepted, "Accepted", &metav1.Status{}},
		},
	})
	// sub adds read, replace and patch of the subresource name, whose
	// body is model, of kind subGVK.
	sub := func(name string, model interface{}, subGVK *metav1.GroupVersionKind) {
		path, opKind := item+"/"+strings.ToLower(name), scope+k.Kind+name
		for _, r := range []route{{
			method: http.MethodGet, path: path, action: "get",
			operationID: "read" + opGV + opKind,
			description: "read " + strings.ToLower(name) + " of the specified " + k.Kind,
			params:      concat(itemParams, []parameter{prettyParam}),
			responses:   []response{{http.StatusOK, "OK", model}},
		}, {
			method: http.MethodPut, path: path, action: "put",
			operationID: "replace" + opGV + opKind,
			description: "replace " + strings.ToLower(name) + " of the specified " + k.Kind,
			params:      concat(itemParams, []parameter{prettyParam, bodyParam(true)}, updateParams),
			body:        model,
			responses:   okCreatedAccepted(model, false),
		}, {
			method: http.MethodPatch, path: path, action: "patch",
			operationID: "patch" + opGV + opKind,
			description: "partially update " + strings.ToLower(name) + " of the specified " + k.Kind,
			params:      concat(itemParams, []parameter{prettyParam, bodyParam(true)}, patchParams),
			consumes:    patchMediaTypes,
			body:        &metav1.Patch{},
			responses:   okCreatedAccepted(model, false),
		}} {
			r.gvk = subGVK
			add(r)
		}
	}
	if k.HasStatus {
		sub("Status", obj, gvk)
	}
	if k.Scale != nil {
		sub("Scale", &autoscalingv1.Scale{}, scaleGVK)
	}
	if k.Resource == "pods" && gv.Group == "" {
		// pods/log, which the API server proxies to the pod's node: a
		// read of text, as upstream describes it.
		add(route{
			method: http.MethodGet, path: item + "/log", action: "get",
			operationID: "read" + opGV + scope + k.Kind + "Log",
			description: "read log of the specified " + k.Kind,
			params:      concat(itemParams, []parameter{prettyParam}, podLogParams),
			produces:    append([]string{"text/plain"}, mediaTypes...),
			responses:   []response{{http.StatusOK, "OK", ""}},
		})
	}
	if k.Namespaced {
		add(route{
			method: http.MethodGet, path: groupVersionPath(gv) + "/" + k.Resource, action: "list",
			operationID: "list" + opGV + k.Kind + "ForAllNamespaces",
			description: "list or watch objects of kind " + k.Kind,
			params:      concat([]parameter{prettyParam}, listParams),
			produces:    listMediaTypes,
			responses:   []response{{http.StatusOK, "OK", list}},
		})
	}
	return routes
}

// article is "an" before a vowel, as in "create an Event", else "a".
func article(word string) string {
	if word != "" && strings.ContainsRune("AEIOU", unicode.ToUpper(rune(word[0]))) {
		return "an"
	}
	return "a"
}

// discoveryRoute describes one of the server's discovery endpoints.
func discoveryRoute(path, operationID, tag, description string, model interface{}) *route {
	return &route{
		method:      http.MethodGet,
		path:        path,
		operationID: operationID,
		tags:        []string{tag},
		description: description,
		consumes:    mediaTypes,
		produces:    mediaTypes,
		responses:   []response{{http.StatusOK, "OK", model}},
	}
}

// containers groups the routes into one container per v3 document: the
// version endpoint, /api, /apis, one per group (/apis/<group>) and one per
// group-version holding that group-version's kinds, in the order the
// group-versions first appear in kinds.
func containers(kinds []registry.Kind) []*container {
	out := []*container{
		{root: "/version", routes: []*route{discoveryRoute("/version/", "getCodeVersion", "version", "get the version information for this server", &version.Info{})}},
		{root: "/api", routes: []*route{discoveryRoute("/api/", "getCoreAPIVersions", "core", "get available API versions", &metav1.APIVersions{})}},
		{root: "/apis", routes: []*route{discoveryRoute("/apis/", "getAPIVersions", "apis", "get available API versions", &metav1.APIGroupList{})}},
	}
	byGV := map[schema.GroupVersion]*container{}
	groups := map[string]bool{}
	for _, k := range kinds {
		gv := k.GroupVersion
		if gv.Group != "" && !groups[gv.Group] {
			groups[gv.Group] = true
			word := camelCase(groupWord(gv.Group), false)
			out = append(out, &container{root: "/apis/" + gv.Group, routes: []*route{
				discoveryRoute("/apis/"+gv.Group+"/", "get"+camelCase(groupWord(gv.Group), true)+"APIGroup", word, "get information of a group", &metav1.APIGroup{}),
			}})
		}
		c, ok := byGV[gv]
		if !ok {
			path := groupVersionPath(gv)
			c = &container{root: path, routes: []*route{
				discoveryRoute(path+"/", "get"+operationGroupVersion(gv)+"APIResources", groupVersionTag(gv), "get available resources", &metav1.APIResourceList{}),
			}}
			byGV[gv] = c
			out = append(out, c)
		}
		c.routes = append(c.routes, kindRoutes(k)...)
	}
	return out
}
