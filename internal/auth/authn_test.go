package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// tlsRequest returns a request whose connection presented certPEM, as the
// TLS layer would record it.
func tlsRequest(t *testing.T, certPEM []byte) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "/api/v1/nodes", nil)
	if certPEM != nil {
		c := parseCert(t, certPEM)
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
	}
	return r
}

func TestX509Authenticator(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	other := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	issue := func(p *PKI, user string, groups []string, ttl time.Duration) []byte {
		certPEM, _, err := p.IssueClientCert(user, groups, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return certPEM
	}
	servingPEM := encodeCertPEM(p.TLSConfig().Certificates[0].Leaf)
	// IssueClientCert refuses an empty CN; sign one directly.
	noCN, _, err := p.issue(leafSpec{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, organizations: []string{"g"}}, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		certPEM  []byte
		now      time.Time
		wantUser *User
		wantOK   bool
		wantErr  string
	}{
		{name: "no TLS", certPEM: nil},
		{name: "admin", certPEM: p.adminCertPEM, wantOK: true,
			wantUser: &User{Name: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}}},
		{name: "node", certPEM: issue(p, "system:node:n1", []string{"system:nodes"}, 0), wantOK: true,
			wantUser: &User{Name: "system:node:n1", Groups: []string{"system:nodes", "system:authenticated"}}},
		{name: "several groups, authenticated already present", certPEM: issue(p, "u", []string{"a", "system:authenticated", "b"}, 0), wantOK: true,
			// DER sorts the organizations of one RDN, so order is not kept.
			wantUser: &User{Name: "u", Groups: []string{"a", "b", "system:authenticated"}}},
		{name: "no groups", certPEM: issue(p, "u", nil, 0), wantOK: true,
			wantUser: &User{Name: "u", Groups: []string{"system:authenticated"}}},
		{name: "another CA", certPEM: other.adminCertPEM, wantErr: "certificate signed by unknown authority"},
		{name: "serving cert is not a client cert", certPEM: servingPEM, wantErr: "incompatible key usage"},
		{name: "expired", certPEM: issue(p, "u", nil, time.Hour), now: t0.Add(time.Hour + time.Second), wantErr: "expired"},
		{name: "not yet valid", certPEM: issue(p, "u", nil, time.Hour), now: t0.Add(-time.Hour), wantErr: "not yet valid"},
		{name: "empty common name", certPEM: noCN},
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			if !tc.now.IsZero() {
				now = tc.now
			}
			a := NewX509Authenticator(X509Config{Roots: p.CertPool(), Clock: testingclock.NewFakePassiveClock(now)})
			user, ok, err := a.Authenticate(tlsRequest(t, tc.certPEM))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantUser, user); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func encodeCertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

type fakeAuthenticator struct {
	user *User
	ok   bool
	err  error
}

func (f fakeAuthenticator) Authenticate(*http.Request) (*User, bool, error) {
	return f.user, f.ok, f.err
}

func TestUnionAuthenticator(t *testing.T) {
	alice := &User{Name: "alice"}
	bob := &User{Name: "bob"}
	errA, errB := errors.New("a"), errors.New("b")
	tests := []struct {
		name     string
		union    UnionAuthenticator
		wantUser *User
		wantOK   bool
		wantErrs []error
	}{
		{name: "empty"},
		{name: "nobody has credentials", union: UnionAuthenticator{fakeAuthenticator{}, fakeAuthenticator{}}},
		{name: "first wins", union: UnionAuthenticator{fakeAuthenticator{user: alice, ok: true}, fakeAuthenticator{user: bob, ok: true}},
			wantUser: alice, wantOK: true},
		{name: "error does not stop the search", union: UnionAuthenticator{fakeAuthenticator{err: errA}, fakeAuthenticator{user: bob, ok: true}},
			wantUser: bob, wantOK: true},
		{name: "errors joined", union: UnionAuthenticator{fakeAuthenticator{err: errA}, fakeAuthenticator{}, fakeAuthenticator{err: errB}},
			wantErrs: []error{errA, errB}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			user, ok, err := tc.union.Authenticate(httptest.NewRequest("GET", "/", nil))
			if user != tc.wantUser || ok != tc.wantOK {
				t.Errorf("got (%v, %v), want (%v, %v)", user, ok, tc.wantUser, tc.wantOK)
			}
			if (err != nil) != (len(tc.wantErrs) > 0) {
				t.Errorf("err = %v, want %v", err, tc.wantErrs)
			}
			for _, want := range tc.wantErrs {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want it to wrap %v", err, want)
				}
			}
		})
	}
}

