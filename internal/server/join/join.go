// Package join lets a `knode server` whose etcd is embedded become a
// member of another server's etcd cluster: `knode server --join URL
// --token-file F` asks the server at URL, over its HTTPS API and with the
// cluster token as credentials, for the cluster's sealed bootstrap data
// (package bootstrap) and to add it as an etcd member, then starts its
// embedded member with the list it got back. This is k3s's model.
//
// What it owns:
//   - The paths a server serves for it (Paths), behind the API server's
//     authentication and authorization (system:masters; the cluster token
//     authenticates as such, see Authenticator):
//     GET /knode/v1/bootstrap answers the sealed bootstrap data;
//     GET /knode/v1/etcd/members lists the members;
//     POST /knode/v1/etcd/members adds one ({"name","peerURL"}), first
//     removing a member of the same name or peer URL (a server that comes
//     back with a new data directory, or a replacement at the dead one's
//     address), and answers the members the new one must start with;
//     DELETE /knode/v1/etcd/members?name=N removes a member, which is how
//     a dead member of another name is made room for: etcd refuses to add
//     a member while too few of the existing ones are started to keep a
//     quorum of the larger cluster.
//   - The joining side (Join): it trusts the server at URL only when the
//     CA that server sends with its certificate is the one the token's
//     hash pins, so the secret never goes to another party.
//
// What callers must do: serve Paths on a server whose embedded etcd is a
// cluster member, and add Authenticator to its authenticators; on a
// joining server, call Join before starting etcd, open the bootstrap data
// with the token (bootstrap.Ensure with Envelope as its store) and start
// the member with the answer's InitialCluster.
//
// What it deliberately does not do: remove members on its own (a dead
// member stays listed until someone removes it or a server replaces it by
// name), move learners or promote them (members are added as voters), or
// convert a lone embedded etcd into a cluster member.
package join

import (
	"bytes"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/auth"
	"knode/internal/auth/bootstrap"
	"knode/internal/storage/etcd"
)

// Paths served for joining servers.
const (
	BootstrapPath = "/knode/v1/bootstrap"
	MembersPath   = "/knode/v1/etcd/members"
)

// ServerUser is who the cluster token authenticates as, in ServerGroup:
// a server joining the cluster. Authorizer lets it do what a join needs
// and nothing else; the API answers it as any other user without rights.
// (The token opens the CA's key, so its holder could mint itself an admin
// certificate; the token alone still grants no more than joining, as
// k3s's server token grants only its supervisor's paths.)
const (
	ServerUser  = "system:knode-server"
	ServerGroup = "system:knode-servers"
)

// Members is the little of an etcd member that the paths need
// (*etcd.Store).
type Members interface {
	Members(ctx context.Context) ([]etcd.Member, error)
	AddMember(ctx context.Context, peerURL string) (etcd.Member, []etcd.Member, error)
	RemoveMember(ctx context.Context, id uint64) error
}

// ErrUnavailable: the server could not change or read the membership now
// (503), e.g. because etcd refuses to add a member until the newest one
// has been connected for a few seconds; a later attempt may succeed.
var ErrUnavailable = errors.New("try again later")

// Member is a member as the paths show it.
type Member struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
}

// AddRequest is POST MembersPath's body.
type AddRequest struct {
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
}

// MemberList is what the members paths answer. After an add, every member
// has a name (the new one's is the requested name), so that it is the
// new member's initial cluster.
type MemberList struct {
	Members []Member `json:"members"`
	// Removed are the members an add replaced.
	Removed []Member `json:"removed,omitempty"`
}

// InitialCluster is the list as etcd's initial cluster: name to peer URL.
func (l MemberList) InitialCluster() map[string]string {
	out := map[string]string{}
	for _, m := range l.Members {
		if len(m.PeerURLs) == 0 {
			continue
		}
		// A member added but not started has no name yet; etcd matches
		// members by URL, so any unique name does.
		name := m.Name
		if name == "" {
			name = "unstarted-" + m.ID
		}
		out[name] = m.PeerURLs[0]
	}
	return out
}

