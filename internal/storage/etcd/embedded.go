package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
)

// EmbeddedConfig configures an etcd server run inside this process: a lone
// member with no sockets (Peer nil), or a member of a cluster (Peer set).
type EmbeddedConfig struct {
	// DataDir holds the server's data (created if missing, mode 0700).
	// Required. Reopening the same DataDir resumes the same cluster.
	DataDir string
	// Name is the member name; default "knode". Keep it stable across
	// restarts of one DataDir. In a cluster every member needs its own,
	// without '=' or ','.
	Name string
	// HeartbeatInterval is raft's tick; ElectionTimeout is the time
	// without a leader before the member campaigns, at least 5 heartbeats.
	// A lone member defaults to 10ms and 100ms: no other member can be
	// disturbed by short values, they only decide how fast it elects
	// itself at start, which makes it ready in well under a second. A
	// cluster member defaults to etcd's 100ms and 1000ms, which every
	// member of one cluster should share; they must cover the round trip
	// between members and a slow fsync.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// QuotaBackendBytes caps the database size; 0 means etcd's default
	// (2 GiB).
	QuotaBackendBytes int64
	// Logger receives etcd's logs; nil means errors only, to stderr.
	Logger *zap.Logger
	// Peer, when set, makes the member listen for and talk to peers (a
	// cluster member); nil keeps today's lone member with no sockets.
	Peer *PeerConfig
	// Clock paces a cluster member's check that it still has a leader (see
	// NewEmbedded); nil means the real clock.
	Clock clock.WithTicker
}

func (c EmbeddedConfig) withDefaults() EmbeddedConfig {
	if c.Name == "" {
		c.Name = "knode"
	}
	heartbeat, election := 10*time.Millisecond, 100*time.Millisecond
	if c.Peer != nil {
		heartbeat, election = 100*time.Millisecond, time.Second
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = heartbeat
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = election
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// Validate reports every field that is out of range, after defaults.
func (c EmbeddedConfig) Validate() error {
	c = c.withDefaults()
	var errs field.ErrorList
	if c.DataDir == "" {
		errs = append(errs, field.Required(field.NewPath("dataDir"), "the embedded etcd needs a data directory"))
	}
	if c.HeartbeatInterval < time.Millisecond {
		errs = append(errs, field.Invalid(field.NewPath("heartbeatInterval"), c.HeartbeatInterval.String(), "must be at least 1ms"))
	}
	if c.ElectionTimeout < 5*c.HeartbeatInterval {
		errs = append(errs, field.Invalid(field.NewPath("electionTimeout"), c.ElectionTimeout.String(), "must be at least 5 times heartbeatInterval"))
	}
	if c.ElectionTimeout > 50*time.Second {
		errs = append(errs, field.Invalid(field.NewPath("electionTimeout"), c.ElectionTimeout.String(), "must be at most 50s"))
	}
	if c.QuotaBackendBytes < 0 {
		errs = append(errs, field.Invalid(field.NewPath("quotaBackendBytes"), c.QuotaBackendBytes, "must not be negative"))
	}
	if c.Peer != nil {
		if strings.ContainsAny(c.Name, "=,") {
			errs = append(errs, field.Invalid(field.NewPath("name"), c.Name, "must not contain '=' or ',' in a cluster member"))
		}
		errs = append(errs, c.Peer.validate(field.NewPath("peer"), c.Name)...)
	}
	return errs.ToAggregate()
}

// notListened is the peer URL the member advertises. Nothing listens on it:
// a single member never talks to peers, but etcd derives the member and
// cluster IDs from it, so it must stay the same for the life of a DataDir.
const notListened = "http://localhost:2380"

// embedConfig turns c (defaults applied) into etcd's configuration: fsync
// on, auto-compaction off, no metrics listener; for a lone member no client
// or peer listener either, for a cluster member those of c.Peer (see
// PeerConfig.apply).
func embedConfig(c EmbeddedConfig) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = c.Name
	ec.Dir = c.DataDir
	ec.TickMs = uint(c.HeartbeatInterval / time.Millisecond)
	ec.ElectionMs = uint(c.ElectionTimeout / time.Millisecond)
	ec.QuotaBackendBytes = c.QuotaBackendBytes

	peer, _ := url.Parse(notListened)
	ec.ListenPeerUrls = nil
	ec.AdvertisePeerUrls = []url.URL{*peer}
	ec.ListenClientUrls = nil
	ec.AdvertiseClientUrls = nil
	ec.ListenClientHttpUrls = nil
	ec.ListenMetricsUrls = nil
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if c.Peer != nil {
		c.Peer.apply(ec)
	}

	// Durability: every acknowledged write is fsynced to the WAL.
	ec.UnsafeNoFsync = false
	// Compaction is knode's job (storage.Compactor); "0" turns etcd's off.
	ec.AutoCompactionRetention = "0"

	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(memberLogger(c.Logger, nil))
	ec.Logger = "zap"
	return ec
}

// memberLogger is the logger etcd gets: lg (nil: errorLogger) without
// etcd's start-up noise, and, when removed is not nil, reporting to it that
// the cluster removed this member.
func memberLogger(lg *zap.Logger, removed *atomic.Bool) *zap.Logger {
	if lg == nil {
		lg = errorLogger()
	}
	return lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		c = startupNoiseFilter{c}
		if removed != nil {
			c = removalCore{Core: c, removed: removed}
		}
		return c
	}))
}

