package noderestriction

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/registry"
	"knode/internal/storage"
)

var (
	nodeKind  = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "nodes"}
	podKind   = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "pods", Namespaced: true}
	leaseKind = &registry.Kind{GroupVersion: schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}, Resource: "leases", Namespaced: true}
	eventKind = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "events", Namespaced: true}
)

const node2UID = types.UID("uid-node-2")

func nodeUser(name string) *auth.User {
	return &auth.User{Name: auth.NodeUser(name), Groups: []string{auth.NodesGroup, auth.AuthenticatedGroup}}
}

func node(name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
}

func pod(ns, name, nodeName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{NodeName: nodeName}}
}

// mirrorPod is a mirror pod node-2 may create; change tweaks it.
func mirrorPod(change func(*corev1.Pod)) *corev1.Pod {
	p := pod("default", "static-node-2", "node-2")
	p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "hash"}
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-2", UID: node2UID, Controller: ptr.To(true)}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Image: "busybox"}}
	if change != nil {
		change(p)
	}
	return p
}

func lease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name}}
}

func testPlugin() *Plugin {
	pods := map[string]*corev1.Pod{
		"default/mine":   pod("default", "mine", "node-2"),
		"default/theirs": pod("default", "theirs", "node-1"),
	}
	return New(Config{
		Pods: func(_ context.Context, ns, name string) (*corev1.Pod, error) {
			if ns == "boom" {
				return nil, errors.New("store down")
			}
			if p, ok := pods[ns+"/"+name]; ok {
				return p, nil
			}
			return nil, fmt.Errorf("get: %w", storage.ErrNotFound)
		},
		Nodes: func(_ context.Context, name string) (*corev1.Node, error) {
			if name == "node-2" {
				n := node("node-2", nil)
				n.UID = node2UID
				return n, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, name)
		},
	})
}

// outcome is what a test compares: "" for admitted, else the HTTP code
// and the message.
func outcome(err error) string {
	if err == nil {
		return ""
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "not a Status: " + err.Error()
	}
	return fmt.Sprintf("%d %s", status.Status().Code, status.Status().Message)
}

