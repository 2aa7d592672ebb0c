// Package cloudnode keeps nodes in step with the machines behind them, as
// the cloud-controller-manager's cloud node lifecycle controller and
// cloud-node controller do, through a cloudprovider.Interface.
//
// Each pass (Sync) lists the nodes and, in name order:
//
//   - initializes every node carrying the
//     node.cloudprovider.kubernetes.io/uninitialized taint from the
//     instance metadata: spec.providerID (if empty), the instance-type,
//     zone and region labels (stable and beta keys), additional labels,
//     then status.addresses; and removes the taint. Event "Synced".
//   - removes the node.cloudprovider.kubernetes.io/shutdown taint from
//     every Ready node;
//   - for every node whose Ready condition is not True (False, Unknown or
//     missing), asks the cloud: if the instance no longer exists, deletes
//     the Node (event "DeletingNode"); if it exists but is shut down, adds
//     the shutdown taint (NoSchedule). A node that waits for
//     initialization without a provider ID is left alone for its first
//     minute.
//
// The caller builds a Config with a provider, calls New, then Run (a
// ticker on the injected clock, every MonitorPeriod) or Sync for one
// deterministic pass. Only one controller may run per cluster (leader
// election is the caller's).
//
// What it does not do: Unknown conditions and NoExecute taints (the node
// lifecycle controller owns them); the periodic address refresh of
// initialized nodes (upstream's every --node-status-update-frequency);
// routes, load balancers. Like upstream, the shutdown taint stays on a
// node that is not Ready even if its instance runs again; it goes when the
// node is Ready.
package cloudnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"knode/internal/cloudprovider"
)

// DefaultMonitorPeriod is the time between passes (--node-monitor-period).
const DefaultMonitorPeriod = 5 * time.Second

// Event reasons and sources, upstream's.
const (
	ReasonDeletingNode       = "DeletingNode"
	ReasonDeletingNodeFailed = "DeletingNodeFailed"
	ReasonSynced             = "Synced"

	lifecycleSource = "cloud-node-lifecycle-controller"
	initSource      = "cloud-node-controller"
)

// writeAttempts bounds read-modify-write retries on conflict.
const writeAttempts = 5

// Config builds a Controller.
type Config struct {
	// Client reads, updates and deletes nodes and writes events. Required.
	Client kubernetes.Interface
	// Cloud answers questions about instances. Required.
	Cloud cloudprovider.Interface
	// Clock paces Run and decides the uninitialized grace; zero value
	// means the real clock.
	Clock clock.WithTicker
	// MonitorPeriod is the time between passes; 0 means
	// DefaultMonitorPeriod.
	MonitorPeriod time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller syncs nodes with the cloud. Its methods are safe for
// concurrent use, but passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	events int64 // sequence for unique event names
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("cloudnode: Config.Client is required")
	}
	if cfg.Cloud == nil {
		return nil, errors.New("cloudnode: Config.Cloud is required")
	}
	if cfg.MonitorPeriod < 0 {
		return nil, fmt.Errorf("cloudnode: --node-monitor-period %v must not be negative", cfg.MonitorPeriod)
	}
	if cfg.MonitorPeriod == 0 {
		cfg.MonitorPeriod = DefaultMonitorPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Controller{cfg: cfg, log: cfg.Logger.With("controller", "cloud-node")}, nil
}

// Run calls Sync every MonitorPeriod until ctx ends, logging errors.
func (c *Controller) Run(ctx context.Context) {
	ticker := c.cfg.Clock.NewTicker(c.cfg.MonitorPeriod)
	defer ticker.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("cloud node pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Sync makes one pass over all nodes (see the package documentation). It
// returns the joined errors of the nodes it could not handle; the cloud
// being unable to answer for a node is one, and the node is left as it
// was.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, err := c.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	nodes := list.Items
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var errs []error
	for i := range nodes {
		n := &nodes[i]
		if isUninitialized(n) {
			initialized, err := c.initialize(ctx, n)
			if err != nil {
				errs = append(errs, err)
			} else if initialized != nil {
				n = initialized
			}
		}
		if err := c.lifecycle(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lifecycle runs the lifecycle check on one node.
func (c *Controller) lifecycle(ctx context.Context, n *corev1.Node) error {
	switch lifecycleStep(n, c.cfg.Clock.Now()) {
	case stepNone, stepWait:
		return nil
	case stepUntaint:
		_, err := c.updateNode(ctx, n, func(n *corev1.Node) {
			n.Spec.Taints = withoutTaint(n.Spec.Taints, cloudprovider.TaintShutdown, corev1.TaintEffectNoSchedule)
		})
		if err != nil {
			return fmt.Errorf("removing the shutdown taint from node %s: %w", n.Name, err)
		}
		c.log.Info("node is ready again, removed the shutdown taint", "node", n.Name)
		return nil
	}

	exists, err := c.cfg.Cloud.InstanceExists(ctx, n)
	if err != nil {
		return fmt.Errorf("error checking if node %s exists: %w", n.Name, err)
	}
	shutdown, shutdownKnown := false, false
	var result error
	if exists {
		shutdown, err = c.cfg.Cloud.InstanceShutdown(ctx, n)
		switch {
		case errors.Is(err, cloudprovider.ErrNotImplemented):
			// Counts as not shut down.
		case err != nil:
			result = fmt.Errorf("error checking if node %s is shutdown: %w", n.Name, err)
		default:
			shutdownKnown = true
		}
	}
	switch verdict(exists, shutdown, shutdownKnown) {
	case verdictDelete:
		result = c.deleteNode(ctx, n)
	case verdictTaint:
		if !hasTaint(n, cloudprovider.TaintShutdown, corev1.TaintEffectNoSchedule) {
			if _, err := c.updateNode(ctx, n, func(n *corev1.Node) {
				n.Spec.Taints = withTaint(n.Spec.Taints, shutdownTaint)
			}); err != nil {
				result = fmt.Errorf("failed to apply shutdown taint to node %s: %w", n.Name, err)
			} else {
				c.log.Info("instance is shut down, tainted the node", "node", n.Name)
			}
		}
	}
	return result
}

// deleteNode deletes a node whose instance is gone, with upstream's
// events. The delete is conditional on the node's UID, so a node
// registered again under the same name meanwhile is spared.
func (c *Controller) deleteNode(ctx context.Context, n *corev1.Node) error {
	ref := corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}
	c.record(ctx, lifecycleSource, ref, corev1.EventTypeNormal, ReasonDeletingNode,
		fmt.Sprintf("Deleting node %s because it does not exist in the cloud provider", n.Name))
	err := c.cfg.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &n.UID},
	})
	if err == nil || apierrors.IsNotFound(err) {
		c.log.Info("deleted node, its instance is gone", "node", n.Name)
		return nil
	}
	c.record(ctx, lifecycleSource, ref, corev1.EventTypeWarning, ReasonDeletingNodeFailed,
		fmt.Sprintf("Failed deleting node %s: %v", n.Name, err))
	return fmt.Errorf("unable to delete node %q: %w", n.Name, err)
}

