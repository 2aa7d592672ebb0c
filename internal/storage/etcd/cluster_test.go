package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/auth"
	"knode/internal/storage"
	"knode/internal/storage/etcd/etcdtest"
)

// Raft timing of the test members: quick elections, yet slow enough that
// two busy cores do not make followers time out.
const (
	testHeartbeat = 50 * time.Millisecond
	testElection  = 500 * time.Millisecond
)

// startTimeout bounds a member start that should succeed.
const startTimeout = 20 * time.Second

// testCA is a cluster CA as a server keeps it (auth.EnsurePKI), made for
// one test.
type testCA struct {
	pki  *auth.PKI
	pem  []byte
	file string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	dir := t.TempDir()
	pki, err := auth.EnsurePKI(auth.PKIConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{pki: pki, pem: pki.CAPEM(), file: filepath.Join(dir, auth.CACertFile)}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue makes a member's peer pair (server and client auth, naming
// 127.0.0.1), as a server's EnsurePeerPair does, and returns its files.
func (ca *testCA) issue(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := ca.pki.EnsurePeerPair(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// testMember is one member's identity: name, URLs, pair, data directory.
type testMember struct {
	name, url, clientURL string
	cert, key, ca, dir   string
	logger               *zap.Logger
}

func newTestMember(t *testing.T, ca *testCA, name string, port int) testMember {
	t.Helper()
	cert, key := ca.issue(t)
	return testMember{
		name:   name,
		url:    fmt.Sprintf("https://127.0.0.1:%d", port),
		cert:   cert,
		key:    key,
		ca:     ca.file,
		dir:    t.TempDir(),
		logger: testLogger(t, name),
	}
}

func (m testMember) config(initial map[string]string, existing bool) EmbeddedConfig {
	return EmbeddedConfig{
		DataDir:           m.dir,
		Name:              m.name,
		HeartbeatInterval: testHeartbeat,
		ElectionTimeout:   testElection,
		Logger:            m.logger,
		Peer: &PeerConfig{
			URL:            m.url,
			ClientURL:      m.clientURL,
			CertFile:       m.cert,
			KeyFile:        m.key,
			TrustedCAFile:  m.ca,
			InitialCluster: initial,
			Existing:       existing,
		},
	}
}

// testLogger keeps etcd's warnings and errors and shows them only when the
// test fails (registered first, so it runs after the members are closed).
func testLogger(t *testing.T, name string) *zap.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	ws := zapcore.AddSync(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}))
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("etcd log of %s:\n%s", name, buf.String())
		}
	})
	return zap.New(zapcore.NewCore(enc, ws, zapcore.WarnLevel))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// start starts one member and closes it when the test ends.
func start(t *testing.T, cfg EmbeddedConfig) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	s, err := NewEmbedded(ctx, cfg)
	if err != nil {
		t.Fatalf("NewEmbedded(%s): %v", cfg.Name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// startTogether starts the members of a new cluster at once (none is ready
// before a quorum runs).
func startTogether(t *testing.T, cfgs ...EmbeddedConfig) []*Store {
	t.Helper()
	stores := make([]*Store, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), startTimeout)
	defer cancel()
	for i, cfg := range cfgs {
		wg.Go(func() { stores[i], errs[i] = NewEmbedded(ctx, cfg) })
	}
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	return stores
}

// newCluster starts three members named a, b and c of a new cluster.
func newCluster(t *testing.T, ca *testCA) ([]testMember, []*Store) {
	t.Helper()
	ports := etcdtest.FreePorts(t, 3)
	var members []testMember
	initial := map[string]string{}
	for i, name := range []string{"a", "b", "c"} {
		m := newTestMember(t, ca, name, ports[i])
		members = append(members, m)
		initial[name] = m.url
	}
	var cfgs []EmbeddedConfig
	for _, m := range members {
		cfgs = append(cfgs, m.config(initial, false))
	}
	return members, startTogether(t, cfgs...)
}

// mustGet reads key through s and expects value.
func mustGet(t *testing.T, s *Store, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	kv, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if string(kv.Value) != value {
		t.Fatalf("Get(%s) = %q, want %q", key, kv.Value, value)
	}
}

func mustCreate(t *testing.T, s *Store, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Create(ctx, key, []byte(value)); err != nil {
		t.Fatalf("Create(%s): %v", key, err)
	}
}

// retryUnsafe repeats a membership change that etcd refuses as unsafe (for
// the 5s after members connect) until it is accepted, or fails the test
// after a deadline.
func retryUnsafe(t *testing.T, what string, change func(context.Context) error) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err := change(ctx)
		cancel()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrUnsafeMemberChange) {
			t.Fatalf("%s: %v", what, err)
		}
		retry := time.NewTimer(200 * time.Millisecond)
		select {
		case <-deadline.C:
			retry.Stop()
			t.Fatalf("%s still refused: %v", what, err)
		case <-retry.C:
		}
	}
}

