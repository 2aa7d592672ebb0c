package join_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knode/internal/auth"
	"knode/internal/auth/bootstrap"
	"knode/internal/server/join"
	"knode/internal/storage/etcd"
)

func TestReplaced(t *testing.T) {
	members := []etcd.Member{
		{ID: 1, Name: "a", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 2, Name: "b", PeerURLs: []string{"https://10.0.0.2:2380"}},
		{ID: 3, Name: "", PeerURLs: []string{"https://10.0.0.3:2380"}},
	}
	for _, tc := range []struct {
		name string
		req  join.AddRequest
		want []uint64
	}{
		{"a new member replaces none", join.AddRequest{Name: "d", PeerURL: "https://10.0.0.4:2380"}, nil},
		{"the same name is replaced", join.AddRequest{Name: "b", PeerURL: "https://10.0.0.9:2380"}, []uint64{2}},
		{"the same peer URL is replaced", join.AddRequest{Name: "z", PeerURL: "https://10.0.0.1:2380"}, []uint64{1}},
		{"an unstarted member at the URL is replaced", join.AddRequest{Name: "c", PeerURL: "https://10.0.0.3:2380"}, []uint64{3}},
		{"name of one, URL of another: both", join.AddRequest{Name: "a", PeerURL: "https://10.0.0.2:2380"}, []uint64{1, 2}},
		{"an empty name matches no unnamed member", join.AddRequest{Name: "", PeerURL: "https://10.0.0.5:2380"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []uint64
			for _, m := range join.Replaced(members, tc.req) {
				got = append(got, m.ID)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replaced (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddRequestValidate(t *testing.T) {
	for _, tc := range []struct {
		req  join.AddRequest
		want string
	}{
		{join.AddRequest{Name: "s2", PeerURL: "https://127.0.0.1:2380"}, ""},
		{join.AddRequest{PeerURL: "https://127.0.0.1:2380"}, "name: Required value"},
		{join.AddRequest{Name: "a=b", PeerURL: "https://127.0.0.1:2380"}, `name: Invalid value: "a=b": must not contain '=' or ','`},
		{join.AddRequest{Name: "s2", PeerURL: "http://127.0.0.1:2380"}, "peerURL: Invalid value: \"http://127.0.0.1:2380\": must be https://host:port (peer traffic is TLS)"},
		{join.AddRequest{Name: "s2", PeerURL: "https://127.0.0.1"}, "must be https://host:port"},
		{join.AddRequest{Name: "s2", PeerURL: "https://127.0.0.1:2380/x"}, "must be https://host:port"},
		{join.AddRequest{Name: "s2", PeerURL: "https://127.0.0.1:2380/"}, "must be https://host:port"},
	} {
		err := tc.req.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want no error", tc.req, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want an error containing %q", tc.req, err, tc.want)
		}
	}
}

// cluster is a server of a cluster as far as the join paths go: the
// cluster's PKI serving the paths behind the token's authenticator.
type cluster struct {
	url   string
	token bootstrap.Token
	ca    []byte
}

func startCluster(t *testing.T, envelope []byte) cluster {
	t.Helper()
	dir := t.TempDir()
	pki, err := auth.EnsurePKI(auth.PKIConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	token, err := bootstrap.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	token = token.WithCA(pki.CAPEM())
	paths := join.Paths(join.PathsConfig{Envelope: func(context.Context) ([]byte, error) { return envelope, nil }})
	authn := join.Authenticator{Secret: token.Secret}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := authn.Authenticate(r)
		if err != nil || !ok || u.Name != join.ServerUser {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h, ok := paths[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv.TLS = pki.TLSConfig()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return cluster{url: srv.URL, token: token, ca: pki.CAPEM()}
}

// TestJoinTrustsOnlyThePinnedCA: the joining side sends its secret only to
// a server whose chain holds the CA the token pins; a wrong secret is
// refused with a message saying so; a server with no etcd cluster member
// answers the add with 409, which Join passes on.
func TestJoinTrustsOnlyThePinnedCA(t *testing.T) {
	sealed, err := bootstrap.Seal("a-secret-of-enough-length", map[string][]byte{"ca.crt": []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster(t, sealed)
	other := startCluster(t, sealed)
	ctx := context.Background()
	base := join.Config{URL: c.url, Token: c.token, Name: "s2", PeerURL: "https://127.0.0.1:2380"}

	_, err = join.Join(ctx, base)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "--cluster-init") {
		t.Fatalf("join through a server without a cluster member: %v, want its 409 naming --cluster-init", err)
	}

	// The envelope comes back as stored, over the pinned TLS.
	l, err := join.List(ctx, base)
	if err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("List: %v %+v, want 409", err, l)
	}

	wrongCA := base
	wrongCA.URL = other.url
	if _, err := join.Join(ctx, wrongCA); err == nil || !strings.Contains(err.Error(), "does not hold the CA the cluster token pins") {
		t.Fatalf("join through another cluster's server: %v, want the CA refused", err)
	}

	wrongSecret := base
	wrongSecret.Token.Secret = "another-secret-of-enough-length"
	if _, err := join.Join(ctx, wrongSecret); err == nil || !strings.Contains(err.Error(), "refused the cluster token (401)") {
		t.Fatalf("join with a wrong secret: %v, want 401", err)
	}

	bare := base
	bare.Token.CAHash = ""
	if _, err := join.Join(ctx, bare); err == nil || !strings.Contains(err.Error(), "full token") {
		t.Fatalf("join with a bare secret: %v, want the full token asked for", err)
	}
}

func TestEnvelopeStore(t *testing.T) {
	// A joining server's bootstrap.Ensure opens what Join fetched, and
	// writes the cluster's CA and the token into its directories.
	src := t.TempDir()
	pki, err := auth.EnsurePKI(auth.PKIConfig{Dir: src})
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := os.ReadFile(filepath.Join(src, auth.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	token, err := bootstrap.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := bootstrap.Seal(token.Secret, map[string][]byte{auth.CACertFile: pki.CAPEM(), auth.CAKeyFile: caKey})
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	pkiDir := filepath.Join(dataDir, "pki")
	got, err := bootstrap.Ensure(context.Background(), bootstrap.Config{
		Store: join.Envelope(sealed), PKIDir: pkiDir, DataDir: dataDir, Token: token.WithCA(pki.CAPEM()).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != token.WithCA(pki.CAPEM()).String() {
		t.Errorf("Ensure returned token %q", got)
	}
	ca, err := os.ReadFile(filepath.Join(pkiDir, auth.CACertFile))
	if err != nil || string(ca) != string(pki.CAPEM()) {
		t.Errorf("the joining server's ca.crt differs from the cluster's (%v)", err)
	}
	if created, err := join.Envelope(sealed).CreateIfAbsent(context.Background(), "/k", nil); created || err == nil {
		t.Errorf("CreateIfAbsent = %v, %v; a joining server never creates", created, err)
	}
}

func TestInitialCluster(t *testing.T) {
	l := join.MemberList{Members: []join.Member{
		{ID: "1", Name: "a", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: "2", Name: "", PeerURLs: []string{"https://10.0.0.2:2380"}},
		{ID: "3", Name: "", PeerURLs: []string{"https://10.0.0.3:2380"}},
		{ID: "4", Name: "d"},
	}}
	want := map[string]string{"a": "https://10.0.0.1:2380", "unstarted-2": "https://10.0.0.2:2380", "unstarted-3": "https://10.0.0.3:2380"}
	if diff := cmp.Diff(want, l.InitialCluster()); diff != "" {
		t.Errorf("initial cluster (-want +got):\n%s", diff)
	}
}

// The cluster token authenticates as ServerUser in ServerGroup, not in
// system:masters, and Authorizer allows that group the join's requests and
// nothing else.
func TestTokenGrantsOnlyTheJoin(t *testing.T) {
	authn := join.Authenticator{Secret: "a-secret-of-enough-length"}
	r := httptest.NewRequest(http.MethodGet, join.MembersPath, nil)
	r.SetBasicAuth("server", "a-secret-of-enough-length")
	u, ok, err := authn.Authenticate(r)
	if err != nil || !ok {
		t.Fatalf("Authenticate: %v %v", ok, err)
	}
	if u.Name != join.ServerUser || !u.InGroup(join.ServerGroup) || u.InGroup(auth.MastersGroup) {
		t.Fatalf("the token authenticates as %+v, want %s in %s and not in %s", u, join.ServerUser, join.ServerGroup, auth.MastersGroup)
	}
	other := &auth.User{Name: "alice", Groups: []string{auth.AuthenticatedGroup}}
	for _, tc := range []struct {
		name string
		a    auth.Attributes
		want auth.Decision
	}{
		{"fetch the bootstrap data", auth.Attributes{User: u, Verb: "get", Path: join.BootstrapPath}, auth.Allow},
		{"list the members", auth.Attributes{User: u, Verb: "get", Path: join.MembersPath}, auth.Allow},
		{"add a member", auth.Attributes{User: u, Verb: "post", Path: join.MembersPath}, auth.Allow},
		{"remove a member", auth.Attributes{User: u, Verb: "delete", Path: join.MembersPath}, auth.Allow},
		{"replace the bootstrap data", auth.Attributes{User: u, Verb: "post", Path: join.BootstrapPath}, auth.NoOpinion},
		{"put the members", auth.Attributes{User: u, Verb: "put", Path: join.MembersPath}, auth.NoOpinion},
		{"another path", auth.Attributes{User: u, Verb: "get", Path: "/metrics"}, auth.NoOpinion},
		{"a resource", auth.Attributes{User: u, Verb: "list", Path: "/api/v1/nodes", Resource: "nodes", APIVersion: "v1", ResourceRequest: true}, auth.NoOpinion},
		{"another user", auth.Attributes{User: other, Verb: "get", Path: join.BootstrapPath}, auth.NoOpinion},
		{"no user", auth.Attributes{Verb: "get", Path: join.BootstrapPath}, auth.NoOpinion},
	} {
		if got, _, err := (join.Authorizer{}).Authorize(context.Background(), tc.a); err != nil || got != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, got, err, tc.want)
		}
	}
}