// Validate checks an add request: a member name as etcd's and knode's
// flags allow, and an https peer URL with a host and port.
func (r AddRequest) Validate() error {
	var errs field.ErrorList
	if r.Name == "" {
		errs = append(errs, field.Required(field.NewPath("name"), "the new member's name"))
	} else if strings.ContainsAny(r.Name, "=,") || len(r.Name) > 253 {
		errs = append(errs, field.Invalid(field.NewPath("name"), r.Name, "must not contain '=' or ',' and be at most 253 characters"))
	}
	if err := checkPeerURL(r.PeerURL); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("peerURL"), r.PeerURL, err.Error()))
	}
	return errs.ToAggregate()
}

func checkPeerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || u.Path != "" || u.RawQuery != "" {
		return errors.New("must be https://host:port (peer traffic is TLS)")
	}
	return nil
}

// Replaced are the members an add of req must remove first: those of the
// same name, and those at the same peer URL. Pure.
func Replaced(members []etcd.Member, req AddRequest) []etcd.Member {
	var out []etcd.Member
	for _, m := range members {
		if (m.Name != "" && m.Name == req.Name) || slices.Contains(m.PeerURLs, req.PeerURL) {
			out = append(out, m)
		}
	}
	return out
}

func memberView(m etcd.Member) Member {
	return Member{ID: fmt.Sprintf("%x", m.ID), Name: m.Name, PeerURLs: m.PeerURLs}
}

// PathsConfig is what Paths serves from.
type PathsConfig struct {
	// Members is this server's etcd member; nil answers 409 on the member
	// paths (a lone embedded etcd, or an external cluster).
	Members Members
	// Envelope reads the sealed bootstrap data. Required.
	Envelope func(ctx context.Context) ([]byte, error)
}

// Paths are the handlers to serve, keyed by exact path.
func Paths(cfg PathsConfig) map[string]http.Handler {
	return map[string]http.Handler{
		BootstrapPath: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet {
				httpError(w, http.StatusMethodNotAllowed, "only GET")
				return
			}
			data, err := cfg.Envelope(r.Context())
			if err != nil {
				httpError(w, http.StatusInternalServerError, "reading the bootstrap data: "+err.Error())
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(data)
		}),
		MembersPath: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serveMembers(w, r, cfg.Members) }),
	}
}

func serveMembers(w http.ResponseWriter, r *http.Request, members Members) {
	if members == nil {
		httpError(w, http.StatusConflict, "this server's etcd is not an embedded cluster member (start the first server with --cluster-init)")
		return
	}
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		list, err := members.Members(ctx)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, "listing etcd members: "+err.Error())
			return
		}
		writeList(w, MemberList{Members: views(list)})
	case http.MethodPost:
		var req AddRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
			httpError(w, http.StatusBadRequest, "decoding the request: "+err.Error())
			return
		}
		if err := req.Validate(); err != nil {
			httpError(w, http.StatusBadRequest, err.Error())
			return
		}
		list, err := members.Members(ctx)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, "listing etcd members: "+err.Error())
			return
		}
		var out MemberList
		for _, m := range Replaced(list, req) {
			if err := members.RemoveMember(ctx, m.ID); err != nil {
				httpError(w, http.StatusServiceUnavailable, fmt.Sprintf("removing member %s (%x), which %s replaces: %v", m.Name, m.ID, req.Name, err))
				return
			}
			out.Removed = append(out.Removed, memberView(m))
		}
		added, all, err := members.AddMember(ctx, req.PeerURL)
		switch {
		case errors.Is(err, etcd.ErrUnsafeMemberChange):
			httpError(w, http.StatusServiceUnavailable, "adding the etcd member: "+err.Error()+" (etcd counts a member as started once it has been connected for 5 s; a dead member must be removed first: DELETE "+MembersPath+"?name=NAME)")
			return
		case err != nil:
			httpError(w, http.StatusServiceUnavailable, "adding the etcd member: "+err.Error())
			return
		}
		for _, m := range all {
			if m.ID == added.ID {
				m.Name = req.Name
			}
			out.Members = append(out.Members, memberView(m))
		}
		writeList(w, out)
	case http.MethodDelete:
		name := r.URL.Query().Get("name")
		if name == "" {
			httpError(w, http.StatusBadRequest, "name: Required value: the member to remove")
			return
		}
		list, err := members.Members(ctx)
		if err != nil {
			httpError(w, http.StatusServiceUnavailable, "listing etcd members: "+err.Error())
			return
		}
		i := slices.IndexFunc(list, func(m etcd.Member) bool { return m.Name == name })
		if i < 0 {
			httpError(w, http.StatusNotFound, fmt.Sprintf("no etcd member named %q", name))
			return
		}
		if err := members.RemoveMember(ctx, list[i].ID); err != nil {
			httpError(w, http.StatusServiceUnavailable, "removing the etcd member: "+err.Error())
			return
		}
		writeList(w, MemberList{Removed: []Member{memberView(list[i])}})
	default:
		httpError(w, http.StatusMethodNotAllowed, "GET, POST or DELETE")
	}
}

