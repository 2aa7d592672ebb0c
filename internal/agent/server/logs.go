package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"knode/internal/agent/crilog"
)

// containerLogsPrefix is the kubelet's path of a container's log:
// /containerLogs/<namespace>/<pod>/<container>.
const containerLogsPrefix = "/containerLogs/"

// DefaultFollowPeriod is how often a followed log is read again for what
// was written since.
const DefaultFollowPeriod = 250 * time.Millisecond

// LogSource finds containers' log files.
type LogSource interface {
	// ContainerLog is the log file of the named container's current run,
	// or with previous of the run before. Its errors wrap ErrLogNotFound
	// or ErrLogUnavailable, or are other failures.
	ContainerLog(namespace, pod, container string, previous bool) (LogFile, error)
}

// LogFile is one run's log file.
type LogFile struct {
	Path string
	// Live reports whether more may still be written to it (the run goes
	// on); nil means no more will.
	Live func() bool
	// CRI says the file holds CRI log lines (time, stream and tag before
	// each piece of output), which timestamps, sinceSeconds and sinceTime
	// need; otherwise it is the output as written.
	CRI bool
}

// Errors of a LogSource, wrapped with the message to give: no such pod or
// container (404), or no such run, yet or any more (400).
var (
	ErrLogNotFound    = errors.New("log not found")
	ErrLogUnavailable = errors.New("log not available")
)

// logOptions are the query parameters of /containerLogs.
type logOptions struct {
	follow, previous bool
	tailLines        int64 // -1: all
	limitBytes       int64 // 0: no limit
	timestamps       bool
	// sinceSeconds (0: unset) and sinceTime (zero: unset).
	sinceSeconds int64
	sinceTime    time.Time
}

// timed reports whether o needs the time of every line.
func (o logOptions) timed() bool {
	return o.timestamps || o.sinceSeconds > 0 || !o.sinceTime.IsZero()
}

// parseLogOptions reads the query as the kubelet does. Timestamps and
// since need the time of every line, which only CRI log files keep; the
// caller refuses them for the others.
func parseLogOptions(q url.Values) (logOptions, error) {
	o := logOptions{tailLines: -1}
	var errs []string
	boolean := func(name string, dst *bool) {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s %q: must be true or false", name, v))
			}
			*dst = b
		}
	}
	boolean("follow", &o.follow)
	boolean("previous", &o.previous)
	boolean("timestamps", &o.timestamps)
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Sprintf("tailLines %q: must be a non-negative integer", v))
		}
		o.tailLines = n
	}
	if v := q.Get("limitBytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Sprintf("limitBytes %q: must be a positive integer", v))
		}
		o.limitBytes = n
	}
	if v := q.Get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			errs = append(errs, fmt.Sprintf("sinceSeconds %q: must be a positive integer", v))
		}
		o.sinceSeconds = n
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("sinceTime %q: must be an RFC 3339 time", v))
		}
		o.sinceTime = t
	}
	if o.sinceSeconds > 0 && !o.sinceTime.IsZero() {
		errs = append(errs, "sinceSeconds and sinceTime: at most one may be given")
	}
	if len(errs) > 0 {
		return o, errors.New(strings.Join(errs, "; "))
	}
	return o, nil
}

