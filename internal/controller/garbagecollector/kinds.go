package garbagecollector

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// groupKind names a kind by its API group ("" for core) and kind.
type groupKind struct{ group, kind string }

var (
	podKind                = groupKind{"", "Pod"}
	claimKind              = groupKind{"", "PersistentVolumeClaim"}
	controllerRevisionKind = groupKind{"apps", "ControllerRevision"}
	replicaSetKind         = groupKind{"apps", "ReplicaSet"}
	daemonSetKind          = groupKind{"apps", "DaemonSet"}
	statefulSetKind        = groupKind{"apps", "StatefulSet"}
)

// dependentKinds are the kinds whose objects the collector deletes or
// trims, in the order a pass lists them: pods last, because pods also own
// claims, and a claim listed before the pods cannot name a pod created
// after the pod list.
var dependentKinds = []groupKind{claimKind, controllerRevisionKind, podKind}

// ownerKinds are the owners the collector can look up. Pods among them are
// read from the pods listed as dependents.
var ownerKinds = []groupKind{podKind, replicaSetKind, daemonSetKind, statefulSetKind}

// knownKind reports whether kind of group is one of ownerKinds.
func knownKind(group, kind string) bool {
	for _, k := range ownerKinds {
		if k == (groupKind{group, kind}) {
			return true
		}
	}
	return false
}

// resource reaches one namespaced kind through the typed client, seeing
// each object through its metadata. An object a function returns is the
// caller's to change.
type resource struct {
	groupKind
	// plural names the kind in messages: "pods".
	plural string
	list   func(ctx context.Context) ([]metav1.Object, error)
	get    func(ctx context.Context, namespace, name string) (metav1.Object, error)
	// update writes back an object get returned.
	update func(ctx context.Context, obj metav1.Object) error
	delete func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
	patch  func(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) error
}

// typedClient is what the collector uses of a client-go typed client for
// one namespace, T being the object and L its list.
type typedClient[T metav1.Object, L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// reach builds the resource of gk whose typed client for a namespace
// client returns.
func reach[T metav1.Object, L runtime.Object](gk groupKind, plural string, client func(namespace string) typedClient[T, L]) resource {
	return resource{
		groupKind: gk,
		plural:    plural,
		list: func(ctx context.Context) ([]metav1.Object, error) {
			l, err := client(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			var out []metav1.Object
			err = meta.EachListItem(l, func(o runtime.Object) error {
				m, err := meta.Accessor(o)
				if err != nil {
					return fmt.Errorf("reading %s metadata: %w", plural, err)
				}
				out = append(out, m)
				return nil
			})
			return out, err
		},
		get: func(ctx context.Context, namespace, name string) (metav1.Object, error) {
			o, err := client(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return o, nil
		},
		update: func(ctx context.Context, obj metav1.Object) error {
			o, ok := obj.(T)
			if !ok {
				return fmt.Errorf("updating %s: got a %T", plural, obj)
			}
			_, err := client(obj.GetNamespace()).Update(ctx, o, metav1.UpdateOptions{})
			return err
		},
		delete: func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error {
			return client(namespace).Delete(ctx, name, opts)
		},
		patch: func(ctx context.Context, namespace, name string, pt types.PatchType, data []byte) error {
			_, err := client(namespace).Patch(ctx, name, pt, data, metav1.PatchOptions{})
			return err
		},
	}
}

// resources are the kinds of dependentKinds and ownerKinds as cs reaches
// them.
func resources(cs kubernetes.Interface) map[groupKind]resource {
	rs := []resource{
		reach(podKind, "pods", func(ns string) typedClient[*corev1.Pod, *corev1.PodList] {
			return cs.CoreV1().Pods(ns)
		}),
		reach(claimKind, "persistentvolumeclaims", func(ns string) typedClient[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
			return cs.CoreV1().PersistentVolumeClaims(ns)
		}),
		reach(controllerRevisionKind, "controllerrevisions", func(ns string) typedClient[*appsv1.ControllerRevision, *appsv1.ControllerRevisionList] {
			return cs.AppsV1().ControllerRevisions(ns)
		}),
		reach(replicaSetKind, "replicasets", func(ns string) typedClient[*appsv1.ReplicaSet, *appsv1.ReplicaSetList] {
			return cs.AppsV1().ReplicaSets(ns)
		}),
		reach(daemonSetKind, "daemonsets", func(ns string) typedClient[*appsv1.DaemonSet, *appsv1.DaemonSetList] {
			return cs.AppsV1().DaemonSets(ns)
		}),
		reach(statefulSetKind, "statefulsets", func(ns string) typedClient[*appsv1.StatefulSet, *appsv1.StatefulSetList] {
			return cs.AppsV1().StatefulSets(ns)
		}),
	}
	m := make(map[groupKind]resource, len(rs))
	for _, r := range rs {
		m[r.groupKind] = r
	}
	return m
}
