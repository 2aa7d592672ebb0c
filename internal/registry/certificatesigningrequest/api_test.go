package certificatesigningrequest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/apitest"
)

// These tests drive CertificateSigningRequests through knode's real API
// server with client-go and kubectl: the recorded requester, the /status
// and /approval subresources, who may write them, the table, discovery.

var ctx = context.Background()

const nodeToken = "nodetoken"

func start(t *testing.T, opts apitest.Options) *apitest.Server {
	t.Helper()
	opts.NodeRules = true
	opts.Tokens = append(opts.Tokens, nodeToken+`,system:node:node-1,,"system:nodes"`)
	return apitest.Start(t, opts)
}

func request(t *testing.T, cn string, dns ...string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}, DNSNames: dns,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func newCSR(t *testing.T, name string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request(t, "system:node:node-1", "node-1"),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			// A client cannot choose the requester.
			Username: "kubernetes-admin", Groups: []string{"system:masters"},
		},
		Status: certificatesv1.CertificateSigningRequestStatus{
			Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}},
		},
	}
}

func approve(csr *certificatesv1.CertificateSigningRequest, reason string) *certificatesv1.CertificateSigningRequest {
	csr = csr.DeepCopy()
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: reason,
	})
	return csr
}

func TestRequesterAndSubresources(t *testing.T) {
	s := start(t, apitest.Options{})
	node := s.Client(t, nodeToken).CertificatesV1().CertificateSigningRequests()
	admin := s.Admin.CertificatesV1().CertificateSigningRequests()

	created, err := node.Create(ctx, newCSR(t, "csr-1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("node creating a CSR: %v", err)
	}
	if created.Spec.Username != "system:node:node-1" || !slices.Equal(created.Spec.Groups, []string{"system:nodes", "system:authenticated"}) {
		t.Errorf("requester = %q %q, want the node's identity", created.Spec.Username, created.Spec.Groups)
	}
	if len(created.Status.Conditions) != 0 {
		t.Errorf("created with conditions: %+v", created.Status.Conditions)
	}
	// The node may read requests, not approve or sign them.
	if _, err := node.Get(ctx, "csr-1", metav1.GetOptions{}); err != nil {
		t.Errorf("node get: %v", err)
	}
	if _, err := node.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("node list: %v", err)
	}
	if _, err := node.UpdateApproval(ctx, "csr-1", approve(created, "Self"), metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node approving its own request: err = %v, want Forbidden", err)
	}

	// The main resource changes neither spec nor status.
	upd := approve(created, "ViaMain")
	upd.Spec.SignerName = "example.com/other"
	upd.Labels = map[string]string{"a": "b"}
	got, err := admin.Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Conditions) != 0 || got.Spec.SignerName != certificatesv1.KubeletServingSignerName || got.Labels["a"] != "b" {
		t.Errorf("main update: %+v %+v %v", got.Spec.SignerName, got.Status, got.Labels)
	}
	// /status cannot approve.
	if _, err := admin.UpdateStatus(ctx, approve(got, "ViaStatus"), metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), `updates may not add a condition of type "Approved"`) {
		t.Errorf("approving through /status: err = %v", err)
	}
	// Nor can it issue before approval.
	pending := got.DeepCopy()
	pending.Status.Certificate = []byte("x")
	if _, err := admin.UpdateStatus(ctx, pending, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("issuing a pending request: err = %v", err)
	}
	// /approval approves, and changes nothing but the conditions.
	upd = approve(got, "ByTest")
	upd.Spec.Usages = nil
	upd.Status.Certificate = []byte("ignored")
	got, err = admin.UpdateApproval(ctx, "csr-1", upd, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("approving: %v", err)
	}
	if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Reason != "ByTest" || got.Status.Certificate != nil || len(got.Spec.Usages) != 2 {
		t.Errorf("after approval: %+v %+v", got.Spec, got.Status)
	}
	// A patch of /approval that denies too is refused.
	patch := `{"status":{"conditions":[{"type":"Approved","status":"True","reason":"ByTest"},{"type":"Denied","status":"True"}]}}`
	_, err = admin.Patch(ctx, "csr-1", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "approval")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Approved and Denied conditions are mutually exclusive") {
		t.Errorf("denying an approved request: err = %v", err)
	}
	// GET of the subresource is the object.
	raw, err := s.Admin.CertificatesV1().RESTClient().Get().Resource("certificatesigningrequests").Name("csr-1").SubResource("approval").DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), `"ByTest"`) {
		t.Errorf("GET approval: %v %s", err, raw)
	}
	// A kind without Approval rules has no such subresource.
	err = s.Admin.CoreV1().RESTClient().Get().Resource("nodes").Name("x").SubResource("approval").Do(ctx).Error()
	if !apierrors.IsNotFound(err) {
		t.Errorf("nodes/x/approval: err = %v, want NotFound", err)
	}
	// The field selector on spec.signerName.
	for selector, want := range map[string]int{"spec.signerName=kubernetes.io/kubelet-serving": 1, "spec.signerName=example.com/x": 0} {
		l, err := admin.List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil || len(l.Items) != want {
			t.Errorf("list %s: %v, %d items, want %d", selector, err, len(l.Items), want)
		}
	}
}

