package apiserver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// The server shares the objects it remembers between the writes that
// made them, the updates that start from them, reads and the watch cache.
// Renewals, heartbeat patches, reads and watches of the same objects run
// side by side here (run with -race to see that nobody writes a shared
// object); every write must land, and every watcher see the last one.
func TestWritesReadsAndWatchesShareObjects(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := metav1.NewTime(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	node, err := f.client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: at, LastTransitionTime: at},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leases := f.client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	renew := metav1.NewMicroTime(at.Time)
	lease, err := leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &renew},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaseWatch, err := leases.Watch(ctx, metav1.ListOptions{ResourceVersion: lease.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer leaseWatch.Stop()
	nodeWatch, err := f.client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: node.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer nodeWatch.Stop()

	const rounds = 60
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	var lastLease, lastNode string
	wg.Add(3)
	go func() { // the lease's holder renews it
		defer wg.Done()
		l, err := lease, error(nil)
		for i := 1; i <= rounds; i++ {
			t := metav1.NewMicroTime(at.Add(time.Duration(i) * time.Second))
			l.Spec.RenewTime = &t
			if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
				errs <- fmt.Errorf("renewal %d: %w", i, err)
				return
			}
		}
		lastLease = l.ResourceVersion
	}()
	go func() { // the node's agent posts heartbeats
		defer wg.Done()
		var n *corev1.Node
		var err error
		for i := 1; i <= rounds; i++ {
			beat := at.Add(time.Duration(i) * time.Second).UTC().Format(time.RFC3339)
			patch := fmt.Sprintf(`{"status":{"$setElementOrder/conditions":[{"type":"Ready"}],"conditions":[{"lastHeartbeatTime":%q,"type":"Ready"}]}}`, beat)
			if n, err = f.client.CoreV1().Nodes().Patch(ctx, "n1", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				errs <- fmt.Errorf("heartbeat %d: %w", i, err)
				return
			}
		}
		lastNode = n.ResourceVersion
	}()
	go func() { // readers, from storage and from the watch cache
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			if _, err := leases.Get(ctx, "n1", metav1.GetOptions{}); err != nil {
				errs <- err
				return
			}
			if _, err := f.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{ResourceVersion: "0"}); err != nil {
				errs <- err
				return
			}
			if _, err := f.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	got, err := leases.Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Add(rounds * time.Second); !got.Spec.RenewTime.Time.Equal(want) || got.ResourceVersion != lastLease {
		t.Errorf("lease renewed at %v (resourceVersion %s), want %v (%s)", got.Spec.RenewTime, got.ResourceVersion, want, lastLease)
	}
	n, err := f.client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Add(rounds * time.Second); !n.Status.Conditions[0].LastHeartbeatTime.Time.Equal(want) || n.ResourceVersion != lastNode {
		t.Errorf("node heartbeat at %v (resourceVersion %s), want %v (%s)", n.Status.Conditions[0].LastHeartbeatTime, n.ResourceVersion, want, lastNode)
	}
	for _, w := range []struct {
		name string
		w    watch.Interface
		last string
	}{{"lease", leaseWatch, lastLease}, {"node", nodeWatch, lastNode}} {
		seen := 0
		for ev := range w.w.ResultChan() {
			if ev.Type != watch.Modified {
				t.Fatalf("%s watch: %s event", w.name, ev.Type)
			}
			seen++
			if rv := ev.Object.(metav1.Object).GetResourceVersion(); rv == w.last {
				break
			}
		}
		if seen != rounds {
			t.Errorf("%s watch saw %d changes, want %d", w.name, seen, rounds)
		}
	}
}
