package hostpath

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"knode/internal/volume"
)

func TestRegistrar(t *testing.T) {
	root := testDir(t)
	var logs logBuffer
	r, err := NewRegistrar(RegistrarConfig{
		Endpoint: "unix://" + filepath.Join(root, "plugins", volume.BuiltinDriver, "csi.sock"),
		RootDir:  root,
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSock := filepath.Join(root, "plugins_registry", "hostpath.csi.knode.io-reg.sock")
	if r.Socket() != wantSock {
		t.Errorf("socket %s, want %s", r.Socket(), wantSock)
	}
	srv, err := r.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	if fi, err := os.Stat(wantSock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("registration socket: %v, %v", fi, err)
	}

	client := registerapi.NewRegistrationClient(dial(t, wantSock))
	info, err := client.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &registerapi.PluginInfo{
		Type:              "CSIPlugin",
		Name:              "hostpath.csi.knode.io",
		Endpoint:          filepath.Join(root, "plugins", volume.BuiltinDriver, "csi.sock"),
		SupportedVersions: []string{"1.0.0"},
	}
	if d := cmp.Diff(want, info, protocmp.Transform()); d != "" {
		t.Errorf("GetInfo (-want +got):\n%s", d)
	}

	if got := r.Status(); got != (RegistrationStatus{}) {
		t.Errorf("status before any notification: %+v", got)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: "version 0.3 unsupported"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(RegistrationStatus{Notified: true, Error: "version 0.3 unsupported"}, r.Status()); d != "" {
		t.Errorf("status after a refusal (-want +got):\n%s", d)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "version 0.3 unsupported") {
		t.Errorf("refusal not logged as an error:\n%s", l)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(RegistrationStatus{Notified: true, Registered: true}, r.Status()); d != "" {
		t.Errorf("status after registration (-want +got):\n%s", d)
	}

	// A second registrar on the live socket is refused.
	r2, err := NewRegistrar(RegistrarConfig{Endpoint: "/x/csi.sock", RootDir: root, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r2.Start(); err == nil {
		s.Stop()
		t.Error("a second registrar took over a live socket")
	}

	// Stopping removes the socket: the agent sees the driver go.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(wantSock); !os.IsNotExist(err) {
		t.Errorf("socket after stop: %v", err)
	}
}

func TestRegistrarConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  RegistrarConfig
	}{
		{"no endpoint", RegistrarConfig{RootDir: "/r"}},
		{"relative endpoint", RegistrarConfig{RootDir: "/r", Endpoint: "csi.sock"}},
		{"no root dir", RegistrarConfig{Endpoint: "/e"}},
		{"bad name", RegistrarConfig{RootDir: "/r", Endpoint: "/e", DriverName: "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRegistrar(tc.cfg); err == nil {
				t.Error("NewRegistrar accepted the config")
			}
		})
	}
}

// TestServerSocketFile: a stale socket file is replaced, anything else at
// the path is refused, and a stop leaves a successor's socket alone.
func TestServerSocketFile(t *testing.T) {
	dir := testDir(t)
	d, err := New(Config{DataDir: filepath.Join(dir, "data"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}

	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	srv, err := d.Start("unix://"+stale, Controller)
	if err != nil {
		t.Fatalf("start over a stale socket: %v", err)
	}

	// The socket is replaced under the running server; stopping it must not
	// remove the newcomer's file.
	if err := os.Remove(stale); err != nil {
		t.Fatal(err)
	}
	l2, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); err != nil {
		t.Errorf("stop removed a socket it did not make: %v", err)
	}

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := d.Start(file, Controller); err == nil {
		s.Stop()
		t.Error("Start replaced a regular file")
	}
	if _, err := d.Start("relative.sock", Controller); err == nil {
		t.Error("Start accepted a relative endpoint")
	}
}
