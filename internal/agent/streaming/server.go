package streaming

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	rcproto "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/clock"
)

// Defaults for a zero Config, the kubelet's.
const (
	// DefaultStreamIdleTimeout is the kubelet's
	// --streaming-connection-idle-timeout default.
	DefaultStreamIdleTimeout = 4 * time.Hour
	// DefaultStreamCreationTimeout is how long upstream waits for a client
	// to open the streams it asked for.
	DefaultStreamCreationTimeout = rcproto.DefaultStreamCreationTimeout
)

// Config configures a Server.
type Config struct {
	// StreamIdleTimeout is how long an upgraded connection may carry no
	// traffic before it is closed; zero means DefaultStreamIdleTimeout. It
	// is enforced by the SPDY and WebSocket libraries on the real clock.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout is how long a SPDY client has, after the
	// upgrade, to open the streams of an exec or attach (all of them) or of
	// one forwarded connection (its data and error streams); zero means
	// DefaultStreamCreationTimeout. It is measured on Clock.
	StreamCreationTimeout time.Duration
	// Clock measures StreamCreationTimeout; nil means the real clock.
	Clock clock.Clock
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// validate checks c and fills in its defaults.
func (c *Config) validate() error {
	var errs field.ErrorList
	if c.StreamIdleTimeout < 0 {
		errs = append(errs, field.Invalid(field.NewPath("streamIdleTimeout"), c.StreamIdleTimeout.String(), "must not be negative"))
	}
	if c.StreamCreationTimeout < 0 {
		errs = append(errs, field.Invalid(field.NewPath("streamCreationTimeout"), c.StreamCreationTimeout.String(), "must not be negative"))
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.StreamCreationTimeout == 0 {
		c.StreamCreationTimeout = DefaultStreamCreationTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Server serves exec, attach and port-forward requests. It holds no state
// between requests; one Server may serve any number at once.
type Server struct {
	cfg Config
	log *slog.Logger
}

// New validates cfg and returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("streaming: %w", err)
	}
	return &Server{cfg: cfg, log: cfg.Logger.With("component", "streaming")}, nil
}

// Target names the container (for exec and attach) or the pod (for
// port-forward, Container empty) a request is for. It is passed to the
// Executor or PortForwarder as given and used in messages.
type Target struct {
	Namespace, Pod string
	UID            types.UID
	Container      string
}

// podFullName is how the kubelet names a pod in port-forward errors.
func (t Target) podFullName() string { return t.Pod + "_" + t.Namespace }

// Streams are what the client asked for; a nil field was not asked for.
// They are valid until Exec or Attach returns, and the Executor must not
// use them afterwards.
type Streams struct {
	// Stdin reports io.EOF when the client closes its input.
	Stdin io.Reader
	// Stdout and Stderr are closed by the server after Exec or Attach
	// returns; Stderr is nil with a TTY, whose output is all on Stdout.
	Stdout io.Writer
	Stderr io.Writer
	// TTY says the client wants a terminal.
	TTY bool
	// Resize carries the client's terminal sizes, with a TTY and a
	// protocol that resizes (v3 and later); it is closed when the client
	// stops sending them or the request ends. Sizes not received are
	// dropped when the request ends; nothing waits for them.
	Resize <-chan remotecommand.TerminalSize
}

// Executor runs commands in containers. Both methods block until the
// command (or the attachment) ends; ctx ends when the client goes away.
type Executor interface {
	// Exec runs cmd in t's container. An error that is (or wraps) an
	// ExitError reaches the client as the command's exit code; any other
	// error as a failure with its message.
	Exec(ctx context.Context, t Target, cmd []string, s Streams) error
	// Attach attaches s to the main process of t's container. Any error
	// reaches the client as a failure with its message (as upstream, attach
	// reports no exit codes).
	Attach(ctx context.Context, t Target, s Streams) error
}

// ExitError is a command's non-zero exit, Code being 1 to 255.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// PortForwarder connects forwarded connections to ports in pods' network.
type PortForwarder interface {
	// PortForward copies between stream and port in t's pod until both
	// directions are done (or ctx ends, or stream fails), then returns. It
	// must not close stream: the server does, after it returns. A returned
	// error is sent to the client.
	PortForward(ctx context.Context, t Target, port int32, stream io.ReadWriteCloser) error
}

// badRequest refuses a request before any upgrade: 400 with a Status, as
// the agent server's other refusals.
func badRequest(w http.ResponseWriter, message string) {
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   metav1.StatusReasonBadRequest,
		Code:     http.StatusBadRequest,
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(&st)
}

// hijackWatcher lets the WebSocket and SPDY libraries take over a
// connection through a ResponseWriter that only unwraps to a Hijacker,
// and tells when the taken-over connection is closed.
type hijackWatcher struct {
	http.ResponseWriter
	once   sync.Once
	closed chan struct{}
}

func watchHijack(w http.ResponseWriter) *hijackWatcher {
	return &hijackWatcher{ResponseWriter: w, closed: make(chan struct{})}
}

func (h *hijackWatcher) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	return &watchedConn{Conn: c, closed: func() { h.once.Do(func() { close(h.closed) }) }}, rw, nil
}

func (h *hijackWatcher) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// gone is closed once the hijacked connection has been closed.
func (h *hijackWatcher) gone() <-chan struct{} { return h.closed }

type watchedConn struct {
	net.Conn
	closed func()
}

func (c *watchedConn) Close() error {
	err := c.Conn.Close()
	c.closed()
	return err
}
