package defaultstorageclass

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"knode/internal/apiserver"
	"knode/internal/registry"
)

var (
	claimKind  = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "persistentvolumeclaims", Namespaced: true, HasStatus: true}
	volumeKind = &registry.Kind{GroupVersion: schema.GroupVersion{Version: "v1"}, Resource: "persistentvolumes", HasStatus: true}
	base       = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

// class is a StorageClass created at base+age; annotations come in pairs.
func class(name string, age time.Duration, annotations ...string) storagev1.StorageClass {
	sc := storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(age))},
		Provisioner: "hostpath.csi.knode.io",
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		if sc.Annotations == nil {
			sc.Annotations = map[string]string{}
		}
		sc.Annotations[annotations[i]] = annotations[i+1]
	}
	return sc
}

const (
	isDefault     = "storageclass.kubernetes.io/is-default-class"
	isDefaultBeta = "storageclass.beta.kubernetes.io/is-default-class"
)

func TestPick(t *testing.T) {
	tests := []struct {
		name    string
		classes []storagev1.StorageClass
		want    string // "" for none
	}{
		{name: "no classes"},
		{name: "no default", classes: []storagev1.StorageClass{class("a", 0), class("b", 0, isDefault, "false")}},
		{name: "value must be exactly true", classes: []storagev1.StorageClass{class("a", 0, isDefault, "True"), class("b", 0, isDefault, "yes")}},
		{name: "one default", classes: []storagev1.StorageClass{class("a", time.Hour), class("b", 0, isDefault, "true")}, want: "b"},
		{name: "beta annotation", classes: []storagev1.StorageClass{class("a", 0), class("b", 0, isDefaultBeta, "true")}, want: "b"},
		{name: "newest default wins", classes: []storagev1.StorageClass{
			class("old", 0, isDefault, "true"), class("new", time.Second, isDefault, "true"), class("newest-not-default", time.Hour),
		}, want: "new"},
		{name: "newest wins over name order", classes: []storagev1.StorageClass{
			class("z", time.Minute, isDefault, "true"), class("a", 0, isDefault, "true"),
		}, want: "z"},
		{name: "a nanosecond counts", classes: []storagev1.StorageClass{
			class("a", 0, isDefault, "true"), class("b", time.Nanosecond, isDefault, "true"),
		}, want: "b"},
		{name: "same time: first by name", classes: []storagev1.StorageClass{
			class("c", time.Minute, isDefault, "true"), class("b", time.Minute, isDefaultBeta, "true"), class("a", 0, isDefault, "true"),
		}, want: "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if def := Pick(tc.classes); def != nil {
				got = def.Name
			}
			if got != tc.want {
				t.Errorf("Pick = %q, want %q", got, tc.want)
			}
		})
	}
}

func claim(change func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"}}
	if change != nil {
		change(c)
	}
	return c
}

func TestAdmit(t *testing.T) {
	classes := []storagev1.StorageClass{class("standard", 0, isDefault, "true"), class("fast", time.Hour)}
	tests := []struct {
		name    string
		classes []storagev1.StorageClass
		listErr error
		a       apiserver.AdmissionAttributes
		// want is the claim's spec.storageClassName afterwards (nil: unset).
		want *string
		// wantErr is the refusal's outcome ("" for none).
		wantErr string
		// listed: whether the classes were read.
		listed bool
	}{
		{name: "claim without a class gets the default", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(nil)}, want: ptr.To("standard"), listed: true},
		{name: "no default leaves it unset", classes: []storagev1.StorageClass{class("fast", 0)},
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(nil)}, listed: true},
		{name: "no classes at all",
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(nil)}, listed: true},
		{name: "named class is kept", classes: classes,
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("fast") })},
			want: ptr.To("fast")},
		{name: "empty class asks for none", classes: classes,
			a:    apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") })},
			want: ptr.To("")},
		{name: "beta annotation names a class", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "fast"}
			})}},
		{name: "empty beta annotation names a class too", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": ""}
			})}},
		{name: "update is not defaulted", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "UPDATE", Kind: claimKind, Namespace: "default", Name: "data", Object: claim(nil), Old: claim(nil)}},
		{name: "status is not defaulted", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Subresource: "status", Namespace: "default", Name: "data", Object: claim(nil)}},
		{name: "other resource", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: volumeKind, Object: claim(nil)}},
		{name: "same resource name in another group", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Namespace: "default", Object: claim(nil),
				Kind: &registry.Kind{GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1"}, Resource: "persistentvolumeclaims"}}},
		{name: "no kind", classes: classes,
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Object: claim(nil)}},
		{name: "list fails", listErr: errors.New("store down"),
			a:       apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(nil)},
			wantErr: `403 persistentvolumeclaims "data" is forbidden: store down`, listed: true},
		{name: "list fails, generated name", listErr: errors.New("store down"),
			a: apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Namespace: "default", Object: claim(func(c *corev1.PersistentVolumeClaim) {
				c.Name, c.GenerateName = "", "data-"
			})},
			wantErr: `403 persistentvolumeclaims "data-" is forbidden: store down`, listed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			listed := false
			p, err := New(Config{List: func(context.Context) ([]storagev1.StorageClass, error) {
				listed = true
				return tc.classes, tc.listErr
			}})
			if err != nil {
				t.Fatal(err)
			}
			got := outcome(p.Admit(context.Background(), tc.a))
			if got != tc.wantErr {
				t.Errorf("outcome %q, want %q", got, tc.wantErr)
			}
			if listed != tc.listed {
				t.Errorf("listed = %v, want %v", listed, tc.listed)
			}
			c := tc.a.Object.(*corev1.PersistentVolumeClaim)
			if diff := cmp.Diff(tc.want, c.Spec.StorageClassName); diff != "" {
				t.Errorf("storageClassName (-want +got):\n%s", diff)
			}
		})
	}
}

// An object that is not a claim passes untouched.
func TestAdmitWrongType(t *testing.T) {
	p, err := New(Config{List: func(context.Context) ([]storagev1.StorageClass, error) {
		return []storagev1.StorageClass{class("standard", 0, isDefault, "true")}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Admit(context.Background(), apiserver.AdmissionAttributes{Operation: "CREATE", Kind: claimKind, Object: &corev1.Pod{}}); err != nil {
		t.Errorf("got %v, want nil", err)
	}
}

func TestNewRequiresList(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New without List: no error")
	}
}

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