// errorLogger logs etcd's errors, and nothing less, to stderr.
func errorLogger() *zap.Logger {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	zc.Sampling = nil
	zc.OutputPaths = []string{"stderr"}
	zc.ErrorOutputPaths = []string{"stderr"}
	lg, err := zc.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg
}

// startupNoiseFilter drops one error etcd logs on most first starts of a new
// data directory: its storage-version monitor runs before the backend has
// recorded a raft term, fails with "missing term information", and succeeds
// on its next pass. Everything else passes through.
type startupNoiseFilter struct{ zapcore.Core }

func (f startupNoiseFilter) With(fields []zapcore.Field) zapcore.Core {
	return startupNoiseFilter{f.Core.With(fields)}
}

func (f startupNoiseFilter) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if f.Enabled(ent.Level) {
		return ce.AddCore(ent, f)
	}
	return ce
}

func (f startupNoiseFilter) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Message == "failed to update storage version" {
		for _, fl := range fields {
			if err, ok := fl.Interface.(error); ok && strings.Contains(err.Error(), "missing term information") {
				return nil
			}
		}
	}
	return f.Core.Write(ent, fields)
}

var (
	// ErrServerStopped reports that the embedded server stopped before it
	// was ready.
	ErrServerStopped = errors.New("etcd: embedded server stopped before it was ready")
	// ErrDataDirInUse reports that another embedded server, in this process
	// or another, has the data directory open. (etcd itself would wait for
	// it forever.)
	ErrDataDirInUse = errors.New("etcd: data directory in use")
)

// lockName is the file in DataDir that an embedded server holds locked.
const lockName = "knode.lock"

// NewEmbedded starts an embedded etcd server in DataDir and returns a Store
// that talks to it through an in-process client. A lone member (Peer nil)
// opens no socket for clients or peers. A cluster member listens on
// Peer.URL (and Peer.ClientURL); its Store's watches require a leader, so a
// member cut off from its peers ends them with an error after three
// election timeouts instead of going silent, and its reads and writes fail
// (etcd's request timeout, about 5s plus two election timeouts, or ctx)
// rather than answer from a stale copy.
//
// It blocks until the server can serve writes or ctx ends. A member of a new
// cluster is ready only once a quorum of InitialCluster has started, and a
// joining member only once the cluster let it in, so give ctx a deadline:
// when it ends, NewEmbedded stops the member and returns ctx's error. (A
// start still inside etcd's bootstrap, which does not take ctx, is stopped
// in the background, and DataDir stays locked, ErrDataDirInUse, until it
// is.) The data directory keeps what the member wrote, so the next start
// resumes as that member. A restarted cluster member whose data knows it
// under another peer URL than Peer.URL (a lone member's data, or a changed
// address) has the cluster update its URL before NewEmbedded returns.
//
// Errors to branch on: ErrDataDirInUse; ErrMemberRemoved when the cluster
// removed the member DataDir holds; ErrServerStopped.
// Close the Store to stop the server.
func NewEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd: invalid embedded config: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd: creating data directory: %w", err)
	}
	ec := embedConfig(cfg)
	var removed atomic.Bool
	if cfg.Peer != nil {
		if err := cfg.Peer.checkStart(field.NewPath("peer"), cfg.DataDir); err != nil {
			return nil, fmt.Errorf("etcd: invalid embedded config: %w", err)
		}
		ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(memberLogger(cfg.Logger, &removed))
	}
	lock, err := fileutil.TryLockFile(filepath.Join(cfg.DataDir, lockName), os.O_WRONLY|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrDataDirInUse, cfg.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("etcd: locking data directory: %w", err)
	}
	e, err := startEtcd(ctx, ec, func() { lock.Close() })
	if err != nil {
		return nil, fmt.Errorf("etcd: starting embedded server in %s: %w", cfg.DataDir, err)
	}
	stop := func() {
		e.Close()
		lock.Close()
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-e.Server.StopNotify():
		stop()
		if removed.Load() {
			return nil, fmt.Errorf("%w: member %s, data directory %s", ErrMemberRemoved, e.Server.MemberID(), cfg.DataDir)
		}
		return nil, ErrServerStopped
	case err := <-e.Err():
		stop()
		return nil, fmt.Errorf("etcd: embedded server: %w", err)
	case <-ctx.Done():
		stop()
		return nil, fmt.Errorf("etcd: waiting for the embedded server: %w", ctx.Err())
	}
	if cfg.Peer == nil {
		return &Store{
			client:  v3client.New(e.Server),
			onClose: stop,
		}, nil
	}
	s := &Store{
		client:        memberClient(e.Server, cfg.Clock, cfg.ElectionTimeout),
		requireLeader: true,
		onClose:       stop,
	}
	if err := adoptPeerURL(ctx, e.Server, s.client, cfg.Peer.URL); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// startEtcd runs embed.StartEtcd, which can block for seconds while a
// joining member asks its peers about the cluster, but returns when ctx
// ends. release runs once the server is no more: here on failure, or in
// the background after a start that ctx abandoned.
func startEtcd(ctx context.Context, ec *embed.Config, release func()) (*embed.Etcd, error) {
	type result struct {
		e   *embed.Etcd
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := embed.StartEtcd(ec)
		done <- result{e, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			release()
		}
		return r.e, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.e != nil {
				r.e.Close()
			}
			release()
		}()
		return nil, ctx.Err()
	}
}
