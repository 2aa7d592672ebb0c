package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// EmbeddedConfig configures an etcd server run inside this process as a
// single-member cluster.
type EmbeddedConfig struct {
	// DataDir holds the server's data (created if missing, mode 0700).
	// Required. Reopening the same DataDir resumes the same cluster.
	DataDir string
	// Name is the member name; default "knode". Keep it stable across
	// restarts of one DataDir.
	Name string
	// HeartbeatInterval is raft's tick; default 10ms. ElectionTimeout is
	// the time without a leader before the member campaigns; default
	// 100ms, and at least 5 heartbeats. The member is alone, so no other
	// member can be disturbed by short values: they only decide how fast
	// it elects itself at start, which makes it ready in well under a
	// second.
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// QuotaBackendBytes caps the database size; 0 means etcd's default
	// (2 GiB).
	QuotaBackendBytes int64
	// Logger receives etcd's logs; nil means errors only, to stderr.
	Logger *zap.Logger
}

func (c EmbeddedConfig) withDefaults() EmbeddedConfig {
	if c.Name == "" {
		c.Name = "knode"
	}
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = 10 * time.Millisecond
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 100 * time.Millisecond
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
	return errs.ToAggregate()
}

// notListened is the peer URL the member advertises. Nothing listens on it:
// a single member never talks to peers, but etcd derives the member and
// cluster IDs from it, so it must stay the same for the life of a DataDir.
const notListened = "http://localhost:2380"

// embedConfig turns c (defaults applied) into etcd's configuration: no
// client, peer or metrics listener, fsync on, auto-compaction off.
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

	// Durability: every acknowledged write is fsynced to the WAL.
	ec.UnsafeNoFsync = false
	// Compaction is knode's job (storage.Compactor); "0" turns etcd's off.
	ec.AutoCompactionRetention = "0"

	lg := c.Logger
	if lg == nil {
		lg = errorLogger()
	}
	lg = lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return startupNoiseFilter{c} }))
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	ec.Logger = "zap"
	return ec
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
// that talks to it through an in-process client: no socket is opened for
// clients or peers. It blocks until the server can serve writes or ctx
// ends. Close the Store to stop the server.
func NewEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("etcd: invalid embedded config: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd: creating data directory: %w", err)
	}
	lock, err := fileutil.TryLockFile(filepath.Join(cfg.DataDir, lockName), os.O_WRONLY|os.O_CREATE, 0o600)
	if errors.Is(err, fileutil.ErrLocked) {
		return nil, fmt.Errorf("%w: %s", ErrDataDirInUse, cfg.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("etcd: locking data directory: %w", err)
	}
	e, err := embed.StartEtcd(embedConfig(cfg))
	if err != nil {
		lock.Close()
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
		return nil, ErrServerStopped
	case err := <-e.Err():
		stop()
		return nil, fmt.Errorf("etcd: embedded server: %w", err)
	case <-ctx.Done():
		stop()
		return nil, fmt.Errorf("etcd: waiting for the embedded server: %w", ctx.Err())
	}
	return &Store{
		client:  v3client.New(e.Server),
		onClose: stop,
	}, nil
}
