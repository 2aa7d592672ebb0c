package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.etcd.io/etcd/server/v3/storage/datadir"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/metadata"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
)

// PeerConfig makes an embedded server a member of a cluster of embedded
// servers. Peer traffic is TLS both ways: each member presents its pair and
// accepts only peers whose certificate the cluster CA signed.
type PeerConfig struct {
	// URL is this member's peer URL, listened on and advertised, e.g.
	// "https://127.0.0.1:2380": https, a host and a port, nothing after.
	// A host that is not an IP address (or "localhost") is advertised as
	// given and listened for on every address. Required.
	URL string
	// ClientURL, when set, also serves etcd's client API there (https,
	// same TLS files, client certificates from the cluster CA required),
	// so outside tools (etcdctl) and tests can reach the member; empty
	// means the in-process client only.
	ClientURL string
	// CertFile and KeyFile are this member's pair, valid for server and
	// client auth, naming the URL's host (an IP SAN for an IP).
	// TrustedCAFile is the cluster CA; peers and clients must present a
	// certificate it signed. All three are required and read at every
	// start. etcd also checks that a presented certificate that has names
	// (SANs) names the address the connection comes from, so a member's
	// pair must name the address it dials its peers from (with one
	// interface, the URL's), and a client certificate either names its
	// client's address or has no SANs.
	CertFile, KeyFile, TrustedCAFile string
	// InitialCluster maps the name of every member, this one included, to
	// its peer URL, for a new DataDir. It must map EmbeddedConfig.Name to
	// URL. It is ignored when DataDir already holds a member's data: the
	// member restarts as that member. Empty, for a new cluster, means this
	// member alone (--cluster-init); a joining member with a new DataDir
	// needs it (InitialClusterFor makes it from AddMember's answer).
	InitialCluster map[string]string
	// Existing is false for a new cluster ("new": the members of
	// InitialCluster form it together) and true for joining a cluster
	// that has already added this member with AddMember ("existing").
	Existing bool
}

// validate reports the fields of p out of range; name is the member's.
// Pure: it reads no file.
func (p PeerConfig) validate(path *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	if p.URL == "" {
		errs = append(errs, field.Required(path.Child("url"), "a cluster member needs its peer URL"))
	} else if err := checkMemberURL(p.URL); err != nil {
		errs = append(errs, field.Invalid(path.Child("url"), p.URL, err.Error()))
	}
	if p.ClientURL != "" {
		if err := checkMemberURL(p.ClientURL); err != nil {
			errs = append(errs, field.Invalid(path.Child("clientURL"), p.ClientURL, err.Error()))
		} else if sameAddress(p.ClientURL, p.URL) {
			errs = append(errs, field.Invalid(path.Child("clientURL"), p.ClientURL, "must not be the peer URL's address"))
		}
	}
	for _, f := range []struct{ name, value, what string }{
		{"certFile", p.CertFile, "the member's certificate"},
		{"keyFile", p.KeyFile, "the member's private key"},
		{"trustedCAFile", p.TrustedCAFile, "the cluster CA that signs every member's certificate"},
	} {
		if f.value == "" {
			errs = append(errs, field.Required(path.Child(f.name), "peer TLS needs "+f.what))
		}
	}
	if len(p.InitialCluster) == 0 {
		return errs
	}
	ic := path.Child("initialCluster")
	byAddress := map[string]string{}
	for _, n := range sortedKeys(p.InitialCluster) {
		u := p.InitialCluster[n]
		if n == "" || strings.ContainsAny(n, "=,") {
			errs = append(errs, field.Invalid(ic.Key(n), n, "member names must not be empty or contain '=' or ','"))
		}
		if err := checkMemberURL(u); err != nil {
			errs = append(errs, field.Invalid(ic.Key(n), u, err.Error()))
			continue
		}
		host := hostPort(u)
		if other, dup := byAddress[host]; dup {
			errs = append(errs, field.Duplicate(ic.Key(n), u+" (also member "+other+")"))
		}
		byAddress[host] = n
	}
	own, ok := p.InitialCluster[name]
	switch {
	case !ok:
		errs = append(errs, field.Required(ic.Key(name), "must map this member's name to peer.url"))
	case own != p.URL:
		errs = append(errs, field.Invalid(ic.Key(name), own, "must equal peer.url "+p.URL))
	case p.Existing && len(p.InitialCluster) == 1:
		errs = append(errs, field.Invalid(ic, p.InitialCluster, "joining an existing cluster needs its other members too"))
	}
	return errs
}

