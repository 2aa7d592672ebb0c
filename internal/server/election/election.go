package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
)

// Defaults, as kube-controller-manager's and kube-scheduler's
// --leader-elect-* flags have them.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrInvalidConfig is wrapped by New's error when Config is unusable.
var ErrInvalidConfig = errors.New("election: invalid config")

// Config builds a Candidate.
type Config struct {
	// Client gets, creates and updates the Lease and creates Events about
	// it. Required.
	Client kubernetes.Interface
	// Namespace and Name are the Lease's. Required.
	Namespace, Name string
	// Identity is this candidate's holderIdentity, unique among the
	// candidates for the Lease; NewIdentity makes upstream's form.
	// Required.
	Identity string
	// LeaseDuration is how long the others wait, after they last saw the
	// holder renew, before they take the Lease over. The Lease records it
	// in whole seconds, so it must be one. Zero means
	// DefaultLeaseDuration.
	LeaseDuration time.Duration
	// RenewDeadline is how long a holder may go without a successful
	// renewal before its term ends. It must be less than LeaseDuration.
	// Zero means DefaultRenewDeadline.
	RenewDeadline time.Duration
	// RetryPeriod is the pause between two attempts to acquire or renew.
	// RenewDeadline must exceed it times client-go's JitterFactor (1.2).
	// Zero means DefaultRetryPeriod.
	RetryPeriod time.Duration
	// Work runs once per term, with a context that ends with the term. It
	// must build what it runs afresh, and return only once all of it has
	// stopped: the Lease is not released before. Required.
	Work func(ctx context.Context)
	// Status, when set, is 1 during a term and 0 otherwise: upstream's
	// leader_election_master_status for this Lease.
	Status prometheus.Gauge
	// EventSource is the component named in the LeaderElection Events;
	// empty means Name.
	EventSource string
	// Clock times the step-down watchdog and judges whether a Lease of
	// this host has expired; zero value means the real clock (see the
	// package doc).
	Clock clock.Clock
	// Logger; nil means slog.Default(). client-go's elector logs through
	// it too, its V(4) messages at debug level.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = DefaultRenewDeadline
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultRetryPeriod
	}
	if c.EventSource == "" {
		c.EventSource = c.Name
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

func (c *Config) validate() error {
	var errs field.ErrorList
	if c.Client == nil {
		errs = append(errs, field.Required(field.NewPath("client"), "a Kubernetes client is required"))
	}
	if c.Namespace == "" {
		errs = append(errs, field.Required(field.NewPath("namespace"), "the Lease's namespace"))
	}
	if c.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), "the Lease's name"))
	}
	if c.Identity == "" {
		errs = append(errs, field.Required(field.NewPath("identity"), "the holderIdentity of this candidate"))
	}
	if c.Work == nil {
		errs = append(errs, field.Required(field.NewPath("work"), "what runs during a term"))
	}
	errs = append(errs, TimingErrors(c.LeaseDuration, c.RenewDeadline, c.RetryPeriod, TimingNames{
		LeaseDuration: field.NewPath("leaseDuration"),
		RenewDeadline: field.NewPath("renewDeadline"),
		RetryPeriod:   field.NewPath("retryPeriod"),
	})...)
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errs.ToAggregate())
	}
	return nil
}

// TimingNames name the three durations in TimingErrors' messages (a
// Config's fields, or the flags they come from).
type TimingNames struct {
	LeaseDuration, RenewDeadline, RetryPeriod *field.Path
}

// TimingErrors checks the durations by client-go's rules (NewLeaderElector:
// each greater than zero, leaseDuration > renewDeadline, renewDeadline >
// retryPeriod × JitterFactor) and knode's one more: the lease duration is
// a whole number of seconds, because the Lease records seconds and a
// truncated duration would let a successor in before the holder's renew
// deadline.
func TimingErrors(lease, renew, retry time.Duration, names TimingNames) field.ErrorList {
	var errs field.ErrorList
	positive := true
	for _, d := range []struct {
		path *field.Path
		v    time.Duration
	}{{names.LeaseDuration, lease}, {names.RenewDeadline, renew}, {names.RetryPeriod, retry}} {
		if d.v <= 0 {
			errs = append(errs, field.Invalid(d.path, d.v.String(), "must be greater than zero"))
			positive = false
		}
	}
	if !positive {
		return errs
	}
	if lease%time.Second != 0 {
		errs = append(errs, field.Invalid(names.LeaseDuration, lease.String(), "must be a whole number of seconds (the Lease records seconds)"))
	}
	if lease <= renew {
		errs = append(errs, field.Invalid(names.LeaseDuration, lease.String(), fmt.Sprintf("must be greater than %s (%s)", names.RenewDeadline, renew)))
	}
	if renew <= time.Duration(leaderelection.JitterFactor*float64(retry)) {
		errs = append(errs, field.Invalid(names.RenewDeadline, renew.String(), fmt.Sprintf("must be greater than %s (%s) times %v", names.RetryPeriod, retry, leaderelection.JitterFactor)))
	}
	return errs
}

