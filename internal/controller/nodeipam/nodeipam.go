// Package nodeipam gives every node its pod CIDRs, as kube-controller-
// manager's node IPAM controller does with --allocate-node-cidrs and the
// RangeAllocator.
//
// It owns spec.podCIDR and spec.podCIDRs of nodes that have none: each
// gets one subnet from every configured cluster CIDR (one, or a dual-stack
// pair), in cluster-CIDR order, set with a patch. The API allows that field
// to change only from empty, so a CIDR, once given, stays until the node is
// deleted, when it goes back to the pool. The nodes are the record: on its
// first pass the controller occupies every CIDR nodes already hold, so a
// restarted controller never hands out a CIDR twice.
//
// The caller builds a Config (ParseFlags turns the kube-controller-manager
// flags into one), calls New, then either Run (a node watch plus a
// periodic full pass) or, in tests and the simulator, Sync for one
// deterministic pass. Only one controller may allocate for a cluster at a
// time (leader election is the caller's).
//
// Events, with upstream's reasons and the "cidrAllocator" source:
// CIDRNotAvailable when a cluster CIDR is exhausted (once per node until it
// gets a CIDR), and CIDRAssignmentFailed when the patch fails three times.
//
// Not here: --service-cluster-ip-range reservation (knode serves no
// Services), the CloudAllocator, and the node_ipam_controller metrics
// (Sets exposes the allocators' Size and Used for a caller that wants
// them).
package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	netutils "k8s.io/utils/net"

	"knode/internal/controller/nodeipam/cidrset"
)

// DefaultResyncPeriod is how often Run makes a full pass besides following
// the node watch; a full pass also retries nodes a CIDR could not be
// found for.
const DefaultResyncPeriod = 30 * time.Second

// Event reasons, upstream's.
const (
	ReasonCIDRNotAvailable     = "CIDRNotAvailable"
	ReasonCIDRAssignmentFailed = "CIDRAssignmentFailed"
)

// eventSource is the component upstream's range allocator records as.
const eventSource = "cidrAllocator"

// updateAttempts is how many times a CIDR patch is tried (upstream's
// cidrUpdateRetries).
const updateAttempts = 3

// ErrCannotOccupy is matched (errors.Is) by the error the first pass
// returns when a node already holds a pod CIDR the controller cannot
// record as used: unparsable, outside the cluster CIDRs, or more CIDRs
// than cluster CIDRs. Upstream refuses to start then, because handing out
// CIDRs without knowing all used ones could give one twice; so does Run.
var ErrCannotOccupy = errors.New("cannot occupy existing node pod CIDRs")

// Config builds a Controller.
type Config struct {
	// Client reads nodes, patches their CIDRs and writes events. Required.
	Client kubernetes.Interface
	// ClusterCIDRs are the ranges to divide: one, or an IPv4 and an IPv6
	// CIDR in either order. Their order is the order of spec.podCIDRs.
	// Required.
	ClusterCIDRs []*net.IPNet
	// NodeCIDRMaskSizeIPv4 is the prefix length of each node's IPv4 CIDR;
	// 0 means DefaultNodeCIDRMaskSizeIPv4 (24).
	NodeCIDRMaskSizeIPv4 int
	// NodeCIDRMaskSizeIPv6 is the prefix length of each node's IPv6 CIDR;
	// 0 means DefaultNodeCIDRMaskSizeIPv6 (64).
	NodeCIDRMaskSizeIPv6 int
	// Clock paces Run and stamps events; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the time between Run's full passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller allocates node pod CIDRs. Its methods are safe for
// concurrent use, but only one Run may be active.
type Controller struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	sets    []*cidrset.Set
	started bool // the first pass occupied every existing CIDR
	// held is what this controller has occupied per node name.
	held map[string]holding
	// notified lists nodes told CIDRNotAvailable since they last had a
	// chance of a CIDR.
	notified map[string]bool
	events   int64 // sequence for unique event names
}

type holding struct {
	uid   types.UID
	cidrs []string // as on the node, in cluster-CIDR order
}

