package attachdetach

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

// Snapshot is everything one pass reads. Its objects may be shared with an
// informer cache: nothing that receives a Snapshot modifies them.
type Snapshot struct {
	Nodes       []*corev1.Node
	Pods        []*corev1.Pod
	Claims      []*corev1.PersistentVolumeClaim
	Volumes     []*corev1.PersistentVolume
	Drivers     []*storagev1.CSIDriver
	Attachments []*storagev1.VolumeAttachment
}

// Wanted is one CSI volume that should be attached to one node, because
// pods scheduled there use it.
type Wanted struct {
	Node   string
	PV     string
	Driver string
	Handle string
	// Volume is the name the node status uses: UniqueName(Driver, Handle).
	Volume corev1.UniqueVolumeName
	// Exclusive is set when the PV's access modes allow one node only
	// (ReadWriteOnce or ReadWriteOncePod): it is not attached while it is
	// attached to another node.
	Exclusive bool
	// Pods are the pods on Node that use the volume, sorted by namespace
	// and name.
	Pods []corev1.ObjectReference
}

// AttachmentName is the name of the VolumeAttachment that attaches w.
func (w Wanted) AttachmentName() string {
	return volume.AttachmentName(w.Handle, w.Driver, w.Node)
}

// Managed reports whether the attach/detach controller owns attach and
// detach for node. Like upstream, the annotation's presence counts, not its
// value.
func Managed(node *corev1.Node) bool {
	_, ok := node.Annotations[volume.AnnControllerManagedAttachDetach]
	return ok
}

// NodeReady reports whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodTerminated reports whether pod no longer needs its volumes: it
// Succeeded or Failed, or it is being deleted and none of its containers
// (init, regular or ephemeral) is running. A container status that is
// neither waiting nor terminated counts as running.
func PodTerminated(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	return pod.DeletionTimestamp != nil &&
		noneRunning(pod.Status.InitContainerStatuses) &&
		noneRunning(pod.Status.ContainerStatuses) &&
		noneRunning(pod.Status.EphemeralContainerStatuses)
}

func noneRunning(statuses []corev1.ContainerStatus) bool {
	for _, s := range statuses {
		if s.State.Terminated == nil && s.State.Waiting == nil {
			return false
		}
	}
	return true
}

// AttachRequired reports whether volumes of driver need a
// VolumeAttachment: yes unless its CSIDriver says attachRequired: false. A
// driver without a CSIDriver object needs one.
func AttachRequired(driver *storagev1.CSIDriver) bool {
	return driver == nil || driver.Spec.AttachRequired == nil || *driver.Spec.AttachRequired
}

// Exclusive reports whether pv may be attached to one node only: it lists
// ReadWriteOnce or ReadWriteOncePod. A PV without access modes is not
// exclusive (the attacher is left to refuse).
func Exclusive(pv *corev1.PersistentVolume) bool {
	for _, m := range pv.Spec.AccessModes {
		if m == corev1.ReadWriteOnce || m == corev1.ReadWriteOncePod {
			return true
		}
	}
	return false
}

// Desire returns the volumes that should be attached, sorted by node and
// then by volume name. A node counts when it is in snap and Managed, or
// when it is not in snap and managedGone[name] is set (a managed node that
// was deleted keeps the volumes its remaining pods use, as upstream's
// desired state keeps such a node).
//
// A pod counts when it is bound to such a node and is not PodTerminated:
// a pod stuck Terminating on a dead node keeps its volumes until it is
// gone (PodGC force-deletes it once the node has the out-of-service
// taint). Each of its volumes counts
// when it names a PVC (directly or as a generic ephemeral volume the pod
// owns) that is Bound to a PV whose claimRef has the PVC's UID, the PV is
// a CSI volume, and its driver has AttachRequired. Anything unresolved is
// skipped, to be looked at again in the next pass.
func Desire(snap Snapshot, managedGone map[string]bool) []Wanted {
	nodes := make(map[string]*corev1.Node, len(snap.Nodes))
	for _, n := range snap.Nodes {
		nodes[n.Name] = n
	}
	claims := make(map[types.NamespacedName]*corev1.PersistentVolumeClaim, len(snap.Claims))
	for _, c := range snap.Claims {
		claims[types.NamespacedName{Namespace: c.Namespace, Name: c.Name}] = c
	}
	pvs := make(map[string]*corev1.PersistentVolume, len(snap.Volumes))
	for _, pv := range snap.Volumes {
		pvs[pv.Name] = pv
	}
	drivers := make(map[string]*storagev1.CSIDriver, len(snap.Drivers))
	for _, d := range snap.Drivers {
		drivers[d.Name] = d
	}

	type key struct {
		node   string
		volume corev1.UniqueVolumeName
	}
	wanted := map[key]*Wanted{}
	for _, pod := range snap.Pods {
		nodeName := pod.Spec.NodeName
		if nodeName == "" {
			continue
		}
		node := nodes[nodeName]
		if node != nil && !Managed(node) || node == nil && !managedGone[nodeName] {
			continue
		}
		if PodTerminated(pod) {
			continue
		}
		for i := range pod.Spec.Volumes {
			claimName, ok := claimOf(pod, &pod.Spec.Volumes[i])
			if !ok {
				continue
			}
			pvc := claims[types.NamespacedName{Namespace: pod.Namespace, Name: claimName}]
			if pvc == nil || pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
				continue
			}
			if pod.Spec.Volumes[i].Ephemeral != nil && !metav1.IsControlledBy(pvc, pod) {
				continue
			}
			pv := pvs[pvc.Spec.VolumeName]
			if pv == nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
				continue
			}
			src := pv.Spec.CSI
			if src == nil || src.Driver == "" || src.VolumeHandle == "" || !AttachRequired(drivers[src.Driver]) {
				continue
			}
			k := key{nodeName, volume.UniqueName(src.Driver, src.VolumeHandle)}
			w := wanted[k]
			if w == nil {
				w = &Wanted{Node: nodeName, PV: pv.Name, Driver: src.Driver, Handle: src.VolumeHandle, Volume: k.volume, Exclusive: Exclusive(pv)}
				wanted[k] = w
			}
			ref := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
			if !slices.Contains(w.Pods, ref) {
				w.Pods = append(w.Pods, ref)
			}
		}
	}

	out := make([]Wanted, 0, len(wanted))
	for _, w := range wanted {
		slices.SortFunc(w.Pods, func(a, b corev1.ObjectReference) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b Wanted) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Volume, b.Volume))
	})
	return out
}

// claimOf names the PVC a pod volume uses: its persistentVolumeClaim, or
// for a generic ephemeral volume "<pod>-<volume>".
func claimOf(pod *corev1.Pod, v *corev1.Volume) (string, bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, v.PersistentVolumeClaim.ClaimName != ""
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name, true
	}
	return "", false
}