// NewIdentity is upstream's holder identity: the host name, "_", and a
// fresh UUID, so that a restarted process is a new candidate.
func NewIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("election: the host name for the identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// Candidate campaigns for one Lease and runs Config.Work while it holds it.
type Candidate struct {
	cfg Config
	rec *events.Recorder
}

// New checks cfg and builds a Candidate; nothing runs until Run.
func New(cfg Config) (*Candidate, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Candidate{cfg: cfg, rec: &events.Recorder{Client: cfg.Client.CoreV1(), Source: cfg.EventSource, Logger: cfg.Logger}}
	// client-go's own checks, once, so that Run cannot fail on them.
	if _, err := c.newElector(c.newLock(), leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) {}, OnStoppedLeading: func() {}}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// Lease is "namespace/name" of the Lease campaigned for.
func (c *Candidate) Lease() string { return c.cfg.Namespace + "/" + c.cfg.Name }

// Run campaigns until ctx ends, running one term of Work each time the
// Lease is acquired. It returns once the last term's Work has returned and
// the Lease has been released (or releasing it failed).
func (c *Candidate) Run(ctx context.Context) {
	ctx = logr.NewContext(ctx, logr.FromSlogHandler(c.cfg.Logger.Handler()))
	if c.cfg.Status != nil {
		c.cfg.Status.Set(0)
	}
	c.cfg.Logger.Info("campaigning for the lease", "lease", c.Lease(), "identity", c.cfg.Identity)
	for ctx.Err() == nil {
		c.campaign(ctx)
	}
}

// campaign runs one client-go elector until it stops: after one term, or
// when ctx ends before the Lease is acquired.
func (c *Candidate) campaign(ctx context.Context) {
	// The elector is stopped only once the term's work has returned, so
	// that it releases the Lease after, never before.
	electorCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	termCtx, endTerm := context.WithCancel(ctx)
	defer endTerm()

	var mu sync.Mutex
	var workDone chan struct{} // closed when the term's Work has returned; nil before a term
	lock := c.newLock()
	le, err := c.newElector(lock, leaderelection.LeaderCallbacks{
		OnStartedLeading: func(leading context.Context) {
			// client-go cancels leading when its renewals fail.
			defer context.AfterFunc(leading, endTerm)()
			mu.Lock()
			if termCtx.Err() != nil {
				mu.Unlock()
				return
			}
			done := make(chan struct{})
			workDone = done
			mu.Unlock()
			defer close(done)
			c.lead(termCtx, endTerm, lock)
		},
		OnStoppedLeading: endTerm,
	})
	if err != nil {
		// New ran the same checks; this cannot happen.
		c.cfg.Logger.Error("building the leader elector", "lease", c.Lease(), "err", err)
		<-ctx.Done()
		return
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-termCtx.Done()
		mu.Lock()
		done := workDone
		mu.Unlock()
		if done != nil {
			<-done
		}
		stopElector()
	}()
	le.Run(electorCtx)
	endTerm()
	<-stopped
}

// lead is one term: Work under ctx, with the watchdog ending the term
// (endTerm) when renewals stop succeeding. It returns once Work has.
func (c *Candidate) lead(ctx context.Context, endTerm context.CancelFunc, lock *watchedLock) {
	log := c.cfg.Logger.With("lease", c.Lease(), "identity", c.cfg.Identity)
	log.Info("started leading")
	if c.cfg.Status != nil {
		c.cfg.Status.Set(1)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		c.watch(ctx, endTerm, lock, log)
		// The term is over as soon as ctx is, though Work may still be
		// stopping.
		<-ctx.Done()
		if c.cfg.Status != nil {
			c.cfg.Status.Set(0)
		}
	}()
	c.cfg.Work(ctx)
	endTerm()
	<-watched
	log.Info("stopped leading")
}

// watch ends the term once no renewal has succeeded for RenewDeadline
// since the last successful one began, and returns when ctx ends.
func (c *Candidate) watch(ctx context.Context, endTerm context.CancelFunc, lock *watchedLock, log *slog.Logger) {
	for {
		wait := stepDownIn(lock.lastRenewal(), c.cfg.Clock.Now(), c.cfg.RenewDeadline)
		if wait <= 0 {
			log.Warn("the lease was not renewed within the renew deadline: stepping down", "renewDeadline", c.cfg.RenewDeadline)
			endTerm()
			return
		}
		t := c.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// stepDownIn is how much longer a holder whose last successful renewal
// began at last may work; zero or less means it must stop now.
func stepDownIn(last, now time.Time, renewDeadline time.Duration) time.Duration {
	return last.Add(renewDeadline).Sub(now)
}

func (c *Candidate) newLock() *watchedLock {
	return &watchedLock{
		inner: &resourcelock.LeaseLock{
			LeaseMeta: metav1.ObjectMeta{Namespace: c.cfg.Namespace, Name: c.cfg.Name},
			Client:    c.cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{
				Identity:      c.cfg.Identity,
				EventRecorder: &eventRecorder{rec: c.rec, clock: c.cfg.Clock, timeout: c.cfg.RenewDeadline},
			},
		},
		clock: c.cfg.Clock,
		log:   c.cfg.Logger,
	}
}

func (c *Candidate) newElector(lock resourcelock.Interface, cb leaderelection.LeaderCallbacks) (*leaderelection.LeaderElector, error) {
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.cfg.LeaseDuration,
		RenewDeadline:   c.cfg.RenewDeadline,
		RetryPeriod:     c.cfg.RetryPeriod,
		Callbacks:       cb,
		ReleaseOnCancel: true,
		Name:            c.cfg.Name,
	})
}
