package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// TestClientGoProtobuf uses client-go's typed clients as they come: for
// built-in kinds they send request bodies as protobuf
// (application/vnd.kubernetes.protobuf) and accept protobuf or JSON. kubectl
// 1.32 and later do the same for `create namespace` and other typed calls.
// The test pins that wire format whatever KNODE_E2E_CLIENT_CONTENT_TYPE says.
func TestClientGoProtobuf(t *testing.T) {
	s := startServer(t, serverOptions{})
	cfg := s.RestConfig(t)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nodes := cs.CoreV1().Nodes()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created, err := nodes.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "pb-node", Labels: map[string]string{"e2e": "pb"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.7.0/24"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create (protobuf body): %v", err)
	}
	if created.Spec.PodCIDR != "10.244.7.0/24" || created.Labels["e2e"] != "pb" || created.UID == "" {
		t.Errorf("created node = %+v, want the sent labels and podCIDR and a UID", created.ObjectMeta)
	}

	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: "e2e=pb"})
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "pb-node" {
		t.Fatalf("list e2e=pb = %d items, want pb-node alone", len(list.Items))
	}
	w, err := nodes.Watch(ctx, metav1.ListOptions{LabelSelector: "e2e=pb", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	created.Labels["e2e-step"] = "updated"
	updated, err := nodes.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update (protobuf body): %v", err)
	}
	if updated.Labels["e2e-step"] != "updated" || updated.ResourceVersion == created.ResourceVersion {
		t.Errorf("updated node labels %v resourceVersion %s (was %s), want the new label and a new version",
			updated.Labels, updated.ResourceVersion, created.ResourceVersion)
	}
	select {
	case ev := <-w.ResultChan():
		n, ok := ev.Object.(*corev1.Node)
		if ev.Type != watch.Modified || !ok || n.Labels["e2e-step"] != "updated" {
			t.Errorf("watch event %s %T, want MODIFIED with the new label", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event for the update")
	}

	// A stale resourceVersion is a conflict.
	if _, err := nodes.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("update with a stale resourceVersion: err %v, want 409 Conflict", err)
	}

	// DeleteOptions travel as a protobuf body too.
	uid := updated.UID
	if err := nodes.Delete(ctx, "pb-node", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatalf("delete (protobuf DeleteOptions): %v", err)
	}
	if _, err := nodes.Get(ctx, "pb-node", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: err %v, want 404 NotFound", err)
	}

	// kubectl 1.32+ creates namespaces this way.
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pb-ns"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create namespace (protobuf body): %v", err)
	}
}
