package apiserver_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/apitest"
)

// An update completes a deletion only when it removes the last finalizer
// of an object whose grace period is over; a pod still in its grace period
// survives its status updates until its agent deletes it.
func TestDeleteDuringUpdate(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")

	held := newPod("held", "")
	held.Finalizers = []string{"example.com/hold"}
	if _, err := pods.Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "held", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("pod with a finalizer after delete: %v, want it terminating", err)
	}
	if _, err := pods.Patch(ctx, "held", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod after its last finalizer went: %v, want NotFound", err)
	}

	graceful, err := pods.Create(ctx, newPod("graceful", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	graceful.Status.Phase = corev1.PodRunning
	if graceful, err = pods.UpdateStatus(ctx, graceful, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "graceful", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err = pods.Get(ctx, "graceful", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodSucceeded
	if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err = pods.Get(ctx, "graceful", metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("terminating pod after its final status: %v %v, want it kept with phase Succeeded", p, err)
	}
}
