// Package etcdtest starts a real etcd process for tests: Debian's
// etcd-server (or $KNODE_ETCD_BINARY) as a one-member cluster on loopback
// ports with a data directory of the test's own, killed when the test
// ends. Without a binary the test is skipped, or fails when
// KNODE_REQUIRE_EXTERNAL_ETCD=1 (CI sets it).
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Environment variables the helpers read.
const (
	// BinaryEnv names the etcd binary; unset means etcd on PATH.
	BinaryEnv = "KNODE_ETCD_BINARY"
	// RequireEnv=1 turns a missing binary from a skip into a failure.
	RequireEnv = "KNODE_REQUIRE_EXTERNAL_ETCD"
)

// startTimeout bounds how long the first request may wait for etcd.
const startTimeout = 30 * time.Second

// Binary finds the etcd binary, or skips (fails with RequireEnv=1).
func Binary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(BinaryEnv); bin != "" {
		return bin
	}
	if bin, err := exec.LookPath("etcd"); err == nil {
		return bin
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s=1 but no etcd binary: set %s or put etcd on PATH", RequireEnv, BinaryEnv)
	}
	t.Skipf("no etcd binary (set %s or put etcd on PATH)", BinaryEnv)
	return ""
}

// FreePorts returns n different TCP ports on 127.0.0.1 that were free a
// moment ago: all are held until all are known, then released, so that
// etcd can bind them.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var held []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range held {
		l.Close()
	}
	return ports
}

// Start runs a one-member etcd on loopback ports once it answers, and
// returns its client URL. It is killed when the test ends; its log is
// shown when the test failed.
func Start(t testing.TB) string {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	ports := FreePorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	logPath := filepath.Join(dir, "etcd.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin,
		"--name=knode-test",
		"--data-dir="+filepath.Join(dir, "data"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=knode-test="+peer,
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
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("etcd log:\n%s", b)
		}
	})
	// The client waits for the server to listen (gRPC wait-for-ready), so
	// one call with a deadline is enough.
	ready := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: startTimeout})
		if err == nil {
			_, err = c.Get(ctx, "/knode-etcdtest-ready")
			c.Close()
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
