package noderestriction_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
)

const (
	node1Token = "node1token"
	node2Token = "node2token"
)

type cluster struct {
	admin, node1, node2 kubernetes.Interface
}

// newCluster serves the real kinds from a memory store with the node
// authorizer and NodeRestriction as knode server wires them, and returns a
// clientset per identity.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	s := apitest.Start(t, apitest.Options{
		Tokens: []string{
			node1Token + `,system:node:node-1,2,"system:nodes"`,
			node2Token + `,system:node:node-2,3,"system:nodes"`,
		},
		NodeRules: true,
	})
	return &cluster{admin: s.Admin, node1: s.Client(t, node1Token), node2: s.Client(t, node2Token)}
}

// expectForbidden fails unless err is a 403 whose message is want.
func expectForbidden(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: got %v, want 403 Forbidden", what, err)
		return
	}
	if got := err.Error(); got != want {
		t.Errorf("%s: message\n got %s\nwant %s", what, got, want)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func registerNode(t *testing.T, c kubernetes.Interface, name string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	created, err := c.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	must(t, "register "+name, err)
	return created
}

func nodeLease(name string, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime:            &metav1.MicroTime{Time: now},
		},
	}
}

func TestNodeIdentityThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

	registerNode(t, c.node1, "node-1", map[string]string{"kubernetes.io/hostname": "node-1"})
	registerNode(t, c.node2, "node-2", map[string]string{"kubernetes.io/hostname": "node-2", "example.com/pool": "a"},
		corev1.Taint{Key: "example.com/dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule})

	t.Run("node-2 cannot register another node", func(t *testing.T) {
		_, err := c.node2.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-3"}}, metav1.CreateOptions{})
		expectForbidden(t, "create node-3", err, `nodes "node-3" is forbidden: node "node-2" is not allowed to modify node "node-3"`)
	})

	t.Run("node-2 cannot label node-1", func(t *testing.T) {
		_, err := c.node2.CoreV1().Nodes().Patch(ctx, "node-1", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"labels":{"example.com/stolen":"yes"}}}`), metav1.PatchOptions{})
		expectForbidden(t, "label node-1", err, `nodes "node-1" is forbidden: node "node-2" is not allowed to modify node "node-1"`)
		n, err := c.admin.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		must(t, "get node-1", err)
		if _, ok := n.Labels["example.com/stolen"]; ok {
			t.Error("node-1 was labelled")
		}
	})

	t.Run("node-2 cannot give itself a role", func(t *testing.T) {
		_, err := c.node2.CoreV1().Nodes().Patch(ctx, "node-2", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`), metav1.PatchOptions{})
		expectForbidden(t, "label node-2 worker", err, `nodes "node-2" is forbidden: is not allowed to modify labels: node-role.kubernetes.io/worker`)
	})

	t.Run("node-2 may set allowed labels on itself", func(t *testing.T) {
		n, err := c.node2.CoreV1().Nodes().Patch(ctx, "node-2", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"z1","example.com/gpu":"true"}}}`), metav1.PatchOptions{})
		must(t, "label node-2", err)
		if n.Labels["topology.kubernetes.io/zone"] != "z1" {
			t.Errorf("labels = %v", n.Labels)
		}
	})

	t.Run("node-2 cannot change its taints", func(t *testing.T) {
		_, err := c.node2.CoreV1().Nodes().Patch(ctx, "node-2", types.MergePatchType,
			[]byte(`{"spec":{"taints":null}}`), metav1.PatchOptions{})
		expectForbidden(t, "untaint node-2", err, `nodes "node-2" is forbidden: node "node-2" is not allowed to modify taints`)
	})

	t.Run("node-2 patches its own status", func(t *testing.T) {
		patch := `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"2025-01-01T00:00:00Z","lastTransitionTime":"2025-01-01T00:00:00Z"}]}}`
		n, err := c.node2.CoreV1().Nodes().Patch(ctx, "node-2", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		must(t, "patch node-2 status", err)
		if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Reason != "KubeletReady" {
			t.Errorf("conditions = %+v", n.Status.Conditions)
		}
		_, err = c.node2.CoreV1().Nodes().Patch(ctx, "node-1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		expectForbidden(t, "patch node-1 status", err, `nodes "node-1" is forbidden: node "node-2" is not allowed to modify node "node-1"`)
	})

	t.Run("node-2 reads only its own Node", func(t *testing.T) {
		_, err := c.node2.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		must(t, "get node-2", err)
		_, err = c.node2.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		expectForbidden(t, "get node-1", err, `nodes "node-1" is forbidden: User "system:node:node-2" cannot get resource "nodes" in API group "" at the cluster scope: node 'node-2' cannot read 'node-1', only its own Node object`)
		_, err = c.node2.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		expectForbidden(t, "list nodes", err, `nodes is forbidden: User "system:node:node-2" cannot list resource "nodes" in API group "" at the cluster scope: node 'node-2' cannot read all nodes, only its own Node object`)
		list, err := c.node2.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=node-2"})
		must(t, "list own node", err)
		if len(list.Items) != 1 || list.Items[0].Name != "node-2" {
			t.Errorf("list own node: %d items", len(list.Items))
		}
	})

	t.Run("node-2 cannot delete nodes", func(t *testing.T) {
		err := c.node2.CoreV1().Nodes().Delete(ctx, "node-2", metav1.DeleteOptions{})
		expectForbidden(t, "delete node-2", err, `nodes "node-2" is forbidden: User "system:node:node-2" cannot delete resource "nodes" in API group "" at the cluster scope`)
	})

	leases1 := c.node1.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	leases2 := c.node2.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	_, err := leases1.Create(ctx, nodeLease("node-1", now), metav1.CreateOptions{})
	must(t, "node-1 creates its lease", err)

	t.Run("node-2 creates and renews its own Lease", func(t *testing.T) {
		l, err := leases2.Create(ctx, nodeLease("node-2", now), metav1.CreateOptions{})
		must(t, "create", err)
		l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(10 * time.Second)}
		l, err = leases2.Update(ctx, l, metav1.UpdateOptions{})
		must(t, "renew", err)
		if !l.Spec.RenewTime.Time.Equal(now.Add(10 * time.Second)) {
			t.Errorf("renewTime = %v", l.Spec.RenewTime)
		}
		_, err = leases2.Patch(ctx, "node-2", types.MergePatchType, []byte(`{"spec":{"renewTime":"2025-01-01T00:00:20.000000Z"}}`), metav1.PatchOptions{})
		must(t, "renew by patch", err)
	})

	t.Run("node-2 cannot touch node-1's Lease", func(t *testing.T) {
		l, err := c.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "node-1", metav1.GetOptions{})
		must(t, "admin get", err)
		l.Spec.HolderIdentity = ptr.To("node-2")
		_, err = leases2.Update(ctx, l, metav1.UpdateOptions{})
		expectForbidden(t, "update node-1 lease", err, `leases.coordination.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot update resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`)
		err = leases2.Delete(ctx, "node-1", metav1.DeleteOptions{})
		expectForbidden(t, "delete node-1 lease", err, `leases.coordination.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot delete resource "leases" in API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node lease with the same name as the requesting node`)
		_, err = leases2.Create(ctx, nodeLease("node-3", now), metav1.CreateOptions{})
		expectForbidden(t, "create node-3 lease", err, `leases.coordination.k8s.io "node-3" is forbidden: can only access node lease with the same name as the requesting node`)
		_, err = c.node2.CoordinationV1().Leases("kube-system").Create(ctx, nodeLease("node-2", now), metav1.CreateOptions{})
		expectForbidden(t, "lease in kube-system", err, `leases.coordination.k8s.io is forbidden: User "system:node:node-2" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "kube-system": can only access leases in the "kube-node-lease" system namespace`)
	})

	// Pods bound by the admin, as the scheduler would.
	for _, p := range []struct{ name, node string }{{"on-1", "node-1"}, {"on-2", "node-2"}, {"on-2b", "node-2"}} {
		_, err := c.admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name},
			Spec:       corev1.PodSpec{NodeName: p.node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		must(t, "create pod "+p.name, err)
	}
	pods2 := c.node2.CoreV1().Pods("default")

	t.Run("node-2 reads only its own pods", func(t *testing.T) {
		_, err := pods2.Get(ctx, "on-2", metav1.GetOptions{})
		must(t, "get on-2", err)
		_, err = pods2.Get(ctx, "on-1", metav1.GetOptions{})
		expectForbidden(t, "get on-1", err, `pods "on-1" is forbidden: User "system:node:node-2" cannot get resource "pods" in API group "" in the namespace "default": no relationship found between node 'node-2' and this object`)
		list, err := c.node2.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-2"})
		must(t, "list own pods", err)
		if len(list.Items) != 2 {
			t.Errorf("own pods: %d, want 2", len(list.Items))
		}
		_, err = c.node2.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		expectForbidden(t, "list all pods", err, `pods is forbidden: User "system:node:node-2" cannot list resource "pods" in API group "" at the cluster scope: can only list/watch pods with spec.nodeName field selector`)
	})

	t.Run("node-2 writes status of its own pods only", func(t *testing.T) {
		p, err := pods2.Get(ctx, "on-2", metav1.GetOptions{})
		must(t, "get on-2", err)
		p.Status.Phase = corev1.PodRunning
		_, err = pods2.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		must(t, "update on-2 status", err)

		other, err := c.admin.CoreV1().Pods("default").Get(ctx, "on-1", metav1.GetOptions{})
		must(t, "admin get on-1", err)
		other.Status.Phase = corev1.PodFailed
		_, err = pods2.UpdateStatus(ctx, other, metav1.UpdateOptions{})
		expectForbidden(t, "update on-1 status", err, `pods "on-1" is forbidden: node "node-2" can only update pod status for pods with spec.nodeName set to itself`)
	})

	t.Run("node-2 cannot create ordinary pods or delete others' pods", func(t *testing.T) {
		_, err := pods2.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sneaky"},
			Spec:       corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		expectForbidden(t, "create pod", err, `pods "sneaky" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "node-2" can only create mirror pods`)

		err = pods2.Delete(ctx, "on-1", metav1.DeleteOptions{})
		expectForbidden(t, "delete on-1", err, `pods "on-1" is forbidden: node "node-2" can only delete pods with spec.nodeName set to itself`)
		err = pods2.Delete(ctx, "on-2b", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		must(t, "delete on-2b", err)
		err = pods2.Delete(ctx, "ghost", metav1.DeleteOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("delete missing pod: got %v, want 404", err)
		}
	})

	t.Run("node-2 creates its mirror pod", func(t *testing.T) {
		n, err := c.node2.CoreV1().Nodes().Get(ctx, "node-2", metav1.GetOptions{})
		must(t, "get node-2", err)
		_, err = pods2.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:            "static-node-2",
				Annotations:     map[string]string{corev1.MirrorPodAnnotationKey: "hash"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-2", UID: n.UID, Controller: ptr.To(true)}},
			},
			Spec: corev1.PodSpec{NodeName: "node-2", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		must(t, "create mirror pod", err)
	})

	t.Run("node-2 records events", func(t *testing.T) {
		_, err := c.node2.CoreV1().Events("default").Create(ctx, &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "node-2.ready"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "node-2", UID: types.UID("node-2")},
			Reason:         "NodeReady", Message: "Node node-2 status is now: NodeReady", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "kubelet", Host: "node-2"},
		}, metav1.CreateOptions{})
		must(t, "create event", err)
		_, err = c.node2.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("list events: got %v, want 403", err)
		}
	})

	t.Run("others are unaffected", func(t *testing.T) {
		_, err := c.admin.CoreV1().Nodes().Patch(ctx, "node-1", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"labels":{"node-role.kubernetes.io/worker":""}}}`), metav1.PatchOptions{})
		must(t, "admin labels node-1 worker", err)
	})
}
