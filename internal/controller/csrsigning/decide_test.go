package csrsigning

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	serving   = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	servingKE = []certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth, certificatesv1.UsageDigitalSignature}
	nodeUser  = "system:node:node-1"
	nodeGroup = []string{"system:nodes", "system:authenticated"}
)

func requestPEM(t *testing.T, tmpl x509.CertificateRequest) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// nodeRequest is node-1's serving request for its name and 10.0.0.5.
func nodeRequest() x509.CertificateRequest {
	return x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: nodeUser, Organization: []string{"system:nodes"}},
		DNSNames:    []string{"node-1", "node-1.example.com"},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.5")},
	}
}

func csrFor(t *testing.T, tmpl x509.CertificateRequest, mutate ...func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: requestPEM(t, tmpl), SignerName: certificatesv1.KubeletServingSignerName,
			Usages: serving, Username: nodeUser, Groups: nodeGroup,
		},
	}
	for _, m := range mutate {
		m(csr)
	}
	return csr
}

func withCond(t certificatesv1.RequestConditionType) func(*certificatesv1.CertificateSigningRequest) {
	return func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{Type: t, Status: corev1.ConditionTrue})
	}
}

func node1() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "10.0.0.5"},
			{Type: corev1.NodeHostName, Address: "Node-1.Example.com"},
		}},
	}
}

