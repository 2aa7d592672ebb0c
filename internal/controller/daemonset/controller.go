// Package daemonset is the DaemonSet controller: it keeps one pod of every
// apps/v1 DaemonSet on each node the DaemonSet should run on, and keeps
// the DaemonSet's status current.
//
// For each DaemonSet a pass (Sync):
//   - claims pods as upstream does (ClaimPods): orphans the selector
//     matches are adopted, pods it controls that the selector no longer
//     matches are released;
//   - decides per node (ShouldRun, Manage): a node is eligible when the
//     template's nodeSelector and required node affinity match it and the
//     pod, with the automatic DaemonSet tolerations (AddTolerations:
//     not-ready and unreachable NoExecute, the pressure and unschedulable
//     NoSchedule taints, network-unavailable for host-network pods)
//     tolerates its NoSchedule and NoExecute taints. So a cordoned node
//     gets a daemon pod and a node with another NoSchedule taint does not.
//     A missing pod is created (NewPod: required node affinity to exactly
//     that node through matchFields metadata.name, spec.nodeName empty;
//     the scheduler binds it); extra pods on a node, pods on nodes it must
//     leave (untolerated NoExecute taint, selector no longer matching) and
//     finished pods are deleted; failed pods are deleted with a per-node
//     back-off (1 s doubling to 15 min) against agents that keep
//     rejecting them;
//   - creates nothing on a node that is shutting down gracefully
//     (ShuttingDown: Ready False, KubeletNotReady, "node is shutting
//     down" in the message), whose agent would only reject the pod; its
//     pods are kept (a failed one is still deleted, and not replaced),
//     and creation resumes once the node is Ready again. Status still
//     counts the node as one that should run a pod;
//   - when nothing else needed doing, rolls out a changed template
//     (RollingUpdate strategy, maxUnavailable; OnDelete does nothing);
//   - writes status (see Status) with observedGeneration.
//
// A pod being deleted still holds its node: the replacement is created
// once it is gone. A DaemonSet being deleted is left alone (its pods are
// the garbage collector's).
//
// Events (on the DaemonSet): Normal SuccessfulCreate "Created pod: <name>",
// SuccessfulDelete "Deleted pod: <name>", SucceededDaemonPod; Warning
// FailedCreate "Error creating: <error>", FailedDelete, FailedDaemonPod
// "Found failed daemon pod <ns>/<name> on node <node>, will try to kill
// it".
//
// What the caller must do: give it a client that may list nodes and
// DaemonSets, update their status, list, create, patch and delete pods,
// and create events; call Sync for one deterministic pass on the injected
// clock, or Run. One controller per cluster.
//
// Cost model: a pass lists every DaemonSet, node and pod once and
// evaluates each DaemonSet against each node (O(daemonsets × nodes)), then
// writes only what must change.
//
// What it does not do: ControllerRevisions and rollback (the
// controller-revision-hash label is a hash of the template), maxSurge
// (rolling updates never surge), and the deletion of bound pods on nodes
// that no longer exist (pod garbage collection's job).
package daemonset

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
const Name = "daemonset-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// Back-off on deleting failed daemon pods, per DaemonSet and node.
const (
	FailedPodBackoffInitial = time.Second
	FailedPodBackoffMax     = 15 * time.Minute
)

// Config builds a Controller.
type Config struct {
	// Client reads nodes, DaemonSets and pods and writes DaemonSet
	// status, pods and events. Required.
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

// Controller runs DaemonSets. Passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	next    time.Time
	backoff map[string]backoff // by "<ds uid>/<node>"
	rec     *events.Recorder
}

type backoff struct {
	delay time.Duration
	last  time.Time
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "daemonset", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	rec := &events.Recorder{Client: cfg.Client.CoreV1(), Source: Name, Logger: log}
	return &Controller{cfg: cfg, log: log, backoff: map[string]backoff{}, rec: rec}, nil
}

