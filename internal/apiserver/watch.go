package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"

	"knode/internal/storage"
)

// minWatchTimeout is the shortest server-chosen watch duration; each watch
// without timeoutSeconds lasts between one and two times it, so that
// clients spread their reconnects.
const minWatchTimeout = 30 * time.Minute

// initialEventsEndAnnotation marks the bookmark that ends the initial
// events of a watch that asked for them (sendInitialEvents=true).
const initialEventsEndAnnotation = "k8s.io/initial-events-end"

// watch streams changes to a collection (or to the one object name names,
// for the legacy /watch/.../name form).
func (s *Server) watch(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace, name string) error {
	opts, err := listOptions(r)
	if err != nil {
		return err
	}
	sel, err := parseSelector(st, opts)
	if err != nil {
		return err
	}
	if name != "" {
		sel.fields = fields.AndSelectors(sel.fields, fields.OneTermEqualSelector("metadata.name", name))
	}
	sendInitial := opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	if opts.SendInitialEvents != nil {
		sendInitial = *opts.SendInitialEvents
	}
	var start int64
	if !sendInitial {
		start, err = strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", opts.ResourceVersion))
		}
	}
	timeout := time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	prefix := st.listPrefix(namespace)
	cw, initial, from, err := st.cache.watchFrom(ctx, prefix, sel, start, sendInitial, opts.ResourceVersion != "0" || s.cfg.StrictReads)
	if errors.Is(err, errTooOld) {
		// Before the cache's window: only the store still has it.
		return s.watchStorage(ctx, w, r, st, namespace, sel, start, timeout)
	}
	out := newEventWriter(w, r, s, st)
	if err != nil && !errors.Is(err, storage.ErrFutureRevision) {
		return storageError(err, st.gr, "")
	}
	out.start()
	if err != nil {
		out.writeError(watchStartError(err, start))
		return nil
	}
	defer st.cache.stopWatcher(cw)
	start = from
	for _, obj := range initial {
		if !out.write(watch.Added, obj) {
			return nil
		}
	}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents && opts.AllowWatchBookmarks {
		bookmark := st.kind.New()
		accessor, _ := meta.Accessor(bookmark)
		accessor.SetResourceVersion(strconv.FormatInt(start, 10))
		accessor.SetAnnotations(map[string]string{initialEventsEndAnnotation: "true"})
		setTypeMeta(st.kind, bookmark)
		if !out.write(watch.Bookmark, bookmark) {
			return nil
		}
	}
	streamFor(ctx, s.clock, timeout, cw.notify, func(struct{}, bool) bool {
		events, ended := cw.take()
		for _, ev := range events {
			if typ, obj := cw.convert(st, ev); obj != nil && !out.write(typ, obj) {
				return false
			}
		}
		return !ended
	})
	return nil
}

// streamFor hands each value from ch to handle until ctx ends, timeout
// passes on the server's clock, or handle returns false. handle also gets
// ok false, once, when ch is closed.
func streamFor[T any](ctx context.Context, c clock.Clock, timeout time.Duration, ch <-chan T, handle func(v T, ok bool) bool) {
	timer := c.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
			return
		case v, ok := <-ch:
			if !handle(v, ok) || !ok {
				return
			}
		}
	}
}

// watchStorage serves a watch that resumes from before the cache's window
// with a watch of its own on the store.
func (s *Server) watchStorage(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, sel selector, start int64, timeout time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watcher, werr := st.storage.Watch(wctx, st.listPrefix(namespace), start)
	out := newEventWriter(w, r, s, st)
	if werr == nil {
		defer watcher.Stop()
	}
	out.start()
	if werr != nil {
		out.writeError(watchStartError(werr, start))
		return nil
	}
	streamFor(ctx, s.clock, timeout, watcher.Events(), func(ev storage.Event, ok bool) bool {
		if !ok {
			if err := watcher.Err(); err != nil {
				out.writeError(watchStartError(err, start))
			}
			return false
		}
		typ, obj, err := s.convertEvent(st, sel, ev)
		if err != nil {
			out.writeError(apierrors.NewInternalError(err))
			return false
		}
		return obj == nil || out.write(typ, obj)
	})
	return nil
}