func views(list []etcd.Member) []Member {
	out := make([]Member, 0, len(list))
	for _, m := range list {
		out = append(out, memberView(m))
	}
	return out
}

func writeList(w http.ResponseWriter, l MemberList) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(l)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg+"\n")
}

// Authenticator admits requests carrying the cluster token's secret as
// basic credentials "server:<secret>" (as k3s's servers present it) as
// ServerUser in ServerGroup.
type Authenticator struct{ Secret string }

// Authenticate implements auth.Authenticator.
func (a Authenticator) Authenticate(r *http.Request) (*auth.User, bool, error) {
	user, pass, ok := r.BasicAuth()
	if !ok || user != "server" || a.Secret == "" {
		return nil, false, nil
	}
	if subtle.ConstantTimeCompare([]byte(pass), []byte(a.Secret)) != 1 {
		return nil, false, nil
	}
	return &auth.User{Name: ServerUser, Groups: []string{ServerGroup, auth.AuthenticatedGroup}}, true, nil
}

// Authorizer allows ServerGroup what a join does: GET BootstrapPath, and
// GET, POST and DELETE MembersPath. It has no opinion about anything
// else, or anyone else (system:masters may use the paths through
// auth.MastersAuthorizer).
type Authorizer struct{}

// Authorize implements auth.Authorizer.
func (Authorizer) Authorize(_ context.Context, a auth.Attributes) (auth.Decision, string, error) {
	if !a.User.InGroup(ServerGroup) || a.ResourceRequest {
		return auth.NoOpinion, "", nil
	}
	switch {
	case a.Path == BootstrapPath && a.Verb == "get",
		a.Path == MembersPath && (a.Verb == "get" || a.Verb == "post" || a.Verb == "delete"):
		return auth.Allow, "", nil
	}
	return auth.NoOpinion, "", nil
}

// Config is a joining server's request.
type Config struct {
	// URL is a server of the cluster, https://host:port (--join).
	URL string
	// Token is the full cluster token: its CA hash decides whom to trust.
	Token bootstrap.Token
	// Name and PeerURL are the new member's.
	Name    string
	PeerURL string
	// Timeout bounds each request; zero means 30 s.
	Timeout time.Duration
}

// Result is what a joining server starts from.
type Result struct {
	// Envelope is the sealed bootstrap data, for bootstrap.Ensure.
	Envelope []byte
	// Members is the cluster with the new member in it.
	Members MemberList
}

