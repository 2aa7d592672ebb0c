package apiserver_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/server"
	"knode/internal/storage/memory"
	"knode/internal/version"
)

// nodeToken is the node n1's identity, which may not read logs.
const nodeToken = "nodetoken"

// logServer is the real API server with the node rules, serving pods/log
// with a kubelet client, over plain HTTP. apitest.Start has no option for
// Config.Kubelet, so it is built here the same way.
type logServer struct {
	url   string
	admin kubernetes.Interface
	pki   *auth.PKI
}

// logServerOptions shape a logServer.
type logServerOptions struct {
	// kubelet builds Config.Kubelet from the cluster's PKI; nil leaves it
	// nil.
	kubelet func(p *auth.PKI) *apiserver.KubeletClientConfig
	// anonymousAdmin serves requests without credentials as the admin's
	// (kubectl sends no token over plain HTTP).
	anonymousAdmin bool
}

// startLogServer starts the API server.
func startLogServer(t *testing.T, opts logServerOptions) *logServer {
	t.Helper()
	kubelet := opts.kubelet
	p, err := auth.EnsurePKI(auth.PKIConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.ParseTokenFile(strings.NewReader(
		"admintoken,admin,1,\"system:masters\"\n" + nodeToken + ",system:node:n1,2,\"system:nodes\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	var api *apiserver.Server
	authz, nodeRestriction := server.NodeAccess(func() *apiserver.Server { return api })
	cfg := apiserver.Config{
		Storage:       memory.New(memory.Config{}),
		Kinds:         server.Kinds(),
		Authenticator: auth.UnionAuthenticator{tokens},
		Authorizer:    authz,
		Admission:     []apiserver.Admitter{nodeRestriction},
		Version:       version.Info(),
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		// As knode server: responses then pass through the metrics'
		// writer, which must still let a log stream flush.
		Metrics: prometheus.NewRegistry(),
	}
	if kubelet != nil {
		cfg.Kubelet = kubelet(p)
	}
	api, err = apiserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.EnsureNamespaces(context.Background()); err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = api
	if opts.anonymousAdmin {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				r.Header.Set("Authorization", "Bearer admintoken")
			}
			api.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	t.Cleanup(api.Close)
	admin, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL, BearerToken: "admintoken", QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &logServer{url: ts.URL, admin: admin, pki: p}
}

// kubeletClient is the Config.Kubelet knode server wires: the PKI's
// kubelet-client pair, agents unverified.
func kubeletClient(p *auth.PKI) *apiserver.KubeletClientConfig {
	cert, ok := p.KubeletClientCertificate()
	if !ok {
		panic("EnsurePKI made no kubelet-client pair")
	}
	return &apiserver.KubeletClientConfig{Certificate: cert}
}

// agentRequest is what the fake agent saw of one request.
type agentRequest struct {
	Path, Query string
	User        string
	Groups      []string
}

// fakeAgent is a node agent's HTTPS port: it requires a client
// certificate of the cluster CA, records each request, refuses anyone but
// the API server's kubelet-client identity with 403, and answers the rest
// with handle.
type fakeAgent struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []agentRequest
}

func newFakeAgent(t *testing.T, p *auth.PKI, handle http.HandlerFunc) *fakeAgent {
	t.Helper()
	a := &fakeAgent{}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cert := r.TLS.PeerCertificates[0]
		a.mu.Lock()
		a.seen = append(a.seen, agentRequest{Path: r.URL.Path, Query: r.URL.RawQuery, User: cert.Subject.CommonName, Groups: cert.Subject.Organization})
		a.mu.Unlock()
		if cert.Subject.CommonName != auth.KubeletClientUser || !slices.Contains(cert.Subject.Organization, auth.MastersGroup) {
			http.Error(w, "Forbidden (user="+cert.Subject.CommonName+")", http.StatusForbidden)
			return
		}
		handle(w, r)
	}))
	a.srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.CertPool()}
	// Handshakes the API server refuses are expected; keep them quiet.
	a.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAgent) requests() []agentRequest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// port is the agent's port, as its Node reports it.
