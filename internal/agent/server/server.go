// Package server is the node agent's own HTTPS server, the one the kubelet
// serves on --port (10250). It owns the listener, the serving certificate
// and the authentication and authorization of requests to the agent; the
// agent supplies what the endpoints report.
//
// # Endpoints
//
//   - GET/HEAD /healthz answers 200 "ok" to anyone, with or without
//     credentials.
//   - GET/HEAD /metrics serves Config.Gatherer in the Prometheus text
//     exposition format.
//   - GET/HEAD /pods lists Config.Pods as a v1 PodList.
//   - GET /containerLogs/<namespace>/<pod>/<container> serves a container's
//     log from Config.Logs, with the kubelet's follow, previous, tailLines
//     and limitBytes; timestamps, sinceSeconds and sinceTime are refused
//     (400), since the process runtime's log files keep no time per line.
//   - GET or POST /exec/<namespace>/<pod>[/<uid>]/<container>, /attach/...
//     and /portForward/<namespace>/<pod>[/<uid>] upgrade to the streaming
//     protocols (SPDY or WebSocket, see internal/agent/streaming) and
//     reach the container through Config.Streams; POST /run/... runs the
//     cmd parameter and answers with its output. A pod the agent does not
//     run, or a container the pod lacks, is 404.
//
// # Authentication and authorization
//
// Every request but reading /healthz must present a client certificate
// that chains to Config.ClientCA and is valid for client authentication at
// Config.Clock's now; its common name is the user and its organizations the
// groups. Without one (or without ClientCA) the answer is 401. The TLS
// handshake only asks for the certificate; auth.X509Authenticator verifies
// it on every request, so that a wrong one gets a 401 Status, as the kubelet
// answers, rather than a failed handshake.
//
// An authenticated user is then authorized by (user, verb, path), verb being
// get for GET and HEAD, create for POST, update, patch and delete for PUT,
// PATCH and DELETE:
//
//   - members of system:masters may do anything;
//   - the node's own identity, system:node:<Config.NodeName> in group
//     system:nodes, may get /metrics;
//   - everyone else is refused with 403, other nodes included.
//
// Authorization comes before routing, as in the kubelet: an authorized user
// asking for a path that does not exist gets 404, and one using a method
// other than GET or HEAD on /metrics gets 405; an unauthorized user gets 403
// either way. Refusals are JSON metav1.Status objects, as the API server
// sends them.
//
// # Not here
//
// The kubelet's /logs (the node's log files), /stats and /checkpoint are
// not served. There is no webhook authentication or authorization (the kubelet's
// --authentication-token-webhook and --authorization-mode=Webhook), so bearer
// tokens are not accepted. The serving certificate is read once, in New: a
// renewed TLSCertFile takes effect at the next start.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"knode/internal/auth"
)

// Defaults the caller applies; Config's zero values do not mean these.
const (
	// DefaultPort is the kubelet's --port.
	DefaultPort = 10250
	// DefaultAddress is the kubelet's --address, what an empty
	// Config.Address means.
	DefaultAddress = "0.0.0.0"
)

// Timeouts of the HTTP server. They are protocol limits enforced by
// net/http on the real clock, not waits of the agent.
const (
	readHeaderTimeout = 30 * time.Second
	// shutdownGrace is how long Run waits for requests in flight once its
	// context ends before closing their connections.
	shutdownGrace = 5 * time.Second
)

