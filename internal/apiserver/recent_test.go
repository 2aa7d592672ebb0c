package apiserver_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"knode/internal/apitest"
	"knode/internal/storage"
)

// clientFor serves store through a second, independent API server.
func clientFor(t *testing.T, store storage.Interface) kubernetes.Interface {
	t.Helper()
	return apitest.Start(t, apitest.Options{Store: store}).Admin
}

// Two API servers share one store; each remembers objects it wrote. Writes
// through one must never be lost or misjudged by the other.
func TestServersSharingAStore(t *testing.T) {
	f := newFixture(t)
	a := f.client.CoreV1().Nodes()
	b := clientFor(t, f.store).CoreV1().Nodes()
	ctx := context.Background()
	n, err := a.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "shared", Labels: map[string]string{"v": "1"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	staleAtA := n.DeepCopy()
	// B changes the node behind A's back.
	if _, err := b.Patch(ctx, "shared", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// An update through A naming the version A last wrote is a conflict.
	staleAtA.Labels["v"] = "3"
	if _, err := a.Update(ctx, staleAtA, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with version only A remembers: %v, want Conflict", err)
	}
	// A patch through A that sets what A remembers is not a no-op: the
	// stored value differs, so it must be written.
	got, err := a.Patch(ctx, "shared", types.MergePatchType, []byte(`{"metadata":{"labels":{"v":"1"}}}`), metav1.PatchOptions{})
	if err != nil || got.Labels["v"] != "1" {
		t.Fatalf("patch back to A's remembered value: %v %v", got.Labels, err)
	}
	stored, err := b.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil || stored.Labels["v"] != "1" || stored.ResourceVersion != got.ResourceVersion {
		t.Fatalf("stored after A's patch: %v rv %s (A answered rv %s), %v", stored.Labels, stored.ResourceVersion, got.ResourceVersion, err)
	}
	// An unconditional patch through A keeps B's other changes.
	if _, err := b.Patch(ctx, "shared", types.MergePatchType, []byte(`{"metadata":{"labels":{"fromB":"yes"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = a.Patch(ctx, "shared", types.MergePatchType, []byte(`{"metadata":{"labels":{"fromA":"yes"}}}`), metav1.PatchOptions{})
	if err != nil || got.Labels["fromB"] != "yes" || got.Labels["fromA"] != "yes" {
		t.Fatalf("patch through A lost B's label: %v %v", got.Labels, err)
	}
	// B deletes; A's remembered copy must not bring it back.
	if err := b.Delete(ctx, "shared", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Patch(ctx, "shared", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("patch of a node deleted through B: %v, want NotFound", err)
	}
}