// checkMemberURL accepts what etcd accepts as a member's TLS URL.
func checkMemberURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("must be a URL")
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return errors.New("must be https://host:port, with nothing after the port")
	}
	if port, err := strconv.Atoi(u.Port()); err != nil || port < 1 || port > 65535 {
		return errors.New("must have a port between 1 and 65535")
	}
	return nil
}

// hostPort is the host:port of a URL checkMemberURL accepted.
func hostPort(raw string) string {
	u, _ := url.Parse(raw)
	return u.Host
}

func sameAddress(a, b string) bool { return hostPort(a) == hostPort(b) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// listenURL is the URL to bind for an advertised URL: itself for an IP
// address or localhost (etcd binds nothing else), every address for a name.
func listenURL(advertised string) url.URL {
	u, _ := url.Parse(advertised)
	if host := u.Hostname(); host != "localhost" && net.ParseIP(host) == nil {
		u.Host = net.JoinHostPort("0.0.0.0", u.Port())
	}
	return *u
}

// apply sets ec's listeners, TLS and bootstrap from p, which passed
// validate; ec.Name is the member's name.
func (p PeerConfig) apply(ec *embed.Config) {
	peer, _ := url.Parse(p.URL)
	ec.ListenPeerUrls = []url.URL{listenURL(p.URL)}
	ec.AdvertisePeerUrls = []url.URL{*peer}
	tlsInfo := transport.TLSInfo{
		CertFile:       p.CertFile,
		KeyFile:        p.KeyFile,
		TrustedCAFile:  p.TrustedCAFile,
		ClientCertAuth: true,
	}
	ec.PeerTLSInfo = tlsInfo
	if p.ClientURL != "" {
		client, _ := url.Parse(p.ClientURL)
		ec.ListenClientUrls = []url.URL{listenURL(p.ClientURL)}
		ec.AdvertiseClientUrls = []url.URL{*client}
		ec.ClientTLSInfo = tlsInfo
	}
	initial := p.InitialCluster
	if len(initial) == 0 {
		initial = map[string]string{ec.Name: p.URL}
	}
	var members []string
	for _, n := range sortedKeys(initial) {
		members = append(members, n+"="+initial[n])
	}
	ec.InitialCluster = strings.Join(members, ",")
	ec.ClusterState = embed.ClusterStateFlagNew
	if p.Existing {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	// etcd's default, spelled out: a membership change that could lose
	// quorum is refused (ErrUnsafeMemberChange).
	ec.StrictReconfigCheck = true
}

// checkStart catches, before etcd does with a vaguer message, what
// validate cannot see: a joining member with a new DataDir and no initial
// cluster, and TLS files that do not load.
func (p PeerConfig) checkStart(path *field.Path, dataDir string) error {
	var errs field.ErrorList
	if p.Existing && len(p.InitialCluster) == 0 && !wal.Exist(datadir.ToWALDir(dataDir)) {
		errs = append(errs, field.Required(path.Child("initialCluster"), "a member joining with a new data directory needs the cluster's members, as AddMember returns them"))
	}
	if _, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		errs = append(errs, field.Invalid(path.Child("certFile"), p.CertFile, fmt.Sprintf("loading the pair with %s: %v", p.KeyFile, err)))
	}
	if pem, err := os.ReadFile(p.TrustedCAFile); err != nil {
		errs = append(errs, field.Invalid(path.Child("trustedCAFile"), p.TrustedCAFile, err.Error()))
	} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		errs = append(errs, field.Invalid(path.Child("trustedCAFile"), p.TrustedCAFile, "holds no PEM certificate"))
	}
	return errs.ToAggregate()
}

