package hostpath

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// testDir returns a new temporary directory, in canonical form, whose
// mounts are all unmounted when the test ends, pass or fail, before the
// directory is removed.
func testDir(t *testing.T) string {
	t.Helper()
	dir := canonical(t.TempDir())
	// Cleanups run last-registered first, so this runs before TempDir's
	// RemoveAll and the removal never descends into a bind mount.
	t.Cleanup(func() {
		for range 64 {
			under := mountsUnder(t, dir)
			if len(under) == 0 {
				return
			}
			for _, p := range under {
				if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
					t.Errorf("cleanup: unmount %s: %v", p, err)
				}
			}
		}
		t.Errorf("cleanup: mounts remain under %s: %v", dir, mountsUnder(t, dir))
	})
	return dir
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	m, err := readMounts()
	if err != nil {
		t.Fatalf("read mounts: %v", err)
	}
	var out []string
	for _, e := range m {
		if e.MountPoint == dir || strings.HasPrefix(e.MountPoint, dir+"/") {
			out = append(out, e.MountPoint)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// requireMounts skips the test unless this process may bind-mount.
func requireMounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to bind-mount")
	}
	dir := testDir(t)
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatalf("unmount probe: %v", err)
	}
}

// logBuffer collects a driver's log for a test to read.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger returns a logger whose output the test prints when it fails.
func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	var b logBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("driver log:\n%s", b.String())
		}
	})
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// dial returns a client connection to a unix socket, closed at the end of
// the test.
func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// serveDriver starts a driver with cfg serving services on a socket in a
// new temporary directory and returns its clients.
func serveDriver(t *testing.T, cfg Config, services Services) (csi.ControllerClient, csi.NodeClient, csi.IdentityClient) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(testDir(t), "csi.sock")
	srv, err := d.Start(sock, services)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	conn := dial(t, sock)
	return csi.NewControllerClient(conn), csi.NewNodeClient(conn), csi.NewIdentityClient(conn)
}

// wantCode fails the test unless err carries code.
func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Errorf("%s: code %v (%v), want %v", what, got, err, code)
	}
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	}
}

func createReq(name string, size int64, mode csi.VolumeCapability_AccessMode_Mode) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(mode)},
	}
}

var ctx = context.Background()