func (a *fakeAgent) port(t *testing.T) int32 {
	_, port, err := net.SplitHostPort(a.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return int32(n)
}

// addNode creates Node name reporting addrs and the agent port.
func (s *logServer) addNode(t *testing.T, name string, port int32, addrs ...corev1.NodeAddress) {
	t.Helper()
	ctx := context.Background()
	n, err := s.admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = addrs
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	if _, err := s.admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// addPod creates pod name in default on node with these containers.
func (s *logServer) addPod(t *testing.T, name, node string, init []string, containers ...string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: c, Image: "busybox"})
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	if _, err := s.admin.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// get sends GET path with token and returns the response, whose body the
// caller closes.
func (s *logServer) get(t *testing.T, ctx context.Context, token, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// getAll sends GET path and reads the whole answer.
func (s *logServer) getAll(t *testing.T, token, path string) (int, string, string) {
	t.Helper()
	resp := s.get(t, context.Background(), token, path)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(body)
}

var internalIP = func(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

// echoAgent answers every request with the container's name and the query.
func echoAgent(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "log of "+r.URL.Path+"\n")
}

// The cases of one answer: the container chosen, the options passed on,
// and every refusal before the agent is asked, each with its status and
// upstream's words.
func TestPodLog(t *testing.T) {
	s := startLogServer(t, logServerOptions{kubelet: kubeletClient})
	agent := newFakeAgent(t, s.pki, echoAgent)
	// The Node's InternalIP is preferred over its other addresses.
	s.addNode(t, "n1", agent.port(t), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "no-such-host.invalid"}, internalIP("127.0.0.1"))
	s.addNode(t, "silent", 0, internalIP("127.0.0.1"))
	s.addNode(t, "nowhere", agent.port(t))
	s.addPod(t, "one", "n1", nil, "c")
	s.addPod(t, "multi", "n1", []string{"setup"}, "a", "b")
	s.addPod(t, "pending", "", nil, "c")
	s.addPod(t, "on-silent", "silent", nil, "c")
	s.addPod(t, "on-nowhere", "nowhere", nil, "c")
	s.addPod(t, "on-ghost", "ghost", nil, "c")
	const pods = "/api/v1/namespaces/default/pods/"

	tests := []struct {
		name  string
		path  string
		code  int
		body  string // the log, or the Status message on error
		agent *agentRequest
		// reason and causes are the Status's on error.
		reason metav1.StatusReason
		causes []metav1.StatusCause
	}{
		{name: "the only container by default", path: pods + "one/log", code: 200,
			body: "log of /containerLogs/default/one/c\n", agent: &agentRequest{Path: "/containerLogs/default/one/c"}},
		{name: "a named container with every option", code: 200,
			path: pods + "multi/log?container=b&follow=false&previous=true&timestamps=1&tailLines=3&limitBytes=100&sinceSeconds=10&unknown=x",
			body: "log of /containerLogs/default/multi/b\n",
			agent: &agentRequest{Path: "/containerLogs/default/multi/b",
				Query: "limitBytes=100&previous=true&sinceSeconds=10&tailLines=3&timestamps=true"}},
		{name: "sinceTime in UTC", code: 200,
			path:  pods + "one/log?sinceTime=" + url.QueryEscape("2026-03-01T14:00:00+02:00") + "&timestamps",
			body:  "log of /containerLogs/default/one/c\n",
			agent: &agentRequest{Path: "/containerLogs/default/one/c", Query: "sinceTime=2026-03-01T12%3A00%3A00Z&timestamps=true"}},
		{name: "an init container", path: pods + "multi/log?container=setup", code: 200,
			body: "log of /containerLogs/default/multi/setup\n", agent: &agentRequest{Path: "/containerLogs/default/multi/setup"}},
		{name: "stream All is every stream", path: pods + "one/log?stream=All", code: 200,
			body: "log of /containerLogs/default/one/c\n", agent: &agentRequest{Path: "/containerLogs/default/one/c"}},

		{name: "a container the pod lacks", path: pods + "multi/log?container=c", code: 400, reason: metav1.StatusReasonBadRequest,
			body: "container c is not valid for pod multi"},
		{name: "several containers and no name", path: pods + "multi/log", code: 400, reason: metav1.StatusReasonBadRequest,
			body: "a container name must be specified for pod multi, choose one of: [setup a b]"},
		{name: "not scheduled", path: pods + "pending/log", code: 400, reason: metav1.StatusReasonBadRequest,
			body: "pod pending does not have a host assigned"},
		{name: "no such pod", path: pods + "missing/log", code: 404, reason: metav1.StatusReasonNotFound,
			body: `pods "missing" not found`},
		{name: "no such node", path: pods + "on-ghost/log", code: 404, reason: metav1.StatusReasonNotFound,
			body: `nodes "ghost" not found`},
		{name: "node without an agent port", path: pods + "on-silent/log", code: 503, reason: metav1.StatusReasonServiceUnavailable,
			body: `node "silent" reports no agent port (status.daemonEndpoints.kubeletEndpoint.port is 0), so its agent cannot be reached; has its agent started?`},
		{name: "node without an address", path: pods + "on-nowhere/log", code: 503, reason: metav1.StatusReasonServiceUnavailable,
			body: `node "nowhere" reports no address (status.addresses is empty), so its agent cannot be reached; has its agent started?`},

		// Every bad parameter: a value that breaks a rule is upstream's
		// 422 Invalid PodLogOptions, one that does not parse a 400.
		{name: "negative tailLines", path: pods + "one/log?tailLines=-1", code: 422, reason: metav1.StatusReasonInvalid,
			body:   `PodLogOptions "one" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: -1: must be greater than or equal to 0", Field: "tailLines"}}},
		{name: "zero limitBytes", path: pods + "one/log?limitBytes=0", code: 422, reason: metav1.StatusReasonInvalid,
			body:   `PodLogOptions "one" is invalid: limitBytes: Invalid value: 0: must be greater than 0`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: 0: must be greater than 0", Field: "limitBytes"}}},
		{name: "zero sinceSeconds", path: pods + "one/log?sinceSeconds=0", code: 422, reason: metav1.StatusReasonInvalid,
			body:   `PodLogOptions "one" is invalid: sinceSeconds: Invalid value: 0: must be greater than 0`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: 0: must be greater than 0", Field: "sinceSeconds"}}},
		{name: "sinceSeconds and sinceTime", path: pods + "one/log?sinceSeconds=5&sinceTime=2026-03-01T12:00:00Z", code: 422, reason: metav1.StatusReasonInvalid,
			body:   "PodLogOptions \"one\" is invalid: sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeForbidden, Message: "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified", Field: "sinceSeconds"}}},
		{name: "one stream only", path: pods + "one/log?stream=Stdout", code: 422, reason: metav1.StatusReasonInvalid,
			body:   `PodLogOptions "one" is invalid: stream: Unsupported value: "Stdout": supported values: "All"`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueNotSupported, Message: `Unsupported value: "Stdout": supported values: "All"`, Field: "stream"}}},
		{name: "several rules broken", path: pods + "one/log?tailLines=-2&limitBytes=-1", code: 422, reason: metav1.StatusReasonInvalid,
			body: `PodLogOptions "one" is invalid: [tailLines: Invalid value: -2: must be greater than or equal to 0, limitBytes: Invalid value: -1: must be greater than 0]`,
			causes: []metav1.StatusCause{
				{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: -2: must be greater than or equal to 0", Field: "tailLines"},
				{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: -1: must be greater than 0", Field: "limitBytes"},
			}},
		{name: "tailLines not a number", path: pods + "one/log?tailLines=ten", code: 400, reason: metav1.StatusReasonBadRequest,
			body:   `tailLines: Invalid value: "ten": must be an integer`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "ten": must be an integer`, Field: "tailLines"}}},
		{name: "limitBytes not a number", path: pods + "one/log?limitBytes=1k", code: 400, reason: metav1.StatusReasonBadRequest,
			body:   `limitBytes: Invalid value: "1k": must be an integer`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "1k": must be an integer`, Field: "limitBytes"}}},
		{name: "sinceSeconds not a number", path: pods + "one/log?sinceSeconds=1h", code: 400, reason: metav1.StatusReasonBadRequest,
			body:   `sinceSeconds: Invalid value: "1h": must be an integer`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "1h": must be an integer`, Field: "sinceSeconds"}}},
		{name: "sinceTime not RFC 3339", path: pods + "one/log?sinceTime=yesterday", code: 400, reason: metav1.StatusReasonBadRequest,
			body:   `sinceTime: Invalid value: "yesterday": must be an RFC 3339 time, such as 2006-01-02T15:04:05Z`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: `Invalid value: "yesterday": must be an RFC 3339 time, such as 2006-01-02T15:04:05Z`, Field: "sinceTime"}}},
		{name: "rules are checked before the pod is looked up", path: pods + "missing/log?tailLines=-1", code: 422, reason: metav1.StatusReasonInvalid,
			body:   `PodLogOptions "missing" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`,
			causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Message: "Invalid value: -1: must be greater than or equal to 0", Field: "tailLines"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(agent.requests())
			code, contentType, body := s.getAll(t, "admintoken", tc.path)
			if code != tc.code {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, code, body, tc.code)
			}
			if tc.code == http.StatusOK {
				if contentType != "text/plain" {
					t.Errorf("Content-Type %q, want text/plain", contentType)
				}
				if body != tc.body {
					t.Errorf("body %q, want %q", body, tc.body)
				}
			} else {
				var st metav1.Status
				if err := json.Unmarshal([]byte(body), &st); err != nil || st.Kind != "Status" {
					t.Fatalf("not a Status (%v): %s", err, body)
				}
				if st.Message != tc.body || st.Reason != tc.reason || st.Code != int32(tc.code) {
					t.Errorf("Status %d %s %q, want %d %s %q", st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.body)
				}
				var causes []metav1.StatusCause
				if st.Details != nil {
					causes = st.Details.Causes
				}
				if diff := cmp.Diff(tc.causes, causes); diff != "" {
					t.Errorf("causes (-want +got):\n%s", diff)
				}
			}
			var want []agentRequest
			if tc.agent != nil {
				r := *tc.agent
				r.User, r.Groups = auth.KubeletClientUser, []string{auth.MastersGroup}
				want = []agentRequest{r}
			}
			if diff := cmp.Diff(want, agent.requests()[before:], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("requests to the agent (-want +got):\n%s", diff)
			}
		})
	}
}

