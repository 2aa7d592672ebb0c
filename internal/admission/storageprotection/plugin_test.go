package storageprotection

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/apiserver"
	"knode/internal/registry"
)

var (
	claimKind  = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "persistentvolumeclaims", Namespaced: true, HasStatus: true}
	volumeKind = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "persistentvolumes", HasStatus: true}
)

func claim(finalizers ...string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data", Finalizers: finalizers}}
}

func persistentVolume(finalizers ...string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-data", Finalizers: finalizers}}
}

func finalizers(obj runtime.Object) []string {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim:
		return o.Finalizers
	case *corev1.PersistentVolume:
		return o.Finalizers
	}
	return nil
}

func TestAdmit(t *testing.T) {
	const (
		pvc = "kubernetes.io/pvc-protection"
		pv  = "kubernetes.io/pv-protection"
	)
	tests := []struct {
		name string
		a    apiserver.AdmissionAttributes
		want []string
	}{
		{name: "new claim",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim()}, want: []string{pvc}},
		{name: "new claim with other finalizers",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim("example.com/keep")}, want: []string{"example.com/keep", pvc}},
		{name: "new claim already protected",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(pvc, "example.com/keep")}, want: []string{pvc, "example.com/keep"}},
		{name: "new claim with the volume's finalizer",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(pv)}, want: []string{pv, pvc}},
		{name: "new volume",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: volumeKind, Object: persistentVolume()}, want: []string{pv}},
		{name: "new volume with the provisioner's finalizer",
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: volumeKind, Object: persistentVolume("external-provisioner.volume.kubernetes.io/finalizer")},
			want: []string{"external-provisioner.volume.kubernetes.io/finalizer", pv}},
		{name: "new volume already protected",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: volumeKind, Object: persistentVolume(pv)}, want: []string{pv}},
		{name: "claim update: the finalizer stays removed",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Namespace: "default", Name: "data", Object: claim(), Old: claim(pvc)}},
		{name: "volume update",
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: volumeKind, Name: "pv-data", Object: persistentVolume(), Old: persistentVolume(pv)}},
		{name: "claim status",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Object: claim()}},
		{name: "same resource in another group",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Object: persistentVolume(),
				Kind: &registry.Kind{GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1"}, Resource: "persistentvolumes"}}},
		{name: "claim resource with a volume object",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Object: persistentVolume()}},
		{name: "no kind",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Object: claim()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := New().Admit(context.Background(), tc.a); err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if diff := cmp.Diff(tc.want, finalizers(tc.a.Object.(runtime.Object))); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmitDeleteHasNoObject(t *testing.T) {
	if err := New().Admit(context.Background(), apiserver.AdmissionAttributes{Operation: "DELETE", Kind: claimKind, Name: "data", Old: claim()}); err != nil {
		t.Errorf("got %v, want nil", err)
	}
}
