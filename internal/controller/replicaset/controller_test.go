package replicaset_test

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/replicaset"
)

var quiet = slog.New(slog.DiscardHandler)

// world is apitest's World with this package's helpers as methods.
type world struct{ *apitest.World }

func newWorld(t *testing.T) *world {
	return &world{apitest.NewWorld(t, apitest.Options{})}
}

func newRS(name string, replicas int32) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sleep", Image: "busybox", Command: []string{"sleep", "3600"}}}},
			},
		},
	}
}

func (w *world) controller() *replicaset.Controller {
	w.T.Helper()
	c, err := replicaset.New(replicaset.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	return c
}

func (w *world) rs(name string) *appsv1.ReplicaSet {
	w.T.Helper()
	rs, err := w.Client.AppsV1().ReplicaSets("default").Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting replicaset", err)
	return rs
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return out
}

// A ReplicaSet of 4 creates 4 pods it controls, replaces a deleted one,
// and scales down by deleting the pods it is cheapest to lose.
func TestReplicaSetKeepsItsReplicas(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	created, err := w.Client.AppsV1().ReplicaSets("default").Create(w.Ctx, newRS("web", 4), metav1.CreateOptions{})
	w.Must("creating replicaset", err)
	w.Must("sync", c.Sync(w.Ctx))

	pods := w.Pods()
	if len(pods) != 4 {
		t.Fatalf("%d pods after the first pass, want 4", len(pods))
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != created.UID || ref.Kind != "ReplicaSet" || ref.APIVersion != "apps/v1" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s controller = %+v, want the ReplicaSet", p.Name, ref)
		}
		if !strings.HasPrefix(p.Name, "web-") || p.Labels["app"] != "web" {
			t.Errorf("pod %s labels %v: want name web-<random> and the template's labels", p.Name, p.Labels)
		}
	}
	st := w.rs("web").Status
	want := appsv1.ReplicaSetStatus{Replicas: 4, FullyLabeledReplicas: 4, TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 1}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}

	// A deleted pod comes back.
	w.Must("deleting a pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, pods[0].Name, metav1.DeleteOptions{}))
	w.Must("sync", c.Sync(w.Ctx))
	again := w.Pods()
	if len(again) != 4 {
		t.Fatalf("%d pods after a deletion, want 4", len(again))
	}
	for _, p := range again {
		if p.Name == pods[0].Name {
			t.Errorf("deleted pod %s still there", p.Name)
		}
	}

	// Two pods Ready; scaling to 2 keeps exactly those.
	w.SetReady(again[1].Name, true)
	w.SetReady(again[3].Name, true)
	rs := w.rs("web")
	rs.Spec.Replicas = ptr.To[int32](2)
	_, err = w.Client.AppsV1().ReplicaSets("default").Update(w.Ctx, rs, metav1.UpdateOptions{})
	w.Must("scaling down", err)
	w.Must("sync", c.Sync(w.Ctx))
	if diff := cmp.Diff(names([]corev1.Pod{again[1], again[3]}), names(w.Pods())); diff != "" {
		t.Errorf("pods kept (-want +got):\n%s", diff)
	}
	st = w.rs("web").Status
	want = appsv1.ReplicaSetStatus{Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 2}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status after scaling down (-want +got):\n%s", diff)
	}
}

// Orphans the selector matches are adopted and count; a pod relabelled
// out of the selector is released and replaced.
func TestReplicaSetAdoptsAndReleases(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	_, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, orphan, metav1.CreateOptions{})
	w.Must("creating the orphan", err)
	created, err := w.Client.AppsV1().ReplicaSets("default").Create(w.Ctx, newRS("web", 2), metav1.CreateOptions{})
	w.Must("creating replicaset", err)
	w.Must("sync", c.Sync(w.Ctx))

	pods := w.Pods()
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2 (the orphan and one new)", len(pods))
	}
	stray, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "stray", metav1.GetOptions{})
	w.Must("getting the orphan", err)
	if ref := metav1.GetControllerOf(stray); ref == nil || ref.UID != created.UID {
		t.Fatalf("orphan's controller = %+v, want the ReplicaSet", ref)
	}

	stray.Labels = map[string]string{"app": "other"}
	_, err = w.Client.CoreV1().Pods("default").Update(w.Ctx, stray, metav1.UpdateOptions{})
	w.Must("relabelling", err)
	w.Must("sync", c.Sync(w.Ctx))
	stray, err = w.Client.CoreV1().Pods("default").Get(w.Ctx, "stray", metav1.GetOptions{})
	w.Must("getting the released pod", err)
	if len(stray.OwnerReferences) != 0 {
		t.Errorf("released pod keeps owner references %+v", stray.OwnerReferences)
	}
	owned := 0
	for _, p := range w.Pods() {
		if metav1.IsControlledBy(&p, created) {
			owned++
		}
	}
	if owned != 2 {
		t.Errorf("%d pods controlled after the release, want 2", owned)
	}
}

// A pod creation the server refuses fails the pass and shows as the
// ReplicaFailure condition (its removal is covered by TestStatus).
func TestReplicaSetReportsFailedCreate(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	rs := newRS("web", 1)
	// A template the pod rules accept but whose pods the namespace refuses:
	// the namespace does not exist yet.
	rs.Namespace = "later"
	_, err := w.Client.CoreV1().Namespaces().Create(w.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{})
	w.Must("creating namespace", err)
	_, err = w.Client.AppsV1().ReplicaSets("later").Create(w.Ctx, rs, metav1.CreateOptions{})
	w.Must("creating replicaset", err)
	// Terminate the namespace: creates in it are refused.
	w.Must("deleting namespace", w.Client.CoreV1().Namespaces().Delete(w.Ctx, "later", metav1.DeleteOptions{}))
	if err := c.Sync(w.Ctx); err == nil {
		t.Fatal("Sync succeeded although the pod could not be created")
	}
	got, err := w.Client.AppsV1().ReplicaSets("later").Get(w.Ctx, "web", metav1.GetOptions{})
	w.Must("getting replicaset", err)
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != appsv1.ReplicaSetReplicaFailure ||
		got.Status.Conditions[0].Reason != "FailedCreate" {
		t.Fatalf("conditions = %+v, want ReplicaFailure/FailedCreate", got.Status.Conditions)
	}
}

// Run reacts to a pod deletion without waiting for the resync.
func TestRunReplacesDeletedPods(t *testing.T) {
	w := newWorld(t)
	c := w.controller()
	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan struct{})
	go func() {
		c.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	_, err := w.Client.AppsV1().ReplicaSets("default").Create(w.Ctx, newRS("web", 3), metav1.CreateOptions{})
	w.Must("creating replicaset", err)
	waitPods := func(n int) []corev1.Pod {
		var pods []corev1.Pod
		err := wait.PollUntilContextTimeout(w.Ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			pods = w.Pods()
			return len(pods) == n, nil
		})
		w.Must("waiting for pods", err)
		return pods
	}
	pods := waitPods(3)
	w.Must("deleting a pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, pods[0].Name, metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(w.Ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		now := w.Pods()
		return len(now) == 3 && !strings.Contains(strings.Join(names(now), ","), pods[0].Name), nil
	})
	w.Must("waiting for the replacement", err)
}
