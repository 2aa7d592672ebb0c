// Package csrsigning approves and signs the node agents' serving
// certificates: CertificateSigningRequests of signer
// kubernetes.io/kubelet-serving, which an agent with serverTLSBootstrap
// creates (see internal/agent/server Bootstrap). It plays upstream's
// csrapproving and csrsigning controllers for that one signer.
//
// A pass (Sync) lists the kubelet-serving requests and, for each, asks
// Decide (the pure core):
//
//   - a pending request (neither approved nor denied) is approved, through
//     the /approval subresource with reason AutoApproved, when it was made
//     by a node identity system:node:<n> (in system:nodes), its subject is
//     CN system:node:<n>, O system:nodes, its usages are exactly digital
//     signature and server auth (key encipherment allowed), and each of its
//     DNS and IP names is <n> itself or one of Node <n>'s status.addresses.
//     Anything else stays pending for a person (kubectl certificate
//     approve or deny).
//   - an approved request that is not denied, failed or issued is signed
//     with the cluster CA (Config.Signer) into status.certificate, valid
//     for spec.expirationSeconds (at least 600 s) capped at Config.MaxTTL;
//     one the signer's rules refuse (wrong subject, usages or names, or a
//     request that does not parse) gets the Failed condition, reason
//     SignerValidationFailure, and is never signed.
//
// Deliberate difference from upstream: kube-controller-manager never
// approves kubelet-serving requests automatically (an operator or a
// third-party approver must); knode does, under the checks above, which
// tie every name in the certificate to the Node the requesting identity
// owns. A node can therefore obtain a serving certificate only for names
// and addresses it reports for itself in its Node status, which it writes
// (NodeRestriction keeps it to its own Node); the API server's proxy
// connects to the addresses in that same status.
//
// What the caller must do: give it a client that may list and get
// certificatesigningrequests, get nodes, and update
// certificatesigningrequests/approval and /status (the server's loopback
// client), and the Signer (the cluster PKI). Call Sync for one pass on the
// injected clock, or Run. One controller per cluster.
//
// Cost model: a pass lists the kubelet-serving requests (a field
// selector on spec.signerName), GETs the Node of each pending candidate,
// and writes at most two updates per request (approve, then sign).
//
// What it does not do: sign for other signers (upstream also signs
// kubernetes.io/kube-apiserver-client and -kubelet; not needed yet),
// delete old requests (upstream's csrcleaner), record events, or rotate
// the CA.
package csrsigning

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/auth"
	"knode/internal/controller/loop"
	csrreg "knode/internal/registry/certificatesigningrequest"
)

// Name is the controller's name.
const Name = "csrsigning-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens; a
// pending request whose Node gains the address it asks for is approved
// within one period.
const DefaultResyncPeriod = 30 * time.Second

// Signer issues certificates; *auth.PKI is the one knode server uses.
type Signer interface {
	// SignCSR signs req's key and names with keyUsage and extKeyUsage,
	// valid for ttl from now, and returns the PEM certificate.
	SignCSR(req *x509.CertificateRequest, keyUsage x509.KeyUsage, extKeyUsage []x509.ExtKeyUsage, ttl time.Duration) ([]byte, error)
}

// Config builds a Controller.
type Config struct {
	// Client reads requests and nodes and writes /approval and /status.
	// Required.
	Client kubernetes.Interface
	// Signer signs approved requests. Required.
	Signer Signer
	// MaxTTL caps a certificate's lifetime; 0 means auth.LeafValidity
	// (what the CA issues by default). Must not be negative.
	MaxTTL time.Duration
	// Clock stamps conditions and paces Run; zero value means the real
	// clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Informers, when set, is where Run takes the request informer that
	// wakes it; Run starts it. nil: Run builds its own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller approves and signs kubelet-serving requests. Passes do not
// overlap.
type Controller struct {
	cfg Config
	log *slog.Logger
	mu  sync.Mutex
}

// New checks cfg, fills its defaults and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "csrsigning", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	if cfg.Signer == nil {
		return nil, errors.New("csrsigning: Config.Signer is required")
	}
	if cfg.MaxTTL < 0 {
		return nil, fmt.Errorf("csrsigning: Config.MaxTTL %v must not be negative", cfg.MaxTTL)
	}
	if cfg.MaxTTL == 0 {
		cfg.MaxTTL = auth.LeafValidity
	}
	return &Controller{cfg: cfg, log: cfg.Logger.With("controller", Name)}, nil
}

