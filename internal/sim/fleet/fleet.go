// Package fleet runs many simulated nodes against a live knode server, to
// measure how the server holds up: `knode sim fleet`.
//
// Each simulated node is the real agent (internal/agent: registration,
// status, Lease, and the pod worker) on a fake machine (host/fake, a
// distinct address per node) and the fake pod runtime, talking to the
// server over the network on the real clock, exactly as `knode agent`
// would.
//
// Identity. By default (IdentityNode) every agent acts as its own node,
// system:node:<name> in system:nodes, by impersonation through the
// kubeconfig's credentials, so the node authorizer and NodeRestriction
// judge each agent as they judge a real kubelet; the kubeconfig's user
// must be allowed to impersonate users and groups (system:masters is).
// IdentityAdmin, the documented admin mode, has every agent act as the
// kubeconfig's user itself.
//
// Transports. The agents share Config.Connections HTTP transports
// (rest.HTTPClientFor, built once each; over TLS each is one HTTP/2
// connection that opens more only when its streams run out). Agent i uses
// transport i mod Connections, behind its own impersonating round tripper,
// with no client-side rate limit.
//
// Several servers. With Config.Servers (host:port of every API server),
// the fleet spreads its agents over them and fails over as real agents
// do: Run starts one balancer per server (internal/agent/loadbalancer, on
// 127.0.0.1), balancer k preferring server k and failing over to the
// others in their order on a failed dial, and transport j dials through
// balancer j mod len(Servers), its Host being https://<balancer address>
// (the scheme of Rest.Host, its credentials and CA). Agents are thus
// spread evenly when Connections is a multiple of len(Servers), which the
// default is; an agent whose server dies loses its connection and
// reconnects to the next server that answers, and stays there. The
// servers' certificates cover 127.0.0.1, so TLS through a balancer is
// verified as against the server itself. The fleet's own client (the
// watch of its Nodes, cleanup) goes through balancer 0, so it fails over
// too; while that watch re-lists, a node that goes NotReady and recovers
// before the list is not seen. Run closes the balancers, and every
// connection they pass, at the end. Without Servers the transports dial
// Rest.Host directly.
//
// Measurement. Every request an agent makes is counted at the transport:
// the latency of each successful lease renewal (a PUT of its Lease, timed
// to the response headers) goes into a fixed-bucket histogram, and failed
// requests are counted by kind (see classify for what counts as a
// failure). A watch of the fleet's Nodes (as the kubeconfig's user)
// follows how many are Ready and the largest number at once that were
// Ready and no longer are. The Result's headline numbers (renewals, their
// latency, errors) cover the measured run, from the moment every agent has
// started to the end; the ramp before it is reported on its own. The
// renewals' p99 over each progress interval of the measured run is also
// kept at its worst (Result.RenewP99WindowMaxMs): run across a server's
// death, that is the renewal p99 during the failover.
//
// What callers must do: build a Config and call Run, which blocks until
// the duration is over or ctx ends and then stops every agent. Run returns
// an error only when the fleet could not be set up; how the run went is
// in the Result.
//
// What it does not do: it creates no pods (the pod worker runs pods that
// something else schedules onto fleet nodes), and it does not simulate
// outages (a server is killed, if at all, by whoever runs the fleet); for
// simulated outages, use the virtual-time scenarios of package sim. It
// does not learn servers from the cluster: the balancers serve the list
// given. The agents' events stay behind after cleanup.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	"k8s.io/utils/clock"

	"knode/internal/agent"
	fakehost "knode/internal/agent/host/fake"
	"knode/internal/agent/nodestatus"
	podruntime "knode/internal/agent/runtime"
	fakeruntime "knode/internal/agent/runtime/fake"
	"knode/internal/auth"
	"knode/internal/version"
)

// Identity is whom the agents act as.
type Identity string

const (
	// IdentityNode: each agent impersonates its own node identity.
	IdentityNode Identity = "node"
	// IdentityAdmin: every agent acts as the kubeconfig's user.
	IdentityAdmin Identity = "admin"
)

