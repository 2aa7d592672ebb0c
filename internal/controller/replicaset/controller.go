// Package replicaset is the ReplicaSet controller: it keeps spec.replicas
// pods running for every apps/v1 ReplicaSet and keeps its status current.
//
// For each ReplicaSet a pass (Sync):
//   - claims pods as upstream does (ClaimPods): active orphans its
//     selector matches are adopted (a controller ownerReference is
//     added), and pods it controls that the selector no longer matches are
//     released (the reference is removed). Another controller's pods are
//     never touched;
//   - creates pods from the template, named <rs>-<random> with the
//     ReplicaSet as controller (ownerReference controller=true,
//     blockOwnerDeletion=true), when it has fewer active pods than
//     replicas, stopping at the first failure; or deletes the surplus,
//     the pods it is cheapest to lose first (Rank: unscheduled, then
//     pending, then not Ready, then newest, ...). Pods being deleted do not
//     count, so an evicted or deleted pod is replaced at once;
//   - writes status: replicas, fullyLabeledReplicas, readyReplicas,
//     availableReplicas (minReadySeconds), terminatingReplicas,
//     observedGeneration, and the ReplicaFailure condition while creating
//     or deleting fails. The status counts the pods as they are after the
//     pass's own writes.
//
// A ReplicaSet being deleted is only claimed from and reported on; its
// pods are the garbage collector's.
//
// Events (on the ReplicaSet): Normal SuccessfulCreate "Created pod: <name>"
// and SuccessfulDelete "Deleted pod: <name>"; Warning FailedCreate "Error
// creating: <error>" and FailedDelete "Error deleting: <error>".
//
// What the caller must do: give it a client that may list ReplicaSets,
// update their status, list, create, patch and delete pods and create
// events; call Sync for one deterministic pass on the injected clock, or
// Run. One controller per cluster (leader election is the caller's).
//
// Cost model: a pass lists every ReplicaSet and pod once (through the
// API, so it never acts on a stale cache and needs no expectations), then
// writes only what must change. Run coalesces the changes it hears of into
// at most one pending pass.
//
// What it does not do: Deployments (not served), the ReplicaSet scale
// subresource, and upstream's slow-start batching (creation is sequential
// and stops at the first error instead).
package replicaset

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
	"knode/internal/controller/ownership"
)

// Name is the controller's name and event source.
const Name = "replicaset-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// Config builds a Controller.
type Config struct {
	// Client reads and writes ReplicaSets, pods and events. Required.
	Client kubernetes.Interface
	// Clock gives now and paces Run; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Informers, when set, is where Run takes the informers that wake it
	// (shared with other controllers); Run starts it. nil: Run builds its
	// own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller runs ReplicaSets. Passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu   sync.Mutex
	next time.Time // when the last pass expects a pod to become available
	rec  *events.Recorder
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "replicaset", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	return &Controller{cfg: cfg, log: log, rec: &events.Recorder{Client: cfg.Client.CoreV1(), Source: Name, Logger: log}}, nil
}

// Sync makes one pass over every ReplicaSet at the clock's now and blocks
// until its writes are done. The error joins the failures; each is retried
// by the next pass.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	cs := c.cfg.Client
	rsList, err := cs.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing replicasets: %w", err)
	}
	c.next = time.Time{}
	if len(rsList.Items) == 0 {
		return nil
	}
	podList, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	byNamespace := map[string][]*corev1.Pod{}
	for i := range podList.Items {
		p := &podList.Items[i]
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	items := rsList.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	var errs []error
	for i := range items {
		next, err := c.syncOne(ctx, &items[i], byNamespace[items[i].Namespace], now)
		if err != nil {
			errs = append(errs, err)
		}
		if !next.IsZero() && (c.next.IsZero() || next.Before(c.next)) {
			c.next = next
		}
	}
	return errors.Join(errs...)
}

// syncOne runs one ReplicaSet against the pods of its namespace. Adopted
// pods are replaced in pods, so a later ReplicaSet of the pass sees them
// owned.
func (c *Controller) syncOne(ctx context.Context, rs *appsv1.ReplicaSet, pods []*corev1.Pod, now time.Time) (time.Time, error) {
	claim := ClaimPods(rs, pods)
	adopted, errs := ownership.Settle(ctx, c.cfg.Client.CoreV1(), rs, controllerKind, claim.Adopt, claim.Release, pods)
	owned := append(claim.Owned, adopted...)

	var manageErr error
	creating := false
	if rs.DeletionTimestamp == nil {
		create, remove := Scale(rs, owned, now)
		creating = create > 0
		for range create {
			pod, err := c.cfg.Client.CoreV1().Pods(rs.Namespace).Create(ctx, NewPod(rs), metav1.CreateOptions{})
			if err != nil {
				manageErr = err
				c.record(ctx, rs, corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Error creating: %v", err), now)
				break
			}
			owned = append(owned, pod)
			c.record(ctx, rs, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+pod.Name, now)
		}
		gone := map[*corev1.Pod]bool{}
		for _, p := range remove {
			uid := p.UID
			err := c.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) {
				manageErr = err
				c.record(ctx, rs, corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("Error deleting: %v", err), now)
				continue
			}
			gone[p] = true
			c.record(ctx, rs, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+p.Name, now)
		}
		if len(gone) > 0 {
			kept := owned[:0:0]
			for _, p := range owned {
				if !gone[p] {
					kept = append(kept, p)
				}
			}
			owned = kept
		}
	}
	if manageErr != nil {
		errs = append(errs, fmt.Errorf("replicaset %s/%s: %w", rs.Namespace, rs.Name, manageErr))
	}

	status, next := Status(rs, owned, claim.Terminating, manageErr, creating, now)
	if !StatusEqual(rs.Status, status) {
		updated := rs.DeepCopy()
		updated.Status = status
		if _, err := c.cfg.Client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating status of replicaset %s/%s: %w", rs.Namespace, rs.Name, err))
		}
	}
	return next, errors.Join(errs...)
}

// record writes one event about rs; a failure is only logged.
func (c *Controller) record(ctx context.Context, rs *appsv1.ReplicaSet, typ, reason, msg string, now time.Time) {
	ref := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Namespace: rs.Namespace, Name: rs.Name, UID: rs.UID, ResourceVersion: rs.ResourceVersion}
	c.rec.Record(ctx, ref, rs.Namespace, typ, reason, msg, now)
}

// nextDue is when the last pass wants the next one; zero means no wish.
func (c *Controller) nextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// Run passes at once, then whenever a ReplicaSet or pod changes, when a
// pod is due to become available, and at least every ResyncPeriod, until
// ctx ends. Errors are logged.
func (c *Controller) Run(ctx context.Context) {
	factory := c.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.cfg.Client, 0)
	}
	loop.Run(ctx, loop.Config{
		Clock:  c.cfg.Clock,
		Resync: c.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{
			factory.Core().V1().Pods().Informer(),
			factory.Apps().V1().ReplicaSets().Informer(),
		},
		Start:     factory.Start,
		Sync:      c.Sync,
		NextDue:   c.nextDue,
		DueMargin: time.Second,
		Logger:    c.log,
		Name:      "replicaset",
	})
}
