package pods_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/agent/pods"
	"knode/internal/agent/runtime"
	"knode/internal/agent/runtime/fake"
)

// recordingResources is a container manager that logs the worker's calls,
// rejects pods named "numa" as the topology manager would, and reports a
// change of the shared pool after every admission and removal.
type recordingResources struct {
	rt      *fake.Runtime
	calls   []string
	changed bool
	// holding is what the last Sync was told the worker holds.
	holding []types.UID
}

func (r *recordingResources) Admit(pod *corev1.Pod) (string, string, bool) {
	r.calls = append(r.calls, "admit "+pod.Name)
	if pod.Name == "numa" {
		return "TopologyAffinityError", "Resources cannot be allocated with Topology locality", false
	}
	r.changed = true
	return "", "", true
}

func (r *recordingResources) PodStarting(pod *corev1.Pod) error {
	_, err := r.rt.PodStatus(pod.UID)
	r.calls = append(r.calls, fmt.Sprintf("starting %s (in the runtime: %t)", pod.Name, err == nil))
	return nil
}

func (r *recordingResources) RemovePod(uid types.UID) {
	_, err := r.rt.PodStatus(uid)
	r.calls = append(r.calls, fmt.Sprintf("remove (in the runtime: %t)", err == nil))
	r.changed = true
}

func (r *recordingResources) Sync(holding []types.UID) bool {
	r.holding = holding
	changed := r.changed
	r.changed = false
	return changed
}

// updatingRuntime is the fake runtime that counts UpdateResources calls.
type updatingRuntime struct {
	*fake.Runtime
	updates int
}

func (u *updatingRuntime) UpdateResources(context.Context) error {
	u.updates++
	return nil
}

var _ runtime.ResourceUpdater = (*updatingRuntime)(nil)

// TestResourcesHooks: the container manager admits after the worker's own
// admission, makes the pod's cgroup before the runtime starts it, releases
// it once the runtime forgot the pod, and a change of the shared pool has
// the runtime update its running containers.
func TestResourcesHooks(t *testing.T) {
	c := newCluster(t, roomy)
	res := &recordingResources{rt: c.rt}
	rt := &updatingRuntime{Runtime: c.rt}
	c.newWorker(func(cfg *pods.Config) { cfg.Resources, cfg.Runtime = res, rt })

	// Admitted in the order of creation.
	c.create(pod("web", corev1.RestartPolicyAlways, "busybox"))
	c.clk.Step(time.Second)
	tooBig := pod("too-big", corev1.RestartPolicyAlways, "busybox")
	tooBig.Spec.Containers[0].Resources.Requests = resources("cpu", "3")
	c.create(tooBig)
	c.clk.Step(time.Second)
	c.create(pod("numa", corev1.RestartPolicyAlways, "busybox"))
	c.sync()
	want := []string{"admit web", "starting web (in the runtime: false)", "admit numa"}
	if d := cmp.Diff(want, res.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if rt.updates != 1 {
		t.Errorf("UpdateResources calls = %d after an admission, want 1", rt.updates)
	}
	if web := c.get("web"); len(res.holding) != 1 || res.holding[0] != web.UID {
		t.Errorf("Sync told the worker holds %v, want web's uid %s", res.holding, web.UID)
	}
	numa := c.get("numa")
	if numa.Status.Phase != corev1.PodFailed || numa.Status.Reason != "TopologyAffinityError" ||
		numa.Status.Message != "Pod was rejected: Resources cannot be allocated with Topology locality" {
		t.Errorf("numa: phase %s, reason %q, message %q", numa.Status.Phase, numa.Status.Reason, numa.Status.Message)
	}
	if p := c.get("too-big"); p.Status.Reason != "OutOfcpu" {
		t.Errorf("too-big: reason %q, want OutOfcpu from the worker's own admission", p.Status.Reason)
	}

	res.calls = nil
	c.sync()
	if len(res.calls) != 0 || rt.updates != 1 {
		t.Errorf("a quiet pass: calls %q, updates %d; want none and 1", res.calls, rt.updates)
	}

	if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	c.sync()
	if d := cmp.Diff([]string{"remove (in the runtime: false)"}, res.calls); d != "" {
		t.Errorf("calls after the deletion (-want +got):\n%s", d)
	}
	if rt.updates != 2 {
		t.Errorf("UpdateResources calls = %d after a removal, want 2", rt.updates)
	}
	if len(res.holding) != 0 {
		t.Errorf("Sync told the worker holds %v after the removal, want none", res.holding)
	}
}

// TestResourcesReadmittedAfterRestart: a new worker over a runtime that
// already runs a pod hands that pod to the container manager again, without
// starting it.
func TestResourcesReadmittedAfterRestart(t *testing.T) {
	c := newCluster(t, roomy)
	c.create(pod("web", corev1.RestartPolicyAlways, "busybox"))
	c.sync()
	res := &recordingResources{rt: c.rt}
	c.newWorker(func(cfg *pods.Config) { cfg.Resources = res })
	c.sync()
	if d := cmp.Diff([]string{"admit web"}, res.calls); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}
