package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/storage"
)

func nodeUser(name string) *User {
	return &User{Name: NodeUser(name), Groups: []string{NodesGroup, AuthenticatedGroup}}
}

// fakePods serves pods keyed "namespace/name"; the key "boom/boom" fails.
func fakePods(pods map[string]*corev1.Pod) PodGetter {
	return func(_ context.Context, namespace, name string) (*corev1.Pod, error) {
		if namespace == "boom" {
			return nil, errors.New("store down")
		}
		if p, ok := pods[namespace+"/"+name]; ok {
			return p, nil
		}
		if namespace == "wrapped" {
			return nil, fmt.Errorf("get: %w", storage.ErrNotFound)
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
	}
}

func boundPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: node}}
}

// withClaims gives pod a persistentVolumeClaim volume per claim.
func withClaims(pod *corev1.Pod, claims ...string) *corev1.Pod {
	for i, c := range claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
			Name:         fmt.Sprintf("v%d", i),
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}},
		})
	}
	return pod
}

// withEphemeral gives pod an ephemeral volume called volume.
func withEphemeral(pod *corev1.Pod, volume string) *corev1.Pod {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
		Name:         volume,
		VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}},
	})
	return pod
}

func asMirror(pod *corev1.Pod) *corev1.Pod {
	pod.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	return pod
}

// fakeNamespacePods lists pods by namespace; the namespace "boom" fails.
func fakeNamespacePods(pods ...*corev1.Pod) PodLister {
	return func(_ context.Context, namespace string) ([]*corev1.Pod, error) {
		if namespace == "boom" {
			return nil, errors.New("store down")
		}
		var out []*corev1.Pod
		for _, p := range pods {
			if p.Namespace == namespace {
				out = append(out, p)
			}
		}
		return out, nil
	}
}

// fakeVolumes serves PVs by name; "pv-boom" fails, a missing one is a
// wrapped storage.ErrNotFound.
func fakeVolumes(pvs ...*corev1.PersistentVolume) PersistentVolumeGetter {
	return func(_ context.Context, name string) (*corev1.PersistentVolume, error) {
		if name == "pv-boom" {
			return nil, errors.New("store down")
		}
		for _, pv := range pvs {
			if pv.Name == name {
				return pv, nil
			}
		}
		return nil, fmt.Errorf("get: %w", storage.ErrNotFound)
	}
}

func volumeFor(name, claimNamespace, claim string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if claim != "" {
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: claimNamespace, Name: claim}
	}
	return pv
}

// fakeAttachments serves VolumeAttachments by name; "va-boom" fails, a
// missing one is an API not-found.
func fakeAttachments(vas ...*storagev1.VolumeAttachment) VolumeAttachmentGetter {
	return func(_ context.Context, name string) (*storagev1.VolumeAttachment, error) {
		if name == "va-boom" {
			return nil, errors.New("store down")
		}
		for _, va := range vas {
			if va.Name == name {
				return va, nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, name)
	}
}

func attachment(name, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{Attacher: "d", NodeName: node}}
}

