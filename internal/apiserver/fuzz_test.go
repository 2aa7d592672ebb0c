package apiserver

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"knode/internal/auth"
	"knode/internal/registry"
	"knode/internal/registry/event"
	"knode/internal/registry/lease"
	"knode/internal/registry/namespace"
	"knode/internal/registry/node"
	"knode/internal/registry/pod"
	"knode/internal/storage/memory"
)

func fuzzKinds() []registry.Kind {
	return []registry.Kind{namespace.Kind(), node.Kind(), pod.Kind(), event.Kind(), lease.Kind()}
}

// FuzzDecodeBody feeds arbitrary bodies to the decoder of every kind under
// every fieldValidation mode. Decoding either fails with a 400 Status or
// yields an object of the endpoint's kind, which validation must survive.
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"kind":"Node","apiVersion":"v1","metadata":{"name":"10.240.79.157","labels":{"name":"my-first-k8s-node"}}}`), uint8(1))
	f.Add([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]},"x":1}`), uint8(2))
	f.Add([]byte(`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","spec":{"leaseDurationSeconds":-1}}`), uint8(4))
	f.Add([]byte{0x6b, 0x38, 0x73, 0x00, 0x0a}, uint8(0))
	kinds := fuzzKinds()
	modes := []fieldValidation{validationStrict, validationWarn, validationIgnore}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		k := &kinds[int(which)%len(kinds)]
		for _, ct := range []string{"application/json", protobufMediaType} {
			for _, mode := range modes {
				obj, _, err := decodeBodyAs(k, ct, data, mode)
				if err != nil {
					if st := toStatus(err); st.Code != http.StatusBadRequest {
						t.Fatalf("decode error is %d, want 400: %v", st.Code, err)
					}
					continue
				}
				if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != k.Kind {
					t.Fatalf("decoded kind %q at the %s endpoint", gvk.Kind, k.Kind)
				}
				if k.Default != nil {
					k.Default(obj)
				}
				_ = k.Validate(obj)
				_ = k.ValidateUpdate(obj, obj.DeepCopyObject())
			}
		}
	})
}

// FuzzServeHTTP sends arbitrary requests through the whole handler, as the
// admin, against a memory store. No request may make the server fail with a
// 500: bad input is the client's error.
func FuzzServeHTTP(f *testing.F) {
	for _, seed := range []struct{ method, path, ctype, body string }{
		{"POST", "/api/v1/nodes", "application/json", `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`},
		{"PATCH", "/api/v1/nodes/n", "application/strategic-merge-patch+json", `{"spec":{"taints":[{"key":"a","effect":"NoSchedule"}]}}`},
		{"PATCH", "/api/v1/nodes/n", "application/json-patch+json", `[{"op":"remove","path":"/metadata"}]`},
		{"PUT", "/api/v1/nodes/n/status", "application/json", `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"}}`},
		{"GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn&labelSelector=a%20in%20(b)&limit=1", "", ""},
		{"DELETE", "/api/v1/namespaces/default/pods", "application/json", `{"gracePeriodSeconds":-5}`},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases?watch=true&resourceVersion=99999&timeoutSeconds=0", "", ""},
		{"PUT", "/api/v1/namespaces/kube-public/finalize", "application/json", `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-public"}}`},
	} {
		f.Add(seed.method, seed.path, seed.ctype, []byte(seed.body))
	}
	tf, err := auth.ParseTokenFile(strings.NewReader("t,admin,1,\"system:masters\"\n"))
	if err != nil {
		f.Fatal(err)
	}
	s, err := New(Config{Storage: memory.New(memory.Config{}), Kinds: fuzzKinds(), Authenticator: auth.UnionAuthenticator{tf}})
	if err != nil {
		f.Fatal(err)
	}
	if err := s.EnsureNamespaces(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, ctype string, body []byte) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t") {
			return
		}
		if strings.Contains(path, "watch") {
			// An open watch would wait for events; watches are covered
			// by the table tests.
			return
		}
		req, err := http.NewRequest(method, "http://knode"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s (%s) %q: %d %s", method, path, ctype, body, rec.Code, rec.Body.String())
		}
	})
}