// initialize applies the instance metadata to an uninitialized node and
// returns the node as updated (nil, nil if the provider gave no metadata).
func (c *Controller) initialize(ctx context.Context, n *corev1.Node) (*corev1.Node, error) {
	md, err := c.cfg.Cloud.InstanceMetadata(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("failed to get instance metadata for node %s: %w", n.Name, err)
	}
	if md == nil {
		return nil, nil
	}
	if md.ProviderID == "" && n.Spec.ProviderID == "" {
		return nil, fmt.Errorf("cloud provider does not set node provider ID for node %s", n.Name)
	}
	// Check the addresses before untainting: a node whose --node-ip the
	// cloud does not know must stay uninitialized.
	if _, err := addresses(n, md.NodeAddresses); err != nil {
		return nil, fmt.Errorf("provided node ip for node %q is not valid: %w", n.Name, err)
	}
	updated, err := c.updateNode(ctx, n, func(current *corev1.Node) {
		*current = *initialize(current, md)
	})
	if err != nil {
		return nil, fmt.Errorf("initializing node %s: %w", n.Name, err)
	}
	if want, err := addresses(updated, md.NodeAddresses); err == nil && want != nil && !slices.Equal(want, updated.Status.Addresses) {
		if withAddresses, err := c.updateNodeStatus(ctx, updated, func(n *corev1.Node) { n.Status.Addresses = want }); err != nil {
			c.log.Warn("setting node addresses from the cloud failed", "node", n.Name, "err", err)
		} else {
			updated = withAddresses
		}
	}
	c.record(ctx, initSource, corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
		corev1.EventTypeNormal, ReasonSynced, "Node synced successfully")
	c.log.Info("initialized node from the cloud", "node", n.Name, "providerID", updated.Spec.ProviderID)
	return updated, nil
}

// updateNode applies change to the node and updates it, reading it again
// and retrying on conflict. It stops (NotFound) if the node was replaced
// by another of the same name.
func (c *Controller) updateNode(ctx context.Context, n *corev1.Node, change func(*corev1.Node)) (*corev1.Node, error) {
	return c.write(ctx, n, change, c.cfg.Client.CoreV1().Nodes().Update)
}

// updateNodeStatus is updateNode through the status subresource.
func (c *Controller) updateNodeStatus(ctx context.Context, n *corev1.Node, change func(*corev1.Node)) (*corev1.Node, error) {
	return c.write(ctx, n, change, c.cfg.Client.CoreV1().Nodes().UpdateStatus)
}

func (c *Controller) write(ctx context.Context, n *corev1.Node, change func(*corev1.Node),
	update func(context.Context, *corev1.Node, metav1.UpdateOptions) (*corev1.Node, error)) (*corev1.Node, error) {
	current := n.DeepCopy()
	var err error
	for attempt := 0; attempt < writeAttempts; attempt++ {
		if attempt > 0 {
			current, err = c.cfg.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			if current.UID != n.UID {
				return nil, apierrors.NewNotFound(corev1.Resource("nodes"), n.Name)
			}
		}
		change(current)
		var updated *corev1.Node
		updated, err = update(ctx, current, metav1.UpdateOptions{})
		if err == nil {
			return updated, nil
		}
		if !apierrors.IsConflict(err) {
			return nil, err
		}
	}
	return nil, err
}

// record writes an event about a node in the default namespace, as
// client-go's recorder does for cluster-scoped objects. Failures are
// logged: an event is a courtesy.
func (c *Controller) record(ctx context.Context, source string, ref corev1.ObjectReference, eventType, reason, message string) {
	now := c.cfg.Clock.Now()
	c.events++
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()+c.events),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject: ref,
		Reason:         reason,
		Message:        message,
		Type:           eventType,
		Source:         corev1.EventSource{Component: source},
		FirstTimestamp: metav1.NewTime(now),
		LastTimestamp:  metav1.NewTime(now),
		Count:          1,
	}
	if _, err := c.cfg.Client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		c.log.Warn("recording event failed", "node", ref.Name, "reason", reason, "err", err)
	}
}
