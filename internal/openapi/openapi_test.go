package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"testing"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"knode/internal/registry"
)

func newTestHandler(t testing.TB) *Handler {
	t.Helper()
	h, err := NewHandler(testKinds(), "v1.33.0")
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	return h
}

// get sends one request to h and returns the response.
func get(t testing.TB, h http.Handler, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// v3Documents fetches the discovery document and every document it lists,
// through the URLs it gives, keyed by name ("api/v1", ...).
func v3Documents(t *testing.T, h http.Handler) map[string]*spec3.OpenAPI {
	t.Helper()
	resp := get(t, h, "/openapi/v3", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /openapi/v3: %d", resp.StatusCode)
	}
	var discovery handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(body(t, resp), &discovery); err != nil {
		t.Fatalf("decoding the v3 discovery document: %v", err)
	}
	docs := map[string]*spec3.OpenAPI{}
	for name, gv := range discovery.Paths {
		u, err := url.Parse(gv.ServerRelativeURL)
		if err != nil || u.Path != "/openapi/v3/"+name || u.Query().Get("hash") == "" {
			t.Errorf("document %q has URL %q; want /openapi/v3/%s?hash=...", name, gv.ServerRelativeURL, name)
			continue
		}
		resp := get(t, h, gv.ServerRelativeURL, http.Header{"Accept": {"application/json"}})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", gv.ServerRelativeURL, resp.StatusCode)
			continue
		}
		doc := &spec3.OpenAPI{}
		if err := json.Unmarshal(body(t, resp), doc); err != nil {
			t.Fatalf("decoding %s: %v", name, err)
		}
		docs[name] = doc
	}
	return docs
}

func TestV3DiscoveryListsEveryGroupVersion(t *testing.T) {
	docs := v3Documents(t, newTestHandler(t))
	var got []string
	for name := range docs {
		got = append(got, name)
	}
	sort.Strings(got)
	want := []string{
		"api", "api/v1", "apis",
		"apis/apps", "apis/apps/v1",
		"apis/coordination.k8s.io", "apis/coordination.k8s.io/v1",
		"apis/policy", "apis/policy/v1",
		"apis/scheduling.k8s.io", "apis/scheduling.k8s.io/v1",
		"apis/storage.k8s.io", "apis/storage.k8s.io/v1",
		"version",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("v3 documents (-want +got):\n%s", diff)
	}
	for name, doc := range docs {
		if doc.Version != "3.0.0" || doc.Info == nil || doc.Info.Version != "v1.33.0" {
			t.Errorf("%s: openapi %q, info %+v; want 3.0.0 and version v1.33.0", name, doc.Version, doc.Info)
		}
	}
}

func gvkOf(t *testing.T, ext spec.Extensions) metav1.GroupVersionKind {
	t.Helper()
	var gvk metav1.GroupVersionKind
	if err := ext.GetObject(extensionGVK, &gvk); err != nil {
		t.Fatalf("%s: %v", extensionGVK, err)
	}
	return gvk
}

func TestV3CoreDocumentDescribesNodes(t *testing.T) {
	doc := v3Documents(t, newTestHandler(t))["api/v1"]
	if doc == nil {
		t.Fatal("no api/v1 document")
	}
	nodes := doc.Paths.Paths["/api/v1/nodes"]
	if nodes == nil || nodes.Post == nil {
		t.Fatal("no POST /api/v1/nodes")
	}
	post := nodes.Post
	if post.OperationId != "createCoreV1Node" {
		t.Errorf("operationId = %q, want createCoreV1Node", post.OperationId)
	}
	if diff := cmp.Diff(metav1.GroupVersionKind{Version: "v1", Kind: "Node"}, gvkOf(t, post.Extensions)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", extensionGVK, diff)
	}
	var fieldValidation *spec3.Parameter
	for _, p := range post.Parameters {
		if p.Name == "fieldValidation" {
			fieldValidation = p
		}
	}
	if fieldValidation == nil || fieldValidation.In != "query" || fieldValidation.Schema == nil ||
		!cmp.Equal(fieldValidation.Schema.Type, spec.StringOrArray{"string"}) {
		t.Errorf("fieldValidation parameter = %+v; want a string in the query", fieldValidation)
	}

	node := doc.Components.Schemas["io.k8s.api.core.v1.Node"]
	if node == nil {
		t.Fatal("no io.k8s.api.core.v1.Node schema")
	}
	if want := (corev1.Node{}).SwaggerDoc()[""]; node.Description != want {
		t.Errorf("Node description = %q, want the type's documentation", node.Description)
	}
	var gvks []metav1.GroupVersionKind
	if err := node.Extensions.GetObject(extensionGVK, &gvks); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]metav1.GroupVersionKind{{Version: "v1", Kind: "Node"}}, gvks); diff != "" {
		t.Errorf("Node schema %s (-want +got):\n%s", extensionGVK, diff)
	}
	for _, field := range []string{"apiVersion", "kind", "metadata", "spec", "status"} {
		if _, ok := node.Properties[field]; !ok {
			t.Errorf("Node schema lacks property %q", field)
		}
	}
}

