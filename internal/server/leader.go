package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"knode/internal/auth"
	"knode/internal/controller/cloudnode"
	"knode/internal/controller/csrsigning"
	"knode/internal/controller/daemonset"
	"knode/internal/controller/disruption"
	"knode/internal/controller/garbagecollector"
	"knode/internal/controller/namespace"
	"knode/internal/controller/nodeipam"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/controller/outofservice"
	"knode/internal/controller/podgc"
	"knode/internal/controller/replicaset"
	"knode/internal/controller/statefulset"
	"knode/internal/controller/tainteviction"
	"knode/internal/scheduler"
	"knode/internal/server/election"
)

// The Leases the controllers and the scheduler run under, named as
// upstream's kube-controller-manager and kube-scheduler name theirs.
const (
	LeaseNamespace         = "kube-system"
	ControllerManagerLease = "kube-controller-manager"
	SchedulerLease         = "kube-scheduler"
)

// MetricLeaderStatus is upstream's gauge of leadership, labelled by the
// Lease's name: 1 while this server holds it, else 0.
const MetricLeaderStatus = "leader_election_master_status"

// controllersStopTimeout bounds how long a stopping server waits for its
// controllers to return and its Leases to be released.
const controllersStopTimeout = 10 * time.Second

// LeaderElection is --leader-elect and its timings. With several servers
// on one etcd, each Lease's holder runs what is under it, as upstream's
// kube-controller-manager and kube-scheduler do; a server that loses a
// Lease stops what is under it and campaigns again (upstream's components
// exit instead).
type LeaderElection struct {
	// Disabled runs the controllers and the scheduler at once, with no
	// Lease (--leader-elect=false); then no other server may share the
	// storage.
	Disabled bool
	// LeaseDuration, RenewDeadline and RetryPeriod are
	// --leader-elect-lease-duration, --leader-elect-renew-deadline and
	// --leader-elect-retry-period; zero means 15s, 10s and 2s. The lease
	// duration must be a whole number of seconds, greater than the renew
	// deadline, which must be greater than 1.2 times the retry period.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Identity is the holderIdentity this server writes into the Leases;
	// empty means "<hostname>_<uuid>" with a fresh UUID, as upstream.
	Identity string
}

// setDefaults fills the defaults and checks the timings, naming the flags.
func (l *LeaderElection) setDefaults() error {
	if l.Disabled {
		return nil
	}
	if l.LeaseDuration == 0 {
		l.LeaseDuration = election.DefaultLeaseDuration
	}
	if l.RenewDeadline == 0 {
		l.RenewDeadline = election.DefaultRenewDeadline
	}
	if l.RetryPeriod == 0 {
		l.RetryPeriod = election.DefaultRetryPeriod
	}
	if errs := election.TimingErrors(l.LeaseDuration, l.RenewDeadline, l.RetryPeriod, election.TimingNames{
		LeaseDuration: field.NewPath("--leader-elect-lease-duration"),
		RenewDeadline: field.NewPath("--leader-elect-renew-deadline"),
		RetryPeriod:   field.NewPath("--leader-elect-retry-period"),
	}); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if l.Identity == "" {
		id, err := election.NewIdentity()
		if err != nil {
			return err
		}
		l.Identity = id
	}
	return nil
}

// component is a controller (or the scheduler) and the Lease it runs
// under. start builds it afresh and starts it in t.
type component struct {
	name  string
	lease string
	start func(t *term) error
}

