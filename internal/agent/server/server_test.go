package server_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/server"
	"knode/internal/auth"
)

// t0 is an arbitrary fixed start for fake clocks.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const nodeName = "n1"

// newCA returns a fresh cluster PKI in a temp dir; it issues the test's
// client certificates.
func newCA(t *testing.T, clk *testingclock.FakeClock) *auth.PKI {
	t.Helper()
	p, err := auth.EnsurePKI(auth.PKIConfig{Dir: t.TempDir(), Clock: clk})
	if err != nil {
		t.Fatalf("EnsurePKI: %v", err)
	}
	return p
}

func clientCert(t *testing.T, ca *auth.PKI, user string, groups []string, ttl time.Duration) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.IssueClientCert(user, groups, ttl)
	if err != nil {
		t.Fatalf("IssueClientCert: %v", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

// testConfig listens on a free loopback port with a self-signed certificate
// in a temp dir and the CA's certificates as client CA.
func testConfig(t *testing.T, clk *testingclock.FakeClock, ca *auth.PKI) server.Config {
	return server.Config{
		Address:  "127.0.0.1",
		NodeName: nodeName,
		CertDir:  filepath.Join(t.TempDir(), "pki"),
		ClientCA: ca.CAPEM(),
		Clock:    clk,
	}
}

func mustNew(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// start runs s until the test ends, then checks Run returned nil.
func start(t *testing.T, s *server.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// servedCert reads the self-signed certificate a server keeps in dir.
func servedCert(t *testing.T, dir string) (*x509.Certificate, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, server.CertFile))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s holds no PEM", server.CertFile)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c, data
}

// client trusts roots for the server, judges validity at clk's now, and
// presents cert when not nil.
func client(t *testing.T, roots *x509.CertPool, clk *testingclock.FakeClock, cert *tls.Certificate) *http.Client {
	t.Helper()
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, Time: clk.Now},
		ForceAttemptHTTP2: true,
	}
	if cert != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func selfSignedRoots(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	c, _ := servedCert(t, dir)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return pool
}

type response struct {
	code   int
	header http.Header
	body   []byte
	peer   *x509.Certificate
}

func do(t *testing.T, c *http.Client, method, url string) response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := response{code: resp.StatusCode, header: resp.Header, body: body}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		r.peer = resp.TLS.PeerCertificates[0]
	}
	return r
}

func url(s *server.Server, path string) string { return "https://" + s.Addr() + path }

