package apiendpoints

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// Defaults of Config's zero fields: upstream's DefaultEndpointReconcilerTTL
// and DefaultEndpointReconcilerInterval, and knode's key prefix (outside
// /registry/, where the API's objects live).
const (
	DefaultTTL       = 15 * time.Second
	DefaultInterval  = 10 * time.Second
	DefaultKeyPrefix = "/knode/masterleases/"
)

// writeAttempts bounds how often one pass writes the Endpoints when
// another server's write got in between (a conflict or a create race).
const writeAttempts = 3

// ErrInvalidConfig is wrapped by New's error when Config is unusable.
var ErrInvalidConfig = errors.New("apiendpoints: invalid config")

// Config builds a Reconciler.
type Config struct {
	// Etcd holds the servers' keys. Required.
	Etcd *clientv3.Client
	// Client gets, creates and updates default/kubernetes. Required.
	Client kubernetes.Interface
	// Address is this server's advertised "ip:port": an IP literal the v1
	// Endpoints validation accepts (not unspecified, loopback or
	// link-local) and a port in 1-65535. Required.
	Address string
	// TTL is how long this server stays listed after its last refresh. The
	// etcd lease counts whole seconds, so it must be one. Zero means
	// DefaultTTL.
	TTL time.Duration
	// Interval is the time between two passes of Run; it must be less than
	// TTL so that a running server never drops out. Zero means
	// DefaultInterval.
	Interval time.Duration
	// KeyPrefix is where the servers' keys live in etcd; every server of a
	// cluster must use the same. It must end in "/". Empty means
	// DefaultKeyPrefix.
	KeyPrefix string
	// Clock ticks Run's passes; nil means the real clock. The TTL runs on
	// etcd's clock, not this one.
	Clock clock.WithTicker
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	var errs field.ErrorList
	if c.Etcd == nil {
		errs = append(errs, field.Required(field.NewPath("etcd"), "the etcd client that holds the servers' keys"))
	}
	if c.Client == nil {
		errs = append(errs, field.Required(field.NewPath("client"), "a Kubernetes client that may write default/kubernetes Endpoints"))
	}
	if a, err := parseAddress(c.Address); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("address"), c.Address, "must be ip:port with an IP literal: "+err.Error()))
	} else if ip := a.Addr(); ip.IsUnspecified() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(field.NewPath("address"), c.Address,
			"must not be unspecified, loopback or link-local: the API server refuses such Endpoints addresses"))
	} else {
		c.Address = formatAddress(a)
	}
	switch {
	case c.TTL < time.Second || c.TTL%time.Second != 0:
		errs = append(errs, field.Invalid(field.NewPath("ttl"), c.TTL.String(), "must be a whole number of seconds, at least 1 (etcd leases count seconds)"))
	case c.Interval <= 0 || c.Interval >= c.TTL:
		errs = append(errs, field.Invalid(field.NewPath("interval"), c.Interval.String(), fmt.Sprintf("must be greater than zero and less than ttl (%s)", c.TTL)))
	}
	if !strings.HasSuffix(c.KeyPrefix, "/") {
		errs = append(errs, field.Invalid(field.NewPath("keyPrefix"), c.KeyPrefix, `must end in "/"`))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errs.ToAggregate())
	}
	return nil
}

// Reconciler keeps this server's key alive and default/kubernetes in step
// with the live keys. Its methods may be called from several goroutines;
// they run one at a time.
type Reconciler struct {
	cfg Config
	key string
	log *slog.Logger

	mu sync.Mutex
	// lease holds the key now; zero before the first refresh.
	lease clientv3.LeaseID
	// removed is set by Remove: the key stays gone.
	removed bool
}

// New validates cfg and builds a Reconciler. Nothing is written before
// the first Sync.
func New(cfg Config) (*Reconciler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Reconciler{
		cfg: cfg,
		key: cfg.KeyPrefix + cfg.Address,
		log: cfg.Logger.With("component", "apiendpoints", "address", cfg.Address),
	}, nil
}

// Sync is one pass: it binds this server's key to a fresh lease of TTL
// (revoking the lease it held before), lists the live keys, and writes
// default/kubernetes when it does not list exactly them (creating it when
// missing). After Remove, Sync does nothing and returns nil.
func (r *Reconciler) Sync(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removed {
		return nil
	}
	if err := r.refresh(ctx); err != nil {
		return err
	}
	return r.reconcile(ctx)
}

