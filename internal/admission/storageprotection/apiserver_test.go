package storageprotection_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/admission/storageprotection"
	"knode/internal/apiserver"
	"knode/internal/apitest"
)

func TestFinalizersThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	s := apitest.Start(t, apitest.Options{Admission: []apiserver.Admitter{storageprotection.New()}})

	claim, err := s.Admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kubernetes.io/pvc-protection"}, claim.Finalizers); diff != "" {
		t.Errorf("claim finalizers (-want +got):\n%s", diff)
	}

	pv, err := s.Admin.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-data", Finalizers: []string{"kubernetes.io/pv-protection", "example.com/keep"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "hostpath.csi.knode.io", VolumeHandle: "h"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"kubernetes.io/pv-protection", "example.com/keep"}, pv.Finalizers); diff != "" {
		t.Errorf("volume finalizers (-want +got):\n%s", diff)
	}

	// Removing the finalizer (as the protection controller does) sticks.
	claim.Finalizers = nil
	claim, err = s.Admin.CoreV1().PersistentVolumeClaims("default").Update(ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.Finalizers) != 0 {
		t.Errorf("finalizers after removal: %v", claim.Finalizers)
	}
}