var (
	// ErrMemberRemoved reports that DataDir holds a member that its cluster
	// has removed: etcd will not run it again. Move the data directory
	// aside and join the cluster as a new member.
	ErrMemberRemoved = errors.New("etcd: the cluster removed this member; its data directory cannot rejoin")
	// ErrUnsafeMemberChange reports that etcd refused a membership change
	// that could cost the cluster its quorum (its strict reconfiguration
	// check). Two causes: a dead member counts against the quorum, so
	// replace a dead member by removing it first, then adding the new
	// one; and etcd counts a member as healthy only once this one has been
	// connected to it for 5 seconds, so a change soon after members
	// (re)started is refused for a few seconds, and retrying then works.
	ErrUnsafeMemberChange = errors.New("etcd: membership change refused: it could cost the cluster its quorum")
	// ErrMemberNotFound reports a member ID the cluster does not have.
	ErrMemberNotFound = errors.New("etcd: no such member")
	// ErrPeerURLExists reports an AddMember of a peer URL that a member
	// already has.
	ErrPeerURLExists = errors.New("etcd: a member already has this peer URL")
)

// Member is one member as etcd lists it. Name and ClientURLs are empty
// until the member has started.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	IsLearner  bool
}

func toMember(m *pb.Member) Member {
	return Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
}

func toMembers(ms []*pb.Member) []Member {
	out := make([]Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, toMember(m))
	}
	return out
}

// isEtcdError matches err against one of etcd's gRPC errors in either form
// the client returns it.
func isEtcdError(err, grpcErr error) bool {
	return errors.Is(err, grpcErr) || errors.Is(err, rpctypes.Error(grpcErr)) || rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(grpcErr)
}

// memberChangeError maps etcd's answer to a membership change onto the
// sentinels.
func memberChangeError(err error) error {
	switch {
	case isEtcdError(err, rpctypes.ErrGRPCUnhealthy), isEtcdError(err, rpctypes.ErrGRPCMemberNotEnoughStarted):
		return fmt.Errorf("%w: %v", ErrUnsafeMemberChange, err)
	case isEtcdError(err, rpctypes.ErrGRPCMemberNotFound):
		return fmt.Errorf("%w: %v", ErrMemberNotFound, err)
	case isEtcdError(err, rpctypes.ErrGRPCPeerURLExist):
		return fmt.Errorf("%w: %v", ErrPeerURLExists, err)
	}
	return fmt.Errorf("etcd: %w", err)
}

// Members lists the cluster's members, learners included, as the leader
// knows them (a linearizable read). A lone member lists itself.
func (s *Store) Members(ctx context.Context) ([]Member, error) {
	resp, err := s.client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd: listing members: %w", err)
	}
	return toMembers(resp.Members), nil
}

// AddMember adds a voting member with the peer URL and returns it and the
// full list after the change, which is what the new member needs for its
// InitialCluster (see InitialClusterFor). The new member's Name is empty
// until it starts. From this moment the new member counts toward the
// quorum, so start it soon: a 2-member cluster whose second member never
// starts has lost its quorum.
//
// etcd refuses an add that could lose quorum with ErrUnsafeMemberChange, for
// instance while a member is dead (remove it first) or in the 5 seconds
// after this member connected to its peers (retry). A URL a member already
// has gives ErrPeerURLExists.
func (s *Store) AddMember(ctx context.Context, peerURL string) (added Member, all []Member, err error) {
	if err := checkMemberURL(peerURL); err != nil {
		return Member{}, nil, fmt.Errorf("etcd: peer URL %q: %v", peerURL, err)
	}
	resp, err := s.client.MemberAdd(ctx, []string{peerURL})
	if err != nil {
		return Member{}, nil, memberChangeError(err)
	}
	return toMember(resp.Member), toMembers(resp.Members), nil
}

