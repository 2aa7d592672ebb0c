// Package garbagecollector deletes the pods whose owners are gone,
// following ownerReferences, as upstream's garbage collector does for the
// owners knode serves: apps/v1 ReplicaSets and DaemonSets.
//
// A pass (Sync) lists the pods, then the owners, and for every pod decides
// (Judge):
//   - every owner it names is gone (no object of that name, or one with
//     another UID): the pod is deleted, with its normal graceful deletion.
//     This is background propagation: deleting a ReplicaSet deletes its
//     pods after the ReplicaSet is gone;
//   - some owners are gone and another stays: the references to the gone
//     ones are removed;
//   - an owner being deleted with the "orphan" finalizer (propagationPolicy
//     Orphan): the reference to it is removed and the pod stays; once no
//     pod refers to that owner, the collector removes the finalizer;
//   - an owner being deleted with the "foregroundDeletion" finalizer
//     (propagationPolicy Foreground): its pods are deleted; once none
//     refers to it any more, the collector removes the finalizer.
//
// Before acting on an owner's absence the collector reads that owner
// again, so an owner created after the list is never taken for gone. A
// reference to a kind the collector does not know counts as a present
// owner.
//
// What the caller must do: give it a client that may list, patch and
// delete pods and list, get and update ReplicaSets and DaemonSets; call
// Sync for one pass, or Run. One collector per cluster. The orphan and
// foreground cases need the API server to put those finalizers on an owner
// deleted with that propagationPolicy, as upstream's does.
//
// What it does not do: dependents other than pods (no served kind has
// owners besides pods), owners other than ReplicaSets and DaemonSets,
// blockOwnerDeletion enforcement (any dependent holds a foreground
// deletion, not only those that block), and cluster-scoped owners.
package garbagecollector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/loop"
)

// Name is the controller's name.
const Name = "garbage-collector-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// Config builds a Collector.
type Config struct {
	// Client reads and writes pods, ReplicaSets and DaemonSets. Required.
	Client kubernetes.Interface
	// Clock paces Run; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Informers, when set, is where Run takes the informers that wake it;
	// Run starts it. nil: Run builds its own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Collector deletes orphaned pods. Passes do not overlap.
type Collector struct {
	cfg Config
	log *slog.Logger
	mu  sync.Mutex
}

// New checks cfg and builds a Collector.
func New(cfg Config) (*Collector, error) {
	if err := loop.Check(loop.Settings{
		Package: "garbagecollector", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg, log: cfg.Logger.With("controller", Name)}, nil
}

// ownerKinds are the owners the collector can look up.
var ownerKinds = map[[2]string]bool{{"apps", "ReplicaSet"}: true, {"apps", "DaemonSet"}: true}

func knownKind(group, kind string) bool { return ownerKinds[[2]string{group, kind}] }

// Sync makes one pass (see the package documentation) and blocks until its
// writes are done. The error joins the failures; each is retried by the
// next pass.
func (g *Collector) Sync(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	cs := g.cfg.Client
	// Pods first: every owner a listed pod names existed before the owner
	// lists below, unless it has been deleted since.
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	owners, err := g.listOwners(ctx)
	if err != nil {
		return err
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	// referenced counts, per owner being deleted, the pods still naming it
	// after this pass.
	referenced := map[OwnerKey]int{}
	// fresh holds the owners read again in this pass.
	fresh := map[OwnerKey]bool{}
	var errs []error
	for i := range items {
		pod := &items[i]
		action, remove := Judge(pod, owners, knownKind)
		if action == Delete && pod.DeletionTimestamp != nil {
			action = Keep // already on its way out
		}
		if action != Keep {
			action, remove = g.confirm(ctx, pod, owners, fresh)
		}
		switch action {
		case Delete:
			uid := pod.UID
			background := metav1.DeletePropagationBackground
			err := cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &background,
			})
			switch {
			case err == nil:
				g.log.Info("deleted pod whose owners are gone", "pod", pod.Namespace+"/"+pod.Name)
			case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
				// NotFound: already gone; Conflict: a new pod of that name.
				errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
		case Trim:
			if err := g.trim(ctx, pod, remove); err != nil {
				errs = append(errs, err)
			} else {
				pod.OwnerReferences = slices.DeleteFunc(pod.OwnerReferences, func(r metav1.OwnerReference) bool {
					return slices.ContainsFunc(remove, func(x metav1.OwnerReference) bool { return x.UID == r.UID })
				})
			}
		}
		for _, ref := range pod.OwnerReferences {
			key, ok := ownerKey(pod.Namespace, ref)
			if o, exists := owners[key]; ok && exists && o.UID == ref.UID && o.Deleting {
				referenced[key]++
			}
		}
	}
	errs = append(errs, g.finalizeOwners(ctx, owners, referenced)...)
	return errors.Join(errs...)
}

// ownerKey is the key of ref's owner; ok is false for kinds the
// collector does not know.
func ownerKey(namespace string, ref metav1.OwnerReference) (OwnerKey, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || !knownKind(gv.Group, ref.Kind) {
		return OwnerKey{}, false
	}
	return OwnerKey{Group: gv.Group, Kind: ref.Kind, Namespace: namespace, Name: ref.Name}, true
}

// listOwners lists every ReplicaSet and DaemonSet.
func (g *Collector) listOwners(ctx context.Context) (map[OwnerKey]Owner, error) {
	cs := g.cfg.Client
	owners := map[OwnerKey]Owner{}
	add := func(kind string, m metav1.ObjectMeta) {
		owners[OwnerKey{Group: "apps", Kind: kind, Namespace: m.Namespace, Name: m.Name}] = Owner{
			UID: m.UID, Deleting: m.DeletionTimestamp != nil, Finalizers: m.Finalizers,
		}
	}
	rs, err := cs.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing replicasets: %w", err)
	}
	for _, o := range rs.Items {
		add("ReplicaSet", o.ObjectMeta)
	}
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing daemonsets: %w", err)
	}
	for _, o := range ds.Items {
		add("DaemonSet", o.ObjectMeta)
	}
	return owners, nil
}