// Join fetches the bootstrap data from cfg.URL and adds the member.
func Join(ctx context.Context, cfg Config) (Result, error) {
	c, base, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if res.Envelope, err = c.do(ctx, base, http.MethodGet, BootstrapPath, nil); err != nil {
		return Result{}, err
	}
	body, err := json.Marshal(AddRequest{Name: cfg.Name, PeerURL: cfg.PeerURL})
	if err != nil {
		return Result{}, err
	}
	out, err := c.do(ctx, base, http.MethodPost, MembersPath, body)
	if err != nil {
		return Result{}, err
	}
	if err := json.Unmarshal(out, &res.Members); err != nil {
		return Result{}, fmt.Errorf("--join %s: decoding the member list: %w", cfg.URL, err)
	}
	return res, nil
}

// List asks cfg.URL for the members (cfg.Name and PeerURL unused).
func List(ctx context.Context, cfg Config) (MemberList, error) {
	c, base, err := newClient(cfg)
	if err != nil {
		return MemberList{}, err
	}
	out, err := c.do(ctx, base, http.MethodGet, MembersPath, nil)
	if err != nil {
		return MemberList{}, err
	}
	var l MemberList
	if err := json.Unmarshal(out, &l); err != nil {
		return MemberList{}, fmt.Errorf("--join %s: decoding the member list: %w", cfg.URL, err)
	}
	return l, nil
}

type client struct {
	http   *http.Client
	secret string
	url    string
}

func newClient(cfg Config) (*client, *url.URL, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, nil, fmt.Errorf("--join %q: must be an https:// URL of a server of the cluster", cfg.URL)
	}
	if cfg.Token.CAHash == "" {
		return nil, nil, errors.New("--join needs the cluster's full token (K10<ca hash>::server:<secret>, as `knode token` prints it): a bare secret cannot tell the cluster's servers from any other")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is checked below, against the CA the token pins,
		// instead of a root the joining server does not have yet.
		InsecureSkipVerify: true,
		VerifyConnection:   pinnedCA(cfg.Token, u.Hostname()),
	}
	hc := &http.Client{Timeout: cfg.Timeout, Transport: &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true}}
	return &client{http: hc, secret: cfg.Token.Secret, url: cfg.URL}, u, nil
}

// pinnedCA accepts a server whose chain holds the CA the token pins and
// whose leaf that CA signed for host.
func pinnedCA(token bootstrap.Token, host string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server sent no certificate")
		}
		for _, c := range cs.PeerCertificates[1:] {
			caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
			if token.CheckCA(caPEM) != nil {
				continue
			}
			pool := x509.NewCertPool()
			pool.AddCert(c)
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
			return err
		}
		return errors.New("the server's certificate chain does not hold the CA the cluster token pins: is it a server of this cluster?")
	}
}

func (c *client) do(ctx context.Context, base *url.URL, method, path string, body []byte) ([]byte, error) {
	u := *base
	u.Path = path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth("server", c.secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--join %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("--join %s: %s %s: %w", c.url, method, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("--join %s: the server refused the cluster token (401): is it this cluster's token?", c.url)
	case resp.StatusCode == http.StatusServiceUnavailable:
		return nil, fmt.Errorf("--join %s: %s %s: %s: %s: %w", c.url, method, path, resp.Status, strings.TrimSpace(string(out)), ErrUnavailable)
	case resp.StatusCode >= 300:
		return nil, fmt.Errorf("--join %s: %s %s: %s: %s", c.url, method, path, resp.Status, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Envelope is a bootstrap.Store holding the data Join fetched, for a
// joining server's bootstrap.Ensure: it never creates.
type Envelope []byte

// Get implements bootstrap.Store.
func (e Envelope) Get(context.Context, string) ([]byte, bool, error) {
	return []byte(e), len(e) > 0, nil
}

// CreateIfAbsent implements bootstrap.Store: a joining server never writes.
func (e Envelope) CreateIfAbsent(context.Context, string, []byte) (bool, error) {
	return false, errors.New("a joining server does not create the cluster's bootstrap data")
}
