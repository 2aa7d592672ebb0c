// Package apiserver serves knode's objects over the Kubernetes REST API.
//
// It owns the HTTP surface: routing by the Kubernetes URL layout, discovery
// (legacy and aggregated v2), JSON, protobuf and Table responses, watch
// streams, the three patch forms, fieldValidation, and metav1.Status
// errors. It keeps objects in a storage.Interface through per-kind rules
// from registry.Kind, in upstream's storage encoding (storagecodec.go).
//
// The caller supplies an authenticator and authorizer, and serves the
// handler over TLS. The package never listens itself and keeps no state
// beyond what is in storage, so several servers may share one store.
//
// pods/log is proxied to the agent of the pod's node (podlog.go), with the
// client certificate of Config.Kubelet.
//
// Not here: server-side apply (answered with 415), CBOR, RBAC, the other
// node proxies (exec, attach, port-forward, nodes/proxy).
package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/clock"

	"knode/internal/auth"
	"knode/internal/registry"
	"knode/internal/storage"
)

// DefaultMaxBodyBytes is the largest request body accepted (3 MiB, as
// upstream's limit for a single object).
const DefaultMaxBodyBytes = 3 * 1024 * 1024

// Admitter can refuse or change a write before it is stored. It sees the
// typed object after decoding and defaulting, and the stored object on
// updates (nil on create), which it must not change: the server may share
// it with other requests.
type Admitter interface {
	Admit(ctx context.Context, a AdmissionAttributes) error
}

// AdmissionAttributes describe one write for admission.
type AdmissionAttributes struct {
	Operation   string // CREATE, UPDATE, DELETE
	Kind        *registry.Kind
	Namespace   string
	Name        string
	Subresource string
	Object      interface{} // runtime.Object; nil on DELETE
	Old         interface{} // runtime.Object; nil on CREATE
	User        *auth.User
	DryRun      bool
}

// Config builds a Server.
type Config struct {
	// Storage holds every object. Required.
	Storage storage.Interface
	// Kinds served. Required.
	Kinds []registry.Kind
	// Authenticator identifies callers; nil refuses every request that
	// needs credentials.
	Authenticator auth.Authenticator
	// Authorizer decides; nil allows only system:masters.
	Authorizer auth.Authorizer
	// Admission runs in order on every write.
	Admission []Admitter
	// Clock stamps creation and deletion times and times watches. Zero value:
	// the real clock.
	Clock clock.WithTicker
	// Version is served at /version.
	Version version.Info
	// OpenAPI serves /openapi/v2 and /openapi/v3; nil answers 404.
	OpenAPI http.Handler
	// Extra serves further non-resource paths (e.g. /metrics) after
	// authentication and authorization; keyed by exact path.
	Extra map[string]http.Handler
	// Ready reports whether the server can serve; nil means always.
	Ready func() error
	// MaxBodyBytes caps request bodies; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// StrictReads makes reads at any revision (resourceVersion "0") as
	// current as consistent reads, so that what a read returns depends only
	// on the writes made before it: the simulator sets it. Without it, as
	// upstream, they are answered from the watch caches at once.
	StrictReads bool
	// Metrics, when set, receives apiserver_request_total and
	// apiserver_request_duration_seconds.
	Metrics prometheus.Registerer
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Kubelet, when set, is how pods/log reaches the node agents (see
	// KubeletClientConfig). Nil answers pods/log with 503 once the request
	// has been checked.
	Kubelet *KubeletClientConfig
}

// Server is the HTTP handler of the Kubernetes API.
type Server struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.WithTicker
	stores map[schema.GroupVersionResource]*objectStore
	// byGroup lists the kinds of each group version, in Config order.
	groups    []groupInfo
	namespace *objectStore
	metrics   *requestMetrics
	// kubelet is nil when Config.Kubelet is.
	kubelet *kubeletClient
	// stopping is closed by Close; the watch caches end with it.
	stopping  chan struct{}
	closeOnce sync.Once
}

type groupInfo struct {
	gv    schema.GroupVersion
	kinds []*registry.Kind
}

// New checks cfg and builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Storage == nil {
		return nil, errors.New("apiserver: Config.Storage is required")
	}
	if len(cfg.Kinds) == 0 {
		return nil, errors.New("apiserver: Config.Kinds is empty")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = auth.MastersAuthorizer{}
	}
	s := &Server{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, stores: map[schema.GroupVersionResource]*objectStore{}, stopping: make(chan struct{})}
	if cfg.Kubelet != nil {
		if len(cfg.Kubelet.Certificate.Certificate) == 0 || cfg.Kubelet.Certificate.PrivateKey == nil {
			return nil, errors.New("apiserver: Config.Kubelet.Certificate: a certificate and its private key are required")
		}
		s.kubelet = newKubeletClient(cfg.Kubelet, cfg.Clock.Now)
	}
	if cfg.Metrics != nil {
		m, err := newRequestMetrics(cfg.Metrics)
		if err != nil {
			return nil, fmt.Errorf("apiserver: registering metrics: %w", err)
		}
		s.metrics = m
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	hub := newCacheHub(cfg.Storage, cfg.Clock, s.log, s.stopping)
	for i := range cfg.Kinds {
		k := &cfg.Kinds[i]
		gvr := k.GroupVersion.WithResource(k.Resource)
		if _, dup := s.stores[gvr]; dup {
			return nil, fmt.Errorf("apiserver: kind %s served twice", gvr)
		}
		st := newObjectStore(k, cfg.Storage, cfg.Clock)
		st.cache = newWatchCache(st, hub)
		s.stores[gvr] = st
		if k.Resource == "namespaces" && k.GroupVersion.Group == "" {
			s.namespace = s.stores[gvr]
		}
		found := false
		for gi := range s.groups {
			if s.groups[gi].gv == k.GroupVersion {
				s.groups[gi].kinds = append(s.groups[gi].kinds, k)
				found = true
			}
		}
		if !found {
			s.groups = append(s.groups, groupInfo{gv: k.GroupVersion, kinds: []*registry.Kind{k}})
		}
	}
	return s, nil
}

