package pods_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/pods"
)

// scriptedVolumes is a volume manager whose answers the test sets: the
// worker's side of the contract is what is under test here (the real
// manager has its own tests in agent/volumes).
type scriptedVolumes struct {
	ready, tornDown bool
	setups          int
	teardowns       []types.UID
}

func (v *scriptedVolumes) Setup(context.Context, *corev1.Pod) (bool, error) {
	v.setups++
	return v.ready, nil
}

func (v *scriptedVolumes) Teardown(_ context.Context, uid types.UID) (bool, error) {
	v.teardowns = append(v.teardowns, uid)
	return v.tornDown, nil
}

func (v *scriptedVolumes) Cleanup(context.Context, func(types.UID) bool) error { return nil }

// TestVolumesGateStartAndDeletion: containers start only once Setup says
// the pod's volumes are ready (until then the pod waits in
// ContainerCreating), and a deleted pod's deletion is finished only once
// Teardown says its volumes are down, as the kubelet does.
func TestVolumesGateStartAndDeletion(t *testing.T) {
	c := newCluster(t, roomy)
	deletesOnUpdate := c.deletesGracefulPodOnStatusUpdate()
	vols := &scriptedVolumes{}
	c.newWorker(func(cfg *pods.Config) { cfg.Volumes = vols })
	p := pod("web", corev1.RestartPolicyAlways, "busybox")
	p.Spec.Volumes = []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	created := c.create(p)

	c.sync()
	if _, err := c.rt.PodStatus(created.UID); err == nil {
		t.Fatal("containers started before the volumes were ready")
	}
	if !c.worker.VolumesPending() {
		t.Error("VolumesPending = false while the pod waits for its volumes")
	}
	waiting := c.get("web")
	if cs := waiting.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("container statuses while waiting = %+v, want ContainerCreating", cs)
	}
	for _, cond := range waiting.Status.Conditions {
		if cond.Type == pods.PodReadyToStartContainers && cond.Status != corev1.ConditionFalse {
			t.Errorf("%s = %s while the volumes are set up, want False", cond.Type, cond.Status)
		}
	}

	vols.ready = true
	c.sync()
	if _, err := c.rt.PodStatus(created.UID); err != nil {
		t.Fatalf("containers not started once the volumes were ready: %v", err)
	}
	if c.worker.VolumesPending() {
		t.Error("VolumesPending = true with nothing waiting")
	}
	setups := vols.setups
	c.sync()
	if vols.setups != setups {
		t.Errorf("Setup called again for a running pod (%d calls, was %d)", vols.setups, setups)
	}

	// busybox dies of SIGTERM at once: the containers stop on the first
	// pass, but the deletion waits for the teardown.
	if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.sync()
	c.sync()
	if len(vols.teardowns) == 0 || vols.teardowns[0] != created.UID {
		t.Fatalf("Teardown calls = %v, want the pod's uid", vols.teardowns)
	}
	if _, err := c.rt.PodStatus(created.UID); err != nil {
		t.Errorf("the runtime forgot the pod before its volumes were down: %v", err)
	}
	if !deletesOnUpdate {
		if _, err := c.admin.CoreV1().Pods("default").Get(c.ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("the pod's deletion finished before its volumes were down: %v", err)
		}
	}
	if !c.worker.VolumesPending() {
		t.Error("VolumesPending = false while a teardown is due")
	}

	vols.tornDown = true
	c.sync()
	if _, err := c.admin.CoreV1().Pods("default").Get(c.ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod still there after its volumes were down: %v", err)
	}
	if _, err := c.rt.PodStatus(created.UID); err == nil {
		t.Error("the runtime still holds the pod after its deletion")
	}
}
