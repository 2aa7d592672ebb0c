// Package garbagecollector deletes the dependents whose owners are gone,
// following ownerReferences, as upstream's garbage collector does, for the
// kinds knode serves that have owners:
//   - dependents: pods, PersistentVolumeClaims and apps/v1
//     ControllerRevisions;
//   - owners: apps/v1 ReplicaSets, DaemonSets and StatefulSets, and core/v1
//     Pods (a StatefulSet's claims of a scaled-down ordinal are owned by
//     the pod).
//
// A pass (Sync) lists the dependents (claims and revisions, then pods),
// then the owners (the pods already listed serve as pod owners), and for
// every dependent decides (Judge):
//   - every owner it names is gone (no object of that name, or one with
//     another UID): the dependent is deleted, with its normal graceful
//     deletion. This is background propagation: deleting a StatefulSet
//     deletes its pods and revisions after the StatefulSet is gone. An
//     owner being deleted still exists: a claim owned by a terminating
//     pod waits until the pod is gone;
//   - some owners are gone and another stays: the references to the gone
//     ones are removed;
//   - an owner being deleted with the "orphan" finalizer (propagationPolicy
//     Orphan): the reference to it is removed and the dependent stays;
//     once no dependent refers to that owner, the collector removes the
//     finalizer;
//   - an owner being deleted with the "foregroundDeletion" finalizer
//     (propagationPolicy Foreground): its dependents are deleted; once none
//     refers to it any more, the collector removes the finalizer.
//
// Before acting on an owner's absence the collector reads that owner
// again, so an owner created after the list is never taken for gone. A
// reference to a kind the collector does not know, or to one the server
// does not serve (its list answers NotFound), counts as a present owner; a
// dependent kind the server does not serve has no objects.
//
// What the caller must do: give it a client that may list, patch and
// delete pods, PersistentVolumeClaims and ControllerRevisions, list, get
// and update ReplicaSets, DaemonSets and StatefulSets, and get pods (to
// read a pod owner again) and update them (only to remove those two
// finalizers from a pod owner); call Sync for one pass, or Run. One
// collector per cluster. The orphan and
// foreground cases need the API server to put those finalizers on an owner
// deleted with that propagationPolicy, as upstream's does.
//
// A pass lists every dependent and owner kind (six lists, pods once):
// owner kinds are listed even when no dependent names them, since an owner
// being deleted with no dependents still waits for its finalizer to go.
//
// What it does not do: dependents other than those three kinds, owners
// other than those four, blockOwnerDeletion enforcement (any dependent
// holds a foreground deletion, not only those that block), cluster-scoped
// owners, and a dependency graph: a dependent goes only after its owner
// has left the API, so a chain (StatefulSet, pod, claim of a scaled-down
// ordinal) is followed link by link over passes.
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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Client reads and writes the dependents and owners (see the package
	// documentation). Required.
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

// Collector deletes orphaned dependents. Passes do not overlap.
type Collector struct {
	cfg   Config
	log   *slog.Logger
	kinds map[groupKind]resource
	mu    sync.Mutex
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
	return &Collector{cfg: cfg, log: cfg.Logger.With("controller", Name), kinds: resources(cfg.Client)}, nil
}

// dependent is one listed object that may have owners.
type dependent struct {
	res *resource
	obj metav1.Object
}

func (d dependent) String() string {
	return d.res.plural + " " + d.obj.GetNamespace() + "/" + d.obj.GetName()
}

// pass is what one Sync knows.
type pass struct {
	owners map[OwnerKey]Owner
	// served are the owner kinds listed in this pass; a reference to
	// another kind counts as a present owner.
	served map[groupKind]bool
	// fresh holds the owners read again in this pass.
	fresh map[OwnerKey]bool
	// referenced counts, per owner being deleted, the dependents still
	// naming it after this pass.
	referenced map[OwnerKey]int
}

// known reports whether the pass can tell whether an owner of kind is
// there.
func (p *pass) known(group, kind string) bool { return p.served[groupKind{group, kind}] }

// ownerKey is the key of the owner ref names from namespace; ok is false
// for kinds the pass does not know.
func (p *pass) ownerKey(namespace string, ref metav1.OwnerReference) (OwnerKey, bool) {
	group, ok := refGroup(ref)
	if !ok || !p.known(group, ref.Kind) {
		return OwnerKey{}, false
	}
	return OwnerKey{Group: group, Kind: ref.Kind, Namespace: namespace, Name: ref.Name}, true
}

// Sync makes one pass (see the package documentation) and blocks until its
// writes are done. The error joins the failures; each is retried by the
// next pass.
func (g *Collector) Sync(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	// Dependents first: every owner a listed dependent names existed
	// before the owner lists below, unless it has been deleted since.
	deps, listed, err := g.listDependents(ctx)
	if err != nil {
		return err
	}
	p := &pass{fresh: map[OwnerKey]bool{}, referenced: map[OwnerKey]int{}}
	if p.owners, p.served, err = g.listOwners(ctx, listed); err != nil {
		return err
	}
	var errs []error
	for _, d := range deps {
		action, remove := p.judge(d.obj)
		if action != Keep {
			action, remove = g.confirm(ctx, p, d)
		}
		switch action {
		case Delete:
			uid := d.obj.GetUID()
			background := metav1.DeletePropagationBackground
			err := d.res.delete(ctx, d.obj.GetNamespace(), d.obj.GetName(), metav1.DeleteOptions{
				Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: &background,
			})
			switch {
			case err == nil:
				g.log.Info("deleted a dependent whose owners are gone", "kind", d.res.kind, "object", d.obj.GetNamespace()+"/"+d.obj.GetName())
			case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
				// NotFound: already gone; Conflict: a new object of that name.
				errs = append(errs, fmt.Errorf("deleting %s: %w", d, err))
			}
		case Trim:
			if err := g.trim(ctx, d, remove); err != nil {
				errs = append(errs, err)
			} else {
				d.obj.SetOwnerReferences(slices.DeleteFunc(d.obj.GetOwnerReferences(), func(r metav1.OwnerReference) bool {
					return slices.ContainsFunc(remove, func(x metav1.OwnerReference) bool { return x.UID == r.UID })
				}))
			}
		}
		for _, ref := range d.obj.GetOwnerReferences() {
			key, ok := p.ownerKey(d.obj.GetNamespace(), ref)
			if o, exists := p.owners[key]; ok && exists && o.UID == ref.UID && o.Deleting {
				p.referenced[key]++
			}
		}
	}
	errs = append(errs, g.finalizeOwners(ctx, p)...)
	return errors.Join(errs...)
}

// judge is Judge against what the pass knows, keeping a dependent that is
// already on its way out.
func (p *pass) judge(dep metav1.Object) (Action, []metav1.OwnerReference) {
	action, remove := Judge(dep, p.owners, p.known)
	if action == Delete && dep.GetDeletionTimestamp() != nil {
		return Keep, nil
	}
	return action, remove
}

// listDependents lists the objects of dependentKinds, in that order, each
// kind sorted by namespace and name, and returns them also by kind. A kind
// the server does not serve (its list is NotFound) is left out.
func (g *Collector) listDependents(ctx context.Context) ([]dependent, map[groupKind][]metav1.Object, error) {
	var deps []dependent
	listed := map[groupKind][]metav1.Object{}
	for _, gk := range dependentKinds {
		res := g.kinds[gk]
		objs, err := res.list(ctx)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing %s: %w", res.plural, err)
		}
		sort.Slice(objs, func(i, j int) bool {
			if objs[i].GetNamespace() != objs[j].GetNamespace() {
				return objs[i].GetNamespace() < objs[j].GetNamespace()
			}
			return objs[i].GetName() < objs[j].GetName()
		})
		listed[gk] = objs
		for _, o := range objs {
			deps = append(deps, dependent{res: &res, obj: o})
		}
	}
	return deps, listed, nil
}

