package auth

import (
	"bytes"
	"crypto"
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
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"knode/internal/atomicfile"
)

// File names inside PKIConfig.Dir.
const (
	CACertFile      = "ca.crt"
	CAKeyFile       = "ca.key"
	ServingCertFile = "serving.crt"
	ServingKeyFile  = "serving.key"
	AdminCertFile   = "admin.crt"
	AdminKeyFile    = "admin.key"
	// KubeletClientCertFile and KubeletClientKeyFile are the API server's
	// client credentials towards node agents, as kubeadm names them.
	KubeletClientCertFile = "apiserver-kubelet-client.crt"
	KubeletClientKeyFile  = "apiserver-kubelet-client.key"
	// EtcdPeerCertFile and EtcdPeerKeyFile are an embedded etcd member's
	// pair towards its peers (EnsurePeerPair).
	EtcdPeerCertFile = "etcd-peer.crt"
	EtcdPeerKeyFile  = "etcd-peer.key"
)

// Lifetimes of what EnsurePKI and IssueClientCert create.
const (
	// CAValidity is the lifetime of a generated CA.
	CAValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is the lifetime of the serving, admin and kubelet-client
	// certificates and the default lifetime of client certificates. A leaf
	// never outlives the CA that signs it.
	LeafValidity = 365 * 24 * time.Hour
	// RenewBefore: EnsurePKI reissues a serving, admin or kubelet-client
	// certificate that expires within this window.
	RenewBefore = 90 * 24 * time.Hour
	// backdate starts validity a little in the past to absorb clock skew
	// between machines.
	backdate = 5 * time.Minute
)

// ErrCAUnusable: the CA files in the data directory exist but cannot be used
// (key missing, key not matching, not a CA, expired). EnsurePKI never
// replaces an existing CA, since that would invalidate every credential it
// issued; an operator must fix or remove the files.
var ErrCAUnusable = errors.New("auth: cluster CA unusable")

// PKIConfig says where the cluster's certificates live.
type PKIConfig struct {
	// Dir holds the files named by the *File constants. Required. Created
	// (0700) if missing.
	Dir string
	// Hosts are DNS names and IP addresses the serving certificate must be
	// valid for, beyond localhost, 127.0.0.1 and ::1 which are always
	// included.
	Hosts []string
	// Clock stamps certificates and judges expiry. Nil means the real clock.
	Clock clock.PassiveClock
}

// PKI is a loaded cluster CA with its serving, admin and kubelet-client
// credentials. It is safe for concurrent use; nothing in it changes after
// EnsurePKI returns.
type PKI struct {
	clock clock.PassiveClock

	caCert *x509.Certificate
	caKey  crypto.Signer
	caPEM  []byte
	pool   *x509.CertPool

	serving tls.Certificate

	adminCertPEM []byte
	adminKeyPEM  []byte

	// kubeletClient is nil only when LoadPKI found no kubelet-client pair.
	kubeletClient *tls.Certificate
}

// leafSpec is what a leaf certificate must say.
type leafSpec struct {
	commonName    string
	organizations []string
	dnsNames      []string
	ips           []net.IP
	usages        []x509.ExtKeyUsage
}

// EnsurePKI loads the CA, serving, admin and kubelet-client credentials
// from cfg.Dir, creating whatever is missing. A serving, admin or
// kubelet-client certificate is reissued (with a new key) when it is
// missing, unreadable, not signed by the CA, within RenewBefore of expiry,
// not of the wanted subject, or - for serving - lacks one of the wanted
// names. Every write is atomic; keys are written 0600.
//
// The kubelet-client pair (KubeletClientCertFile, CN KubeletClientUser, O
// MastersGroup) is what the API server presents to node agents, which
// allow MastersGroup everything.
//
// Only one process at a time may call EnsurePKI on a directory: two
// processes creating a CA at the same moment could leave a certificate of
// one beside the key of the other. Other processes use LoadPKI.
func EnsurePKI(cfg PKIConfig) (*PKI, error) {
	return openPKI(cfg, true)
}