func TestDiscoveryAndTable(t *testing.T) {
	s := start(t, apitest.Options{})
	list, err := s.Admin.Discovery().ServerResourcesForGroupVersion("certificates.k8s.io/v1")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, r := range list.APIResources {
		found = append(found, r.Name+"/"+strings.Join(r.ShortNames, ","))
		if r.Name == "certificatesigningrequests" && r.Namespaced {
			t.Error("certificatesigningrequests is namespaced")
		}
	}
	if !slices.Contains(found, "certificatesigningrequests/csr") || !slices.Contains(found, "certificatesigningrequests/status/") {
		t.Errorf("discovery: %v", found)
	}
	if _, err := s.Admin.CertificatesV1().CertificateSigningRequests().Create(ctx, newCSR(t, "csr-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", s.URL+"/apis/certificates.k8s.io/v1/certificatesigningrequests", nil)
	req.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("table: %v %s", err, body)
	}
	cells := table.Rows[0].Cells
	if diff := cmp.Diff([]interface{}{"csr-1", "kubernetes.io/kubelet-serving", "admin", "<none>", "Pending"}, []interface{}{cells[0], cells[2], cells[3], cells[4], cells[5]}); diff != "" {
		t.Errorf("row (-want +got)\n%s", diff)
	}
}

// TestKubectl runs kubectl 1.33's get csr, certificate approve and
// certificate deny against the server.
func TestKubectl(t *testing.T) {
	bin := "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("kubectl 1.33 not installed: %v", err)
	}
	// kubectl sends no credentials over plain HTTP: the server sees the
	// admin's. Clients that send their own keep them.
	s := start(t, apitest.Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				r.Header.Set("Authorization", "Bearer "+apitest.AdminToken)
			}
			h.ServeHTTP(w, r)
		})
	}})
	node := s.Client(t, nodeToken).CertificatesV1().CertificateSigningRequests()
	for _, name := range []string{"csr-a", "csr-b"} {
		if _, err := node.Create(ctx, newCSR(t, name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--server", s.URL, "--cache-dir", filepath.Join(home, "cache")}, args...)...)
		cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "kubeconfig"), "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("get", "csr")
	if err != nil {
		t.Fatalf("kubectl get csr: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !slices.Equal(strings.Fields(lines[0]), []string{"NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"}) {
		t.Fatalf("kubectl get csr:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 6 || f[0] != "csr-a" || f[2] != "kubernetes.io/kubelet-serving" || f[3] != "system:node:node-1" || f[4] != "<none>" || f[5] != "Pending" {
		t.Errorf("kubectl get csr row: %q", lines[1])
	}

	if out, err := kubectl("certificate", "approve", "csr-a"); err != nil || !strings.Contains(out, "certificatesigningrequest.certificates.k8s.io/csr-a approved") {
		t.Fatalf("kubectl certificate approve: %v\n%s", err, out)
	}
	if out, err := kubectl("certificate", "deny", "csr-b"); err != nil || !strings.Contains(out, "csr-b denied") {
		t.Fatalf("kubectl certificate deny: %v\n%s", err, out)
	}
	a, err := s.Admin.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Status.Conditions) != 1 || a.Status.Conditions[0].Type != certificatesv1.CertificateApproved || a.Status.Conditions[0].Reason != "KubectlApprove" {
		t.Errorf("csr-a conditions: %+v", a.Status.Conditions)
	}
	// Approving again changes nothing; kubectl refuses to deny an approved
	// request (the server's refusal is TestRequesterAndSubresources').
	if out, err := kubectl("certificate", "approve", "csr-a"); err != nil {
		t.Errorf("kubectl certificate approve again: %v\n%s", err, out)
	}
	if out, err := kubectl("certificate", "deny", "csr-a"); err == nil || !strings.Contains(out, "already Approved") {
		t.Errorf("kubectl certificate deny of an approved request: %v\n%s", err, out)
	}
	out, err = kubectl("get", "csr", "--no-headers")
	if err != nil {
		t.Fatal(err)
	}
	var conditions []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		conditions = append(conditions, f[0]+" "+f[len(f)-1])
	}
	if diff := cmp.Diff([]string{"csr-a Approved", "csr-b Denied"}, conditions); diff != "" {
		t.Errorf("kubectl get csr after approve and deny (-want +got)\n%s", diff)
	}
}
