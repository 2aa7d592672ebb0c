package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func testRunner(exec ExecRunner) *runner {
	dial := probeDialer()
	return &runner{exec: exec, dial: dial, transport: probeTransport(dial)}
}

// hostPort splits a test server's URL.
func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), port
}

// closedPort is a port on 127.0.0.1 that nothing listens on (it did a
// moment ago).
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

func TestHTTPProbe(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "fine") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "secret details")
	})
	mux.HandleFunc("/notfound", http.NotFound)
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, strings.Repeat("x", 20<<10)) })
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ua=%s accept=%q host=%s x=%s q=%s", r.UserAgent(), r.Header.Values("Accept"), r.Host, r.Header.Get("X-Custom"), r.URL.RawQuery)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	host, port := hostPort(t, srv.URL)
	// A redirect to another host name (localhost, not 127.0.0.1) is not followed.
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/ok", port), http.StatusFound)
	})
	tlsSrv := httptest.NewTLSServer(mux)
	t.Cleanup(tlsSrv.Close)
	_, tlsPort := hostPort(t, tlsSrv.URL)
	dead := closedPort(t)

	container := &corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	get := func(path string, port intstr.IntOrString) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: port}}}
	}
	p := intstr.FromInt32(int32(port))
	tests := []struct {
		name        string
		probe       *corev1.Probe
		want        verdict
		wantOutput  string
		wantPrefix  bool
		wantErrText string
	}{
		{"200", get("/ok", p), verdictSuccess, "fine", false, ""},
		{"500 hides the body", get("/fail", p), verdictFailure, "HTTP probe failed with statuscode: 500", false, ""},
		{"404", get("/notfound", p), verdictFailure, "HTTP probe failed with statuscode: 404", false, ""},
		{"port by name", get("/ok", intstr.FromString("web")), verdictSuccess, "fine", false, ""},
		{"same-host redirect is followed", get("/same", p), verdictSuccess, "fine", false, ""},
		{"redirect to another host is a warning", get("/other", p), verdictWarning,
			"Probe terminated redirects, Response body: <a href=\"http://localhost:" + strconv.Itoa(port) + "/ok\">Found</a>.\n\n", false, ""},
		{"redirect loop stops after 10", get("/loop", p), verdictFailure,
			`Get "/loop": stopped after 10 redirects`, false, ""},
		{"body read up to 10 KiB", get("/big", p), verdictSuccess, strings.Repeat("x", 10<<10), false, ""},
		{"default headers", get("/echo?a=b", p), verdictSuccess,
			fmt.Sprintf(`ua=kube-probe/1.33 accept=["*/*"] host=127.0.0.1:%d x= q=a=b`, port), false, ""},
		{"probe headers", &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/echo", Port: p, HTTPHeaders: []corev1.HTTPHeader{
				{Name: "user-agent", Value: "mine"}, {Name: "Accept", Value: ""}, {Name: "Host", Value: "example.test"}, {Name: "X-Custom", Value: "1"},
			}}}}, verdictSuccess, `ua=mine accept=[] host=example.test x=1 q=`, false, ""},
		{"https without verification", &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/ok", Port: intstr.FromInt32(int32(tlsPort)), Scheme: corev1.URISchemeHTTPS}}}, verdictSuccess, "fine", false, ""},
		{"connection refused", get("/ok", intstr.FromInt32(int32(dead))), verdictFailure,
			fmt.Sprintf(`Get "http://127.0.0.1:%d/ok": dial tcp 127.0.0.1:%d: connect: connection refused`, dead, dead), false, ""},
		{"unknown port name errors", get("/ok", intstr.FromString("nope")), verdictUnknown, "", false, `strconv.Atoi: parsing "nope": invalid syntax`},
	}
	r := testRunner(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := r.probe(context.Background(), target{pod: &corev1.Pod{}, container: container, podIP: host, probe: tt.probe, timeout: 5 * time.Second})
			errText := ""
			if a.err != nil {
				errText = a.err.Error()
			}
			if a.verdict != tt.want || a.output != tt.wantOutput || errText != tt.wantErrText {
				t.Errorf("got %v %q err %q\nwant %v %q err %q", a.verdict, a.output, errText, tt.want, tt.wantOutput, tt.wantErrText)
			}
		})
	}
}

func TestHTTPProbeTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	host, port := hostPort(t, srv.URL)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(port))}}}
	a := testRunner(nil).probe(context.Background(), target{pod: &corev1.Pod{}, container: &corev1.Container{}, podIP: host, probe: probe, timeout: 100 * time.Millisecond})
	want := fmt.Sprintf(`Get "http://127.0.0.1:%d/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`, port)
	if a.verdict != verdictFailure || a.output != want || a.err != nil {
		t.Errorf("got %v %q %v, want failure %q", a.verdict, a.output, a.err, want)
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	open := l.Addr().(*net.TCPAddr).Port
	dead := closedPort(t)
	tcp := func(host string, port int) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: host, Port: intstr.FromInt32(int32(port))}}}
	}
	tests := []struct {
		name   string
		podIP  string
		probe  *corev1.Probe
		want   verdict
		output string
	}{
		{"listening", "127.0.0.1", tcp("", open), verdictSuccess, ""},
		{"host overrides the pod IP", "192.0.2.1", tcp("127.0.0.1", open), verdictSuccess, ""},
		{"closed port", "127.0.0.1", tcp("", dead), verdictFailure, fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", dead)},
	}
	r := testRunner(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := r.probe(context.Background(), target{pod: &corev1.Pod{}, container: &corev1.Container{}, podIP: tt.podIP, probe: tt.probe, timeout: 5 * time.Second})
			if a.verdict != tt.want || a.output != tt.output || a.err != nil {
				t.Errorf("got %v %q %v, want %v %q", a.verdict, a.output, a.err, tt.want, tt.output)
			}
		})
	}
}

// grpcServer serves grpc.health.v1 on 127.0.0.1 (or nothing, when
// withHealth is false) and returns its port.
func grpcServer(t *testing.T, withHealth bool) (*health.Server, int) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	if withHealth {
		healthpb.RegisterHealthServer(s, hs)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return hs, l.Addr().(*net.TCPAddr).Port
}

func TestGRPCProbe(t *testing.T) {
	hs, port := grpcServer(t, true)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	_, bare := grpcServer(t, false)
	dead := closedPort(t)
	g := func(port int, service *string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: int32(port), Service: service}}}
	}
	tests := []struct {
		name   string
		probe  *corev1.Probe
		want   verdict
		output string
	}{
		{"serving", g(port, nil), verdictSuccess, "service healthy"},
		{"named service serving", g(port, ptr.To("")), verdictSuccess, "service healthy"},
		{"not serving", g(port, ptr.To("down")), verdictFailure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", g(port, ptr.To("nope")), verdictFailure, "error: health rpc probe failed: rpc error: code = NotFound desc = unknown service"},
		{"no health service", g(bare, nil), verdictFailure,
			"error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"},
		{"nothing listening", g(dead, nil), verdictFailure,
			fmt.Sprintf(`timeout: failed to connect service "127.0.0.1:%d" within 200ms: context deadline exceeded`, dead)},
	}
	r := testRunner(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			timeout := 5 * time.Second
			if tt.name == "nothing listening" {
				timeout = 200 * time.Millisecond
			}
			a := r.probe(context.Background(), target{pod: &corev1.Pod{}, container: &corev1.Container{}, podIP: "127.0.0.1", probe: tt.probe, timeout: timeout})
			if a.verdict != tt.want || a.output != tt.output || a.err != nil {
				t.Errorf("got %v %q %v\nwant %v %q", a.verdict, a.output, a.err, tt.want, tt.output)
			}
		})
	}
	// The health server's answer changes are seen by the next probe.
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if a := r.probe(context.Background(), target{pod: &corev1.Pod{}, container: &corev1.Container{}, podIP: "127.0.0.1", probe: g(port, nil), timeout: 5 * time.Second}); a.verdict != verdictFailure {
		t.Errorf("after NOT_SERVING: %v %q", a.verdict, a.output)
	}
}

// shRunner runs exec probes as local processes with sh: the test's
// stand-in for a runtime. It reports what it was asked.
type shRunner struct {
	calls chan []string
	err   error
}