// New checks cfg and builds a Controller. It fails, with upstream's
// messages, if the cluster CIDRs are not one CIDR or a dual-stack pair, if
// a node mask is shorter than its cluster mask, or if an IPv6 node mask is
// more than 16 bits longer than its cluster mask.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("nodeipam: Config.Client is required")
	}
	if cfg.NodeCIDRMaskSizeIPv4 == 0 {
		cfg.NodeCIDRMaskSizeIPv4 = DefaultNodeCIDRMaskSizeIPv4
	}
	if cfg.NodeCIDRMaskSizeIPv6 == 0 {
		cfg.NodeCIDRMaskSizeIPv6 = DefaultNodeCIDRMaskSizeIPv6
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ResyncPeriod <= 0 {
		cfg.ResyncPeriod = DefaultResyncPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	sets, err := newSets(cfg)
	if err != nil {
		return nil, fmt.Errorf("nodeipam: %w", err)
	}
	return &Controller{
		cfg:      cfg,
		log:      cfg.Logger.With("controller", "node-ipam"),
		sets:     sets,
		held:     map[string]holding{},
		notified: map[string]bool{},
	}, nil
}

// newSets checks the range part of cfg (masks already defaulted) and
// builds one empty allocator per cluster CIDR.
func newSets(cfg Config) ([]*cidrset.Set, error) {
	switch n := len(cfg.ClusterCIDRs); {
	case n == 0:
		return nil, errors.New("must specify --cluster-cidr if --allocate-node-cidrs is set")
	case n > 2:
		return nil, fmt.Errorf("length of clusterCIDRs is:%v more than max allowed of 2", n)
	case n == 2:
		if dual, err := netutils.IsDualStackCIDRs(cfg.ClusterCIDRs); err != nil || !dual {
			return nil, fmt.Errorf("len of ClusterCIDRs==%v and they are not configured as dual stack (at least one from each IPFamily", n)
		}
	}
	sets := make([]*cidrset.Set, len(cfg.ClusterCIDRs))
	for i, cidr := range cfg.ClusterCIDRs {
		if cidr == nil {
			return nil, fmt.Errorf("cluster CIDR %d is nil", i)
		}
		mask := cfg.NodeCIDRMaskSizeIPv4
		if netutils.IsIPv6CIDR(cidr) {
			mask = cfg.NodeCIDRMaskSizeIPv6
		}
		if ones, _ := cidr.Mask.Size(); ones > mask {
			return nil, fmt.Errorf("invalid --cluster-cidr %s, mask size of cluster CIDR must be less than or equal to --node-cidr-mask-size configured for CIDR family (%d)", cidr, mask)
		}
		s, err := cidrset.New(cidr, mask)
		if err != nil {
			return nil, err
		}
		sets[i] = s
	}
	return sets, nil
}

// Sets returns the allocators, one per cluster CIDR in Config order, for
// metrics. Callers must not change them.
func (c *Controller) Sets() []*cidrset.Set {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sets)
}

// Run follows the nodes until ctx ends: a full pass (Sync), then the node
// watch from that pass's list, and another full pass every ResyncPeriod or
// once the watch ends. It returns nil when ctx ends, or an error matching
// ErrCannotOccupy if the first pass finds CIDRs it cannot occupy (upstream
// refuses to start then). Other errors are logged and retried on the next
// pass.
func (c *Controller) Run(ctx context.Context) error {
	ticker := c.cfg.Clock.NewTicker(c.cfg.ResyncPeriod)
	defer ticker.Stop()
	for {
		rv, err := c.sync(ctx)
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, ErrCannotOccupy) && !c.isStarted() {
				return err
			}
			c.log.Warn("node IPAM pass failed", "err", err)
		}
		var events <-chan watch.Event
		var w watch.Interface
		if rv != "" {
			w, err = c.cfg.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
			if err != nil && ctx.Err() == nil {
				c.log.Warn("watching nodes failed", "err", err)
			} else if err == nil {
				events = w.ResultChan()
			}
		}
		if !c.follow(ctx, events, ticker.C()) {
			if w != nil {
				w.Stop()
			}
			return nil
		}
		if w != nil {
			w.Stop()
		}
	}
}

// follow handles watch events until the next tick (true) or the end of ctx
// (false). A closed or failed watch just waits for the tick.
func (c *Controller) follow(ctx context.Context, events <-chan watch.Event, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			node, isNode := ev.Object.(*corev1.Node)
			switch {
			case ev.Type == watch.Error:
				c.log.Warn("node watch failed", "status", apierrors.FromObject(ev.Object))
				events = nil
			case !isNode:
			case ev.Type == watch.Added || ev.Type == watch.Modified:
				c.mu.Lock()
				err := c.reconcile(ctx, node)
				c.mu.Unlock()
				if err != nil && ctx.Err() == nil {
					c.log.Warn("node IPAM failed", "node", node.Name, "err", err)
				}
			case ev.Type == watch.Deleted:
				c.mu.Lock()
				c.forget(node.Name, node.UID)
				c.mu.Unlock()
			}
		}
	}
}