// Defaults for Config.
const (
	DefaultNamePrefix       = "fleet"
	DefaultDuration         = 10 * time.Minute
	DefaultConnections      = 8
	DefaultRequestTimeout   = 10 * time.Second
	DefaultProgressInterval = 10 * time.Second
	// RampPerNode is the automatic ramp: agents start at 250 a second.
	RampPerNode = 4 * time.Millisecond
	// SyncTimeout bounds the wait for the first list of the fleet's Nodes.
	SyncTimeout = 30 * time.Second
	// FleetLabel marks the fleet's Nodes; its value is the name prefix.
	FleetLabel = "knode.io/fleet"
)

// Config builds a Fleet. Zero values mean the defaults.
type Config struct {
	// Rest reaches the server with the credentials the fleet uses
	// (normally the admin kubeconfig). Required; it is not modified.
	// With Servers, only its scheme and path prefix are kept from its
	// Host.
	Rest *rest.Config
	// Servers are the host:port addresses of every API server the agents
	// spread over and fail over between, through balancers (see the
	// package doc); each is distinct. Nil means Rest.Host alone, dialled
	// directly.
	Servers []string
	// Nodes is how many agents run. Required.
	Nodes int
	// Zones the nodes are spread over round-robin (see Place); nil means
	// ZoneNames(1).
	Zones []string
	// NamePrefix starts every node name, <prefix>-<zone>-<index>, and is
	// the value of FleetLabel on the fleet's Nodes; "" means "fleet".
	NamePrefix string
	// Duration is how long the fleet runs once every agent has started;
	// 0 means DefaultDuration.
	Duration time.Duration
	// Ramp spreads the agents' starts evenly over this long; 0 means
	// RampPerNode × Nodes.
	Ramp time.Duration
	// Identity of the agents; "" means IdentityNode.
	Identity Identity
	// Connections is how many HTTP transports the agents share; 0 means
	// DefaultConnections, rounded up to a multiple of len(Servers). With
	// Servers, it must be at least len(Servers), so that every server
	// carries a transport.
	Connections int
	// WithoutPods runs the agents without a pod runtime, so they do not
	// list and watch their pods (knode agent --runtime=none).
	WithoutPods bool
	// KeepNodes leaves the fleet's Nodes and Leases on the server when
	// the run ends; by default they are deleted, so that a later run (or
	// the node lifecycle controller) does not meet thousands of silent
	// nodes.
	KeepNodes bool
	// NodeLeaseDurationSeconds and NodeStatusUpdateFrequency configure
	// every agent as the kubelet's settings of those names; 0 means the
	// agent's defaults (40 s, renewed every 10 s; 10 s).
	NodeLeaseDurationSeconds  int32
	NodeStatusUpdateFrequency time.Duration
	// RequestTimeout ends any agent request but a watch that takes longer
	// (it then counts as an error); 0 means DefaultRequestTimeout, as the
	// kubelet's heartbeat client.
	RequestTimeout time.Duration
	// ProgressInterval is how often a Progress line is written; 0 means
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// Progress receives one Progress line per interval, and a line about
	// cleanup; nil discards them.
	Progress io.Writer
	// Clock paces everything and times the renewals; nil means the real
	// clock.
	Clock clock.WithTickerAndDelayedExecution
	// Logger receives the agents' logs; nil discards them.
	Logger *slog.Logger
	// Seed makes the agents' jitter reproducible: agent i draws from a
	// PCG source seeded with (Seed, i).
	Seed uint64
}

