package garbagecollector_test

import (
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/garbagecollector"
	"knode/internal/controller/replicaset"
	"knode/internal/registry/controllerrevision"
	"knode/internal/registry/statefulset"
)

var quiet = slog.New(slog.DiscardHandler)

// world is apitest's World with this package's helpers as methods.
type world struct{ *apitest.World }

func newWorld(t *testing.T) *world { return newWorldWith(t, apitest.Options{}) }

// newWorldWith is newWorld with opts, serving StatefulSets and
// ControllerRevisions beside opts.Kinds.
func newWorldWith(t *testing.T, opts apitest.Options) *world {
	opts.Kinds = append(opts.Kinds, statefulset.Kind(), controllerrevision.Kind())
	return &world{apitest.NewWorld(t, opts)}
}

func (w *world) collector() *garbagecollector.Collector {
	w.T.Helper()
	g, err := garbagecollector.New(garbagecollector.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the collector", err)
	return g
}

// runReplicaSet creates a ReplicaSet and lets the ReplicaSet controller
// create its pods.
func (w *world) runReplicaSet(name string, n int32, finalizers ...string) *appsv1.ReplicaSet {
	w.T.Helper()
	labels := map[string]string{"app": name}
	rs, err := w.Client.AppsV1().ReplicaSets("default").Create(w.Ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Finalizers: finalizers},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	w.Must("creating replicaset", err)
	c, err := replicaset.New(replicaset.Config{Client: w.Client, Clock: w.Clock, Logger: quiet})
	w.Must("building the replicaset controller", err)
	w.Must("replicaset sync", c.Sync(w.Ctx))
	return rs
}

// ownedBy counts the pods that name owner among their owners.
func (w *world) ownedBy(owner *appsv1.ReplicaSet) (owning, all int) {
	for _, p := range w.Pods() {
		all++
		for _, r := range p.OwnerReferences {
			if r.UID == owner.UID {
				owning++
			}
		}
	}
	return owning, all
}

// Deleting a ReplicaSet deletes its pods (background propagation); other
// pods stay.
func TestDeletingOwnerDeletesPods(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	web := w.runReplicaSet("web", 3)
	db := w.runReplicaSet("db", 2)
	w.Must("gc sync", g.Sync(w.Ctx))
	if n := len(w.Pods()); n != 5 {
		t.Fatalf("%d pods before any deletion; the collector deleted live pods", n)
	}

	w.Must("deleting replicaset", w.Client.AppsV1().ReplicaSets("default").Delete(w.Ctx, "web", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	if owning, all := w.ownedBy(web); owning != 0 || all != 2 {
		t.Errorf("after deleting web: %d of its pods left, %d pods in all; want 0 and 2", owning, all)
	}
	if owning, _ := w.ownedBy(db); owning != 2 {
		t.Errorf("db has %d pods, want 2", owning)
	}
}

// A pod with a second, live owner only loses the reference to the gone
// one.
func TestDanglingReferenceIsTrimmed(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	w.runReplicaSet("web", 1)
	keeper, err := w.Client.AppsV1().ReplicaSets("default").Create(w.Ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "keeper", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "keeper"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "keeper"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}, metav1.CreateOptions{})
	w.Must("creating keeper", err)
	pod := w.Pods()[0]
	pod.OwnerReferences = append(pod.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "keeper", UID: keeper.UID})
	_, err = w.Client.CoreV1().Pods("default").Update(w.Ctx, &pod, metav1.UpdateOptions{})
	w.Must("adding a second owner", err)

	w.Must("deleting replicaset", w.Client.AppsV1().ReplicaSets("default").Delete(w.Ctx, "web", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	got, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, pod.Name, metav1.GetOptions{})
	w.Must("getting pod", err)
	var owners []string
	for _, r := range got.OwnerReferences {
		owners = append(owners, r.Name)
	}
	if diff := cmp.Diff([]string{"keeper"}, owners); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
}

// An owner deleted with the orphan finalizer leaves its pods without the
// reference, then loses the finalizer and goes.
func TestOrphanFinalizer(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	web := w.runReplicaSet("web", 2, metav1.FinalizerOrphanDependents)
	w.Must("deleting replicaset", w.Client.AppsV1().ReplicaSets("default").Delete(w.Ctx, "web", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	if owning, all := w.ownedBy(web); owning != 0 || all != 2 {
		t.Errorf("%d pods still name web, %d pods in all; want 0 and 2", owning, all)
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, err := w.Client.AppsV1().ReplicaSets("default").Get(w.Ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("orphaning owner still there: %v", err)
	}
}

// An owner deleted with the foregroundDeletion finalizer sees its pods
// deleted first, then goes.
func TestForegroundFinalizer(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	w.runReplicaSet("web", 2, metav1.FinalizerDeleteDependents)
	w.Must("deleting replicaset", w.Client.AppsV1().ReplicaSets("default").Delete(w.Ctx, "web", metav1.DeleteOptions{}))
	rs, err := w.Client.AppsV1().ReplicaSets("default").Get(w.Ctx, "web", metav1.GetOptions{})
	w.Must("the owner waits for its finalizer", err)
	if rs.DeletionTimestamp == nil {
		t.Fatal("owner not marked for deletion")
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if n := len(w.Pods()); n != 0 {
		t.Errorf("%d pods left, want 0", n)
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, err := w.Client.AppsV1().ReplicaSets("default").Get(w.Ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("foreground owner still there: %v", err)
	}
}
