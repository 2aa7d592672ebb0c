package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Reasons of the PodScheduled=False condition.
const (
	// ConditionUnschedulable: no node fits.
	ConditionUnschedulable = corev1.PodReasonUnschedulable
	// ConditionSchedulerError: the binding failed.
	ConditionSchedulerError = corev1.PodReasonSchedulerError
)

// defaultParallelism bounds the writes (binds, status patches, events) in
// flight at once.
const defaultParallelism = 16

// Binder assigns a pod to a node: it POSTs binding to the pod's binding
// subresource. An error that is a Kubernetes Conflict (the pod already has
// a node) or NotFound (the pod is gone) ends the pod's attempt quietly.
type Binder interface {
	Bind(ctx context.Context, binding *corev1.Binding) error
}

// ClientBinder binds through client-go's pods/binding.
func ClientBinder(client kubernetes.Interface) Binder {
	return clientBinder{client}
}

type clientBinder struct{ client kubernetes.Interface }

func (b clientBinder) Bind(ctx context.Context, binding *corev1.Binding) error {
	return b.client.CoreV1().Pods(binding.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
}

// Config builds a Scheduler.
type Config struct {
	// Client lists and watches nodes, pods and the storage objects, and
	// writes bindings, pod status, events, and the volume and claim
	// updates of PreBind. Required.
	Client kubernetes.Interface
	// Clock stamps conditions and events and paces backoff and Run's
	// periodic retry. Zero value: the real clock.
	Clock clock.WithTicker
	// SchedulerName is the spec.schedulerName of the pods this scheduler
	// takes, and its event source. Default "default-scheduler".
	SchedulerName string
	// Binder binds pods; nil means ClientBinder(Client).
	Binder Binder
	// Informers is where Run takes its informers from (nodes, pods,
	// persistentvolumeclaims, persistentvolumes, storageclasses, csinodes),
	// to share them; nil makes Run build its own. Run starts it with its
	// context. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Parallelism bounds the binds and status writes in flight at once.
	// Default 16.
	Parallelism int
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Scheduler binds pending pods to nodes. Its methods are safe for
// concurrent use, but Sync and Run are not meant to run together.
type Scheduler struct {
	client      kubernetes.Interface
	clock       clock.WithTicker
	name        string
	binder      Binder
	factory     informers.SharedInformerFactory
	parallelism int
	log         *slog.Logger
	events      *recorder

	// mu guards everything below. It is held while deciding, never while
	// writing to the API.
	mu    sync.Mutex
	snap  *Snapshot
	queue *queue
	// assumed holds the pods assumed onto a node whose binding is not
	// yet confirmed (by the informer in Run, by the next list in Sync).
	assumed map[types.NamespacedName]string
	// waiting are the assumed pods whose volume writes went through and
	// that wait for their claims to be bound before their own binding.
	waiting map[types.NamespacedName]*volumeWait
	// ready are outcomes the volume waits produced, to be written before
	// any new decision: a pod to bind, or a wait that failed.
	ready []outcome
	// checking and recheck keep checkWaiting from running inside itself.
	checking, recheck bool
	// wake tells Run that the queue may have work; capacity 1.
	wake chan struct{}
}

// New checks cfg and builds a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil {
		return nil, errors.New("scheduler: Config.Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SchedulerName == "" {
		cfg.SchedulerName = corev1.DefaultSchedulerName
	}
	if cfg.Binder == nil {
		cfg.Binder = ClientBinder(cfg.Client)
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = defaultParallelism
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	log := cfg.Logger.With("component", cfg.SchedulerName)
	return &Scheduler{
		client:      cfg.Client,
		clock:       cfg.Clock,
		name:        cfg.SchedulerName,
		binder:      cfg.Binder,
		factory:     cfg.Informers,
		parallelism: cfg.Parallelism,
		log:         log,
		events:      newRecorder(cfg.Client, cfg.Clock, cfg.SchedulerName, log),
		snap:        NewSnapshot(),
		queue:       newQueue(),
		assumed:     map[types.NamespacedName]string{},
		waiting:     map[types.NamespacedName]*volumeWait{},
		wake:        make(chan struct{}, 1),
	}, nil
}

// Sync makes one pass: it lists nodes, pods and the storage objects (a
// storage kind the server does not serve counts as empty), rebuilds its
// snapshot from them, and tries every pending pod once, by priority then
// age (backoff does not apply to an explicit pass). It returns when every
// binding, volume write, status patch and event of the pass is written; a
// pod whose claims are not bound yet is left pending for a later pass.
// The error joins the pass's failures (a failed list ends the pass at
// once); a pod that fits nowhere is not an error.
func (s *Scheduler) Sync(ctx context.Context) error {
	nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	st, err := listStorage(ctx, s.client)
	if err != nil {
		return err
	}
	s.reset(nodes.Items, pods.Items, st)
	err = s.drain(ctx)
	// The pass's bindings are done: those that went through are bound,
	// and pods still waiting for their volumes are decided again next
	// pass.
	s.mu.Lock()
	clear(s.assumed)
	clear(s.waiting)
	s.ready = nil
	s.mu.Unlock()
	return err
}

// reset replaces the snapshot and the queue with what was listed, keeping
// the failure counts of pods still pending.
func (s *Scheduler) reset(nodes []corev1.Node, pods []corev1.Pod, st *storageLists) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	snap := NewSnapshot()
	for i := range nodes {
		snap.SetNode(&nodes[i])
	}
	st.into(snap)
	pending := map[types.NamespacedName]bool{}
	uids := map[types.UID]bool{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" {
			snap.AddPod(p)
			continue
		}
		if s.isPending(p) {
			pi := NewPodInfo(p)
			pending[pi.Key] = true
			uids[p.UID] = true
			s.queue.upsert(pi, now)
		}
	}
	for key := range s.queue.pods {
		if !pending[key] {
			s.queue.remove(key)
		}
	}
	s.queue.activateAll()
	s.snap = snap
	clear(s.assumed)
	clear(s.waiting)
	s.ready = nil
	s.events.keepOnly(uids)
}

