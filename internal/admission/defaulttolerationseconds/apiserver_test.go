package defaulttolerationseconds_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/server"
	"knode/internal/storage/memory"
	"knode/internal/version"
)

// Through the real API server, a created pod comes back with the default
// tolerations, and an update that keeps them passes validation.
func TestPodsGetDefaultTolerationsThroughTheAPI(t *testing.T) {
	tf, err := auth.ParseTokenFile(strings.NewReader("admintoken,admin,1,\"system:masters\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.New(apiserver.Config{
		Storage:       memory.New(memory.Config{}),
		Kinds:         server.Kinds(),
		Authenticator: auth.UnionAuthenticator{tf},
		Admission:     []apiserver.Admitter{defaulttolerationseconds.New(defaulttolerationseconds.Config{UnreachableTolerationSeconds: ptr.To[int64](120)})},
		Version:       version.Info(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := api.EnsureNamespaces(ctx); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api)
	t.Cleanup(ts.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL, BearerToken: "admintoken"})
	if err != nil {
		t.Fatal(err)
	}

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