// LoadPKI loads existing credentials from cfg.Dir without creating or
// renewing anything; cfg.Hosts is ignored. A missing file gives an error
// wrapping fs.ErrNotExist, except for the kubelet-client pair, which a data
// directory made by an older release lacks: without it
// KubeletClientCertificate reports false. It suits commands that must not
// change the data directory, such as printing a kubeconfig.
func LoadPKI(cfg PKIConfig) (*PKI, error) {
	return openPKI(cfg, false)
}

func openPKI(cfg PKIConfig, create bool) (*PKI, error) {
	if cfg.Dir == "" {
		return nil, field.Required(field.NewPath("dir"), "the directory for the cluster's certificates")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	// Loading checks only what is on disk; the wanted names matter only
	// when the serving certificate may be reissued.
	var dnsNames []string
	var ips []net.IP
	if create {
		var err error
		if dnsNames, ips, err = servingNames(cfg.Hosts); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(cfg.Dir, dirMode); err != nil {
			return nil, fmt.Errorf("auth: %w", err)
		}
	}
	now := cfg.Clock.Now()
	p := &PKI{clock: cfg.Clock}
	if err := p.ensureCA(cfg.Dir, now, create); err != nil {
		return nil, err
	}

	serving := leafSpec{
		commonName: "knode",
		dnsNames:   dnsNames,
		ips:        ips,
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	certPEM, keyPEM, err := p.ensureLeaf(cfg.Dir, ServingCertFile, ServingKeyFile, serving, now, create)
	if err != nil {
		return nil, err
	}
	if p.serving, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("auth: %s: %w", ServingCertFile, err)
	}
	// The CA goes out with the serving certificate, so that a joining
	// server can check it against the hash its cluster token pins.
	p.serving.Certificate = append(p.serving.Certificate, p.caCert.Raw)

	admin := leafSpec{
		commonName:    AdminUser,
		organizations: []string{MastersGroup},
		usages:        []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p.adminCertPEM, p.adminKeyPEM, err = p.ensureLeaf(cfg.Dir, AdminCertFile, AdminKeyFile, admin, now, create)
	if err != nil {
		return nil, err
	}

	kubeletClient := leafSpec{
		commonName:    KubeletClientUser,
		organizations: []string{MastersGroup},
		usages:        []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certPEM, keyPEM, err = p.ensureLeaf(cfg.Dir, KubeletClientCertFile, KubeletClientKeyFile, kubeletClient, now, create)
	switch {
	case err == nil:
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("auth: %s: %w", KubeletClientCertFile, err)
		}
		p.kubeletClient = &pair
	case !create && errors.Is(err, fs.ErrNotExist):
		// A data directory from before the pair existed; only the API
		// server needs it, and its EnsurePKI creates it.
	default:
		return nil, err
	}
	return p, nil
}

// EnsurePeerPair returns the files of an embedded etcd member's peer pair
// in dir (EtcdPeerCertFile, EtcdPeerKeyFile), issuing a new pair from the
// CA when they are missing or unusable as ensureLeaf judges them: valid
// for both server and client authentication (a member is both to its
// peers), CN "knode-etcd-peer", naming hosts besides localhost, 127.0.0.1
// and ::1.
func (p *PKI) EnsurePeerPair(dir string, hosts []string) (certFile, keyFile string, err error) {
	dnsNames, ips, err := servingNames(hosts)
	if err != nil {
		return "", "", err
	}
	spec := leafSpec{
		commonName: "knode-etcd-peer",
		dnsNames:   dnsNames,
		ips:        ips,
		usages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if _, _, err := p.ensureLeaf(dir, EtcdPeerCertFile, EtcdPeerKeyFile, spec, p.clock.Now(), true); err != nil {
		return "", "", err
	}
	return filepath.Join(dir, EtcdPeerCertFile), filepath.Join(dir, EtcdPeerKeyFile), nil
}

// ensureCA loads the CA or, when ca.crt is absent and create is set,
// generates one. ca.key is written before ca.crt, so a crash in between
// leaves no certificate and the next start generates afresh; nothing can
// have been signed by a CA whose certificate was never written.
func (p *PKI) ensureCA(dir string, now time.Time, create bool) error {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, err := os.ReadFile(certPath)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		certPEM, keyPEM, err := newCA(now)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(keyPath, keyPEM, keyFileMode); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
		if err := atomicfile.Write(certPath, certPEM, certFileMode); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
		return p.setCA(certPEM, keyPEM, now)
	case err != nil:
		return fmt.Errorf("auth: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s exists but %s does not", ErrCAUnusable, certPath, keyPath)
	}
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if err := p.setCA(certPEM, keyPEM, now); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCAUnusable, dir, err)
	}
	return nil
}