// A node may not read logs, not even of the pods bound to it; neither may
// other users outside system:masters. Neither reaches the agent.
func TestPodLogForbidden(t *testing.T) {
	s := startLogServer(t, logServerOptions{kubelet: kubeletClient})
	agent := newFakeAgent(t, s.pki, echoAgent)
	s.addNode(t, "n1", agent.port(t), internalIP("127.0.0.1"))
	s.addPod(t, "one", "n1", nil, "c")
	code, _, body := s.getAll(t, nodeToken, "/api/v1/namespaces/default/pods/one/log")
	if code != http.StatusForbidden {
		t.Fatalf("node reading its pod's log: %d %s, want 403", code, body)
	}
	var st metav1.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	const want = `pods "one" is forbidden: User "system:node:n1" cannot get resource "pods/log" in API group "" in the namespace "default"`
	if !strings.HasPrefix(st.Message, want) {
		t.Errorf("message %q, want it to start with %q", st.Message, want)
	}
	if got := agent.requests(); len(got) != 0 {
		t.Errorf("the agent was asked: %+v", got)
	}
}

// The agent's errors come back with their status: its own Status as it is,
// and plain text as the message of a Status of the same code. A redirect
// is not followed.
func TestPodLogAgentErrors(t *testing.T) {
	s := startLogServer(t, logServerOptions{kubelet: kubeletClient})
	var redirected atomic.Bool
	agent := newFakeAgent(t, s.pki, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/containerLogs/default/one/c":
			http.Error(w, `container "c" in pod "one" is waiting to start: ContainerCreating`, http.StatusBadRequest)
		case "/containerLogs/default/gone/c":
			http.Error(w, "pod default/gone not found on this node", http.StatusNotFound)
		case "/containerLogs/default/status/c":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
				Code: 404, Reason: metav1.StatusReasonNotFound, Message: `previous terminated container "c" in pod "status" not found`})
		case "/containerLogs/default/moved/c":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/elsewhere":
			redirected.Store(true)
		}
	})
	s.addNode(t, "n1", agent.port(t), internalIP("127.0.0.1"))
	for _, p := range []string{"one", "gone", "status", "moved"} {
		s.addPod(t, p, "n1", nil, "c")
	}
	tests := []struct {
		pod     string
		code    int
		reason  metav1.StatusReason
		message string
	}{
		{"one", 400, metav1.StatusReasonBadRequest, `container "c" in pod "one" is waiting to start: ContainerCreating`},
		{"gone", 404, metav1.StatusReasonNotFound, "pod default/gone not found on this node"},
		{"status", 404, metav1.StatusReasonNotFound, `previous terminated container "c" in pod "status" not found`},
		{"moved", 500, metav1.StatusReasonInternalError, `Internal error occurred: the agent of node "n1" answered with a redirect (302), which is not followed`},
	}
	for _, tc := range tests {
		t.Run(tc.pod, func(t *testing.T) {
			code, _, body := s.getAll(t, "admintoken", "/api/v1/namespaces/default/pods/"+tc.pod+"/log")
			var st metav1.Status
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("%d, not a Status: %s", code, body)
			}
			if code != tc.code || st.Code != int32(tc.code) || st.Reason != tc.reason || st.Message != tc.message {
				t.Errorf("got %d: %d %s %q; want %d %s %q", code, st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.message)
			}
		})
	}
	if redirected.Load() {
		t.Error("the redirect was followed")
	}
}