// validate reports every field that is out of range, with its rule.
func (c *Config) validate() error {
	var errs field.ErrorList
	if c.Rest == nil {
		errs = append(errs, field.Required(field.NewPath("rest"), "the fleet needs a server and credentials"))
	}
	nodes := field.NewPath("nodes")
	switch {
	case c.Nodes <= 0:
		errs = append(errs, field.Invalid(nodes, c.Nodes, "must be greater than 0"))
	case c.Nodes > MaxNodes:
		errs = append(errs, field.Invalid(nodes, c.Nodes, fmt.Sprintf("must be at most %d", MaxNodes)))
	}
	errs = append(errs, validateNames(c.NamePrefix, c.Zones)...)
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"duration", c.Duration}, {"ramp", c.Ramp}, {"nodeStatusUpdateFrequency", c.NodeStatusUpdateFrequency},
		{"requestTimeout", c.RequestTimeout}, {"progressInterval", c.ProgressInterval},
	} {
		if d.value < 0 {
			errs = append(errs, field.Invalid(field.NewPath(d.name), d.value.String(), "must not be negative"))
		}
	}
	if c.NodeLeaseDurationSeconds < 0 {
		errs = append(errs, field.Invalid(field.NewPath("nodeLeaseDurationSeconds"), c.NodeLeaseDurationSeconds, "must be greater than 0"))
	}
	if c.Connections < 0 {
		errs = append(errs, field.Invalid(field.NewPath("connections"), c.Connections, "must be greater than 0"))
	} else if c.Connections < len(c.Servers) {
		errs = append(errs, field.Invalid(field.NewPath("connections"), c.Connections,
			fmt.Sprintf("must be at least the number of servers (%d), so that each server carries a transport", len(c.Servers))))
	}
	errs = append(errs, validateServers(c.Servers)...)
	if c.Rest != nil && len(c.Servers) > 0 {
		if _, err := balancedHost(c.Rest, "127.0.0.1:1"); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("rest", "host"), c.Rest.Host, err.Error()))
		}
	}
	switch c.Identity {
	case IdentityNode, IdentityAdmin:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("identity"), c.Identity, []Identity{IdentityNode, IdentityAdmin}))
	}
	return errs.ToAggregate()
}

