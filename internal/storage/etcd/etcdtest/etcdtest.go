// Package etcdtest starts real etcd processes for tests: Debian's
// etcd-server (or $KNODE_ETCD_BINARY) on loopback ports, each member with
// a data directory of the test's own and killed when the test ends. Start
// runs a one-member cluster; StartCluster runs several members whose
// processes a test kills (SIGKILL) and restarts to take a quorum away and
// give it back. Without a binary the test is skipped, or fails when
// KNODE_REQUIRE_EXTERNAL_ETCD=1 (CI sets it).
//
// The caller must start no more than a test needs (each member is a
// process with its own fsync'ing disk writes) and call the cluster's
// methods from the test's goroutine. The package does not secure etcd
// (plain HTTP, no auth), change membership (members are fixed at start),
// or fake etcd: what runs is the real server.
package etcdtest

import (
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
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
// returns its client URL. It is killed when the test ends; the tail of its
// log is shown when the test failed.
func Start(t testing.TB) string {
	t.Helper()
	c := startMembers(t, 1, "knode-test", singleHeartbeatMS, singleElectionMS)
	c.waitReady()
	return c.members[0].client
}
