package protection_test

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/controller/volume/protection"
)

// quiet discards the controller's log.
var quiet = slog.New(slog.DiscardHandler)

const (
	pvcFinalizer = "kubernetes.io/pvc-protection"
	pvFinalizer  = "kubernetes.io/pv-protection"
)

// world is an API server that counts the live pod lists of namespace
// default, with a protection controller.
type world struct {
	*apitest.World
	ctrl     *protection.Controller
	podLists atomic.Int32
}

func newWorld(t *testing.T, factory func(*world) informers.SharedInformerFactory) *world {
	t.Helper()
	w := &world{}
	w.World = apitest.NewWorld(t, apitest.Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/default/pods" && r.URL.Query().Get("watch") == "" {
				w.podLists.Add(1)
			}
			h.ServeHTTP(rw, r)
		})
	}})
	cfg := protection.Config{Client: w.Client, Clock: w.Clock, Logger: quiet}
	if factory != nil {
		cfg.Informers = factory(w)
	}
	ctrl, err := protection.New(cfg)
	w.Must("building the controller", err)
	w.ctrl = ctrl
	return w
}

func (w *world) claim(name string, finalizers ...string) {
	w.T.Helper()
	_, err := w.Client.CoreV1().PersistentVolumeClaims("default").Create(w.Ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Finalizers: finalizers},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating claim", err)
}

// pod creates a pod on node using claim.
func (w *world) pod(name, node, claim string) {
	w.T.Helper()
	_, err := w.Client.CoreV1().Pods("default").Create(w.Ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating pod", err)
}

func (w *world) deleteClaim(name string) {
	w.T.Helper()
	w.Must("deleting claim", w.Client.CoreV1().PersistentVolumeClaims("default").Delete(w.Ctx, name, metav1.DeleteOptions{}))
}

// claimFinalizers returns the claim's finalizers, or gone=true when it no
// longer exists.
func (w *world) claimFinalizers(name string) (finalizers []string, gone bool) {
	w.T.Helper()
	c, err := w.Client.CoreV1().PersistentVolumeClaims("default").Get(w.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, true
	}
	w.Must("getting claim", err)
	return c.Finalizers, false
}

func (w *world) sync() {
	w.T.Helper()
	w.Must("sync", w.ctrl.Sync(w.Ctx))
}

func TestClaimKeptWhileAPodUsesIt(t *testing.T) {
	w := newWorld(t, nil)
	w.claim("data", pvcFinalizer)
	w.pod("web", "node-1", "data")
	w.deleteClaim("data")
	w.sync()
	if f, gone := w.claimFinalizers("data"); gone || !cmp.Equal(f, []string{pvcFinalizer}) {
		t.Fatalf("claim in use: finalizers %v, gone %v; want kept", f, gone)
	}

	// A pod that finished but still exists keeps the claim, as upstream.
	p, err := w.Client.CoreV1().Pods("default").Get(w.Ctx, "web", metav1.GetOptions{})
	w.Must("getting pod", err)
	p.Status.Phase = corev1.PodSucceeded
	_, err = w.Client.CoreV1().Pods("default").UpdateStatus(w.Ctx, p, metav1.UpdateOptions{})
	w.Must("finishing pod", err)
	w.sync()
	if _, gone := w.claimFinalizers("data"); gone {
		t.Fatal("claim released while a finished pod still exists")
	}

	w.Must("deleting pod", w.Client.CoreV1().Pods("default").Delete(w.Ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	w.sync()
	if f, gone := w.claimFinalizers("data"); !gone {
		t.Errorf("claim without users kept finalizers %v", f)
	}
}

func TestUnscheduledPodDoesNotKeepTheClaim(t *testing.T) {
	w := newWorld(t, nil)
	w.claim("data", pvcFinalizer, "example.com/other")
	w.pod("web", "", "data")
	w.deleteClaim("data")
	w.sync()
	f, gone := w.claimFinalizers("data")
	if gone || !cmp.Equal(f, []string{"example.com/other"}) {
		t.Errorf("finalizers %v (gone %v), want only the other finalizer left", f, gone)
	}
}

func TestFinalizerAddedToUnprotectedObjects(t *testing.T) {
	w := newWorld(t, nil)
	w.claim("data")
	_, err := w.Client.CoreV1().PersistentVolumes().Create(w.Ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "v"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating volume", err)
	w.sync()
	if f, _ := w.claimFinalizers("data"); !cmp.Equal(f, []string{pvcFinalizer}) {
		t.Errorf("claim finalizers %v", f)
	}
	pv, err := w.Client.CoreV1().PersistentVolumes().Get(w.Ctx, "v", metav1.GetOptions{})
	w.Must("getting volume", err)
	if !cmp.Equal(pv.Finalizers, []string{pvFinalizer}) {
		t.Errorf("volume finalizers %v", pv.Finalizers)
	}
}

func TestVolumeKeptWhileBound(t *testing.T) {
	w := newWorld(t, nil)
	pvs := w.Client.CoreV1().PersistentVolumes()
	_, err := pvs.Create(w.Ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "v", Finalizers: []string{pvFinalizer}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}},
		},
	}, metav1.CreateOptions{})
	w.Must("creating volume", err)
	setPhase := func(phase corev1.PersistentVolumePhase) {
		pv, err := pvs.Get(w.Ctx, "v", metav1.GetOptions{})
		w.Must("getting volume", err)
		pv.Status.Phase = phase
		_, err = pvs.UpdateStatus(w.Ctx, pv, metav1.UpdateOptions{})
		w.Must("setting phase", err)
	}
	setPhase(corev1.VolumeBound)
	w.Must("deleting volume", pvs.Delete(w.Ctx, "v", metav1.DeleteOptions{}))
	w.sync()
	if _, err := pvs.Get(w.Ctx, "v", metav1.GetOptions{}); err != nil {
		t.Fatalf("bound volume: %v; want it kept", err)
	}
	setPhase(corev1.VolumeReleased)
	w.sync()
	if _, err := pvs.Get(w.Ctx, "v", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("released volume: err %v; want it gone", err)
	}
}