func (c *Config) setDefaults() {
	if c.NamePrefix == "" {
		c.NamePrefix = DefaultNamePrefix
	}
	if c.Zones == nil {
		c.Zones = ZoneNames(1)
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Ramp == 0 && c.Nodes > 0 {
		c.Ramp = time.Duration(c.Nodes) * RampPerNode
	}
	if c.Identity == "" {
		c.Identity = IdentityNode
	}
	if c.Connections == 0 {
		c.Connections = defaultConnections(len(c.Servers))
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Result is how a run went; it is printed as one JSON line, its first six
// keys in the order the issue fixes.
type Result struct {
	Nodes int `json:"nodes"`
	// DurationS is the measured run, after every agent had started, in
	// seconds: Config.Duration unless ctx ended first (0 when it ended
	// during the ramp).
	DurationS float64 `json:"duration_s"`
	// LeaseRenewals counts successful lease renewals in the measured run
	// (PUTs; the creation of a Lease is not a renewal).
	LeaseRenewals int64 `json:"lease_renewals"`
	// RenewP50Ms and RenewP99Ms are percentiles of those renewals'
	// latency, in milliseconds (at most 4.4 % high; see Histogram).
	RenewP50Ms float64 `json:"renew_p50_ms"`
	RenewP99Ms float64 `json:"renew_p99_ms"`
	// Errors counts the agents' failed requests in the measured run (see
	// classify).
	Errors int64 `json:"errors"`
	// NotReadyMax is the largest number of fleet nodes not Ready at once
	// after having been Ready, over the whole run, ramp included.
	NotReadyMax int `json:"not_ready_max"`
	// Ready is how many fleet nodes were Ready when the run ended.
	Ready int `json:"ready"`
	// RenewMaxMs is the slowest renewal of the measured run.
	RenewMaxMs float64 `json:"renew_max_ms"`
	// Requests counts every request the agents made in the measured run.
	Requests int64 `json:"requests"`
	// ErrorsByKind splits Errors by status (or "transport", "timeout"),
	// verb and resource, such as "409 update leases".
	ErrorsByKind map[string]int64 `json:"errors_by_kind,omitempty"`
	// RampS is how long starting the agents took, in seconds, and the
	// other Ramp fields what happened meanwhile: registrations make the
	// ramp the busiest part of a run.
	RampS            float64          `json:"ramp_s"`
	RampRenewals     int64            `json:"ramp_lease_renewals"`
	RampRenewP99Ms   float64          `json:"ramp_renew_p99_ms"`
	RampErrors       int64            `json:"ramp_errors"`
	RampRequests     int64            `json:"ramp_requests"`
	RampErrorsByKind map[string]int64 `json:"ramp_errors_by_kind,omitempty"`
	Identity         Identity         `json:"identity"`
	Connections      int              `json:"connections"`
	// Servers is how many API servers the agents were spread over (1
	// without Config.Servers), and AgentsPerServer, with Config.Servers,
	// how many agents preferred each, in the order of Config.Servers.
	Servers         int   `json:"servers"`
	AgentsPerServer []int `json:"agents_per_server,omitempty"`
	// FailedOver is how many balancers, with Config.Servers, were passing
	// connections to a server other than the one they prefer when the run
	// ended.
	FailedOver int `json:"failed_over,omitempty"`
	// RenewP99WindowMaxMs is the worst renewal p99 over one progress
	// interval (RenewP99WindowS, in seconds) of the measured run, in
	// milliseconds: the p99_<interval> of the progress lines at its
	// highest after the ramp (a window that began during the ramp counts
	// from its end). A failover shows here while it barely moves the p99
	// of the whole run. 0 when the run was shorter than one interval.
	RenewP99WindowMaxMs float64 `json:"renew_p99_window_max_ms"`
	RenewP99WindowS     float64 `json:"renew_p99_window_s"`
	// Interrupted is true when ctx ended the run before Duration.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Fleet is a configured fleet; use New, then Run once.
type Fleet struct {
	cfg Config
	// admin is the fleet's own client, as the kubeconfig's user; set by
	// Run.
	admin kubernetes.Interface
	// pool is the shared transports, each already metered and timed out.
	pool []http.RoundTripper
	// hosts[j], with Config.Servers, is the Host through transport j's
	// balancer; set by Run before any agent is built. Nil means Rest.Host.
	hosts []string
	meter *meter
	ready *readiness

	started atomic.Int64
	agents  sync.WaitGroup
}

// New checks cfg and builds the fleet's shared transports. It contacts
// nobody and listens nowhere: the balancers, with Servers, start in Run.
func New(cfg Config) (*Fleet, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fleet: invalid config: %w", err)
	}
	cfg.Servers = slices.Clone(cfg.Servers)
	f := &Fleet{cfg: cfg, meter: newMeter(cfg.Clock), ready: newReadiness()}
	// Run builds the client it uses, through a balancer; this one only
	// reports a config client-go refuses now rather than then.
	if _, err := f.newAdmin(); err != nil {
		return nil, err
	}
	for range cfg.Connections {
		hc, err := rest.HTTPClientFor(poolConfig(cfg.Rest))
		if err != nil {
			return nil, fmt.Errorf("fleet: transport: %w", err)
		}
		f.pool = append(f.pool, &meteredTransport{m: f.meter, next: &timeoutTransport{
			clock: cfg.Clock, timeout: cfg.RequestTimeout, next: hc.Transport,
		}})
	}
	return f, nil
}

var userAgent = "knode-fleet/" + version.Knode

// newAdmin builds the fleet's own client: through balancer 0 once Run has
// started the balancers, else to Rest.Host.
func (f *Fleet) newAdmin() (kubernetes.Interface, error) {
	admin := rest.CopyConfig(f.cfg.Rest)
	admin.QPS = -1
	admin.UserAgent = userAgent
	if len(f.hosts) > 0 {
		admin.Host = f.hosts[0]
	}
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("fleet: admin client: %w", err)
	}
	return client, nil
}

// poolConfig is the client config of one pool member: no client-side rate
// limit and no client timeout (timeoutTransport times requests, sparing
// watches). Its own dialer makes client-go build it a transport of its own
// rather than hand back the one it caches for equal TLS settings, so each
// pool member has its own connections.
func poolConfig(base *rest.Config) *rest.Config {
	c := rest.CopyConfig(base)
	c.QPS = -1
	c.Timeout = 0
	c.UserAgent = userAgent
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return c
}

// client returns the clientset agent i uses.
func (f *Fleet) client(i int, nodeName string) (kubernetes.Interface, error) {
	j := i % len(f.pool)
	rt := f.pool[j]
	if f.cfg.Identity == IdentityNode {
		rt = transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
			UserName: auth.NodeUser(nodeName),
			Groups:   []string{auth.NodesGroup},
		}, rt)
	}
	cfg := rest.CopyConfig(f.cfg.Rest)
	cfg.QPS = -1
	cfg.UserAgent = userAgent
	if len(f.hosts) > 0 {
		cfg.Host = f.hosts[j%len(f.hosts)]
	}
	return kubernetes.NewForConfigAndClient(cfg, &http.Client{Transport: rt})
}

