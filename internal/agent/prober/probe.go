package prober

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"knode/internal/version"
)

// ErrExecTimedOut is what an ExecRunner wraps when a command outlived its
// timeout (the CRI client's "command timed out"). The probe then fails
// with the error's text as its output.
var ErrExecTimedOut = errors.New("command timed out")

// ExecRunner runs a command in a running container: the runtime.
type ExecRunner interface {
	// ExecSync runs cmd in the container named container of pod, whose
	// current run has ID containerID, and waits for it. output is its
	// stdout followed by its stderr; exitCode is meaningful when err is
	// nil. A command still running after timeout must be killed and
	// reported as an error wrapping ErrExecTimedOut (or ctx's
	// context.DeadlineExceeded: ctx expires after timeout too). Any
	// other error means the command could not be run at all.
	ExecSync(ctx context.Context, pod *corev1.Pod, container, containerID string, cmd []string, timeout time.Duration) (output []byte, exitCode int, err error)
}

// DialFunc opens a connection; net.Dialer.DialContext is one.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

const (
	// maxOutput is how much of an HTTP body or exec output a probe reads.
	maxOutput = 10 << 10
	// maxAttempts is how often a probe that errored is tried within one
	// period (upstream's maxProbeRetries).
	maxAttempts = 3
)

// userAgent is the User-Agent of HTTP and gRPC probes.
var userAgent = fmt.Sprintf("kube-probe/%s.%s", version.KubernetesMajor, version.KubernetesMinor)

// verdict is one attempt's raw result, upstream's probe.Result.
type verdict int

const (
	verdictUnknown verdict = iota
	verdictSuccess
	// verdictWarning is a success worth an event: an HTTP redirect to
	// another host, which the probe does not follow.
	verdictWarning
	verdictFailure
)

// String is upstream's spelling, used in "resulted in unknown state".
func (v verdict) String() string {
	return [...]string{"unknown", "success", "warning", "failure"}[v]
}

// attempt is what one probe found. err set means the probe could not be
// run (a bad port name, an exec the runtime refused): the attempt says
// nothing about the container and does not count.
type attempt struct {
	verdict verdict
	output  string
	err     error
}

// target is what a probe needs, captured when it is launched.
type target struct {
	pod         *corev1.Pod
	container   *corev1.Container
	containerID string
	podIP       string
	kind        Kind
	probe       *corev1.Probe
	timeout     time.Duration
}

// runner runs probes over the network and through the runtime.
type runner struct {
	exec      ExecRunner
	dial      DialFunc
	transport http.RoundTripper
}

// probeDialer is upstream's probe dialer: SO_LINGER of one second, so
// that the many short probe connections end in a reset instead of
// piling up in TIME_WAIT.
func probeDialer() DialFunc {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptLinger(int(fd), unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 1})
		})
		return errors.Join(err, serr)
	}}
	return d.DialContext
}

// probeTransport is upstream's HTTP probe transport: no proxy, no
// keep-alives, no compression, and no certificate verification (probes
// reach pod IPs, which no certificate names).
func probeTransport(dial DialFunc) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
	}
}

// probe runs t, trying again (up to maxAttempts in all) while it errors.
func (r *runner) probe(ctx context.Context, t target) attempt {
	var a attempt
	for range maxAttempts {
		if a = r.once(ctx, t); a.err == nil || ctx.Err() != nil {
			break
		}
	}
	return a
}

func (r *runner) once(ctx context.Context, t target) attempt {
	h := &t.probe.ProbeHandler
	switch {
	case h.Exec != nil:
		return r.execProbe(ctx, t)
	case h.HTTPGet != nil:
		return r.httpProbe(ctx, t)
	case h.TCPSocket != nil:
		return r.tcpProbe(ctx, t)
	case h.GRPC != nil:
		return r.grpcProbe(ctx, t)
	}
	return attempt{err: fmt.Errorf("missing probe handler for %s_%s(%s):%s", t.pod.Name, t.pod.Namespace, t.pod.UID, t.container.Name)}
}

func (r *runner) execProbe(ctx context.Context, t target) attempt {
	if r.exec == nil {
		return attempt{err: errors.New("exec probes are not supported: the agent has no exec runner")}
	}
	cmd := expandStatic(t.probe.Exec.Command, t.container.Env)
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out, code, err := r.exec.ExecSync(ctx, t.pod, t.container.Name, t.containerID, cmd, t.timeout)
	if len(out) > maxOutput {
		out = out[:maxOutput]
	}
	switch {
	case errors.Is(err, ErrExecTimedOut):
		return attempt{verdict: verdictFailure, output: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return attempt{verdict: verdictFailure, output: fmt.Sprintf("%v: %q timed out after %s", ErrExecTimedOut, strings.Join(cmd, " "), t.timeout)}
	case err != nil:
		return attempt{err: err}
	case code != 0:
		return attempt{verdict: verdictFailure, output: string(out)}
	}
	return attempt{verdict: verdictSuccess, output: string(out)}
}

func (r *runner) httpProbe(ctx context.Context, t target) attempt {
	req, err := httpRequest(ctx, t.probe.HTTPGet, t.container, t.podIP)
	if err != nil {
		return attempt{err: err}
	}
	client := &http.Client{Transport: r.transport, Timeout: t.timeout, CheckRedirect: sameHostRedirects}
	res, err := client.Do(req)
	if err != nil {
		// A refused connection or a timeout is the container's failure.
		return attempt{verdict: verdictFailure, output: err.Error()}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxOutput))
	if err != nil {
		return attempt{verdict: verdictFailure, err: err}
	}
	switch code := res.StatusCode; {
	case code >= 200 && code < 300:
		return attempt{verdict: verdictSuccess, output: string(b)}
	case code >= 300 && code < 400:
		return attempt{verdict: verdictWarning, output: "Probe terminated redirects, Response body: " + string(b)}
	default:
		// As upstream, the body stays out of the user-facing message.
		return attempt{verdict: verdictFailure, output: fmt.Sprintf("HTTP probe failed with statuscode: %d", code)}
	}
}

