package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"

	"knode/internal/agent/runtime"
	"knode/internal/agent/streaming"
)

// Path prefixes of the kubelet's streaming endpoints.
const (
	execPrefix        = "/exec/"
	attachPrefix      = "/attach/"
	portForwardPrefix = "/portForward/"
	runPrefix         = "/run/"
)

// Streams is how the server reaches containers for exec, attach, /run and
// port-forward.
type Streams struct {
	// Server speaks the protocols. Required.
	Server *streaming.Server
	// Executor runs commands in containers (exec, /run) and attaches to
	// them; nil answers those paths 404.
	Executor streaming.Executor
	// PortForwarder reaches pods' ports; nil answers /portForward 404.
	PortForwarder streaming.PortForwarder
}

// isStreamPath reports whether path is one of the streaming endpoints.
func isStreamPath(path string) bool {
	for _, p := range []string{execPrefix, attachPrefix, portForwardPrefix, runPrefix} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// streamTarget parses /<kind>/<namespace>/<pod>[/<uid>]/<container> (no
// container for port-forward) and finds the pod among the agent's.
func (s *Server) streamTarget(path, prefix string, withContainer bool) (streaming.Target, error) {
	parts := strings.Split(strings.TrimPrefix(path, prefix), "/")
	var t streaming.Target
	switch {
	case withContainer && len(parts) == 3:
		t = streaming.Target{Namespace: parts[0], Pod: parts[1], Container: parts[2]}
	case withContainer && len(parts) == 4:
		t = streaming.Target{Namespace: parts[0], Pod: parts[1], UID: types.UID(parts[2]), Container: parts[3]}
	case !withContainer && len(parts) == 2:
		t = streaming.Target{Namespace: parts[0], Pod: parts[1]}
	case !withContainer && len(parts) == 3:
		t = streaming.Target{Namespace: parts[0], Pod: parts[1], UID: types.UID(parts[2])}
	default:
		return t, errNotFound
	}
	for _, part := range parts {
		if part == "" {
			return t, errNotFound
		}
	}
	var pod *corev1.Pod
	if s.cfg.Pods != nil {
		for _, p := range s.cfg.Pods() {
			if p.Namespace == t.Namespace && p.Name == t.Pod && (t.UID == "" || p.UID == t.UID) {
				pod = p
				break
			}
		}
	}
	if pod == nil {
		return t, missing("pod does not exist")
	}
	t.UID = pod.UID
	if withContainer && !hasContainer(pod, t.Container) {
		return t, missing(fmt.Sprintf("container %q not found in pod %q", t.Container, t.Pod))
	}
	return t, nil
}

// errNotFound: the path is not one of the endpoints' shapes.
var errNotFound = errors.New("not found")

// missing is a pod or container the request names but the agent does not
// run; its text is the answer's message.
type missing string

func (m missing) Error() string { return string(m) }

// hasContainer reports whether pod has a container (of any kind) named name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// serveStream routes the streaming endpoints. GET and POST only, as the
// kubelet registers them (/run: POST only).
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	allowed, ok := "GET, POST", r.Method == http.MethodGet || r.Method == http.MethodPost
	if strings.HasPrefix(path, runPrefix) {
		allowed, ok = "POST", r.Method == http.MethodPost
	}
	if !ok {
		w.Header().Set("Allow", allowed)
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on path %q; use %s", r.Method, path, allowed))
		return
	}
	st := s.cfg.Streams
	notServed := func() {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("path %q not found on node %q", path, s.cfg.NodeName))
	}
	var prefix string
	withContainer := true
	switch {
	case strings.HasPrefix(path, execPrefix):
		prefix = execPrefix
	case strings.HasPrefix(path, attachPrefix):
		prefix = attachPrefix
	case strings.HasPrefix(path, runPrefix):
		prefix = runPrefix
	default:
		prefix, withContainer = portForwardPrefix, false
	}
	if st == nil || st.Server == nil || (withContainer && st.Executor == nil) || (!withContainer && st.PortForwarder == nil) {
		notServed()
		return
	}
	t, err := s.streamTarget(path, prefix, withContainer)
	switch {
	case errors.Is(err, errNotFound):
		notServed()
		return
	case err != nil:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, err.Error())
		return
	}
	switch prefix {
	case execPrefix:
		st.Server.ServeExec(w, r, st.Executor, t)
	case attachPrefix:
		st.Server.ServeAttach(w, r, st.Executor, t)
	case runPrefix:
		s.serveRun(w, r, st.Executor, t)
	default:
		st.Server.ServePortForward(w, r, st.PortForwarder, t)
	}
}

// serveRun answers the kubelet's /run: the command in the cmd parameter,
// split on spaces, runs in the container, and its output (stdout then
// stderr) is the answer.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request, ex streaming.Executor, t streaming.Target) {
	cmd := strings.Fields(r.URL.Query().Get("cmd"))
	if len(cmd) == 0 {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, "a command is required: cmd=<command and arguments>")
		return
	}
	var out, errOut bytes.Buffer
	err := ex.Exec(r.Context(), t, cmd, streaming.Streams{Stdout: &out, Stderr: &errOut})
	var exit streaming.ExitError
	if err != nil && !errors.As(err, &exit) {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, fmt.Sprintf("failed to run %q in container %q: %v", cmd, t.Container, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(out.Bytes())
	_, _ = w.Write(errOut.Bytes())
}

// StreamerExecutor serves exec through a runtime that runs sessions itself
// (runtime.Streamer, the process runtime). It has no attach: a process
// runtime's container has no terminal or stdin to join, and its output is
// in its log.
func StreamerExecutor(rt runtime.Streamer) streaming.Executor { return streamerExecutor{rt} }

// StreamerPortForwarder serves port-forward through a runtime.Streamer.
func StreamerPortForwarder(rt runtime.Streamer) streaming.PortForwarder {
	return streamerExecutor{rt}
}

type streamerExecutor struct{ rt runtime.Streamer }

func (e streamerExecutor) Exec(ctx context.Context, t streaming.Target, cmd []string, s streaming.Streams) error {
	rs := runtime.ExecStreams{Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, TTY: s.TTY}
	if s.Resize != nil {
		sizes := make(chan runtime.TerminalSize)
		rs.Resize = sizes
		go relaySizes(ctx, s.Resize, sizes)
	}
	code, err := e.rt.Exec(ctx, t.UID, t.Container, cmd, rs)
	switch {
	case err != nil:
		return err
	case code != 0:
		return streaming.ExitError{Code: code}
	}
	return nil
}

// relaySizes passes terminal sizes on until in closes or ctx ends, then
// closes out.
func relaySizes(ctx context.Context, in <-chan remotecommand.TerminalSize, out chan<- runtime.TerminalSize) {
	defer close(out)
	for {
		select {
		case <-ctx.Done():
			return
		case size, ok := <-in:
			if !ok {
				return
			}
			select {
			case out <- runtime.TerminalSize{Width: size.Width, Height: size.Height}:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (e streamerExecutor) Attach(context.Context, streaming.Target, streaming.Streams) error {
	return errors.New("attach is not supported by the process runtime: a container's output is in its log (kubectl logs -f)")
}

func (e streamerExecutor) PortForward(ctx context.Context, t streaming.Target, port int32, stream io.ReadWriteCloser) error {
	return e.rt.PortForward(ctx, t.UID, port, stream)
}
