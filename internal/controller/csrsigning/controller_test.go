package csrsigning_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"net"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/auth"
	"knode/internal/controller/csrsigning"
	csrreg "knode/internal/registry/certificatesigningrequest"
)

var quiet = slog.New(slog.DiscardHandler)

// world is an API server on a fake clock serving requests, with a node
// identity for node-1 and the cluster PKI on the same clock.
type world struct {
	*apitest.World
	node kubernetes.Interface // acts as system:node:node-1
	pki  *auth.PKI
}

func newWorld(t *testing.T) *world {
	w := &world{World: apitest.NewWorld(t, apitest.Options{
		NodeRules: true,
		Tokens:    []string{`nodetoken,system:node:node-1,,"system:nodes"`},
	})}
	w.node = w.Server.Client(t, "nodetoken")
	pki, err := auth.EnsurePKI(auth.PKIConfig{Dir: t.TempDir(), Clock: w.Clock})
	w.Must("PKI", err)
	w.pki = pki
	return w
}

func (w *world) controller() *csrsigning.Controller {
	w.T.Helper()
	c, err := csrsigning.New(csrsigning.Config{Client: w.Client, Signer: w.pki, Clock: w.Clock, Logger: quiet})
	w.Must("building the controller", err)
	return c
}

// addNode registers node-1 with the given addresses.
func (w *world) addNode(addrs ...corev1.NodeAddress) {
	w.T.Helper()
	n, err := w.Client.CoreV1().Nodes().Create(w.Ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
	w.Must("creating node", err)
	n.Status.Addresses = addrs
	_, err = w.Client.CoreV1().Nodes().UpdateStatus(w.Ctx, n, metav1.UpdateOptions{})
	w.Must("node status", err)
}

// request creates, as client, a serving request for tmpl.
func (w *world) request(client kubernetes.Interface, name string, tmpl x509.CertificateRequest, mutate ...func(*certificatesv1.CertificateSigningRequest)) {
	w.T.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	w.Must("key", err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	w.Must("request", err)
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
		},
	}
	for _, m := range mutate {
		m(csr)
	}
	_, err = client.CertificatesV1().CertificateSigningRequests().Create(w.Ctx, csr, metav1.CreateOptions{})
	w.Must("creating "+name, err)
}

func (w *world) get(name string) *certificatesv1.CertificateSigningRequest {
	w.T.Helper()
	csr, err := w.Client.CertificatesV1().CertificateSigningRequests().Get(w.Ctx, name, metav1.GetOptions{})
	w.Must("getting "+name, err)
	return csr
}

// approveByHand adds an Approved condition as kubectl does.
func (w *world) approveByHand(name string) {
	w.T.Helper()
	csr := w.get(name)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "KubectlApprove",
	})
	_, err := w.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(w.Ctx, name, csr, metav1.UpdateOptions{})
	w.Must("approving "+name, err)
}

func nodeTemplate(cn string, dns []string, ips ...string) x509.CertificateRequest {
	r := x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		r.IPAddresses = append(r.IPAddresses, net.ParseIP(ip))
	}
	return r
}

func condition(csr *certificatesv1.CertificateSigningRequest, t certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequestCondition {
	for i := range csr.Status.Conditions {
		if csr.Status.Conditions[i].Type == t {
			return &csr.Status.Conditions[i]
		}
	}
	return nil
}

// verify checks that csr's certificate chains to the cluster CA for
// serving at the clock's now and names every one of dns and ips.
func (w *world) verify(csr *certificatesv1.CertificateSigningRequest, dns []string, ips ...string) *x509.Certificate {
	w.T.Helper()
	certs, err := auth.ParseCertificates(csr.Status.Certificate)
	w.Must("parsing the certificate of "+csr.Name, err)
	cert := certs[0]
	_, err = cert.Verify(x509.VerifyOptions{Roots: w.pki.CertPool(), CurrentTime: w.Clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	w.Must("verifying the certificate of "+csr.Name, err)
	var want []net.IP
	for _, ip := range ips {
		want = append(want, net.ParseIP(ip))
	}
	w.Must("names", auth.MissingName(cert, dns, want))
	if cert.Subject.CommonName != "system:node:node-1" || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		w.T.Errorf("subject = %v", cert.Subject)
	}
	if cert.IsCA {
		w.T.Error("issued a CA certificate")
	}
	return cert
}

func TestAutoApproveAndSign(t *testing.T) {
	w := newWorld(t)
	w.addNode(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "node-1.example.com"})
	w.request(w.node, "own", nodeTemplate("system:node:node-1", []string{"node-1", "node-1.example.com"}, "10.0.0.5"),
		func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](3600) })
	w.request(w.node, "foreign-ip", nodeTemplate("system:node:node-1", []string{"node-1"}, "10.0.0.5", "10.9.9.9"))
	w.request(w.node, "foreign-dns", nodeTemplate("system:node:node-1", []string{"kubernetes.default.svc"}))
	w.request(w.node, "other-node", nodeTemplate("system:node:node-2", []string{"node-1"}))
	w.request(w.Client, "by-admin", nodeTemplate("system:node:node-1", []string{"node-1"}))
	w.request(w.node, "other-signer", nodeTemplate("system:node:node-1", []string{"node-1"}),
		func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com/signer" })

	c := w.controller()
	w.Must("sync", c.Sync(w.Ctx))

	own := w.get("own")
	cond := condition(own, certificatesv1.CertificateApproved)
	if cond == nil || cond.Reason != csrsigning.ReasonAutoApproved || cond.Message != csrsigning.MessageAutoApproved ||
		!cond.LastUpdateTime.Time.Equal(apitest.Epoch) || !cond.LastTransitionTime.Time.Equal(apitest.Epoch) {
		t.Errorf("own request's Approved condition: %+v", cond)
	}
	cert := w.verify(own, []string{"node-1", "node-1.example.com"}, "10.0.0.5")
	if got := cert.NotAfter.Sub(apitest.Epoch); got != time.Hour {
		t.Errorf("certificate lives %v after now, want the requested 1h", got)
	}
	if cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("key usage = %b", cert.KeyUsage)
	}
	for _, name := range []string{"foreign-ip", "foreign-dns", "other-node", "by-admin", "other-signer"} {
		if csr := w.get(name); len(csr.Status.Conditions) != 0 || csr.Status.Certificate != nil {
			t.Errorf("%s was touched: %+v", name, csr.Status)
		}
	}

	// A person approves the foreign request; the next pass signs it.
	w.approveByHand("foreign-ip")
	w.Must("sync", c.Sync(w.Ctx))
	w.verify(w.get("foreign-ip"), []string{"node-1"}, "10.0.0.5", "10.9.9.9")
	if got := condition(w.get("foreign-ip"), certificatesv1.CertificateApproved).Reason; got != "KubectlApprove" {
		t.Errorf("approval reason = %q", got)
	}
	// Passes are idempotent: nothing further changes.
	before := w.get("own").ResourceVersion
	w.Must("sync", c.Sync(w.Ctx))
	if after := w.get("own").ResourceVersion; after != before {
		t.Errorf("a pass rewrote a finished request (%s -> %s)", before, after)
	}
}