// httpRequest is the GET an httpGet probe sends: to host (the pod IP by
// default) and the resolved port, with the probe's headers, a kube-probe
// User-Agent and Accept */* unless the probe sets them (an empty Accept
// removes it), and the Host header as the request's host.
func httpRequest(ctx context.Context, g *corev1.HTTPGetAction, c *corev1.Container, podIP string) (*http.Request, error) {
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return nil, err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	host := g.Host
	if host == "" {
		host = podIP
	}
	u, err := url.Parse(g.Path)
	if err != nil {
		// A path that is not a URL is sent as it is, as upstream does.
		u = &url.URL{Path: g.Path}
	}
	u.Scheme, u.Host = scheme, net.JoinHostPort(host, strconv.Itoa(port))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	header := make(http.Header)
	for _, h := range g.HTTPHeaders {
		header.Add(h.Name, h.Value)
	}
	if _, ok := header["User-Agent"]; !ok {
		header.Set("User-Agent", userAgent)
	}
	if _, ok := header["Accept"]; !ok {
		header.Set("Accept", "*/*")
	} else if header.Get("Accept") == "" {
		header.Del("Accept")
	}
	req.Header = header
	req.Host = header.Get("Host")
	return req, nil
}

// sameHostRedirects follows redirects to the same host name only, up to
// 10; a redirect elsewhere ends the probe with the redirect response.
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

func (r *runner) tcpProbe(ctx context.Context, t target) attempt {
	s := t.probe.TCPSocket
	port, err := resolvePort(s.Port, t.container)
	if err != nil {
		return attempt{err: err}
	}
	host := s.Host
	if host == "" {
		host = t.podIP
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	conn, err := r.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return attempt{verdict: verdictFailure, output: err.Error()}
	}
	_ = conn.Close()
	return attempt{verdict: verdictSuccess}
}

func (r *runner) grpcProbe(ctx context.Context, t target) attempt {
	g := t.probe.GRPC
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	addr := net.JoinHostPort(t.podIP, strconv.Itoa(int(g.Port)))
	failed := func(format string, args ...any) attempt {
		return attempt{verdict: verdictFailure, output: fmt.Sprintf(format, args...)}
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithUserAgent(userAgent),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return r.dial(ctx, "tcp", a) }),
	)
	if err != nil {
		return failed("error: failed to connect service at %q: %+v", addr, err)
	}
	defer func() { _ = conn.Close() }()
	// As upstream's blocking dial: keep connecting until the timeout.
	if err := awaitReady(ctx, conn); err != nil {
		return failed("timeout: failed to connect service %q within %v: %+v", addr, t.timeout, err)
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch st, _ := status.FromError(err); st.Code() {
		case codes.Unimplemented:
			return failed("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
		case codes.DeadlineExceeded:
			return failed("timeout: health rpc did not complete within %v", t.timeout)
		}
		return failed("error: health rpc probe failed: %+v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return failed("service unhealthy (responded with %q)", resp.GetStatus().String())
	}
	return attempt{verdict: verdictSuccess, output: "service healthy"}
}

// awaitReady waits until conn is connected, or ctx ends.
func awaitReady(ctx context.Context, conn *grpc.ClientConn) error {
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			return ctx.Err()
		}
	}
}

// resolvePort is the port number param names: a number, the name of one
// of c's ports, or a number written as a string.
func resolvePort(param intstr.IntOrString, c *corev1.Container) (int, error) {
	var port int
	switch param.Type {
	case intstr.Int:
		port = param.IntValue()
	case intstr.String:
		found := false
		for _, p := range c.Ports {
			if p.Name == param.StrVal {
				port, found = int(p.ContainerPort), true
				break
			}
		}
		if !found {
			// Upstream's last resort, and its error.
			n, err := strconv.Atoi(param.StrVal)
			if err != nil {
				return 0, err
			}
			port = n
		}
	default:
		return 0, fmt.Errorf("intOrString had no kind: %+v", param)
	}
	if port <= 0 || port >= 65536 {
		return 0, fmt.Errorf("invalid port number: %v", port)
	}
	return port, nil
}

// expandStatic expands $(VAR) in an exec probe's command with the values
// the container's env gives literally, as upstream does for probes: a
// variable set by valueFrom expands to "", an unknown or unterminated
// reference stays as written, and $$ is a literal $.
func expandStatic(cmd []string, env []corev1.EnvVar) []string {
	vars := make(map[string]string, len(env))
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	out := make([]string, len(cmd))
	for i, word := range cmd {
		var b strings.Builder
		for j := 0; j < len(word); j++ {
			if word[j] != '$' || j+1 == len(word) {
				b.WriteByte(word[j])
				continue
			}
			switch next := word[j+1]; {
			case next == '$':
				b.WriteByte('$')
				j++
			case next == '(':
				end := strings.IndexByte(word[j+2:], ')')
				if end < 0 {
					b.WriteString("$(")
					j++
					continue
				}
				name := word[j+2 : j+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString("$(" + name + ")")
				}
				j += 2 + end
			default:
				b.WriteByte('$')
			}
		}
		out[i] = b.String()
	}
	return out
}
