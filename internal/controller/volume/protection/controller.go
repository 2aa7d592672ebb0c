// Package protection holds upstream's two storage-object-in-use protection
// controllers in one loop: PVC protection ("pvc-protection-controller")
// and PV protection ("pv-protection-controller"). They let a claim or a
// volume that is being deleted go only once nothing uses it, by removing
// the kubernetes.io/pvc-protection or kubernetes.io/pv-protection
// finalizer.
//
// A claims pass (SyncClaims) lists the PVCs through the API and, for each
// one being deleted that carries the PVC finalizer, looks for a pod that
// uses it (PodUsesClaim: scheduled, and naming the claim as a volume).
// As upstream, it first asks the pod informer's cache (when Config has
// Informers and the cache has synced) and, when the cache shows no such
// pod, a live list of the claim's namespace (one per namespace per pass),
// since a pod just created may not be in the cache yet. The finalizer is
// removed only when both show none.
//
// A volumes pass (SyncVolumes) lists the PVs and removes the PV finalizer
// from each one being deleted whose phase is not Bound.
//
// As upstream, both passes also add the finalizer to claims and volumes
// that are not being deleted and lack it (the admission plugin adds it at
// creation; this covers objects created while it was off). Every write is
// an update with the listed object's resourceVersion; a conflict is left
// to the next pass.
//
// What the caller must do: give it a client that may list, get and update
// PVCs and PVs and list pods; call Sync (or SyncClaims, SyncVolumes) for
// one pass, or Run. One controller per cluster.
//
// Cost model: a pass lists PVCs and PVs once; pods are listed live only in
// the namespaces of claims being deleted that the cache shows unused.
//
// What it does not do: events (upstream records none), and the per-claim
// rate-limited retries of upstream's work queue (a failed write waits for
// the next pass).
package protection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/loop"
	"knode/internal/volume"
)

// Names of the two controllers, upstream's, used in logs.
const (
	ClaimControllerName  = "pvc-protection-controller"
	VolumeControllerName = "pv-protection-controller"
)

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// podClaimIndex indexes cached pods by the "namespace/name" of each claim
// their volumes name.
const podClaimIndex = "knode-pod-pvc"

// Config builds a Controller.
type Config struct {
	// Client lists, gets and updates PVCs and PVs and lists pods.
	// Required.
	Client kubernetes.Interface
	// Clock paces Run; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Informers, when set, is where Run takes the informers that wake it
	// (shared with other controllers) and where the claims pass finds the
	// pod cache it asks before its live list, once the cache has synced;
	// New registers the pod informer (and an index) on it, and Run starts
	// it. nil: New builds a factory of its own. Until Run starts the
	// factory, passes use the live list only.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller runs both protection loops. Passes do not overlap.
type Controller struct {
	cfg        Config
	claimLog   *slog.Logger
	volumeLog  *slog.Logger
	factory    informers.SharedInformerFactory
	pods       cache.SharedIndexInformer
	podIndexed bool

	mu sync.Mutex
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "protection", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:       cfg,
		claimLog:  cfg.Logger.With("controller", ClaimControllerName),
		volumeLog: cfg.Logger.With("controller", VolumeControllerName),
	}
	c.factory = cfg.Informers
	if c.factory == nil {
		c.factory = informers.NewSharedInformerFactory(cfg.Client, 0)
	}
	c.pods = c.factory.Core().V1().Pods().Informer()
	if _, ok := c.pods.GetIndexer().GetIndexers()[podClaimIndex]; ok {
		c.podIndexed = true
	} else if err := c.pods.AddIndexers(cache.Indexers{podClaimIndex: podClaims}); err == nil {
		c.podIndexed = true
	}
	return c, nil
}

// podClaims is the index function of podClaimIndex.
func podClaims(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			keys = append(keys, p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			keys = append(keys, p.Namespace+"/"+p.Name+"-"+v.Name)
		}
	}
	return keys, nil
}

// Sync makes a claims pass, then a volumes pass, and blocks until their
// writes are done. The error joins the failures other than write
// conflicts; each is retried by the next pass.
func (c *Controller) Sync(ctx context.Context) error {
	return errors.Join(c.SyncClaims(ctx), c.SyncVolumes(ctx))
}

// keep drops write conflicts (logged) from errs.
func keep(log *slog.Logger, errs []error, err error) []error {
	if err == nil {
		return errs
	}
	if apierrors.IsConflict(err) {
		log.Debug("write conflict; the next pass retries", "err", err)
		return errs
	}
	return append(errs, err)
}

