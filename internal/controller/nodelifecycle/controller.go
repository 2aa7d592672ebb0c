package nodelifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/nodelifecycle/queue"
)

// Defaults, as kube-controller-manager documents them. Upstream moved the
// monitor grace period to 50s in 1.32; knode keeps the documented 40s.
const (
	DefaultNodeMonitorPeriod         = 5 * time.Second
	DefaultNodeMonitorGracePeriod    = 40 * time.Second
	DefaultNodeStartupGracePeriod    = 60 * time.Second
	DefaultNodeEvictionRate          = 0.1
	DefaultSecondaryNodeEvictionRate = 0.01
	DefaultUnhealthyZoneThreshold    = 0.55
	DefaultLargeClusterSizeThreshold = 50
	DefaultWorkers                   = 8
	// NoExecuteTaintingPeriod is how often Run calls DoNoExecuteTaintingPass.
	NoExecuteTaintingPeriod = 100 * time.Millisecond
	// statusWriteTries bounds the attempts at one node's status write.
	statusWriteTries = 5
)

// ErrInvalidConfig is wrapped by New's error when Config is unusable.
var ErrInvalidConfig = errors.New("nodelifecycle: invalid config")

// Config builds a Controller. Zero values mean the defaults above. The
// rates have no zero to spare for "never": a negative rate means 0 nodes a
// second (for example --secondary-node-eviction-rate=0 maps to -1).
type Config struct {
	// Client writes node status, taints, pod status and events; with
	// Source nil it also feeds the informers. Required.
	Client kubernetes.Interface
	// Informers, when set, is a shared factory the caller starts after
	// New; when nil and Source is nil the controller builds and starts its
	// own.
	Informers informers.SharedInformerFactory
	// Source, when set, replaces the informers (see NewClientSource).
	Source Source
	// Clock times every pass and stamps every time written; zero value
	// means the real clock.
	Clock clock.WithTicker

	NodeMonitorPeriod         time.Duration // --node-monitor-period
	NodeMonitorGracePeriod    time.Duration // --node-monitor-grace-period
	NodeStartupGracePeriod    time.Duration // --node-startup-grace-period
	NodeEvictionRate          float64       // --node-eviction-rate
	SecondaryNodeEvictionRate float64       // --secondary-node-eviction-rate
	UnhealthyZoneThreshold    float64       // --unhealthy-zone-threshold
	LargeClusterSizeThreshold int           // --large-cluster-size-threshold

	// Workers bounds the nodes written to in parallel by one pass.
	Workers int
	// Registerer receives the node_collector metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// RateFlag maps the value of --node-eviction-rate or
// --secondary-node-eviction-rate to the Config field, where 0 means the
// default: a flag of 0 (no tainting) becomes a negative rate.
func RateFlag(r float64) float64 {
	if r == 0 {
		return -1
	}
	return r
}

// SetDefaults fills zero fields with the defaults.
func (c *Config) SetDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	setDefault(&c.NodeMonitorPeriod, DefaultNodeMonitorPeriod)
	setDefault(&c.NodeMonitorGracePeriod, DefaultNodeMonitorGracePeriod)
	setDefault(&c.NodeStartupGracePeriod, DefaultNodeStartupGracePeriod)
	setDefault(&c.NodeEvictionRate, DefaultNodeEvictionRate)
	setDefault(&c.SecondaryNodeEvictionRate, DefaultSecondaryNodeEvictionRate)
	setDefault(&c.UnhealthyZoneThreshold, DefaultUnhealthyZoneThreshold)
	setDefault(&c.LargeClusterSizeThreshold, DefaultLargeClusterSizeThreshold)
	setDefault(&c.Workers, DefaultWorkers)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate checks a defaulted Config; the field paths name the
// kube-controller-manager configuration fields.
func (c *Config) Validate() error {
	var errs field.ErrorList
	if c.Client == nil {
		errs = append(errs, field.Required(field.NewPath("client"), "a Kubernetes client is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"nodeMonitorPeriod", c.NodeMonitorPeriod},
		{"nodeMonitorGracePeriod", c.NodeMonitorGracePeriod},
		{"nodeStartupGracePeriod", c.NodeStartupGracePeriod},
	} {
		if d.v <= 0 {
			errs = append(errs, field.Invalid(field.NewPath(d.name), d.v.String(), "must be greater than 0"))
		}
	}
	if c.UnhealthyZoneThreshold <= 0 || c.UnhealthyZoneThreshold > 1 {
		errs = append(errs, field.Invalid(field.NewPath("unhealthyZoneThreshold"), c.UnhealthyZoneThreshold, "must be greater than 0 and at most 1"))
	}
	if c.LargeClusterSizeThreshold < 0 {
		errs = append(errs, field.Invalid(field.NewPath("largeClusterSizeThreshold"), c.LargeClusterSizeThreshold, "must be greater than or equal to 0"))
	}
	if c.Workers < 0 {
		errs = append(errs, field.Invalid(field.NewPath("workers"), c.Workers, "must be greater than 0"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errs.ToAggregate())
	}
	return nil
}

// Params returns the decision parameters of a defaulted Config.
func (c *Config) Params() Params {
	return Params{
		NodeMonitorGracePeriod:    c.NodeMonitorGracePeriod,
		NodeStartupGracePeriod:    c.NodeStartupGracePeriod,
		NodeEvictionRate:          max(c.NodeEvictionRate, 0),
		SecondaryNodeEvictionRate: max(c.SecondaryNodeEvictionRate, 0),
		UnhealthyZoneThreshold:    c.UnhealthyZoneThreshold,
		LargeClusterSizeThreshold: c.LargeClusterSizeThreshold,
	}
}

// Controller is the node lifecycle controller's shell. Its step methods may
// be called from different goroutines; each pass is synchronous.
type Controller struct {
	cfg     Config
	params  Params
	client  kubernetes.Interface
	src     Source
	inf     *informerSource // nil with a custom Source
	factory informers.SharedInformerFactory
	ownInf  bool // the controller built factory and starts it in Run
	clock   clock.WithTicker
	log     *slog.Logger
	metrics *metrics
	events  *eventWriter

	// passMu serialises monitor passes.
	passMu sync.Mutex
	// mu guards state and pendingPods; taken before qmu when both are held.
	mu          sync.Mutex
	state       State
	pendingPods []*corev1.Pod // newly bound pods whose marking failed

	// qmu guards queues, and is held through a tainting pass.
	qmu    sync.Mutex
	queues map[string]*queue.RateLimited
}

// New checks cfg and builds a Controller. With informers it registers
// them on the factory; nothing is started until Run.
func New(cfg Config) (*Controller, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	c := &Controller{
		cfg:     cfg,
		params:  cfg.Params(),
		client:  cfg.Client,
		src:     cfg.Source,
		clock:   cfg.Clock,
		log:     cfg.Logger.With("controller", "node-lifecycle-controller"),
		metrics: m,
		events:  &eventWriter{client: cfg.Client, clock: cfg.Clock, log: cfg.Logger},
		state: State{
			Health: map[string]*Health{}, Zones: map[string]ZoneState{}, Rates: map[string]float64{},
			Held: map[string]string{}, Retry: map[string]bool{},
		},
		queues: map[string]*queue.RateLimited{},
	}
	if c.src == nil {
		c.factory = cfg.Informers
		if c.factory == nil {
			c.factory = informers.NewSharedInformerFactory(cfg.Client, 0)
			c.ownInf = true
		}
		inf, err := newInformerSource(c.factory)
		if err != nil {
			return nil, err
		}
		c.src, c.inf = inf, inf
	}
	return c, nil
}

// Run starts the informers (when the controller owns them), waits for
// their caches, then runs a monitor pass at once and every
// NodeMonitorPeriod, a NoExecute tainting pass every 100ms, and the
// NoSchedule pass on every node change (with informers) or every
// NodeMonitorPeriod (with a custom Source). It returns nil when ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if c.inf != nil {
		if c.ownInf {
			c.factory.Start(ctx.Done())
		}
		if !cache.WaitForCacheSync(ctx.Done(), c.inf.synced...) {
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("nodelifecycle: informer caches did not sync")
		}
	}
	c.log.Info("starting")
	var wg sync.WaitGroup
	loop := func(period time.Duration, step func(context.Context) error, what string) {
		defer wg.Done()
		t := c.clock.NewTicker(period)
		defer t.Stop()
		for {
			if err := step(ctx); err != nil && ctx.Err() == nil {
				c.log.Error(what+" failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
		}
	}
	wg.Add(2)
	// The first pass is logged: a new leader's takeover is complete when
	// it has judged every node once.
	first := true
	monitor := func(ctx context.Context) error {
		passStart := c.clock.Now()
		err := c.MonitorNodeHealth(ctx)
		if first && err == nil {
			first = false
			c.log.Info("first monitor pass done", "took", c.clock.Since(passStart).Round(time.Millisecond))
		}
		return err
	}
	go loop(c.cfg.NodeMonitorPeriod, monitor, "monitor pass")
	go loop(NoExecuteTaintingPeriod, c.DoNoExecuteTaintingPass, "NoExecute tainting pass")
	if c.inf == nil {
		wg.Add(1)
		go loop(c.cfg.NodeMonitorPeriod, c.DoNoScheduleTaintingPass, "NoSchedule tainting pass")
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := c.NoScheduleTaintingPassFor(ctx, c.inf.drainChanged()); err != nil && ctx.Err() == nil {
					c.log.Error("NoSchedule tainting pass failed", "err", err)
				}
				select {
				case <-ctx.Done():
					return
				case <-c.inf.notify:
				}
			}
		}()
	}
	wg.Wait()
	c.log.Info("stopped")
	return nil
}

// MonitorNodeHealth is one monitor pass: read nodes and leases, decide
// (PlanPass), apply the queue changes, then write: node status (up to 5
// tries, re-reading and re-judging the node after a failure), immediate
// NoExecute taint swaps, events, and pod Ready conditions. It returns the
// first read error, or an error joining the write failures; a failed node
// is retried by the next pass.
func (c *Controller) MonitorNodeHealth(ctx context.Context) error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	start := c.clock.Now()
	nodes, err := c.src.Nodes(ctx)
	if err != nil {
		return err
	}
	leases, err := c.src.Leases(ctx)
	if err != nil {
		return err
	}
	bound, err := c.src.NewlyBound(ctx)
	if err != nil {
		return err
	}

	c.mu.Lock()
	prev := c.state
	now := c.clock.Now()
	plan := PlanPass(Input{Now: now, Params: c.params, Nodes: nodes, Leases: leases, State: prev})
	c.state = plan.State
	bound = append(c.pendingPods, bound...)
	c.pendingPods = nil
	c.qmu.Lock()
	for i := range plan.Nodes {
		a := &plan.Nodes[i]
		if a.Dequeue {
			if q := c.queues[a.DequeueZone]; q != nil {
				q.Remove(a.Name)
			}
		}
		if a.Enqueue {
			c.queueFor(a.Zone).Add(a.Name, a.UID, now)
		}
	}
	for _, qc := range plan.Queues {
		if qc.Create {
			if _, ok := c.queues[qc.Zone]; !ok {
				c.queues[qc.Zone] = queue.New(qc.QPS)
			}
			continue
		}
		c.queueFor(qc.Zone).SwapLimiter(qc.QPS, now)
	}
	c.qmu.Unlock()
	c.mu.Unlock()

	switch plan.Disruption {
	case DisruptionEntered:
		c.log.Warn("every zone is fully disrupted: removing NoExecute taints and stopping tainting")
	case DisruptionLeft:
		c.log.Info("some zone is no longer fully disrupted: every node gets a fresh grace period")
	}
	c.metrics.reportZones(plan.Zones)
	c.events.nodes(ctx, plan.Events, c.cfg.Workers)

	byName := make(map[string]*corev1.Node, len(plan.Nodes))
	for _, a := range plan.Nodes {
		byName[a.Name] = nil
	}
	for _, n := range nodes {
		if _, ok := byName[n.Name]; ok {
			byName[n.Name] = n
		}
	}
	var errMu sync.Mutex
	var errs []error
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	parallel(ctx, len(plan.Nodes), c.cfg.Workers, func(i int) {
		a := plan.Nodes[i]
		node := byName[a.Name]
		if node == nil {
			return // gone: only its queue entry mattered
		}
		if err := c.applyNode(ctx, node, leases, prev, a, now, plan.Disruption == DisruptionLeft); err != nil {
			fail(err)
		}
	})
	if err := c.markBound(ctx, bound); err != nil {
		fail(err)
	}
	c.metrics.passTime.Observe(c.clock.Since(start).Seconds())
	return errors.Join(errs...)
}

// applyNode does one node's writes from a plan.
func (c *Controller) applyNode(ctx context.Context, node *corev1.Node, leases map[string]*coordinationv1.Lease, prev State, a NodeAction, now time.Time, freshGrace bool) error {
	if a.Conditions != nil {
		v, ok, err := c.writeStatus(ctx, node, leases[node.Name], prev, a.Conditions, now, freshGrace)
		if !ok {
			c.mu.Lock()
			if old := prev.Health[node.Name]; old != nil {
				c.state.Health[node.Name] = old
			} else {
				delete(c.state.Health, node.Name)
			}
			if prev.Retry[node.Name] {
				c.state.Retry[node.Name] = true
			}
			c.mu.Unlock()
			if err == nil || apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("updating status of node %s: %w", node.Name, err)
		}
		if v != nil {
			// The node changed under us and was judged again.
			notReady := v.Current != "" && v.Observed == corev1.ConditionTrue && v.Current != corev1.ConditionTrue
			a.NotReadyEvent = notReady
			a.MarkPods = notReady || (v.Current != "" && prev.Retry[node.Name] && v.Observed != corev1.ConditionTrue)
		}
	}
	var errs []error
	if len(a.AddTaints) > 0 || len(a.RemoveTaints) > 0 {
		if err := c.swapTaints(ctx, node, a.AddTaints, a.RemoveTaints); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("changing NoExecute taints of node %s: %w", node.Name, err))
		}
	}
	if a.NotReadyEvent {
		c.events.node(ctx, node.Name, node.UID, corev1.EventTypeNormal, EventNodeNotReady, fmt.Sprintf("Node %s status is now: %s", node.Name, EventNodeNotReady))
	}
	if a.MarkPods {
		pods, err := c.src.PodsOnNode(ctx, node.Name)
		if err == nil {
			err = c.markPodsNotReady(ctx, node.Name, pods, now)
		}
		if err != nil {
			c.mu.Lock()
			c.state.Retry[node.Name] = true
			c.mu.Unlock()
			errs = append(errs, fmt.Errorf("marking pods of node %s not Ready: %w", node.Name, err))
		}
	}
	return errors.Join(errs...)
}

