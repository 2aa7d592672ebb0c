package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ClientConfig configures a client of an external etcd cluster.
type ClientConfig struct {
	// Endpoints are the cluster's client URLs, e.g.
	// "https://10.0.0.1:2379". Required.
	Endpoints []string
	// TLS secures the connection; nil means plain text.
	TLS *tls.Config
	// Username and Password authenticate to etcd when Username is set.
	Username string
	Password string
	// DialTimeout bounds connecting to an endpoint; default 5s.
	DialTimeout time.Duration
	// Logger receives the client's logs; nil means errors only, to stderr.
	Logger *zap.Logger
}

// Validate reports every field that is out of range.
func (c ClientConfig) Validate() error {
	var errs field.ErrorList
	p := field.NewPath("endpoints")
	if len(c.Endpoints) == 0 {
		errs = append(errs, field.Required(p, "at least one etcd endpoint is needed"))
	}
	for i, ep := range c.Endpoints {
		if ep == "" {
			errs = append(errs, field.Invalid(p.Index(i), ep, "must not be empty"))
		}
	}
	if c.DialTimeout < 0 {
		errs = append(errs, field.Invalid(field.NewPath("dialTimeout"), c.DialTimeout.String(), "must not be negative"))
	}
	return errs.ToAggregate()
}

// NewClient connects to an external etcd cluster and returns a Store on it.
// It checks the cluster answers a linearizable read before returning, so a
// wrong endpoint fails here (when ctx ends or after the client's retries)
// rather than at the first request. Watches require a leader: a member cut
// off from its cluster ends them with an error instead of going silent.
func NewClient(ctx context.Context, cfg ClientConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd: invalid client config: %w", err)
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	lg := cfg.Logger
	if lg == nil {
		lg = errorLogger()
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      lg,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: connecting to %v: %w", cfg.Endpoints, err)
	}
	s := &Store{client: c, requireLeader: true}
	if _, err := s.Revision(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("etcd: reading from %v: %w", cfg.Endpoints, err)
	}
	return s, nil
}