// Sync makes one pass over the kubelet-serving requests at the clock's
// now and blocks until its writes are done. A request that cannot be
// handled (a conflict, a failed write or Node read) is left for the next
// pass; the error joins those failures.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, err := c.cfg.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.signerName", certificatesv1.KubeletServingSignerName).String(),
	})
	if err != nil {
		return fmt.Errorf("listing certificate signing requests: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if err := c.handle(ctx, &list.Items[i]); err != nil {
			errs = append(errs, fmt.Errorf("certificate signing request %s: %w", list.Items[i].Name, err))
		}
	}
	return errors.Join(errs...)
}

// handle takes csr as far as it goes in one pass: approve, then sign.
func (c *Controller) handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	for range 2 {
		var node *corev1.Node
		if name, ok := ApprovalCandidate(csr); ok {
			n, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("getting node %s: %w", name, err)
			default:
				node = n
			}
		}
		d := Decide(csr, node, c.cfg.MaxTTL)
		next, err := c.apply(ctx, csr, d)
		if err != nil || next == nil {
			return err
		}
		csr = next
	}
	return nil
}

// apply carries out d and returns the request as written, or nil when
// nothing was written.
func (c *Controller) apply(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, d Decision) (*certificatesv1.CertificateSigningRequest, error) {
	api := c.cfg.Client.CertificatesV1().CertificateSigningRequests()
	now := metav1.NewTime(c.cfg.Clock.Now())
	switch d.Action {
	case Approve:
		upd := withCondition(csr, certificatesv1.CertificateApproved, d, now)
		out, err := api.UpdateApproval(ctx, csr.Name, upd, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("approving: %w", err)
		}
		c.log.Info("approved kubelet serving certificate request", "csr", csr.Name, "requester", csr.Spec.Username)
		return out, nil
	case Sign:
		req, err := csrreg.ParseRequest(csr.Spec.Request)
		if err != nil {
			return nil, err // Decide parsed it already
		}
		cert, err := c.cfg.Signer.SignCSR(req, d.KeyUsage, d.ExtKeyUsage, d.TTL)
		if err != nil {
			return nil, fmt.Errorf("signing: %w", err)
		}
		upd := csr.DeepCopy()
		upd.Status.Certificate = cert
		out, err := api.UpdateStatus(ctx, upd, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("writing the certificate: %w", err)
		}
		c.log.Info("signed kubelet serving certificate", "csr", csr.Name, "requester", csr.Spec.Username, "ttl", d.TTL)
		return out, nil
	case Fail:
		upd := withCondition(csr, certificatesv1.CertificateFailed, d, now)
		if _, err := api.UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("marking failed: %w", err)
		}
		c.log.Warn("refused to sign kubelet serving certificate request", "csr", csr.Name, "requester", csr.Spec.Username, "reason", d.Message)
		return nil, nil
	default:
		if d.Why != "" {
			c.log.Debug("leaving kubelet serving certificate request for approval", "csr", csr.Name, "requester", csr.Spec.Username, "why", d.Why)
		}
		return nil, nil
	}
}

// withCondition returns a copy of csr with a True condition of type t.
func withCondition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType, d Decision, now metav1.Time) *certificatesv1.CertificateSigningRequest {
	upd := csr.DeepCopy()
	upd.Status.Conditions = append(upd.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: d.Reason, Message: d.Message,
		LastUpdateTime: now, LastTransitionTime: now,
	})
	return upd
}

// Run passes at once, then whenever a request changes, and at least every
// ResyncPeriod, until ctx ends. Errors are logged.
func (c *Controller) Run(ctx context.Context) {
	factory := c.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.cfg.Client, 0)
	}
	loop.Run(ctx, loop.Config{
		Clock:     c.cfg.Clock,
		Resync:    c.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{factory.Certificates().V1().CertificateSigningRequests().Informer()},
		Start:     factory.Start,
		Sync:      c.Sync,
		Logger:    c.log,
		Name:      "csrsigning",
	})
}