// Close stops the server's watch caches, which ends the watches they
// serve. The server must not serve requests afterwards.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.stopping)
		if s.kubelet != nil {
			s.kubelet.closeIdleConnections()
		}
	})
}

// Compacted tells the server that the store's history before revision is
// gone: its watch caches drop that history too, so that a watch from before
// it gets 410 Expired, as from the store.
func (s *Server) Compacted(revision int64) {
	for _, st := range s.stores {
		st.cache.compacted(revision)
	}
}

// Get reads one stored object, bypassing authorization and admission. It is
// for the server's own rules (the node authorizer's lookups); the error is
// a NotFound Status when the object does not exist.
func (s *Server) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	st, ok := s.stores[gvr]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
	}
	return st.Get(ctx, namespace, name)
}

// List reads a collection (namespace "" for all), bypassing authorization
// and admission, for the server's own rules.
func (s *Server) List(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]runtime.Object, error) {
	st, ok := s.stores[gvr]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	res, err := st.List(ctx, namespace, storage.ListOptions{}, nil)
	return res.items, err
}

// Create stores a new object as the server itself, bypassing
// authorization and admission (for built-in objects created at start).
func (s *Server) Create(ctx context.Context, gvr schema.GroupVersionResource, obj runtime.Object) (runtime.Object, error) {
	st, ok := s.stores[gvr]
	if !ok {
		return nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	return st.Create(ctx, accessor.GetNamespace(), obj, createOptions{})
}

// ServeHTTP handles one request. It never panics: a panic in a handler is
// logged and answered with a 500 Status.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			writeError(w, apierrors.NewInternalError(fmt.Errorf("panic: %v", p)))
		}
	}()
	switch r.URL.Path {
	case "/healthz", "/livez", "/readyz":
		s.serveHealth(w, r)
		return
	case "/version", "/version/":
		writeJSON(w, http.StatusOK, s.cfg.Version)
		return
	}
	user, err := s.authenticate(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// Impersonate-* headers: from here on the request acts as the
	// impersonated user, if the authenticated one may impersonate it.
	if user, err = auth.Impersonate(r.Context(), r, user, s.cfg.Authorizer); err != nil {
		writeError(w, err)
		return
	}
	ctx := auth.WithUser(r.Context(), user)
	r = r.WithContext(ctx)
	attrs := auth.RequestAttributes(r)
	attrs.User = user
	decision, reason, err := s.cfg.Authorizer.Authorize(ctx, attrs)
	if err != nil {
		s.log.Warn("authorizer error", "err", err)
	}
	if decision != auth.Allow {
		s.forbid(w, attrs, reason)
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		writeError(w, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", s.cfg.MaxBodyBytes)))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	if !attrs.ResourceRequest {
		s.serveNonResource(w, r)
		return
	}
	s.serveMeasured(w, r, attrs)
}

// authenticate returns the caller, or a 401 error.
func (s *Server) authenticate(r *http.Request) (*auth.User, error) {
	if s.cfg.Authenticator != nil {
		user, ok, err := s.cfg.Authenticator.Authenticate(r)
		if err != nil {
			s.log.Debug("authentication failed", "err", err)
			return nil, apierrors.NewUnauthorized("Unauthorized")
		}
		if ok {
			return user, nil
		}
	}
	return nil, apierrors.NewUnauthorized("Unauthorized")
}

func (s *Server) forbid(w http.ResponseWriter, a auth.Attributes, reason string) {
	writeError(w, forbidden(a, reason))
}

// forbidden is the 403 for a request the authorizer denied.
func forbidden(a auth.Attributes, reason string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: a.APIGroup, Resource: a.Resource}, a.Name, errors.New(reason))
	err.ErrStatus.Message = auth.Forbidden(a, reason)
	return err
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/readyz" && s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "readyz check failed: %v\n", err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) serveNonResource(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if strings.HasPrefix(path, "/openapi/") {
		if s.cfg.OpenAPI == nil {
			writeError(w, apierrors.NewNotFound(schema.GroupResource{}, path))
			return
		}
		s.cfg.OpenAPI.ServeHTTP(w, r)
		return
	}
	if h, ok := s.cfg.Extra[path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, apierrors.NewMethodNotSupported(schema.GroupResource{}, r.Method))
		return
	}
	if s.serveDiscovery(w, r, path) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	writeError(w, notFound())
}

// notFound is upstream's 404 for a path nothing serves.
func notFound() error {
	err := apierrors.NewNotFound(schema.GroupResource{}, "")
	err.ErrStatus.Message = "the server could not find the requested resource"
	err.ErrStatus.Details = &metav1.StatusDetails{}
	return err
}

// secondsDuration converts whole seconds to a Duration.
func secondsDuration(s int64) time.Duration { return time.Duration(s) * time.Second }
