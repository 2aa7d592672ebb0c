// Package lease renews a node's heartbeat Lease, kube-node-lease/<node>,
// the way the kubelet's lease controller does.
//
// A Renewer makes sure the Lease exists (holderIdentity = the node,
// leaseDurationSeconds, renewTime, and an owner reference to the Node) and
// then renews it every RenewInterval plus up to 4 % jitter. It writes from
// the Lease it last wrote, so a healthy renewal costs one PUT and no GET.
// While the Lease cannot be read or created it retries on the LeaseEnsure
// schedule of package backoff (200 ms, doubling, capped at 7 s), so an API
// outage heals without a restart.
//
// Every wait goes through Config.Clock. Sync is one synchronous pass and
// Step is a pass plus the decision of how long to wait; Run only loops over
// Step. Tests and the simulator call Sync or Step directly.
//
// What callers must do: give it a client allowed to get and write the
// node's Lease and to get its Node (the node identity is), with a request
// timeout of its own; the Renewer sets none, because a timeout on real time
// would lie in virtual time.
//
// What it does not do: no leader election. A node Lease has one writer,
// so, like upstream, every write asserts holderIdentity = the node whoever
// held it before. It does not post node status, and it does not create the
// kube-node-lease namespace.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"knode/internal/agent/backoff"
)

// Upstream defaults and limits.
const (
	// DefaultDurationSeconds is the kubelet's nodeLeaseDurationSeconds.
	DefaultDurationSeconds int32 = 40
	// RenewIntervalFraction of the lease duration is the renew interval
	// (10 s for 40 s).
	RenewIntervalFraction = 0.25
	// DefaultJitterFactor: each wait between renewals is the interval plus
	// up to this fraction of it.
	DefaultJitterFactor = 0.04
	// MaxUpdateAttempts is how many PUTs one pass tries before giving up
	// until the next interval.
	MaxUpdateAttempts = 5
)

// Errors Sync returns, wrapped with the cause; test them with errors.Is.
var (
	// ErrEnsure: the Lease could not be read or created. Run retries on the
	// LeaseEnsure backoff rather than after the renew interval.
	ErrEnsure = errors.New("failed to ensure lease exists")
	// ErrUpdate: MaxUpdateAttempts PUTs of the Lease failed in one pass.
	ErrUpdate = errors.New("failed to update lease")
	// ErrNoOwner: the Lease does not exist and the Node's UID is not known
	// yet (typically the Node is not registered), so, like upstream, the
	// Lease is not created in this pass; Run tries again after the renew
	// interval.
	ErrNoOwner = errors.New("lease not created: node owner reference unknown")
)