// newAgent builds agent i.
func (f *Fleet) newAgent(i int) (*agent.Agent, error) {
	p := Place(f.cfg.NamePrefix, f.cfg.Zones, i)
	client, err := f.client(i, p.Name)
	if err != nil {
		return nil, err
	}
	var rt podruntime.Runtime
	if !f.cfg.WithoutPods {
		rt = fakeruntime.New(fakeruntime.Config{Clock: f.cfg.Clock})
	}
	rng := &lockedRand{r: rand.New(rand.NewPCG(f.cfg.Seed, uint64(i)))}
	return agent.New(agent.Config{
		Client:       client,
		NodeName:     p.Name,
		RegisterNode: true,
		NodeLabels:   map[string]string{corev1.LabelTopologyZone: p.Zone, FleetLabel: f.cfg.NamePrefix},
		Status: nodestatus.Config{
			NodeName: p.Name, Hostname: p.Name,
			KubeletVersion: version.GitVersion(), RuntimeName: "fake", RuntimeVersion: version.Knode,
		},
		NodeStatusUpdateFrequency: f.cfg.NodeStatusUpdateFrequency,
		NodeLeaseDurationSeconds:  f.cfg.NodeLeaseDurationSeconds,
		Host:                      fakehost.New(fakehost.Machine(p.Name, p.IP)),
		RootDir:                   "/var/lib/knode",
		Clock:                     f.cfg.Clock,
		Rand:                      rng.Float64,
		Runtime:                   rt,
		Logger:                    f.cfg.Logger,
	})
}

// lockedRand shares one seeded source between an agent's goroutines.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// ErrPreflight is returned by Run when the first agent's identity cannot
// read its own Lease (wrong server or credentials, or credentials that may
// not impersonate nodes), or when the watch of the fleet's nodes does not
// start within SyncTimeout.
var ErrPreflight = errors.New("fleet: preflight request failed")

// preflight reads the first node's Lease as the first agent would: 200 or
// 404 means the agents' identity works.
func (f *Fleet) preflight(ctx context.Context) error {
	p := Place(f.cfg.NamePrefix, f.cfg.Zones, 0)
	client, err := f.client(0, p.Name)
	if err != nil {
		return err
	}
	_, err = client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, p.Name, metav1.GetOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	hint := ""
	if f.cfg.Identity == IdentityNode && apierrors.IsForbidden(err) {
		hint = " (--identity=node needs credentials allowed to impersonate users and groups, such as system:masters)"
	}
	return fmt.Errorf("%w: reading lease %s/%s as %s%s: %w", ErrPreflight, corev1.NamespaceNodeLease, p.Name, f.identityName(p.Name), hint, err)
}

func (f *Fleet) identityName(node string) string {
	if f.cfg.Identity == IdentityNode {
		return auth.NodeUser(node)
	}
	return "the kubeconfig's user"
}