// RemoveMember removes the member with the ID. A dead member can always be
// removed while the others keep a quorum; removing a live member that the
// quorum needs gives ErrUnsafeMemberChange, an unknown ID ErrMemberNotFound.
// A removed member stops itself about a second later, and its data
// directory then gives ErrMemberRemoved. Removing the member this Store
// runs stops this Store's server.
func (s *Store) RemoveMember(ctx context.Context, id uint64) error {
	if _, err := s.client.MemberRemove(ctx, id); err != nil {
		return memberChangeError(err)
	}
	return nil
}

// InitialClusterFor is the PeerConfig.InitialCluster of the member that
// AddMember just added as joiner, named name, from the members AddMember
// returned. Another member that has not started yet has no name, so it is
// listed under "unstarted-<hex ID>" (etcd matches the other members by URL,
// not by name). A member with several peer URLs is listed with its first.
// Pure.
func InitialClusterFor(members []Member, joiner uint64, name string) map[string]string {
	out := make(map[string]string, len(members))
	for _, m := range members {
		if len(m.PeerURLs) == 0 {
			continue
		}
		n := m.Name
		switch {
		case m.ID == joiner:
			n = name
		case n == "":
			n = fmt.Sprintf("unstarted-%x", m.ID)
		}
		out[n] = m.PeerURLs[0]
	}
	return out
}

// adoptPeerURL makes the cluster know this member at peerURL when its data
// directory knows it at another: a lone member's data directory restarted
// as a cluster's first member, or a member whose address changed. etcd
// itself keeps the URL a member was created with.
func adoptPeerURL(ctx context.Context, srv *etcdserver.EtcdServer, c *clientv3.Client, peerURL string) error {
	resp, err := c.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("etcd: listing members: %w", err)
	}
	self := uint64(srv.MemberID())
	for _, m := range resp.Members {
		if m.ID != self || slices.Equal(m.PeerURLs, []string{peerURL}) {
			continue
		}
		if _, err := c.MemberUpdate(ctx, self, []string{peerURL}); err != nil {
			return fmt.Errorf("etcd: changing this member's peer URLs from %v to %s: %w", m.PeerURLs, peerURL, err)
		}
	}
	return nil
}

// removedText is how etcd words the error it stops a removed member with,
// both when it applies its own removal and when a peer answers it 410 Gone.
const removedText = "the member has been permanently removed from the cluster"

// removalCore sets removed when etcd logs that it stops this member because
// the cluster removed it: the log is the only place etcd says why a server
// stopped. What the wrapped core logs is unchanged.
type removalCore struct {
	zapcore.Core
	removed *atomic.Bool
}

func (c removalCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.WarnLevel || c.Core.Enabled(l)
}

func (c removalCore) With(fields []zapcore.Field) zapcore.Core {
	return removalCore{Core: c.Core.With(fields), removed: c.removed}
}

func (c removalCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	ce = c.Core.Check(ent, ce)
	if ent.Level >= zapcore.WarnLevel {
		ce = ce.AddCore(ent, c)
	}
	return ce
}

// Write only looks: the wrapped core added itself in Check.
func (c removalCore) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType && strings.Contains(err.Error(), removedText) {
			c.removed.Store(true)
		}
	}
	return nil
}

// leaderlessChecks is how many checks in a row, one election timeout apart,
// must find no leader before watches that require one are ended; etcd's
// gRPC server waits as long.
const leaderlessChecks = 3

// leaderMonitor ends the watches that require a leader once this member
// has had none for a while. etcd does this in its gRPC interceptor, which
// the in-process client bypasses.
type leaderMonitor struct {
	hasLeader func() bool

	mu         sync.Mutex
	leaderless int
	streams    map[*leaderStream]struct{}
}

// Step is one check: it counts checks without a leader and, at
// leaderlessChecks, ends every registered stream with etcd's "no leader".
func (m *leaderMonitor) Step() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hasLeader() {
		m.leaderless = 0
		return
	}
	m.leaderless++
	if m.leaderless < leaderlessChecks {
		return
	}
	for s := range m.streams {
		s.cancel(rpctypes.ErrGRPCNoLeader)
	}
	clear(m.streams)
}