// setCA checks and installs a CA pair. Every certificate in certPEM is
// trusted for client authentication; the first one signs.
func (p *PKI) setCA(certPEM, keyPEM []byte, now time.Time) error {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return fmt.Errorf("%s: %w", CACertFile, err)
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return fmt.Errorf("%s: %w", CAKeyFile, err)
	}
	ca := certs[0]
	if !ca.IsCA {
		return fmt.Errorf("%s: not a CA certificate", CACertFile)
	}
	if !publicKeysEqual(ca.PublicKey, key.Public()) {
		return fmt.Errorf("%s does not match %s", CAKeyFile, CACertFile)
	}
	if now.Before(ca.NotBefore) || now.After(ca.NotAfter) {
		return fmt.Errorf("%s is valid from %s to %s, not now (%s)", CACertFile,
			ca.NotBefore.UTC().Format(time.RFC3339), ca.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	p.caCert, p.caKey, p.caPEM, p.pool = ca, key, certPEM, pool
	return nil
}

// ensureLeaf returns a usable pair from disk or, if create is set, issues
// and writes a new one. The key is written first: a crash between the two
// writes leaves a mismatched pair, which the next call replaces.
func (p *PKI) ensureLeaf(dir, certFile, keyFile string, spec leafSpec, now time.Time, create bool) (certPEM, keyPEM []byte, err error) {
	certPath, keyPath := filepath.Join(dir, certFile), filepath.Join(dir, keyFile)
	certPEM, keyPEM, problem := loadLeaf(certPath, keyPath)
	if problem == nil {
		renewBefore := RenewBefore
		if !create {
			renewBefore = 0
		}
		problem = leafProblem(certPEM, keyPEM, spec, p.caCert, now, renewBefore)
	}
	if problem == nil {
		return certPEM, keyPEM, nil
	}
	if !create {
		return nil, nil, fmt.Errorf("auth: %s: %w", certPath, problem)
	}
	certPEM, keyPEM, err = p.issue(spec, now, LeafValidity)
	if err != nil {
		return nil, nil, err
	}
	if err := atomicfile.Write(keyPath, keyPEM, keyFileMode); err != nil {
		return nil, nil, fmt.Errorf("auth: %w", err)
	}
	if err := atomicfile.Write(certPath, certPEM, certFileMode); err != nil {
		return nil, nil, fmt.Errorf("auth: %w", err)
	}
	return certPEM, keyPEM, nil
}

func loadLeaf(certPath, keyPath string) (certPEM, keyPEM []byte, err error) {
	if certPEM, err = os.ReadFile(certPath); err != nil {
		return nil, nil, err
	}
	if keyPEM, err = os.ReadFile(keyPath); err != nil {
		return nil, nil, err
	}
	return certPEM, keyPEM, nil
}

// leafProblem says why a stored leaf pair cannot be kept, or nil if it can:
// the pair must parse and match, be signed by ca, be valid at now for at
// least renewBefore more, carry spec's usage, subject and every wanted name.
// Extra names are fine.
func leafProblem(certPEM, keyPEM []byte, spec leafSpec, ca *x509.Certificate, now time.Time, renewBefore time.Duration) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	cert := pair.Leaf
	if err := cert.CheckSignatureFrom(ca); err != nil {
		return fmt.Errorf("not signed by the cluster CA: %w", err)
	}
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Before(cert.NotAfter) || cert.NotAfter.Sub(now) < renewBefore {
		return fmt.Errorf("expires at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, u := range spec.usages {
		if !slices.Contains(cert.ExtKeyUsage, u) {
			return errors.New("lacks a required extended key usage")
		}
	}
	if cert.Subject.CommonName != spec.commonName || !slices.Equal(cert.Subject.Organization, spec.organizations) {
		return fmt.Errorf("subject %q is not the wanted one", cert.Subject.String())
	}
	return MissingName(cert, spec.dnsNames, spec.ips)
}

// MissingName says which of the DNS names and IP addresses cert does not
// carry, if any.
func MissingName(cert *x509.Certificate, dnsNames []string, ips []net.IP) error {
	for _, name := range dnsNames {
		if !slices.Contains(cert.DNSNames, name) {
			return fmt.Errorf("lacks DNS name %q", name)
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return fmt.Errorf("lacks IP address %s", ip)
		}
	}
	return nil
}

// servingNames splits hosts into DNS names and IP addresses, adding the
// loopback names, without duplicates and in a stable order.
func servingNames(hosts []string) (dnsNames []string, ips []net.IP, err error) {
	dnsNames = []string{"localhost"}
	addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
	var errs field.ErrorList
	for i, h := range hosts {
		p := field.NewPath("hosts").Index(i)
		if addr, err := netip.ParseAddr(h); err == nil {
			if addr.Zone() != "" {
				errs = append(errs, field.Invalid(p, h, "an IP address in a certificate cannot carry a zone"))
				continue
			}
			addr = addr.Unmap()
			if !slices.Contains(addrs, addr) {
				addrs = append(addrs, addr)
			}
			continue
		}
		name := strings.ToLower(h)
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			if validation.IsWildcardDNS1123Subdomain(name) != nil {
				errs = append(errs, field.Invalid(p, h, "must be an IP address or a DNS name: "+strings.Join(msgs, "; ")))
				continue
			}
		}
		if !slices.Contains(dnsNames, name) {
			dnsNames = append(dnsNames, name)
		}
	}
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	for _, a := range addrs {
		ips = append(ips, net.IP(a.AsSlice()))
	}
	return dnsNames, ips, nil
}