func TestRequests(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	otherCA := newCA(t, clk)

	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kubelet_graceful_shutdown_start_time_seconds", Help: "test"})
	g.Set(42)
	reg.MustRegister(g)

	cfg := testConfig(t, clk, ca)
	cfg.Gatherer = reg
	s := mustNew(t, cfg)
	start(t, s)
	roots := selfSignedRoots(t, cfg.CertDir)

	self := clientCert(t, ca, auth.NodeUser(nodeName), []string{auth.NodesGroup}, 0)
	other := clientCert(t, ca, auth.NodeUser("other"), []string{auth.NodesGroup}, 0)
	selfNoGroup := clientCert(t, ca, auth.NodeUser(nodeName), nil, 0)
	admin := clientCert(t, ca, "alice", []string{auth.MastersGroup}, 0)
	plain := clientCert(t, ca, "bob", []string{"devs"}, 0)
	foreign := clientCert(t, otherCA, auth.NodeUser(nodeName), []string{auth.NodesGroup}, 0)

	const metricLine = "kubelet_graceful_shutdown_start_time_seconds 42"
	for _, tc := range []struct {
		name       string
		cert       *tls.Certificate
		method     string
		path       string
		wantCode   int
		wantReason metav1.StatusReason // "" when the body is not a Status
		wantBody   string              // a substring of the body or message
	}{
		{name: "healthz without cert", method: "GET", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "healthz head without cert", method: "HEAD", path: "/healthz", wantCode: 200},
		{name: "healthz with a foreign cert", cert: foreign, method: "GET", path: "/healthz", wantCode: 200, wantBody: "ok"},
		{name: "metrics without cert", method: "GET", path: "/metrics", wantCode: 401, wantReason: metav1.StatusReasonUnauthorized, wantBody: "Unauthorized"},
		{name: "metrics with a cert from another CA", cert: foreign, method: "GET", path: "/metrics", wantCode: 401, wantReason: metav1.StatusReasonUnauthorized},
		{name: "metrics as another node", cert: other, method: "GET", path: "/metrics", wantCode: 403, wantReason: metav1.StatusReasonForbidden,
			wantBody: `User "system:node:other" cannot get path "/metrics" on node "n1"`},
		{name: "metrics as self without the nodes group", cert: selfNoGroup, method: "GET", path: "/metrics", wantCode: 403, wantReason: metav1.StatusReasonForbidden},
		{name: "metrics as a plain user", cert: plain, method: "GET", path: "/metrics", wantCode: 403, wantReason: metav1.StatusReasonForbidden,
			wantBody: `User "bob" cannot get path "/metrics" on node "n1"`},
		{name: "metrics as self", cert: self, method: "GET", path: "/metrics", wantCode: 200, wantBody: metricLine},
		{name: "metrics head as self", cert: self, method: "HEAD", path: "/metrics", wantCode: 200},
		{name: "metrics as a master", cert: admin, method: "GET", path: "/metrics", wantCode: 200, wantBody: metricLine},
		{name: "post metrics as a master", cert: admin, method: "POST", path: "/metrics", wantCode: 405, wantReason: metav1.StatusReasonMethodNotAllowed},
		{name: "post metrics as self", cert: self, method: "POST", path: "/metrics", wantCode: 403, wantReason: metav1.StatusReasonForbidden,
			wantBody: `User "system:node:n1" cannot create path "/metrics"`},
		{name: "post metrics without cert", method: "POST", path: "/metrics", wantCode: 401, wantReason: metav1.StatusReasonUnauthorized},
		{name: "unknown path as a master", cert: admin, method: "GET", path: "/nope", wantCode: 404, wantReason: metav1.StatusReasonNotFound},
		{name: "unknown path as self", cert: self, method: "GET", path: "/nope", wantCode: 403, wantReason: metav1.StatusReasonForbidden},
		{name: "unknown path without cert", method: "GET", path: "/nope", wantCode: 401, wantReason: metav1.StatusReasonUnauthorized},
		{name: "post healthz without cert", method: "POST", path: "/healthz", wantCode: 401, wantReason: metav1.StatusReasonUnauthorized},
		// Only reading /healthz is public; other methods are routed as any
		// other path, and /healthz has no handler beyond that.
		{name: "post healthz as a master", cert: admin, method: "POST", path: "/healthz", wantCode: 404, wantReason: metav1.StatusReasonNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, client(t, roots, clk, tc.cert), tc.method, url(s, tc.path))
			if r.code != tc.wantCode {
				t.Fatalf("code = %d, want %d; body %s", r.code, tc.wantCode, r.body)
			}
			if tc.wantReason == "" {
				if tc.wantBody != "" && !strings.Contains(string(r.body), tc.wantBody) {
					t.Errorf("body %q does not contain %q", r.body, tc.wantBody)
				}
				return
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var st metav1.Status
			if err := json.Unmarshal(r.body, &st); err != nil {
				t.Fatalf("body is not a Status: %v: %s", err, r.body)
			}
			if st.Kind != "Status" || st.APIVersion != "v1" || st.Status != metav1.StatusFailure ||
				st.Code != int32(tc.wantCode) || st.Reason != tc.wantReason {
				t.Errorf("status = %+v, want kind Status, apiVersion v1, Failure, code %d, reason %s", st, tc.wantCode, tc.wantReason)
			}
			if !strings.Contains(st.Message, tc.wantBody) {
				t.Errorf("message %q does not contain %q", st.Message, tc.wantBody)
			}
			if tc.wantCode == 405 && r.header.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow = %q, want \"GET, HEAD\"", r.header.Get("Allow"))
			}
		})
	}
}

func TestExpiredClientCertIsUnauthorized(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)
	s := mustNew(t, cfg)
	start(t, s)
	roots := selfSignedRoots(t, cfg.CertDir)
	self := clientCert(t, ca, auth.NodeUser(nodeName), []string{auth.NodesGroup}, time.Hour)

	if r := do(t, client(t, roots, clk, self), "GET", url(s, "/metrics")); r.code != 200 {
		t.Fatalf("before expiry: code = %d, want 200; body %s", r.code, r.body)
	}
	clk.SetTime(t0.Add(2 * time.Hour))
	if r := do(t, client(t, roots, clk, self), "GET", url(s, "/metrics")); r.code != 401 {
		t.Fatalf("after expiry: code = %d, want 401; body %s", r.code, r.body)
	}
}