func TestNodeAuthorizer(t *testing.T) {
	pods := fakePods(map[string]*corev1.Pod{
		"default/mine":    boundPod("default", "mine", "node-2"),
		"default/theirs":  boundPod("default", "theirs", "node-1"),
		"default/pending": boundPod("default", "pending", ""),
	})
	const (
		node2 = "node-2"
		lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
		pvcs  = "/api/v1/namespaces/default/persistentvolumeclaims/"
		pvs   = "/api/v1/persistentvolumes/"
		vas   = "/apis/storage.k8s.io/v1/volumeattachments/"
		csi   = "/apis/storage.k8s.io/v1/csinodes/"
	)
	namespacePods := fakeNamespacePods(
		withEphemeral(withClaims(boundPod("default", "mine", "node-2"), "data", "shared"), "scratch"),
		withClaims(boundPod("default", "theirs", "node-1"), "other", "shared"),
		withClaims(boundPod("default", "pending", ""), "waiting"),
		asMirror(withClaims(boundPod("default", "static", "node-2"), "mirrored")),
		withClaims(boundPod("team", "p", "node-1"), "data"),
	)
	volumes := fakeVolumes(
		volumeFor("pv-data", "default", "data"),
		volumeFor("pv-scratch", "default", "mine-scratch"),
		volumeFor("pv-other", "default", "other"),
		volumeFor("pv-team", "team", "data"),
		volumeFor("pv-free", "", ""),
		volumeFor("pv-no-namespace", "", "data"),
		volumeFor("pv-claim-lookup-fails", "boom", "data"),
	)
	attachments := fakeAttachments(attachment("va-mine", "node-2"), attachment("va-theirs", "node-1"), attachment("va-unbound", ""))
	tests := []struct {
		name   string
		user   *User
		method string
		path   string
		want   Decision
		reason string
		// wantErr: the lookup error is reported.
		wantErr bool
	}{
		// Who is judged.
		{name: "not a node", user: &User{Name: "alice", Groups: []string{AuthenticatedGroup}}, method: "GET", path: "/api/v1/nodes/node-1", want: NoOpinion},
		{name: "node name without the group", user: &User{Name: "system:node:node-2"}, method: "GET", path: "/api/v1/nodes/node-2", want: NoOpinion},
		{name: "no user", method: "GET", path: "/api/v1/nodes/node-2", want: NoOpinion},
		{name: "empty node name", user: nodeUser(""), method: "GET", path: "/api/v1/nodes/node-2", want: NoOpinion, reason: `unknown node for user "system:node:"`},
		{name: "non-resource path", user: nodeUser(node2), method: "GET", path: "/metrics", want: NoOpinion},

		// Nodes.
		{name: "get own node", method: "GET", path: "/api/v1/nodes/node-2", want: Allow},
		{name: "get own node before it exists is a name check", method: "GET", path: "/api/v1/nodes/node-2?resourceVersion=0", want: Allow},
		{name: "get other node", method: "GET", path: "/api/v1/nodes/node-1", want: NoOpinion, reason: "node 'node-2' cannot read 'node-1', only its own Node object"},
		{name: "list all nodes", method: "GET", path: "/api/v1/nodes", want: NoOpinion, reason: "node 'node-2' cannot read all nodes, only its own Node object"},
		{name: "list own node by field selector", method: "GET", path: "/api/v1/nodes?fieldSelector=metadata.name%3Dnode-2", want: Allow},
		{name: "watch own node by field selector", method: "GET", path: "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dnode-2", want: Allow},
		{name: "watch other node by field selector", method: "GET", path: "/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dnode-1", want: NoOpinion, reason: "node 'node-2' cannot read 'node-1', only its own Node object"},
		{name: "list with a label selector only", method: "GET", path: "/api/v1/nodes?labelSelector=a%3Db", want: NoOpinion, reason: "node 'node-2' cannot read all nodes, only its own Node object"},
		{name: "create node (admission checks the name)", method: "POST", path: "/api/v1/nodes", want: Allow},
		{name: "update own node", method: "PUT", path: "/api/v1/nodes/node-2", want: Allow},
		{name: "patch other node (admission refuses)", method: "PATCH", path: "/api/v1/nodes/node-1", want: Allow},
		{name: "delete own node", method: "DELETE", path: "/api/v1/nodes/node-2", want: NoOpinion},
		{name: "deletecollection nodes", method: "DELETE", path: "/api/v1/nodes", want: NoOpinion},
		{name: "patch own status", method: "PATCH", path: "/api/v1/nodes/node-2/status", want: Allow},
		{name: "update other status (admission refuses)", method: "PUT", path: "/api/v1/nodes/node-1/status", want: Allow},
		{name: "get own status", method: "GET", path: "/api/v1/nodes/node-2/status", want: NoOpinion},
		{name: "proxy to node", method: "GET", path: "/api/v1/nodes/node-2/proxy/metrics", want: NoOpinion},

		// Leases.
		{name: "get own lease", method: "GET", path: lease + "node-2", want: Allow},
		{name: "create lease (admission checks the name)", method: "POST", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", want: Allow},
		{name: "update own lease", method: "PUT", path: lease + "node-2", want: Allow},
		{name: "patch own lease", method: "PATCH", path: lease + "node-2", want: Allow},
		{name: "delete own lease", method: "DELETE", path: lease + "node-2", want: Allow},
		{name: "update other lease", method: "PUT", path: lease + "node-1", want: NoOpinion, reason: "can only access node lease with the same name as the requesting node"},
		{name: "get other lease", method: "GET", path: lease + "node-1", want: NoOpinion, reason: "can only access node lease with the same name as the requesting node"},
		{name: "list leases", method: "GET", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", want: NoOpinion, reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "watch own lease", method: "GET", path: "/apis/coordination.k8s.io/v1/watch/namespaces/kube-node-lease/leases/node-2", want: NoOpinion, reason: "can only get, create, update, patch, or delete a node lease"},
		{name: "lease in another namespace", method: "PUT", path: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/node-2", want: NoOpinion, reason: `can only access leases in the "kube-node-lease" system namespace`},

		// Pods.
		{name: "get pod bound to it", method: "GET", path: "/api/v1/namespaces/default/pods/mine", want: Allow},
		{name: "get pod bound elsewhere", method: "GET", path: "/api/v1/namespaces/default/pods/theirs", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get unscheduled pod", method: "GET", path: "/api/v1/namespaces/default/pods/pending", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get missing pod", method: "GET", path: "/api/v1/namespaces/default/pods/ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get missing pod, storage not found", method: "GET", path: "/api/v1/namespaces/wrapped/pods/ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "lookup failure", method: "GET", path: "/api/v1/namespaces/boom/pods/boom", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object", wantErr: true},
		{name: "list own pods", method: "GET", path: "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-2", want: Allow},
		{name: "watch own pods with another requirement", method: "GET", path: "/api/v1/pods?watch=1&fieldSelector=status.phase%3DRunning,spec.nodeName%3Dnode-2", want: Allow},
		{name: "watch own pods in a namespace", method: "GET", path: "/api/v1/watch/namespaces/default/pods?fieldSelector=spec.nodeName%3D%3Dnode-2", want: Allow},
		{name: "list other node's pods", method: "GET", path: "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1", want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list pods not on a node", method: "GET", path: "/api/v1/pods?fieldSelector=spec.nodeName!%3Dnode-2", want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "list all pods", method: "GET", path: "/api/v1/pods", want: NoOpinion, reason: "can only list/watch pods with spec.nodeName field selector"},
		{name: "watch one bound pod by name", method: "GET", path: "/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dmine", want: Allow},
		{name: "watch one foreign pod by name", method: "GET", path: "/api/v1/namespaces/default/pods?watch=true&fieldSelector=metadata.name%3Dtheirs", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "create pod (admission allows mirror pods only)", method: "POST", path: "/api/v1/namespaces/default/pods", want: Allow},
		{name: "delete pod (admission checks binding)", method: "DELETE", path: "/api/v1/namespaces/default/pods/theirs", want: Allow},
		{name: "update pod", method: "PUT", path: "/api/v1/namespaces/default/pods/mine", want: NoOpinion},
		{name: "patch pod status", method: "PATCH", path: "/api/v1/namespaces/default/pods/mine/status", want: Allow},
		{name: "update pod status", method: "PUT", path: "/api/v1/namespaces/default/pods/theirs/status", want: Allow},
		{name: "get pod status", method: "GET", path: "/api/v1/namespaces/default/pods/mine/status", want: NoOpinion},
		{name: "evict pod", method: "POST", path: "/api/v1/namespaces/default/pods/mine/eviction", want: Allow},
		{name: "bind pod", method: "POST", path: "/api/v1/namespaces/default/pods/mine/binding", want: NoOpinion},
		{name: "read logs of its own pod", method: "GET", path: "/api/v1/namespaces/default/pods/mine/log", want: NoOpinion},
		{name: "follow logs of another node's pod", method: "GET", path: "/api/v1/namespaces/default/pods/theirs/log?follow=true", want: NoOpinion},
		{name: "deletecollection pods", method: "DELETE", path: "/api/v1/namespaces/default/pods", want: NoOpinion},

		// PersistentVolumeClaims: get and status writes of the claims its
		// pods use.
		{name: "get claim of a bound pod", method: "GET", path: pvcs + "data", want: Allow},
		{name: "get claim two nodes share", method: "GET", path: pvcs + "shared", want: Allow},
		{name: "get ephemeral claim of a bound pod", method: "GET", path: pvcs + "mine-scratch", want: Allow},
		{name: "get claim of another node's pod", method: "GET", path: pvcs + "other", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get claim of an unscheduled pod", method: "GET", path: pvcs + "waiting", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get claim of a mirror pod", method: "GET", path: pvcs + "mirrored", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get claim of the same name in another namespace", method: "GET", path: "/api/v1/namespaces/team/persistentvolumeclaims/data", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get claim no pod uses", method: "GET", path: pvcs + "ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "claim lookup failure", method: "GET", path: "/api/v1/namespaces/boom/persistentvolumeclaims/data", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object", wantErr: true},
		{name: "list claims", method: "GET", path: "/api/v1/namespaces/default/persistentvolumeclaims", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "watch one claim by name", method: "GET", path: "/api/v1/namespaces/default/persistentvolumeclaims?watch=true&fieldSelector=metadata.name%3Ddata", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "create claim", method: "POST", path: "/api/v1/namespaces/default/persistentvolumeclaims", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "update claim", method: "PUT", path: pvcs + "data", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "delete claim", method: "DELETE", path: pvcs + "data", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "update status of a used claim", method: "PUT", path: pvcs + "data/status", want: Allow},
		{name: "patch status of a used claim", method: "PATCH", path: pvcs + "mine-scratch/status", want: Allow},
		{name: "patch status of another node's claim", method: "PATCH", path: pvcs + "other/status", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get claim status", method: "GET", path: pvcs + "data/status", want: NoOpinion, reason: "can only get/update/patch this type"},

		// PersistentVolumes: get of those bound (claimRef) to its pods' claims.
		{name: "get volume of a used claim", method: "GET", path: pvs + "pv-data", want: Allow},
		{name: "get volume of an ephemeral claim", method: "GET", path: pvs + "pv-scratch", want: Allow},
		{name: "get volume of another node's claim", method: "GET", path: pvs + "pv-other", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get volume of a claim in another namespace", method: "GET", path: pvs + "pv-team", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get unbound volume", method: "GET", path: pvs + "pv-free", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get volume whose claimRef has no namespace", method: "GET", path: pvs + "pv-no-namespace", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get missing volume", method: "GET", path: pvs + "pv-ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "volume lookup failure", method: "GET", path: pvs + "pv-boom", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object", wantErr: true},
		{name: "claim lookup failure behind a volume", method: "GET", path: pvs + "pv-claim-lookup-fails", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object", wantErr: true},
		{name: "list volumes", method: "GET", path: "/api/v1/persistentvolumes", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "get volume status", method: "GET", path: pvs + "pv-data/status", want: NoOpinion, reason: "cannot get subresource"},
		{name: "update volume status", method: "PUT", path: pvs + "pv-data/status", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "patch volume", method: "PATCH", path: pvs + "pv-data", want: NoOpinion, reason: "can only get individual resources of this type"},

		// VolumeAttachments: get of those to itself.
		{name: "get own attachment", method: "GET", path: vas + "va-mine", want: Allow},
		{name: "get other node's attachment", method: "GET", path: vas + "va-theirs", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get attachment without a node", method: "GET", path: vas + "va-unbound", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "get missing attachment", method: "GET", path: vas + "va-ghost", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object"},
		{name: "attachment lookup failure", method: "GET", path: vas + "va-boom", want: NoOpinion, reason: "no relationship found between node 'node-2' and this object", wantErr: true},
		{name: "list attachments", method: "GET", path: "/apis/storage.k8s.io/v1/volumeattachments", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "watch own attachment", method: "GET", path: "/apis/storage.k8s.io/v1/volumeattachments?watch=1&fieldSelector=metadata.name%3Dva-mine", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "patch own attachment status", method: "PATCH", path: vas + "va-mine/status", want: NoOpinion, reason: "can only get individual resources of this type"},
		{name: "get own attachment status", method: "GET", path: vas + "va-mine/status", want: NoOpinion, reason: "cannot get subresource"},

		// CSINodes: its own only.
		{name: "get own CSINode", method: "GET", path: csi + "node-2", want: Allow},
		{name: "create CSINode (admission checks the name)", method: "POST", path: "/apis/storage.k8s.io/v1/csinodes", want: Allow},
		{name: "update own CSINode", method: "PUT", path: csi + "node-2", want: Allow},
		{name: "patch own CSINode", method: "PATCH", path: csi + "node-2", want: Allow},
		{name: "delete own CSINode", method: "DELETE", path: csi + "node-2", want: Allow},
		{name: "get other CSINode", method: "GET", path: csi + "node-1", want: NoOpinion, reason: "can only access CSINode with the same name as the requesting node"},
		{name: "patch other CSINode", method: "PATCH", path: csi + "node-1", want: NoOpinion, reason: "can only access CSINode with the same name as the requesting node"},
		{name: "delete other CSINode", method: "DELETE", path: csi + "node-1", want: NoOpinion, reason: "can only access CSINode with the same name as the requesting node"},
		{name: "list CSINodes", method: "GET", path: "/apis/storage.k8s.io/v1/csinodes", want: NoOpinion, reason: "can only get, create, update, patch, or delete a CSINode"},
		{name: "watch own CSINode", method: "GET", path: "/apis/storage.k8s.io/v1/csinodes?watch=true&fieldSelector=metadata.name%3Dnode-2", want: NoOpinion, reason: "can only get, create, update, patch, or delete a CSINode"},
		{name: "deletecollection CSINodes", method: "DELETE", path: "/apis/storage.k8s.io/v1/csinodes", want: NoOpinion, reason: "can only get, create, update, patch, or delete a CSINode"},
		{name: "own CSINode subresource", method: "PUT", path: csi + "node-2/status", want: NoOpinion, reason: "cannot authorize CSINode subresources"},

		// CSIDrivers and StorageClasses.
		{name: "get CSIDriver", method: "GET", path: "/apis/storage.k8s.io/v1/csidrivers/hostpath.csi.knode.io", want: Allow},
		{name: "list CSIDrivers", method: "GET", path: "/apis/storage.k8s.io/v1/csidrivers", want: Allow},
		{name: "watch CSIDrivers", method: "GET", path: "/apis/storage.k8s.io/v1/csidrivers?watch=true", want: Allow},
		{name: "create CSIDriver", method: "POST", path: "/apis/storage.k8s.io/v1/csidrivers", want: NoOpinion},
		{name: "get StorageClass", method: "GET", path: "/apis/storage.k8s.io/v1/storageclasses/standard", want: NoOpinion},
		{name: "list StorageClasses", method: "GET", path: "/apis/storage.k8s.io/v1/storageclasses", want: NoOpinion},

		// The static system:node rules.
		{name: "create event", method: "POST", path: "/api/v1/namespaces/default/events", want: Allow},
		{name: "patch event", method: "PATCH", path: "/api/v1/namespaces/default/events/e1", want: Allow},
		{name: "update event", method: "PUT", path: "/api/v1/namespaces/default/events/e1", want: Allow},
		{name: "list events", method: "GET", path: "/api/v1/namespaces/default/events", want: NoOpinion},
		{name: "delete event", method: "DELETE", path: "/api/v1/namespaces/default/events/e1", want: NoOpinion},
		{name: "events.k8s.io events", method: "POST", path: "/apis/events.k8s.io/v1/namespaces/default/events", want: NoOpinion},
		{name: "read services", method: "GET", path: "/api/v1/services", want: Allow},
		{name: "write services", method: "POST", path: "/api/v1/namespaces/default/services", want: NoOpinion},
		{name: "get the kubernetes endpoints", method: "GET", path: "/api/v1/namespaces/default/endpoints/kubernetes", want: Allow},
		{name: "watch endpoints", method: "GET", path: "/api/v1/namespaces/default/endpoints?watch=true", want: Allow},
		{name: "write endpoints", method: "PUT", path: "/api/v1/namespaces/default/endpoints/kubernetes", want: NoOpinion},
		{name: "create CSR", method: "POST", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests", want: Allow},
		{name: "get CSR", method: "GET", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1", want: Allow},
		{name: "list CSRs", method: "GET", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests", want: Allow},
		{name: "watch CSR", method: "GET", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests?watch=true&fieldSelector=metadata.name%3Dcsr-1", want: Allow},
		{name: "approve CSR", method: "PUT", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval", want: NoOpinion},
		{name: "issue CSR", method: "PUT", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/status", want: NoOpinion},
		{name: "update CSR", method: "PUT", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1", want: NoOpinion},
		{name: "delete CSR", method: "DELETE", path: "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1", want: NoOpinion},
		{name: "tokenreview", method: "POST", path: "/apis/authentication.k8s.io/v1/tokenreviews", want: Allow},
		{name: "runtimeclasses", method: "GET", path: "/apis/node.k8s.io/v1/runtimeclasses", want: Allow},
		{name: "namespaces", method: "GET", path: "/api/v1/namespaces/default", want: NoOpinion},
		{name: "secrets (no graph yet)", method: "GET", path: "/api/v1/namespaces/default/secrets/s", want: NoOpinion},
	}
	az := NewNodeAuthorizer(NodeAuthorizerConfig{Pods: pods, NamespacePods: namespacePods, PersistentVolumes: volumes, VolumeAttachments: attachments})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := RequestAttributes(httptest.NewRequest(tc.method, tc.path, nil))
			a.User = tc.user
			if tc.user == nil && tc.name != "no user" {
				a.User = nodeUser(node2)
			}
			d, reason, err := az.Authorize(context.Background(), a)
			if diff := cmp.Diff([]any{tc.want.String(), tc.reason}, []any{d.String(), reason}); diff != "" {
				t.Errorf("%s %s (attrs %+v): (-want +got)\n%s", tc.method, tc.path, a, diff)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// Without lookups every read that needs one is refused; with them the
// same reads are allowed (so the refusal is the missing lookup's).
func TestNodeAuthorizerWithoutLookups(t *testing.T) {
	full := NodeAuthorizerConfig{
		Pods:              fakePods(map[string]*corev1.Pod{"default/mine": boundPod("default", "mine", "node-2")}),
		NamespacePods:     fakeNamespacePods(withClaims(boundPod("default", "mine", "node-2"), "data")),
		PersistentVolumes: fakeVolumes(volumeFor("pv-data", "default", "data")),
		VolumeAttachments: fakeAttachments(attachment("va-mine", "node-2")),
	}
	for _, path := range []string{
		"/api/v1/namespaces/default/pods/mine",
		"/api/v1/namespaces/default/persistentvolumeclaims/data",
		"/api/v1/persistentvolumes/pv-data",
		"/apis/storage.k8s.io/v1/volumeattachments/va-mine",
	} {
		a := RequestAttributes(httptest.NewRequest("GET", path, nil))
		a.User = nodeUser("node-2")
		d, reason, err := NewNodeAuthorizer(NodeAuthorizerConfig{}).Authorize(context.Background(), a)
		if d != NoOpinion || reason != "no relationship found between node 'node-2' and this object" || err != nil {
			t.Errorf("%s without lookups: got (%v, %q, %v), want NoOpinion with the no-relationship reason", path, d, reason, err)
		}
		if d, reason, err := NewNodeAuthorizer(full).Authorize(context.Background(), a); d != Allow || err != nil {
			t.Errorf("%s with lookups: got (%v, %q, %v), want Allow", path, d, reason, err)
		}
	}
	// A volume is followed to its claim: with the volume lookup but not
	// the pod list, the claim cannot be reached.
	partial := full
	partial.NamespacePods = nil
	a := RequestAttributes(httptest.NewRequest("GET", "/api/v1/persistentvolumes/pv-data", nil))
	a.User = nodeUser("node-2")
	if d, _, _ := NewNodeAuthorizer(partial).Authorize(context.Background(), a); d != NoOpinion {
		t.Errorf("volume without the pod list: got %v, want NoOpinion", d)
	}
}

func TestPodClaimNames(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []string
	}{
		{name: "no volumes", pod: boundPod("default", "p", "n")},
		{name: "claims in volume order", pod: withClaims(boundPod("default", "p", "n"), "b", "a"), want: []string{"b", "a"}},
		{name: "ephemeral volume names its claim after pod and volume", pod: withEphemeral(withClaims(boundPod("default", "web-0", "n"), "a"), "cache"), want: []string{"a", "web-0-cache"}},
		{name: "other volume kinds grant nothing", pod: func() *corev1.Pod {
			p := boundPod("default", "p", "n")
			p.Spec.Volumes = []corev1.Volume{{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			return p
		}()},
		{name: "mirror pod grants nothing", pod: asMirror(withEphemeral(withClaims(boundPod("default", "p", "n"), "a"), "cache"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, podClaimNames(tc.pod)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestClaimUsedOnNode(t *testing.T) {
	pods := []*corev1.Pod{
		withClaims(boundPod("default", "a", "node-1"), "one"),
		withClaims(boundPod("default", "b", "node-2"), "two"),
		withClaims(boundPod("other", "c", "node-2"), "three"),
	}
	tests := []struct {
		node, namespace, claim string
		want                   bool
	}{
		{node: "node-2", namespace: "default", claim: "two", want: true},
		{node: "node-1", namespace: "default", claim: "one", want: true},
		{node: "node-2", namespace: "default", claim: "one"},
		// A lister that returns pods of other namespaces does not widen
		// access.
		{node: "node-2", namespace: "default", claim: "three"},
		{node: "node-2", namespace: "other", claim: "three", want: true},
		{node: "", namespace: "default", claim: "one"},
	}
	for _, tc := range tests {
		if got := claimUsedOnNode(pods, tc.node, tc.namespace, tc.claim); got != tc.want {
			t.Errorf("claimUsedOnNode(%q, %s/%s) = %v, want %v", tc.node, tc.namespace, tc.claim, got, tc.want)
		}
	}
	if claimUsedOnNode(nil, "node-2", "default", "two") {
		t.Error("no pods: got true")
	}
}

// The chain with the node authorizer: the 403 message a node sees names
// the reason.
func TestChainNodeForbiddenMessage(t *testing.T) {
	a := RequestAttributes(httptest.NewRequest("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1", nil))
	a.User = nodeUser("node-2")
	d, reason, _ := Chain(NewNodeAuthorizer(NodeAuthorizerConfig{})).Authorize(context.Background(), a)
	if d == Allow {
		t.Fatal("allowed node-2 to update node-1's lease")
	}
	want := `leases.coordination.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`
	if got := Forbidden(a, reason); got != want {
		t.Errorf("message:\n got %s\nwant %s", got, want)
	}
}

func TestDiscoveryAuthorizer(t *testing.T) {
	tests := []struct {
		method, path string
		user         *User
		want         Decision
	}{
		{method: "GET", path: "/api", want: Allow},
		{method: "GET", path: "/api/v1", want: Allow},
		{method: "GET", path: "/apis", want: Allow},
		{method: "GET", path: "/apis/coordination.k8s.io/v1", want: Allow},
		{method: "GET", path: "/openapi/v2", want: Allow},
		{method: "GET", path: "/openapi/v3/api/v1", want: Allow},
		{method: "GET", path: "/version", want: Allow},
		{method: "GET", path: "/readyz", want: Allow},
		{method: "GET", path: "/readyz/etcd", want: NoOpinion},
		{method: "GET", path: "/metrics", want: NoOpinion},
		{method: "GET", path: "/apisx", want: NoOpinion},
		{method: "POST", path: "/api", want: NoOpinion},
		{method: "GET", path: "/api/v1/nodes", want: NoOpinion},
		{method: "GET", path: "/api/v1/watch", want: NoOpinion},
		{method: "GET", path: "/api", user: &User{}, want: Allow},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := RequestAttributes(httptest.NewRequest(tc.method, tc.path, nil))
			a.User = tc.user
			if a.User == nil {
				a.User = nodeUser("node-2")
			}
			d, reason, err := DiscoveryAuthorizer{}.Authorize(context.Background(), a)
			if d != tc.want || reason != "" || err != nil {
				t.Errorf("got (%v, %q, %v), want %v", d, reason, err, tc.want)
			}
		})
	}
	a := RequestAttributes(httptest.NewRequest("GET", "/api", nil))
	if d, _, _ := (DiscoveryAuthorizer{}).Authorize(context.Background(), a); d != NoOpinion {
		t.Errorf("no user: got %v, want NoOpinion", d)
	}
}