// Run starts the balancers (with Servers), checks that the agents'
// identity works, starts the agents over the ramp, runs them for the
// duration (or until ctx ends), stops them, deletes the fleet's Nodes and
// Leases unless KeepNodes, closes the balancers, and returns how it went.
// The error is only ever a setup failure, before any agent ran. Call it
// once.
func (f *Fleet) Run(ctx context.Context) (Result, error) {
	var lbs *balancers
	if len(f.cfg.Servers) > 0 {
		var err error
		if lbs, err = f.startBalancers(); err != nil {
			return Result{}, err
		}
		// Deferred first, so it runs last: cleanup goes through them.
		defer lbs.stop()
		if f.hosts, err = lbs.hosts(f.cfg.Rest); err != nil {
			return Result{}, fmt.Errorf("fleet: %w", err)
		}
	}
	var err error
	if f.admin, err = f.newAdmin(); err != nil {
		return Result{}, err
	}
	if err := f.preflight(ctx); err != nil {
		return Result{}, err
	}
	first, err := f.newAgent(0)
	if err != nil {
		return Result{}, fmt.Errorf("fleet: node %s: %w", Place(f.cfg.NamePrefix, f.cfg.Zones, 0).Name, err)
	}
	informerCtx, stopInformer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInformer()
	if err := f.watchNodes(ctx, informerCtx); err != nil {
		return Result{}, err
	}
	agentCtx, stopAgents := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgents()

	run := f.loop(ctx, agentCtx, first)

	// The last word on readiness comes before the agents stop.
	ready, _, notReadyMax := f.ready.counts()
	end := f.meter.tally()
	now := f.cfg.Clock.Now()
	servers, failedOver := 1, 0
	var perServer []int
	if lbs != nil {
		servers, failedOver = len(f.cfg.Servers), lbs.failedOver()
		perServer = spread(f.cfg.Nodes, f.cfg.Connections, servers)
	}
	stopAgents()
	f.agents.Wait()
	stopInformer()
	if !f.cfg.KeepNodes {
		f.cleanup(context.WithoutCancel(ctx))
	}

	ramp, measured := end, tally{}
	rampEnd := now
	if !run.rampDone.IsZero() {
		ramp, measured = run.rampTally, end.sub(run.rampTally)
		rampEnd = run.rampDone
	}
	return Result{
		Nodes:               f.cfg.Nodes,
		DurationS:           secs(now.Sub(rampEnd)),
		LeaseRenewals:       measured.renewals,
		RenewP50Ms:          ms(measured.latency.Percentile(0.50)),
		RenewP99Ms:          ms(measured.latency.Percentile(0.99)),
		Errors:              measured.errors,
		NotReadyMax:         notReadyMax,
		Ready:               ready,
		RenewMaxMs:          ms(measured.latency.Max()),
		Requests:            measured.requests,
		ErrorsByKind:        measured.byKind,
		RampS:               secs(rampEnd.Sub(run.start)),
		RampRenewals:        ramp.renewals,
		RampRenewP99Ms:      ms(ramp.latency.Percentile(0.99)),
		RampErrors:          ramp.errors,
		RampRequests:        ramp.requests,
		RampErrorsByKind:    ramp.byKind,
		Identity:            f.cfg.Identity,
		Connections:         f.cfg.Connections,
		Servers:             servers,
		AgentsPerServer:     perServer,
		FailedOver:          failedOver,
		RenewP99WindowMaxMs: ms(run.windowMax),
		RenewP99WindowS:     secs(f.cfg.ProgressInterval),
		Interrupted:         run.interrupted,
	}, nil
}

// runTimes is how the loop went.
type runTimes struct {
	start time.Time
	// rampDone is when the last agent started, zero if that never
	// happened; rampTally is the meter's tally then.
	rampDone  time.Time
	rampTally tally
	// windowMax is the worst renewal p99 over one progress interval of
	// the measured run.
	windowMax   time.Duration
	interrupted bool
}

// loop starts the agents on the ramp's schedule, writes progress, and
// returns when the duration after the ramp is over or ctx ends. Progress
// counts from the start during the ramp and from its end afterwards, as
// the Result does.
func (f *Fleet) loop(ctx, agentCtx context.Context, first *agent.Agent) runTimes {
	c := f.cfg.Clock
	run := runTimes{start: c.Now()}
	startAt := func(i int) time.Time {
		return run.start.Add(time.Duration(int64(f.cfg.Ramp) * int64(i) / int64(f.cfg.Nodes)))
	}
	ticker := c.NewTicker(f.cfg.ProgressInterval)
	defer ticker.Stop()
	next := c.NewTimer(0)
	defer next.Stop()
	nextC := next.C()
	var end clock.Timer
	var endC <-chan time.Time
	defer func() {
		if end != nil {
			end.Stop()
		}
	}()
	last := f.meter.tally()
	// windowFrom starts the window of the measured run's p99: the last
	// progress line, or the ramp's end when that came after it.
	windowFrom := last
	started := 0
	for {
		select {
		case <-ctx.Done():
			run.interrupted = true
			return run
		case <-endC:
			return run
		case <-nextC:
			now := c.Now()
			for started < f.cfg.Nodes && !startAt(started).After(now) {
				if err := f.start(agentCtx, started, first); err != nil {
					f.cfg.Logger.Error("agent not started", "node", Place(f.cfg.NamePrefix, f.cfg.Zones, started).Name, "err", err)
				}
				started++
			}
			if started < f.cfg.Nodes {
				next.Reset(startAt(started).Sub(now))
				continue
			}
			nextC = nil
			run.rampDone, run.rampTally = now, f.meter.tally()
			windowFrom = run.rampTally
			end = c.NewTimer(f.cfg.Duration)
			endC = end.C()
		case <-ticker.C():
			now := f.meter.tally()
			total := now
			p := Progress{
				Ramping:  run.rampDone.IsZero(),
				Elapsed:  c.Since(run.start),
				Of:       f.cfg.Ramp,
				Started:  started,
				Nodes:    f.cfg.Nodes,
				Interval: f.cfg.ProgressInterval,
			}
			recent := now.latency.Sub(last.latency)
			if !p.Ramping {
				p.Elapsed, p.Of = c.Since(run.rampDone), f.cfg.Duration
				total = now.sub(run.rampTally)
				run.windowMax = max(run.windowMax, now.latency.Sub(windowFrom.latency).Percentile(0.99))
			}
			p.Renewals, p.Errors = total.renewals, total.errors
			p.P99 = total.latency.Percentile(0.99)
			p.P99Recent = recent.Percentile(0.99)
			p.Ready, p.NotReady, _ = f.ready.counts()
			last, windowFrom = now, now
			fmt.Fprintln(f.cfg.Progress, p)
		}
	}
}

