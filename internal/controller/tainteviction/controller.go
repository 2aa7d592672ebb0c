// Package tainteviction is the taint eviction controller,
// "taint-eviction-controller" (section 6 of the reference): it deletes the
// pods bound to a node that carries NoExecute taints the pods do not
// tolerate, after the time their tolerations allow.
//
// The rules (Decide is the pure core):
//   - A pod that does not tolerate every NoExecute taint of its node is
//     deleted at once.
//   - A pod that tolerates them all is deleted after the smallest
//     tolerationSeconds among the tolerations used (the first matching
//     toleration per taint); a toleration without tolerationSeconds lasts
//     forever, and if none used has one the pod stays.
//   - The countdown starts when the controller first sees the pod on the
//     tainted node, not at the taint's timeAdded, and is kept in memory
//     only: a new controller starts every countdown again. Once started it
//     is not moved by changes of taints or tolerationSeconds, unless a
//     taint appears that the pod does not tolerate (then: at once).
//   - The countdown is cancelled when the node loses its NoExecute taints,
//     when the pod comes to tolerate them forever, or when the pod goes.
//   - Deleting means: record the event, set the pod's DisruptionTarget
//     condition (reason DeletionByTaintManager) through a strategic-merge
//     patch of pods/status, then DELETE the pod with default options, so a
//     pod bound to a node gets its graceful deletion. It does not use the
//     Eviction API: PodDisruptionBudgets do not apply. A deletion that ran
//     is not repeated for the same countdown.
//
// Events: Normal TaintManagerEviction "Marking for deletion Pod <ns>/<name>"
// when a deletion starts and "Cancelling deletion of Pod <ns>/<name>" when
// a pending one is cancelled, in the pod's namespace, from the
// "taint-eviction-controller" source. Metrics:
// taint_eviction_controller_pod_deletions_total and
// taint_eviction_controller_pod_deletion_duration_seconds.
//
// Like upstream, the controller acts on changes: a node whose NoExecute
// taints changed, and a pod that is new or whose tolerations or node
// changed, are looked at again; nothing else is.
//
// What the caller must do: give it a client allowed to read nodes and
// pods, patch pods/status, delete pods and create events. Then either call
// Sync to make one deterministic pass on the injected clock (tests, the
// simulator), or Run, which follows informers and the clock. Both keep
// the same memory, so a Sync after Run's passes finds nothing new.
//
// It does not taint nodes (the node lifecycle controller does), does not
// add tolerations (the DefaultTolerationSeconds admission plugin does) and
// does not finish graceful deletions (the node's agent, or pod GC, does).
package tainteviction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Name is the controller's name: its event source and reporting
// controller, and its name in --controllers.
const Name = "taint-eviction-controller"

// Condition values the controller sets on a pod before deleting it.
const (
	ConditionReason  = "DeletionByTaintManager"
	ConditionMessage = "Taint manager: deleting due to NoExecute taint"
	// EventReason is the reason of both events.
	EventReason = "TaintManagerEviction"
)

// deleteAttempts is how many times one deletion is tried in a pass before
// it is given up until the pod or its node changes again.
const deleteAttempts = 5

// ErrMetricsRegistered is wrapped by New when Config.Metrics already holds
// the controller's series (for example a second controller on one
// registry).
var ErrMetricsRegistered = errors.New("tainteviction: metrics already registered")

// Config builds a Controller.
type Config struct {
	// Client reads nodes and pods and writes pods and events. Required.
	Client kubernetes.Interface
	// Clock gives now for every pass and paces Run's timers. Zero value:
	// the real clock.
	Clock clock.WithTicker
	// Metrics receives the controller's series; nil registers none (they
	// are still counted).
	Metrics prometheus.Registerer
	// Informers is where Run takes its node and pod informers from, to
	// share them with other controllers; nil makes Run build its own.
	// Run calls Start on it with Run's context, which starts only the
	// informers not yet started. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller deletes pods from nodes with NoExecute taints they do not
// tolerate. Its methods are safe for concurrent use.
type Controller struct {
	client  kubernetes.Interface
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics
	factory informers.SharedInformerFactory

	// mu is held for a whole pass and guards everything below.
	mu    sync.Mutex
	queue *queue
	// nodes holds the NoExecute taints each known node had when last
	// looked at (nil: none).
	nodes map[string][]corev1.Taint
	// pods holds what each known pod looked like when last looked at, and
	// podsOnNode indexes them by spec.nodeName.
	pods       map[types.NamespacedName]seenPod
	podsOnNode map[string]map[types.NamespacedName]struct{}
	// events numbers the events recorded, keeping their names distinct.
	events int64
}

// seenPod is what the controller reacts to in a pod.
type seenPod struct {
	node        string
	tolerations []corev1.Toleration
}

// New checks cfg and builds a Controller, registering its metrics on
// cfg.Metrics.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("tainteviction: Config.Client is required")
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
		log:        cfg.Logger.With("controller", Name),
		metrics:    m,
		factory:    cfg.Informers,
		queue:      newQueue(),
		nodes:      map[string][]corev1.Taint{},
		pods:       map[types.NamespacedName]seenPod{},
		podsOnNode: map[string]map[types.NamespacedName]struct{}{},
	}, nil
}