func TestDecide(t *testing.T) {
	const maxTTL = 24 * time.Hour
	tests := []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		node *corev1.Node
		want Decision
	}{
		{
			name: "a node's own names: approve",
			csr:  csrFor(t, nodeRequest()), node: node1(),
			want: Decision{Action: Approve, Reason: ReasonAutoApproved, Message: MessageAutoApproved},
		},
		{
			name: "with key encipherment: approve",
			csr:  csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = servingKE }), node: node1(),
			want: Decision{Action: Approve, Reason: ReasonAutoApproved, Message: MessageAutoApproved},
		},
		{
			name: "a foreign IP: leave",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.IPAddresses = append(r.IPAddresses, net.ParseIP("10.0.0.6"))
				return r
			}()),
			node: node1(),
			want: Decision{Action: Leave, Why: `IP address 10.0.0.6 is not one of node "node-1"'s addresses`},
		},
		{
			name: "a foreign DNS name: leave",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.DNSNames = []string{"kubernetes.default.svc"}
				return r
			}()),
			node: node1(),
			want: Decision{Action: Leave, Why: `DNS name "kubernetes.default.svc" is not one of node "node-1"'s addresses`},
		},
		{
			name: "another node's name in the subject: leave",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.Subject.CommonName = "system:node:node-2"
				return r
			}()),
			node: node1(),
			want: Decision{Action: Leave, Why: `subject common name "system:node:node-2" is not the requester's, "system:node:node-1"`},
		},
		{
			name: "a person asked: leave",
			csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Username, c.Spec.Groups = "admin", []string{"system:masters"}
			}),
			want: Decision{Action: Leave, Why: `requester "admin" is not a node identity`},
		},
		{
			name: "a node name outside system:nodes: leave",
			csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Groups = []string{"system:authenticated"}
			}),
			want: Decision{Action: Leave, Why: `requester "system:node:node-1" is not a node identity`},
		},
		{
			name: "no Node object: leave",
			csr:  csrFor(t, nodeRequest()),
			want: Decision{Action: Leave, Why: `node "node-1" does not exist`},
		},
		{
			name: "client auth usage: leave",
			csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageClientAuth)
			}),
			node: node1(),
			want: Decision{Action: Leave, Why: `usages did not match [digital signature key encipherment server auth]`},
		},
		{
			name: "another signer: leave",
			csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.SignerName = certificatesv1.KubeAPIServerClientKubeletSignerName
			}),
			node: node1(),
			want: Decision{Action: Leave},
		},
		{
			name: "denied: leave",
			csr:  csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateDenied)), node: node1(),
			want: Decision{Action: Leave},
		},
		{
			name: "approved: sign for the maximum",
			csr:  csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateApproved)),
			want: Decision{Action: Sign, TTL: maxTTL, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		},
		{
			name: "approved with key encipherment and a duration",
			csr: csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = servingKE
				c.Spec.ExpirationSeconds = ptr.To[int32](3600)
			}),
			want: Decision{Action: Sign, TTL: time.Hour, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		},
		{
			name: "a person approved foreign names: sign",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.IPAddresses = []net.IP{net.ParseIP("192.0.2.1")}
				return r
			}(), withCond(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Username, c.Spec.Groups = "admin", []string{"system:masters"}
			}),
			want: Decision{Action: Sign, TTL: maxTTL, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		},
		{
			name: "approved but not system:nodes: fail",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.Subject.Organization = []string{"system:masters"}
				return r
			}(), withCond(certificatesv1.CertificateApproved)),
			want: Decision{Action: Fail, Reason: ReasonSignerValidationFailure, Message: "subject organization is not system:nodes"},
		},
		{
			name: "approved with a URI: fail",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.URIs = []*url.URL{{Scheme: "spiffe", Host: "x"}}
				return r
			}(), withCond(certificatesv1.CertificateApproved)),
			want: Decision{Action: Fail, Reason: ReasonSignerValidationFailure, Message: "URI subjectAltNames are not allowed"},
		},
		{
			name: "approved garbage: fail",
			csr: csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Request = []byte("garbage")
			}),
			want: Decision{Action: Fail, Reason: ReasonSignerValidationFailure, Message: "PEM block type must be CERTIFICATE REQUEST"},
		},
		{
			name: "approved without a CN prefix: fail",
			csr: csrFor(t, func() x509.CertificateRequest {
				r := nodeRequest()
				r.Subject.CommonName = "node-1"
				return r
			}(), withCond(certificatesv1.CertificateApproved)),
			want: Decision{Action: Fail, Reason: ReasonSignerValidationFailure, Message: "subject common name does not begin with system:node:"},
		},
		{
			name: "issued: leave",
			csr: csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateApproved), func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Certificate = []byte("x")
			}),
			want: Decision{Action: Leave},
		},
		{
			name: "failed: leave",
			csr:  csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateApproved), withCond(certificatesv1.CertificateFailed)),
			want: Decision{Action: Leave},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.csr, tc.node, maxTTL)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestApprovalCandidate(t *testing.T) {
	tests := []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want string
	}{
		{name: "pending from a node", csr: csrFor(t, nodeRequest()), want: "node-1"},
		{name: "approved", csr: csrFor(t, nodeRequest(), withCond(certificatesv1.CertificateApproved))},
		{name: "from a person", csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "admin" })},
		{name: "the empty node name", csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Username = "system:node:" })},
		{name: "another signer", csr: csrFor(t, nodeRequest(), func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com/x" })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ApprovalCandidate(tc.csr)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("ApprovalCandidate = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestLifetime(t *testing.T) {
	maxTTL := 24 * time.Hour
	tests := []struct {
		seconds *int32
		want    time.Duration
	}{
		{nil, maxTTL},
		{ptr.To[int32](600), 10 * time.Minute},
		{ptr.To[int32](599), 10 * time.Minute},
		{ptr.To[int32](-5), 10 * time.Minute},
		{ptr.To[int32](86400), maxTTL},
		{ptr.To[int32](86401), maxTTL},
	}
	for _, tc := range tests {
		if got := Lifetime(tc.seconds, maxTTL); got != tc.want {
			t.Errorf("Lifetime(%v) = %v, want %v", ptr.Deref(tc.seconds, 0), got, tc.want)
		}
	}
}

func TestKeyUsages(t *testing.T) {
	ku, ext, err := KeyUsages([]certificatesv1.KeyUsage{"signing", "digital signature", "cert sign", "server auth", "s/mime", "email protection", "any"})
	if err != nil {
		t.Fatal(err)
	}
	if ku != x509.KeyUsageDigitalSignature|x509.KeyUsageCertSign {
		t.Errorf("key usage = %b", ku)
	}
	if diff := cmp.Diff([]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageEmailProtection, x509.ExtKeyUsageAny}, ext); diff != "" {
		t.Errorf("ext key usage (-want +got)\n%s", diff)
	}
	if _, _, err := KeyUsages([]certificatesv1.KeyUsage{"teleport"}); err == nil {
		t.Error("an unknown usage was accepted")
	}
}
