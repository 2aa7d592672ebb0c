package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/version"
)

// The kubectl releases knode supports, as installed on the build machines.
const kubectlDir = "/usr/lib/google-cloud-sdk/bin"

var kubectlVersions = []string{"1.27", "1.28", "1.29", "1.30", "1.31", "1.32", "1.33"}

// request is what the fake server saw of one request.
type request struct {
	method, path, query, contentType string
}

// fakeServer is a throwaway API server: the OpenAPI handler, just enough
// discovery for kubectl to map "node" to nodes, and an in-memory node store
// that answers create, get and patch. It records every request.
type fakeServer struct {
	openapi http.Handler

	mu       sync.Mutex
	requests []request
	nodes    map[string][]byte
}

func (s *fakeServer) record(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type")})
}

func (s *fakeServer) seen() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.requests...)
}

func writeJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter, name string) {
	writeJSON(w, http.StatusNotFound, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
		Message: "nodes \"" + name + "\" not found",
	})
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.record(r)
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/openapi/"):
		s.openapi.ServeHTTP(w, r)
	case p == "/version":
		writeJSON(w, http.StatusOK, &version.Info{Major: "1", Minor: "33", GitVersion: "v1.33.0", Platform: "linux/amd64"})
	case p == "/api":
		writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
	case p == "/apis":
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}})
	case p == "/api/v1":
		verbs := metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
		writeJSON(w, http.StatusOK, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "nodes", SingularName: "node", Kind: "Node", ShortNames: []string{"no"}, Verbs: verbs},
				{Name: "nodes/status", Kind: "Node", Verbs: metav1.Verbs{"get", "patch", "update"}},
			},
		})
	case p == "/api/v1/nodes" && r.Method == http.MethodPost:
		body, _ := io.ReadAll(r.Body)
		var node corev1.Node
		if err := json.Unmarshal(body, &node); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.nodes[node.Name] = body
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	case strings.HasPrefix(p, "/api/v1/nodes/"):
		name := strings.TrimPrefix(p, "/api/v1/nodes/")
		s.mu.Lock()
		stored, ok := s.nodes[name]
		s.mu.Unlock()
		if !ok {
			notFound(w, name)
			return
		}
		if r.Method == http.MethodPatch {
			patch, _ := io.ReadAll(r.Body)
			patched, err := strategicpatch.StrategicMergePatch(stored, patch, &corev1.Node{})
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnprocessableEntity)
				return
			}
			s.mu.Lock()
			s.nodes[name] = patched
			s.mu.Unlock()
			stored = patched
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(stored)
	default:
		http.NotFound(w, r)
	}
}

