package garbagecollector_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/apitest"
)

// ownerRef is a reference to obj, of kind at apiVersion.
func ownerRef(apiVersion, kind string, obj metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID()}
}

// createPod creates pod default/name, unscheduled, with finalizers and
// owners.
func (w *world) createPod(name string, finalizers []string, owners ...metav1.OwnerReference) *corev1.Pod {
	w.T.Helper()
	p, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Finalizers: finalizers, OwnerReferences: owners},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{})
	w.Must("creating pod "+name, err)
	return p
}

// createClaim creates claim default/name with owners.
func (w *world) createClaim(name string, owners ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	w.T.Helper()
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Create(w.Ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating claim "+name, err)
	return c
}

// claim is claim default/name; ok is false when it does not exist.
func (w *world) claim(name string) (c *corev1.PersistentVolumeClaim, ok bool) {
	w.T.Helper()
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Get(w.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	w.Must("getting claim "+name, err)
	return c, true
}

// owners names the owners obj refers to.
func owners(obj metav1.Object) []string {
	var out []string
	for _, r := range obj.GetOwnerReferences() {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// A claim owned by a pod (a StatefulSet's claim of a scaled-down ordinal)
// stays while the pod exists, terminating included, and goes once the pod
// is gone; a claim of a live pod stays.
func TestClaimOwnedByPod(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	const hold = "example.com/hold"
	db1 := w.createPod("db-1", []string{hold})
	db0 := w.createPod("db-0", nil)
	w.createClaim("data-db-1", ownerRef("v1", "Pod", db1))
	w.createClaim("data-db-0", ownerRef("v1", "Pod", db0))
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-db-1"); !ok {
		t.Fatal("the claim of a live pod was deleted")
	}

	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "db-1", metav1.DeleteOptions{}))
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "db-1", metav1.GetOptions{})
	w.Must("the pod waits for its finalizer", err)
	if p.DeletionTimestamp == nil {
		t.Fatal("pod not marked for deletion")
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-db-1"); !ok {
		t.Fatal("the claim of a terminating pod was deleted")
	}

	p.Finalizers = nil
	_, err = w.Client.CoreV1().Pods("default").Update(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("releasing the pod", err)
	if _, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "db-1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod still there: %v", err)
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-db-1"); ok {
		t.Error("the claim of a gone pod is still there")
	}
	if _, ok := w.claim("data-db-0"); !ok {
		t.Error("the claim of a live pod was deleted")
	}
}

// A claim naming a pod that was recreated under the same name is the old
// pod's: it goes.
func TestClaimOfRecreatedPod(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	old := w.createPod("db-0", nil)
	w.createClaim("data-db-0", ownerRef("v1", "Pod", old))
	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "db-0", metav1.DeleteOptions{}))
	w.createPod("db-0", nil)
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-db-0"); ok {
		t.Error("a claim naming the old pod's UID is still there")
	}
	if n := len(w.Pods()); n != 1 {
		t.Errorf("%d pods, want the new db-0 alone", n)
	}
}

// A claim owned by a ReplicaSet and a pod loses the reference to the gone
// pod and stays.
func TestClaimTrimmed(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	rs := w.runReplicaSet("keeper", 0)
	pod := w.createPod("db-0", nil)
	w.createClaim("data", ownerRef("v1", "Pod", pod), ownerRef("apps/v1", "ReplicaSet", rs))
	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "db-0", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	c, ok := w.claim("data")
	if !ok {
		t.Fatal("claim deleted; it still has a live owner")
	}
	if got := owners(c); len(got) != 1 || got[0] != "ReplicaSet/keeper" {
		t.Errorf("owners = %v, want [ReplicaSet/keeper]", got)
	}
}

// hidePods makes the cluster-wide pod list answer empty while on is set,
// as a list read before the pods were created would.
type hidePods struct{ on atomic.Bool }

func (h *hidePods) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if h.on.Load() && r.Method == http.MethodGet && r.URL.Path == "/api/v1/pods" && r.URL.Query().Get("watch") == "" {
			rw.Header().Set("Content-Type", "application/json")
			_, _ = rw.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// A pod owner missing from the pass's list is read again before its
// claim is deleted.
func TestPodOwnerReadAgain(t *testing.T) {
	h := &hidePods{}
	w := newWorldWith(t, apitest.Options{Wrap: h.wrap})
	g := w.collector()
	pod := w.createPod("db-0", nil)
	w.createClaim("data-db-0", ownerRef("v1", "Pod", pod))
	h.on.Store(true)
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-db-0"); !ok {
		t.Error("the claim of a live pod was deleted: its owner was not read again")
	}
}

// notServed answers NotFound, as a server without those kinds does, for
// the resources named.
func notServed(resources ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			for _, res := range resources {
				if strings.HasSuffix(r.URL.Path, "/"+res) || strings.Contains(r.URL.Path, "/"+res+"/") {
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusNotFound)
					_, _ = rw.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`))
					return
				}
			}
			next.ServeHTTP(rw, r)
		})
	}
}

// On a server that does not serve StatefulSets and ControllerRevisions,
// a reference to a StatefulSet counts as a present owner, and the rest of
// the pass goes on.
func TestKindsNotServed(t *testing.T) {
	w := newWorldWith(t, apitest.Options{Wrap: notServed("statefulsets", "controllerrevisions")})
	g := w.collector()
	w.createClaim("data-db-0", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "db-uid"})
	web := w.runReplicaSet("web", 1)
	w.Must("deleting replicaset", w.Client.AppsV1().ReplicaSets("default").Delete(w.Ctx, "web", metav1.DeleteOptions{}))
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-db-0"); !ok {
		t.Error("a claim owned by a StatefulSet, a kind not served, was deleted")
	}
	if owning, _ := w.ownedBy(web); owning != 0 {
		t.Errorf("%d pods of the deleted ReplicaSet left, want 0", owning)
	}
}

// A pod deleted with the foregroundDeletion finalizer sees its claims
// deleted, then loses the finalizer and goes; one deleted with the orphan
// finalizer leaves its claims without the reference, then goes.
func TestPodOwnerFinalizers(t *testing.T) {
	w := newWorld(t)
	g := w.collector()
	fg := w.createPod("fg", []string{metav1.FinalizerDeleteDependents})
	orphan := w.createPod("orphan", []string{metav1.FinalizerOrphanDependents})
	w.createClaim("data-fg", ownerRef("v1", "Pod", fg))
	w.createClaim("data-orphan", ownerRef("v1", "Pod", orphan))
	for _, name := range []string{"fg", "orphan"} {
		w.Must("deleting pod "+name, w.Client.CoreV1().Pods("default").Delete(w.Ctx, name, metav1.DeleteOptions{}))
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	if _, ok := w.claim("data-fg"); ok {
		t.Error("the claim of a pod deleted in the foreground is still there")
	}
	c, ok := w.claim("data-orphan")
	if !ok {
		t.Fatal("the claim of an orphaning pod was deleted")
	}
	if got := owners(c); len(got) != 0 {
		t.Errorf("the orphaned claim still names %v", got)
	}
	w.Must("gc sync", g.Sync(w.Ctx))
	for _, name := range []string{"fg", "orphan"} {
		if _, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s still there: %v", name, err)
		}
	}
}