// With follow, each line reaches the client as the agent writes it, and
// the agent's request ends when the client goes away.
func TestPodLogFollowStreams(t *testing.T) {
	s := startLogServer(t, logServerOptions{kubelet: kubeletClient})
	next := make(chan struct{})
	agentDone := make(chan struct{})
	agent := newFakeAgent(t, s.pki, func(w http.ResponseWriter, r *http.Request) {
		defer close(agentDone)
		if r.URL.Query().Get("follow") != "true" {
			t.Errorf("agent asked without follow=true: %s", r.URL.RawQuery)
		}
		w.Header().Set("Content-Type", "text/plain")
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "line 1\n")
		_ = rc.Flush()
		select {
		case <-next:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "line 2\n")
		_ = rc.Flush()
		// A followed log has no end: it lasts until the request does.
		<-r.Context().Done()
	})
	s.addNode(t, "n1", agent.port(t), internalIP("127.0.0.1"))
	s.addPod(t, "one", "n1", nil, "c")

	// The deadline only turns a stream that never flushes into a failure
	// rather than a hung test; nothing waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := s.get(t, ctx, "admintoken", "/api/v1/namespaces/default/pods/one/log?follow=true")
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("follow: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewReader(resp.Body)
	// The agent is still holding line 2 back: line 1 arrives alone.
	if line, err := lines.ReadString('\n'); err != nil || line != "line 1\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(next)
	if line, err := lines.ReadString('\n'); err != nil || line != "line 2\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
	// The client goes away; the API server's request to the agent ends.
	cancel()
	<-agentDone
}