// Run steps every interval until stop is closed.
func (m *leaderMonitor) Run(clk clock.WithTicker, interval time.Duration, stop <-chan struct{}) {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C():
			m.Step()
		}
	}
}

func (m *leaderMonitor) add(s *leaderStream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.streams[s] = struct{}{}
}

func (m *leaderMonitor) remove(s *leaderStream) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.streams, s)
}

// leaderWatchServer is etcd's watch server behind the leader check that its
// gRPC server would do: a stream whose client asked for a leader
// (clientv3.WithRequireLeader) is refused without one, and ended with
// rpctypes.ErrGRPCNoLeader when the monitor finds none for long enough.
type leaderWatchServer struct {
	pb.WatchServer
	monitor   *leaderMonitor
	hasLeader func() bool
}

func (w leaderWatchServer) Watch(ss pb.Watch_WatchServer) error {
	if !requiresLeader(ss.Context()) {
		return w.WatchServer.Watch(ss)
	}
	if !w.hasLeader() {
		return rpctypes.ErrGRPCNoLeader
	}
	ctx, cancel := context.WithCancelCause(ss.Context())
	s := &leaderStream{Watch_WatchServer: ss, ctx: noLeaderContext{ctx}, cancel: cancel}
	w.monitor.add(s)
	defer func() {
		w.monitor.remove(s)
		cancel(nil)
	}()
	return w.WatchServer.Watch(s)
}

// requiresLeader reports whether the client asked for a leader. The
// in-process stream's context is the client's, so the request is in its
// outgoing metadata.
func requiresLeader(ctx context.Context) bool {
	for _, get := range []func(context.Context) (metadata.MD, bool){metadata.FromOutgoingContext, metadata.FromIncomingContext} {
		if md, ok := get(ctx); ok {
			if v := md.Get(rpctypes.MetadataRequireLeaderKey); len(v) > 0 && v[0] == rpctypes.MetadataHasLeader {
				return true
			}
		}
	}
	return false
}

type leaderStream struct {
	pb.Watch_WatchServer
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (s *leaderStream) Context() context.Context { return s.ctx }

// noLeaderContext reports the loss of the leader as its Err, which is what
// etcd's watch server returns to the client when the context ends.
type noLeaderContext struct{ context.Context }

func (c noLeaderContext) Err() error {
	err := c.Context.Err()
	if err != nil && errors.Is(context.Cause(c.Context), rpctypes.ErrGRPCNoLeader) {
		return rpctypes.ErrGRPCNoLeader
	}
	return err
}

// plainContextWatcher hides the caller's context from fmt, as etcd's own
// in-process client does, so that formatting it cannot race with the
// values (trace data) it carries.
type plainContextWatcher struct{ clientv3.Watcher }

type plainContext struct{ context.Context }

func (plainContext) String() string { return "(watch context)" }

func (w plainContextWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	return w.Watcher.Watch(plainContext{ctx}, key, opts...)
}

// memberClient is the in-process client of a cluster member: etcd's, with
// watches that honour WithRequireLeader, checked every electionTimeout on
// clk until the server stops.
func memberClient(srv *etcdserver.EtcdServer, clk clock.WithTicker, electionTimeout time.Duration) *clientv3.Client {
	c := v3client.New(srv)
	hasLeader := func() bool { return srv.Leader() != 0 }
	mon := &leaderMonitor{hasLeader: hasLeader, streams: map[*leaderStream]struct{}{}}
	ws := leaderWatchServer{WatchServer: v3rpc.NewWatchServer(srv), monitor: mon, hasLeader: hasLeader}
	c.Watcher = plainContextWatcher{clientv3.NewWatchFromWatchClient(adapter.WatchServerToWatchClient(ws), c)}
	go mon.Run(clk, electionTimeout, srv.StoppingNotify())
	return c
}