// listOwners returns the objects of ownerKinds, taken from listed when
// there (pods) and listed otherwise, with the owner kinds the server
// serves (a kind whose list is NotFound, or absent from listed as a
// dependent, is left out).
func (g *Collector) listOwners(ctx context.Context, listed map[groupKind][]metav1.Object) (map[OwnerKey]Owner, map[groupKind]bool, error) {
	owners := map[OwnerKey]Owner{}
	served := map[groupKind]bool{}
	for _, gk := range ownerKinds {
		objs, ok := listed[gk]
		switch {
		case ok:
		case slices.Contains(dependentKinds, gk):
			continue // not served
		default:
			var err error
			objs, err = g.kinds[gk].list(ctx)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("listing %s: %w", g.kinds[gk].plural, err)
			}
		}
		served[gk] = true
		for _, o := range objs {
			owners[OwnerKey{Group: gk.group, Kind: gk.kind, Namespace: o.GetNamespace(), Name: o.GetName()}] = ownerOf(o)
		}
	}
	return owners, served, nil
}

func ownerOf(o metav1.Object) Owner {
	return Owner{UID: o.GetUID(), Deleting: o.GetDeletionTimestamp() != nil, Finalizers: o.GetFinalizers()}
}

// getOwner reads one owner afresh; ok is false when it does not exist.
func (g *Collector) getOwner(ctx context.Context, key OwnerKey) (Owner, bool, error) {
	res, found := g.kinds[groupKind{key.Group, key.Kind}]
	if !found {
		return Owner{}, false, fmt.Errorf("unknown owner kind %s", key.Kind)
	}
	o, err := res.get(ctx, key.Namespace, key.Name)
	if apierrors.IsNotFound(err) {
		return Owner{}, false, nil
	}
	if err != nil {
		return Owner{}, false, err
	}
	return ownerOf(o), true, nil
}