// watchStartError maps a storage watch failure to the Status a client
// sees in an ERROR event: a compacted start gives 410 Expired.
func watchStartError(err error, start int64) error {
	if errors.Is(err, storage.ErrCompacted) {
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d", start))
	}
	if errors.Is(err, storage.ErrFutureRevision) {
		return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d", start), 1)
	}
	return apierrors.NewInternalError(err)
}

// convertEvent turns a storage event into the watch event a watcher with
// sel sees: an object that starts matching is ADDED, one that stops is
// DELETED. It returns a nil object when the watcher sees nothing.
func (s *Server) convertEvent(st *objectStore, sel selector, ev storage.Event) (watch.EventType, runtime.Object, error) {
	rev := ev.KV.ModRevision
	if ev.Type == storage.Delete {
		obj, err := st.decode(ev.KV.Value, rev)
		if err != nil || !sel.matches(st, obj) {
			return "", nil, err
		}
		return watch.Deleted, obj, nil
	}
	obj, err := st.decode(ev.KV.Value, rev)
	if err != nil {
		return "", nil, err
	}
	cur := sel.matches(st, obj)
	if ev.Created || ev.PrevValue == nil {
		if !cur {
			return "", nil, nil
		}
		return watch.Added, obj, nil
	}
	if sel.empty() {
		return watch.Modified, obj, nil
	}
	prev, err := st.decode(ev.PrevValue, rev)
	if err != nil {
		return "", nil, err
	}
	old := sel.matches(st, prev)
	switch {
	case cur && old:
		return watch.Modified, obj, nil
	case cur:
		return watch.Added, obj, nil
	case old:
		return watch.Deleted, prev, nil
	}
	return "", nil, nil
}

// eventWriter streams watch events: newline-delimited JSON, or, for
// clients that prefer protobuf (client-go's informers), length-delimited
// frames of WatchEvents whose objects are in Kubernetes protobuf.
type eventWriter struct {
	w        http.ResponseWriter
	r        *http.Request
	s        *Server
	st       *objectStore
	flusher  http.Flusher
	table    bool
	protobuf bool
	enc      *json.Encoder
	frames   io.Writer
}

// watchProtobufMediaType is the Content-Type of a protobuf watch stream.
const watchProtobufMediaType = protobufMediaType + ";stream=watch"

var rawProtobuf = protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)

func newEventWriter(w http.ResponseWriter, r *http.Request, s *Server, st *objectStore) *eventWriter {
	f, _ := w.(http.Flusher)
	m := negotiate(r)
	e := &eventWriter{w: w, r: r, s: s, st: st, flusher: f, table: m.table, protobuf: m.protobuf && !m.table, enc: json.NewEncoder(w)}
	if e.protobuf {
		e.frames = protobuf.LengthDelimitedFramer.NewFrameWriter(w)
	}
	return e
}

func (e *eventWriter) start() {
	if e.protobuf {
		e.w.Header().Set("Content-Type", watchProtobufMediaType)
	} else {
		e.w.Header().Set("Content-Type", "application/json")
	}
	e.w.Header().Set("Transfer-Encoding", "chunked")
	e.w.WriteHeader(http.StatusOK)
	e.flush()
}

func (e *eventWriter) flush() {
	if e.flusher != nil {
		e.flusher.Flush()
	}
}

// write sends one event; false means the client is gone.
func (e *eventWriter) write(typ watch.EventType, obj runtime.Object) bool {
	var payload runtime.Object = obj
	if e.table && typ != watch.Bookmark {
		lm := metav1.ListMeta{}
		if accessor, err := meta.Accessor(obj); err == nil {
			lm.ResourceVersion = accessor.GetResourceVersion()
		}
		payload = e.s.table(e.st.kind, []runtime.Object{obj}, lm, e.r)
	}
	if err := e.encode(typ, payload); err != nil {
		return false
	}
	e.flush()
	return true
}

// encode writes one event in the stream's encoding.
func (e *eventWriter) encode(typ watch.EventType, obj runtime.Object) error {
	if !e.protobuf {
		return e.enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Object: obj}})
	}
	var inner bytes.Buffer
	if err := protobufSerializer.Encode(obj, &inner); err != nil {
		return err
	}
	var frame bytes.Buffer
	if err := rawProtobuf.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: inner.Bytes()}}, &frame); err != nil {
		return err
	}
	_, err := e.frames.Write(frame.Bytes())
	return err
}

func (e *eventWriter) writeError(err error) {
	_ = e.encode(watch.Error, toStatus(err))
	e.flush()
}
