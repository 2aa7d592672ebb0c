package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"knode/internal/atomicfile"
	"knode/internal/auth"
)

// ServingFile is the name, inside BootstrapConfig.CertDir, of the
// cluster-signed serving pair: the certificate (with any chain the signer
// returned) followed by its key, as the kubelet's
// kubelet-server-current.pem holds them.
const ServingFile = "kubelet-server-current.pem"

// DefaultBootstrapPollInterval is how often Bootstrap reads its request
// again while it waits, besides watching it.
const DefaultBootstrapPollInterval = 5 * time.Second

// RenewFraction: a stored serving certificate is replaced once less than
// this fraction of its lifetime (notBefore to notAfter) remains.
const RenewFraction = 0.2

// Errors Bootstrap returns when the cluster will not sign.
var (
	// ErrDenied: the request got a Denied condition.
	ErrDenied = errors.New("serving certificate request denied")
	// ErrFailed: the signer gave the request a Failed condition.
	ErrFailed = errors.New("serving certificate request failed")
	// ErrDeleted: the request was deleted before it was signed.
	ErrDeleted = errors.New("serving certificate request deleted")
)

// BootstrapConfig says what serving certificate to obtain from the
// cluster (the kubelet's serverTLSBootstrap).
type BootstrapConfig struct {
	// Client acts as the node, system:node:<NodeName> in system:nodes:
	// the API server records that identity as the request's requester,
	// which is what the signer approves. Required.
	Client kubernetes.Interface
	// NodeName is the node; the certificate's subject is CN
	// system:node:<NodeName>, O system:nodes. Required.
	NodeName string
	// Hostnames are the DNS names the certificate is for (the node's
	// hostname and DNS addresses); invalid ones are left out.
	Hostnames []string
	// IPs are the IP addresses the certificate is for (the node's
	// addresses). The request needs at least one name or address.
	IPs []net.IP
	// CertDir holds ServingFile. Required; created (0700) if missing.
	CertDir string
	// ExpirationSeconds, when set, asks for that lifetime (at least 600);
	// the signer may issue a shorter one. nil leaves it to the signer.
	ExpirationSeconds *int32
	// PollInterval is how often the request is read again while waiting,
	// on Clock, in case a watch misses the signing; 0 means
	// DefaultBootstrapPollInterval.
	PollInterval time.Duration
	// Clock judges stored certificates and paces the wait; nil means the
	// real clock.
	Clock clock.Clock
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

func (c *BootstrapConfig) validate() error {
	var errs field.ErrorList
	if c.Client == nil {
		errs = append(errs, field.Required(field.NewPath("client"), "a client acting as the node"))
	}
	if c.NodeName == "" {
		errs = append(errs, field.Required(field.NewPath("nodeName"), ""))
	}
	if c.CertDir == "" {
		errs = append(errs, field.Required(field.NewPath("certDir"), "where "+ServingFile+" is kept"))
	}
	if s := c.ExpirationSeconds; s != nil && *s < 600 {
		errs = append(errs, field.Invalid(field.NewPath("expirationSeconds"), *s, "must be at least 600"))
	}
	if c.PollInterval < 0 {
		errs = append(errs, field.Invalid(field.NewPath("pollInterval"), c.PollInterval.String(), "must not be negative"))
	}
	if len(c.servingNames().dns) == 0 && len(c.IPs) == 0 {
		errs = append(errs, field.Required(field.NewPath("hostnames"), "at least one valid hostname or IP address"))
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultBootstrapPollInterval
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// servingNames are the names the certificate is requested for: the valid
// hostnames (lower-cased) and the IPs, each once, in the order given.
func (c *BootstrapConfig) servingNames() servingNames {
	var n servingNames
	for _, h := range c.Hostnames {
		h = strings.ToLower(h)
		if h != "" && len(validation.IsDNS1123Subdomain(h)) == 0 && !slices.Contains(n.dns, h) {
			n.dns = append(n.dns, h)
		}
	}
	for _, ip := range c.IPs {
		if ip == nil || slices.ContainsFunc(n.ips, ip.Equal) {
			continue
		}
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		n.ips = append(n.ips, ip)
	}
	return n
}

// Bootstrap returns the path of a cluster-signed serving pair for the
// node, to pass as both Config.TLSCertFile and Config.TLSKeyFile. It
// keeps the pair in <CertDir>/ServingFile while that is usable (see
// servingProblem: valid now, more than RenewFraction of its lifetime left,
// the node's subject and every wanted name). Otherwise it makes a new
// ECDSA P-256 key, creates a CertificateSigningRequest for signer
// kubernetes.io/kubelet-serving with usages digital signature, key
// encipherment and server auth, and blocks until the request is signed,
// then writes the certificate and key atomically (0600).
//
// The wait watches the request and reads it again every PollInterval on
// Clock; it ends with ctx (the caller sets any deadline), ErrDenied,
// ErrFailed or ErrDeleted. The key lives only in memory until the
// certificate arrives: a restart during the wait starts a new request.
// Bootstrap does not rotate a certificate while the agent runs.
func Bootstrap(ctx context.Context, cfg BootstrapConfig) (string, error) {
	if err := cfg.validate(); err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: %w", err)
	}
	log := cfg.Logger.With("component", "serving-certificate-bootstrap")
	path := filepath.Join(cfg.CertDir, ServingFile)
	want := cfg.servingNames()
	pair, err := loadPair(path, path)
	problem := err
	if err == nil {
		problem = servingProblem(pair, cfg.NodeName, want, cfg.Clock.Now())
	}
	if problem == nil {
		return path, nil
	}
	if !errors.Is(problem, fs.ErrNotExist) {
		log.Info("requesting a new serving certificate", "file", path, "why", problem)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: generate key: %w", err)
	}
	request, err := certificateRequest(key, cfg.NodeName, want)
	if err != nil {
		return "", err
	}
	api := cfg.Client.CertificatesV1().CertificateSigningRequests()
	csr, err := api.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           request,
			SignerName:        certificatesv1.KubeletServingSignerName,
			ExpirationSeconds: cfg.ExpirationSeconds,
			Usages: []certificatesv1.KeyUsage{
				certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: creating the certificate signing request: %w", err)
	}
	log.Info("waiting for the serving certificate", "csr", csr.Name)
	certPEM, err := waitIssued(ctx, cfg, csr)
	if err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: certificate signing request %s: %w", csr.Name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: encode key: %w", err)
	}
	data := bytes.TrimRight(certPEM, "\n")
	data = append(data, '\n')
	data = append(data, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if _, err := tls.X509KeyPair(data, data); err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: the issued certificate does not fit the key: %w", err)
	}
	if err := os.MkdirAll(cfg.CertDir, certDirMode); err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: %w", err)
	}
	if err := atomicfile.Write(path, data, keyFileMode); err != nil {
		return "", fmt.Errorf("serving certificate bootstrap: %w", err)
	}
	log.Info("serving certificate issued", "csr", csr.Name, "file", path)
	return path, nil
}

