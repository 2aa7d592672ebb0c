package auth

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRequestAttributes(t *testing.T) {
	tests := []struct {
		method string
		target string
		want   Attributes
	}{
		// Non-resource paths.
		{"GET", "/", Attributes{Verb: "get", Path: "/"}},
		{"GET", "/healthz", Attributes{Verb: "get", Path: "/healthz"}},
		{"GET", "/readyz/etcd", Attributes{Verb: "get", Path: "/readyz/etcd"}},
		{"GET", "/version", Attributes{Verb: "get", Path: "/version"}},
		{"GET", "/openapi/v2", Attributes{Verb: "get", Path: "/openapi/v2"}},
		{"GET", "/openapi/v3/api/v1", Attributes{Verb: "get", Path: "/openapi/v3/api/v1"}},
		{"GET", "/api", Attributes{Verb: "get", Path: "/api"}},
		{"GET", "/api/v1", Attributes{Verb: "get", Path: "/api/v1"}},
		{"GET", "/api/v1/", Attributes{Verb: "get", Path: "/api/v1/"}},
		{"GET", "/apis", Attributes{Verb: "get", Path: "/apis"}},
		{"GET", "/apis/apps", Attributes{Verb: "get", Path: "/apis/apps"}},
		{"GET", "/apis/apps/v1", Attributes{Verb: "get", Path: "/apis/apps/v1"}},
		{"POST", "/metrics", Attributes{Verb: "post", Path: "/metrics"}},
		{"OPTIONS", "/api/v1", Attributes{Verb: "options", Path: "/api/v1"}},
		{"GET", "/other/v1/nodes", Attributes{Verb: "get", Path: "/other/v1/nodes"}},

		// Cluster-scoped core resources.
		{"GET", "/api/v1/nodes", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes/", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes/", ResourceRequest: true}},
		{"HEAD", "/api/v1/nodes/n1", Attributes{Verb: "get", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes/n1", ResourceRequest: true}},
		{"GET", "/api/v1/nodes/n1", Attributes{Verb: "get", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes/n1", ResourceRequest: true}},
		{"POST", "/api/v1/nodes", Attributes{Verb: "create", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"PUT", "/api/v1/nodes/n1", Attributes{Verb: "update", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes/n1", ResourceRequest: true}},
		{"PATCH", "/api/v1/nodes/n1/status", Attributes{Verb: "patch", APIVersion: "v1", Resource: "nodes", Subresource: "status", Name: "n1", Path: "/api/v1/nodes/n1/status", ResourceRequest: true}},
		{"DELETE", "/api/v1/nodes/n1", Attributes{Verb: "delete", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes/n1", ResourceRequest: true}},
		{"DELETE", "/api/v1/nodes", Attributes{Verb: "deletecollection", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"DELETE", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1", Attributes{Verb: "deletecollection", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name=n1"}},
		{"CONNECT", "/api/v1/nodes/n1/proxy", Attributes{Verb: "", APIVersion: "v1", Resource: "nodes", Subresource: "proxy", Name: "n1", Path: "/api/v1/nodes/n1/proxy", ResourceRequest: true}},
		{"GET", "/api/v1/nodes/n1/status/extra/parts", Attributes{Verb: "get", APIVersion: "v1", Resource: "nodes", Subresource: "status", Name: "n1", Path: "/api/v1/nodes/n1/status/extra/parts", ResourceRequest: true}},

		// List versus watch.
		{"GET", "/api/v1/nodes?watch=true", Attributes{Verb: "watch", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes?watch=1", Attributes{Verb: "watch", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes?watch", Attributes{Verb: "watch", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes?watch=False", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes?watch=0", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes?watch=false&watch=true", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/nodes/n1?watch=true", Attributes{Verb: "get", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes/n1", ResourceRequest: true}},
		{"GET", "/api/v1/watch/nodes", Attributes{Verb: "watch", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/watch/nodes", ResourceRequest: true}},
		{"GET", "/api/v1/watch/nodes/n1", Attributes{Verb: "watch", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/watch/nodes/n1", ResourceRequest: true}},
		{"GET", "/api/v1/watch/namespaces/ns/pods", Attributes{Verb: "watch", APIVersion: "v1", Namespace: "ns", Resource: "pods", Path: "/api/v1/watch/namespaces/ns/pods", ResourceRequest: true}},
		{"GET", "/api/v1/watch", Attributes{Verb: "watch", APIVersion: "v1", Path: "/api/v1/watch", ResourceRequest: true}},

		// The name a field selector pins.
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name=n1"}},
		{"GET", "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3D%3Dn1&labelSelector=a%3Db", Attributes{Verb: "watch", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name==n1", LabelSelector: "a=b"}},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%21%3Dn1", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name!=n1"}},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3D..", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name=.."}},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&labelSelector=%21%21", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name=n1", LabelSelector: "!!"}},
		{"GET", "/api/v1/nodes?fieldSelector=metadata.name", Attributes{Verb: "list", APIVersion: "v1", Resource: "nodes", Path: "/api/v1/nodes", ResourceRequest: true, FieldSelector: "metadata.name"}},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=spec.nodeName%3Dn1", Attributes{Verb: "list", APIVersion: "v1", Namespace: "ns", Resource: "pods", Path: "/api/v1/namespaces/ns/pods", ResourceRequest: true, FieldSelector: "spec.nodeName=n1"}},
		{"GET", "/api/v1/nodes/n1?fieldSelector=metadata.name%3Dn2", Attributes{Verb: "get", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/nodes/n1", ResourceRequest: true}},

		// Namespaces and namespaced resources.
		{"GET", "/api/v1/namespaces", Attributes{Verb: "list", APIVersion: "v1", Resource: "namespaces", Path: "/api/v1/namespaces", ResourceRequest: true}},
		{"GET", "/api/v1/namespaces/foo", Attributes{Verb: "get", APIVersion: "v1", Namespace: "foo", Resource: "namespaces", Name: "foo", Path: "/api/v1/namespaces/foo", ResourceRequest: true}},
		{"DELETE", "/api/v1/namespaces/foo", Attributes{Verb: "delete", APIVersion: "v1", Namespace: "foo", Resource: "namespaces", Name: "foo", Path: "/api/v1/namespaces/foo", ResourceRequest: true}},
		{"PUT", "/api/v1/namespaces/foo/status", Attributes{Verb: "update", APIVersion: "v1", Namespace: "foo", Resource: "namespaces", Name: "foo", Subresource: "status", Path: "/api/v1/namespaces/foo/status", ResourceRequest: true}},
		{"PUT", "/api/v1/namespaces/foo/finalize", Attributes{Verb: "update", APIVersion: "v1", Namespace: "foo", Resource: "namespaces", Name: "foo", Subresource: "finalize", Path: "/api/v1/namespaces/foo/finalize", ResourceRequest: true}},
		{"GET", "/api/v1/namespaces/foo/pods", Attributes{Verb: "list", APIVersion: "v1", Namespace: "foo", Resource: "pods", Path: "/api/v1/namespaces/foo/pods", ResourceRequest: true}},
		{"POST", "/api/v1/namespaces/foo/pods", Attributes{Verb: "create", APIVersion: "v1", Namespace: "foo", Resource: "pods", Path: "/api/v1/namespaces/foo/pods", ResourceRequest: true}},
		{"DELETE", "/api/v1/namespaces/foo/pods?labelSelector=app%3Dx", Attributes{Verb: "deletecollection", APIVersion: "v1", Namespace: "foo", Resource: "pods", Path: "/api/v1/namespaces/foo/pods", ResourceRequest: true, LabelSelector: "app=x"}},
		{"GET", "/api/v1/namespaces/foo/pods/p1", Attributes{Verb: "get", APIVersion: "v1", Namespace: "foo", Resource: "pods", Name: "p1", Path: "/api/v1/namespaces/foo/pods/p1", ResourceRequest: true}},
		{"PATCH", "/api/v1/namespaces/foo/pods/p1/status", Attributes{Verb: "patch", APIVersion: "v1", Namespace: "foo", Resource: "pods", Name: "p1", Subresource: "status", Path: "/api/v1/namespaces/foo/pods/p1/status", ResourceRequest: true}},
		{"GET", "/api/v1/namespaces/foo/pods/p1/log?follow=true&container=c", Attributes{Verb: "get", APIVersion: "v1", Namespace: "foo", Resource: "pods", Name: "p1", Subresource: "log", Path: "/api/v1/namespaces/foo/pods/p1/log", ResourceRequest: true}},
		{"POST", "/api/v1/namespaces/foo/pods/p1/eviction", Attributes{Verb: "create", APIVersion: "v1", Namespace: "foo", Resource: "pods", Name: "p1", Subresource: "eviction", Path: "/api/v1/namespaces/foo/pods/p1/eviction", ResourceRequest: true}},
		{"POST", "/api/v1/namespaces/foo/pods/p1/binding", Attributes{Verb: "create", APIVersion: "v1", Namespace: "foo", Resource: "pods", Name: "p1", Subresource: "binding", Path: "/api/v1/namespaces/foo/pods/p1/binding", ResourceRequest: true}},
		{"GET", "/api/v1/namespaces/foo/pods/p1/log?follow=true", Attributes{Verb: "get", APIVersion: "v1", Namespace: "foo", Resource: "pods", Name: "p1", Subresource: "log", Path: "/api/v1/namespaces/foo/pods/p1/log", ResourceRequest: true}},
		{"GET", "/api/v1/namespaces/status/pods", Attributes{Verb: "list", APIVersion: "v1", Namespace: "status", Resource: "pods", Path: "/api/v1/namespaces/status/pods", ResourceRequest: true}},

		// Named groups.
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", Attributes{Verb: "get", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "kube-node-lease", Resource: "leases", Name: "n1", Path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", ResourceRequest: true}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", Attributes{Verb: "update", APIGroup: "coordination.k8s.io", APIVersion: "v1", Namespace: "kube-node-lease", Resource: "leases", Name: "n1", Path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", ResourceRequest: true}},
		{"GET", "/apis/apps/v1/daemonsets", Attributes{Verb: "list", APIGroup: "apps", APIVersion: "v1", Resource: "daemonsets", Path: "/apis/apps/v1/daemonsets", ResourceRequest: true}},
		{"GET", "/apis/apps/v1/watch/namespaces/kube-system/daemonsets/ds", Attributes{Verb: "watch", APIGroup: "apps", APIVersion: "v1", Namespace: "kube-system", Resource: "daemonsets", Name: "ds", Path: "/apis/apps/v1/watch/namespaces/kube-system/daemonsets/ds", ResourceRequest: true}},
		{"PUT", "/apis/apps/v1/namespaces/kube-system/daemonsets/ds/status", Attributes{Verb: "update", APIGroup: "apps", APIVersion: "v1", Namespace: "kube-system", Resource: "daemonsets", Name: "ds", Subresource: "status", Path: "/apis/apps/v1/namespaces/kube-system/daemonsets/ds/status", ResourceRequest: true}},
		{"GET", "/apis/storage.k8s.io/v1/volumeattachments/va", Attributes{Verb: "get", APIGroup: "storage.k8s.io", APIVersion: "v1", Resource: "volumeattachments", Name: "va", Path: "/apis/storage.k8s.io/v1/volumeattachments/va", ResourceRequest: true}},

		// Proxy takes no subresource.
		{"GET", "/api/v1/proxy/nodes/n1/metrics", Attributes{Verb: "proxy", APIVersion: "v1", Resource: "nodes", Name: "n1", Path: "/api/v1/proxy/nodes/n1/metrics", ResourceRequest: true}},
		{"GET", "/api/v1/proxy/namespaces/ns/pods/p1/x/y", Attributes{Verb: "proxy", APIVersion: "v1", Namespace: "ns", Resource: "pods", Name: "p1", Path: "/api/v1/proxy/namespaces/ns/pods/p1/x/y", ResourceRequest: true}},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.target, func(t *testing.T) {
			u, err := url.ParseRequestURI(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			got := RequestAttributes(&http.Request{Method: tc.method, URL: u})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("attributes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequestAttributesNoURL(t *testing.T) {
	got := RequestAttributes(&http.Request{Method: "GET"})
	if diff := cmp.Diff(Attributes{Verb: "get"}, got); diff != "" {
		t.Error(diff)
	}
}

func TestPublicPath(t *testing.T) {
	tests := map[string]bool{
		"/healthz": true, "/livez": true, "/readyz": true, "/version": true, "/version/": true,
		"/readyz/etcd": false, "/healthz/": false, "/": false, "/api": false, "/metrics": false, "/openapi/v2": false,
	}
	for path, want := range tests {
		if got := PublicPath(path); got != want {
			t.Errorf("PublicPath(%q) = %v, want %v", path, got, want)
		}
	}
}

// FuzzRequestAttributes: any method and URL are read without panicking,
// and the result is self-consistent.
func FuzzRequestAttributes(f *testing.F) {
	for _, seed := range [][2]string{
		{"GET", "/api/v1/namespaces/ns/pods/p/status"},
		{"GET", "/apis/apps/v1/watch/namespaces/ns/daemonsets"},
		{"DELETE", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1"},
		{"GET", "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1&labelSelector=a%3Db"},
		{"GET", "/api/v1/proxy"},
		{"PATCH", "//api//v1//nodes//"},
		{"GET", "/api/v1/watch"},
		{"get", "/api/v1/namespaces/"},
		{"", "*"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		u, err := url.Parse(target)
		if err != nil {
			return
		}
		a := RequestAttributes(&http.Request{Method: method, URL: u})
		if a.Path != u.Path {
			t.Fatalf("Path = %q, want %q", a.Path, u.Path)
		}
		if !a.ResourceRequest {
			if a.Resource != "" || a.Name != "" || a.Namespace != "" || a.APIVersion != "" || a.APIGroup != "" {
				t.Fatalf("non-resource request with resource fields: %+v", a)
			}
			if a.Verb != strings.ToLower(method) {
				t.Fatalf("non-resource verb %q for method %q", a.Verb, method)
			}
			return
		}
		// Empty path segments may leave Resource or Name empty under a
		// subresource, as upstream; routing refuses such paths.
		if a.Verb == "get" && a.Name == "" {
			t.Fatalf("get without a name: %+v", a)
		}
		if a.Verb == "delete" && a.Name == "" {
			t.Fatalf("delete without a name: %+v", a)
		}
		if a.Verb == "proxy" && a.Subresource != "" {
			t.Fatalf("proxy with a subresource: %+v", a)
		}
		if (a.FieldSelector != "" || a.LabelSelector != "") && a.Verb != "list" && a.Verb != "watch" && a.Verb != "deletecollection" {
			t.Fatalf("selectors kept for verb %q", a.Verb)
		}
		_, _ = a.FieldValue("spec.nodeName")
		_ = Forbidden(a, "")
	})
}