// start runs agent i (first is agent 0, built by Run) until ctx ends.
// An agent that cannot be built is logged and left out; agent 0 was built
// with the same settings, so this does not happen in practice.
func (f *Fleet) start(ctx context.Context, i int, first *agent.Agent) error {
	a := first
	if i > 0 {
		var err error
		if a, err = f.newAgent(i); err != nil {
			return err
		}
	}
	f.started.Add(1)
	f.agents.Add(1)
	go func() {
		defer f.agents.Done()
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			f.cfg.Logger.Error("agent stopped", "err", err)
		}
	}()
	return nil
}

// watchNodes follows the fleet's Nodes (those with FleetLabel = the
// prefix) into f.ready until run ends, and returns once the first list
// has arrived, or with an error when ctx ends first.
func (f *Fleet) watchNodes(ctx, run context.Context) error {
	selector := FleetLabel + "=" + f.cfg.NamePrefix
	lw := cache.NewFilteredListWatchFromClient(f.admin.CoreV1().RESTClient(), "nodes", metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = selector })
	informer := cache.NewSharedIndexInformer(lw, &corev1.Node{}, 0, cache.Indexers{})
	observe := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if node, ok := obj.(*corev1.Node); ok {
			f.ready.observe(node.Name, isReady(node), deleted)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observe(obj, false) },
		UpdateFunc: func(_, obj any) { observe(obj, false) },
		DeleteFunc: func(obj any) { observe(obj, true) },
	}); err != nil {
		return fmt.Errorf("fleet: watching nodes: %w", err)
	}
	go informer.Run(run.Done())
	timeout := f.cfg.Clock.NewTimer(SyncTimeout)
	defer timeout.Stop()
	select {
	case <-informer.HasSyncedChecker().Done():
		return nil
	case <-timeout.C():
		return fmt.Errorf("%w: the list and watch of the fleet's nodes did not start within %v", ErrPreflight, SyncTimeout)
	case <-ctx.Done():
		return fmt.Errorf("fleet: listing the fleet's nodes: %w", context.Cause(ctx))
	}
}

// cleanup deletes the fleet's Leases and Nodes as the kubeconfig's user,
// Connections×4 at a time, and reports on Progress.
func (f *Fleet) cleanup(ctx context.Context) {
	n := int(f.started.Load())
	names := make(chan string)
	var failed atomic.Int64
	var workers sync.WaitGroup
	for range f.cfg.Connections * 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for name := range names {
				err := f.admin.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					failed.Add(1)
				}
				err = f.admin.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					failed.Add(1)
				}
			}
		}()
	}
	for i := range n {
		names <- Place(f.cfg.NamePrefix, f.cfg.Zones, i).Name
	}
	close(names)
	workers.Wait()
	msg := fmt.Sprintf("fleet: deleted the leases and nodes of %d agents", n)
	if k := failed.Load(); k > 0 {
		msg += fmt.Sprintf(" (%d deletions failed)", k)
	}
	fmt.Fprintln(f.cfg.Progress, msg)
}
