// Package inproc carries HTTP requests to an http.Handler in the same
// process, without sockets, so that client-go clients can talk to knode's
// API server inside the simulator.
//
// What it owns: a RoundTripper. A request that is not a watch is served
// synchronously on the caller's goroutine, so when the call returns every
// effect of the request (the write, and the events it queued for watchers)
// has happened; that is what lets the simulator step components in a fixed
// order. A watch (query parameter watch=true or 1) is served on a goroutine
// of its own and streams its body through a pipe until the request's
// context ends or the handler returns.
//
// What callers must do: close response bodies, as with any transport, and
// cancel watch requests when done with them.
//
// What it does not do: TLS, HTTP/2, connection limits or timeouts.
package inproc

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
)

// Transport serves requests with Handler.
type Transport struct {
	Handler http.Handler
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	if isWatch(req) {
		return t.stream(req)
	}
	w := &recorder{header: http.Header{}}
	t.Handler.ServeHTTP(w, serverRequest(req))
	closeBody(req)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return &http.Response{
		Status:        http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

func isWatch(req *http.Request) bool {
	v := req.URL.Query().Get("watch")
	return v == "true" || v == "1"
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// serverRequest is req as a server sees it: a body that is never nil and a
// RequestURI.
func serverRequest(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	} else {
		r.Body = req.Body
	}
	r.RequestURI = req.URL.RequestURI()
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	r.RemoteAddr = "inproc"
	return r
}

// recorder buffers a whole response.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.body.Write(p)
}

// Flush is a no-op: the body is delivered whole.
func (w *recorder) Flush() {}

// stream serves a watch on its own goroutine and returns once the handler
// has written its header. Closing the body ends the handler's context, as
// a closed connection does for a real server.
func (t *Transport) stream(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	pr, pw := io.Pipe()
	w := &streamWriter{header: http.Header{}, pipe: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			w.start(http.StatusOK)
			pw.Close()
		}()
		t.Handler.ServeHTTP(w, serverRequest(req.WithContext(ctx)))
	}()
	<-w.started
	resp := &http.Response{
		Status:        http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &watchBody{pr: pr, pw: pw, cancel: cancel},
		ContentLength: -1,
		Request:       req,
	}
	return resp, nil
}

// streamWriter passes the body of a streaming response through a pipe.
type streamWriter struct {
	header  http.Header
	sent    http.Header
	pipe    *io.PipeWriter
	once    sync.Once
	code    int
	started chan struct{}
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) start(code int) {
	w.once.Do(func() {
		w.code = code
		w.sent = w.header.Clone()
		close(w.started)
	})
}

func (w *streamWriter) WriteHeader(code int) { w.start(code) }

func (w *streamWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pipe.Write(p)
}

func (w *streamWriter) Flush() { w.start(http.StatusOK) }

// watchBody ends the stream, and the handler, when the reader closes it.
// Once closed it reads as io.EOF, the end client-go's watchers take
// quietly, and the handler's writes fail.
type watchBody struct {
	pr     *io.PipeReader
	pw     *io.PipeWriter
	cancel context.CancelFunc
}

func (b *watchBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *watchBody) Close() error {
	b.cancel()
	return b.pw.Close()
}
