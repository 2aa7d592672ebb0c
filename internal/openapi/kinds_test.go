package openapi

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/registry"
)

// testKinds are the resources of knode's first release, reduced to what
// this package reads.
func testKinds() []registry.Kind {
	kind := func(gv schema.GroupVersion, resource, kind string, namespaced, status bool, obj, list runtime.Object) registry.Kind {
		return registry.Kind{
			GroupVersion: gv, Resource: resource, Kind: kind, ListKind: kind + "List",
			Namespaced: namespaced, HasStatus: status,
			New:     func() runtime.Object { return obj.DeepCopyObject() },
			NewList: func() runtime.Object { return list.DeepCopyObject() },
		}
	}
	scaled := func(k registry.Kind) registry.Kind {
		k.Scale = &registry.ScaleRules{}
		return k
	}
	core := corev1.SchemeGroupVersion
	apps := appsv1.SchemeGroupVersion
	return []registry.Kind{
		kind(core, "nodes", "Node", false, true, &corev1.Node{}, &corev1.NodeList{}),
		kind(core, "pods", "Pod", true, true, &corev1.Pod{}, &corev1.PodList{}),
		kind(core, "namespaces", "Namespace", false, true, &corev1.Namespace{}, &corev1.NamespaceList{}),
		kind(core, "events", "Event", true, false, &corev1.Event{}, &corev1.EventList{}),
		kind(coordinationv1.SchemeGroupVersion, "leases", "Lease", true, false, &coordinationv1.Lease{}, &coordinationv1.LeaseList{}),
		kind(apps, "daemonsets", "DaemonSet", true, true, &appsv1.DaemonSet{}, &appsv1.DaemonSetList{}),
		scaled(kind(apps, "replicasets", "ReplicaSet", true, true, &appsv1.ReplicaSet{}, &appsv1.ReplicaSetList{})),
		scaled(kind(apps, "statefulsets", "StatefulSet", true, true, &appsv1.StatefulSet{}, &appsv1.StatefulSetList{})),
		kind(policyv1.SchemeGroupVersion, "poddisruptionbudgets", "PodDisruptionBudget", true, true, &policyv1.PodDisruptionBudget{}, &policyv1.PodDisruptionBudgetList{}),
		kind(schedulingv1.SchemeGroupVersion, "priorityclasses", "PriorityClass", false, false, &schedulingv1.PriorityClass{}, &schedulingv1.PriorityClassList{}),
		kind(storagev1.SchemeGroupVersion, "volumeattachments", "VolumeAttachment", false, true, &storagev1.VolumeAttachment{}, &storagev1.VolumeAttachmentList{}),
	}
}