func TestNoClientCARefusesEveryone(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)
	cfg.ClientCA = nil
	s := mustNew(t, cfg)
	start(t, s)
	roots := selfSignedRoots(t, cfg.CertDir)
	admin := clientCert(t, ca, "alice", []string{auth.MastersGroup}, 0)

	c := client(t, roots, clk, admin)
	if r := do(t, c, "GET", url(s, "/metrics")); r.code != 401 {
		t.Errorf("/metrics: code = %d, want 401", r.code)
	}
	if r := do(t, c, "GET", url(s, "/healthz")); r.code != 200 {
		t.Errorf("/healthz: code = %d, want 200", r.code)
	}
}

func TestHandlerWithoutTLS(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	s := mustNew(t, testConfig(t, clk, ca))
	t.Cleanup(func() { s.Close() })

	for path, want := range map[string]int{"/healthz": 200, "/metrics": 401, "/nope": 401} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("%s: code = %d, want %d", path, rec.Code, want)
		}
	}
}

func TestPortZeroPicksAPort(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)
	s := mustNew(t, cfg)
	start(t, s)

	if s.Port() == 0 {
		t.Fatal("Port() = 0, want the bound port")
	}
	if want := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())); s.Addr() != want {
		t.Errorf("Addr() = %q, want %q", s.Addr(), want)
	}
	r := do(t, client(t, selfSignedRoots(t, cfg.CertDir), clk, nil), "GET", "https://127.0.0.1:"+strconv.Itoa(s.Port())+"/healthz")
	if r.code != 200 {
		t.Errorf("code = %d, want 200", r.code)
	}
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	s := mustNew(t, testConfig(t, clk, ca))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if conn, err := net.Dial("tcp", s.Addr()); err == nil {
		conn.Close()
		t.Errorf("still accepting connections on %s after Run returned", s.Addr())
	}
	if err := s.Run(context.Background()); err == nil {
		t.Error("second Run: no error")
	}
}

func TestCloseWithoutRunReleasesPort(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)
	s := mustNew(t, cfg)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cfg.Port = s.Port()
	s2 := mustNew(t, cfg)
	if err := s2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestSelfSignedCertGeneratedThenReused(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)
	cfg.IPs = []net.IP{net.ParseIP("10.1.2.3")}

	s := mustNew(t, cfg)
	cert, first := servedCert(t, cfg.CertDir)
	start(t, s)

	fi, err := os.Stat(filepath.Join(cfg.CertDir, server.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("%s mode = %o, want 600", server.KeyFile, mode)
	}
	for _, name := range []string{nodeName, "localhost"} {
		if err := cert.VerifyHostname(name); err != nil {
			t.Errorf("certificate not valid for %s: %v", name, err)
		}
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.1.2.3"} {
		if err := cert.VerifyHostname(ip); err != nil {
			t.Errorf("certificate not valid for %s: %v", ip, err)
		}
	}
	// The served certificate is the one in the directory.
	r := do(t, client(t, selfSignedRoots(t, cfg.CertDir), clk, nil), "GET", url(s, "/healthz"))
	if r.peer == nil || !bytes.Equal(r.peer.Raw, cert.Raw) {
		t.Errorf("served certificate is not the one in %s", cfg.CertDir)
	}

	// A later start, well within validity, keeps the pair.
	clk.SetTime(t0.Add(30 * 24 * time.Hour))
	s2 := mustNew(t, cfg)
	t.Cleanup(func() { s2.Close() })
	if _, second := servedCert(t, cfg.CertDir); !bytes.Equal(first, second) {
		t.Error("second New replaced a valid self-signed certificate")
	}
}

