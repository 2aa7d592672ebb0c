// Package pod holds the API rules for core/v1 pods: defaulting, create and
// update validation, the status subresource's rules, graceful deletion, the
// table kubectl prints and the fields a field selector can match.
//
// It re-implements upstream's pod strategy, defaulters and validation on the
// k8s.io/api v1 types, with upstream's field paths and messages (see
// validation.go for exactly which rules are covered).
//
// Callers (the generic REST layer) use Kind() and must pass *v1.Pod. The REST
// layer owns object metadata: name generation, metadata validation, uid,
// timestamps, generation and the deletion fields. This package does not run
// admission (service account, priority, default tolerations), does not bind
// pods to nodes and does not serve the ephemeralcontainers or resize
// subresources.
package pod

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/registry"
)

// Kind returns the rules for pods.
func Kind() registry.Kind {
	return registry.Kind{
		GroupVersion: schema.GroupVersion{Group: "", Version: "v1"},
		Resource:     "pods",
		Kind:         "Pod",
		ListKind:     "PodList",
		SingularName: "pod",
		ShortNames:   []string{"po"},
		Categories:   []string{"all"},
		Namespaced:   true,
		HasStatus:    true,

		New:     func() runtime.Object { return &v1.Pod{} },
		NewList: func() runtime.Object { return &v1.PodList{} },

		Default:          defaultPod,
		PrepareForCreate: prepareForCreate,
		PrepareForUpdate: prepareForUpdate,
		Validate:         validateCreate,
		ValidateUpdate:   validateUpdate,
		Status: &registry.StatusRules{
			PrepareForUpdate: prepareForStatusUpdate,
			ValidateUpdate:   validateStatusUpdate,
		},

		DeleteGracePeriod: deleteGracePeriod,

		Columns: columns,
		Row:     row,
		Fields:  selectableFields,
	}
}

// deleteGracePeriod decides how long a deleted pod is given to stop, in
// seconds, as upstream's CheckGracefulDelete:
//   - the requested period when the request named one, otherwise the pod's
//     spec.terminationGracePeriodSeconds (30 after defaulting; 0 if unset);
//   - 0 when the pod was never scheduled (spec.nodeName empty): no agent
//     runs it, so nobody would finish the deletion;
//   - 0 when the pod already finished (phase Succeeded or Failed);
//   - a negative result becomes 1, so "--grace-period=-1" sent literally, or
//     a negative spec value, still gives the agent a moment rather than
//     deleting at once. Only an explicit 0 (kubectl --force) skips the agent.
func deleteGracePeriod(obj runtime.Object, requested *int64) int64 {
	pod := obj.(*v1.Pod)
	var period int64
	switch {
	case requested != nil:
		period = *requested
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" {
		period = 0
	}
	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	return period
}

// selectableFields are the fields upstream lets a pod field selector match.
// status.podIP is the first entry of status.podIPs.
func selectableFields(obj runtime.Object) fields.Set {
	pod := obj.(*v1.Pod)
	set := registry.DefaultFields(pod, true)
	set["spec.nodeName"] = pod.Spec.NodeName
	set["spec.restartPolicy"] = string(pod.Spec.RestartPolicy)
	set["spec.schedulerName"] = pod.Spec.SchedulerName
	set["spec.serviceAccountName"] = pod.Spec.ServiceAccountName
	set["spec.hostNetwork"] = strconv.FormatBool(pod.Spec.HostNetwork)
	set["status.phase"] = string(pod.Status.Phase)
	podIP := ""
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	set["status.podIP"] = podIP
	set["status.nominatedNodeName"] = pod.Status.NominatedNodeName
	return set
}