// markBound marks newly bound pods not Ready when their node's remembered
// Ready is present and not True; failures are kept for the next pass.
func (c *Controller) markBound(ctx context.Context, pods []*corev1.Pod) error {
	if len(pods) == 0 {
		return nil
	}
	now := c.clock.Now()
	var errs []error
	for _, p := range pods {
		c.mu.Lock()
		h, ok := c.state.Health[p.Spec.NodeName]
		c.mu.Unlock()
		if !ok || !h.Ready.Present || h.Ready.Status == corev1.ConditionTrue {
			continue
		}
		if err := c.markPodsNotReady(ctx, p.Spec.NodeName, []*corev1.Pod{p}, now); err != nil {
			c.mu.Lock()
			c.pendingPods = append(c.pendingPods, p)
			c.mu.Unlock()
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DoNoExecuteTaintingPass is one pass over the zones' tainting queues, in
// zone order: each queue hands out the nodes its rate allows, and each gets
// the NoExecute taint its Ready status calls for (removing the opposite
// one). Every taint applied counts in node_collector_evictions_total{zone}.
func (c *Controller) DoNoExecuteTaintingPass(ctx context.Context) error {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	now := c.clock.Now()
	var errs []error
	for _, zone := range sortedKeys(c.queues) {
		c.queues[zone].Try(now, func(it queue.Item) (bool, time.Duration) {
			node, err := c.src.Node(ctx, it.Name)
			if apierrors.IsNotFound(err) {
				return true, 0
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("reading node %s: %w", it.Name, err))
				return false, 50 * time.Millisecond
			}
			add, remove, ok, retryAfter := NoExecuteTaintFor(node, now)
			if !ok {
				return retryAfter == 0, retryAfter
			}
			if err := c.swapTaints(ctx, node, []corev1.Taint{add}, []corev1.Taint{remove}); err != nil {
				if apierrors.IsNotFound(err) {
					return true, 0
				}
				errs = append(errs, fmt.Errorf("tainting node %s: %w", it.Name, err))
				return false, 0
			}
			c.metrics.evictions.WithLabelValues(ZoneKey(node)).Inc()
			return true, 0
		})
	}
	return errors.Join(errs...)
}

// DoNoScheduleTaintingPass reconciles every node's NoSchedule condition
// taints and beta os/arch labels (see NoScheduleChange, BetaLabelChange).
func (c *Controller) DoNoScheduleTaintingPass(ctx context.Context) error {
	nodes, err := c.src.Nodes(ctx)
	if err != nil {
		return err
	}
	return c.noScheduleNodes(ctx, nodes)
}

// NoScheduleTaintingPassFor is DoNoScheduleTaintingPass for the named
// nodes only: those added or changed since the last pass, as upstream's
// node update queue feeds it. Names of nodes gone since are skipped.
func (c *Controller) NoScheduleTaintingPassFor(ctx context.Context, names []string) error {
	nodes := make([]*corev1.Node, 0, len(names))
	for _, n := range names {
		node, err := c.src.Node(ctx, n)
		if err != nil {
			continue // deleted since
		}
		nodes = append(nodes, node)
	}
	return c.noScheduleNodes(ctx, nodes)
}

func (c *Controller) noScheduleNodes(ctx context.Context, nodes []*corev1.Node) error {
	now := c.clock.Now()
	type change struct {
		node        *corev1.Node
		add, remove []corev1.Taint
		labels      map[string]string
	}
	var work []change
	for _, n := range nodes {
		add, remove := NoScheduleChange(n, now)
		labels := BetaLabelChange(n)
		if len(add) > 0 || len(remove) > 0 || labels != nil {
			work = append(work, change{n, add, remove, labels})
		}
	}
	var mu sync.Mutex
	var errs []error
	parallel(ctx, len(work), c.cfg.Workers, func(k int) {
		w := work[k]
		n := w.node
		var err error
		if len(w.add) > 0 || len(w.remove) > 0 {
			err = c.swapTaints(ctx, n, w.add, w.remove)
		}
		if err == nil && w.labels != nil {
			err = c.patchLabels(ctx, n.Name, w.labels)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			mu.Lock()
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			mu.Unlock()
		}
	})
	return errors.Join(errs...)
}

// queueFor returns zone's queue, creating it at the normal rate if a plan
// names a zone before creating it. Callers hold qmu.
func (c *Controller) queueFor(zone string) *queue.RateLimited {
	q := c.queues[zone]
	if q == nil {
		q = queue.New(c.params.NodeEvictionRate)
		c.queues[zone] = q
	}
	return q
}

// ZoneInfo describes one zone's tainting queue.
type ZoneInfo struct {
	Zone  string
	State ZoneState // "" when the zone has no counted node
	// QPS is the queue's rate; Queued the nodes waiting in it; Held the
	// nodes it holds (waiting, or tainted and not Ready again).
	QPS    float64
	Queued int
	Held   int
}

// Zones reports every zone's state and queue, sorted by zone.
func (c *Controller) Zones() []ZoneInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.qmu.Lock()
	defer c.qmu.Unlock()
	held := map[string]int{}
	for _, z := range c.state.Held {
		held[z]++
	}
	out := make([]ZoneInfo, 0, len(c.queues))
	for _, z := range sortedKeys(c.queues) {
		q := c.queues[z]
		out = append(out, ZoneInfo{Zone: z, State: c.state.Zones[z], QPS: q.QPS(), Queued: q.Len(), Held: held[z]})
	}
	return out
}

// parallel runs fn(0..n-1) on up to workers goroutines and waits. It stops
// handing out work once ctx ends.
func parallel(ctx context.Context, n, workers int, fn func(i int)) {
	if n == 0 {
		return
	}
	workers = max(min(workers, n), 1)
	next := make(chan int)
	var wg sync.WaitGroup
	wg.Add(workers)
	for w := 0; w < workers; w++ {
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
