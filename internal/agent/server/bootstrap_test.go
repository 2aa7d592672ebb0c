package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/agent/server"
	"knode/internal/apitest"
	"knode/internal/auth"
	"knode/internal/controller/csrsigning"
)

var quiet = slog.New(slog.DiscardHandler)

// bootstrapWorld is a real API server on a fake clock that serves
// certificate signing requests, the cluster PKI on the same clock, Node
// n1 with its addresses, and the csrsigning controller running.
type bootstrapWorld struct {
	*apitest.World
	pki  *auth.PKI
	node kubernetes.Interface // acts as system:node:n1
}

func newBootstrapWorld(t *testing.T) *bootstrapWorld {
	return newBootstrapWorldWrapped(t, nil)
}

// newBootstrapWorldWrapped puts wrap in front of the API server.
func newBootstrapWorldWrapped(t *testing.T, wrap func(http.Handler) http.Handler) *bootstrapWorld {
	w := &bootstrapWorld{World: apitest.NewWorld(t, apitest.Options{
		NodeRules: true,
		Tokens:    []string{`n1token,system:node:` + nodeName + `,,"system:nodes"`},
		Wrap:      wrap,
	})}
	w.pki = newCA(t, w.Clock)
	w.node = w.Server.Client(t, "n1token")
	n, err := w.Client.CoreV1().Nodes().Create(w.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{})
	w.Must("creating the node", err)
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
		{Type: corev1.NodeExternalIP, Address: "192.0.2.7"},
		{Type: corev1.NodeHostName, Address: "n1.example.com"},
	}
	_, err = w.Client.CoreV1().Nodes().UpdateStatus(w.Ctx, n, metav1.UpdateOptions{})
	w.Must("node status", err)

	c, err := csrsigning.New(csrsigning.Config{Client: w.Client, Signer: w.pki, Clock: w.Clock, Logger: quiet})
	w.Must("csrsigning", err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *bootstrapWorld) config(dir string, ips ...string) server.BootstrapConfig {
	cfg := server.BootstrapConfig{
		Client: w.node, NodeName: nodeName, Hostnames: []string{nodeName, "N1.example.com", "not a name"},
		CertDir: dir, ExpirationSeconds: ptr.To[int32](3600), Clock: w.Clock, Logger: quiet,
	}
	for _, ip := range ips {
		cfg.IPs = append(cfg.IPs, net.ParseIP(ip))
	}
	return cfg
}

func (w *bootstrapWorld) requests() []certificatesv1.CertificateSigningRequest {
	w.T.Helper()
	l, err := w.Client.CertificatesV1().CertificateSigningRequests().List(w.Ctx, metav1.ListOptions{})
	w.Must("listing requests", err)
	return l.Items
}

// bootstrap runs Bootstrap with a generous deadline.
func bootstrap(t *testing.T, cfg server.BootstrapConfig) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return server.Bootstrap(ctx, cfg)
}

func TestBootstrap(t *testing.T) {
	w := newBootstrapWorld(t)
	dir := filepath.Join(t.TempDir(), "pki")
	path, err := bootstrap(t, w.config(dir, "10.0.0.5", "192.0.2.7"))
	if err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	if path != filepath.Join(dir, server.ServingFile) {
		t.Errorf("path = %s", path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v", path, err, fi.Mode())
	}
	pair, err := tls.LoadX509KeyPair(path, path)
	if err != nil {
		t.Fatalf("the file is not a certificate and its key: %v", err)
	}
	leaf := pair.Leaf
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: w.pki.CertPool(), CurrentTime: w.Clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the certificate does not chain to the cluster CA: %v", err)
	}
	if err := auth.MissingName(leaf, []string{nodeName, "n1.example.com"}, []net.IP{net.ParseIP("10.0.0.5"), net.ParseIP("192.0.2.7")}); err != nil {
		t.Errorf("certificate names: %v (DNS %v, IPs %v)", err, leaf.DNSNames, leaf.IPAddresses)
	}
	if leaf.Subject.CommonName != "system:node:"+nodeName || leaf.NotAfter.Sub(w.Clock.Now()) != time.Hour {
		t.Errorf("subject %v, valid until %v", leaf.Subject, leaf.NotAfter)
	}
	reqs := w.requests()
	if len(reqs) != 1 || reqs[0].Spec.Username != "system:node:"+nodeName || reqs[0].Status.Conditions[0].Reason != csrsigning.ReasonAutoApproved {
		t.Fatalf("requests: %+v", reqs)
	}

	// The agent serves with it; a client trusting only the cluster CA
	// accepts it.
	cfg := testConfig(t, w.Clock, w.pki)
	cfg.CertDir, cfg.TLSCertFile, cfg.TLSKeyFile = "", path, path
	s := mustNew(t, cfg)
	start(t, s)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: w.pki.CertPool(), ServerName: nodeName, Time: w.Clock.Now}}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Get("https://127.0.0.1:" + strconv.Itoa(s.Port()) + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over the bootstrapped certificate: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("/healthz: %d %q", resp.StatusCode, body)
	}

	// The next start keeps the pair while 20% of its lifetime remains.
	before, _ := os.ReadFile(path)
	w.Clock.Step(45 * time.Minute) // 65 min lifetime (5 min backdated): renewed from 47 min on
	if _, err := bootstrap(t, w.config(dir, "10.0.0.5", "192.0.2.7")); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) || len(w.requests()) != 1 {
		t.Errorf("a still-valid pair was replaced (%d requests)", len(w.requests()))
	}
	w.Clock.Step(3 * time.Minute)
	if _, err := bootstrap(t, w.config(dir, "10.0.0.5", "192.0.2.7")); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); bytes.Equal(before, after) || len(w.requests()) != 2 {
		t.Errorf("a pair near its expiry was kept (%d requests)", len(w.requests()))
	}
	// A pair lacking a wanted address is replaced at once.
	before, _ = os.ReadFile(path)
	w.Clock.Step(time.Minute)
	if _, err := bootstrap(t, w.config(dir, "10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("dropping an address replaced the pair")
	}
}

