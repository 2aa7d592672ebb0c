package tainteviction_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// waitDeleted reads the pod watch until name carries a deletionTimestamp.
// The real-time limit only bounds a failing test.
func waitDeleted(t *testing.T, w watch.Interface, name string) {
	t.Helper()
	limit := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before %s was deleted", name)
			}
			if p, isPod := ev.Object.(*corev1.Pod); isPod && p.Name == name && p.DeletionTimestamp != nil {
				return
			}
		case <-limit:
			t.Fatalf("%s not deleted", name)
		}
	}
}

// Run reacts to informer changes at once and to due deletions when the
// clock reaches them.
func TestRunFollowsInformersAndClock(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		e.c.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	w, err := e.client.CoreV1().Pods("default").Watch(e.ctx, metav1.ListOptions{})
	e.must("watch", err)
	defer w.Stop()

	e.createNode("n1", corev1.Taint{Key: "example.com/maintenance", Effect: corev1.TaintEffectNoExecute})
	e.createPod("plain", "n1")
	waitDeleted(t, w, "plain")

	e.createNode("n2", unreachableTaint(t0))
	e.createPod("quick", "n2", unreachableToleration(ptr.To[int64](30)))
	// Wait, in real time, until Run has scheduled the deletion.
	err = wait.PollUntilContextTimeout(e.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(e.c.Pending()) == 1, nil
	})
	e.must("waiting for the scheduled deletion", err)
	if got := e.deleted("quick"); len(got) != 0 {
		t.Fatal("quick deleted before its time")
	}
	e.clock.Step(30 * time.Second)
	waitDeleted(t, w, "quick")
	// The counter moves just after the DELETE returns.
	err = wait.PollUntilContextTimeout(e.ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return e.deletions() == 2, nil
	})
	e.must("waiting for the deletions metric to reach 2", err)
}