// components is what runs under which Lease for cfg, in start order.
// Everything that is not here runs on every server: the API server, the
// storage compactor, and the objects created at startup (the system
// namespaces and PriorityClasses, the built-in driver's CSIDriver and
// StorageClass).
func components(cfg *Config) []component {
	kcm := func(name string, start func(t *term) error) component {
		return component{name: name, lease: ControllerManagerLease, start: start}
	}
	cs := []component{
		kcm("namespace", startNamespace),
		kcm("taint-eviction", startTaintEviction),
		kcm("csr-signing", startCSRSigning),
		kcm("replicaset", startReplicaSet),
		kcm("daemonset", startDaemonSet),
		kcm("statefulset", startStatefulSet),
		kcm("disruption", startDisruption),
		kcm("garbage-collector", startGarbageCollector),
		kcm("pod-gc", startPodGC),
		kcm("out-of-service", startOutOfService),
		kcm("volumes", startVolumes),
		kcm("node-lifecycle", startNodeLifecycle),
	}
	if cfg.IPAM != nil {
		cs = append(cs, kcm("node-ipam", startNodeIPAM))
	}
	if cfg.Cloud != nil {
		cs = append(cs, kcm("cloud-node", startCloudNode))
	}
	return append(cs, component{name: "scheduler", lease: SchedulerLease, start: startScheduler})
}

// controllers starts the components, under their Leases or at once.
type controllers struct {
	cfg      *Config
	client   kubernetes.Interface
	loopback *rest.Config
	pki      *auth.PKI
	metrics  prometheus.Registerer
	log      *slog.Logger
	// fatal receives errors after which the server cannot go on; it must
	// not block.
	fatal func(error)
}

// start starts every component: under its Lease, or, with leader election
// disabled, at once (then an error building one is returned). The stop it
// returns ends them all and, with leader election, releases the Leases;
// it waits for that at most controllersStopTimeout.
func (c *controllers) start(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		done := make(chan struct{})
		go func() {
			wg.Wait()
			close(done)
		}()
		t := c.cfg.Clock.NewTimer(controllersStopTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C():
			c.log.Warn("controllers did not stop in time", "timeout", controllersStopTimeout)
		}
	}
	leases := []string{ControllerManagerLease, SchedulerLease}
	le := c.cfg.LeaderElection
	if le.Disabled {
		for _, lease := range leases {
			t := c.newTerm(ctx)
			if err := t.start(lease); err != nil {
				cancel()
				return nil, err
			}
			wg.Go(t.wait)
		}
		return stop, nil
	}
	status := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricLeaderStatus,
		Help: "Whether this server holds the Lease called name: 1 while it leads, 0 otherwise.",
	}, []string{"name"})
	if err := c.metrics.Register(status); err != nil {
		cancel()
		return nil, err
	}
	for _, lease := range leases {
		cand, err := election.New(election.Config{
			Client: c.client, Namespace: LeaseNamespace, Name: lease, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
			Work:   func(ctx context.Context) { c.runTerm(ctx, lease) },
			Status: status.WithLabelValues(lease),
			Clock:  c.cfg.Clock,
			Logger: c.log,
		})
		if err != nil {
			cancel()
			return nil, err
		}
		wg.Go(func() { cand.Run(ctx) })
	}
	return stop, nil
}

// runTerm is one term of lease: its components, built afresh, until ctx
// ends and they have all returned.
func (c *controllers) runTerm(ctx context.Context, lease string) {
	t := c.newTerm(ctx)
	if err := t.start(lease); err != nil {
		c.fatal(err)
	}
	t.wait()
}

func (c *controllers) newTerm(ctx context.Context) *term {
	return &term{
		ctx: ctx, cfg: c.cfg, client: c.client, loopback: c.loopback, pki: c.pki,
		metrics: &termRegistry{reg: c.metrics}, log: c.log, fatal: c.fatal,
	}
}

// term is one Lease term's components: what they are built from, and the
// goroutines they run in.
type term struct {
	ctx      context.Context
	cfg      *Config
	client   kubernetes.Interface
	loopback *rest.Config
	pki      *auth.PKI
	metrics  *termRegistry
	log      *slog.Logger
	fatal    func(error)
	wg       sync.WaitGroup
}

// start starts the components of lease.
func (t *term) start(lease string) error {
	for _, c := range components(t.cfg) {
		if c.lease != lease {
			continue
		}
		if err := c.start(t); err != nil {
			return fmt.Errorf("starting %s: %w", c.name, err)
		}
	}
	return nil
}

// run runs f in the term's goroutines; f must return once t.ctx ends.
func (t *term) run(f func()) { t.wg.Go(f) }