func (c *Controller) isStarted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started
}

// Sync makes one full pass: it lists the nodes, occupies every CIDR they
// hold (the first pass fails with ErrCannotOccupy if one cannot be, and
// occupies nothing then), releases the CIDRs of nodes that are gone, and
// gives a CIDR to each node that has none, in name order. It returns the
// joined errors of the nodes it could not serve; the others are done.
func (c *Controller) Sync(ctx context.Context) error {
	_, err := c.sync(ctx)
	return err
}

// sync is Sync, also returning the list's resourceVersion ("" if the list
// failed).
func (c *Controller) sync(ctx context.Context) (string, error) {
	list, err := c.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing nodes: %w", err)
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })

	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		if err := c.start(nodes); err != nil {
			return list.ResourceVersion, err
		}
	}
	present := make(map[string]types.UID, len(nodes))
	for _, n := range nodes {
		present[n.Name] = n.UID
	}
	for name, h := range c.held {
		if uid, ok := present[name]; !ok || uid != h.uid {
			c.forget(name, h.uid)
		}
	}
	for name := range c.notified {
		if _, ok := present[name]; !ok {
			delete(c.notified, name)
		}
	}
	var errs []error
	for _, n := range nodes {
		if err := c.reconcile(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	return list.ResourceVersion, errors.Join(errs...)
}

// start occupies every CIDR the nodes hold, in fresh allocators that
// replace the controller's only if all succeed. Callers hold mu.
func (c *Controller) start(nodes []*corev1.Node) error {
	fresh := make([]*cidrset.Set, len(c.sets))
	for i, s := range c.sets {
		var err error
		if fresh[i], err = cidrset.New(s.ClusterCIDR(), s.MaskSize()); err != nil {
			return err
		}
	}
	held := map[string]holding{}
	var errs []error
	for _, n := range nodes {
		if len(n.Spec.PodCIDRs) == 0 {
			continue
		}
		if err := occupy(fresh, n); err != nil {
			errs = append(errs, err)
			continue
		}
		held[n.Name] = holding{uid: n.UID, cidrs: slices.Clone(n.Spec.PodCIDRs)}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrCannotOccupy, errors.Join(errs...))
	}
	c.sets, c.held, c.started = fresh, held, true
	return nil
}

// occupy marks a node's CIDRs used, with upstream's error messages. On
// error, nothing it marked is undone; callers that care use fresh sets.
func occupy(sets []*cidrset.Set, n *corev1.Node) error {
	for i, s := range n.Spec.PodCIDRs {
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err != nil {
			return fmt.Errorf("failed to parse node %s, CIDR %s", n.Name, s)
		}
		if i >= len(sets) {
			return fmt.Errorf("node:%s has an allocated cidr: %v at index:%v that does not exist in cluster cidrs configuration", n.Name, s, i)
		}
		if err := sets[i].Occupy(cidr); err != nil {
			return fmt.Errorf("failed to mark cidr[%v] at idx [%v] as occupied for node: %v: %w", cidr, i, n.Name, err)
		}
	}
	return nil
}

// forget releases what the controller holds for a node that is gone (or
// was replaced by a node of the same name). Callers hold mu.
func (c *Controller) forget(name string, uid types.UID) {
	delete(c.notified, name)
	h, ok := c.held[name]
	if !ok || (uid != "" && h.uid != uid) {
		return
	}
	delete(c.held, name)
	c.release(name, h.cidrs)
}

func (c *Controller) release(node string, cidrs []string) {
	for i, s := range cidrs {
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err != nil || i >= len(c.sets) {
			continue // never occupied
		}
		if err := c.sets[i].Release(cidr); err != nil {
			c.log.Warn("releasing CIDR failed", "node", node, "cidr", s, "err", err)
		}
	}
}