// The scale subresource takes and returns an autoscaling/v1 Scale, whose
// schema the apps/v1 document carries, as upstream's does.
func TestV3ScaleTakesScale(t *testing.T) {
	doc := v3Documents(t, newTestHandler(t))["apis/apps/v1"]
	if doc == nil {
		t.Fatal("no apis/apps/v1 document")
	}
	const path = "/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}/scale"
	item := doc.Paths.Paths[path]
	if item == nil || item.Get == nil || item.Put == nil || item.Patch == nil {
		t.Fatalf("%s lacks GET, PUT or PATCH: %+v", path, item)
	}
	const ref = "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
	// The schema every media type lists, or what differs.
	refOf := func(content map[string]*spec3.MediaType) string {
		refs := map[string]bool{}
		for _, mt := range content {
			if mt.Schema != nil {
				refs[mt.Schema.Ref.String()] = true
			}
		}
		for ref := range refs {
			if len(refs) == 1 {
				return ref
			}
		}
		return fmt.Sprint(refs)
	}
	for what, got := range map[string]string{
		"GET response":   refOf(item.Get.Responses.StatusCodeResponses[http.StatusOK].Content),
		"PUT body":       refOf(item.Put.RequestBody.Content),
		"PUT response":   refOf(item.Put.Responses.StatusCodeResponses[http.StatusOK].Content),
		"PATCH response": refOf(item.Patch.Responses.StatusCodeResponses[http.StatusOK].Content),
	} {
		if got != ref {
			t.Errorf("%s of %s is %q, want %q", what, path, got, ref)
		}
	}
	scale := doc.Components.Schemas["io.k8s.api.autoscaling.v1.Scale"]
	if scale == nil {
		t.Fatal("no io.k8s.api.autoscaling.v1.Scale schema")
	}
	var gvks []metav1.GroupVersionKind
	if err := scale.Extensions.GetObject(extensionGVK, &gvks); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]metav1.GroupVersionKind{{Group: "autoscaling", Version: "v1", Kind: "Scale"}}, gvks); diff != "" {
		t.Errorf("Scale schema %s (-want +got):\n%s", extensionGVK, diff)
	}
}

// pods/log is a read of text with PodLogOptions' parameters but sinceTime,
// as upstream's document describes it; nothing else is done on it.
func TestV3PodLog(t *testing.T) {
	doc := v3Documents(t, newTestHandler(t))["api/v1"]
	if doc == nil {
		t.Fatal("no api/v1 document")
	}
	const path = "/api/v1/namespaces/{namespace}/pods/{name}/log"
	item := doc.Paths.Paths[path]
	if item == nil || item.Get == nil || item.Put != nil || item.Patch != nil || item.Post != nil || item.Delete != nil {
		t.Fatalf("%s: %+v, want a GET only", path, item)
	}
	// The builder puts parameters on the path when every operation there
	// shares them.
	var params []string
	for _, p := range append(item.Parameters, item.Get.Parameters...) {
		params = append(params, p.In+" "+p.Name)
	}
	sort.Strings(params)
	want := []string{"path name", "path namespace", "query container", "query follow", "query insecureSkipTLSVerifyBackend",
		"query limitBytes", "query pretty", "query previous", "query sinceSeconds", "query stream", "query tailLines", "query timestamps"}
	if diff := cmp.Diff(want, params); diff != "" {
		t.Errorf("parameters (-want +got):\n%s", diff)
	}
	ok := item.Get.Responses.StatusCodeResponses[http.StatusOK]
	if ok == nil || ok.Content["text/plain"] == nil || ok.Content["text/plain"].Schema == nil ||
		!cmp.Equal(ok.Content["text/plain"].Schema.Type, spec.StringOrArray{"string"}) {
		t.Errorf("200 response %+v, want a string as text/plain", ok)
	}
}

