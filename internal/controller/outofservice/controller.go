// Package outofservice watches over the node.kubernetes.io/out-of-service
// taint, which an operator puts on a node known to be off so that its pods
// are force-deleted and its volumes force-detached (non-graceful node
// shutdown). It is knode's own controller; upstream has none. It only
// records events on the Node; it never adds or removes the taint.
//
// Each pass (Sync) lists the nodes and, for every node carrying the taint
// key (any value or effect), reads its Lease (kube-node-lease/<node>) and
// counts the pods bound to it (every pod object whose spec.nodeName is the
// node, whatever its phase, being deleted or not). Then (Decide):
//
//   - Warning OutOfServiceNodeAlive, once per addition of the taint, when
//     the taint is newly seen on a node whose Lease is still being renewed
//     (renewTime + leaseDurationSeconds after now): the node may still be
//     running, and detaching its volumes may corrupt data. A taint removed
//     and added again warns again.
//   - Normal OutOfServiceTaintRemovable, once each time the tainted node
//     becomes Ready, when it is Ready and no pods are bound to it: the
//     message gives the kubectl command that removes the taint. While pods
//     remain, the event waits until the last one is gone.
//
// Events go to namespace "default" with involvedObject kind Node, as the
// node lifecycle controller records node events.
//
// Memory: which nodes were seen tainted, and whether the Ready event was
// recorded, is kept in memory only. After a restart every taint already
// present is newly seen once: a node still renewing its Lease is warned
// about again, and a Ready, empty, tainted node is announced again.
//
// What the caller must do: give it a client that may list nodes, get
// leases in kube-node-lease, list pods (with a spec.nodeName field
// selector) and create events; call Sync for one pass on the injected
// clock, or Run. One controller per cluster (leader election is the
// caller's).
//
// Cost model: a pass lists the nodes; only for a tainted node does it get
// one Lease and list that node's pods, so a cluster without the taint
// costs one node list per pass. Run passes on every Node and Pod change it
// hears of (coalesced by the loop) and every ResyncPeriod. It does not
// wake on Lease renewals: a Lease only matters in the pass that first sees
// a taint, and that pass is woken by the Node change and reads the Lease
// then.
//
// What it does not do: remove the taint, ask a cloud provider whether the
// machine is off (knode node fence does), or warn when a tainted node
// starts renewing its Lease later (a node booting again after a real
// shutdown does that too).
package outofservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
	"knode/internal/volume"
)

// Name is the controller's name and event source.
const Name = "out-of-service-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// Config builds a Controller.
type Config struct {
	// Client reads nodes, leases and pods and writes events. Required.
	Client kubernetes.Interface
	// Clock gives now and paces Run; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Informers, when set, is where Run takes the Node and Pod informers
	// that wake it (shared with other controllers); Run starts it. nil:
	// Run builds its own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller records the out-of-service events. Passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger
	rec *events.Recorder

	mu  sync.Mutex
	mem Memory
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "outofservice", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	return &Controller{cfg: cfg, log: log, rec: &events.Recorder{Client: cfg.Client.CoreV1(), Source: Name, Logger: log}}, nil
}

// Sync makes one pass over the nodes at the clock's now and blocks until
// its events are written. A node whose Lease or pods cannot be read is
// left as it was for this pass; the error joins those failures.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	list, err := c.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var (
		tainted []*corev1.Node
		leases  = map[string]*coordinationv1.Lease{}
		pods    = map[string]int{}
		skipped = Memory{}
		errs    []error
	)
	for i := range list.Items {
		n := &list.Items[i]
		if !volume.OutOfService(n) {
			continue
		}
		lease, count, err := c.read(ctx, n.Name)
		if err != nil {
			errs = append(errs, err)
			if seen, ok := c.mem[n.Name]; ok {
				skipped[n.Name] = seen
			}
			continue
		}
		tainted = append(tainted, n)
		leases[n.Name], pods[n.Name] = lease, count
	}
	evs, mem := Decide(c.mem, tainted, leases, pods, now)
	for name, seen := range skipped {
		mem[name] = seen
	}
	c.mem = mem
	for _, ev := range evs {
		ref := corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: ev.Node, UID: ev.UID}
		c.rec.Record(ctx, ref, metav1.NamespaceDefault, ev.Type, ev.Reason, ev.Message, now)
		if ev.Type == corev1.EventTypeWarning {
			c.log.Warn("out-of-service taint on a node that still renews its lease", "node", ev.Node)
		} else {
			c.log.Info("out-of-service taint can be removed", "node", ev.Node)
		}
	}
	return errors.Join(errs...)
}

// read gets a node's Lease (nil if it has none) and counts the pods bound
// to it.
func (c *Controller) read(ctx context.Context, node string) (*coordinationv1.Lease, int, error) {
	lease, err := c.cfg.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, node, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		lease = nil
	case err != nil:
		return nil, 0, fmt.Errorf("getting the lease of node %s: %w", node, err)
	}
	list, err := c.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing the pods of node %s: %w", node, err)
	}
	return lease, len(list.Items), nil
}

// Run passes at once, then whenever a Node or Pod changes, and at least
// every ResyncPeriod, until ctx ends. Errors are logged.
func (c *Controller) Run(ctx context.Context) {
	factory := c.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.cfg.Client, 0)
	}
	loop.Run(ctx, loop.Config{
		Clock:  c.cfg.Clock,
		Resync: c.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{
			factory.Core().V1().Nodes().Informer(),
			factory.Core().V1().Pods().Informer(),
		},
		Start:  factory.Start,
		Sync:   c.Sync,
		Logger: c.log,
		Name:   "out-of-service",
	})
}
