package apiserver

import (
	"net"
	"net/http"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/registry"
)

// itemVerbs are the verbs of every resource served here.
var itemVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// subresourceVerbs are the verbs of /status and similar subresources.
var subresourceVerbs = []string{"get", "patch", "update"}

const discoveryV2MediaType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// serveDiscovery answers /api, /apis and their group and version documents.
// Aggregated discovery (v2) is sent only when Accept names v=v2: kubectl
// 1.27 to 1.29 ask for v2beta1 and must get the legacy documents instead.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/api":
		if negotiate(r).discoveryV2 {
			s.writeDiscoveryV2(w, true)
			return true
		}
		writeJSON(w, http.StatusOK, &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: serverAddress(r)}},
		})
		return true
	case path == "/api/v1":
		writeJSON(w, http.StatusOK, s.resourceList(s.group(""), "v1"))
		return true
	case path == "/apis":
		if negotiate(r).discoveryV2 {
			s.writeDiscoveryV2(w, false)
			return true
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range s.groups {
			if g.gv.Group != "" {
				list.Groups = append(list.Groups, apiGroup(g))
			}
		}
		writeJSON(w, http.StatusOK, list)
		return true
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range s.groups {
			if g.gv.Group == parts[1] {
				group := apiGroup(g)
				group.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeJSON(w, http.StatusOK, &group)
				return true
			}
		}
	case len(parts) == 3 && parts[0] == "apis":
		for _, g := range s.groups {
			if g.gv.Group == parts[1] && g.gv.Version == parts[2] {
				writeJSON(w, http.StatusOK, s.resourceList(&g, g.gv.String()))
				return true
			}
		}
	}
	return false
}

func (s *Server) group(name string) *groupInfo {
	for i := range s.groups {
		if s.groups[i].gv.Group == name {
			return &s.groups[i]
		}
	}
	return &groupInfo{}
}

func apiGroup(g groupInfo) metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: g.gv.String(), Version: g.gv.Version}
	return metav1.APIGroup{Name: g.gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func serverAddress(r *http.Request) string {
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		return net.JoinHostPort(host, port)
	}
	return r.Host
}

// resourceList is the legacy discovery document of one group version.
func (s *Server) resourceList(g *groupInfo, groupVersion string) *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: groupVersion}
	for _, k := range g.kinds {
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: k.Resource, SingularName: k.SingularName, Namespaced: k.Namespaced, Kind: k.Kind,
			Verbs: itemVerbs, ShortNames: k.ShortNames, Categories: k.Categories,
		})
		for _, sub := range subresources(k) {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: k.Resource + "/" + sub, Namespaced: k.Namespaced, Kind: k.Kind, Verbs: subresourceVerbs,
			})
		}
		for _, sub := range postSubresources(k) {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: k.Resource + "/" + sub.name, Namespaced: k.Namespaced, Group: sub.gvk.Group, Version: sub.gvk.Version, Kind: sub.gvk.Kind, Verbs: []string{"create"},
			})
		}
	}
	return list
}

func subresources(k *registry.Kind) []string {
	var subs []string
	if k.HasStatus {
		subs = append(subs, "status")
	}
	if k.Resource == "namespaces" && k.GroupVersion.Group == "" {
		subs = append(subs, "finalize")
	}
	return subs
}

// postSubresource is a subresource that only takes a POST of its own kind.
type postSubresource struct {
	name string
	gvk  schema.GroupVersionKind
}

// postSubresources are pods' binding and eviction; kubectl drain finds
// eviction (policy/v1) through discovery.
func postSubresources(k *registry.Kind) []postSubresource {
	if k.Resource != "pods" || k.GroupVersion.Group != "" {
		return nil
	}
	return []postSubresource{
		{name: subBinding, gvk: corev1.SchemeGroupVersion.WithKind("Binding")},
		{name: subEviction, gvk: policyv1.SchemeGroupVersion.WithKind("Eviction")},
	}
}

// writeDiscoveryV2 writes the aggregated discovery document of the legacy
// group (core) or of the named groups.
func (s *Server) writeDiscoveryV2(w http.ResponseWriter, core bool) {
	list := &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	for _, g := range s.groups {
		if (g.gv.Group == "") != core {
			continue
		}
		version := apidiscoveryv2.APIVersionDiscovery{Version: g.gv.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
		for _, k := range g.kinds {
			scope := apidiscoveryv2.ScopeCluster
			if k.Namespaced {
				scope = apidiscoveryv2.ScopeNamespace
			}
			gvk := metav1.GroupVersionKind{Group: g.gv.Group, Version: g.gv.Version, Kind: k.Kind}
			res := apidiscoveryv2.APIResourceDiscovery{
				Resource: k.Resource, ResponseKind: &gvk, Scope: scope, SingularResource: k.SingularName,
				Verbs: itemVerbs, ShortNames: k.ShortNames, Categories: k.Categories,
			}
			for _, sub := range subresources(k) {
				subGVK := gvk
				res.Subresources = append(res.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub, ResponseKind: &subGVK, Verbs: subresourceVerbs})
			}
			for _, sub := range postSubresources(k) {
				subGVK := metav1.GroupVersionKind{Group: sub.gvk.Group, Version: sub.gvk.Version, Kind: sub.gvk.Kind}
				res.Subresources = append(res.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub.name, ResponseKind: &subGVK, Verbs: []string{"create"}})
			}
			version.Resources = append(version.Resources, res)
		}
		list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{
			ObjectMeta: metav1.ObjectMeta{Name: g.gv.Group},
			Versions:   []apidiscoveryv2.APIVersionDiscovery{version},
		})
	}
	w.Header().Set("Content-Type", discoveryV2MediaType)
	w.Header().Set("Vary", "Accept")
	writeJSONTyped(w, http.StatusOK, discoveryV2MediaType, list)
}