// Sync makes one pass over every DaemonSet at the clock's now and blocks
// until its writes are done. The error joins the failures; each is retried
// by the next pass.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	cs := c.cfg.Client
	dsList, err := cs.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing daemonsets: %w", err)
	}
	c.next = time.Time{}
	if len(dsList.Items) == 0 {
		return nil
	}
	nodeList, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	podList, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	nodes := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[i] = &nodeList.Items[i]
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	byNamespace := map[string][]*corev1.Pod{}
	for i := range podList.Items {
		p := &podList.Items[i]
		byNamespace[p.Namespace] = append(byNamespace[p.Namespace], p)
	}
	items := dsList.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].Namespace != items[j].Namespace {
			return items[i].Namespace < items[j].Namespace
		}
		return items[i].Name < items[j].Name
	})
	var errs []error
	for i := range items {
		ds := &items[i]
		if ds.DeletionTimestamp != nil {
			continue
		}
		if err := c.syncOne(ctx, ds, nodes, byNamespace[ds.Namespace], now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// wakeAt asks Run to pass again at t.
func (c *Controller) wakeAt(t time.Time) {
	if !t.IsZero() && (c.next.IsZero() || t.Before(c.next)) {
		c.next = t
	}
}

func (c *Controller) syncOne(ctx context.Context, ds *appsv1.DaemonSet, nodes []*corev1.Node, pods []*corev1.Pod, now time.Time) error {
	claim := ClaimPods(ds, pods)
	adopted, errs := ownership.Settle(ctx, c.cfg.Client.CoreV1(), ds, controllerKind, claim.Adopt, claim.Release, pods)
	for _, p := range adopted {
		claim.Add(p)
	}
	for _, ps := range claim.ByNode {
		sortOldestFirst(ps)
	}

	hash := Hash(ds)
	plan := Manage(ds, nodes, claim.ByNode)
	toDelete := plan.Delete
	for _, p := range plan.Failed {
		node := TargetNode(p)
		key := string(ds.UID) + "/" + node
		b, seen := c.backoff[key]
		if seen && now.Sub(b.last) < b.delay {
			c.wakeAt(b.last.Add(b.delay))
			continue
		}
		switch {
		case !seen || now.Sub(b.last) > 2*FailedPodBackoffMax:
			b.delay = FailedPodBackoffInitial
		default:
			b.delay = min(2*b.delay, FailedPodBackoffMax)
		}
		b.last = now
		c.backoff[key] = b
		c.record(ctx, ds, corev1.EventTypeWarning, "FailedDaemonPod",
			fmt.Sprintf("Found failed daemon pod %s/%s on node %s, will try to kill it", p.Namespace, p.Name, node), now)
		toDelete = append(toDelete, p)
	}
	for _, p := range plan.Delete {
		if p.Status.Phase == corev1.PodSucceeded {
			c.record(ctx, ds, corev1.EventTypeNormal, "SucceededDaemonPod",
				fmt.Sprintf("Found succeeded daemon pod %s/%s on node %s, will try to delete it", p.Namespace, p.Name, TargetNode(p)), now)
		}
	}
	acted := len(plan.CreateOn) > 0 || len(toDelete) > 0
	if !acted {
		toDelete = RollingUpdate(ds, nodes, claim.ByNode, hash, now)
	}

	gone := map[*corev1.Pod]bool{}
	for _, p := range toDelete {
		uid := p.UID
		err := c.cfg.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			c.record(ctx, ds, corev1.EventTypeWarning, "FailedDelete", fmt.Sprintf("Error deleting: %v", err), now)
			errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		gone[p] = true
		c.record(ctx, ds, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted pod: "+p.Name, now)
	}
	for _, node := range plan.CreateOn {
		pod, err := c.cfg.Client.CoreV1().Pods(ds.Namespace).Create(ctx, NewPod(ds, node, hash), metav1.CreateOptions{})
		if err != nil {
			c.record(ctx, ds, corev1.EventTypeWarning, "FailedCreate", fmt.Sprintf("Error creating: %v", err), now)
			errs = append(errs, fmt.Errorf("creating a pod of daemonset %s/%s for node %s: %w", ds.Namespace, ds.Name, node, err))
			break
		}
		claim.ByNode[node] = append(claim.ByNode[node], pod)
		c.record(ctx, ds, corev1.EventTypeNormal, "SuccessfulCreate", "Created pod: "+pod.Name, now)
	}

	// Status counts the pods as they are after this pass's writes.
	after := map[string][]*corev1.Pod{}
	for node, ps := range claim.ByNode {
		for _, p := range ps {
			if !gone[p] {
				after[node] = append(after[node], p)
			}
		}
	}
	status, next := Status(ds, nodes, after, hash, now)
	c.wakeAt(next)
	if !StatusEqual(ds.Status, status) {
		updated := ds.DeepCopy()
		updated.Status = status
		if _, err := c.cfg.Client.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("updating status of daemonset %s/%s: %w", ds.Namespace, ds.Name, err))
		}
	}
	return errors.Join(errs...)
}

// record writes one event about ds; a failure is only logged.
func (c *Controller) record(ctx context.Context, ds *appsv1.DaemonSet, typ, reason, msg string, now time.Time) {
	ref := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "DaemonSet", Namespace: ds.Namespace, Name: ds.Name, UID: ds.UID, ResourceVersion: ds.ResourceVersion}
	c.rec.Record(ctx, ref, ds.Namespace, typ, reason, msg, now)
}

// nextDue is when the last pass wants the next one; zero means no wish.
func (c *Controller) nextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// Run passes at once, then whenever a DaemonSet, node or pod changes, when
// a back-off ends or a pod is due to become available, and at least every
// ResyncPeriod, until ctx ends. Errors are logged.
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
			factory.Core().V1().Nodes().Informer(),
			factory.Apps().V1().DaemonSets().Informer(),
		},
		Start:     factory.Start,
		Sync:      c.Sync,
		NextDue:   c.nextDue,
		DueMargin: time.Second,
		Logger:    c.log,
		Name:      "daemonset",
	})
}