// With a CA for agents, an agent's serving certificate must chain to it;
// insecureSkipTLSVerifyBackend=true skips that check, as upstream.
func TestPodLogVerifiesAgents(t *testing.T) {
	var agentCA *x509.CertPool // set once the agent runs
	s := startLogServer(t, logServerOptions{kubelet: func(p *auth.PKI) *apiserver.KubeletClientConfig {
		cfg := kubeletClient(p)
		cfg.RootCAs = x509.NewCertPool()
		agentCA = cfg.RootCAs
		return cfg
	}})
	agent := newFakeAgent(t, s.pki, echoAgent)
	s.addNode(t, "n1", agent.port(t), internalIP("127.0.0.1"))
	s.addPod(t, "one", "n1", nil, "c")
	const path = "/api/v1/namespaces/default/pods/one/log"

	// The pool does not hold the agent's CA yet.
	code, _, body := s.getAll(t, "admintoken", path)
	if code != http.StatusInternalServerError || !strings.Contains(body, "certificate") || !strings.Contains(body, `reaching the agent of node \"n1\"`) {
		t.Errorf("unverifiable agent: %d %s; want a 500 about its certificate", code, body)
	}
	if n := len(agent.requests()); n != 0 {
		t.Errorf("an unverified agent was asked %d times", n)
	}
	if code, _, body := s.getAll(t, "admintoken", path+"?insecureSkipTLSVerifyBackend=true"); code != http.StatusOK {
		t.Errorf("insecureSkipTLSVerifyBackend=true: %d %s", code, body)
	}
	// The transport verifies with the pool it was given, so adding the
	// agent's certificate to it lets the next connection through.
	agentCA.AddCert(agent.srv.Certificate())
	if code, _, body := s.getAll(t, "admintoken", path); code != http.StatusOK || body != "log of /containerLogs/default/one/c\n" {
		t.Errorf("verified agent: %d %s", code, body)
	}
}