// TLSConfig returns a new server configuration: the serving certificate,
// HTTP/2 and HTTP/1.1, TLS 1.2 or later, and client certificates verified
// against the cluster CA when a client offers one. Whether a request without
// one is allowed is the authenticator's and authorizer's business.
func (p *PKI) TLSConfig() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.serving},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.pool,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
		Time:         p.clock.Now,
	}
}

// CAPEM returns a copy of the CA certificate file's content, for
// kubeconfigs and clients.
func (p *PKI) CAPEM() []byte { return bytes.Clone(p.caPEM) }

// CertPool returns a new pool holding the cluster CA, for clients that
// verify the server.
func (p *PKI) CertPool() *x509.CertPool { return p.pool.Clone() }

// KubeletClientCertificate returns the API server's client certificate
// towards node agents (CN KubeletClientUser, O MastersGroup), with its
// Leaf parsed. The caller must not change it. ok is false only for a PKI
// from LoadPKI on a directory without the pair; EnsurePKI always has one.
func (p *PKI) KubeletClientCertificate() (cert tls.Certificate, ok bool) {
	if p.kubeletClient == nil {
		return tls.Certificate{}, false
	}
	return *p.kubeletClient, true
}

// X509Authenticator authenticates client certificates signed by this CA.
func (p *PKI) X509Authenticator() *X509Authenticator {
	return NewX509Authenticator(X509Config{Roots: p.pool, Clock: p.clock})
}