// reconcile makes sure one node's CIDRs are occupied, or gives it some.
// Callers hold mu.
func (c *Controller) reconcile(ctx context.Context, n *corev1.Node) error {
	h, known := c.held[n.Name]
	if known && h.uid != n.UID {
		// A new node under an old name: what the old one held is free.
		c.forget(n.Name, h.uid)
		known = false
	}
	if len(n.Spec.PodCIDRs) > 0 {
		delete(c.notified, n.Name)
		if known && slices.Equal(h.cidrs, n.Spec.PodCIDRs) {
			return nil
		}
		if known {
			// The node got other CIDRs than the ones reserved for it.
			c.forget(n.Name, n.UID)
		}
		if err := occupy(c.sets, n); err != nil {
			return err
		}
		c.held[n.Name] = holding{uid: n.UID, cidrs: slices.Clone(n.Spec.PodCIDRs)}
		return nil
	}
	if known {
		// Our patch is not in this (older) copy of the node yet.
		return nil
	}
	return c.allocate(ctx, n)
}

// allocate takes one CIDR from each set and patches them onto the node.
// Callers hold mu.
func (c *Controller) allocate(ctx context.Context, n *corev1.Node) error {
	cidrs := make([]string, 0, len(c.sets))
	for i, s := range c.sets {
		cidr, err := s.AllocateNext()
		if err != nil {
			c.release(n.Name, cidrs)
			if !c.notified[n.Name] {
				c.notified[n.Name] = true
				c.recordStatusChange(ctx, n, ReasonCIDRNotAvailable)
			}
			return fmt.Errorf("failed to allocate cidr from cluster cidr at idx:%v: %w", i, err)
		}
		cidrs = append(cidrs, cidr.String())
	}
	// Hold them now: a watch event for the node may arrive before the
	// patch returns.
	c.held[n.Name] = holding{uid: n.UID, cidrs: cidrs}
	delete(c.notified, n.Name)

	rv := n.ResourceVersion
	var err error
	for attempt := 0; attempt < updateAttempts; attempt++ {
		err = c.patchCIDRs(ctx, n.Name, n.UID, rv, cidrs)
		if err == nil {
			c.log.Info("set node pod CIDRs", "node", n.Name, "cidrs", cidrs)
			return nil
		}
		if apierrors.IsNotFound(err) {
			c.forget(n.Name, n.UID)
			return nil
		}
		if !apierrors.IsConflict(err) {
			continue
		}
		// The node changed since we read it: look again.
		current, getErr := c.cfg.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(getErr) || (getErr == nil && current.UID != n.UID):
			c.forget(n.Name, n.UID)
			if getErr == nil {
				return c.reconcile(ctx, current)
			}
			return nil
		case getErr != nil:
			err = getErr
		case len(current.Spec.PodCIDRs) > 0:
			// Someone else set them; keep theirs.
			c.forget(n.Name, n.UID)
			return c.reconcile(ctx, current)
		default:
			rv = current.ResourceVersion
		}
	}
	c.recordStatusChange(ctx, n, ReasonCIDRAssignmentFailed)
	// After a timeout the patch may yet have gone through; keeping the
	// CIDRs is safe, and a restart (or the node's next update, which shows
	// them) settles it.
	if !apierrors.IsServerTimeout(err) && !apierrors.IsTimeout(err) {
		c.forget(n.Name, n.UID)
	}
	return fmt.Errorf("failed to update node %s pod CIDRs %v after %d attempts: %w", n.Name, cidrs, updateAttempts, err)
}

// patchCIDRs sets spec.podCIDR and spec.podCIDRs if the node is still at
// resourceVersion rv (and still the node with uid).
func (c *Controller) patchCIDRs(ctx context.Context, name string, uid types.UID, rv string, cidrs []string) error {
	patch := map[string]any{
		"metadata": map[string]any{"uid": uid, "resourceVersion": rv},
		"spec":     map[string]any{"podCIDR": cidrs[0], "podCIDRs": cidrs},
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, body, metav1.PatchOptions{})
	return err
}

// recordStatusChange writes upstream's node status-change event. Failures
// are logged: an event is a courtesy.
func (c *Controller) recordStatusChange(ctx context.Context, n *corev1.Node, reason string) {
	now := c.cfg.Clock.Now()
	c.events++
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", n.Name, now.UnixNano()+c.events),
			Namespace: metav1.NamespaceDefault,
		},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
		Reason:         reason,
		Message:        fmt.Sprintf("Node %s status is now: %s", n.Name, reason),
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: eventSource},
		FirstTimestamp: metav1.NewTime(now),
		LastTimestamp:  metav1.NewTime(now),
		Count:          1,
	}
	if _, err := c.cfg.Client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		c.log.Warn("recording event failed", "node", n.Name, "reason", reason, "err", err)
	}
}