func newFakeServer(t *testing.T) (*fakeServer, *httptest.Server) {
	t.Helper()
	h, err := NewHandler(testKinds(), "v1.33.0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeServer{openapi: h, nodes: map[string][]byte{}}
	srv := httptest.NewServer(fs)
	t.Cleanup(srv.Close)
	return fs, srv
}

// kubectl runs one kubectl release against url with a private home and
// cache, and returns its combined output.
func kubectl(t *testing.T, release, url string, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(filepath.Join(kubectlDir, "kubectl."+release),
		append([]string{"--server", url, "--cache-dir", filepath.Join(home, "cache")}, args...)...)
	cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "kubeconfig"), "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// requireKubectl skips the test when the release is not installed, and in
// -short mode for all but the oldest and newest release.
func requireKubectl(t *testing.T, release string) {
	t.Helper()
	if testing.Short() && release != kubectlVersions[0] && release != kubectlVersions[len(kubectlVersions)-1] {
		t.Skip("-short runs only the oldest and the newest kubectl")
	}
	if _, err := os.Stat(filepath.Join(kubectlDir, "kubectl."+release)); err != nil {
		t.Skipf("kubectl %s not installed: %v", release, err)
	}
}

// TestKubectlExplain checks that every supported kubectl explains Node's
// spec from our documents.
func TestKubectlExplain(t *testing.T) {
	for _, release := range kubectlVersions {
		t.Run(release, func(t *testing.T) {
			requireKubectl(t, release)
			_, srv := newFakeServer(t)
			out, err := kubectl(t, release, srv.URL, "explain", "node.spec")
			if err != nil {
				t.Fatalf("kubectl explain node.spec: %v\n%s", err, out)
			}
			for _, want := range []string{"KIND:", "Node", "podCIDR", "taints", "unschedulable", "providerID"} {
				if !strings.Contains(out, want) {
					t.Errorf("kubectl explain node.spec output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestKubectlWrites checks what kubectl does with our documents when it
// writes. It must find fieldValidation on Node's PATCH operation in the v3
// document: then it leaves unknown fields for the server to judge and sends
// fieldValidation=Strict, instead of validating on its own side (where an
// unknown field is refused) or, with no documents at all, refusing to send
// anything. A second apply must build a strategic-merge patch. A List is
// never checked against the v3 document: kubectl validates its items
// against the v2 document's definitions, so an item with an unknown field
// is refused before anything is sent.
func TestKubectlWrites(t *testing.T) {
	const (
		unknownField = `{"apiVersion":"v1","kind":"Node","metadata":{"name":"created"},"spec":{"podCIDR":"10.0.0.0/24","notAField":true}}`
		applied      = `{"apiVersion":"v1","kind":"Node","metadata":{"name":"applied","labels":{"a":"1"}},"spec":{"podCIDR":"10.0.0.0/24"}}`
		reapplied    = `{"apiVersion":"v1","kind":"Node","metadata":{"name":"applied","labels":{"a":"2"}},"spec":{"podCIDR":"10.0.0.0/24","taints":[{"key":"k","effect":"NoSchedule"}]}}`
		list         = `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"listed"}}]}`
		badList      = `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Node","metadata":{"name":"bad"},"spec":{"notAField":true}}]}`
	)
	for _, release := range kubectlVersions {
		t.Run(release, func(t *testing.T) {
			requireKubectl(t, release)
			fs, srv := newFakeServer(t)
			dir := t.TempDir()
			run := func(verb, manifest string) (string, error) {
				p := filepath.Join(dir, "manifest.json")
				if err := os.WriteFile(p, []byte(manifest), 0o600); err != nil {
					t.Fatal(err)
				}
				return kubectl(t, release, srv.URL, verb, "-f", p)
			}
			for _, step := range []struct{ verb, manifest string }{
				{"create", unknownField},
				{"apply", applied},
				{"apply", reapplied},
				{"create", list},
			} {
				if out, err := run(step.verb, step.manifest); err != nil {
					t.Fatalf("kubectl %s -f %s: %v\n%s", step.verb, step.manifest, err, out)
				}
			}
			out, err := run("create", badList)
			if err == nil || !strings.Contains(out, `unknown field "notAField"`) {
				t.Errorf("kubectl create -f %s: err=%v, want it refused for the unknown field; output:\n%s", badList, err, out)
			}

			var writes []request
			for _, r := range fs.seen() {
				if r.method != http.MethodGet {
					writes = append(writes, r)
				}
			}
			want := []request{
				{http.MethodPost, "/api/v1/nodes", "fieldManager=kubectl-create&fieldValidation=Strict", "application/json"},
				{http.MethodPost, "/api/v1/nodes", "fieldManager=kubectl-client-side-apply&fieldValidation=Strict", "application/json"},
				{http.MethodPatch, "/api/v1/nodes/applied", "fieldManager=kubectl-client-side-apply&fieldValidation=Strict", "application/strategic-merge-patch+json"},
				{http.MethodPost, "/api/v1/nodes", "fieldManager=kubectl-create&fieldValidation=Strict", "application/json"},
			}
			if diff := cmp.Diff(want, writes, cmp.AllowUnexported(request{})); diff != "" {
				t.Errorf("writes kubectl sent (-want +got):\n%s", diff)
			}

			var got corev1.Node
			fs.mu.Lock()
			err = json.Unmarshal(fs.nodes["applied"], &got)
			fs.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if got.Labels["a"] != "2" || len(got.Spec.Taints) != 1 {
				t.Errorf("after the second apply, labels are %v and taints %v; want a=2 and one taint", got.Labels, got.Spec.Taints)
			}
		})
	}
}
