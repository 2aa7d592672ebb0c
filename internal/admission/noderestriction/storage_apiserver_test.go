package noderestriction_test

import (
	"context"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/apitest"
)

func csiNode(name string) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: "hostpath.csi.knode.io", NodeID: name, TopologyKeys: []string{"topology.hostpath.csi/node"},
		}}},
	}
}

// A node writes only the CSINode named after itself, through the node
// authorizer and NodeRestriction together.
func TestCSINodeThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	s := apitest.Start(t, apitest.Options{
		Tokens: []string{
			node1Token + `,system:node:node-1,2,"system:nodes"`,
			node2Token + `,system:node:node-2,3,"system:nodes"`,
		},
		NodeRules: true,
	})
	node1 := s.Client(t, node1Token).StorageV1().CSINodes()
	node2 := s.Client(t, node2Token).StorageV1().CSINodes()

	_, err := node1.Create(ctx, csiNode("node-1"), metav1.CreateOptions{})
	must(t, "node-1 creates its CSINode", err)

	t.Run("node-2 creates, reads, updates and deletes its own", func(t *testing.T) {
		created, err := node2.Create(ctx, csiNode("node-2"), metav1.CreateOptions{})
		must(t, "create", err)
		got, err := node2.Get(ctx, "node-2", metav1.GetOptions{})
		must(t, "get", err)
		if got.UID != created.UID {
			t.Errorf("get returned uid %s, created %s", got.UID, created.UID)
		}
		got.Spec.Drivers = append(got.Spec.Drivers, storagev1.CSINodeDriver{Name: "other.csi.example.com", NodeID: "n2"})
		_, err = node2.Update(ctx, got, metav1.UpdateOptions{})
		must(t, "update", err)
		_, err = node2.Patch(ctx, "node-2", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
		must(t, "patch", err)
		must(t, "delete", node2.Delete(ctx, "node-2", metav1.DeleteOptions{}))
	})

	t.Run("node-2 cannot create node-1's", func(t *testing.T) {
		_, err := node2.Create(ctx, csiNode("node-3"), metav1.CreateOptions{})
		expectForbidden(t, "create node-3", err, `csinodes.storage.k8s.io "node-3" is forbidden: can only access CSINode with the same name as the requesting node`)
		if _, err := s.Admin.StorageV1().CSINodes().Get(ctx, "node-3", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("node-3's CSINode: got %v, want 404", err)
		}
	})

	t.Run("node-2 cannot touch node-1's", func(t *testing.T) {
		_, err := node2.Get(ctx, "node-1", metav1.GetOptions{})
		expectForbidden(t, "get node-1", err, `csinodes.storage.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot get resource "csinodes" in API group "storage.k8s.io" at the cluster scope: can only access CSINode with the same name as the requesting node`)
		_, err = node2.Patch(ctx, "node-1", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
		expectForbidden(t, "patch node-1", err, `csinodes.storage.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot patch resource "csinodes" in API group "storage.k8s.io" at the cluster scope: can only access CSINode with the same name as the requesting node`)
		err = node2.Delete(ctx, "node-1", metav1.DeleteOptions{})
		expectForbidden(t, "delete node-1", err, `csinodes.storage.k8s.io "node-1" is forbidden: User "system:node:node-2" cannot delete resource "csinodes" in API group "storage.k8s.io" at the cluster scope: can only access CSINode with the same name as the requesting node`)
		_, err = node2.List(ctx, metav1.ListOptions{})
		expectForbidden(t, "list", err, `csinodes.storage.k8s.io is forbidden: User "system:node:node-2" cannot list resource "csinodes" in API group "storage.k8s.io" at the cluster scope: can only get, create, update, patch, or delete a CSINode`)
		if _, err := s.Admin.StorageV1().CSINodes().Get(ctx, "node-1", metav1.GetOptions{}); err != nil {
			t.Errorf("node-1's CSINode: %v", err)
		}
	})
}