// wait blocks until every goroutine of the term has returned, then
// unregisters the term's metrics so that the next term can register its
// own.
func (t *term) wait() {
	t.wg.Wait()
	t.metrics.unregisterAll()
}

// termRegistry registers the collectors of one term's controllers on the
// server's registry and takes them all off it when the term ends.
type termRegistry struct {
	reg prometheus.Registerer
	mu  sync.Mutex
	cs  []prometheus.Collector
}

var _ prometheus.Registerer = (*termRegistry)(nil)

func (r *termRegistry) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cs = append(r.cs, c)
	return nil
}

func (r *termRegistry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *termRegistry) Unregister(c prometheus.Collector) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, have := range r.cs {
		if have == c {
			r.cs = append(r.cs[:i], r.cs[i+1:]...)
			break
		}
	}
	return r.reg.Unregister(c)
}

func (r *termRegistry) unregisterAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cs {
		r.reg.Unregister(c)
	}
	r.cs = nil
}

func startNamespace(t *term) error {
	c, err := namespace.New(namespace.Config{Rest: t.loopback, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startTaintEviction(t *term) error {
	c, err := tainteviction.New(tainteviction.Config{Client: t.client, Clock: t.cfg.Clock, Metrics: t.metrics, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startCSRSigning(t *term) error {
	c, err := csrsigning.New(csrsigning.Config{Client: t.client, Signer: t.pki, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startReplicaSet(t *term) error {
	c, err := replicaset.New(replicaset.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startDaemonSet(t *term) error {
	c, err := daemonset.New(daemonset.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startStatefulSet(t *term) error {
	c, err := statefulset.New(statefulset.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startDisruption(t *term) error {
	c, err := disruption.New(disruption.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startGarbageCollector(t *term) error {
	c, err := garbagecollector.New(garbagecollector.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startPodGC(t *term) error {
	c, err := podgc.New(podgc.Config{Client: t.client, Clock: t.cfg.Clock, TerminatedPodThreshold: t.cfg.TerminatedPodGCThreshold, Metrics: t.metrics, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startOutOfService(t *term) error {
	c, err := outofservice.New(outofservice.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

// startNodeLifecycle starts a new node lifecycle controller: it has seen
// no node yet, so every node gets a fresh grace period on its clock.
func startNodeLifecycle(t *term) error {
	cfg := t.cfg.NodeLifecycle
	cfg.Client, cfg.Clock, cfg.Registerer, cfg.Logger = t.client, t.cfg.Clock, t.metrics, t.log
	cfg.NodeMonitorPeriod = t.cfg.NodeMonitorPeriod
	c, err := nodelifecycle.New(cfg)
	if err != nil {
		return err
	}
	t.run(func() {
		if err := c.Run(t.ctx); err != nil {
			t.fatal(fmt.Errorf("node lifecycle controller: %w", err))
		}
	})
	return nil
}

func startNodeIPAM(t *term) error {
	cfg := *t.cfg.IPAM
	cfg.Client, cfg.Clock, cfg.Logger = t.client, t.cfg.Clock, t.log
	c, err := nodeipam.New(cfg)
	if err != nil {
		return err
	}
	t.run(func() {
		if err := c.Run(t.ctx); err != nil {
			t.log.Error("node IPAM stopped", "err", err)
			t.fatal(fmt.Errorf("node IPAM: %w", err))
		}
	})
	return nil
}

func startCloudNode(t *term) error {
	c, err := cloudnode.New(cloudnode.Config{Client: t.client, Cloud: t.cfg.Cloud, Clock: t.cfg.Clock, MonitorPeriod: t.cfg.NodeMonitorPeriod, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { c.Run(t.ctx) })
	return nil
}

func startScheduler(t *term) error {
	s, err := scheduler.New(scheduler.Config{Client: t.client, Clock: t.cfg.Clock, Logger: t.log})
	if err != nil {
		return err
	}
	t.run(func() { s.Run(t.ctx) })
	return nil
}