func memberNames(ms []Member) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

func memberByName(t *testing.T, ms []Member, name string) Member {
	t.Helper()
	for _, m := range ms {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no member %q in %v", name, ms)
	return Member{}
}

// TestClusterReplaceDeadMember forms a cluster of three, restarts a member,
// loses one, replaces it, and restarts the removed member's data.
func TestClusterReplaceDeadMember(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	ms, stores := newCluster(t, ca)
	a, b := stores[0], stores[1]

	// A write through one member is read (linearizable) through the others.
	mustCreate(t, a, "/k/1", "one")
	for _, s := range stores[1:] {
		mustGet(t, s, "/k/1", "one")
	}
	list, err := a.Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, memberNames(list)); diff != "" {
		t.Fatalf("members (-want +got):\n%s", diff)
	}
	cID := memberByName(t, list, "c").ID

	// c restarts on its data directory, without an initial cluster, and
	// catches up on what it missed.
	stores[2].Close()
	mustCreate(t, a, "/k/2", "two")
	restarted := ms[2].config(nil, false)
	c := start(t, restarted)
	mustGet(t, c, "/k/2", "two")
	mustCreate(t, c, "/k/2c", "from c")
	mustGet(t, a, "/k/2c", "from c")

	// c dies: the other two go on.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, a, "/k/3", "three")
	mustGet(t, b, "/k/3", "three")

	// Adding the replacement first would make four members with two
	// alive: etcd's strict reconfiguration check refuses it.
	ports := etcdtest.FreePorts(t, 1)
	d := newTestMember(t, ca, "d", ports[0])
	_, _, err = a.AddMember(t.Context(), d.url)
	if !errors.Is(err, ErrUnsafeMemberChange) {
		t.Fatalf("AddMember with a dead member = %v, want ErrUnsafeMemberChange", err)
	}

	// Remove the dead member, then add the replacement; etcd accepts the
	// add once a and b have been connected for 5s.
	retryUnsafe(t, "RemoveMember(c)", func(ctx context.Context) error { return a.RemoveMember(ctx, cID) })
	var added Member
	var all []Member
	retryUnsafe(t, "AddMember(d)", func(ctx context.Context) error {
		var err error
		added, all, err = a.AddMember(ctx, d.url)
		return err
	})
	if added.Name != "" || !slices.Equal(added.PeerURLs, []string{d.url}) || len(all) != 3 {
		t.Fatalf("AddMember = %+v, %+v; want an unnamed member at %s among 3", added, all, d.url)
	}
	initial := InitialClusterFor(all, added.ID, "d")
	want := map[string]string{"a": ms[0].url, "b": ms[1].url, "d": d.url}
	if diff := cmp.Diff(want, initial); diff != "" {
		t.Fatalf("InitialClusterFor (-want +got):\n%s", diff)
	}
	ds := start(t, d.config(initial, true))
	for key, value := range map[string]string{"/k/1": "one", "/k/2": "two", "/k/2c": "from c", "/k/3": "three"} {
		mustGet(t, ds, key, value)
	}
	list, err = ds.Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a", "b", "d"}, memberNames(list)); diff != "" {
		t.Fatalf("members after the replacement (-want +got):\n%s", diff)
	}

	// The removed member's data cannot come back: its peers answer it
	// "removed", and NewEmbedded says so rather than waiting for ctx.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	s, err := NewEmbedded(ctx, restarted)
	if err == nil {
		s.Close()
	}
	if !errors.Is(err, ErrMemberRemoved) {
		t.Fatalf("restarting the removed member = %v, want ErrMemberRemoved", err)
	}

	// Removing an unknown member is told apart.
	if err := a.RemoveMember(t.Context(), cID); !errors.Is(err, ErrMemberNotFound) {
		t.Errorf("removing c twice = %v, want ErrMemberNotFound", err)
	}
}

