package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	rcproto "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
)

// execOptions are the streams an exec or attach asks for: the kubelet's
// query parameters input, output, error and tty, each on when "1".
type execOptions struct {
	stdin, stdout, stderr, tty bool
}

// parseExecOptions reads q, refusing what upstream refuses.
func parseExecOptions(q url.Values) (execOptions, error) {
	o := execOptions{
		stdin:  q.Get(corev1.ExecStdinParam) == "1",
		stdout: q.Get(corev1.ExecStdoutParam) == "1",
		stderr: q.Get(corev1.ExecStderrParam) == "1",
		tty:    q.Get(corev1.ExecTTYParam) == "1",
	}
	if o.tty && o.stderr {
		return o, errors.New("cannot exec with tty and stderr")
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errors.New("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// session is an upgraded exec or attach connection: the streams the client
// opened, whichever protocol carries them.
type session struct {
	stdin          io.Reader      // nil unless asked for
	stdout, stderr io.WriteCloser // nil unless asked for
	resize         io.Reader      // nil without a TTY or a protocol that resizes
	errors         io.WriteCloser
	// jsonStatus: v4 and later send the outcome as a metav1.Status; earlier
	// versions send a failure's message only.
	jsonStatus bool
	gone       <-chan struct{} // closed when the connection ends
	close      func()
}

// ServeExec serves an exec request (the kubelet's /exec/...): it reads the
// command (command, repeated) and the streams wanted from r's query,
// upgrades r to SPDY or WebSocket, runs the command with ex and sends the
// client its outcome. It returns when the command has ended and the
// outcome is sent. A request it cannot serve gets 400 before any upgrade.
func (s *Server) ServeExec(w http.ResponseWriter, r *http.Request, ex Executor, t Target) {
	cmd := r.URL.Query()[corev1.ExecCommandParam]
	if len(cmd) == 0 {
		badRequest(w, "you must specify at least one command for the container")
		return
	}
	s.serveSession(w, r, "exec", func(ctx context.Context, st Streams) metav1.Status {
		return execStatus(ex.Exec(ctx, t, cmd, st))
	})
}

// ServeAttach serves an attach request (the kubelet's /attach/...) as
// ServeExec does, attaching with ex.
func (s *Server) ServeAttach(w http.ResponseWriter, r *http.Request, ex Executor, t Target) {
	s.serveSession(w, r, "attach", func(ctx context.Context, st Streams) metav1.Status {
		if err := ex.Attach(ctx, t, st); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("error attaching to container: %w", err)).ErrStatus
		}
		return metav1.Status{Status: metav1.StatusSuccess}
	})
}

// serveSession upgrades r, runs run with the streams the client opened
// and sends it run's outcome.
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request, kind string, run func(context.Context, Streams) metav1.Status) {
	opts, err := parseExecOptions(r.URL.Query())
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	var sess *session
	if wsstream.IsWebSocketRequest(r) {
		sess = s.openWebSocketSession(w, r, opts)
	} else {
		sess = s.openSPDYSession(w, r, opts)
	}
	if sess == nil {
		return // the client has been told, or is gone
	}
	defer sess.close()

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-sess.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	st := Streams{Stdin: sess.stdin, Stdout: sess.stdout, Stderr: sess.stderr, TTY: opts.tty}
	if sess.resize != nil {
		sizes := make(chan remotecommand.TerminalSize)
		go decodeResizes(ctx, sess.resize, sizes)
		st.Resize = sizes
	}

	status := run(ctx, st)
	switch {
	case status.Reason == rcproto.NonZeroExitCodeReason:
		s.log.Debug(kind+" ended with a non-zero exit code", "path", r.URL.Path, "message", status.Message)
	case status.Status != metav1.StatusSuccess:
		s.log.Info(kind+" failed", "path", r.URL.Path, "message", status.Message)
	}
	for _, out := range []io.WriteCloser{sess.stdout, sess.stderr} {
		if out != nil {
			_ = out.Close()
		}
	}
	if err := writeStatus(sess.errors, &status, sess.jsonStatus); err != nil {
		s.log.Info("cannot send the outcome of "+kind, "path", r.URL.Path, "err", err)
	}
	_ = sess.errors.Close()
}

// execStatus is the outcome of an Exec as upstream's kubelet reports it.
func execStatus(err error) metav1.Status {
	if err == nil {
		return metav1.Status{Status: metav1.StatusSuccess}
	}
	var code ExitError
	var codePtr *ExitError
	switch {
	case errors.As(err, &code):
	case errors.As(err, &codePtr) && codePtr != nil:
		code = *codePtr
	default:
		return apierrors.NewInternalError(fmt.Errorf("error executing command in container: %w", err)).ErrStatus
	}
	return metav1.Status{
		Status: metav1.StatusFailure,
		Reason: rcproto.NonZeroExitCodeReason,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type:    rcproto.ExitCodeCauseType,
			Message: strconv.Itoa(code.Code),
		}}},
		Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
	}
}

// writeStatus sends st on the error stream: as JSON for v4 and later,
// otherwise the message of a failure and nothing for a success.
func writeStatus(w io.Writer, st *metav1.Status, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if st.Status == metav1.StatusSuccess {
		return nil
	}
	_, err := io.WriteString(w, st.Message)
	return err
}

// decodeResizes sends the terminal sizes read from r (a JSON object per
// size) to sizes until r ends or ctx does, then closes sizes.
func decodeResizes(ctx context.Context, r io.Reader, sizes chan<- remotecommand.TerminalSize) {
	defer close(sizes)
	dec := json.NewDecoder(r)
	for {
		var size remotecommand.TerminalSize
		if err := dec.Decode(&size); err != nil {
			return
		}
		select {
		case sizes <- size:
		case <-ctx.Done():
			return
		}
	}
}