// serveContainerLogs answers GET /containerLogs/<namespace>/<pod>/<container>.
func (s *Server) serveContainerLogs(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on path %q; use GET", r.Method, r.URL.Path))
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, containerLogsPrefix), "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("path %q: want %s<namespace>/<pod>/<container>", r.URL.Path, containerLogsPrefix))
		return
	}
	if s.cfg.Logs == nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("node %q runs no pods", s.cfg.NodeName))
		return
	}
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	file, err := s.cfg.Logs.ContainerLog(parts[0], parts[1], parts[2], opts.previous)
	switch {
	case errors.Is(err, ErrLogNotFound):
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, err.Error())
		return
	case errors.Is(err, ErrLogUnavailable):
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	case err != nil:
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	if !file.CRI && opts.timed() {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"timestamps, sinceSeconds and sinceTime: the process runtime's log files keep no time for each line")
		return
	}
	f, err := os.Open(file.Path)
	if err != nil {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("container %q in pod %q: its log is gone: %v", parts[2], parts[1], err))
		return
	}
	defer f.Close()
	if file.CRI {
		s.serveCRILog(w, r, f, file.Live, opts)
		return
	}
	if opts.tailLines >= 0 {
		if _, err := f.Seek(tailOffset(f, opts.tailLines), io.SeekStart); err != nil {
			writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	out := io.Writer(w)
	if opts.limitBytes > 0 {
		out = &limitWriter{w: w, left: opts.limitBytes}
	}
	copyLog(r.Context(), out, w, f, opts.follow && !opts.previous, file.Live, s.cfg.Clock, s.cfg.FollowPeriod)
}

// serveCRILog answers with a CRI log file, as the kubelet reads one: each
// line's output, with its time first when timestamps is asked for, from
// sinceTime (or sinceSeconds before now) on; with follow, what is
// appended until the run ends.
func (s *Server) serveCRILog(w http.ResponseWriter, r *http.Request, f *os.File, live func() bool, o logOptions) {
	opts := crilog.Options{Timestamps: o.timestamps, Since: o.sinceTime}
	if o.sinceSeconds > 0 {
		opts.Since = s.cfg.Clock.Now().Add(-time.Duration(o.sinceSeconds) * time.Second)
	}
	if o.tailLines >= 0 {
		opts.TailLines = &o.tailLines
	}
	if o.limitBytes > 0 {
		opts.LimitBytes = &o.limitBytes
	}
	follower, err := crilog.NewFollower(f, 0, opts)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	if !o.follow || o.previous || live == nil {
		_, _ = follower.Drain(w)
		return
	}
	if _, err := follower.Step(w); err != nil {
		return
	}
	flush()
	tick := s.cfg.Clock.NewTicker(s.cfg.FollowPeriod)
	defer tick.Stop()
	for !follower.Done() {
		running := live()
		var n int64
		if running {
			n, err = follower.Step(w)
		} else {
			n, err = follower.Drain(w)
		}
		if err != nil || !running {
			return
		}
		if n > 0 {
			flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C():
		}
	}
}

// copyLog copies f to out; with follow it keeps reading what is written
// after, on every tick of clk, until the run ends (live false, after a
// last read), out refuses more (limitBytes) or ctx ends.
func copyLog(ctx context.Context, out io.Writer, w http.ResponseWriter, f *os.File, follow bool, live func() bool, clk clock.WithTicker, period time.Duration) {
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	if _, err := io.Copy(out, f); err != nil || !follow {
		return
	}
	flush()
	tick := clk.NewTicker(period)
	defer tick.Stop()
	for {
		running := live == nil || live()
		n, err := io.Copy(out, f)
		if err != nil || !running {
			return
		}
		if n > 0 {
			flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// errLimit ends a copy at limitBytes.
var errLimit = errors.New("limitBytes reached")

// limitWriter passes on at most left bytes.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errLimit
	}
	short := int64(len(p)) > l.left
	if short {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && short {
		err = errLimit
	}
	return n, err
}

// tailOffset is where the last n lines of f begin (a last line without a
// newline counts), read backwards in chunks.
func tailOffset(f *os.File, n int64) int64 {
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	end := st.Size()
	if n == 0 {
		return end
	}
	const chunk = 32 << 10
	buf := make([]byte, chunk)
	pos := end
	newlines := int64(0)
	// A final newline ends the last line rather than starting one more.
	skip := true
	for pos > 0 {
		size := int64(chunk)
		if pos < size {
			size = pos
		}
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && !errors.Is(err, io.EOF) {
			return 0
		}
		b := buf[:size]
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				skip = false
				continue
			}
			if skip {
				skip = false
				continue
			}
			newlines++
			if newlines == n {
				return pos + int64(i) + 1
			}
		}
		if bytes.IndexByte(b, '\n') < 0 && pos == 0 {
			break
		}
	}
	return 0
}

// podsPath is the kubelet's list of the pods it runs.
const podsPath = "/pods"

// servePods answers GET /pods with a v1 PodList of Config.Pods.
func (s *Server) servePods(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
			fmt.Sprintf("method %s is not allowed on path %q; use GET or HEAD", r.Method, r.URL.Path))
		return
	}
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{}}
	if s.cfg.Pods != nil {
		for _, p := range s.cfg.Pods() {
			list.Items = append(list.Items, *p)
		}
	}
	body, err := json.Marshal(list)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(body)
}