// TestCacheBeforeLiveList checks upstream's order: a pod in the informer's
// cache keeps the claim without a live list; a pod the cache does not show
// is found by one live list per namespace.
func TestCacheBeforeLiveList(t *testing.T) {
	t.Run("pod in the cache", func(t *testing.T) {
		var factory informers.SharedInformerFactory
		w := newWorld(t, func(w *world) informers.SharedInformerFactory {
			factory = informers.NewSharedInformerFactory(w.Client, 0)
			return factory
		})
		w.claim("data", pvcFinalizer)
		w.pod("web", "node-1", "data")
		w.deleteClaim("data")
		stop := make(chan struct{})
		defer close(stop)
		factory.Start(stop)
		factory.WaitForCacheSync(stop)
		w.podLists.Store(0)
		w.sync()
		if _, gone := w.claimFinalizers("data"); gone {
			t.Fatal("claim used by a cached pod was released")
		}
		if n := w.podLists.Load(); n != 0 {
			t.Errorf("%d live pod lists; the cache answered", n)
		}
	})
	t.Run("pod not in the cache", func(t *testing.T) {
		var factory informers.SharedInformerFactory
		w := newWorld(t, func(w *world) informers.SharedInformerFactory {
			// A cache of another namespace: it syncs but never shows
			// default's pods, like a cache that has not caught up.
			factory = informers.NewSharedInformerFactoryWithOptions(w.Client, 0, informers.WithNamespace("kube-system"))
			return factory
		})
		w.claim("used", pvcFinalizer)
		w.claim("unused-1", pvcFinalizer)
		w.claim("unused-2", pvcFinalizer)
		w.pod("web", "node-1", "used")
		for _, c := range []string{"used", "unused-1", "unused-2"} {
			w.deleteClaim(c)
		}
		stop := make(chan struct{})
		defer close(stop)
		factory.Start(stop)
		factory.WaitForCacheSync(stop)
		w.podLists.Store(0)
		w.sync()
		if _, gone := w.claimFinalizers("used"); gone {
			t.Error("claim used by a pod the cache misses was released")
		}
		for _, c := range []string{"unused-1", "unused-2"} {
			if _, gone := w.claimFinalizers(c); !gone {
				t.Errorf("unused claim %s kept", c)
			}
		}
		if n := w.podLists.Load(); n != 1 {
			t.Errorf("%d live pod lists of namespace default, want 1", n)
		}
	})
}
