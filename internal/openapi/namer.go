package openapi

import (
	"reflect"
	"sort"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"knode/internal/registry"
)

// definitionNamer decides the name of each schema and which schemas carry
// x-kubernetes-group-version-kind. Names are the types' OpenAPI model names
// (e.g. "io.k8s.api.core.v1.Node"), the names openapi-gen already keys the
// generated definitions by, so a name passes through unchanged. A schema
// gets the extension when its type is registered as a kind in some served
// group-version, listing every such group-version-kind, sorted by group,
// version and kind: Node gets [{"", v1, Node}], while DeleteOptions gets one
// entry per served group-version, as on a real cluster.
type definitionNamer struct {
	gvks map[string][]metav1.GroupVersionKind
}

// newDefinitionNamer registers the kinds (and the list kinds, the option
// types and the meta types every group-version carries, and autoscaling/v1
// Scale when a kind has a /scale subresource) in a scheme and
// records, for each type's model name, the kinds it is known as.
func newDefinitionNamer(kinds []registry.Kind) *definitionNamer {
	scheme := runtime.NewScheme()
	seen := map[schema.GroupVersion]bool{}
	for _, k := range kinds {
		if !seen[k.GroupVersion] {
			seen[k.GroupVersion] = true
			metav1.AddToGroupVersion(scheme, k.GroupVersion)
		}
		scheme.AddKnownTypeWithName(k.GroupVersion.WithKind(k.Kind), k.New())
		scheme.AddKnownTypeWithName(k.GroupVersion.WithKind(k.ListKind), k.NewList())
		if k.Scale != nil {
			scheme.AddKnownTypeWithName(autoscalingv1.SchemeGroupVersion.WithKind("Scale"), &autoscalingv1.Scale{})
		}
	}
	n := &definitionNamer{gvks: map[string][]metav1.GroupVersionKind{}}
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name := util.GetCanonicalTypeName(reflect.New(t).Interface())
		n.gvks[name] = append(n.gvks[name], metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
	}
	for _, list := range n.gvks {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
	}
	return n
}

// name implements common.Config.GetDefinitionName.
func (n *definitionNamer) name(name string) (string, spec.Extensions) {
	list, ok := n.gvks[name]
	if !ok {
		return name, nil
	}
	value := make([]interface{}, len(list))
	for i, gvk := range list {
		value[i] = map[string]interface{}{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
	}
	return name, spec.Extensions{extensionGVK: value}
}