// Sync makes one pass at the clock's now: it lists every node and pod
// through the client, reacts to what changed since the last pass, then
// deletes the pods whose time has come. It blocks until its writes are
// done. The error joins the failures of the pass; work that failed is
// retried when its pod or node next changes.
func (c *Controller) Sync(ctx context.Context) error {
	nodeList, err := c.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	podList, err := c.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	nodes := make(map[string]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	pods := make(map[types.NamespacedName]*corev1.Pod, len(podList.Items))
	for i := range podList.Items {
		p := &podList.Items[i]
		pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	v := view{
		node: func(name string) *corev1.Node { return nodes[name] },
		pod:  func(key types.NamespacedName) *corev1.Pod { return pods[key] },
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	// Look at everything listed and everything remembered: what is
	// remembered but not listed is gone.
	nodeNames := make([]string, 0, len(nodes)+len(c.nodes))
	for name := range nodes {
		nodeNames = append(nodeNames, name)
	}
	for name := range c.nodes {
		if nodes[name] == nil {
			nodeNames = append(nodeNames, name)
		}
	}
	podKeys := make([]types.NamespacedName, 0, len(pods)+len(c.pods))
	for key := range pods {
		podKeys = append(podKeys, key)
	}
	for key := range c.pods {
		if pods[key] == nil {
			podKeys = append(podKeys, key)
		}
	}
	return c.pass(ctx, v, nodeNames, podKeys)
}

// Pending returns the deletions waiting for their time, earliest first.
func (c *Controller) Pending() []Work {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue.list()
}

// NextDue returns when the earliest pending deletion is due; ok is false
// when nothing is pending. A driver of Sync (the simulator) advances its
// clock to it.
func (c *Controller) NextDue() (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue.next()
}

// view is where a pass reads the current objects: nil means gone.
type view struct {
	node func(name string) *corev1.Node
	pod  func(key types.NamespacedName) *corev1.Pod
}

// pass looks again at the named nodes and pods, in that order (node
// changes first, as upstream prioritises them), then fires what is due.
// The caller holds c.mu.
func (c *Controller) pass(ctx context.Context, v view, nodeNames []string, podKeys []types.NamespacedName) error {
	now := c.clock.Now()
	slices.Sort(nodeNames)
	nodeNames = slices.Compact(nodeNames)
	slices.SortFunc(podKeys, compareKeys)
	podKeys = slices.Compact(podKeys)

	handled := map[types.NamespacedName]bool{}
	for _, name := range nodeNames {
		c.observeNode(ctx, v, name, now, handled)
	}
	for _, key := range podKeys {
		if !handled[key] {
			c.observePod(ctx, key, v.pod(key), now)
		}
	}
	return c.fire(ctx, now)
}

// observeNode reacts to a change of the node's NoExecute taints by
// looking again at every known pod bound to it; those pods go into
// handled. A node that is gone is forgotten: its pods' pending deletions
// stay, as upstream's do.
func (c *Controller) observeNode(ctx context.Context, v view, name string, now time.Time, handled map[types.NamespacedName]bool) {
	node := v.node(name)
	if node == nil {
		delete(c.nodes, name)
		return
	}
	taints := NoExecuteTaints(node.Spec.Taints)
	if old, known := c.nodes[name]; known && equality.Semantic.DeepEqual(old, taints) {
		return
	}
	c.nodes[name] = taints
	keys := make([]types.NamespacedName, 0, len(c.podsOnNode[name]))
	for key := range c.podsOnNode[name] {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, compareKeys)
	for _, key := range keys {
		pod := v.pod(key)
		if pod == nil || pod.Spec.NodeName != name {
			continue // the pod pass sees the change
		}
		handled[key] = true
		c.remember(key, pod)
		c.process(ctx, key, taints, pod.Spec.Tolerations, now)
	}
}

// observePod reacts to a pod that is new, gone, or whose tolerations or
// node changed.
func (c *Controller) observePod(ctx context.Context, key types.NamespacedName, pod *corev1.Pod, now time.Time) {
	if pod == nil {
		c.forget(key)
		c.cancel(ctx, key)
		return
	}
	if seen, known := c.pods[key]; known && seen.node == pod.Spec.NodeName && equality.Semantic.DeepEqual(seen.tolerations, pod.Spec.Tolerations) {
		return
	}
	c.remember(key, pod)
	if pod.Spec.NodeName == "" {
		return
	}
	taints := c.nodes[pod.Spec.NodeName]
	if len(taints) == 0 {
		return
	}
	c.process(ctx, key, taints, pod.Spec.Tolerations, now)
}

// process applies Decide to one pod.
func (c *Controller) process(ctx context.Context, key types.NamespacedName, taints []corev1.Taint, tolerations []corev1.Toleration, now time.Time) {
	d := Decide(taints, tolerations, c.queue.pending(key), now)
	switch d.Op {
	case Cancel:
		c.cancel(ctx, key)
	case Schedule:
		c.queue.add(Work{Pod: key, CreatedAt: d.CreatedAt, FireAt: d.FireAt})
	case Reschedule:
		c.cancel(ctx, key)
		c.queue.add(Work{Pod: key, CreatedAt: d.CreatedAt, FireAt: d.FireAt})
	}
}

// cancel drops the pod's work, recording the cancel event when a
// deletion was pending.
func (c *Controller) cancel(ctx context.Context, key types.NamespacedName) {
	if c.queue.cancel(key) {
		c.event(ctx, key, "Cancelling deletion of Pod "+key.String())
	}
}

func (c *Controller) remember(key types.NamespacedName, pod *corev1.Pod) {
	if seen, known := c.pods[key]; known && seen.node != pod.Spec.NodeName {
		c.unindex(key, seen.node)
	}
	c.pods[key] = seenPod{node: pod.Spec.NodeName, tolerations: pod.Spec.Tolerations}
	if pod.Spec.NodeName != "" {
		set := c.podsOnNode[pod.Spec.NodeName]
		if set == nil {
			set = map[types.NamespacedName]struct{}{}
			c.podsOnNode[pod.Spec.NodeName] = set
		}
		set[key] = struct{}{}
	}
}

func (c *Controller) forget(key types.NamespacedName) {
	if seen, known := c.pods[key]; known {
		c.unindex(key, seen.node)
		delete(c.pods, key)
	}
}

func (c *Controller) unindex(key types.NamespacedName, node string) {
	if set := c.podsOnNode[node]; set != nil {
		delete(set, key)
		if len(set) == 0 {
			delete(c.podsOnNode, node)
		}
	}
}

// fire deletes the pods whose work is due, earliest first.
func (c *Controller) fire(ctx context.Context, now time.Time) error {
	var errs []error
	for _, w := range c.queue.due(now) {
		done, err := c.evict(ctx, w)
		c.queue.finish(w, done)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// evict records the deletion event, then marks and deletes the pod, up to
// deleteAttempts times. done reports a deletion that went through; a pod
// already gone is neither done nor an error.
func (c *Controller) evict(ctx context.Context, w Work) (done bool, err error) {
	c.log.Info("deleting pod", "pod", w.Pod.String())
	c.event(ctx, w.Pod, "Marking for deletion Pod "+w.Pod.String())
	for range deleteAttempts {
		err = c.markAndDelete(ctx, w.Pod)
		if err == nil {
			c.metrics.deletions.Inc()
			c.metrics.latency.Observe(c.clock.Since(w.FireAt).Seconds())
			return true, nil
		}
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return false, fmt.Errorf("deleting pod %s: %w", w.Pod, err)
}

// markAndDelete sets the DisruptionTarget condition, unless the pod
// already has it, and deletes the pod.
func (c *Controller) markAndDelete(ctx context.Context, key types.NamespacedName) error {
	pods := c.client.CoreV1().Pods(key.Namespace)
	pod, err := pods.Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cond, changed := disruptionTarget(pod.Status.Conditions, c.clock.Now()); changed {
		patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
		if err != nil {
			return err
		}
		if _, err := pods.Patch(ctx, key.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			return err
		}
	}
	return pods.Delete(ctx, key.Name, metav1.DeleteOptions{})
}

// disruptionTarget returns the DisruptionTarget condition to set and
// whether the pod's conditions lack it. An existing condition of the same
// status keeps its lastTransitionTime.
func disruptionTarget(conditions []corev1.PodCondition, now time.Time) (corev1.PodCondition, bool) {
	want := corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		Status:             corev1.ConditionTrue,
		Reason:             ConditionReason,
		Message:            ConditionMessage,
		LastTransitionTime: metav1.NewTime(now),
	}
	for _, have := range conditions {
		if have.Type != corev1.DisruptionTarget {
			continue
		}
		if have.Status != want.Status {
			return want, true
		}
		want.LastTransitionTime = have.LastTransitionTime
		want.LastProbeTime = have.LastProbeTime
		return want, have.Reason != want.Reason || have.Message != want.Message
	}
	return want, true
}

// event records a Normal TaintManagerEviction event about the pod, the
// way client-go's recorder writes one. A failure is logged, not returned.
func (c *Controller) event(ctx context.Context, pod types.NamespacedName, message string) {
	now := metav1.NewTime(c.clock.Now())
	c.events++
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()+c.events),
			Namespace: pod.Namespace,
		},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name},
		Reason:              EventReason,
		Message:             message,
		Type:                corev1.EventTypeNormal,
		Source:              corev1.EventSource{Component: Name},
		ReportingController: Name,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
	if _, err := c.client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		c.log.Debug("recording event failed", "pod", pod.String(), "message", message, "err", err)
	}
}

func compareKeys(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}