// certificateRequest is the PEM request for key: subject CN
// system:node:<node>, O system:nodes, and the names.
func certificateRequest(key *ecdsa.PrivateKey, node string, names servingNames) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: auth.NodeUser(node), Organization: []string{auth.NodesGroup}},
		DNSNames:    names.dns,
		IPAddresses: names.ips,
	}, key)
	if err != nil {
		return nil, fmt.Errorf("serving certificate bootstrap: create certificate request: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// servingProblem says why a stored cluster-signed pair cannot be kept, or
// nil if it can: it must be valid at now with more than RenewFraction of
// its lifetime left, be the node's (CN system:node:<node>), be usable for
// serving and carry every wanted name.
func servingProblem(pair tls.Certificate, node string, want servingNames, now time.Time) error {
	cert := pair.Leaf
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	renewAt := cert.NotAfter.Add(-time.Duration(float64(lifetime) * RenewFraction))
	if !now.Before(renewAt) {
		return fmt.Errorf("expires at %s; renewed from %s", cert.NotAfter.UTC().Format(time.RFC3339), renewAt.UTC().Format(time.RFC3339))
	}
	if cert.Subject.CommonName != auth.NodeUser(node) {
		return fmt.Errorf("common name %q is not %q", cert.Subject.CommonName, auth.NodeUser(node))
	}
	if !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return errors.New("not usable for server authentication")
	}
	return auth.MissingName(cert, want.dns, want.ips)
}

// waitIssued blocks until csr has a certificate and returns it.
func waitIssued(ctx context.Context, cfg BootstrapConfig, csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	api := cfg.Client.CertificatesV1().CertificateSigningRequests()
	for {
		if cert, err := issued(csr); cert != nil || err != nil {
			return cert, err
		}
		w, err := api.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", csr.Name).String(),
			ResourceVersion: csr.ResourceVersion,
		})
		if err != nil && ctx.Err() == nil {
			cfg.Logger.Debug("watching the certificate signing request failed; polling", "csr", csr.Name, "err", err)
		}
		next, err := nextVersion(ctx, cfg, w)
		if w != nil {
			w.Stop()
		}
		if err != nil {
			return nil, err
		}
		if next == nil {
			// The watch ended or the poll timer fired: read it again.
			got, err := api.Get(ctx, csr.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return nil, ErrDeleted
			case err != nil && ctx.Err() != nil:
				return nil, ctx.Err()
			case err != nil:
				cfg.Logger.Debug("reading the certificate signing request failed", "csr", csr.Name, "err", err)
				if _, err := nextVersion(ctx, cfg, nil); err != nil {
					return nil, err // only ctx ends a wait without a watch
				}
				continue
			}
			next = got
		}
		csr = next
	}
}

// nextVersion waits for a change of the request on w (nil: no watch),
// for at most PollInterval on the clock. It returns the changed request,
// or nil when the watch ended or the interval passed.
func nextVersion(ctx context.Context, cfg BootstrapConfig, w watch.Interface) (*certificatesv1.CertificateSigningRequest, error) {
	timer := cfg.Clock.NewTimer(cfg.PollInterval)
	defer timer.Stop()
	var events <-chan watch.Event
	if w != nil {
		events = w.ResultChan()
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C():
			return nil, nil
		case ev, ok := <-events:
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, ErrDeleted
			case watch.Added, watch.Modified:
				if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok {
					return csr, nil
				}
			case watch.Error:
				return nil, nil
			}
		}
	}
}

// issued returns csr's certificate once it has one, or the error that
// ends the wait (denied, failed).
func issued(csr *certificatesv1.CertificateSigningRequest) ([]byte, error) {
	for _, c := range csr.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return nil, fmt.Errorf("%w: %s: %s", ErrDenied, c.Reason, c.Message)
		case certificatesv1.CertificateFailed:
			return nil, fmt.Errorf("%w: %s: %s", ErrFailed, c.Reason, c.Message)
		}
	}
	if len(csr.Status.Certificate) > 0 {
		return csr.Status.Certificate, nil
	}
	return nil, nil
}
