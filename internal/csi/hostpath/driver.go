package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
)

// Driver is the hostpath CSI driver of one process. It holds no state of
// its own: everything lives in the data dir and the node state dir, so any
// number of Drivers (in one process or many) may serve the same data dir.
// Use New.
type Driver struct {
	cfg   Config
	store store
	log   *slog.Logger
}

// New checks cfg and builds a Driver. It makes the data dir's directories.
func New(cfg Config) (*Driver, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	d := &Driver{
		cfg:   cfg,
		store: store{root: cfg.DataDir},
		log:   cfg.Logger.With("component", "csi-hostpath", "driver", cfg.DriverName),
	}
	if err := d.store.init(); err != nil {
		return nil, fmt.Errorf("hostpath: data dir: %w", err)
	}
	return d, nil
}

// Name is the driver's CSI name.
func (d *Driver) Name() string { return d.cfg.DriverName }

// Register adds the Identity service and the selected services to s, the
// caller's gRPC server. With Node it first writes this node's record into
// the data dir, which is how the controller side learns that the node
// exists, its topology and its volume limit.
func (d *Driver) Register(s grpc.ServiceRegistrar, services Services) error {
	if services&^All != 0 {
		return fmt.Errorf("hostpath: unknown services %d", services)
	}
	if services&Node != 0 {
		if err := d.announceNode(); err != nil {
			return err
		}
	}
	csi.RegisterIdentityServer(s, &identity{d: d, services: services})
	if services&Controller != 0 {
		csi.RegisterControllerServer(s, &controller{d: d})
	}
	if services&Node != 0 {
		csi.RegisterNodeServer(s, &node{d: d})
	}
	return nil
}

// announceNode writes the node record and makes the node state dir.
func (d *Driver) announceNode() error {
	if d.cfg.NodeID == "" {
		return errors.New("hostpath: Config.NodeID is required to serve the node service")
	}
	if err := os.MkdirAll(d.cfg.NodeStateDir, 0o700); err != nil {
		return fmt.Errorf("hostpath: node state dir: %w", err)
	}
	unlock, err := d.store.lock(true)
	if err != nil {
		return err
	}
	defer unlock()
	rec := NodeRecord{NodeID: d.cfg.NodeID, Topology: d.cfg.Topology, MaxVolumesPerNode: d.cfg.MaxVolumesPerNode}
	if err := d.store.putNode(rec); err != nil {
		return fmt.Errorf("hostpath: write node record: %w", err)
	}
	return nil
}

// Start listens on the unix socket endpoint ("/path" or "unix:///path")
// and serves the Identity service and services on it in the background.
// The socket exists when Start returns. A stale socket file is replaced; a
// socket some server still answers on is an error.
func (d *Driver) Start(endpoint string, services Services) (*Server, error) {
	s := grpc.NewServer(grpc.ChainUnaryInterceptor(d.logCalls))
	if err := d.Register(s, services); err != nil {
		return nil, err
	}
	srv, err := startServer(s, endpoint)
	if err != nil {
		return nil, err
	}
	d.log.Info("serving CSI", "endpoint", srv.Path(), "services", services.String())
	return srv, nil
}

// Serve is Start, then a wait until ctx is done, then Stop. It returns nil
// after a stop by ctx and the server's error otherwise.
func (d *Driver) Serve(ctx context.Context, endpoint string, services Services) error {
	srv, err := d.Start(endpoint, services)
	if err != nil {
		return err
	}
	return srv.serveUntil(ctx)
}

// Serve builds a Driver from cfg and serves services on endpoint until ctx
// is done; see Driver.Serve.
func Serve(ctx context.Context, endpoint string, cfg Config, services Services) error {
	d, err := New(cfg)
	if err != nil {
		return err
	}
	return d.Serve(ctx, endpoint, services)
}

// logCalls logs each call at debug level, and its failure at info.
func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		d.log.Info("CSI call failed", "method", info.FullMethod, "err", err)
	} else {
		d.log.Debug("CSI call", "method", info.FullMethod)
	}
	return resp, err
}

// Server is a gRPC server on a unix socket.
type Server struct {
	grpc *grpc.Server
	path string
	ino  uint64
	done chan struct{}
	err  error
	stop sync.Once
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Stop stops serving, waiting for the calls under way, and removes the
// socket file (when it is still the one Start made). It returns the
// server's error, nil after a normal stop. Stop may be called more than
// once.
func (s *Server) Stop() error {
	s.stop.Do(func() {
		s.grpc.GracefulStop()
		<-s.done
		var st unix.Stat_t
		if unix.Lstat(s.path, &st) == nil && st.Ino == s.ino {
			_ = os.Remove(s.path)
		}
	})
	return s.err
}

// Done is closed when the server has stopped serving.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) serveUntil(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
	return s.Stop()
}

// socketPath turns an endpoint into a socket path.
func socketPath(endpoint string) (string, error) {
	p := endpoint
	if rest, ok := strings.CutPrefix(p, "unix://"); ok {
		p = rest
	} else if rest, ok := strings.CutPrefix(p, "unix:"); ok {
		p = rest
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("hostpath: endpoint %q must be an absolute unix socket path", endpoint)
	}
	return filepath.Clean(p), nil
}

// startServer listens on endpoint and runs s there.
func startServer(s *grpc.Server, endpoint string) (*Server, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("hostpath: listen on %s: %w", path, err)
	}
	// The socket file stays ours to remove; net's own unlink-on-close would
	// race with a successor that replaced it.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		l.Close()
		return nil, err
	}
	srv := &Server{grpc: s, path: path, ino: st.Ino, done: make(chan struct{})}
	go func() {
		defer close(srv.done)
		if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			srv.err = err
		}
	}()
	return srv, nil
}

// removeStaleSocket removes a socket file nobody listens on. Anything else
// at path is an error.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("hostpath: %s exists and is not a socket", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("hostpath: %s is in use by another server", path)
	}
	return os.Remove(path)
}