// SyncClaims makes one PVC protection pass (see the package
// documentation).
func (c *Controller) SyncClaims(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	core := c.cfg.Client.CoreV1()
	list, err := core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	live := map[string][]corev1.Pod{} // namespace → pods, listed at most once per pass
	var errs []error
	for i := range items {
		claim := &items[i]
		key := claim.Namespace + "/" + claim.Name
		switch {
		case DeletionCandidate(claim, volume.PVCProtectionFinalizer):
			used, err := c.claimUsed(ctx, claim, live)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if used {
				c.claimLog.Debug("keeping claim: a pod uses it", "claim", key)
				continue
			}
			updated := claim.DeepCopy()
			updated.Finalizers = withoutFinalizer(updated.Finalizers, volume.PVCProtectionFinalizer)
			if _, err := core.PersistentVolumeClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = keep(c.claimLog, errs, fmt.Errorf("removing protection finalizer from persistentvolumeclaim %s: %w", key, err))
				continue
			}
			c.claimLog.Info("removed protection finalizer from claim", "claim", key)
		case NeedsFinalizer(claim, volume.PVCProtectionFinalizer):
			updated := claim.DeepCopy()
			updated.Finalizers = append(updated.Finalizers, volume.PVCProtectionFinalizer)
			if _, err := core.PersistentVolumeClaims(claim.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = keep(c.claimLog, errs, fmt.Errorf("adding protection finalizer to persistentvolumeclaim %s: %w", key, err))
			}
		}
	}
	return errors.Join(errs...)
}

// claimUsed asks the pod cache, then (when the cache shows no user) the
// live pods of the claim's namespace, kept in live for the rest of the
// pass, whether a pod uses claim.
func (c *Controller) claimUsed(ctx context.Context, claim *corev1.PersistentVolumeClaim, live map[string][]corev1.Pod) (bool, error) {
	if c.cachedUser(claim) {
		return true, nil
	}
	pods, listed := live[claim.Namespace]
	if !listed {
		list, err := c.cfg.Client.CoreV1().Pods(claim.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("live list of pods in %s failed: %w", claim.Namespace, err)
		}
		pods = list.Items
		live[claim.Namespace] = pods
	}
	for i := range pods {
		if PodUsesClaim(&pods[i], claim) {
			return true, nil
		}
	}
	return false, nil
}

// cachedUser reports whether the pod cache, once synced, holds a pod that
// uses claim. Before the cache has synced it reports false.
func (c *Controller) cachedUser(claim *corev1.PersistentVolumeClaim) bool {
	if !c.pods.HasSynced() {
		return false
	}
	var objs []any
	if c.podIndexed {
		var err error
		if objs, err = c.pods.GetIndexer().ByIndex(podClaimIndex, claim.Namespace+"/"+claim.Name); err != nil {
			c.claimLog.Warn("cache-based list of pods failed", "claim", claim.Namespace+"/"+claim.Name, "err", err)
			return false
		}
	} else {
		objs = c.pods.GetIndexer().List()
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && PodUsesClaim(p, claim) {
			return true
		}
	}
	return false
}

// SyncVolumes makes one PV protection pass (see the package
// documentation).
func (c *Controller) SyncVolumes(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pvs := c.cfg.Client.CoreV1().PersistentVolumes()
	list, err := pvs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing persistentvolumes: %w", err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	var errs []error
	for i := range items {
		pv := &items[i]
		switch {
		case DeletionCandidate(pv, volume.PVProtectionFinalizer):
			if VolumeInUse(pv) {
				c.volumeLog.Debug("keeping volume: it is bound", "volume", pv.Name)
				continue
			}
			updated := pv.DeepCopy()
			updated.Finalizers = withoutFinalizer(updated.Finalizers, volume.PVProtectionFinalizer)
			if _, err := pvs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = keep(c.volumeLog, errs, fmt.Errorf("removing protection finalizer from persistentvolume %s: %w", pv.Name, err))
				continue
			}
			c.volumeLog.Info("removed protection finalizer from volume", "volume", pv.Name)
		case NeedsFinalizer(pv, volume.PVProtectionFinalizer):
			updated := pv.DeepCopy()
			updated.Finalizers = append(updated.Finalizers, volume.PVProtectionFinalizer)
			if _, err := pvs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = keep(c.volumeLog, errs, fmt.Errorf("adding protection finalizer to persistentvolume %s: %w", pv.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Run passes at once, then whenever a PVC, PV or pod changes, and at least
// every ResyncPeriod, until ctx ends. Errors are logged.
func (c *Controller) Run(ctx context.Context) {
	factory := c.factory
	loop.Run(ctx, loop.Config{
		Clock:  c.cfg.Clock,
		Resync: c.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{
			factory.Core().V1().PersistentVolumeClaims().Informer(),
			factory.Core().V1().PersistentVolumes().Informer(),
			factory.Core().V1().Pods().Informer(),
		},
		Start:  factory.Start,
		Sync:   c.Sync,
		Logger: c.claimLog,
		Name:   "protection",
	})
}
