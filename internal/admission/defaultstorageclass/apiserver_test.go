package defaultstorageclass_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/admission/defaultstorageclass"
	"knode/internal/apiserver"
	"knode/internal/apitest"
)

// The plugin as knode server wires it: classes read from the server's
// own store.
func TestDefaultClassThroughAPIServer(t *testing.T) {
	ctx := context.Background()
	var s *apitest.Server
	classes := storagev1.SchemeGroupVersion.WithResource("storageclasses")
	plugin, err := defaultstorageclass.New(defaultstorageclass.Config{
		List: func(ctx context.Context) ([]storagev1.StorageClass, error) {
			objs, err := s.API.List(ctx, classes, "")
			if err != nil {
				return nil, err
			}
			out := make([]storagev1.StorageClass, 0, len(objs))
			for _, o := range objs {
				out = append(out, *o.(*storagev1.StorageClass))
			}
			return out, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s = apitest.Start(t, apitest.Options{Admission: []apiserver.Admitter{plugin}})
	pvcs := s.Admin.CoreV1().PersistentVolumeClaims("default")

	newClaim := func(name string, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				StorageClassName: class,
			},
		}
	}
	create := func(c *corev1.PersistentVolumeClaim) *string {
		t.Helper()
		got, err := pvcs.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create claim %s: %v", c.Name, err)
		}
		return got.Spec.StorageClassName
	}
	expectClass := func(what string, got *string, want *string) {
		t.Helper()
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("%s: storageClassName = %v, want %v", what, ptr.Deref(got, "<nil>"), ptr.Deref(want, "<nil>"))
		}
	}

	expectClass("no classes yet", create(newClaim("before", nil)), nil)

	_, err = s.Admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard", Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: "hostpath.csi.knode.io",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "hostpath.csi.knode.io",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	expectClass("claim without a class", create(newClaim("plain", nil)), ptr.To("standard"))
	expectClass("claim naming a class", create(newClaim("named", ptr.To("fast"))), ptr.To("fast"))
	expectClass("claim asking for no class", create(newClaim("none", ptr.To(""))), ptr.To(""))

	// An existing claim is not given a class by an update.
	before, err := pvcs.Get(ctx, "before", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before.Labels = map[string]string{"touched": "yes"}
	updated, err := pvcs.Update(ctx, before, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expectClass("updated claim", updated.Spec.StorageClassName, nil)
}