// Config configures a Renewer. Zero values mean the defaults.
type Config struct {
	// Client reads and writes the Lease. Required.
	Client kubernetes.Interface
	// NodeName names the Lease and is its holderIdentity. Required.
	NodeName string
	// Namespace of the Lease; "" means kube-node-lease.
	Namespace string
	// LeaseDurationSeconds is written into the Lease; 0 means 40.
	LeaseDurationSeconds int32
	// RenewInterval between the end of one pass and the start of the next,
	// before jitter; 0 means RenewIntervalFraction × the lease duration.
	RenewInterval time.Duration
	// JitterFactor adds up to this fraction of RenewInterval to each wait;
	// 0 means DefaultJitterFactor, a negative value disables jitter.
	JitterFactor float64
	// Rand returns a uniform number in [0, 1) for the jitter; nil means
	// math/rand/v2. The simulator passes a seeded source.
	Rand func() float64
	// Clock stamps renewTime and paces Run; nil means the real clock.
	Clock clock.WithTicker
	// NodeUID returns the UID of the Node named NodeName, for the Lease's
	// owner reference. It is called only while the Lease has no owner
	// reference. nil means a GET of the Node through Client.
	NodeUID func(ctx context.Context) (types.UID, error)
	// OnRepeatedFailure is called after each failed PUT but the first one
	// of a pass (the kubelet closes its heartbeat connections there). nil
	// means nothing.
	OnRepeatedFailure func()
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports every field that is missing or out of range.
func (c Config) Validate() error {
	var errs field.ErrorList
	if c.Client == nil {
		errs = append(errs, field.Required(field.NewPath("client"), "the lease renewer needs an API client"))
	}
	name := field.NewPath("nodeName")
	if c.NodeName == "" {
		errs = append(errs, field.Required(name, "the lease is named after the node"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
			errs = append(errs, field.Invalid(name, c.NodeName, msg))
		}
	}
	if c.LeaseDurationSeconds < 0 {
		errs = append(errs, field.Invalid(field.NewPath("leaseDurationSeconds"), c.LeaseDurationSeconds, "must be greater than zero"))
	}
	if c.RenewInterval < 0 {
		errs = append(errs, field.Invalid(field.NewPath("renewInterval"), c.RenewInterval.String(), "must not be negative"))
	}
	return errs.ToAggregate()
}

// Stats counts what a Renewer did since it was built.
type Stats struct {
	// Renewals counts successful writes of the Lease, creates included.
	Renewals int64
	// FailedCalls counts failed API calls on the Lease (get, create, update).
	FailedCalls int64
	// FailedPasses counts passes (Sync calls) that returned an error.
	FailedPasses int64
	// LastRenewTime is the renewTime of the last successful write; zero
	// before the first one.
	LastRenewTime time.Time
}

// Renewer keeps one node's Lease fresh. Its methods are safe for
// concurrent use; passes never overlap.
type Renewer struct {
	cfg     Config
	leases  coordclient.LeaseInterface
	log     *slog.Logger
	backoff backoff.Exponential

	// syncMu serializes passes; it guards latest and backoff.
	syncMu sync.Mutex
	// latest is the Lease as returned by the last successful write or
	// ensure; nil means the next pass starts by reading the Lease.
	latest *coordinationv1.Lease

	// mu guards the observable state below.
	mu      sync.Mutex
	stats   Stats
	nextDue time.Time
}

// New returns a Renewer, or an error naming the invalid field.
func New(cfg Config) (*Renewer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lease: invalid config: %w", err)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = corev1.NamespaceNodeLease
	}
	if cfg.LeaseDurationSeconds == 0 {
		cfg.LeaseDurationSeconds = DefaultDurationSeconds
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = time.Duration(RenewIntervalFraction * float64(time.Duration(cfg.LeaseDurationSeconds)*time.Second))
	}
	if cfg.JitterFactor == 0 {
		cfg.JitterFactor = DefaultJitterFactor
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Renewer{
		cfg:     cfg,
		leases:  cfg.Client.CoordinationV1().Leases(cfg.Namespace),
		log:     cfg.Logger.With("node", cfg.NodeName),
		backoff: backoff.LeaseEnsure(),
	}
	if r.cfg.NodeUID == nil {
		r.cfg.NodeUID = r.getNodeUID
	}
	return r, nil
}

// RenewInterval is the interval in effect, before jitter.
func (r *Renewer) RenewInterval() time.Duration { return r.cfg.RenewInterval }

// Stats returns a snapshot of the counters.
func (r *Renewer) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// NextDue is when Run (or the caller of Step) starts the next pass; zero
// before the first Step.
func (r *Renewer) NextDue() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nextDue
}

// Run makes a pass at once, then one after each wait Step decides, until
// ctx ends. It blocks; failures are logged, never fatal.
func (r *Renewer) Run(ctx context.Context) {
	for {
		wait, err := r.Step(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Warn("node lease pass failed", "err", err, "retryIn", wait)
		}
		t := r.cfg.Clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Step makes one pass and returns how long to wait before the next one:
// the next LeaseEnsure backoff when the Lease could not be read or created,
// otherwise the renew interval plus jitter (which also resets the backoff).
// It records now+wait as NextDue.
func (r *Renewer) Step(ctx context.Context) (time.Duration, error) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	err := r.sync(ctx)
	var wait time.Duration
	if errors.Is(err, ErrEnsure) {
		wait = r.backoff.Next()
	} else {
		r.backoff.Reset()
		wait = jittered(r.cfg.RenewInterval, r.cfg.JitterFactor, r.cfg.Rand())
	}
	r.mu.Lock()
	r.nextDue = r.cfg.Clock.Now().Add(wait)
	r.mu.Unlock()
	return wait, err
}

// Sync makes one pass: renew from the last written Lease if there is one;
// otherwise, or if that fails, read the Lease (creating it when missing)
// and renew it. It does not wait: Run owns the backoff between passes.
// The error wraps ErrEnsure, ErrUpdate or ErrNoOwner.
func (r *Renewer) Sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	return r.sync(ctx)
}

func (r *Renewer) sync(ctx context.Context) error {
	err := r.pass(ctx)
	if err != nil {
		r.mu.Lock()
		r.stats.FailedPasses++
		r.mu.Unlock()
	}
	return err
}

func (r *Renewer) pass(ctx context.Context) error {
	if r.latest != nil {
		err := r.update(ctx, r.latest)
		if err == nil || errors.Is(err, ErrEnsure) || errors.Is(err, ErrNoOwner) {
			return err
		}
		r.log.Info("renewing from the last written lease failed; reading it again", "err", err)
	}
	l, created, err := r.ensure(ctx)
	if err != nil {
		return err
	}
	if created {
		return nil
	}
	return r.update(ctx, l)
}

// ensure reads the Lease and creates it when it is missing. It reports
// whether it created it. On failure latest is cleared, so the next pass
// starts by reading again.
func (r *Renewer) ensure(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	r.latest = nil
	got, err := r.leases.Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	switch {
	case err == nil:
		r.latest = got
		return got, false, nil
	case !apierrors.IsNotFound(err):
		r.failedCall()
		return nil, false, fmt.Errorf("%w: %w", ErrEnsure, err)
	}
	owner, err := r.owner(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %w", ErrNoOwner, err)
	}
	want := desiredLease(nil, r.cfg.Namespace, r.cfg.NodeName, r.cfg.LeaseDurationSeconds, owner, r.cfg.Clock.Now())
	got, err = r.leases.Create(ctx, want, metav1.CreateOptions{})
	if err != nil {
		r.failedCall()
		return nil, false, fmt.Errorf("%w: %w", ErrEnsure, err)
	}
	r.wrote(got)
	return got, true, nil
}

// update PUTs base renewed, up to MaxUpdateAttempts times. After a
// conflict it reads the Lease again and renews that; if the read fails the
// pass ends with ErrEnsure.
func (r *Renewer) update(ctx context.Context, base *coordinationv1.Lease) error {
	var last error
	for i := range MaxUpdateAttempts {
		var owner *metav1.OwnerReference
		if needsOwner(base) {
			// Unlike creation, a renewal goes through without the
			// reference; the next renewal tries again.
			owner, _ = r.owner(ctx)
		}
		want := desiredLease(base, r.cfg.Namespace, r.cfg.NodeName, r.cfg.LeaseDurationSeconds, owner, r.cfg.Clock.Now())
		got, err := r.leases.Update(ctx, want, metav1.UpdateOptions{})
		if err == nil {
			r.wrote(got)
			return nil
		}
		r.failedCall()
		last = err
		if ctx.Err() != nil {
			break
		}
		if apierrors.IsConflict(err) {
			fresh, _, err := r.ensure(ctx)
			if err != nil {
				return err
			}
			base = fresh
			continue
		}
		if i > 0 && r.cfg.OnRepeatedFailure != nil {
			r.cfg.OnRepeatedFailure()
		}
	}
	return fmt.Errorf("%w: failed %d attempts to update lease: %w", ErrUpdate, MaxUpdateAttempts, last)
}

// owner returns the Node's owner reference, or an error when the Node's
// UID cannot be learnt.
func (r *Renewer) owner(ctx context.Context) (*metav1.OwnerReference, error) {
	uid, err := r.cfg.NodeUID(ctx)
	if err != nil {
		r.log.Info("cannot set the node as owner of its lease yet", "err", err)
		return nil, err
	}
	ref := NodeOwnerReference(r.cfg.NodeName, uid)
	return &ref, nil
}

func (r *Renewer) getNodeUID(ctx context.Context) (types.UID, error) {
	n, err := r.cfg.Client.CoreV1().Nodes().Get(ctx, r.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return n.UID, nil
}

func (r *Renewer) wrote(l *coordinationv1.Lease) {
	r.latest = l
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Renewals++
	if l.Spec.RenewTime != nil {
		r.stats.LastRenewTime = l.Spec.RenewTime.Time
	}
}

func (r *Renewer) failedCall() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.FailedCalls++
}
