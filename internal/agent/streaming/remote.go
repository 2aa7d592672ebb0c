package streaming

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	pfproto "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/tools/remotecommand"
	spdytransport "k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
)

// RemoteExecutor is an Executor that forwards to a streaming server
// speaking remotecommand over SPDY, such as the one a CRI runtime's Exec
// and Attach calls point to. Each call asks its URL function once and
// opens one connection there.
type RemoteExecutor struct {
	// ExecURL returns where to run cmd in t's container with the streams
	// s has (for the CRI: the URL of ExecResponse). Required for Exec.
	ExecURL func(ctx context.Context, t Target, cmd []string, s Streams) (*url.URL, error)
	// AttachURL does the same for Attach. Required for Attach.
	AttachURL func(ctx context.Context, t Target, s Streams) (*url.URL, error)
	// TLSConfig is used for https URLs; nil means Go's defaults. No proxy
	// is ever used.
	TLSConfig *tls.Config
}

var _ Executor = RemoteExecutor{}

// Exec runs cmd at the URL ExecURL returns. The remote command's non-zero
// exit comes back as an ExitError with its code.
func (e RemoteExecutor) Exec(ctx context.Context, t Target, cmd []string, s Streams) error {
	if e.ExecURL == nil {
		return errors.New("streaming: RemoteExecutor.ExecURL is not set")
	}
	u, err := e.ExecURL(ctx, t, cmd, s)
	if err != nil {
		return err
	}
	return e.stream(ctx, u, s)
}

// Attach attaches at the URL AttachURL returns.
func (e RemoteExecutor) Attach(ctx context.Context, t Target, s Streams) error {
	if e.AttachURL == nil {
		return errors.New("streaming: RemoteExecutor.AttachURL is not set")
	}
	u, err := e.AttachURL(ctx, t, s)
	if err != nil {
		return err
	}
	return e.stream(ctx, u, s)
}

func (e RemoteExecutor) stream(ctx context.Context, u *url.URL, s Streams) error {
	rt, err := newSPDYRoundTripper(e.TLSConfig)
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewSPDYExecutorForTransports(rt, rt, http.MethodPost, u)
	if err != nil {
		return err
	}
	opts := remotecommand.StreamOptions{Stdin: s.Stdin, Stdout: s.Stdout, Stderr: s.Stderr, Tty: s.TTY}
	if s.Resize != nil {
		opts.TerminalSizeQueue = sizeQueue{ctx: ctx, sizes: s.Resize}
	}
	err = ex.StreamWithContext(ctx, opts)
	var exit clientexec.CodeExitError
	if errors.As(err, &exit) {
		return ExitError{Code: exit.Code}
	}
	return err
}

// sizeQueue hands client-go the sizes from a Streams.Resize channel.
type sizeQueue struct {
	ctx   context.Context
	sizes <-chan remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case size, ok := <-q.sizes:
		if !ok {
			return nil
		}
		return &size
	case <-q.ctx.Done():
		return nil
	}
}

// RemotePortForwarder is a PortForwarder that forwards to a streaming
// server speaking portforward.k8s.io over SPDY, such as the one a CRI
// runtime's PortForward call points to. Each forwarded connection asks URL
// once and opens one SPDY connection there, with one pair of streams.
type RemotePortForwarder struct {
	// URL returns where to forward t's ports (for the CRI: the URL of
	// PortForwardResponse). Required.
	URL func(ctx context.Context, t Target) (*url.URL, error)
	// TLSConfig is used for https URLs; nil means Go's defaults. No proxy
	// is ever used.
	TLSConfig *tls.Config
}

var _ PortForwarder = RemotePortForwarder{}

// PortForward forwards stream to port through the remote server. The
// remote server's error message, when it sends one, is the returned
// error.
func (f RemotePortForwarder) PortForward(ctx context.Context, t Target, port int32, stream io.ReadWriteCloser) error {
	if f.URL == nil {
		return errors.New("streaming: RemotePortForwarder.URL is not set")
	}
	u, err := f.URL(ctx, t)
	if err != nil {
		return err
	}
	rt, err := newSPDYRoundTripper(f.TLSConfig)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return err
	}
	conn, protocol, err := spdytransport.Negotiate(rt, &http.Client{Transport: rt}, req, pfproto.PortForwardV1Name)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if protocol != pfproto.PortForwardV1Name {
		return fmt.Errorf("unable to negotiate protocol: client supports %q, server returned %q", pfproto.PortForwardV1Name, protocol)
	}

	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errs, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the error stream: %w", err)
	}
	_ = errs.Close() // nothing is sent on it
	remoteErr := make(chan []byte, 1)
	go func() {
		msg, _ := io.ReadAll(errs)
		remoteErr <- msg
	}()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the data stream: %w", err)
	}

	// To the remote side until stream ends (the goroutine ends at the
	// latest when the caller closes stream or conn is closed); from it
	// until it ends, which is when the forwarding is done.
	go func() {
		_, _ = io.Copy(data, stream)
		_ = data.Close()
	}()
	received := make(chan error, 1)
	go func() {
		_, err := io.Copy(stream, data)
		received <- err
	}()
	select {
	case err = <-received:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case msg := <-remoteErr:
		if len(msg) > 0 {
			return errors.New(string(msg))
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// newSPDYRoundTripper dials SPDY connections without a proxy.
func newSPDYRoundTripper(tlsConfig *tls.Config) (*spdy.SpdyRoundTripper, error) {
	return spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{
		TLS:     tlsConfig,
		Proxier: func(*http.Request) (*url.URL, error) { return nil, nil },
	})
}
