// Package disruption keeps the status of PodDisruptionBudgets current, as
// upstream's disruption controller does, and holds the pure decisions the
// eviction subresource needs.
//
// For each budget, a pass (Sync) takes the pods its selector covers and
// the scales of their controllers (ReplicaSet spec.replicas) and writes
// status.currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed,
// disruptedPods, observedGeneration and the DisruptionAllowed condition
// (see Compute). A budget whose numbers cannot be computed, for example a
// maxUnavailable budget over DaemonSet pods (a DaemonSet has no scale), gets
// FailSafe: no disruptions allowed, condition reason SyncFailed. Records in
// disruptedPods live DeletionTimeout (2 min); Run passes again when the
// earliest one expires.
//
// Events (on the budget): Normal NoPods "No matching pods found", Warning
// CalculateExpectedPodCountFailed and UnmanagedPods; on a pod whose record
// expired, Warning NotDeleted. Events are recorded only with a status
// write, so a budget that does not change does not repeat them.
//
// The eviction subresource (not this package) uses Decide, Allowed,
// Selects and IgnoresBudgets: see eviction.go for what its handler must do.
//
// What the caller must do: give it a client that may list pods,
// ReplicaSets and budgets, update poddisruptionbudgets/status and create
// events; call Sync for one deterministic pass, or Run. One controller per
// cluster (leader election is the caller's).
//
// Cost model: a pass lists every budget, pod and ReplicaSet once and
// writes only the budgets whose status changed; Run coalesces the changes
// it hears of into at most one pending pass.
//
// What it does not do: the scale of controllers other than ReplicaSets
// (Deployments, StatefulSets and the scale subresource are not served),
// and the clean-up of stale DisruptionTarget pod conditions.
package disruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
)

// Name is the controller's name and event source.
const Name = "disruption-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// Config builds a Controller.
type Config struct {
	// Client reads pods, ReplicaSets and budgets and writes budget status
	// and events. Required.
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

// Controller computes budget status. Passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	recheck time.Time // earliest disruptedPods expiry seen by the last pass
	rec     *events.Recorder
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "disruption", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	return &Controller{cfg: cfg, log: log, rec: &events.Recorder{Client: cfg.Client.CoreV1(), Source: Name, Logger: log}}, nil
}

// Sync makes one pass over every budget at the clock's now and blocks
// until its writes are done. The error joins the failures; each is retried
// by the next pass.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	cs := c.cfg.Client
	pdbs, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing poddisruptionbudgets: %w", err)
	}
	c.recheck = time.Time{}
	if len(pdbs.Items) == 0 {
		return nil
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	rsList, err := cs.AppsV1().ReplicaSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing replicasets: %w", err)
	}
	scales := Scales{}
	for _, rs := range rsList.Items {
		var n int32 = 1
		if rs.Spec.Replicas != nil {
			n = *rs.Spec.Replicas
		}
		scales[rs.UID] = n
	}
	byNamespace := map[string][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	items := pdbs.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	var errs []error
	for i := range items {
		if err := c.syncBudget(ctx, &items[i], byNamespace[items[i].Namespace], scales, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// syncBudget computes and writes one budget's status.
func (c *Controller) syncBudget(ctx context.Context, pdb *policyv1.PodDisruptionBudget, nsPods []*corev1.Pod, scales Scales, now time.Time) error {
	var pods []*corev1.Pod
	for _, p := range nsPods {
		if Selects(pdb, p) {
			pods = append(pods, p)
		}
	}
	type event struct{ typ, reason, msg string }
	var events []event
	if len(pods) == 0 {
		events = append(events, event{corev1.EventTypeNormal, "NoPods", "No matching pods found"})
	}
	res, err := Compute(pdb, pods, scales, now)
	status := res.Status
	if err != nil {
		status = FailSafe(pdb, err, now)
		events = append(events, event{corev1.EventTypeWarning, "CalculateExpectedPodCountFailed",
			fmt.Sprintf("Failed to calculate the number of expected pods: %v", err)})
	} else if len(res.Unmanaged) > 0 {
		events = append(events, event{corev1.EventTypeWarning, "UnmanagedPods",
			fmt.Sprintf("Pods selected by this PodDisruptionBudget (selector: %v) were found to be unmanaged. "+
				"As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. "+
				"To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
				metav1.FormatLabelSelector(pdb.Spec.Selector))})
	}
	if !res.Recheck.IsZero() && (c.recheck.IsZero() || res.Recheck.Before(c.recheck)) {
		c.recheck = res.Recheck
	}
	if StatusEqual(pdb.Status, status) {
		return nil
	}
	updated := pdb.DeepCopy()
	updated.Status = status
	if _, err := c.cfg.Client.PolicyV1().PodDisruptionBudgets(pdb.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating status of poddisruptionbudget %s/%s: %w", pdb.Namespace, pdb.Name, err)
	}
	ref := corev1.ObjectReference{APIVersion: "policy/v1", Kind: "PodDisruptionBudget", Namespace: pdb.Namespace, Name: pdb.Name, UID: pdb.UID}
	for _, e := range events {
		c.rec.Record(ctx, ref, ref.Namespace, e.typ, e.reason, e.msg, now)
	}
	for _, name := range res.NotDeleted {
		c.rec.Record(ctx, corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pdb.Namespace, Name: name}, pdb.Namespace, corev1.EventTypeWarning, "NotDeleted",
			fmt.Sprintf("Pod was expected by PDB %s/%s to be deleted but it wasn't", pdb.Namespace, pdb.Name), now)
	}
	return nil
}

// nextDue is the earliest disruptedPods expiry the last pass saw; zero
// means none.
func (c *Controller) nextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recheck
}

// Run passes at once, then whenever a pod, ReplicaSet or budget changes,
// when a disruptedPods record expires, and at least every ResyncPeriod,
// until ctx ends. Errors are logged.
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
			factory.Policy().V1().PodDisruptionBudgets().Informer(),
		},
		Start:     factory.Start,
		Sync:      c.Sync,
		NextDue:   c.nextDue,
		DueMargin: time.Second,
		Logger:    c.log,
		Name:      "disruption",
	})
}
