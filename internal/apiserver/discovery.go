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
			res := metav1.APIResource{Name: k.Resource + "/" + sub.name, Namespaced: k.Namespaced, Kind: sub.gvk.Kind, Verbs: sub.verbs}
			if sub.gvk.GroupVersion() != k.GroupVersion {
				// As upstream, only a kind from another group-version
				// names it.
				res.Group, res.Version = sub.gvk.Group, sub.gvk.Version
			}
			list.APIResources = append(list.APIResources, res)
		}
	}
	return list
}

// subresource is one subresource of a kind as discovery lists it: its
// name, the kind it takes and returns, and its verbs.
type subresource struct {
	name  string
	gvk   schema.GroupVersionKind
	verbs []string
}

// subresources are k's: status, a namespace's finalize, scale (an
// autoscaling/v1 Scale), pods' binding and eviction, which only take a
// POST of their own kind (kubectl drain finds eviction, policy/v1, through
// discovery), pods' log, which only takes a GET and which upstream
// lists as of kind Pod, pods' exec, attach and portforward, and nodes'
// proxy.
func subresources(k *registry.Kind) []subresource {
	own := k.GroupVersion.WithKind(k.Kind)
	core := k.GroupVersion.Group == ""
	var subs []subresource
	if k.HasStatus {
		subs = append(subs, subresource{"status", own, subresourceVerbs})
	}
	if k.Resource == "namespaces" && core {
		subs = append(subs, subresource{"finalize", own, subresourceVerbs})
	}
	if k.Scale != nil {
		subs = append(subs, subresource{subScale, scaleGVK, subresourceVerbs})
	}
	if k.Approval != nil {
		subs = append(subs, subresource{"approval", own, subresourceVerbs})
	}
	if k.Resource == "pods" && core {
		subs = append(subs,
			subresource{subBinding, corev1.SchemeGroupVersion.WithKind("Binding"), createVerb},
			subresource{subEviction, policyv1.SchemeGroupVersion.WithKind("Eviction"), createVerb},
			subresource{subLog, own, getVerb},
			subresource{subExec, corev1.SchemeGroupVersion.WithKind("PodExecOptions"), connectVerbs},
			subresource{subAttach, corev1.SchemeGroupVersion.WithKind("PodAttachOptions"), connectVerbs},
			subresource{subPortForward, corev1.SchemeGroupVersion.WithKind("PodPortForwardOptions"), connectVerbs})
	}
	if k.Resource == "nodes" && core {
		subs = append(subs, subresource{subProxy, corev1.SchemeGroupVersion.WithKind("NodeProxyOptions"), proxyVerbs})
	}
	return subs
}

var (
	createVerb = []string{"create"}
	getVerb    = []string{"get"}
	// connectVerbs are a connect subresource's: a POST or a GET (WebSocket
	// clients can only GET).
	connectVerbs = []string{"create", "get"}
	proxyVerbs   = []string{"create", "delete", "get", "patch", "update"}
)

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
				subGVK := metav1.GroupVersionKind{Group: sub.gvk.Group, Version: sub.gvk.Version, Kind: sub.gvk.Kind}
				res.Subresources = append(res.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: sub.name, ResponseKind: &subGVK, Verbs: sub.verbs})
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
