package attachdetach_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// waitFor reads w until ok holds for an event's object. The real-time
// limit only bounds a failing test.
func waitFor(t *testing.T, w watch.Interface, what string, ok func(watch.Event, runtime.Object) bool) {
	t.Helper()
	limit := time.After(10 * time.Second)
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatalf("watch closed before %s", what)
			}
			if ok(ev, ev.Object) {
				return
			}
		case <-limit:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Run follows its informers: it attaches when the pod appears, reports
// the volume once attached, and detaches when the pod is gone and the node
// no longer uses it.
func TestRunFollowsInformers(t *testing.T) {
	e := newEnv(t, nil)
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
	vas, err := e.client.StorageV1().VolumeAttachments().Watch(e.ctx, metav1.ListOptions{})
	e.must("watching volumeattachments", err)
	defer vas.Stop()
	nodes, err := e.client.CoreV1().Nodes().Watch(e.ctx, metav1.ListOptions{})
	e.must("watching nodes", err)
	defer nodes.Stop()

	e.createNode("n1", true)
	e.createVolume()
	e.createPod("p1", "n1")
	waitFor(t, vas, "the attachment", func(ev watch.Event, obj runtime.Object) bool {
		va, ok := obj.(*storagev1.VolumeAttachment)
		return ok && ev.Type == watch.Added && va.Name == vaName("n1")
	})

	e.markAttached("n1")
	waitFor(t, nodes, "volumesAttached", func(_ watch.Event, obj runtime.Object) bool {
		n, ok := obj.(*corev1.Node)
		return ok && len(n.Status.VolumesAttached) == 1 && n.Status.VolumesAttached[0].Name == volName
	})

	e.removePod("p1")
	waitFor(t, vas, "the detach", func(ev watch.Event, obj runtime.Object) bool {
		va, ok := obj.(*storagev1.VolumeAttachment)
		return ok && ev.Type == watch.Deleted && va.Name == vaName("n1")
	})
	if got := e.attached("n1"); len(got) != 0 {
		t.Errorf("volumesAttached after the detach = %v, want none", got)
	}
	e.wantForced(0, 0)
}
