package bootstrap

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"knode/internal/auth"
	"knode/internal/storage/etcd"
)

// etcdBinary finds an etcd binary as internal/storage/etcd's tests do:
// $KNODE_ETCD_BINARY, else etcd on PATH; without one the test is skipped,
// or fails under KNODE_REQUIRE_EXTERNAL_ETCD=1.
func etcdBinary(t *testing.T) string {
	if bin := os.Getenv("KNODE_ETCD_BINARY"); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("etcd"); err == nil {
		return bin
	}
	if os.Getenv("KNODE_REQUIRE_EXTERNAL_ETCD") == "1" {
		t.Fatalf("KNODE_REQUIRE_EXTERNAL_ETCD=1 but no etcd binary: set KNODE_ETCD_BINARY or put etcd on PATH")
	}
	t.Skip("no etcd binary (set KNODE_ETCD_BINARY or put etcd on PATH)")
	return ""
}

// startEtcd runs an etcd process as a one-member cluster on loopback ports
// that were free a moment before, with a data directory of the test's,
// killed when the test ends, and returns its client URL once it answers.
func startEtcd(t *testing.T) string {
	bin := etcdBinary(t)
	dir := t.TempDir()
	var ports []int
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin,
		"--name=bootstrap-test",
		"--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=bootstrap-test="+peer,
		"--heartbeat-interval=10",
		"--election-timeout=100",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("etcd log:\n%s", b)
		}
	})
	ready := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := etcd.NewClient(ctx, etcd.ClientConfig{Endpoints: []string{client}})
		if err == nil {
			s.Close()
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("etcd at %s not ready: %v", client, err)
		}
	case err := <-exited:
		exited <- err
		t.Fatalf("%s exited early: %v", bin, err)
	}
	return client
}

// connect opens a client of its own on endpoint, as another server would.
func connect(t *testing.T, endpoint string) EtcdStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := etcd.NewClient(ctx, etcd.ClientConfig{Endpoints: []string{endpoint}})
	if err != nil {
		t.Fatalf("NewClient %s: %v", endpoint, err)
	}
	t.Cleanup(func() { s.Close() })
	return EtcdStore{Client: s.Client()}
}

// TestEnsureExternalEtcd: servers that each have their own client of an
// etcd process share one CA, whether one joins the other or they start at
// the same moment.
func TestEnsureExternalEtcd(t *testing.T) {
	endpoint := startEtcd(t)

	t.Run("join", func(t *testing.T) {
		a, b := newServer(t), newServer(t)
		token := mustEnsure(t, a.config(connect(t, endpoint)))
		cfg := b.config(connect(t, endpoint))
		cfg.TokenFile = writeTokenFile(t, token)
		if got := mustEnsure(t, cfg); got != token {
			t.Errorf("joining Ensure = %q, want %q", got, token)
		}
		mustEnsurePKI(t, a)
		mustEnsurePKI(t, b)
		for _, name := range []string{auth.CACertFile, auth.CAKeyFile} {
			if !bytes.Equal(readFile(t, filepath.Join(a.pkiDir, name)), readFile(t, filepath.Join(b.pkiDir, name))) {
				t.Errorf("%s differs between the servers", name)
			}
		}
		if bytes.Equal(readFile(t, filepath.Join(a.pkiDir, auth.ServingKeyFile)), readFile(t, filepath.Join(b.pkiDir, auth.ServingKeyFile))) {
			t.Error("the servers share a serving key")
		}
	})

	t.Run("race", func(t *testing.T) {
		const key = "/knode/bootstrap/race"
		servers := []server{newServer(t), newServer(t), newServer(t)}
		cfgs := make([]Config, len(servers))
		for i, s := range servers {
			cfgs[i] = s.config(connect(t, endpoint))
			cfgs[i].Token, cfgs[i].Key = testSecret, key
		}
		var wg sync.WaitGroup
		errs := make([]error, len(cfgs))
		for i, cfg := range cfgs {
			wg.Go(func() { _, errs[i] = ensure(t, cfg) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("server %d: %v", i, err)
			}
		}
		ca := readFile(t, filepath.Join(servers[0].pkiDir, auth.CACertFile))
		for i, s := range servers[1:] {
			if !bytes.Equal(readFile(t, filepath.Join(s.pkiDir, auth.CACertFile)), ca) {
				t.Errorf("server %d has another CA than server 0", i+1)
			}
		}
	})
}
