// Package ownership decides how a pod relates to a controller that
// selects pods by label (ReplicaSet, DaemonSet): owned by it, an orphan it
// may adopt, one it must release, or none of its business. It also writes
// the adoption and release as strategic merge patches on the pod's
// ownerReferences, which merge on uid.
//
// What callers must do: parse the controller's selector, apply their own
// filters (a controller being deleted adopts nothing; a ReplicaSet only
// counts active pods, ...) on top of Relate, and only then call Settle.
//
// What it does not do: it never touches another controller's pods, keeps
// no expectations or cache, and does not check that an adopted pod's
// owner still exists (the API server's garbage collector handles that).
package ownership

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Relation is how a pod stands to one controller.
type Relation int

const (
	// Unrelated: in another namespace, controlled by someone else, or an
	// orphan the selector does not match.
	Unrelated Relation = iota
	// Owned: the controller controls it and its selector matches.
	Owned
	// Orphan: no controller, and the selector matches; it may be adopted.
	Orphan
	// Stray: the controller controls it but its selector no longer
	// matches; the controller reference should be released.
	Stray
)

func (r Relation) String() string {
	switch r {
	case Unrelated:
		return "Unrelated"
	case Owned:
		return "Owned"
	case Orphan:
		return "Orphan"
	case Stray:
		return "Stray"
	}
	return fmt.Sprintf("Relation(%d)", int(r))
}

// Relate says how pod stands to owner, whose parsed pod selector is sel.
// Only the controller reference (controller=true) counts; other owner
// references are ignored. Pod phase and deletion are the caller's to weigh.
func Relate(owner metav1.Object, sel labels.Selector, pod *corev1.Pod) Relation {
	if pod.Namespace != owner.GetNamespace() {
		return Unrelated
	}
	matches := sel.Matches(labels.Set(pod.Labels))
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref != nil && ref.UID != owner.GetUID():
		return Unrelated
	case ref != nil && !matches:
		return Stray
	case ref != nil:
		return Owned
	case matches:
		return Orphan
	}
	return Unrelated
}

// AdoptPatch is a strategic merge patch making owner, of kind kind, the
// controller of an object (controller=true, blockOwnerDeletion=true).
func AdoptPatch(owner metav1.Object, kind schema.GroupVersionKind) []byte {
	ref := metav1.NewControllerRef(owner, kind)
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []any{ref}}})
	return b
}

// ReleasePatch is a strategic merge patch removing the owner reference
// with uid from an object.
func ReleasePatch(uid types.UID) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []any{map[string]any{"$patch": "delete", "uid": uid}},
	}})
	return b
}

// Settle patches each pod of adopt to be controlled by owner (of kind
// kind), then removes owner's reference from each pod of release. Each
// adopted pod, as the server returned it, replaces the pod it came from
// in all (so a later controller of the same pass sees it owned) and is
// returned. A pod that fails is skipped and its error, naming the pod,
// is in errs; a released pod that is already gone is no error.
func Settle(ctx context.Context, client corev1client.PodsGetter, owner metav1.Object, kind schema.GroupVersionKind, adopt, release, all []*corev1.Pod) (adopted []*corev1.Pod, errs []error) {
	patch := func(p *corev1.Pod, b []byte) (*corev1.Pod, error) {
		return client.Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, b, metav1.PatchOptions{})
	}
	if len(adopt) > 0 {
		b := AdoptPatch(owner, kind)
		for _, p := range adopt {
			got, err := patch(p, b)
			if err != nil {
				errs = append(errs, fmt.Errorf("adopting pod %s/%s: %w", p.Namespace, p.Name, err))
				continue
			}
			for i := range all {
				if all[i] == p {
					all[i] = got
				}
			}
			adopted = append(adopted, got)
		}
	}
	for _, p := range release {
		if _, err := patch(p, ReleasePatch(owner.GetUID())); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("releasing pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	return adopted, errs
}