func TestAdmit(t *testing.T) {
	worker := map[string]string{"node-role.kubernetes.io/worker": ""}
	base := map[string]string{"kubernetes.io/hostname": "node-2", "example.com/pool": "a"}
	withLabel := func(k, v string) map[string]string {
		out := map[string]string{}
		for bk, bv := range base {
			out[bk] = bv
		}
		out[k] = v
		return out
	}
	taint := corev1.Taint{Key: "example.com/dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	withOwner := node("node-2", base)
	withOwner.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "u"}}
	withConfigSource := node("node-2", base)
	withConfigSource.Spec.ConfigSource = &corev1.NodeConfigSource{ConfigMap: &corev1.ConfigMapNodeConfigSource{Name: "c", Namespace: "kube-system", KubeletConfigKey: "k"}}
	relabelled := pod("default", "mine", "node-2")
	relabelled.Labels = map[string]string{"app": "x"}
	claimed := pod("default", "mine", "node-2")
	claimed.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("gpu-1")}}

	tests := []struct {
		name string
		a    apiserver.AdmissionAttributes
		want string
	}{
		// Who is restricted.
		{name: "not a node",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-1", Object: node("node-1", worker), Old: node("node-1", nil),
				User: &auth.User{Name: "admin", Groups: []string{auth.MastersGroup}}}},
		{name: "nil user",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-1", Object: node("node-1", worker), Old: node("node-1", nil)}},
		{name: "empty node name",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-1", Object: node("node-1", nil), User: nodeUser("")},
			want: `403 nodes "node-1" is forbidden: could not determine node from user "system:node:"`},
		{name: "events are not restricted",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: eventKind, Namespace: "default", Name: "e", Object: &corev1.Event{}}},

		// Nodes.
		{name: "create own node with allowed labels",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-2", Object: node("node-2", base, taint)}},
		{name: "create other node",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-1", Object: node("node-1", nil)},
			want: `403 nodes "node-1" is forbidden: node "node-2" is not allowed to modify node "node-1"`},
		{name: "create own node with node-role label",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-2", Object: node("node-2", withLabel("node-role.kubernetes.io/worker", ""))},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to set the following labels: node-role.kubernetes.io/worker`},
		{name: "create own node with two forbidden labels",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", map[string]string{"node-role.kubernetes.io/worker": "", "node-restriction.kubernetes.io/pool": "a"})},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to set the following labels: node-restriction.kubernetes.io/pool, node-role.kubernetes.io/worker`},
		{name: "create own node with configSource",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-2", Object: withConfigSource},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to create pods with a non-nil configSource`},
		{name: "update own node with allowed labels",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", withLabel("topology.kubernetes.io/zone", "z1")), Old: node("node-2", base)}},
		{name: "update own node keeping an existing forbidden label",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", map[string]string{"node-role.kubernetes.io/worker": "", "a": "2"}), Old: node("node-2", map[string]string{"node-role.kubernetes.io/worker": "", "a": "1"})}},
		{name: "label other node",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-1",
				Object: node("node-1", map[string]string{"a": "b"}), Old: node("node-1", nil)},
			want: `403 nodes "node-1" is forbidden: node "node-2" is not allowed to modify node "node-1"`},
		{name: "give itself a role",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", withLabel("node-role.kubernetes.io/worker", "")), Old: node("node-2", base)},
			want: `403 nodes "node-2" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker`},
		{name: "remove an admin label",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", base), Old: node("node-2", withLabel("node-restriction.kubernetes.io/pool", "a"))},
			want: `403 nodes "node-2" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool`},
		{name: "change an admin label",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", withLabel("node-restriction.kubernetes.io/pool", "b")), Old: node("node-2", withLabel("node-restriction.kubernetes.io/pool", "a"))},
			want: `403 nodes "node-2" is forbidden: is not allowed to modify labels: node-restriction.kubernetes.io/pool`},
		{name: "add a taint",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", base, taint), Old: node("node-2", base)},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to modify taints`},
		{name: "remove a taint",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", base), Old: node("node-2", base, taint)},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to modify taints`},
		{name: "taints unchanged, nil and empty alike",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-2"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{}}}, Old: node("node-2", nil)}},
		{name: "set ownerReferences",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: withOwner, Old: node("node-2", base)},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to modify ownerReferences`},
		{name: "set configSource",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: withConfigSource, Old: node("node-2", base)},
			want: `403 nodes "node-2" is forbidden: node "node-2" is not allowed to update configSource to a new non-nil configSource`},
		{name: "drop configSource",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2",
				Object: node("node-2", base), Old: withConfigSource}},
		{name: "own status",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2", Subresource: "status",
				Object: node("node-2", base), Old: node("node-2", base)}},
		{name: "other node's status",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-1", Subresource: "status",
				Object: node("node-1", nil), Old: node("node-1", nil)},
			want: `403 nodes "node-1" is forbidden: node "node-2" is not allowed to modify node "node-1"`},
		{name: "delete other node",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: nodeKind, Name: "node-1"},
			want: `403 nodes "node-1" is forbidden: node "node-2" is not allowed to modify node "node-1"`},
		{name: "node update with a wrong type",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: nodeKind, Name: "node-2", Object: &corev1.Pod{}, Old: node("node-2", nil)},
			want: `403 nodes "node-2" is forbidden: unexpected type *v1.Pod`},

		// Leases.
		{name: "create own lease",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: leaseKind, Namespace: "kube-node-lease", Name: "node-2", Object: lease("node-2")}},
		{name: "create other lease",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: leaseKind, Namespace: "kube-node-lease", Name: "node-1", Object: lease("node-1")},
			want: `403 leases.coordination.k8s.io "node-1" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "create lease named by object only",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: leaseKind, Namespace: "kube-node-lease", Object: lease("node-1")},
			want: `403 leases.coordination.k8s.io "node-1" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "update own lease",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: leaseKind, Namespace: "kube-node-lease", Name: "node-2", Object: lease("node-2"), Old: lease("node-2")}},
		{name: "update other lease",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: leaseKind, Namespace: "kube-node-lease", Name: "node-1", Object: lease("node-1"), Old: lease("node-1")},
			want: `403 leases.coordination.k8s.io "node-1" is forbidden: can only access node lease with the same name as the requesting node`},
		{name: "delete own lease",
			a: apiserver.AdmissionAttributes{Operation: "DELETE", Kind: leaseKind, Namespace: "kube-node-lease", Name: "node-2"}},
		{name: "lease in another namespace",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: leaseKind, Namespace: "kube-system", Name: "node-2", Object: lease("node-2")},
			want: `403 leases.coordination.k8s.io "node-2" is forbidden: can only access leases in the "kube-node-lease" system namespace`},

		// Pods: create.
		{name: "create mirror pod",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2", Object: mirrorPod(nil)}},
		{name: "create ordinary pod",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "p",
				Object: mirrorPod(func(p *corev1.Pod) { p.Name = "p"; p.Annotations = nil })},
			want: `403 pods "p" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-2" can only create mirror pods`},
		{name: "mirror pod for another node",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.Spec.NodeName = "node-1" })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can only create pods with spec.nodeName set to itself`},
		{name: "mirror pod without owner",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences = nil })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can only create pods with an owner reference set to itself`},
		{name: "mirror pod with two owners",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences = append(p.OwnerReferences, p.OwnerReferences[0]) })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can only create pods with a single owner reference set to itself`},
		{name: "mirror pod owned by another node",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].Name = "node-1" })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can only create pods with an owner reference set to itself`},
		{name: "mirror pod owned by a non-node",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "ConfigMap" })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can only create pods with an owner reference set to itself`},
		{name: "mirror pod owner not controller",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can only create pods with a controller owner reference set to itself`},
		{name: "mirror pod blocks owner deletion",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true) })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" must not set blockOwnerDeletion on an owner reference`},
		{name: "mirror pod with stale node UID",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "old" })},
			want: `403 pods "static-node-2" is forbidden: node node-2 UID mismatch: expected old got uid-node-2`},
		{name: "mirror pod with a service account",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.Spec.ServiceAccountName = "default" })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference a service account`},
		{name: "mirror pod with an env secret",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Spec.InitContainers = []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}}}}
				})},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference secrets`},
		{name: "mirror pod with an image pull secret",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "reg"}} })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference secrets`},
		{name: "mirror pod with a projected secret",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{}}}}}}}
				})},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference secrets`},
		{name: "mirror pod with a configmap volume",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}
				})},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference configmaps`},
		{name: "mirror pod with envFrom configmap in an ephemeral container",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}}}}}}
				})},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference configmaps`},
		{name: "mirror pod with a cluster trust bundle",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "p"}}}}}}}
				})},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference clustertrustbundles`},
		{name: "mirror pod with a claim",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
				})},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference persistentvolumeclaims`},
		{name: "mirror pod with a resource claim",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2",
				Object: mirrorPod(func(p *corev1.Pod) { p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}} })},
			want: `403 pods "static-node-2" is forbidden: node "node-2" can not create pods that reference resourceclaims`},
		{name: "mirror pod from an unregistered node",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-3", User: nodeUser("node-3"),
				Object: mirrorPod(func(p *corev1.Pod) {
					p.Name, p.Spec.NodeName, p.OwnerReferences[0].Name = "static-node-3", "node-3", "node-3"
				})},
			want: `404 nodes "node-3" not found`},

		// Pods: delete, update, status, eviction.
		{name: "delete pod bound to it",
			a: apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "default", Name: "mine"}},
		{name: "delete pod bound elsewhere",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "default", Name: "theirs"},
			want: `403 pods "theirs" is forbidden: node "node-2" can only delete pods with spec.nodeName set to itself`},
		{name: "delete pod bound elsewhere, stored pod in Old",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "default", Name: "other", Old: pod("default", "other", "node-1")},
			want: `403 pods "other" is forbidden: node "node-2" can only delete pods with spec.nodeName set to itself`},
		{name: "delete missing pod",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "default", Name: "ghost"},
			want: `404 pods "ghost" not found`},
		{name: "delete pod when the lookup fails",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "boom", Name: "x"},
			want: `403 pods "x" is forbidden: store down`},
		{name: "update pod object",
			a:    apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: podKind, Namespace: "default", Name: "mine", Object: pod("default", "mine", "node-2"), Old: pod("default", "mine", "node-2")},
			want: `403 pods "mine" is forbidden: unexpected operation "UPDATE", node "node-2" can only create and delete mirror pods`},
		{name: "status of own pod",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: podKind, Namespace: "default", Name: "mine", Subresource: "status",
				Object: pod("default", "mine", "node-2"), Old: pod("default", "mine", "node-2")}},
		{name: "status of pod bound elsewhere",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: podKind, Namespace: "default", Name: "theirs", Subresource: "status",
				Object: pod("default", "theirs", "node-1"), Old: pod("default", "theirs", "node-1")},
			want: `403 pods "theirs" is forbidden: node "node-2" can only update pod status for pods with spec.nodeName set to itself`},
		{name: "status changing labels",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: podKind, Namespace: "default", Name: "mine", Subresource: "status",
				Object: relabelled, Old: pod("default", "mine", "node-2")},
			want: `403 pods "mine" is forbidden: node "node-2" cannot update labels through pod status`},
		{name: "status changing resource claim statuses",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: podKind, Namespace: "default", Name: "mine", Subresource: "status",
				Object: claimed, Old: pod("default", "mine", "node-2")},
			want: `403 pods "mine" is forbidden: node "node-2" cannot update resource claim statues`},
		{name: "evict own pod",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "mine", Subresource: "eviction",
				Object: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "default"}}}},
		{name: "evict pod bound elsewhere, named by the Eviction",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Subresource: "eviction",
				Object: &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Namespace: "default"}}},
			want: `403 pods "theirs" is forbidden: node node-2 can only evict pods with spec.nodeName set to itself`},
		{name: "evict with no pod named",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Subresource: "eviction",
				Object: &policyv1.Eviction{}},
			want: `403 pods "Unknown" is forbidden: could not determine pod from request data`},
		{name: "pod binding",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "mine", Subresource: "binding",
				Object: &corev1.Binding{}},
			want: `403 pods "mine" is forbidden: unexpected pod subresource "binding", only 'status' and 'eviction' are allowed`},
	}
	p := testPlugin()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.a.User == nil && tc.name != "nil user" {
				tc.a.User = nodeUser("node-2")
			}
			got := outcome(p.Admit(context.Background(), tc.a))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmitWithoutGetters(t *testing.T) {
	p := New(Config{})
	tests := []struct {
		name string
		a    apiserver.AdmissionAttributes
		want string
	}{
		{name: "delete needs the pod",
			a:    apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "default", Name: "mine"},
			want: `403 pods "mine" is forbidden: noderestriction: no getter configured`},
		{name: "delete with the pod in Old needs no getter",
			a: apiserver.AdmissionAttributes{Operation: "DELETE", Kind: podKind, Namespace: "default", Name: "mine", Old: pod("default", "mine", "node-2")}},
		{name: "mirror pod needs the node",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: podKind, Namespace: "default", Name: "static-node-2", Object: mirrorPod(nil)},
			want: `403 pods "static-node-2" is forbidden: error looking up node node-2 to verify uid: noderestriction: no getter configured`},
		{name: "node rules need no getter",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: nodeKind, Name: "node-2", Object: node("node-2", nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.a.User = nodeUser("node-2")
			if diff := cmp.Diff(tc.want, outcome(p.Admit(context.Background(), tc.a))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
