package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Authenticator finds who sent a request.
//
// ok=false with a nil error: the request carries no credentials of this
// kind. A non-nil error: it carries such credentials but they are not valid,
// and the request must be refused with 401. ok=true: user is set, and its
// Groups include AuthenticatedGroup.
type Authenticator interface {
	Authenticate(r *http.Request) (user *User, ok bool, err error)
}

// ErrInvalidToken is returned for a bearer token no authenticator knows.
// The text is upstream's.
var ErrInvalidToken = errors.New("invalid bearer token")

// UnionAuthenticator tries each authenticator in order and returns the first
// user found. Errors do not stop the search: a request with a bad client
// certificate and a good token is authenticated by the token. When nobody
// authenticates the request, the errors seen are returned joined.
type UnionAuthenticator []Authenticator

// Authenticate implements Authenticator.
func (u UnionAuthenticator) Authenticate(r *http.Request) (*User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.Authenticate(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return user, true, nil
		}
	}
	return nil, false, errors.Join(errs...)
}

// X509Config configures an X509Authenticator.
type X509Config struct {
	// Roots are the CAs client certificates must chain to. Required.
	Roots *x509.CertPool
	// Clock judges certificate validity. Nil means the real clock.
	Clock clock.PassiveClock
}

// X509Authenticator authenticates the client certificate of a TLS request:
// the common name is the user, each organization a group.
//
// It verifies the chain itself - against Roots, for client authentication -
// rather than trusting the handshake, and checks the chain's validity at the
// clock's now on every request, so a certificate that expires during a
// long-lived connection stops working, as upstream's does. A verified chain
// is remembered by the certificates' fingerprint, so that repeated requests
// cost a hash and a time comparison instead of a signature check.
type X509Authenticator struct {
	roots *x509.CertPool
	clock clock.PassiveClock

	mu       sync.Mutex
	verified map[[sha256.Size]byte]validity
}

// validity is the window in which every certificate of a verified chain is
// valid.
type validity struct {
	notBefore, notAfter time.Time
}

// maxVerifiedChains bounds the verification cache; it is cleared when full.
const maxVerifiedChains = 16384

// NewX509Authenticator returns an authenticator for cfg.
func NewX509Authenticator(cfg X509Config) *X509Authenticator {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &X509Authenticator{roots: cfg.Roots, clock: cfg.Clock, verified: map[[sha256.Size]byte]validity{}}
}

// Authenticate implements Authenticator. A request without a client
// certificate, or whose certificate has an empty common name, is not
// authenticated here (ok=false, no error), as upstream does.
func (a *X509Authenticator) Authenticate(r *http.Request) (*User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || a.roots == nil {
		return nil, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	now := a.clock.Now()
	key := chainKey(r.TLS.PeerCertificates)
	a.mu.Lock()
	v, known := a.verified[key]
	a.mu.Unlock()
	if !known || now.Before(v.notBefore) || now.After(v.notAfter) {
		window, err := a.verify(r.TLS.PeerCertificates, now)
		if err != nil {
			return nil, false, fmt.Errorf("verifying certificate %s failed: %w", certificateID(leaf), err)
		}
		a.mu.Lock()
		if len(a.verified) >= maxVerifiedChains {
			clear(a.verified)
		}
		a.verified[key] = window
		a.mu.Unlock()
	}
	if leaf.Subject.CommonName == "" {
		return nil, false, nil
	}
	return newUser(leaf.Subject.CommonName, "", leaf.Subject.Organization), true, nil
}

// verify checks the presented chain at now and returns the window in which
// the chain it verified stays valid.
func (a *X509Authenticator) verify(certs []*x509.Certificate, now time.Time) (validity, error) {
	opts := x509.VerifyOptions{
		Roots:       a.roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	chains, err := certs[0].Verify(opts)
	if err != nil {
		return validity{}, err
	}
	w := validity{notBefore: certs[0].NotBefore, notAfter: certs[0].NotAfter}
	for _, c := range chains[0] {
		if c.NotBefore.After(w.notBefore) {
			w.notBefore = c.NotBefore
		}
		if c.NotAfter.Before(w.notAfter) {
			w.notAfter = c.NotAfter
		}
	}
	return w, nil
}

// chainKey fingerprints the certificates a client presented.
func chainKey(certs []*x509.Certificate) [sha256.Size]byte {
	h := sha256.New()
	for _, c := range certs {
		h.Write(c.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// certificateID names a certificate in errors without its secrets.
func certificateID(c *x509.Certificate) string {
	return fmt.Sprintf("CN=%q, SN=%s, issuer=%q", c.Subject.CommonName, c.SerialNumber, c.Issuer.CommonName)
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header. The scheme is case-insensitive; anything after the token is
// ignored, as upstream does.
func bearerToken(r *http.Request) (string, bool) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, rest, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token, _, _ := strings.Cut(rest, " ")
	return token, token != ""
}
