package apiserver

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"knode/internal/auth"
)

// requestMetrics are upstream's apiserver_request_total and
// apiserver_request_duration_seconds, for the resource requests that
// passed authorization. Watches are long-running and are not counted.
type requestMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// requestDurationBuckets are upstream's buckets for
// apiserver_request_duration_seconds.
var requestDurationBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3,
	4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

func newRequestMetrics(reg prometheus.Registerer) (*requestMetrics, error) {
	m := &requestMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: requestDurationBuckets,
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}),
	}
	for _, c := range []prometheus.Collector{m.total, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// metricVerb is the verb label upstream reports: the HTTP method in upper
// case, except LIST and WATCH for reads of collections, APPLY for
// server-side apply, and CONNECT for reading pods/log and for exec, attach, portforward and
// nodes/proxy (upstream's
// OverrideMetricsVerb).
func metricVerb(r *http.Request, a auth.Attributes) string {
	switch a.Verb {
	case "list":
		return "LIST"
	case "watch":
		return "WATCH"
	}
	if r.Method == http.MethodGet && a.APIGroup == "" && a.Resource == "pods" && a.Subresource == subLog {
		return "CONNECT"
	}
	if a.APIGroup == "" && ((a.Resource == "pods" && (a.Subresource == subExec || a.Subresource == subAttach || a.Subresource == subPortForward)) ||
		(a.Resource == "nodes" && a.Subresource == subProxy)) {
		return "CONNECT"
	}
	if r.Method == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml" {
		return "APPLY"
	}
	return strings.ToUpper(r.Method)
}

// metricScope is "resource" for a request naming an object, else
// "namespace" or "cluster".
func metricScope(a auth.Attributes) string {
	switch {
	case a.Name != "" && a.Verb != "list" && a.Verb != "watch":
		return "resource"
	case a.Namespace != "":
		return "namespace"
	}
	return "cluster"
}

// codeWriter remembers the status code written through it.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *codeWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection to an upgrade (exec, attach, port-forward
// proxied to an agent), which then answers 101 itself; the upgrade
// proxy needs http.Hijacker on the writer it is given.
func (w *codeWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.code == 0 {
		w.code = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// serveMeasured serves a resource request and records its outcome.
func (s *Server) serveMeasured(w http.ResponseWriter, r *http.Request, a auth.Attributes) {
	verb := metricVerb(r, a)
	if s.metrics == nil || verb == "WATCH" {
		s.serveResource(w, r, a)
		return
	}
	start := s.clock.Now()
	cw := &codeWriter{ResponseWriter: w}
	s.serveResource(cw, r, a)
	dryRun := ""
	if strings.Contains(r.URL.RawQuery, "dryRun=") {
		// Without parsing the query again on every request.
		dryRun = "All"
	}
	code := cw.code
	if code == 0 {
		code = http.StatusOK
	}
	labels := []string{verb, dryRun, a.APIGroup, a.APIVersion, a.Resource, a.Subresource, metricScope(a), "apiserver"}
	s.metrics.duration.WithLabelValues(labels...).Observe(s.clock.Since(start).Seconds())
	s.metrics.total.WithLabelValues(append(labels, strconv.Itoa(code))...).Inc()
}
