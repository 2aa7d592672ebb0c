package ownership_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"knode/internal/controller/ownership"
)

var rsKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

func owner() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "rs-uid"}}
}

func pod(name, ns string, lbls map[string]string, refs ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls, OwnerReferences: refs}}
}

func ref(uid string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: types.UID(uid), Controller: ptr.To(controller)}
}

func TestRelate(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	web := map[string]string{"app": "web"}
	other := map[string]string{"app": "db"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want ownership.Relation
	}{
		{"controlled and selected", pod("a", "default", web, ref("rs-uid", true)), ownership.Owned},
		{"controlled, selector no longer matches", pod("a", "default", other, ref("rs-uid", true)), ownership.Stray},
		{"orphan the selector matches", pod("a", "default", web), ownership.Orphan},
		{"orphan the selector does not match", pod("a", "default", other), ownership.Unrelated},
		{"another controller's", pod("a", "default", web, ref("other-uid", true)), ownership.Unrelated},
		{"non-controller reference only is an orphan", pod("a", "default", web, ref("rs-uid", false)), ownership.Orphan},
		{"another namespace", pod("a", "kube-system", web, ref("rs-uid", true)), ownership.Unrelated},
		{"another namespace, orphan", pod("a", "kube-system", web), ownership.Unrelated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ownership.Relate(owner(), sel, tt.pod); got != tt.want {
				t.Errorf("Relate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPatches(t *testing.T) {
	tests := []struct {
		name  string
		patch []byte
		want  string
	}{
		{
			name:  "adopt",
			patch: ownership.AdoptPatch(owner(), rsKind),
			want:  `{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}]}}`,
		},
		{
			name:  "release",
			patch: ownership.ReleasePatch("rs-uid"),
			want:  `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"rs-uid"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, string(tt.patch)); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSettle adopts and releases through a fake clientset: an adopted pod
// replaces its original in all, a pod already gone fails adoption but not
// release.
func TestSettle(t *testing.T) {
	web := map[string]string{"app": "web"}
	orphan := pod("orphan", "default", web)
	stray := pod("stray", "default", map[string]string{"app": "db"}, ref("rs-uid", true))
	gone := pod("gone", "default", web)
	cs := fake.NewClientset(orphan.DeepCopy(), stray.DeepCopy())
	all := []*corev1.Pod{orphan, stray, gone}

	adopted, errs := ownership.Settle(context.Background(), cs.CoreV1(), owner(), rsKind,
		[]*corev1.Pod{orphan, gone}, []*corev1.Pod{stray, gone}, all)

	if len(adopted) != 1 || adopted[0].Name != "orphan" {
		t.Fatalf("adopted = %v, want only orphan", adopted)
	}
	wantRefs := []metav1.OwnerReference{*metav1.NewControllerRef(owner(), rsKind)}
	if diff := cmp.Diff(wantRefs, adopted[0].OwnerReferences); diff != "" {
		t.Errorf("adopted pod's references (-want +got):\n%s", diff)
	}
	if all[0] != adopted[0] || all[1] != stray || all[2] != gone {
		t.Errorf("all = %v, want the adopted pod in place of orphan and the rest unchanged", all)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "adopting pod default/gone") {
		t.Errorf("errs = %v, want one error adopting default/gone", errs)
	}
	got, err := cs.CoreV1().Pods("default").Get(context.Background(), "stray", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 {
		t.Errorf("stray's references after release = %v, want none", got.OwnerReferences)
	}
}
