// Package podgc is the pod garbage collector, upstream's
// "pod-garbage-collector-controller" (section 10 of the reference): it
// force-deletes the pods nobody else will finish deleting.
//
// A pass (Sync) lists every pod and node through the API and follows
// upstream's four paths, in this order (Plan is the pure core):
//   - terminated: while more pods than TerminatedPodThreshold have
//     finished (phase Succeeded or Failed), the surplus goes, evicted pods
//     first, then the oldest by creationTimestamp;
//   - out-of-service: pods being deleted on a node that is not Ready and
//     carries the node.kubernetes.io/out-of-service taint (any effect or
//     value) go at once: the operator has said the node is off, so no
//     agent will confirm;
//   - orphaned: pods bound to a node that does not exist. A node name first
//     seen missing is quarantined for Quarantine (40 s) so that a node
//     being registered is not taken for gone; a pass after that confirms
//     with a direct GET of the node (NotFound), then its pods go, with the
//     DisruptionTarget condition (reason DeletionByPodGC, message "PodGC:
//     node no longer exists");
//   - unscheduled: pods being deleted that were never bound to a node.
//
// Force-deleting is what upstream does: a pod that has not finished is
// first marked phase Failed through a strategic-merge patch of pods/status
// (with the condition, for an orphan), then it is deleted with grace
// period 0, so the API server removes it at once (a pod with finalizers
// stays until they are removed, as upstream). The delete carries a UID
// precondition, which upstream's does not: a pod replaced under the same
// name meanwhile is left alone. Every attempt counts in
// pod_gc_collector_force_delete_pods_total{namespace,reason}, every
// failure in pod_gc_collector_force_delete_pod_errors_total; a pod already
// gone is no failure. No events are recorded, as upstream records none.
//
// What the caller must do: give it a client that may list pods and nodes,
// get nodes, patch pods/status and delete pods. Then call Sync for one
// deterministic pass on the injected clock (tests, the simulator), or Run.
// One controller per cluster (leader election is the caller's); Sync and
// Run keep the same quarantine.
//
// Cadence: like upstream, Run passes every Period (20 s) and does not
// react to changes, so it registers no informers. A quarantine that ends
// between two passes is acted on at the next one; with the defaults (40 s
// being two periods) the two coincide.
//
// Cost model: a pass lists all pods and nodes once, GETs each node whose
// quarantine ended, and makes up to two writes per pod it deletes, one
// after another (upstream deletes terminated and out-of-service pods in
// parallel).
//
// What it does not do: it keeps no cache and no work queue, retries a
// failed deletion only at the next pass, and neither evicts pods (the
// taint eviction controller does) nor taints nodes.
package podgc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"knode/internal/controller/loop"
)

// Name is the controller's name (upstream's; its --controllers alias is
// "podgc").
const Name = "pod-garbage-collector-controller"

// Defaults, upstream's.
const (
	// DefaultPeriod is gcCheckPeriod: the time between passes.
	DefaultPeriod = 20 * time.Second
	// DefaultQuarantine is quarantineTime: how long a missing node name
	// waits before it is checked with a GET.
	DefaultQuarantine = 40 * time.Second
	// DefaultTerminatedPodThreshold is --terminated-pod-gc-threshold's
	// default.
	DefaultTerminatedPodThreshold = 12500
)

// ErrMetricsRegistered is wrapped by New when Config.Metrics already holds
// the controller's series (for example a second controller on one
// registry).
var ErrMetricsRegistered = errors.New("podgc: metrics already registered")