// ScheduleOne tries the first active pending pod and writes the outcome.
// It reports false when no pod was waiting. It does not list: the queue
// and snapshot are those of the last Sync, or Run's informers.
func (s *Scheduler) ScheduleOne(ctx context.Context) (bool, error) {
	o, ok := s.decide()
	if !ok {
		return false, nil
	}
	return true, s.apply(ctx, o)
}

// QueueStats counts the pending pods by where they wait.
type QueueStats struct {
	// Active pods are ready to be tried.
	Active int
	// BackingOff pods wait for their backoff after a failure.
	BackingOff int
	// Unschedulable pods wait for a change that may help.
	Unschedulable int
	// Assumed pods are placed but their binding is not confirmed
	// (including those waiting for their volumes).
	Assumed int
	// WaitingForVolumes pods had their volumes pre-bound or given the node
	// and wait for the claims to be bound before their own binding.
	WaitingForVolumes int
}

// Stats counts the pending pods.
func (s *Scheduler) Stats() QueueStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, b, u := s.queue.counts()
	return QueueStats{Active: a + len(s.ready), BackingOff: b, Unschedulable: u, Assumed: len(s.assumed), WaitingForVolumes: len(s.waiting)}
}

// isPending reports whether the pod is this scheduler's to place.
func (s *Scheduler) isPending(p *corev1.Pod) bool {
	name := p.Spec.SchedulerName
	if name == "" {
		name = corev1.DefaultSchedulerName
	}
	return p.Spec.NodeName == "" && name == s.name && p.DeletionTimestamp == nil &&
		!isTerminal(p) && len(p.Spec.SchedulingGates) == 0
}

// outcome is one decision, to be written. e is the queue's entry, only
// to be touched under mu; info is the pod as decided.
type outcome struct {
	e    *queued
	info *PodInfo
	node string // chosen node; "" when err is set
	err  error  // *FitError or ErrNoNodes
	// volumes are what to write before binding (PreBind); nil when the
	// pod's claims are all bound. Once written, the pod binds only when
	// they are bound.
	volumes *volumePlan
	// volumeErr is why waiting for the volumes failed: the pod went back
	// to the queue, and the error is to be reported.
	volumeErr error
}

