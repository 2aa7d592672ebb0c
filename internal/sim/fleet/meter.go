package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"knode/internal/auth"
)

// errTimeout ends a request that took longer than Config.RequestTimeout.
var errTimeout = errors.New("request timed out")

// meter counts what the agents' requests did. It is shared by every
// agent; its methods are safe for concurrent use.
type meter struct {
	clock clock.PassiveClock

	requests atomic.Int64
	renewals atomic.Int64
	// latency holds the time to the response headers of every successful
	// lease renewal.
	latency Histogram

	mu     sync.Mutex
	errors map[string]int64
	total  int64
}

func newMeter(c clock.PassiveClock) *meter {
	return &meter{clock: c, errors: map[string]int64{}}
}

// outcome is what one request counts as.
type outcome struct {
	// renewal: a successful PUT of a node Lease.
	renewal bool
	// failed, under the key errorKind, counts as an error.
	failed    bool
	errorKind string
}

// classify decides what one finished request counts as: a is the request's
// attributes (auth.RequestAttributes), code its status (0 when err is
// set), err the transport's error.
//
// A failure is a transport error (including our own request timeout) or a
// status of 400 or more, with two exceptions that are answers the agent
// expects and acts on, not failures: 404 to a get (the Lease before it is
// created, the Node before it is registered) and 409 to a create (the Node
// already exists and is adopted, as a restarted kubelet does). A 409 to an
// update (a lease renewal or status write that lost a race; the agent
// retries it) does count. Requests cut short because the fleet is stopping
// are not classified at all (see meter.record).
func classify(a auth.Attributes, code int, err error) outcome {
	what := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		what += "/" + a.Subresource
	}
	switch {
	case errors.Is(err, errTimeout):
		return outcome{failed: true, errorKind: "timeout " + what}
	case err != nil:
		return outcome{failed: true, errorKind: "transport " + what}
	case code == http.StatusNotFound && a.Verb == "get":
		return outcome{}
	case code == http.StatusConflict && a.Verb == "create":
		return outcome{}
	case code >= 400:
		return outcome{failed: true, errorKind: strconv.Itoa(code) + " " + what}
	}
	renewal := a.Verb == "update" && a.APIGroup == "coordination.k8s.io" && a.Resource == "leases" &&
		a.Subresource == "" && code >= 200 && code < 300
	return outcome{renewal: renewal}
}

// record counts one finished request that took took. stopping says the
// request's context had ended: the fleet is stopping, so it counts only as
// a request.
func (m *meter) record(a auth.Attributes, code int, err error, took time.Duration, stopping bool) {
	m.requests.Add(1)
	if stopping {
		return
	}
	o := classify(a, code, err)
	if o.renewal {
		m.renewals.Add(1)
		m.latency.Observe(took)
	}
	if o.failed {
		m.mu.Lock()
		m.errors[o.errorKind]++
		m.total++
		m.mu.Unlock()
	}
}

// tally is what a meter has counted up to some moment, or between two.
type tally struct {
	requests, renewals, errors int64
	// byKind splits errors by kind ("409 update leases", "timeout get
	// nodes", ...).
	byKind  map[string]int64
	latency Counts
}

// tally returns the counts so far.
func (m *meter) tally() tally {
	t := tally{requests: m.requests.Load(), renewals: m.renewals.Load(), latency: m.latency.Snapshot()}
	m.mu.Lock()
	t.errors, t.byKind = m.total, maps.Clone(m.errors)
	m.mu.Unlock()
	return t
}

// sub returns what was counted in t and not in earlier, a tally taken
// before t from the same meter.
func (t tally) sub(earlier tally) tally {
	out := tally{
		requests: t.requests - earlier.requests,
		renewals: t.renewals - earlier.renewals,
		errors:   t.errors - earlier.errors,
		byKind:   map[string]int64{},
		latency:  t.latency.Sub(earlier.latency),
	}
	for k, n := range t.byKind {
		if d := n - earlier.byKind[k]; d > 0 {
			out.byKind[k] = d
		}
	}
	return out
}

// meteredTransport records every request it carries in a meter.
type meteredTransport struct {
	m    *meter
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := t.m.clock.Now()
	resp, err := t.next.RoundTrip(req)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	t.m.record(auth.RequestAttributes(req), code, err, t.m.clock.Since(start), req.Context().Err() != nil)
	return resp, err
}

// timeoutTransport ends every request but a watch that has not finished,
// body included, within timeout on the clock, as the kubelet's client
// timeout does. Watches are long by design.
type timeoutTransport struct {
	clock   clock.WithDelayedExecution
	timeout time.Duration
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.timeout <= 0 || isWatch(req) {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := t.clock.AfterFunc(t.timeout, func() {
		cancel(fmt.Errorf("%w after %v", errTimeout, t.timeout))
	})
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		timer.Stop()
		if cause := context.Cause(ctx); errors.Is(cause, errTimeout) {
			err = fmt.Errorf("%w: %w", cause, err)
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() {
		timer.Stop()
		cancel(nil)
	}}
	return resp, nil
}

// releasingBody calls release once, when the body is closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// isWatch reports whether req asks for a watch stream.
func isWatch(req *http.Request) bool {
	if strings.Contains(req.URL.Path, "/watch/") {
		return true
	}
	v := req.URL.Query().Get("watch")
	return v == "true" || v == "1"
}
