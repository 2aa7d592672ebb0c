// Package node holds the rules the API server applies to core/v1 Nodes:
// defaulting, what create and update may change, validation, the table
// kubectl prints and the fields selectors match on.
//
// Callers (the generic REST layer) must pass *v1.Node values; the functions
// panic on any other type, as a programming error. Every function is pure:
// no I/O, no clock (Row takes now).
//
// What it does not do: metadata validation (name rules, labels, namespace
// must be empty), uid, timestamps and resourceVersion belong to the REST
// layer, and admission (NodeRestriction) lives elsewhere.
//
// Upstream deviations, on purpose:
//   - ValidateUpdate runs the shared node checks once. Upstream runs
//     ValidateNode and ValidateNodeUpdate back to back, so a bad taint or
//     quantity is reported twice in Status.details.causes (the aggregated
//     message is deduplicated upstream, so the message is the same).
//   - Capacity and allocatable resource names are checked (standard name or
//     qualified name), as the project's reference asks; upstream checks only
//     the quantities.
package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/registry"
)

// Kind returns the rules for the "nodes" resource.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: schema.GroupVersion{Group: "", Version: "v1"},
		Resource:     "nodes",
		Kind:         "Node",
		ListKind:     "NodeList",
		SingularName: "node",
		ShortNames:   []string{"no"},
		Namespaced:   false,
		HasStatus:    true,

		New:     func() runtime.Object { return &v1.Node{} },
		NewList: func() runtime.Object { return &v1.NodeList{} },

		Default:          func(obj runtime.Object) { Default(obj.(*v1.Node)) },
		PrepareForCreate: func(obj runtime.Object) { prepareForCreate(obj.(*v1.Node)) },
		PrepareForUpdate: func(obj, old runtime.Object) { prepareForUpdate(obj.(*v1.Node), old.(*v1.Node)) },
		Validate:         func(obj runtime.Object) field.ErrorList { return Validate(obj.(*v1.Node)) },
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*v1.Node), old.(*v1.Node))
		},
		Status: &registry.StatusRules{
			PrepareForUpdate: func(obj, old runtime.Object) { prepareForStatusUpdate(obj.(*v1.Node), old.(*v1.Node)) },
			ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
				return ValidateStatusUpdate(obj.(*v1.Node), old.(*v1.Node))
			},
		},

		Columns: columns(),
		Row:     row,
		Fields:  func(obj runtime.Object) fields.Set { return Fields(obj.(*v1.Node)) },
	}
}

// Default applies what upstream's v1 decoding does to a Node:
//   - spec.podCIDR and spec.podCIDRs are reconciled as the internal
//     conversion does: a non-empty podCIDR that differs from podCIDRs[0]
//     wins and replaces the list; podCIDR then mirrors podCIDRs[0].
//   - status.allocatable, when absent (nil), becomes a copy of
//     status.capacity.
func Default(n *v1.Node) {
	spec := &n.Spec
	if spec.PodCIDR != "" && (len(spec.PodCIDRs) == 0 || spec.PodCIDRs[0] != spec.PodCIDR) {
		spec.PodCIDRs = []string{spec.PodCIDR}
	}
	if len(spec.PodCIDRs) > 0 {
		spec.PodCIDR = spec.PodCIDRs[0]
	}

	status := &n.Status
	if status.Allocatable == nil && status.Capacity != nil {
		status.Allocatable = make(v1.ResourceList, len(status.Capacity))
		for name, q := range status.Capacity {
			status.Allocatable[name] = q.DeepCopy()
		}
	}
}

// prepareForCreate keeps everything a creator sent, status included (a
// kubelet registers with a full status), except the deprecated dynamic
// kubelet config fields.
func prepareForCreate(n *v1.Node) {
	n.Spec.ConfigSource = nil
	n.Status.Config = nil
}

// prepareForUpdate: the main resource cannot change status, and cannot
// start using the deprecated spec.configSource.
func prepareForUpdate(n, old *v1.Node) {
	n.Status = *old.Status.DeepCopy()
	if old.Spec.ConfigSource == nil {
		n.Spec.ConfigSource = nil
	}
}

// prepareForStatusUpdate: the status subresource cannot change spec, and
// cannot start using the deprecated status.config.
func prepareForStatusUpdate(n, old *v1.Node) {
	n.Spec = *old.Spec.DeepCopy()
	if old.Status.Config == nil {
		n.Status.Config = nil
	}
}

// Fields returns the selectable fields upstream offers for nodes:
// metadata.name and spec.unschedulable ("true" or "false").
func Fields(n *v1.Node) fields.Set {
	set := registry.DefaultFields(n, false)
	set["spec.unschedulable"] = fmt.Sprint(n.Spec.Unschedulable)
	return set
}