// confirm judges d again against fresh reads of the owners it names
// (each owner read at most once per pass, recorded in p.fresh), so that
// only an owner really gone or deleting is acted upon. p.owners is updated
// with what was read.
func (g *Collector) confirm(ctx context.Context, p *pass, d dependent) (Action, []metav1.OwnerReference) {
	for _, ref := range d.obj.GetOwnerReferences() {
		key, ok := p.ownerKey(d.obj.GetNamespace(), ref)
		if !ok || p.fresh[key] {
			continue
		}
		o, exists, err := g.getOwner(ctx, key)
		if err != nil {
			g.log.Warn("reading owner failed; leaving the dependent", "kind", d.res.kind, "object", d.obj.GetNamespace()+"/"+d.obj.GetName(), "owner", key.Kind+"/"+key.Name, "err", err)
			return Keep, nil
		}
		if exists {
			p.owners[key] = o
		} else {
			delete(p.owners, key)
		}
		p.fresh[key] = true
	}
	return p.judge(d.obj)
}

// trim removes the references in remove from d.
func (g *Collector) trim(ctx context.Context, d dependent, remove []metav1.OwnerReference) error {
	refs := make([]any, len(remove))
	for i, r := range remove {
		refs[i] = map[string]any{"$patch": "delete", "uid": r.UID}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": refs}})
	err := d.res.patch(ctx, d.obj.GetNamespace(), d.obj.GetName(), types.StrategicMergePatchType, patch)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing owner references from %s: %w", d, err)
	}
	return nil
}

// finalizeOwners removes the orphan and foregroundDeletion finalizers
// from owners being deleted that no dependent refers to any more.
func (g *Collector) finalizeOwners(ctx context.Context, p *pass) []error {
	keys := make([]OwnerKey, 0, len(p.owners))
	for k, o := range p.owners {
		if (o.Orphaning() || o.Foreground()) && p.referenced[k] == 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	var errs []error
	for _, k := range keys {
		if err := g.dropFinalizers(ctx, k, p.owners[k].UID); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("finalizing %s %s/%s: %w", k.Kind, k.Namespace, k.Name, err))
		}
	}
	return errs
}

// dropFinalizers removes the propagation finalizers from one owner with a
// read-modify-write (a conflict waits for the next pass).
func (g *Collector) dropFinalizers(ctx context.Context, k OwnerKey, uid types.UID) error {
	res, found := g.kinds[groupKind{k.Group, k.Kind}]
	if !found {
		return nil
	}
	o, err := res.get(ctx, k.Namespace, k.Name)
	if err != nil || o.GetUID() != uid {
		return err
	}
	before := o.GetFinalizers()
	after := slices.DeleteFunc(slices.Clone(before), func(f string) bool {
		return f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents
	})
	if len(after) == len(before) {
		return nil
	}
	o.SetFinalizers(after)
	return res.update(ctx, o)
}

// Run passes at once, then whenever a dependent or an owner changes, and
// at least every ResyncPeriod, until ctx ends. Errors are logged.
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
			factory.Core().V1().PersistentVolumeClaims().Informer(),
			factory.Apps().V1().ControllerRevisions().Informer(),
			factory.Apps().V1().ReplicaSets().Informer(),
			factory.Apps().V1().DaemonSets().Informer(),
			factory.Apps().V1().StatefulSets().Informer(),
		},
		Start:  factory.Start,
		Sync:   g.Sync,
		Logger: g.log,
		Name:   "garbage collection",
	})
}
