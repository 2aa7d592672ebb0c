// Package apitest starts knode's real API server (the real kinds, the
// apiserver handlers, static tokens) over a memory store behind httptest,
// for tests. It is an ordinary package only so that many packages' tests
// can share it; nothing but tests may import it.
//
// A test calls Start and talks to the server through Admin or Client;
// the server closes when the test ends. It serves plain HTTP (TLS is
// covered end to end in test/e2e) and runs no controllers.
//
// apitest imports internal/server, which imports the admission plugins and
// the controllers, so their tests can use it only from an external test
// package (package foo_test); a test in package foo would be an import
// cycle.
package apitest

import (
	"context"
	"github.com/prometheus/client_golang/prometheus"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/registry"
	"knode/internal/server"
	"knode/internal/storage"
	"knode/internal/storage/memory"
	"knode/internal/version"
)

// AdminToken is always served: it is user "admin" (uid "1") in
// system:masters.
const AdminToken = "admintoken"

const adminLine = AdminToken + `,admin,1,"system:masters"`

// Options shape the server; the zero value is an admin-only server with
// no admission, on the real clock, over a fresh memory store.
type Options struct {
	// Tokens are further lines of a static token file
	// (token,user,uid,"group1,group2"), served beside AdminToken.
	Tokens []string
	// NodeRules adds the node authorizer and NodeRestriction as knode
	// server wires them (server.NodeAccess). Without it only
	// system:masters is authorized.
	NodeRules bool
	// Admission runs on every write, in order, after NodeRestriction when
	// NodeRules is set.
	Admission []apiserver.Admitter
	// Clock is the API server's clock; nil means the real clock.
	Clock clock.WithTicker
	// Store is served instead of a fresh memory store; two Servers given
	// the same Store are two API servers over one storage.
	Store storage.Interface
	// Wrap, when set, is put in front of the API server's handler, to
	// watch or change requests.
	Wrap func(http.Handler) http.Handler
	// StrictReads is apiserver.Config.StrictReads.
	StrictReads bool
	// Metrics is apiserver.Config.Metrics.
	Metrics prometheus.Registerer
	// Logger receives the API server's log; nil discards it.
	Logger *slog.Logger
	// Kinds are served beside server.Kinds(); a kind whose group and
	// resource knode server already serves is skipped.
	Kinds []registry.Kind
}

// Server is a running test API server. Its fields are not to be changed.
type Server struct {
	// URL is the http:// address of the server.
	URL string
	// Store is the storage served.
	Store storage.Interface
	// API is the handler behind URL.
	API *apiserver.Server
	// AdminConfig and Admin act as AdminToken.
	AdminConfig *rest.Config
	Admin       kubernetes.Interface
}

// Start builds the API server, creates the system namespaces, serves it
// until t ends, and returns it. Any failure ends t.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	tokens, err := auth.ParseTokenFile(strings.NewReader(strings.Join(append([]string{adminLine}, opts.Tokens...), "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	store := opts.Store
	if store == nil {
		store = memory.New(memory.Config{})
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var api *apiserver.Server
	var authz auth.Authorizer
	var admission []apiserver.Admitter
	if opts.NodeRules {
		var nodeRestriction apiserver.Admitter
		authz, nodeRestriction = server.NodeAccess(func() *apiserver.Server { return api })
		admission = append(admission, nodeRestriction)
	}
	admission = append(admission, opts.Admission...)
	api, err = apiserver.New(apiserver.Config{
		Storage:       store,
		Kinds:         kinds(opts.Kinds),
		Authenticator: auth.UnionAuthenticator{tokens},
		Authorizer:    authz,
		Admission:     admission,
		Clock:         opts.Clock,
		Version:       version.Info(),
		Logger:        logger,
		StrictReads:   opts.StrictReads,
		Metrics:       opts.Metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.EnsureNamespaces(context.Background()); err != nil {
		t.Fatal(err)
	}
	var handler http.Handler = api
	if opts.Wrap != nil {
		handler = opts.Wrap(api)
	}
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	// Runs before ts.Close: ending the caches ends the watches they serve.
	t.Cleanup(api.Close)
	s := &Server{URL: ts.URL, Store: store, API: api}
	s.AdminConfig = s.Config(AdminToken)
	s.Admin = s.Client(t, AdminToken)
	return s
}

// kinds are server.Kinds() followed by those of extra that it does not
// already serve.
func kinds(extra []registry.Kind) []registry.Kind {
	ks := server.Kinds()
	served := map[string]bool{}
	for _, k := range ks {
		served[k.GroupVersion.Group+"/"+k.Resource] = true
	}
	for _, k := range extra {
		if !served[k.GroupVersion.Group+"/"+k.Resource] {
			served[k.GroupVersion.Group+"/"+k.Resource] = true
			ks = append(ks, k)
		}
	}
	return ks
}

// Config is a client config acting as token, without client-side rate
// limits. Each call returns a new value the caller may change.
func (s *Server) Config(token string) *rest.Config {
	return &rest.Config{Host: s.URL, BearerToken: token, QPS: -1}
}

// Client is a clientset acting as token.
func (s *Server) Client(t testing.TB, token string) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.Config(token))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
