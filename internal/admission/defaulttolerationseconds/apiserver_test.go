package defaulttolerationseconds_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/apiserver"
	"knode/internal/apitest"
)

// Through the real API server, a created pod comes back with the default
// tolerations, and an update that keeps them passes validation.
func TestPodsGetDefaultTolerationsThroughTheAPI(t *testing.T) {
	client := apitest.Start(t, apitest.Options{
		Admission: []apiserver.Admitter{defaulttolerationseconds.New(defaulttolerationseconds.Config{UnreachableTolerationSeconds: ptr.To[int64](120)})},
	}).Admin
	ctx := context.Background()

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](120)},
	}
	if diff := cmp.Diff(want, created.Spec.Tolerations); diff != "" {
		t.Errorf("created tolerations (-want +got):\n%s", diff)
	}

	created.Labels = map[string]string{"app": "web"}
	updated, err := client.CoreV1().Pods("default").Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update keeping the defaults: %v", err)
	}
	if diff := cmp.Diff(want, updated.Spec.Tolerations); diff != "" {
		t.Errorf("updated tolerations (-want +got):\n%s", diff)
	}
}