// Config configures a Server.
type Config struct {
	// Address is the IP address to listen on; "" means DefaultAddress.
	Address string
	// Port is the TCP port; 0 picks a free one (see Server.Port). Callers
	// that want the kubelet's port set DefaultPort.
	Port int
	// NodeName is the node this agent runs. Required. Its identity,
	// system:node:<NodeName>, may read /metrics; it is also a name in the
	// self-signed certificate.
	NodeName string
	// TLSCertFile and TLSKeyFile are the serving certificate (with any
	// intermediates) and its key, in PEM (the kubelet's --tls-cert-file and
	// --tls-private-key-file). Both or neither.
	TLSCertFile, TLSKeyFile string
	// CertDir holds a self-signed serving pair, CertFile and KeyFile, used
	// when TLSCertFile is not set; the kubelet's is <root-dir>/pki. Required
	// then, and created (0700) if missing. The pair is generated on the
	// first start and kept while valid; see SelfSignedRenewBefore.
	CertDir string
	// IPs are extra IP addresses for the self-signed certificate, beyond
	// 127.0.0.1 and ::1.
	IPs []net.IP
	// ClientCA is PEM holding the CAs whose client certificates are
	// accepted (the kubelet's --client-ca-file). Without it every request
	// but reading /healthz is refused with 401.
	ClientCA []byte
	// Gatherer is what /metrics serves; nil serves no metrics.
	Gatherer prometheus.Gatherer
	// Logs finds containers' logs for /containerLogs; nil answers 404.
	Logs LogSource
	// Pods lists the pods the agent runs, for /pods and to find the pod of
	// an exec, attach or port-forward; nil lists none.
	Pods func() []*corev1.Pod
	// Streams serves /exec, /attach, /run and /portForward; nil answers
	// them 404.
	Streams *Streams
	// FollowPeriod is how often a followed log is read again; zero means
	// DefaultFollowPeriod.
	FollowPeriod time.Duration
	// Clock judges and stamps certificates and paces followed logs. Nil
	// means the real clock.
	Clock clock.WithTicker
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// validate checks cfg and fills in its defaults.
func (c *Config) validate() error {
	var errs field.ErrorList
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if net.ParseIP(c.Address) == nil {
		errs = append(errs, field.Invalid(field.NewPath("address"), c.Address, "must be an IP address"))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, field.Invalid(field.NewPath("port"), c.Port, "must be between 0 and 65535"))
	}
	if c.NodeName == "" {
		errs = append(errs, field.Required(field.NewPath("nodeName"), "the node this agent runs"))
	} else if msgs := validation.IsDNS1123Subdomain(c.NodeName); len(msgs) > 0 {
		errs = append(errs, field.Invalid(field.NewPath("nodeName"), c.NodeName, "must be a node name: "+msgs[0]))
	}
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		errs = append(errs, field.Invalid(field.NewPath("tlsCertFile"), c.TLSCertFile, "tlsCertFile and tlsKeyFile must be set together"))
	case c.TLSCertFile == "" && c.CertDir == "":
		errs = append(errs, field.Required(field.NewPath("certDir"), "where the self-signed serving certificate is kept when tlsCertFile is not set"))
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	if c.Gatherer == nil {
		c.Gatherer = prometheus.NewRegistry()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.FollowPeriod <= 0 {
		c.FollowPeriod = DefaultFollowPeriod
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Server is the agent's HTTPS server. New listens; Run serves.
type Server struct {
	cfg     Config
	log     *slog.Logger
	authn   auth.Authenticator
	metrics http.Handler
	ln      net.Listener
	http    *http.Server
	started atomic.Bool
	// serving is the certificate served; SetServingCertificate replaces it.
	serving atomic.Pointer[tls.Certificate]
}

// New validates cfg, loads or generates the serving certificate, and
// listens, so that Port is known when it returns. The caller must call Run,
// or Close to give the port back.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("agent server: %w", err)
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "agent-server"),
		metrics: promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}),
	}
	x509Config := auth.X509Config{Clock: cfg.Clock}
	if len(cfg.ClientCA) > 0 {
		pool, err := parseClientCA(cfg.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("agent server: clientCA: %w", err)
		}
		x509Config.Roots = pool
	}
	s.authn = auth.NewX509Authenticator(x509Config)

	serving, err := s.servingCertificate()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(cfg.Address, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agent server: listening on %s: %w", addr, err)
	}
	s.ln = ln
	s.serving.Store(&serving)
	s.http = &http.Server{
		Handler: s,
		TLSConfig: &tls.Config{
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.serving.Load(), nil },
			// Ask for a client certificate but leave verifying it to the
			// authenticator, which answers a bad one with a 401.
			ClientAuth: tls.RequestClientCert,
			MinVersion: tls.VersionTLS12,
			NextProtos: []string{"h2", "http/1.1"},
			Time:       cfg.Clock.Now,
		},
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return s, nil
}