// getOwner reads one owner afresh; ok is false when it does not exist.
func (g *Collector) getOwner(ctx context.Context, key OwnerKey) (Owner, bool, error) {
	var m metav1.ObjectMeta
	var err error
	switch key.Kind {
	case "ReplicaSet":
		var o *appsv1.ReplicaSet
		if o, err = g.cfg.Client.AppsV1().ReplicaSets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err == nil {
			m = o.ObjectMeta
		}
	case "DaemonSet":
		var o *appsv1.DaemonSet
		if o, err = g.cfg.Client.AppsV1().DaemonSets(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{}); err == nil {
			m = o.ObjectMeta
		}
	default:
		return Owner{}, false, fmt.Errorf("unknown owner kind %s", key.Kind)
	}
	if apierrors.IsNotFound(err) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, err
	}
	return Owner{UID: m.UID, Deleting: m.DeletionTimestamp != nil, Finalizers: m.Finalizers}, true, nil
}

// confirm judges pod again against fresh reads of the owners it names
// (each owner read at most once per pass, recorded in fresh), so that only
// an owner really gone or deleting is acted upon. owners is updated with
// what was read.
func (g *Collector) confirm(ctx context.Context, pod *corev1.Pod, owners map[OwnerKey]Owner, fresh map[OwnerKey]bool) (Action, []metav1.OwnerReference) {
	for _, ref := range pod.OwnerReferences {
		key, ok := ownerKey(pod.Namespace, ref)
		if !ok || fresh[key] {
			continue
		}
		o, exists, err := g.getOwner(ctx, key)
		if err != nil {
			g.log.Warn("reading owner failed; leaving pod", "pod", pod.Namespace+"/"+pod.Name, "owner", key.Name, "err", err)
			return Keep, nil
		}
		if exists {
			owners[key] = o
		} else {
			delete(owners, key)
		}
		fresh[key] = true
	}
	return Judge(pod, owners, knownKind)
}

// trim removes the references in remove from pod.
func (g *Collector) trim(ctx context.Context, pod *corev1.Pod, remove []metav1.OwnerReference) error {
	refs := make([]any, len(remove))
	for i, r := range remove {
		refs[i] = map[string]any{"$patch": "delete", "uid": r.UID}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	_, err := g.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing owner references from pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// finalizeOwners removes the orphan and foregroundDeletion finalizers
// from owners being deleted that no pod refers to any more.
func (g *Collector) finalizeOwners(ctx context.Context, owners map[OwnerKey]Owner, referenced map[OwnerKey]int) []error {
	keys := make([]OwnerKey, 0, len(owners))
	for k, o := range owners {
		if (o.Orphaning() || o.Foreground()) && referenced[k] == 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	var errs []error
	for _, k := range keys {
		if err := g.dropFinalizers(ctx, k, owners[k].UID); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("finalizing %s %s/%s: %w", k.Kind, k.Namespace, k.Name, err))
		}
	}
	return errs
}

// dropFinalizers removes the propagation finalizers from one owner with a
// read-modify-write (a conflict waits for the next pass).
func (g *Collector) dropFinalizers(ctx context.Context, k OwnerKey, uid types.UID) error {
	strip := func(m *metav1.ObjectMeta) bool {
		if m.UID != uid {
			return false
		}
		before := len(m.Finalizers)
		m.Finalizers = slices.DeleteFunc(m.Finalizers, func(f string) bool {
			return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
		})
		return len(m.Finalizers) != before
	}
	switch k.Kind {
	case "ReplicaSet":
		c := g.cfg.Client.AppsV1().ReplicaSets(k.Namespace)
		o, err := c.Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil || !strip(&o.ObjectMeta) {
			return err
		}
		_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		return err
	case "DaemonSet":
		c := g.cfg.Client.AppsV1().DaemonSets(k.Namespace)
		o, err := c.Get(ctx, k.Name, metav1.GetOptions{})
		if err != nil || !strip(&o.ObjectMeta) {
			return err
		}
		_, err = c.Update(ctx, o, metav1.UpdateOptions{})
		return err
	}
	return nil
}

// Run passes at once, then whenever a pod, ReplicaSet or DaemonSet
// changes, and at least every ResyncPeriod, until ctx ends. Errors are
// logged.
func (g *Collector) Run(ctx context.Context) {
	factory := g.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(g.cfg.Client, 0)
	}
	loop.Run(ctx, loop.Config{
		Clock:  g.cfg.Clock,
		Resync: g.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{
			factory.Core().V1().Pods().Informer(),
			factory.Apps().V1().ReplicaSets().Informer(),
			factory.Apps().V1().DaemonSets().Informer(),
		},
		Start:  factory.Start,
		Sync:   g.Sync,
		Logger: g.log,
		Name:   "garbage collection",
	})
}