func TestExpiredSelfSignedCertIsRegenerated(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	cfg := testConfig(t, clk, ca)

	s := mustNew(t, cfg)
	old, first := servedCert(t, cfg.CertDir)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	later := old.NotAfter.Add(time.Hour)
	clk.SetTime(later)
	s2 := mustNew(t, cfg)
	start(t, s2)
	cert, second := servedCert(t, cfg.CertDir)
	if bytes.Equal(first, second) {
		t.Fatal("expired self-signed certificate was kept")
	}
	if !cert.NotBefore.After(later.Add(-time.Hour)) || !cert.NotAfter.Equal(later.Add(server.SelfSignedValidity)) {
		t.Errorf("new certificate valid %s..%s, want from just before %s for %s", cert.NotBefore, cert.NotAfter, later, server.SelfSignedValidity)
	}
	r := do(t, client(t, selfSignedRoots(t, cfg.CertDir), clk, nil), "GET", url(s2, "/healthz"))
	if r.code != 200 || r.peer == nil || !bytes.Equal(r.peer.Raw, cert.Raw) {
		t.Errorf("after regeneration: code %d, served certificate matches file: %v", r.code, r.peer != nil && bytes.Equal(r.peer.Raw, cert.Raw))
	}
}

func TestTLSCertFileIsServed(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	// The cluster PKI's serving pair, signed by its CA, for localhost and
	// the loopback addresses, stands in for an operator's certificate.
	pkiDir := t.TempDir()
	servingCA, err := auth.EnsurePKI(auth.PKIConfig{Dir: pkiDir, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, clk, ca)
	cfg.TLSCertFile = filepath.Join(pkiDir, auth.ServingCertFile)
	cfg.TLSKeyFile = filepath.Join(pkiDir, auth.ServingKeyFile)
	s := mustNew(t, cfg)
	start(t, s)

	if _, err := os.Stat(filepath.Join(cfg.CertDir, server.CertFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a self-signed certificate was written although tlsCertFile is set (stat: %v)", err)
	}
	data, err := os.ReadFile(cfg.TLSCertFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	r := do(t, client(t, servingCA.CertPool(), clk, nil), "GET", url(s, "/healthz"))
	if r.code != 200 {
		t.Fatalf("code = %d, want 200", r.code)
	}
	if r.peer == nil || !bytes.Equal(r.peer.Raw, block.Bytes) {
		t.Error("served certificate is not the one in tlsCertFile")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	ca := newCA(t, clk)
	for _, tc := range []struct {
		name   string
		change func(*server.Config)
		want   string
	}{
		{name: "no node name", change: func(c *server.Config) { c.NodeName = "" }, want: "nodeName"},
		{name: "bad node name", change: func(c *server.Config) { c.NodeName = "No_Good" }, want: "nodeName"},
		{name: "address not an IP", change: func(c *server.Config) { c.Address = "localhost" }, want: "address"},
		{name: "port too large", change: func(c *server.Config) { c.Port = 70000 }, want: "port"},
		{name: "cert without key", change: func(c *server.Config) { c.TLSCertFile = "/x.crt" }, want: "tlsKeyFile"},
		{name: "no cert at all", change: func(c *server.Config) { c.CertDir = "" }, want: "certDir"},
		{name: "client CA not PEM", change: func(c *server.Config) { c.ClientCA = []byte("junk") }, want: "clientCA"},
		{name: "missing cert file", change: func(c *server.Config) {
			c.TLSCertFile, c.TLSKeyFile = filepath.Join(t.TempDir(), "a.crt"), filepath.Join(t.TempDir(), "a.key")
		}, want: "tlsCertFile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, clk, ca)
			tc.change(&cfg)
			s, err := server.New(cfg)
			if err == nil {
				s.Close()
				t.Fatal("New: no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// A certificate set while serving is the one the next handshake sees.
func TestSetServingCertificate(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	ca := newCA(t, clk)
	s := mustNew(t, testConfig(t, clk, ca))
	start(t, s)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + nodeName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := ca.SignCSR(req, x509.KeyUsageDigitalSignature, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, 0)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	pair := tls.Certificate{Certificate: [][]byte{block.Bytes}, PrivateKey: key}
	c := client(t, ca.CertPool(), clk, nil)
	if _, err := c.Get(url(s, "/healthz")); err == nil {
		t.Fatal("a client trusting only the cluster CA accepted the self-signed certificate")
	}
	c.CloseIdleConnections()
	s.SetServingCertificate(pair)
	if r := do(t, c, "GET", url(s, "/healthz")); r.code != 200 || r.peer == nil || !r.peer.Equal(mustParse(t, block.Bytes)) {
		t.Errorf("after SetServingCertificate: %d, peer %v", r.code, r.peer)
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