// IssueClientCert signs a client certificate for user (the CN) in groups
// (one O each), valid for ttl from now; 0 means LeafValidity. The result
// never outlives the CA. The key is a new ECDSA P-256 key in PKCS#8 PEM.
func (p *PKI) IssueClientCert(user string, groups []string, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	var errs field.ErrorList
	if user == "" {
		errs = append(errs, field.Required(field.NewPath("user"), ""))
	}
	for i, g := range groups {
		if g == "" {
			errs = append(errs, field.Invalid(field.NewPath("groups").Index(i), g, "must not be empty"))
		}
	}
	if ttl < 0 {
		errs = append(errs, field.Invalid(field.NewPath("ttl"), ttl.String(), "must not be negative"))
	}
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	if ttl == 0 {
		ttl = LeafValidity
	}
	spec := leafSpec{
		commonName:    user,
		organizations: slices.Clone(groups),
		usages:        []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return p.issue(spec, p.clock.Now(), ttl)
}

// SignCSR signs, with the cluster CA, a certificate for the public key of
// req: req's subject and its DNS, IP, email and URI names (other requested
// extensions are ignored), keyUsage and extKeyUsage, valid from now (less
// five minutes for clock skew) for ttl after now, 0 meaning LeafValidity,
// and never past the CA's own expiry. It is never a CA certificate. The
// request's signature must verify. The caller decides whether req may be
// signed at all (the csrsigning controller does). The result is one PEM
// CERTIFICATE block.
func (p *PKI) SignCSR(req *x509.CertificateRequest, keyUsage x509.KeyUsage, extKeyUsage []x509.ExtKeyUsage, ttl time.Duration) ([]byte, error) {
	switch {
	case req == nil:
		return nil, field.Required(field.NewPath("req"), "")
	case ttl < 0:
		return nil, field.Invalid(field.NewPath("ttl"), ttl.String(), "must not be negative")
	}
	if err := req.CheckSignature(); err != nil {
		return nil, fmt.Errorf("auth: certificate request signature: %w", err)
	}
	if ttl == 0 {
		ttl = LeafValidity
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := p.clock.Now()
	notAfter := now.Add(ttl)
	if notAfter.After(p.caCert.NotAfter) {
		notAfter = p.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               req.Subject,
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              keyUsage,
		ExtKeyUsage:           slices.Clone(extKeyUsage),
		BasicConstraintsValid: true,
		DNSNames:              req.DNSNames,
		IPAddresses:           req.IPAddresses,
		EmailAddresses:        req.EmailAddresses,
		URIs:                  req.URIs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, req.PublicKey, p.caKey)
	if err != nil {
		return nil, fmt.Errorf("auth: sign certificate for %q: %w", req.Subject.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// issue signs a new key pair for spec with the CA.
func (p *PKI) issue(spec leafSpec, now time.Time, ttl time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(ttl)
	if notAfter.After(p.caCert.NotAfter) {
		notAfter = p.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: spec.commonName, Organization: spec.organizations},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           spec.usages,
		BasicConstraintsValid: true,
		DNSNames:              spec.dnsNames,
		IPAddresses:           spec.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, key.Public(), p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: sign certificate for %q: %w", spec.commonName, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// newCA generates a self-signed ECDSA P-256 CA valid for CAValidity.
func newCA(now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "knode-ca"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: self-sign CA: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("auth: serial number: %w", err)
	}
	// Serial numbers must be positive.
	return serial.Add(serial, big.NewInt(1)), nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("auth: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ParseCertificates returns every CERTIFICATE block in data; at least one.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM CERTIFICATE block")
	}
	return certs, nil
}

// parsePrivateKey reads the first key block: PKCS#8, SEC 1 EC or PKCS#1 RSA,
// so that a CA made by other tools can be used.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return nil, errors.New("no PEM private key block")
		}
		var key any
		var err error
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("unsupported private key type %T", key)
		}
		return signer, nil
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}