// TestBootstrapPolls: when the node cannot watch its request, Bootstrap
// reads it again every PollInterval of its clock.
func TestBootstrapPolls(t *testing.T) {
	w := newBootstrapWorldWrapped(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") == "true" && r.Header.Get("Authorization") == "Bearer n1token" {
				http.Error(rw, "no watching here", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(rw, r)
		})
	})
	watcher, err := w.Client.CertificatesV1().CertificateSigningRequests().Watch(w.Ctx, metav1.ListOptions{})
	w.Must("watching", err)
	defer watcher.Stop()
	cfg := w.config(t.TempDir(), "10.0.0.5")
	cfg.PollInterval = time.Second
	done := make(chan error, 1)
	go func() {
		_, err := bootstrap(t, cfg)
		done <- err
	}()
	// Wait until the request is signed, then until Bootstrap notices.
	deadline := time.After(20 * time.Second)
	for signed := false; !signed; {
		select {
		case ev := <-watcher.ResultChan():
			csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
			signed = ok && len(csr.Status.Certificate) > 0
		case <-deadline:
			t.Fatal("the request was not signed")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("Bootstrap ended before its clock moved: %v", err)
	default:
	}
	for {
		w.Clock.Step(cfg.PollInterval)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Bootstrap: %v", err)
			}
			return
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("Bootstrap did not pick up the certificate by polling")
		}
	}
}

// TestBootstrapDenied: a request the controller leaves pending (an
// address the Node does not report) waits until a person denies it.
func TestBootstrapDenied(t *testing.T) {
	w := newBootstrapWorld(t)
	watcher, err := w.Client.CertificatesV1().CertificateSigningRequests().Watch(w.Ctx, metav1.ListOptions{})
	w.Must("watching", err)
	defer watcher.Stop()
	done := make(chan error, 1)
	dir := t.TempDir()
	go func() {
		_, err := bootstrap(t, w.config(dir, "10.9.9.9"))
		done <- err
	}()
	var csr *certificatesv1.CertificateSigningRequest
	select {
	case ev := <-watcher.ResultChan():
		csr = ev.Object.(*certificatesv1.CertificateSigningRequest)
	case <-time.After(20 * time.Second):
		t.Fatal("no request was created")
	}
	select {
	case err := <-done:
		t.Fatalf("Bootstrap returned before a decision: %v", err)
	default:
	}
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "ByTest", Message: "not this address",
	})
	_, err = w.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(w.Ctx, csr.Name, csr, metav1.UpdateOptions{})
	w.Must("denying", err)
	select {
	case err := <-done:
		if !errors.Is(err, server.ErrDenied) || !strings.Contains(err.Error(), "not this address") {
			t.Errorf("Bootstrap: err = %v, want ErrDenied", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Bootstrap did not end after the denial")
	}
	if _, err := os.Stat(filepath.Join(dir, server.ServingFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a denied bootstrap wrote %s: %v", server.ServingFile, err)
	}
}

// TestBootstrapCanceled: the wait ends with the context.
func TestBootstrapCanceled(t *testing.T) {
	w := newBootstrapWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := w.Client.CertificatesV1().CertificateSigningRequests().Watch(w.Ctx, metav1.ListOptions{})
	w.Must("watching", err)
	defer watcher.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := server.Bootstrap(ctx, w.config(t.TempDir(), "10.9.9.9"))
		done <- err
	}()
	select {
	case <-watcher.ResultChan():
	case <-time.After(20 * time.Second):
		t.Fatal("no request was created")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Bootstrap did not end with its context")
	}
}

func TestBootstrapConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  server.BootstrapConfig
		want string
	}{
		{name: "empty", want: "client: Required value"},
		{name: "no names", cfg: server.BootstrapConfig{NodeName: "n1", CertDir: "/x", Hostnames: []string{"Not valid!"}}, want: "hostnames: Required value"},
		{name: "short duration", cfg: server.BootstrapConfig{NodeName: "n1", CertDir: "/x", Hostnames: []string{"n1"}, ExpirationSeconds: ptr.To[int32](599)}, want: "expirationSeconds: Invalid value: 599: must be at least 600"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.Bootstrap(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