// servingCertificate loads TLSCertFile and TLSKeyFile, or the self-signed
// pair in CertDir, generating it when needed.
func (s *Server) servingCertificate() (tls.Certificate, error) {
	cfg := s.cfg
	if cfg.TLSCertFile != "" {
		pair, err := loadPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("agent server: tlsCertFile %s, tlsKeyFile %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
		}
		if now := cfg.Clock.Now(); now.After(pair.Leaf.NotAfter) {
			s.log.Warn("serving certificate has expired", "file", cfg.TLSCertFile, "notAfter", pair.Leaf.NotAfter)
		}
		return pair, nil
	}
	hostname, err := os.Hostname()
	if err != nil {
		s.log.Warn("hostname unknown; left out of the self-signed certificate", "err", err)
	}
	pair, why, err := ensureSelfSigned(cfg.CertDir, cfg.NodeName, wantedNames(cfg.NodeName, hostname, cfg.IPs), cfg.Clock.Now())
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("agent server: self-signed certificate: %w", err)
	}
	if why != "" {
		s.log.Info("generated a self-signed serving certificate", "dir", cfg.CertDir, "reason", why, "notAfter", pair.Leaf.NotAfter)
	}
	return pair, nil
}

// SetServingCertificate serves pair from the next TLS handshake on: a
// certificate the cluster CA signed once the agent's request for one was
// approved (Bootstrap), in place of the self-signed one it started with.
func (s *Server) SetServingCertificate(pair tls.Certificate) {
	s.serving.Store(&pair)
}

// Port returns the port the server listens on.
func (s *Server) Port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// Addr returns the address the server listens on, host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Handler returns what serves each request. It expects r.TLS to carry the
// client's certificates; without them only /healthz answers 200.
func (s *Server) Handler() http.Handler { return s }

// Run serves until ctx ends, then stops accepting connections and waits up
// to a few seconds for requests in flight before closing them. It returns
// nil after such a shutdown, or the error that stopped serving. It may be
// called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("agent server: Run called twice")
	}
	s.log.Info("serving", "addr", s.Addr(), "node", s.cfg.NodeName)
	served := make(chan error, 1)
	go func() { served <- s.http.ServeTLS(s.ln, "", "") }()
	select {
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("agent server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := s.http.Shutdown(shutdownCtx); err != nil {
		s.log.Warn("requests still in flight at shutdown; closing their connections", "err", err)
		_ = s.http.Close()
	}
	<-served
	return nil
}

// Close stops listening and closes every connection at once. A Run in
// progress returns nil; a later Run returns at once.
func (s *Server) Close() error {
	err := s.http.Close()
	if lnErr := s.ln.Close(); lnErr != nil && !errors.Is(lnErr, net.ErrClosed) && err == nil {
		err = lnErr
	}
	return err
}

// ServeHTTP answers one request: health, then authentication,
// authorization, and routing.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if public(r.Method, path) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = io.WriteString(w, "ok")
		return
	}
	user, ok, err := s.authn.Authenticate(r)
	if err != nil || !ok {
		s.log.Debug("unauthenticated request", "method", r.Method, "path", path, "remote", r.RemoteAddr, "err", err)
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized")
		return
	}
	v := verb(r.Method)
	if !allowed(user, s.cfg.NodeName, v, path) {
		msg := fmt.Sprintf("User %q cannot %s path %q on node %q", user.Name, v, path, s.cfg.NodeName)
		s.log.Debug("forbidden", "user", user.Name, "groups", user.Groups, "verb", v, "path", path)
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden, msg)
		return
	}
	switch {
	case strings.HasPrefix(path, containerLogsPrefix):
		s.serveContainerLogs(w, r)
	case path == podsPath:
		s.servePods(w, r)
	case isStreamPath(path):
		s.serveStream(w, r)
	case path == metricsPath:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
				fmt.Sprintf("method %s is not allowed on path %q; use GET or HEAD", r.Method, path))
			return
		}
		s.metrics.ServeHTTP(w, r)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("path %q not found on node %q", path, s.cfg.NodeName))
	}
}

// writeStatus writes a failure as the API server does: a v1 Status in JSON.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code),
	}
	body, err := json.Marshal(st)
	if err != nil {
		http.Error(w, message, code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(append(body, '\n'))
}