// operation is an operation's identity and the extensions kubectl reads.
type operation struct {
	ID     string
	Action string
	GVK    metav1.GroupVersionKind
}

func operations(t *testing.T, doc *spec3.OpenAPI) map[string]operation {
	t.Helper()
	out := map[string]operation{}
	for path, item := range doc.Paths.Paths {
		for method, op := range map[string]*spec3.Operation{
			"GET": item.Get, "POST": item.Post, "PUT": item.Put, "PATCH": item.Patch, "DELETE": item.Delete,
		} {
			if op == nil {
				continue
			}
			o := operation{ID: op.OperationId}
			if _, ok := op.Extensions[extensionGVK]; ok {
				o.GVK = gvkOf(t, op.Extensions)
				if err := op.Extensions.GetObject(extensionAction, &o.Action); err != nil {
					t.Fatal(err)
				}
			}
			out[method+" "+path] = o
		}
	}
	return out
}

func TestV3Operations(t *testing.T) {
	docs := v3Documents(t, newTestHandler(t))
	pod := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	lease := metav1.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
	priorityClass := metav1.GroupVersionKind{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"}
	replicaSet := metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}
	scale := metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	tests := []struct {
		name string
		doc  string
		want map[string]operation
	}{{
		name: "namespaced kind with status",
		doc:  "api/v1",
		want: map[string]operation{
			"GET /api/v1/namespaces/{namespace}/pods":                 {"listCoreV1NamespacedPod", "list", pod},
			"POST /api/v1/namespaces/{namespace}/pods":                {"createCoreV1NamespacedPod", "post", pod},
			"DELETE /api/v1/namespaces/{namespace}/pods":              {"deleteCoreV1CollectionNamespacedPod", "deletecollection", pod},
			"GET /api/v1/namespaces/{namespace}/pods/{name}":          {"readCoreV1NamespacedPod", "get", pod},
			"PUT /api/v1/namespaces/{namespace}/pods/{name}":          {"replaceCoreV1NamespacedPod", "put", pod},
			"PATCH /api/v1/namespaces/{namespace}/pods/{name}":        {"patchCoreV1NamespacedPod", "patch", pod},
			"DELETE /api/v1/namespaces/{namespace}/pods/{name}":       {"deleteCoreV1NamespacedPod", "delete", pod},
			"GET /api/v1/namespaces/{namespace}/pods/{name}/status":   {"readCoreV1NamespacedPodStatus", "get", pod},
			"GET /api/v1/namespaces/{namespace}/pods/{name}/log":      {"readCoreV1NamespacedPodLog", "get", pod},
			"PUT /api/v1/namespaces/{namespace}/pods/{name}/status":   {"replaceCoreV1NamespacedPodStatus", "put", pod},
			"PATCH /api/v1/namespaces/{namespace}/pods/{name}/status": {"patchCoreV1NamespacedPodStatus", "patch", pod},
			"GET /api/v1/pods": {"listCoreV1PodForAllNamespaces", "list", pod},
		},
	}, {
		name: "namespaced kind without status, in a group",
		doc:  "apis/coordination.k8s.io/v1",
		want: map[string]operation{
			"GET /apis/coordination.k8s.io/v1/":                                        {ID: "getCoordinationV1APIResources"},
			"GET /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases":           {"listCoordinationV1NamespacedLease", "list", lease},
			"POST /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases":          {"createCoordinationV1NamespacedLease", "post", lease},
			"DELETE /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases":        {"deleteCoordinationV1CollectionNamespacedLease", "deletecollection", lease},
			"GET /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}":    {"readCoordinationV1NamespacedLease", "get", lease},
			"PUT /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}":    {"replaceCoordinationV1NamespacedLease", "put", lease},
			"PATCH /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}":  {"patchCoordinationV1NamespacedLease", "patch", lease},
			"DELETE /apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}": {"deleteCoordinationV1NamespacedLease", "delete", lease},
			"GET /apis/coordination.k8s.io/v1/leases":                                  {"listCoordinationV1LeaseForAllNamespaces", "list", lease},
		},
	}, {
		name: "cluster-scoped kind without status",
		doc:  "apis/scheduling.k8s.io/v1",
		want: map[string]operation{
			"GET /apis/scheduling.k8s.io/v1/":                          {ID: "getSchedulingV1APIResources"},
			"GET /apis/scheduling.k8s.io/v1/priorityclasses":           {"listSchedulingV1PriorityClass", "list", priorityClass},
			"POST /apis/scheduling.k8s.io/v1/priorityclasses":          {"createSchedulingV1PriorityClass", "post", priorityClass},
			"DELETE /apis/scheduling.k8s.io/v1/priorityclasses":        {"deleteSchedulingV1CollectionPriorityClass", "deletecollection", priorityClass},
			"GET /apis/scheduling.k8s.io/v1/priorityclasses/{name}":    {"readSchedulingV1PriorityClass", "get", priorityClass},
			"PUT /apis/scheduling.k8s.io/v1/priorityclasses/{name}":    {"replaceSchedulingV1PriorityClass", "put", priorityClass},
			"PATCH /apis/scheduling.k8s.io/v1/priorityclasses/{name}":  {"patchSchedulingV1PriorityClass", "patch", priorityClass},
			"DELETE /apis/scheduling.k8s.io/v1/priorityclasses/{name}": {"deleteSchedulingV1PriorityClass", "delete", priorityClass},
		},
	}, {
		name: "kind with status and scale",
		doc:  "apis/apps/v1",
		want: map[string]operation{
			"GET /apis/apps/v1/namespaces/{namespace}/replicasets":                 {"listAppsV1NamespacedReplicaSet", "list", replicaSet},
			"POST /apis/apps/v1/namespaces/{namespace}/replicasets":                {"createAppsV1NamespacedReplicaSet", "post", replicaSet},
			"DELETE /apis/apps/v1/namespaces/{namespace}/replicasets":              {"deleteAppsV1CollectionNamespacedReplicaSet", "deletecollection", replicaSet},
			"GET /apis/apps/v1/namespaces/{namespace}/replicasets/{name}":          {"readAppsV1NamespacedReplicaSet", "get", replicaSet},
			"PUT /apis/apps/v1/namespaces/{namespace}/replicasets/{name}":          {"replaceAppsV1NamespacedReplicaSet", "put", replicaSet},
			"PATCH /apis/apps/v1/namespaces/{namespace}/replicasets/{name}":        {"patchAppsV1NamespacedReplicaSet", "patch", replicaSet},
			"DELETE /apis/apps/v1/namespaces/{namespace}/replicasets/{name}":       {"deleteAppsV1NamespacedReplicaSet", "delete", replicaSet},
			"GET /apis/apps/v1/namespaces/{namespace}/replicasets/{name}/status":   {"readAppsV1NamespacedReplicaSetStatus", "get", replicaSet},
			"PUT /apis/apps/v1/namespaces/{namespace}/replicasets/{name}/status":   {"replaceAppsV1NamespacedReplicaSetStatus", "put", replicaSet},
			"PATCH /apis/apps/v1/namespaces/{namespace}/replicasets/{name}/status": {"patchAppsV1NamespacedReplicaSetStatus", "patch", replicaSet},
			"GET /apis/apps/v1/namespaces/{namespace}/replicasets/{name}/scale":    {"readAppsV1NamespacedReplicaSetScale", "get", scale},
			"PUT /apis/apps/v1/namespaces/{namespace}/replicasets/{name}/scale":    {"replaceAppsV1NamespacedReplicaSetScale", "put", scale},
			"PATCH /apis/apps/v1/namespaces/{namespace}/replicasets/{name}/scale":  {"patchAppsV1NamespacedReplicaSetScale", "patch", scale},
			"GET /apis/apps/v1/replicasets":                                        {"listAppsV1ReplicaSetForAllNamespaces", "list", replicaSet},
		},
	}, {
		name: "discovery documents",
		doc:  "apis/scheduling.k8s.io",
		want: map[string]operation{"GET /apis/scheduling.k8s.io/": {ID: "getSchedulingAPIGroup"}},
	}, {
		name: "version",
		doc:  "version",
		want: map[string]operation{"GET /version/": {ID: "getCodeVersion"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := docs[tc.doc]
			if doc == nil {
				t.Fatalf("no %s document", tc.doc)
			}
			got := operations(t, doc)
			// Only the pod and replica set operations are listed above.
			only := map[string]string{"api/v1": "/pods", "apis/apps/v1": "/replicasets"}[tc.doc]
			for k := range got {
				if only != "" && !strings.Contains(k, only) {
					delete(got, k)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("operations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestV3WritesTakeFieldValidation checks, in every document, what kubectl's
// fieldValidation check and apply need: each write names its kind and takes
// fieldValidation as its own query parameter, and each patch accepts the
// strategic-merge patch type.
func TestV3WritesTakeFieldValidation(t *testing.T) {
	writes := 0
	for name, doc := range v3Documents(t, newTestHandler(t)) {
		for path, item := range doc.Paths.Paths {
			for method, op := range map[string]*spec3.Operation{"POST": item.Post, "PUT": item.Put, "PATCH": item.Patch} {
				if op == nil {
					continue
				}
				writes++
				where := name + ": " + method + " " + path
				if gvkOf(t, op.Extensions).Kind == "" {
					t.Errorf("%s has no %s", where, extensionGVK)
				}
				found := false
				for _, p := range op.Parameters {
					found = found || (p.Name == "fieldValidation" && p.In == "query")
				}
				if !found {
					t.Errorf("%s lacks the fieldValidation query parameter", where)
				}
				if method == "PATCH" {
					var got []string
					for mediaType := range op.RequestBody.Content {
						got = append(got, mediaType)
					}
					sort.Strings(got)
					want := []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("%s patch media types (-want +got):\n%s", where, diff)
					}
				}
			}
		}
	}
	// 11 kinds: each has POST, PUT and PATCH, 8 have a status and 2 a
	// scale, each with PUT and PATCH.
	if want := 11*3 + 8*2 + 2*2; writes != want {
		t.Errorf("found %d writes, want %d", writes, want)
	}
}

var refPattern = regexp.MustCompile(`"\$ref":"([^"]*)"`)

// TestV3DocumentsAreSelfContained checks that every reference in a v3
// document points into its own components, and that no v2-only leftovers
// remain.
func TestV3DocumentsAreSelfContained(t *testing.T) {
	for name, doc := range v3Documents(t, newTestHandler(t)) {
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range refPattern.FindAllStringSubmatch(string(raw), -1) {
			ref, ok := strings.CutPrefix(m[1], "#/components/schemas/")
			if !ok || doc.Components.Schemas[ref] == nil {
				t.Errorf("%s: dangling reference %q", name, m[1])
			}
		}
		if strings.Contains(string(raw), "x-kubernetes-v2-schema") || strings.Contains(string(raw), "#/definitions/") {
			t.Errorf("%s carries v2 schema material", name)
		}
	}
}

func TestDefinitionGroupVersionKinds(t *testing.T) {
	namer := newDefinitionNamer(testKinds())
	tests := []struct {
		name string
		want []metav1.GroupVersionKind
	}{
		{"io.k8s.api.core.v1.Node", []metav1.GroupVersionKind{{Version: "v1", Kind: "Node"}}},
		{"io.k8s.api.core.v1.NodeList", []metav1.GroupVersionKind{{Version: "v1", Kind: "NodeList"}}},
		{"io.k8s.api.core.v1.NodeSpec", nil},
		{"io.k8s.api.coordination.v1.Lease", []metav1.GroupVersionKind{{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.Status", []metav1.GroupVersionKind{{Version: "v1", Kind: "Status"}}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", []metav1.GroupVersionKind{
			{Version: "v1", Kind: "DeleteOptions"},
			{Group: "apps", Version: "v1", Kind: "DeleteOptions"},
			{Group: "coordination.k8s.io", Version: "v1", Kind: "DeleteOptions"},
			{Group: "policy", Version: "v1", Kind: "DeleteOptions"},
			{Group: "scheduling.k8s.io", Version: "v1", Kind: "DeleteOptions"},
			{Group: "storage.k8s.io", Version: "v1", Kind: "DeleteOptions"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name, ext := namer.name(tc.name)
			if name != tc.name {
				t.Errorf("name = %q, want it unchanged", name)
			}
			var got []metav1.GroupVersionKind
			if ext != nil {
				if err := ext.GetObject(extensionGVK, &got); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", extensionGVK, diff)
			}
		})
	}
}

func TestOperationNames(t *testing.T) {
	tests := []struct {
		gv      schema.GroupVersion
		wantID  string
		wantTag string
	}{
		{schema.GroupVersion{Version: "v1"}, "CoreV1", "core_v1"},
		{schema.GroupVersion{Group: "apps", Version: "v1"}, "AppsV1", "apps_v1"},
		{schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, "CoordinationV1", "coordination_v1"},
		{schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1beta1"}, "RbacAuthorizationV1beta1", "rbacAuthorization_v1beta1"},
		{schema.GroupVersion{Group: "resource.k8s.io", Version: "v1alpha3"}, "ResourceV1alpha3", "resource_v1alpha3"},
		{schema.GroupVersion{Group: "example.com", Version: "v2"}, "ExampleComV2", "exampleCom_v2"},
	}
	for _, tc := range tests {
		t.Run(tc.gv.String(), func(t *testing.T) {
			if got := operationGroupVersion(tc.gv); got != tc.wantID {
				t.Errorf("operationGroupVersion = %q, want %q", got, tc.wantID)
			}
			if got := groupVersionTag(tc.gv); got != tc.wantTag {
				t.Errorf("groupVersionTag = %q, want %q", got, tc.wantTag)
			}
		})
	}
}

func TestV2Negotiation(t *testing.T) {
	h := newTestHandler(t)
	tests := []struct {
		name            string
		accept          string
		wantCode        int
		wantContentType string
	}{
		{"no Accept", "", http.StatusOK, "application/json"},
		{"anything", "*/*", http.StatusOK, "application/json"},
		{"json", "application/json", http.StatusOK, "application/json"},
		{"protobuf as kubectl asks", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", http.StatusOK, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"protobuf, newer name", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", http.StatusOK, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"protobuf preferred", "application/json;q=0.5, application/com.github.proto-openapi.spec.v2@v1.0+protobuf", http.StatusOK, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"neither", "text/html", http.StatusNotAcceptable, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{}
			if tc.accept != "" {
				header.Set("Accept", tc.accept)
			}
			resp := get(t, h, "/openapi/v2", header)
			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tc.wantCode)
			}
			if tc.wantCode != http.StatusOK {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != tc.wantContentType {
				t.Errorf("Content-Type = %q, want %q", got, tc.wantContentType)
			}
			b := body(t, resp)
			doc := &openapiv2.Document{}
			var err error
			if tc.wantContentType == "application/json" {
				doc, err = openapiv2.ParseDocument(b)
			} else {
				err = proto.Unmarshal(b, doc)
			}
			if err != nil {
				t.Fatalf("decoding the document: %v", err)
			}
			checkV2Node(t, doc)
		})
	}
}

// checkV2Node checks what kubectl looks up in the v2 document: the Node
// definition by its group-version-kind, and fieldValidation on the PATCH
// operation of nodes, which may be a shared parameter.
func checkV2Node(t *testing.T, doc *openapiv2.Document) {
	t.Helper()
	if doc.GetSwagger() != "2.0" {
		t.Errorf("swagger = %q, want 2.0", doc.GetSwagger())
	}
	var nodeGVK string
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		if d.GetName() != "io.k8s.api.core.v1.Node" {
			continue
		}
		for _, e := range d.GetValue().GetVendorExtension() {
			if e.GetName() == extensionGVK {
				nodeGVK = e.GetValue().GetYaml()
			}
		}
	}
	if !strings.Contains(nodeGVK, "kind: Node") {
		t.Errorf("Node definition %s = %q, want kind Node", extensionGVK, nodeGVK)
	}
	shared := map[string]string{}
	for _, p := range doc.GetParameters().GetAdditionalProperties() {
		shared["#/parameters/"+p.GetName()] = p.GetValue().GetNonBodyParameter().GetQueryParameterSubSchema().GetName()
	}
	found := false
	for _, path := range doc.GetPaths().GetPath() {
		if path.GetName() != "/api/v1/nodes/{name}" {
			continue
		}
		for _, p := range path.GetValue().GetPatch().GetParameters() {
			name := p.GetParameter().GetNonBodyParameter().GetQueryParameterSubSchema().GetName()
			if ref := p.GetJsonReference().GetXRef(); ref != "" {
				name = shared[ref]
			}
			found = found || name == "fieldValidation"
		}
	}
	if !found {
		t.Error("PATCH /api/v1/nodes/{name} lacks fieldValidation in the v2 document")
	}
}

func TestV2NotModified(t *testing.T) {
	h := newTestHandler(t)
	first := get(t, h, "/openapi/v2", nil)
	etag := first.Header.Get("Etag")
	if etag == "" {
		t.Fatal("no Etag")
	}
	again := get(t, h, "/openapi/v2", http.Header{"If-None-Match": {etag}})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("status with If-None-Match = %d, want 304", again.StatusCode)
	}
	if got := first.Header.Get("Vary"); got != "Accept" {
		t.Errorf("Vary = %q, want Accept", got)
	}
}

func TestV3Protobuf(t *testing.T) {
	resp := get(t, newTestHandler(t), "/openapi/v3/api/v1", http.Header{"Accept": {"application/com.github.proto-openapi.spec.v3@v1.0+protobuf"}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v3.v1.0+protobuf" {
		t.Errorf("status %d, Content-Type %q; want 200 and the v3 protobuf type", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestUnknownRequests(t *testing.T) {
	h := newTestHandler(t)
	tests := []struct {
		name, method, target string
		wantCode             int
	}{
		{"unknown group-version", http.MethodGet, "/openapi/v3/apis/example.com/v1", http.StatusNotFound},
		{"empty document name", http.MethodGet, "/openapi/v3/", http.StatusNotFound},
		{"unknown version", http.MethodGet, "/openapi/v4", http.StatusNotFound},
		{"outside /openapi", http.MethodGet, "/api/v1", http.StatusNotFound},
		{"write", http.MethodPost, "/openapi/v2", http.StatusMethodNotAllowed},
		{"head", http.MethodHead, "/openapi/v3/api/v1", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.target, nil))
			if rec.Code != tc.wantCode {
				t.Errorf("%s %s = %d, want %d", tc.method, tc.target, rec.Code, tc.wantCode)
			}
		})
	}
}

func TestNewHandlerRejectsIncompleteKinds(t *testing.T) {
	tests := []struct {
		name   string
		change func(*registry.Kind)
	}{
		{"no version", func(k *registry.Kind) { k.GroupVersion.Version = "" }},
		{"no resource", func(k *registry.Kind) { k.Resource = "" }},
		{"no kind", func(k *registry.Kind) { k.Kind = "" }},
		{"no list kind", func(k *registry.Kind) { k.ListKind = "" }},
		{"no New", func(k *registry.Kind) { k.New = nil }},
		{"no NewList", func(k *registry.Kind) { k.NewList = func() runtime.Object { return nil } }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kinds := testKinds()
			tc.change(&kinds[2])
			_, err := NewHandler(kinds, "v1.33.0")
			if !errors.Is(err, ErrInvalidKind) || !strings.HasPrefix(err.Error(), "kinds[2]: ") {
				t.Errorf("err = %v, want ErrInvalidKind naming kinds[2]", err)
			}
		})
	}
}

func TestNewHandlerRejectsDuplicateKinds(t *testing.T) {
	kinds := testKinds()
	kinds = append(kinds, kinds[0])
	if _, err := NewHandler(kinds, "v1.33.0"); err == nil {
		t.Error("NewHandler accepted the same kind twice")
	}
}

func BenchmarkNewHandler(b *testing.B) {
	kinds := testKinds()
	for i := 0; i < b.N; i++ {
		if _, err := NewHandler(kinds, "v1.33.0"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstRequests is what the first kubectl to talk to a new server
// costs it: building, then encoding the v2 document as protobuf and every
// v3 document as JSON (the discovery document needs all their hashes).
func BenchmarkFirstRequests(b *testing.B) {
	kinds := testKinds()
	for i := 0; i < b.N; i++ {
		h, err := NewHandler(kinds, "v1.33.0")
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range []struct{ target, accept string }{
			{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
			{"/openapi/v3", "application/json"},
		} {
			if resp := get(b, h, r.target, http.Header{"Accept": {r.accept}}); resp.StatusCode != http.StatusOK {
				b.Fatalf("GET %s: %d", r.target, resp.StatusCode)
			}
		}
	}
}