// refresh puts the key under a new lease. The old lease is revoked only
// once the key is under the new one, so the key never lapses in between.
func (r *Reconciler) refresh(ctx context.Context) error {
	grant, err := r.cfg.Etcd.Grant(ctx, int64(r.cfg.TTL/time.Second))
	if err != nil {
		return fmt.Errorf("apiendpoints: granting a lease: %w", err)
	}
	if _, err := r.cfg.Etcd.Put(ctx, r.key, r.cfg.Address, clientv3.WithLease(grant.ID)); err != nil {
		r.revoke(ctx, grant.ID)
		return fmt.Errorf("apiendpoints: writing %s: %w", r.key, err)
	}
	old := r.lease
	r.lease = grant.ID
	if old != 0 {
		r.revoke(ctx, old)
	}
	return nil
}

// revoke drops a lease; failing is harmless (it expires by itself).
func (r *Reconciler) revoke(ctx context.Context, id clientv3.LeaseID) {
	if _, err := r.cfg.Etcd.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		r.log.Debug("revoking a lease failed; it will expire", "lease", int64(id), "err", err)
	}
}

// live lists the addresses whose keys exist, skipping keys that do not
// hold an ip:port.
func (r *Reconciler) live(ctx context.Context) ([]string, error) {
	resp, err := r.cfg.Etcd.Get(ctx, r.cfg.KeyPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("apiendpoints: listing %s: %w", r.cfg.KeyPrefix, err)
	}
	var addrs []string
	for _, kv := range resp.Kvs {
		s := strings.TrimPrefix(string(kv.Key), r.cfg.KeyPrefix)
		a, err := parseAddress(s)
		if err != nil {
			r.log.Warn("ignoring a key that names no ip:port", "key", string(kv.Key), "err", err)
			continue
		}
		addrs = append(addrs, formatAddress(a))
	}
	return addrs, nil
}

// reconcile makes default/kubernetes list the live keys.
func (r *Reconciler) reconcile(ctx context.Context) error {
	addrs, err := r.live(ctx)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := r.write(ctx, addrs)
		if err == nil {
			return nil
		}
		if attempt == writeAttempts || !(apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			return fmt.Errorf("apiendpoints: writing %s/%s: %w", Namespace, Name, err)
		}
	}
}

// write reads the object and writes what plan says, once.
func (r *Reconciler) write(ctx context.Context, addrs []string) error {
	endpoints := r.cfg.Client.CoreV1().Endpoints(Namespace)
	current, err := endpoints.Get(ctx, Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return err
	}
	next := plan(current, addrs)
	switch {
	case next == nil:
		return nil
	case current == nil:
		_, err = endpoints.Create(ctx, next, metav1.CreateOptions{})
	default:
		_, err = endpoints.Update(ctx, next, metav1.UpdateOptions{})
	}
	if err == nil {
		r.log.Info("updated the API server endpoints", "servers", addrs)
	}
	return err
}

// Run calls Sync at once and then every Interval on the clock until ctx
// ends, logging the errors; a failed pass is retried at the next tick. It
// blocks. It does not remove the key: on graceful shutdown the caller
// calls Remove after Run returns.
func (r *Reconciler) Run(ctx context.Context) {
	ticker := r.cfg.Clock.NewTicker(r.cfg.Interval)
	defer ticker.Stop()
	for {
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("publishing this server in the API server endpoints failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// Remove deletes this server's key and writes default/kubernetes without
// it, so that clients stop being sent here at once rather than after the
// TTL. Later Syncs do nothing. ctx should outlive Run's (shutdown has
// begun). When etcd cannot be reached the key still lapses after TTL.
//
// The key is deleted by revoking the lease this Reconciler bound it to:
// a key another process has since written under the same address (a
// restarted server) is left alone.
func (r *Reconciler) Remove(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = true
	if r.lease != 0 {
		if _, err := r.cfg.Etcd.Revoke(ctx, r.lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return fmt.Errorf("apiendpoints: deleting %s: %w", r.key, err)
		}
		r.lease = 0
	}
	return r.reconcile(ctx)
}
