package certificatesigningrequest

import (
	"encoding/base64"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/registry"
	"knode/internal/registry/registrytest"
)

// fuzzSeeds are request manifests that reach most branches: a valid
// request, requests that are not PEM or not a request, odd signers and
// usages, short durations, conditions that clash and certificates that do
// not parse. REQ and CERT stand for a valid request and certificate.
var fuzzSeeds = func() []string {
	raw := []string{
		`{}`,
		`{"metadata":{"name":"csr-1"},"spec":{"request":"REQ","signerName":"kubernetes.io/kubelet-serving",
		  "usages":["digital signature","server auth"],"username":"system:node:n","groups":["system:nodes"]}}`,
		`{"metadata":{"name":"csr-2"},"spec":{"request":"CERT","signerName":"kubernetes.io/legacy-unknown",
		  "usages":["server auth","teleport","server auth"],"expirationSeconds":10,"extra":{"k":["v"]}},
		 "status":{"conditions":[{"type":"Approved","status":"True"},{"type":"Denied","status":"False"},{"type":"","status":""},
		  {"type":"Approved","status":"True"}],"certificate":"REQ"}}`,
		`{"spec":{"request":"bm90IHBlbQ==","signerName":"a/b/c","usages":[]},
		 "status":{"conditions":[{"type":"Failed","status":"Unknown"}],"certificate":"Q0VSVA=="}}`,
		`{"spec":{"request":"REQ","signerName":"Example.com/x..y","usages":["any"],"expirationSeconds":600},
		 "status":{"conditions":[{"type":"Approved","status":"True"}],"certificate":"CERT"}}`,
	}
	req := base64.StdEncoding.EncodeToString(requestPEM)
	cert := base64.StdEncoding.EncodeToString(certPEM)
	out := make([]string, len(raw))
	for i, s := range raw {
		out[i] = strings.NewReplacer(`"REQ"`, `"`+req+`"`, `"CERT"`, `"`+cert+`"`).Replace(s)
	}
	return out
}()

// FuzzValidate drives the request rules as the REST layer does (see
// registrytest.Fuzz); on the created object it also records a requester
// and runs a no-op approval, which a valid object must pass.
func FuzzValidate(f *testing.F) {
	k := Kind()
	registrytest.Fuzz(f, k, fuzzSeeds, registrytest.FuzzOptions{
		NoOpForbidden: []string{"updates may not", "immutable"},
		Extra: func(t *testing.T, obj runtime.Object) {
			csr := obj.(*certificatesv1.CertificateSigningRequest)
			if len(csr.Status.Conditions) != 0 || csr.Status.Certificate != nil || csr.Spec.Username != "" {
				t.Fatalf("a created request kept its status or requester: %+v %+v", csr.Spec, csr.Status)
			}
			valid := len(k.Validate(obj)) == 0
			k.RecordRequester(obj, registry.User{Name: "system:node:n", Groups: []string{"system:nodes"}})
			same := obj.DeepCopyObject()
			k.Approval.PrepareForUpdate(same, obj)
			if errs := k.Approval.ValidateUpdate(same, obj); valid && len(errs) != 0 {
				t.Fatalf("a no-op approval of a valid request was refused: %v", errs)
			}
		},
	})
}