// A server without a kubelet client checks the request and then answers
// 503; only GET is served.
func TestPodLogWithoutKubeletClient(t *testing.T) {
	s := startLogServer(t, logServerOptions{})
	s.addNode(t, "n1", 10250, internalIP("127.0.0.1"))
	s.addPod(t, "one", "n1", nil, "c")
	code, _, body := s.getAll(t, "admintoken", "/api/v1/namespaces/default/pods/one/log")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no client credentials for node agents") {
		t.Errorf("without a kubelet client: %d %s", code, body)
	}
	if code, _, body := s.getAll(t, "admintoken", "/api/v1/namespaces/default/pods/one/log?container=x"); code != http.StatusBadRequest {
		t.Errorf("a bad container without a kubelet client: %d %s, want 400", code, body)
	}
	for _, method := range []string{http.MethodHead, http.MethodPost, http.MethodDelete} {
		req, _ := http.NewRequest(method, s.url+"/api/v1/namespaces/default/pods/one/log", nil)
		req.Header.Set("Authorization", "Bearer admintoken")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s pods/log: %d, want 405", method, resp.StatusCode)
		}
	}
	if code, _, body := s.getAll(t, "admintoken", "/api/v1/watch/namespaces/default/pods/one/log"); code != http.StatusMethodNotAllowed {
		t.Errorf("watch pods/log: %d %s, want 405", code, body)
	}
}

// Discovery lists pods/log, kind Pod, verb get, in both forms.
func TestPodLogDiscovery(t *testing.T) {
	s := startLogServer(t, logServerOptions{})
	list, err := s.admin.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	var got *metav1.APIResource
	for i, r := range list.APIResources {
		if r.Name == "pods/log" {
			got = &list.APIResources[i]
		}
	}
	want := &metav1.APIResource{Name: "pods/log", Namespaced: true, Kind: "Pod", Verbs: []string{"get"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("legacy discovery of pods/log (-want +got):\n%s", diff)
	}

	req, _ := http.NewRequest("GET", s.url+"/api", nil)
	req.Header.Set("Authorization", "Bearer admintoken")
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var agg struct {
		Items []struct {
			Versions []struct {
				Resources []struct {
					Resource     string
					Subresources []json.RawMessage
				}
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&agg); err != nil {
		t.Fatal(err)
	}
	var sub string
	for _, g := range agg.Items {
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				for _, s := range r.Subresources {
					if r.Resource == "pods" && strings.Contains(string(s), `"subresource":"log"`) {
						sub = string(s)
					}
				}
			}
		}
	}
	if want := `{"subresource":"log","responseKind":{"group":"","version":"v1","kind":"Pod"},"verbs":["get"]}`; sub != want {
		t.Errorf("aggregated discovery of pods/log:\n%s\nwant\n%s", sub, want)
	}
}

// kubectl logs, of the oldest and newest kubectl, reads through pods/log
// with its flags turned into the agent's parameters.
func TestKubectlLogs(t *testing.T) {
	eachKubectl(t, func(t *testing.T, release, bin string) {
		s := startLogServer(t, logServerOptions{kubelet: kubeletClient, anonymousAdmin: true})
		agent := newFakeAgent(t, s.pki, echoAgent)
		s.addNode(t, "n1", agent.port(t), internalIP("127.0.0.1"))
		s.addPod(t, "one", "n1", nil, "c")
		home := t.TempDir()
		kubectl := func(args ...string) (string, error) {
			cmd := exec.Command(bin, append([]string{"--server", s.url, "--cache-dir", filepath.Join(home, "cache"), "-n", "default"}, args...)...)
			cmd.Env = []string{"HOME=" + home, "KUBECONFIG=" + filepath.Join(home, "kubeconfig"), "PATH=/usr/bin:/bin"}
			out, err := cmd.Output()
			return string(out), err
		}
		if out, err := kubectl("logs", "one"); err != nil || out != "log of /containerLogs/default/one/c\n" {
			t.Errorf("kubectl logs one: %v\n%s", err, out)
		}
		if out, err := kubectl("logs", "pod/one", "-c", "c", "--tail=5", "--timestamps", "--limit-bytes=64", "--since=1h", "-f"); err != nil || out != "log of /containerLogs/default/one/c\n" {
			t.Errorf("kubectl logs with flags: %v\n%s", err, out)
		}
		got := agent.requests()
		if len(got) != 2 {
			t.Fatalf("agent requests: %+v", got)
		}
		if want := "follow=true&limitBytes=64&sinceSeconds=3600&tailLines=5&timestamps=true"; got[1].Query != want {
			t.Errorf("kubectl's flags reached the agent as %q, want %q", got[1].Query, want)
		}
	})
}
