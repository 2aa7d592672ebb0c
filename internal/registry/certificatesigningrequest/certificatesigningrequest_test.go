package certificatesigningrequest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"knode/internal/registry"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

// requestPEM is a valid PEM request for a node's serving certificate.
var requestPEM = func() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:node-1", Organization: []string{"system:nodes"}},
		DNSNames: []string{"node-1"},
	}, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}()

// certPEM is a parsable (self-signed) certificate.
var certPEM = func() []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"}, NotBefore: now, NotAfter: now.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}()

func newCSR(mutate ...func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    requestPEM,
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Username:   "system:node:node-1",
			Groups:     []string{"system:nodes", "system:authenticated"},
		},
	}
	for _, m := range mutate {
		m(csr)
	}
	return csr
}

func cond(t certificatesv1.RequestConditionType, s corev1.ConditionStatus) certificatesv1.CertificateSigningRequestCondition {
	return certificatesv1.CertificateSigningRequestCondition{Type: t, Status: s, Reason: "R"}
}

func approved(csr *certificatesv1.CertificateSigningRequest) {
	csr.Status.Conditions = append(csr.Status.Conditions, cond(certificatesv1.CertificateApproved, corev1.ConditionTrue))
}

func usagesList() string {
	var q []string
	for _, u := range KnownUsages {
		q = append(q, fmt.Sprintf("%q", u))
	}
	return strings.Join(q, ", ")
}

func TestKnownUsagesSorted(t *testing.T) {
	if !slices.IsSorted(KnownUsages) || len(KnownUsages) != 23 {
		t.Errorf("KnownUsages must be upstream's 23 usages, sorted: %q", KnownUsages)
	}
}