func TestUnionOfCertificateAndToken(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	other := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	tokens, err := ParseTokenFile(strings.NewReader("secret,carol,42,ops\n"))
	if err != nil {
		t.Fatal(err)
	}
	union := UnionAuthenticator{p.X509Authenticator(), tokens}
	tests := []struct {
		name     string
		certPEM  []byte
		authz    string
		wantName string
		wantErr  bool
	}{
		{name: "anonymous"},
		{name: "certificate", certPEM: p.adminCertPEM, authz: "Bearer secret", wantName: "kubernetes-admin"},
		{name: "bad certificate, good token", certPEM: other.adminCertPEM, authz: "Bearer secret", wantName: "carol"},
		{name: "bad token", authz: "Bearer nope", wantErr: true},
		{name: "bad both", certPEM: other.adminCertPEM, authz: "Bearer nope", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tlsRequest(t, tc.certPEM)
			if tc.authz != "" {
				r.Header.Set("Authorization", tc.authz)
			}
			user, ok, err := union.Authenticate(r)
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			name := ""
			if ok {
				name = user.Name
			}
			if name != tc.wantName {
				t.Errorf("user = %q, want %q", name, tc.wantName)
			}
		})
	}
}

// TestTLSConfig drives real TLS handshakes against the serving config.
func TestTLSConfig(t *testing.T) {
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Hosts: []string{"knode.test"}})
	other := mustEnsure(t, PKIConfig{Dir: t.TempDir()})
	authn := p.X509Authenticator()

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok, err := authn.Authenticate(r)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case !ok:
			io.WriteString(w, "anonymous "+r.Proto)
		default:
			io.WriteString(w, user.Name+" "+strings.Join(user.Groups, ",")+" "+r.Proto)
		}
	}))
	srv.TLS = p.TLSConfig()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	client := func(certPEM, keyPEM []byte) *http.Client {
		cfg := &tls.Config{RootCAs: p.CertPool(), ServerName: "knode.test"}
		if certPEM != nil {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}}
	}
	nodeCert, nodeKey, err := p.IssueClientCert("system:node:n1", []string{"system:nodes"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		client   *http.Client
		wantBody string
		wantErr  bool
	}{
		{name: "no client certificate", client: client(nil, nil), wantBody: "anonymous HTTP/2.0"},
		{name: "admin", client: client(p.adminCertPEM, p.adminKeyPEM), wantBody: "kubernetes-admin system:masters,system:authenticated HTTP/2.0"},
		{name: "node", client: client(nodeCert, nodeKey), wantBody: "system:node:n1 system:nodes,system:authenticated HTTP/2.0"},
		{name: "certificate from another CA", client: client(other.adminCertPEM, other.adminKeyPEM), wantErr: true},
		{name: "HTTP/1.1 only", client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: p.CertPool(), ServerName: "localhost", NextProtos: []string{"http/1.1"}}}}, wantBody: "anonymous HTTP/1.1"},
		{name: "TLS 1.1 refused", client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: p.CertPool(), ServerName: "localhost", MaxVersion: tls.VersionTLS11}}}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.client.Get(srv.URL + "/")
			if tc.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("request succeeded with status %d, want a TLS failure", resp.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if diff := cmp.Diff(tc.wantBody, string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNodeKubeconfigEndToEnd: a kubeconfig from NodeKubeconfig, loaded by
// client-go, authenticates as the node against a server using TLSConfig.
func TestNodeKubeconfigEndToEnd(t *testing.T) {
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clock.RealClock{}})
	authn := p.X509Authenticator()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok, err := authn.Authenticate(r)
		if err != nil || !ok {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		name, _ := NodeName(user)
		io.WriteString(w, name)
	}))
	srv.TLS = p.TLSConfig()
	srv.StartTLS()
	defer srv.Close()

	data, err := NodeKubeconfig(p, srv.URL, "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "worker-1" {
		t.Errorf("server saw node %q (status %d), want worker-1", body, resp.StatusCode)
	}
}

// A chain verified once is remembered, but its validity is still judged at
// every request: the same certificate stops working when it expires.
func TestX509AuthenticatorCacheHonoursExpiry(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(t0)
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: clk})
	certPEM, _, err := p.IssueClientCert("alice", []string{"devs"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	a := p.X509Authenticator()
	a.clock = clk
	for i := 0; i < 2; i++ {
		if u, ok, err := a.Authenticate(tlsRequest(t, certPEM)); err != nil || !ok || u.Name != "alice" {
			t.Fatalf("request %d within validity: %v %v %v", i, u, ok, err)
		}
	}
	if len(a.verified) != 1 {
		t.Errorf("cache holds %d chains, want 1", len(a.verified))
	}
	clk.SetTime(t0.Add(2 * time.Hour))
	if _, ok, err := a.Authenticate(tlsRequest(t, certPEM)); ok || err == nil {
		t.Errorf("expired certificate accepted from cache: ok=%v err=%v", ok, err)
	}
}
