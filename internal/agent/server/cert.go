package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"knode/internal/atomicfile"
	"knode/internal/auth"
)

// File names of the self-signed serving pair inside Config.CertDir; they are
// the kubelet's.
const (
	CertFile = "kubelet.crt"
	KeyFile  = "kubelet.key"
)

// Lifetimes of the self-signed serving certificate.
const (
	// SelfSignedValidity is how long a generated certificate is valid.
	SelfSignedValidity = 365 * 24 * time.Hour
	// SelfSignedRenewBefore: a stored certificate that expires within this
	// window is replaced at start, so that a long-running agent does not
	// serve an expired one (the certificate is not reloaded while running).
	SelfSignedRenewBefore = 30 * 24 * time.Hour
	// backdate starts validity a little in the past to absorb clock skew
	// between the agent and its clients.
	backdate = 5 * time.Minute
)

// File modes of what this package writes.
const (
	certDirMode  os.FileMode = 0o700
	certFileMode os.FileMode = 0o644
	keyFileMode  os.FileMode = 0o600
)

// servingNames are the subject alternative names a self-signed serving
// certificate must carry.
type servingNames struct {
	dns []string
	ips []net.IP
}

// wantedNames returns the names for a node's self-signed certificate: the
// node name, "localhost" and the hostname as DNS names, the loopback
// addresses and extra as IP addresses, and the node name as an IP address
// too when it is one. Duplicates are dropped and the order is stable; a
// hostname that is not a DNS name is left out.
func wantedNames(nodeName, hostname string, extra []net.IP) servingNames {
	var n servingNames
	addDNS := func(name string) {
		name = strings.ToLower(name)
		if name == "" || len(validation.IsDNS1123Subdomain(name)) > 0 || slices.Contains(n.dns, name) {
			return
		}
		n.dns = append(n.dns, name)
	}
	addIP := func(ip net.IP) {
		if ip == nil || slices.ContainsFunc(n.ips, ip.Equal) {
			return
		}
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		n.ips = append(n.ips, ip)
	}
	addDNS(nodeName)
	addDNS("localhost")
	addDNS(hostname)
	addIP(net.ParseIP(nodeName))
	addIP(net.IPv4(127, 0, 0, 1))
	addIP(net.IPv6loopback)
	for _, ip := range extra {
		addIP(ip)
	}
	return n
}

// selfSignedProblem says why a stored serving certificate cannot be kept,
// or nil if it can: it must be valid at now and for at least
// SelfSignedRenewBefore more, be usable for serving, and carry every wanted
// name. Extra names are fine.
func selfSignedProblem(cert *x509.Certificate, want servingNames, now time.Time) error {
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339))
	}
	if !now.Before(cert.NotAfter) {
		return fmt.Errorf("expired at %s", cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if cert.NotAfter.Sub(now) < SelfSignedRenewBefore {
		return fmt.Errorf("expires at %s, within %s", cert.NotAfter.UTC().Format(time.RFC3339), SelfSignedRenewBefore)
	}
	if len(cert.ExtKeyUsage) > 0 && !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return errors.New("not usable for server authentication")
	}
	return auth.MissingName(cert, want.dns, want.ips)
}

// ensureSelfSigned returns the serving pair kept in dir, generating and
// writing a new one when it is missing, unreadable, or has a
// selfSignedProblem at now. regenerated says why a new pair was made ("" when
// the stored one was kept). The key is written before the certificate, each
// atomically: a crash in between leaves a mismatched pair, which the next
// start replaces.
func ensureSelfSigned(dir, commonName string, want servingNames, now time.Time) (pair tls.Certificate, regenerated string, err error) {
	certPath, keyPath := filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)
	pair, problem := loadPair(certPath, keyPath)
	if problem == nil {
		problem = selfSignedProblem(pair.Leaf, want, now)
	}
	if problem == nil {
		return pair, "", nil
	}
	certPEM, keyPEM, err := newSelfSigned(commonName, want, now)
	if err != nil {
		return tls.Certificate{}, "", err
	}
	if err := os.MkdirAll(dir, certDirMode); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("server: %w", err)
	}
	if err := atomicfile.Write(keyPath, keyPEM, keyFileMode); err != nil {
		return tls.Certificate{}, "", err
	}
	if err := atomicfile.Write(certPath, certPEM, certFileMode); err != nil {
		return tls.Certificate{}, "", err
	}
	if pair, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("server: generated pair: %w", err)
	}
	return pair, problem.Error(), nil
}

// loadPair reads a certificate and key file; Leaf is set on success.
func loadPair(certPath, keyPath string) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, err
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return tls.Certificate{}, err
		}
	}
	return pair, nil
}

// newSelfSigned makes an ECDSA P-256 key and a certificate for it, signed by
// itself, valid from now (less backdate) for SelfSignedValidity.
func newSelfSigned(commonName string, names servingNames, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("server: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("server: serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)), // positive
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(SelfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              names.dns,
		IPAddresses:           names.ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("server: self-sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("server: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// parseClientCA returns a pool of every certificate in data, which must hold
// at least one and no unparsable CERTIFICATE block. Other blocks are ignored.
func parseClientCA(data []byte) (*x509.CertPool, error) {
	certs, err := auth.ParseCertificates(data)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}