func (s *shRunner) ExecSync(ctx context.Context, pod *corev1.Pod, container, containerID string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	if s.calls != nil {
		s.calls <- append([]string{container, containerID, timeout.String()}, cmd...)
	}
	if s.err != nil {
		return nil, 0, s.err
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	// sh's children may hold the output open after sh was killed.
	c.WaitDelay = 50 * time.Millisecond
	out, err := c.CombinedOutput()
	if ctx.Err() != nil {
		return out, 0, ctx.Err()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out, exit.ExitCode(), nil
	}
	return out, 0, err
}

func TestExecProbe(t *testing.T) {
	sh := func(script string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", script}}}}
	}
	container := &corev1.Container{Name: "app", Env: []corev1.EnvVar{{Name: "WORD", Value: "hello"}}}
	tests := []struct {
		name    string
		probe   *corev1.Probe
		timeout time.Duration
		want    verdict
		output  string
	}{
		{"exit 0", sh("echo ok"), time.Second, verdictSuccess, "ok\n"},
		{"exit 1 with output", sh("echo broken >&2; exit 1"), time.Second, verdictFailure, "broken\n"},
		{"env expansion", sh("echo $(WORD)"), time.Second, verdictSuccess, "hello\n"},
		{"output is cut at 10 KiB", sh("head -c 20000 /dev/zero | tr '\\0' y"), time.Second, verdictSuccess, strings.Repeat("y", 10<<10)},
		{"timeout", sh("sleep 5"), 100 * time.Millisecond, verdictFailure, `command timed out: "sh -c sleep 5" timed out after 100ms`},
	}
	r := testRunner(&shRunner{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := r.probe(context.Background(), target{pod: &corev1.Pod{}, container: container, containerID: "id", probe: tt.probe, timeout: tt.timeout})
			if a.verdict != tt.want || a.output != tt.output || a.err != nil {
				t.Errorf("got %v %q %v\nwant %v %q", a.verdict, a.output, a.err, tt.want, tt.output)
			}
		})
	}
}

func TestExecProbeRunnerErrors(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	tests := []struct {
		name    string
		err     error
		want    verdict
		output  string
		errText string
		calls   int
	}{
		{"the runtime's timeout error", fmt.Errorf("%w: %q timed out after 1s", ErrExecTimedOut, "true"), verdictFailure, `command timed out: "true" timed out after 1s`, "", 1},
		{"any other error is tried three times and errors", errors.New("container not found"), verdictUnknown, "", "container not found", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := make(chan []string, 10)
			r := testRunner(&shRunner{calls: calls, err: tt.err})
			a := r.probe(context.Background(), target{pod: &corev1.Pod{}, container: &corev1.Container{Name: "app"}, containerID: "cid", probe: probe, timeout: time.Second})
			errText := ""
			if a.err != nil {
				errText = a.err.Error()
			}
			if a.verdict != tt.want || a.output != tt.output || errText != tt.errText {
				t.Errorf("got %v %q %q, want %v %q %q", a.verdict, a.output, errText, tt.want, tt.output, tt.errText)
			}
			if len(calls) != tt.calls {
				t.Errorf("%d calls, want %d", len(calls), tt.calls)
			}
			if got := strings.Join(<-calls, " "); got != "app cid 1s true" {
				t.Errorf("call = %q, want container, ID, timeout and command", got)
			}
		})
	}
	// Without an exec runner, exec probes error.
	a := testRunner(nil).probe(context.Background(), target{pod: &corev1.Pod{}, container: &corev1.Container{}, probe: probe, timeout: time.Second})
	if a.err == nil {
		t.Errorf("no exec runner: got %v %q, want an error", a.verdict, a.output)
	}
}

func TestMissingHandler(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
	a := testRunner(nil).probe(context.Background(), target{pod: pod, container: &corev1.Container{Name: "app"}, probe: &corev1.Probe{}, timeout: time.Second})
	if a.err == nil || a.err.Error() != "missing probe handler for web_default(u1):app" {
		t.Errorf("got %v %q %v", a.verdict, a.output, a.err)
	}
}