// Config builds a Controller.
type Config struct {
	// Client lists pods and nodes, gets nodes, patches pods/status and
	// deletes pods. Required.
	Client kubernetes.Interface
	// Clock gives now for every pass and paces Run. Zero value: the real
	// clock.
	Clock clock.WithTicker
	// TerminatedPodThreshold is --terminated-pod-gc-threshold as given:
	// how many finished pods may exist before the oldest are deleted; a
	// value <= 0 turns the terminated path off (the other three still
	// run). nil means DefaultTerminatedPodThreshold.
	TerminatedPodThreshold *int
	// Period is the time between Run's passes; 0 means DefaultPeriod.
	// Must not be negative.
	Period time.Duration
	// Quarantine is how long a node name missing from the node list waits
	// before a GET confirms it gone; 0 means DefaultQuarantine. Must not be
	// negative.
	Quarantine time.Duration
	// Metrics receives the controller's series; nil registers none (they
	// are still counted).
	Metrics prometheus.Registerer
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller force-deletes the pods described in the package
// documentation. Its methods are safe for concurrent use; passes do not
// overlap.
type Controller struct {
	client     kubernetes.Interface
	clock      clock.WithTicker
	threshold  int
	period     time.Duration
	quarantine time.Duration
	log        *slog.Logger
	metrics    *metrics

	// mu is held for a whole pass and guards what follows.
	mu sync.Mutex
	// waiting is the orphan path's quarantine.
	waiting Quarantine
	// last is when the last pass started; zero before the first.
	last time.Time
}

// New checks cfg, fills its defaults and builds a Controller, registering
// its metrics on cfg.Metrics.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("podgc: Config.Client is required")
	}
	if cfg.Period < 0 {
		return nil, fmt.Errorf("podgc: Config.Period %v must not be negative", cfg.Period)
	}
	if cfg.Quarantine < 0 {
		return nil, fmt.Errorf("podgc: Config.Quarantine %v must not be negative", cfg.Quarantine)
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Quarantine == 0 {
		cfg.Quarantine = DefaultQuarantine
	}
	threshold := DefaultTerminatedPodThreshold
	if cfg.TerminatedPodThreshold != nil {
		threshold = *cfg.TerminatedPodThreshold
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := newMetrics()
	if err := m.register(cfg.Metrics); err != nil {
		return nil, err
	}
	return &Controller{
		client:     cfg.Client,
		clock:      cfg.Clock,
		threshold:  threshold,
		period:     cfg.Period,
		quarantine: cfg.Quarantine,
		log:        cfg.Logger.With("controller", Name),
		metrics:    m,
		waiting:    Quarantine{},
	}, nil
}

// Sync makes one pass at the clock's now (see the package documentation)
// and blocks until its writes are done. The error joins the failures of
// the pass; each is retried by the next pass. When a list fails nothing
// else is done, and the quarantine is unchanged.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	c.last = now

	podList, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	nodeList, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	pods := make([]*corev1.Pod, len(podList.Items))
	for i := range podList.Items {
		pods[i] = &podList.Items[i]
	}
	nodes := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[i] = &nodeList.Items[i]
	}

	var errs []error
	waiting, check := Observe(c.waiting, pods, nodes, now, c.quarantine)
	c.waiting = waiting
	gone := map[string]bool{}
	for _, name := range check {
		_, err := c.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone[name] = true
		case err != nil:
			// Its pods start a new quarantine at the next pass, as
			// upstream's.
			errs = append(errs, fmt.Errorf("checking node %s: %w", name, err))
		}
	}

	for _, d := range Plan(pods, nodes, gone, c.threshold) {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if err := c.forceDelete(ctx, d, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// forceDelete marks d's pod Failed unless it has finished, then deletes it
// with grace period 0, counting the attempt and any failure. A pod already
// gone is no failure.
func (c *Controller) forceDelete(ctx context.Context, d Deletion, now time.Time) error {
	p := d.Pod
	ns, reason := p.Namespace, string(d.Reason)
	c.metrics.deletions.WithLabelValues(ns, reason).Inc()
	c.log.Info("force deleting pod", "pod", p.Namespace+"/"+p.Name, "reason", reason)
	pods := c.client.CoreV1().Pods(p.Namespace)
	err := func() error {
		if patch, ok := MarkFailed(p, d.Reason, now); ok {
			if _, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
				return err
			}
		}
		uid := p.UID
		return pods.Delete(ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
	}()
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	c.metrics.errors.WithLabelValues(ns, reason).Inc()
	return fmt.Errorf("force deleting pod %s/%s (%s): %w", p.Namespace, p.Name, reason, err)
}

// NextDue is when the next pass is due: Period after the last pass
// started, or earlier when a quarantine ends before that. Before the first
// pass it is the clock's now.
func (c *Controller) NextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last.IsZero() {
		return c.clock.Now()
	}
	due := c.last.Add(c.period)
	if end := c.waiting.Next(); !end.IsZero() && end.Before(due) {
		due = end
	}
	return due
}

// Run passes at once and then every Period until ctx ends; it blocks
// until then. Failed passes are logged.
func (c *Controller) Run(ctx context.Context) {
	loop.Run(ctx, loop.Config{
		Clock:  c.clock,
		Resync: c.period,
		Sync:   c.Sync,
		Logger: c.log,
		Name:   "podgc",
	})
}