func TestValidate(t *testing.T) {
	tampered := slices.Clone(requestPEM)
	block, _ := pem.Decode(tampered)
	block.Bytes[len(block.Bytes)-5] ^= 0xff // inside the signature
	tampered = pem.EncodeToMemory(block)

	tests := []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want []string
	}{
		{name: "valid", csr: newCSR()},
		{name: "with key encipherment and a duration of 600 s", csr: newCSR(func(c *certificatesv1.CertificateSigningRequest) {
			c.Spec.Usages = append(c.Spec.Usages, certificatesv1.UsageKeyEncipherment)
			c.Spec.ExpirationSeconds = ptr.To[int32](600)
		})},
		{
			name: "no request",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = nil }),
			want: []string{"spec.request|Invalid value|PEM block type must be CERTIFICATE REQUEST"},
		},
		{
			name: "a certificate, not a request",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = certPEM }),
			want: []string{"spec.request|Invalid value|PEM block type must be CERTIFICATE REQUEST"},
		},
		{
			name: "signature does not verify",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Request = tampered }),
			want: []string{"spec.request|Invalid value|x509: ECDSA verification failure"},
		},
		{
			name: "no usages",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil }),
			want: []string{"spec.usages|Required value|"},
		},
		{
			name: "unknown and repeated usages",
			csr: newCSR(func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.Usages = []certificatesv1.KeyUsage{"server auth", "teleport", "server auth"}
			}),
			want: []string{
				`spec.usages[1]|Unsupported value|supported values: ` + usagesList(),
				`spec.usages[2]|Duplicate value|`,
			},
		},
		{
			name: "no signer",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "" }),
			want: []string{"spec.signerName|Required value|"},
		},
		{
			name: "signer without a path",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example.com" }),
			want: []string{"spec.signerName|Invalid value|must be a fully qualified domain and path of the form 'example.com/signer-name'"},
		},
		{
			name: "signer domain of one label",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "example/signer" }),
			want: []string{"spec.signerName|Invalid value|should be a domain with at least two segments separated by dots"},
		},
		{
			name: "signer domain not a DNS label",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = "Example.com/signer" }),
			want: []string{`spec.signerName|Invalid value|validating label "Example": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		},
		{
			name: "legacy signer",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.SignerName = LegacyUnknownSignerName }),
			want: []string{"spec.signerName|Invalid value|the legacy signerName is not allowed via this API version"},
		},
		{
			name: "duration under 600 s",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.ExpirationSeconds = ptr.To[int32](599) }),
			want: []string{"spec.expirationSeconds|Invalid value|may not specify a duration less than 600 seconds (10 minutes)"},
		},
		{
			name: "approved and denied",
			csr: newCSR(func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
					cond(certificatesv1.CertificateApproved, corev1.ConditionTrue), cond(certificatesv1.CertificateDenied, corev1.ConditionTrue),
				}
			}),
			want: []string{"status.conditions[1].type|Invalid value|Approved and Denied conditions are mutually exclusive"},
		},
		{
			name: "condition statuses and types",
			csr: newCSR(func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
					cond(certificatesv1.CertificateApproved, corev1.ConditionFalse),
					cond("Custom", corev1.ConditionUnknown),
					cond("Custom", ""),
					cond("", corev1.ConditionTrue),
				}
			}),
			want: []string{
				`status.conditions[0].status|Unsupported value|supported values: "True"`,
				`status.conditions[2].status|Required value|`,
				`status.conditions[2].type|Duplicate value|`,
				`status.conditions[3].type|Required value|`,
			},
		},
		{
			name: "certificate not PEM",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("garbage") }),
			want: []string{"status.certificate|Invalid value|must contain at least one CERTIFICATE PEM block"},
		},
		{
			name: "certificate of another block type",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = requestPEM }),
			want: []string{`status.certificate|Invalid value|only CERTIFICATE PEM blocks are allowed, found "CERTIFICATE REQUEST"`},
		},
		{
			name: "certificate with text around it",
			csr: newCSR(func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Certificate = append(append([]byte("issued by\n"), certPEM...), "trailer\n"...)
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, flat(Validate(tc.csr))); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestCreate: the server clears the status and records the requester,
// whatever the client sent.
func TestCreate(t *testing.T) {
	k := Kind()
	csr := newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
		c.Spec.Username, c.Spec.UID, c.Spec.Groups = "admin", "1", []string{"system:masters"}
		c.Spec.Extra = map[string]certificatesv1.ExtraValue{"k": {"v"}}
		c.Status.Certificate = certPEM
	})
	k.PrepareForCreate(csr)
	if csr.Spec.Username != "" || csr.Spec.Groups != nil || csr.Spec.Extra != nil || len(csr.Status.Conditions) != 0 || csr.Status.Certificate != nil {
		t.Errorf("after PrepareForCreate: %+v %+v", csr.Spec, csr.Status)
	}
	groups := []string{"system:nodes", "system:authenticated"}
	k.RecordRequester(csr, registry.User{Name: "system:node:node-1", Groups: groups, Extra: map[string][]string{"a": {"b"}}})
	groups[0] = "changed"
	want := certificatesv1.CertificateSigningRequestSpec{
		Request: requestPEM, SignerName: certificatesv1.KubeletServingSignerName, Usages: csr.Spec.Usages,
		Username: "system:node:node-1", Groups: []string{"system:nodes", "system:authenticated"},
		Extra: map[string]certificatesv1.ExtraValue{"a": {"b"}},
	}
	if diff := cmp.Diff(want, csr.Spec); diff != "" {
		t.Errorf("spec after RecordRequester (-want +got)\n%s", diff)
	}
	if errs := k.Validate(csr); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
}

// update runs one update as the REST layer does: prepare, then validate.
func update(rules registry.StatusRules, obj, old *certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, []string) {
	rules.PrepareForUpdate(obj, old)
	return obj, flat(rules.ValidateUpdate(obj, old))
}

func TestMainResourceUpdate(t *testing.T) {
	k := Kind()
	main := registry.StatusRules{PrepareForUpdate: k.PrepareForUpdate, ValidateUpdate: k.ValidateUpdate}
	old := newCSR()
	obj := newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
		c.Labels = map[string]string{"a": "b"}
		c.Spec.SignerName = "example.com/other"
		c.Spec.Username = "someone"
		c.Status.Certificate = certPEM
	})
	got, errs := update(main, obj, old)
	if len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
	if diff := cmp.Diff(old.Spec, got.Spec); diff != "" {
		t.Errorf("spec changed (-old +new)\n%s", diff)
	}
	if len(got.Status.Conditions) != 0 || got.Status.Certificate != nil {
		t.Errorf("status changed: %+v", got.Status)
	}
	if got.Labels["a"] != "b" {
		t.Errorf("labels not updated: %v", got.Labels)
	}
	// The rule itself, if the spec or the certificate were to change.
	changed := newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = certPEM })
	if diff := cmp.Diff([]string{"status.certificate|Forbidden|updates may not set certificate content"}, flat(ValidateUpdate(changed, old))); diff != "" {
		t.Errorf("certificate through the main resource (-want +got)\n%s", diff)
	}
}

func TestStatusUpdate(t *testing.T) {
	status := *Kind().Status
	tests := []struct {
		name     string
		old, obj *certificatesv1.CertificateSigningRequest
		want     []string
		check    func(t *testing.T, got *certificatesv1.CertificateSigningRequest)
	}{
		{
			name: "issue an approved request",
			old:  newCSR(approved),
			obj:  newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = certPEM }),
		},
		{
			name: "issue a pending request",
			old:  newCSR(),
			obj:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = certPEM }),
			want: []string{"status.certificate|Forbidden|may only be set on a request with an Approved condition and no Denied one"},
		},
		{
			name: "replace a certificate",
			old:  newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = certPEM }),
			obj: newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Certificate = append([]byte("note\n"), certPEM...)
			}),
			want: []string{"status.certificate|Forbidden|updates may not modify existing certificate content"},
		},
		{
			name: "garbage certificate",
			old:  newCSR(approved),
			obj:  newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) { c.Status.Certificate = []byte("x") }),
			want: []string{"status.certificate|Invalid value|must contain at least one CERTIFICATE PEM block"},
		},
		{
			name: "add Failed",
			old:  newCSR(approved),
			obj: newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = append(c.Status.Conditions, cond(certificatesv1.CertificateFailed, corev1.ConditionTrue))
			}),
		},
		{
			name: "add Approved",
			old:  newCSR(),
			obj:  newCSR(approved),
			want: []string{`status.conditions|Forbidden|updates may not add a condition of type "Approved"`},
		},
		{
			name: "remove Approved",
			old:  newCSR(approved),
			obj:  newCSR(),
			want: []string{`status.conditions|Forbidden|updates may not remove a condition of type "Approved"`},
		},
		{
			name: "a changed Approved condition is put back",
			old:  newCSR(approved),
			obj: newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions[0].Message = "rewritten"
			}),
			check: func(t *testing.T, got *certificatesv1.CertificateSigningRequest) {
				if got.Status.Conditions[0].Message != "" {
					t.Errorf("Approved condition changed: %+v", got.Status.Conditions[0])
				}
			},
		},
		{
			name: "the spec is kept",
			old:  newCSR(),
			obj:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.Spec.Usages = nil; c.Spec.Username = "x" }),
			check: func(t *testing.T, got *certificatesv1.CertificateSigningRequest) {
				if got.Spec.Username != "system:node:node-1" || len(got.Spec.Usages) != 2 {
					t.Errorf("spec changed: %+v", got.Spec)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := update(status, tc.obj, tc.old)
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestApprovalUpdate(t *testing.T) {
	approval := *Kind().Approval
	denied := func(c *certificatesv1.CertificateSigningRequest) {
		c.Status.Conditions = append(c.Status.Conditions, cond(certificatesv1.CertificateDenied, corev1.ConditionTrue))
	}
	tests := []struct {
		name     string
		old, obj *certificatesv1.CertificateSigningRequest
		want     []string
		check    func(t *testing.T, got *certificatesv1.CertificateSigningRequest)
	}{
		{name: "approve", old: newCSR(), obj: newCSR(approved)},
		{name: "deny", old: newCSR(), obj: newCSR(denied)},
		{
			name: "deny an approved request",
			old:  newCSR(approved),
			obj:  newCSR(approved, denied),
			want: []string{"status.conditions[1].type|Invalid value|Approved and Denied conditions are mutually exclusive"},
		},
		{
			name: "withdraw an approval",
			old:  newCSR(approved),
			obj:  newCSR(),
			want: []string{`status.conditions|Forbidden|updates may not remove a condition of type "Approved"`},
		},
		{
			name: "approve False",
			old:  newCSR(),
			obj: newCSR(func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{cond(certificatesv1.CertificateApproved, corev1.ConditionFalse)}
			}),
			want: []string{`status.conditions[0].status|Unsupported value|supported values: "True"`},
		},
		{
			name: "the certificate and the spec are kept",
			old:  newCSR(),
			obj: newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Certificate = certPEM
				c.Spec.SignerName = "example.com/x"
			}),
			check: func(t *testing.T, got *certificatesv1.CertificateSigningRequest) {
				if got.Status.Certificate != nil || got.Spec.SignerName != certificatesv1.KubeletServingSignerName {
					t.Errorf("approval changed more than conditions: %+v", got)
				}
				if !HasCondition(got, certificatesv1.CertificateApproved) {
					t.Error("not approved")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := update(approval, tc.obj, tc.old)
			if diff := cmp.Diff(tc.want, errs); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// TestTolerated: problems already stored are accepted on update, as
// upstream keeps old objects updatable.
func TestTolerated(t *testing.T) {
	old := newCSR(func(c *certificatesv1.CertificateSigningRequest) {
		c.Spec.Usages = []certificatesv1.KeyUsage{"teleport", "teleport"}
		c.Spec.SignerName = LegacyUnknownSignerName
		c.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{
			cond(certificatesv1.CertificateApproved, corev1.ConditionTrue), cond(certificatesv1.CertificateDenied, corev1.ConditionTrue),
			cond("", corev1.ConditionTrue), cond("", corev1.ConditionTrue),
		}
		c.Status.Certificate = []byte("not pem")
	})
	obj := old.DeepCopy()
	obj.Labels = map[string]string{"a": "b"}
	if errs := ValidateUpdate(obj, old); len(errs) != 0 {
		t.Errorf("update of an object with stored problems: %v", errs)
	}
	if errs := Validate(old); len(errs) != 9 {
		t.Errorf("the same object on create: want 9 errors, got %v", flat(errs))
	}
}

func TestRow(t *testing.T) {
	k := Kind()
	want := []string{"NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"}
	var got []string
	for _, c := range k.Columns {
		got = append(got, strings.ToUpper(c.Name))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("columns (-want +got)\n%s", diff)
	}
	created := metav1.NewTime(now.Add(-90 * time.Second))
	tests := []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want []interface{}
	}{
		{
			name: "pending",
			csr:  newCSR(func(c *certificatesv1.CertificateSigningRequest) { c.CreationTimestamp = created }),
			want: []interface{}{"csr-1", "90s", "kubernetes.io/kubelet-serving", "system:node:node-1", "<none>", "Pending"},
		},
		{
			name: "approved and issued, with a duration",
			csr: newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
				c.Status.Certificate = certPEM
				c.Spec.ExpirationSeconds = ptr.To[int32](3600)
			}),
			want: []interface{}{"csr-1", "<unknown>", "kubernetes.io/kubelet-serving", "system:node:node-1", "60m", "Approved,Issued"},
		},
		{
			name: "denied wins, failed",
			csr: newCSR(approved, func(c *certificatesv1.CertificateSigningRequest) {
				c.Spec.SignerName = ""
				c.Status.Conditions = append(c.Status.Conditions,
					cond(certificatesv1.CertificateDenied, corev1.ConditionTrue), cond(certificatesv1.CertificateFailed, corev1.ConditionTrue))
			}),
			want: []interface{}{"csr-1", "<unknown>", "<none>", "system:node:node-1", "<none>", "Denied,Failed"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, k.Row(tc.csr, now)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	fields := k.Fields(newCSR())
	if fields["metadata.name"] != "csr-1" || fields["spec.signerName"] != "kubernetes.io/kubelet-serving" || len(fields) != 2 {
		t.Errorf("fields: %v", fields)
	}
}

func TestParseRequest(t *testing.T) {
	req, err := ParseRequest(requestPEM)
	if err != nil || req.Subject.CommonName != "system:node:node-1" {
		t.Fatalf("ParseRequest = %v, %v", req, err)
	}
	if _, err := ParseRequest(append([]byte("junk"), certPEM...)); err == nil || err.Error() != msgNotRequest {
		t.Errorf("a certificate: err = %v", err)
	}
}