// decide hands out the next outcome: one a volume wait produced, or the
// first active pod, decided. On a fit the pod is assumed onto its node
// (with its volume plan), else it goes back as unschedulable.
func (s *Scheduler) decide() (outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) > 0 {
		o := s.ready[0]
		s.ready = s.ready[1:]
		return o, true
	}
	e := s.queue.pop()
	if e == nil {
		return outcome{}, false
	}
	node, vols, err := schedule(e.info, s.snap)
	if err != nil {
		s.queue.failed(e, s.clock.Now())
		return outcome{e: e, info: e.info, err: err}, true
	}
	o := outcome{e: e, info: e.info, node: node}
	if vols != nil {
		o.volumes = s.reserveVolumes(vols, node)
	}
	s.snap.Assume(e.info, node)
	s.assumed[e.info.Key] = node
	return o, true
}

// drain decides every active pod in turn, writing up to parallelism
// outcomes at once, and waits for the writes.
func (s *Scheduler) drain(ctx context.Context) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	sem := make(chan struct{}, s.parallelism)
	for ctx.Err() == nil {
		o, ok := s.decide()
		if !ok {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := s.apply(ctx, o); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// apply writes a decision: the binding and its event, or the pod's
// unschedulable condition and event.
func (s *Scheduler) apply(ctx context.Context, o outcome) error {
	pod, key := o.info.Pod, o.info.Key
	if o.err != nil {
		return s.unschedulable(ctx, pod, ConditionUnschedulable, o.err.Error())
	}
	if o.volumeErr != nil {
		return s.volumesFailed(ctx, o)
	}
	if o.volumes != nil && !o.volumes.written {
		if bind, err := s.preBind(ctx, o); !bind {
			return err
		}
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: o.node},
	}
	err := s.binder.Bind(ctx, binding)
	if err == nil {
		s.events.record(ctx, pod, corev1.EventTypeNormal, "Scheduled", "Binding",
			fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, o.node))
		s.events.forget(pod.UID)
		return nil
	}
	// Give the node back; pods that failed may fit now.
	gone := apierrors.IsNotFound(err) || apierrors.IsConflict(err)
	s.mu.Lock()
	s.unassume(o)
	s.checkWaiting()
	now := s.clock.Now()
	s.queue.moveAll(now)
	if !gone {
		s.queue.retry(o.e, now)
	}
	s.mu.Unlock()
	s.signal()
	if gone {
		s.log.Info("binding not needed", "pod", key.String(), "node", o.node, "err", err)
		return nil
	}
	err = fmt.Errorf("binding pod %s to node %s: %w", key, o.node, err)
	if werr := s.unschedulable(ctx, pod, ConditionSchedulerError, err.Error()); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// unschedulable sets PodScheduled=False with reason and message, unless
// the pod already says so, and records a FailedScheduling event. A pod
// gone meanwhile is not an error.
func (s *Scheduler) unschedulable(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	s.events.record(ctx, pod, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", message)
	cond, changed := podScheduledFalse(pod, reason, message, s.clock.Now())
	if !changed {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting PodScheduled on pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// podScheduledFalse returns the PodScheduled=False condition to set and
// whether the pod's conditions differ from it. An existing False condition
// keeps its lastTransitionTime. The condition observes the pod's
// generation, when the pod has one.
func podScheduledFalse(pod *corev1.Pod, reason, message string, now time.Time) (corev1.PodCondition, bool) {
	want := corev1.PodCondition{
		Type:               corev1.PodScheduled,
		ObservedGeneration: pod.Generation,
		Status:             corev1.ConditionFalse,
		Reason:             reason,
		Message:            message,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
	}
	for _, have := range pod.Status.Conditions {
		if have.Type != corev1.PodScheduled {
			continue
		}
		if have.Status != want.Status {
			return want, true
		}
		want.LastTransitionTime = have.LastTransitionTime
		want.LastProbeTime = have.LastProbeTime
		return want, have.Reason != want.Reason || have.Message != want.Message || have.ObservedGeneration != want.ObservedGeneration
	}
	return want, true
}

// unassume gives back what deciding o took: the pod's place on its node
// and its volume assumptions. Call it under mu.
func (s *Scheduler) unassume(o outcome) {
	key := o.info.Key
	if s.assumed[key] == o.node {
		delete(s.assumed, key)
		delete(s.waiting, key)
		if node, ok := s.snap.NodeOf(key); ok && node == o.node {
			s.snap.RemovePod(key)
		}
	}
	if o.volumes != nil {
		s.snap.restore(o.volumes)
	}
}

// signal wakes Run.
func (s *Scheduler) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