// TestNodeAddressLater: a request for an address the node does not report
// yet waits, and is approved once the Node reports it.
func TestNodeAddressLater(t *testing.T) {
	w := newWorld(t)
	w.request(w.node, "early", nodeTemplate("system:node:node-1", []string{"node-1"}, "10.0.0.5"))
	c := w.controller()
	w.Must("sync", c.Sync(w.Ctx))
	if csr := w.get("early"); len(csr.Status.Conditions) != 0 {
		t.Fatalf("approved without a Node: %+v", csr.Status.Conditions)
	}
	w.addNode(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"})
	w.Must("sync", c.Sync(w.Ctx))
	w.verify(w.get("early"), []string{"node-1"}, "10.0.0.5")
}

// TestFailed: an approved request the signer's rules refuse gets Failed
// and no certificate.
func TestFailed(t *testing.T) {
	w := newWorld(t)
	w.addNode(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"})
	masters := nodeTemplate("system:node:node-1", []string{"node-1"})
	masters.Subject.Organization = []string{"system:masters"}
	w.request(w.node, "masters", masters)
	w.request(w.node, "client", nodeTemplate("system:node:node-1", []string{"node-1"}),
		func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		})
	c := w.controller()
	w.Must("sync", c.Sync(w.Ctx))
	w.approveByHand("masters")
	w.approveByHand("client")
	w.Must("sync", c.Sync(w.Ctx))
	for name, msg := range map[string]string{
		"masters": "subject organization is not system:nodes",
		"client":  "usages did not match [digital signature key encipherment server auth]",
	} {
		csr := w.get(name)
		failed := condition(csr, certificatesv1.CertificateFailed)
		if failed == nil || failed.Reason != csrsigning.ReasonSignerValidationFailure || failed.Message != msg || csr.Status.Certificate != nil {
			t.Errorf("%s: failed condition %+v, certificate %d bytes", name, failed, len(csr.Status.Certificate))
		}
		if got := csrreg.Summary(csr); got != "Approved,Failed" {
			t.Errorf("%s: condition column %q", name, got)
		}
	}
}

// TestRun: the loop approves and signs a request created while it runs,
// woken by the request informer (the fake clock never moves).
func TestRun(t *testing.T) {
	w := newWorld(t)
	w.addNode(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"})
	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.controller().Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	watcher, err := w.Client.CertificatesV1().CertificateSigningRequests().Watch(w.Ctx, metav1.ListOptions{FieldSelector: "metadata.name=live"})
	w.Must("watching", err)
	defer watcher.Stop()
	w.request(w.node, "live", nodeTemplate("system:node:node-1", []string{"node-1"}, "10.0.0.5"))
	deadline := time.After(20 * time.Second)
	for signed := false; !signed; {
		select {
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("watch ended")
			}
			if csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest); ok {
				signed = len(csr.Status.Certificate) > 0
			}
		case <-deadline:
			t.Fatalf("not signed: %+v", w.get("live").Status)
		}
	}
	w.verify(w.get("live"), []string{"node-1"}, "10.0.0.5")
}

func TestConfig(t *testing.T) {
	if _, err := csrsigning.New(csrsigning.Config{}); err == nil {
		t.Error("no client: accepted")
	}
	w := newWorld(t)
	if _, err := csrsigning.New(csrsigning.Config{Client: w.Client}); err == nil {
		t.Error("no signer: accepted")
	}
	if _, err := csrsigning.New(csrsigning.Config{Client: w.Client, Signer: w.pki, MaxTTL: -1}); err == nil {
		t.Error("negative MaxTTL: accepted")
	}
}