// TestClusterPeerTLS checks that peers and clients need a certificate from
// the cluster CA, and that a member with another CA's cannot join.
func TestClusterPeerTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	other := newTestCA(t)
	ports := etcdtest.FreePorts(t, 3)
	g := newTestMember(t, ca, "good", ports[0])
	g.clientURL = fmt.Sprintf("https://127.0.0.1:%d", ports[1])
	s := start(t, g.config(nil, false))
	mustCreate(t, s, "/tls", "x")

	goodCert, goodKey := ca.issue(t)
	rogueCert, rogueKey := other.issue(t)
	roots := ca.pki.CertPool()
	// clientTLS presents the pair even when the server asks for another
	// CA's (Go would otherwise send none); no files, no certificate.
	clientTLS := func(cert, key string) *tls.Config {
		c := &tls.Config{RootCAs: roots}
		if cert == "" {
			return c
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		return c
	}
	probe := func(tc *tls.Config) error {
		c := &http.Client{
			Timeout:   5 * time.Second,
			Transport: &http.Transport{TLSClientConfig: tc},
		}
		defer c.CloseIdleConnections()
		resp, err := c.Get(g.url + "/members")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	if err := probe(clientTLS(goodCert, goodKey)); err != nil {
		t.Errorf("peer URL with a cluster certificate: %v", err)
	}
	if err := probe(clientTLS(rogueCert, rogueKey)); err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Errorf("peer URL with a certificate of another CA: %v, want the CA refused", err)
	}
	if err := probe(clientTLS("", "")); err == nil {
		t.Errorf("peer URL accepted a client without a certificate")
	}

	// The client URL serves etcd's API to cluster certificates only.
	clientGet := func(tc *tls.Config) error {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{g.clientURL},
			TLS:         tc,
			DialTimeout: time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		resp, err := c.Get(ctx, "/tls")
		if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "x") {
			err = fmt.Errorf("read %v", resp.Kvs)
		}
		return err
	}
	if err := clientGet(clientTLS(goodCert, goodKey)); err != nil {
		t.Errorf("client URL with a cluster certificate: %v", err)
	}
	if err := clientGet(clientTLS(rogueCert, rogueKey)); err == nil {
		t.Errorf("client URL accepted a certificate of another CA")
	}

	if _, _, err := s.AddMember(t.Context(), g.url); !errors.Is(err, ErrPeerURLExists) {
		t.Errorf("adding the member's own URL = %v, want ErrPeerURLExists", err)
	}

	// A member whose pair another CA signed (trusting both CAs, so that
	// only the cluster can refuse it) is added, and cannot join. The add
	// leaves the cluster without quorum, so this comes last.
	both := writeFile(t, "both.crt", append(slices.Clone(ca.pem), other.pem...))
	r := newTestMember(t, other, "rogue", ports[2])
	r.ca = both
	added, all, err := s.AddMember(t.Context(), r.url)
	if err != nil {
		t.Fatalf("AddMember(rogue): %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	rs, err := NewEmbedded(ctx, r.config(InitialClusterFor(all, added.ID, r.name), true))
	if err == nil {
		rs.Close()
		t.Fatal("a member with another CA's certificate joined")
	}
	t.Logf("rogue member: %v", err)
}

// TestClusterWatchEndsWithoutLeader cuts a member off from its peers: its
// watches end with an error instead of going silent.
func TestClusterWatchEndsWithoutLeader(t *testing.T) {
	t.Parallel()
	_, stores := newCluster(t, newTestCA(t))
	w, err := stores[0].Watch(t.Context(), "/w/", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mustCreate(t, stores[1], "/w/1", "v")
	select {
	case ev := <-w.Events():
		if ev.Type != storage.Put || ev.KV.Key != "/w/1" {
			t.Fatalf("event %+v, want the put of /w/1", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for a write through another member")
	}

	stores[1].Close()
	stores[2].Close()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case ev, ok := <-w.Events():
			if ok {
				t.Fatalf("unexpected event %+v", ev)
			}
			if err := w.Err(); err == nil || !strings.Contains(err.Error(), "no leader") {
				t.Fatalf("watch of a member without leader ended with %v, want a no-leader error", err)
			}
			return
		case <-deadline:
			t.Fatal("the watch of a member without leader is still open")
		}
	}
}

// TestLoneMemberBecomesFirstMember restarts a lone member's data as the
// first member of a cluster, which a second member then joins.
func TestLoneMemberBecomesFirstMember(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	ports := etcdtest.FreePorts(t, 2)
	first := newTestMember(t, ca, "first", ports[0])
	lone := start(t, EmbeddedConfig{DataDir: first.dir, Logger: first.logger})
	mustCreate(t, lone, "/lone", "kept")
	if err := lone.Close(); err != nil {
		t.Fatal(err)
	}

	s := start(t, first.config(nil, false))
	mustGet(t, s, "/lone", "kept")
	list, err := s.Members(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "first" || !slices.Equal(list[0].PeerURLs, []string{first.url}) {
		t.Fatalf("members = %+v, want first at %s alone", list, first.url)
	}

	// The join takes etcd's request timeout (about 6s here): the new
	// member asks the first whether a downgrade is on, which the first,
	// one of two members now, cannot answer without the second.
	second := newTestMember(t, ca, "second", ports[1])
	added, all, err := s.AddMember(t.Context(), second.url)
	if err != nil {
		t.Fatal(err)
	}
	s2 := start(t, second.config(InitialClusterFor(all, added.ID, second.name), true))
	mustGet(t, s2, "/lone", "kept")
}

// TestJoinHonoursContext joins through a peer that accepts connections and
// never answers: NewEmbedded returns when ctx ends, and the abandoned start
// keeps the data directory locked until it has ended.
func TestJoinHonoursContext(t *testing.T) {
	t.Parallel()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	hangUp := func() {
		silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(hangUp)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	m := newTestMember(t, newTestCA(t), "m", etcdtest.FreePorts(t, 1)[0])
	cfg := m.config(map[string]string{"m": m.url, "silent": "https://" + silent.Addr().String()}, true)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := NewEmbedded(ctx, cfg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("joining through a silent peer = %v, want the deadline", err)
	}
	if _, err := NewEmbedded(t.Context(), cfg); !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("starting again while the abandoned start runs = %v, want ErrDataDirInUse", err)
	}

	// The peer hangs up: the abandoned start fails and lets the directory go.
	hangUp()
	deadline := time.After(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		s, err := NewEmbedded(ctx, cfg)
		cancel()
		if s != nil {
			s.Close()
			t.Fatal("joined through a peer that is gone")
		}
		if !errors.Is(err, ErrDataDirInUse) {
			break
		}
		select {
		case <-deadline:
			t.Fatal("the abandoned start still holds the data directory")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestNewEmbeddedChecksPeerStart(t *testing.T) {
	ca := newTestCA(t)
	m := newTestMember(t, ca, "m", 2380)
	tests := []struct {
		name string
		cfg  func(EmbeddedConfig) EmbeddedConfig
		want string
	}{
		{"join without members", func(c EmbeddedConfig) EmbeddedConfig { c.Peer.Existing = true; return c }, "peer.initialCluster: Required value"},
		{"missing key", func(c EmbeddedConfig) EmbeddedConfig {
			c.Peer.KeyFile = filepath.Join(t.TempDir(), "none.key")
			return c
		}, "peer.certFile: Invalid value"},
		{"CA not PEM", func(c EmbeddedConfig) EmbeddedConfig { c.Peer.TrustedCAFile = m.key; return c }, "peer.trustedCAFile: Invalid value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewEmbedded(t.Context(), tc.cfg(m.config(nil, false)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewEmbedded = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestPeerConfigValidate(t *testing.T) {
	const self = "https://10.0.0.1:2380"
	base := func() EmbeddedConfig {
		return EmbeddedConfig{DataDir: "/d", Name: "m1", Peer: &PeerConfig{
			URL: self, CertFile: "c", KeyFile: "k", TrustedCAFile: "ca",
		}}
	}
	with := func(f func(*EmbeddedConfig)) EmbeddedConfig {
		c := base()
		f(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  EmbeddedConfig
		want string // substring of the error; "" for none
	}{
		{"minimal", base(), ""},
		{"initial cluster", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": self, "m2": "https://10.0.0.2:2380"}
		}), ""},
		{"joining", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": self, "m2": "https://node2.example:2380"}
			c.Peer.Existing = true
		}), ""},
		{"client URL", with(func(c *EmbeddedConfig) { c.Peer.ClientURL = "https://10.0.0.1:2379" }), ""},
		{"cluster election 5 heartbeats", with(func(c *EmbeddedConfig) { c.ElectionTimeout = 500 * time.Millisecond }), ""},
		{"cluster election under 5 default heartbeats", with(func(c *EmbeddedConfig) { c.ElectionTimeout = 400 * time.Millisecond }),
			`electionTimeout: Invalid value: "400ms": must be at least 5 times heartbeatInterval`},
		{"no URL", with(func(c *EmbeddedConfig) { c.Peer.URL = "" }), "peer.url: Required value"},
		{"http URL", with(func(c *EmbeddedConfig) { c.Peer.URL = "http://10.0.0.1:2380" }), `peer.url: Invalid value: "http://10.0.0.1:2380": must be https://host:port`},
		{"no port", with(func(c *EmbeddedConfig) { c.Peer.URL = "https://10.0.0.1" }), "peer.url: Invalid value"},
		{"port 0", with(func(c *EmbeddedConfig) { c.Peer.URL = "https://10.0.0.1:0" }), "must have a port between 1 and 65535"},
		{"path", with(func(c *EmbeddedConfig) { c.Peer.URL = self + "/" }), "peer.url: Invalid value"},
		{"no host", with(func(c *EmbeddedConfig) { c.Peer.URL = "https://:2380" }), "peer.url: Invalid value"},
		{"not a URL", with(func(c *EmbeddedConfig) { c.Peer.URL = "https://10.0.0.1:2380\x7f" }), "peer.url: Invalid value"},
		{"http client URL", with(func(c *EmbeddedConfig) { c.Peer.ClientURL = "http://10.0.0.1:2379" }), "peer.clientURL: Invalid value"},
		{"client URL on the peer port", with(func(c *EmbeddedConfig) { c.Peer.ClientURL = self }), "peer.clientURL: Invalid value: \"" + self + "\": must not be the peer URL's address"},
		{"no cert", with(func(c *EmbeddedConfig) { c.Peer.CertFile = "" }), "peer.certFile: Required value"},
		{"no key", with(func(c *EmbeddedConfig) { c.Peer.KeyFile = "" }), "peer.keyFile: Required value"},
		{"no CA", with(func(c *EmbeddedConfig) { c.Peer.TrustedCAFile = "" }), "peer.trustedCAFile: Required value"},
		{"initial cluster without this member", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m2": "https://10.0.0.2:2380"}
		}), "peer.initialCluster[m1]: Required value"},
		{"this member at another URL", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": "https://10.0.0.9:2380"}
		}), `peer.initialCluster[m1]: Invalid value: "https://10.0.0.9:2380": must equal peer.url`},
		{"two members at one address", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": self, "m2": self}
		}), "peer.initialCluster[m2]: Duplicate value"},
		{"bad member name", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": self, "a=b": "https://10.0.0.2:2380"}
		}), "peer.initialCluster[a=b]: Invalid value"},
		{"bad member URL", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": self, "m2": "10.0.0.2:2380"}
		}), "peer.initialCluster[m2]: Invalid value"},
		{"joining alone", with(func(c *EmbeddedConfig) {
			c.Peer.InitialCluster = map[string]string{"m1": self}
			c.Peer.Existing = true
		}), "peer.initialCluster: Invalid value"},
		{"name with comma", with(func(c *EmbeddedConfig) { c.Name = "a,b"; c.Peer.InitialCluster = nil }), `name: Invalid value: "a,b"`},
		{"lone member may use any name", EmbeddedConfig{DataDir: "/d", Name: "a,b"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestPeerEmbedConfig(t *testing.T) {
	cfg := EmbeddedConfig{DataDir: "/data", Name: "m1", Peer: &PeerConfig{
		URL:            "https://node1.example:2380",
		ClientURL:      "https://10.0.0.1:2379",
		CertFile:       "c",
		KeyFile:        "k",
		TrustedCAFile:  "ca",
		InitialCluster: map[string]string{"m2": "https://10.0.0.2:2380", "m1": "https://node1.example:2380"},
		Existing:       true,
	}}.withDefaults()
	ec := embedConfig(cfg)
	type summary struct {
		TickMs, ElectionMs             uint
		ListenPeer, AdvertisePeer      string
		ListenClient, AdvertiseClient  string
		InitialCluster, ClusterState   string
		PeerClientCertAuth, ClientAuth bool
		PeerCA, ClientCA               string
		Strict                         bool
	}
	got := summary{
		TickMs: ec.TickMs, ElectionMs: ec.ElectionMs,
		ListenPeer: ec.ListenPeerUrls[0].String(), AdvertisePeer: ec.AdvertisePeerUrls[0].String(),
		ListenClient: ec.ListenClientUrls[0].String(), AdvertiseClient: ec.AdvertiseClientUrls[0].String(),
		InitialCluster: ec.InitialCluster, ClusterState: ec.ClusterState,
		PeerClientCertAuth: ec.PeerTLSInfo.ClientCertAuth, ClientAuth: ec.ClientTLSInfo.ClientCertAuth,
		PeerCA: ec.PeerTLSInfo.TrustedCAFile, ClientCA: ec.ClientTLSInfo.TrustedCAFile,
		Strict: ec.StrictReconfigCheck,
	}
	want := summary{
		TickMs: 100, ElectionMs: 1000,
		ListenPeer: "https://0.0.0.0:2380", AdvertisePeer: "https://node1.example:2380",
		ListenClient: "https://10.0.0.1:2379", AdvertiseClient: "https://10.0.0.1:2379",
		InitialCluster: "m1=https://node1.example:2380,m2=https://10.0.0.2:2380", ClusterState: "existing",
		PeerClientCertAuth: true, ClientAuth: true,
		PeerCA: "ca", ClientCA: "ca",
		Strict: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("embed config (-want +got):\n%s", diff)
	}

	// A new cluster without an initial cluster is this member alone.
	cfg.Peer.InitialCluster, cfg.Peer.Existing = nil, false
	ec = embedConfig(cfg)
	if ec.InitialCluster != "m1=https://node1.example:2380" || ec.ClusterState != "new" {
		t.Errorf("cluster-init: initial cluster %q, state %q", ec.InitialCluster, ec.ClusterState)
	}
}

func TestInitialClusterFor(t *testing.T) {
	members := []Member{
		{ID: 0x1, Name: "a", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 0x2, Name: "", PeerURLs: []string{"https://10.0.0.2:2380"}},
		{ID: 0xab, Name: "", PeerURLs: []string{"https://10.0.0.3:2380", "https://10.0.1.3:2380"}},
		{ID: 0x4, Name: "gone"},
	}
	tests := []struct {
		name   string
		joiner uint64
		want   map[string]string
	}{
		{"joiner named, other unstarted member placeholder", 0x2, map[string]string{
			"a": "https://10.0.0.1:2380", "new": "https://10.0.0.2:2380", "unstarted-ab": "https://10.0.0.3:2380",
		}},
		{"joiner with two URLs gets its first", 0xab, map[string]string{
			"a": "https://10.0.0.1:2380", "unstarted-2": "https://10.0.0.2:2380", "new": "https://10.0.0.3:2380",
		}},
		{"unknown joiner", 0x99, map[string]string{
			"a": "https://10.0.0.1:2380", "unstarted-2": "https://10.0.0.2:2380", "unstarted-ab": "https://10.0.0.3:2380",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, InitialClusterFor(members, tc.joiner, "new")); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeaderMonitorStep(t *testing.T) {
	var leader atomic.Bool
	m := &leaderMonitor{hasLeader: leader.Load, streams: map[*leaderStream]struct{}{}}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	s := &leaderStream{ctx: noLeaderContext{ctx}, cancel: cancel}
	m.add(s)

	steps := []struct {
		leader bool
		ended  bool
	}{
		{false, false}, {false, false}, {true, false}, // a leader resets the count
		{false, false}, {false, false}, {false, true},
	}
	for i, st := range steps {
		leader.Store(st.leader)
		m.Step()
		if ended := s.Context().Err() != nil; ended != st.ended {
			t.Fatalf("step %d (leader %v): stream ended = %v, want %v", i, st.leader, ended, st.ended)
		}
	}
	if err := s.Context().Err(); err == nil || !strings.Contains(err.Error(), "no leader") {
		t.Errorf("ended stream's context error = %v, want etcd's no leader", err)
	}
	if len(m.streams) != 0 {
		t.Errorf("%d streams still registered after they were ended", len(m.streams))
	}
}

// TestLeaderMonitorRun steps the monitor on its clock's ticks.
func TestLeaderMonitorRun(t *testing.T) {
	m := &leaderMonitor{hasLeader: func() bool { return false }, streams: map[*leaderStream]struct{}{}}
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	s := &leaderStream{ctx: noLeaderContext{ctx}, cancel: cancel}
	m.add(s)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(clk, time.Second, stop)
	}()
	defer func() {
		close(stop)
		<-done
	}()
	for !clk.HasWaiters() {
		runtime.Gosched()
	}
	// A tick the loop has not taken yet would be dropped (as a real
	// ticker's), so each tick waits for the one before to be counted.
	counted := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.leaderless
	}
	deadline := time.After(10 * time.Second)
	for i := 1; i <= leaderlessChecks; i++ {
		if s.Context().Err() != nil {
			t.Fatalf("the stream ended after %d leaderless ticks, want %d", i-1, leaderlessChecks)
		}
		clk.Step(time.Second)
		for counted() < i {
			select {
			case <-deadline:
				t.Fatalf("tick %d not counted", i)
			default:
				runtime.Gosched()
			}
		}
	}
	if s.Context().Err() == nil {
		t.Fatalf("the stream is open after %d leaderless ticks", leaderlessChecks)
	}
}

func TestRemovalCore(t *testing.T) {
	inner, logs := observer.New(zapcore.ErrorLevel)
	var removed atomic.Bool
	lg := zap.New(removalCore{Core: inner, removed: &removed}).With(zap.String("member", "m"))
	lg.Warn("server error", zap.Error(errors.New("disk on fire")))
	lg.Info("the member has been permanently removed from the cluster")
	if removed.Load() {
		t.Fatal("removal seen in unrelated entries")
	}
	lg.Warn("server error", zap.Error(errors.New("the member has been permanently removed from the cluster")))
	if !removed.Load() {
		t.Fatal("removal not seen")
	}
	lg.Error("kept", zap.Error(errors.New("x")))
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message)
	}
	if diff := cmp.Diff([]string{"kept"}, got); diff != "" {
		t.Errorf("the wrapped core logged (-want +got):\n%s", diff)
	}
}
