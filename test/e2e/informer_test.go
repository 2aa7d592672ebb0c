package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// TestInformer runs a client-go shared informer on nodes against the real
// binary and checks it sees add, update, update, delete in order.
func TestInformer(t *testing.T) {
	s := startServer(t, serverOptions{})
	cs := s.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A node that exists before the informer starts arrives in the initial
	// list, as an add.
	pre := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "informer-pre", Labels: map[string]string{"e2e-step": "pre"}}}
	if _, err := cs.CoreV1().Nodes().Create(ctx, pre, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	events := make(chan string, 100)
	describe := func(verb string, obj interface{}) string {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
			verb += "(tombstone)"
		}
		n, ok := obj.(*corev1.Node)
		if !ok {
			return fmt.Sprintf("%s %T", verb, obj)
		}
		return fmt.Sprintf("%s %s step=%s", verb, n.Name, n.Labels["e2e-step"])
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Core().V1().Nodes().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { events <- describe("add", obj) },
		UpdateFunc: func(_, obj interface{}) { events <- describe("update", obj) },
		DeleteFunc: func(obj interface{}) { events <- describe("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("the node informer never synced")
	}

	var got []string
	// await collects events until n have arrived.
	await := func(n int) {
		t.Helper()
		for len(got) < n {
			select {
			case e := <-events:
				got = append(got, e)
			case <-ctx.Done():
				t.Fatalf("informer saw only %q, want %d events", got, n)
			}
		}
	}
	await(1)

	nodes := cs.CoreV1().Nodes()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "informer-node", Labels: map[string]string{"e2e-step": "created"}}}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(2)
	for _, step := range []string{"one", "two"} {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"e2e-step":%q}}}`, step)
		if _, err := nodes.Patch(ctx, "informer-node", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes.Delete(ctx, "informer-node", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(5)

	want := []string{
		"add informer-pre step=pre",
		"add informer-node step=created",
		"update informer-node step=one",
		"update informer-node step=two",
		"delete informer-node step=two",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("informer events (-want +got):\n%s", diff)
	}

	// Nothing else arrives: no duplicate or stray events.
	select {
	case e := <-events:
		t.Errorf("unexpected extra informer event %q", e)
	case <-time.After(500 * time.Millisecond):
	}
	if _, exists, err := informer.GetStore().GetByKey("informer-node"); err != nil || exists {
		t.Errorf("informer store still has informer-node (exists=%v, err=%v)", exists, err)
	}
}
