package namespace_test

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"knode/internal/apitest"
	"knode/internal/controller/namespace"
)

func setup(t *testing.T) (*rest.Config, kubernetes.Interface) {
	t.Helper()
	s := apitest.Start(t, apitest.Options{})
	return s.AdminConfig, s.Admin
}

func TestSyncEmptiesAndRemovesDeletedNamespace(t *testing.T) {
	cfg, client := setup(t)
	ctx := context.Background()
	for _, ns := range []string{"team", "other"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := namespace.New(namespace.Config{Rest: cfg})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is terminating: a pass changes nothing.
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("team").Get(ctx, "l", metav1.GetOptions{}); err != nil {
		t.Fatalf("lease in a live namespace: %v", err)
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoordinationV1().Leases("team").Get(ctx, "l", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease in the deleted namespace: %v, want NotFound", err)
	}
	if _, err := client.CoreV1().Pods("team").Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod in the deleted namespace: %v, want NotFound", err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deleted namespace still there: %v", err)
	}
	// The other namespace keeps its contents.
	if _, err := client.CoordinationV1().Leases("other").Get(ctx, "l", metav1.GetOptions{}); err != nil {
		t.Errorf("lease in another namespace: %v", err)
	}
}

// A namespace whose pods wait for their agent stays Terminating until they
// are gone.
func TestSyncWaitsForGracefulPods(t *testing.T) {
	cfg, client := setup(t)
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bound := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := client.CoreV1().Pods("team").Create(ctx, bound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := namespace.New(namespace.Config{Rest: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, "team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ns, err := client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace with a terminating pod: %v %v, want Terminating", ns.Status.Phase, err)
	}
	p, err := client.CoreV1().Pods("team").Get(ctx, "bound", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("bound pod: %v, want terminating", err)
	}
	// The agent finishes the deletion; the next pass releases the namespace.
	if err := client.CoreV1().Pods("team").Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace after its last pod went: %v, want NotFound", err)
	}
}
