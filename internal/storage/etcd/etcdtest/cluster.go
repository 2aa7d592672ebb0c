package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// A cluster's raft timing, in milliseconds: fast enough that a cluster
// that lost its leader has a new one within a second, slow enough that
// two busy cores (concurrent builds) do not make followers time out.
const (
	clusterHeartbeatMS = 50
	clusterElectionMS  = 500
)

// The one-member etcd of Start keeps the timing it always had.
const (
	singleHeartbeatMS = 10
	singleElectionMS  = 100
)

// logTail is how many lines of a member's log a failed test shows.
const logTail = 200

// listenPoll is the pause between two looks at whether a restarted member
// listens yet.
const listenPoll = 10 * time.Millisecond

// Cluster is an etcd cluster of separate processes on loopback ports,
// started by StartCluster. Its methods are for the test's goroutine (they
// may call t.Fatal), except Endpoints, which any goroutine may call.
type Cluster struct {
	t       testing.TB
	bin     string
	members []*member
	// electionMS is the members' election timeout, in milliseconds.
	electionMS int
	// clock paces Restart's wait for the member's listener: a real
	// process runs on real time.
	clock clock.WithTicker
	// logsShown is set once a failed test was shown the members' logs.
	logsShown bool
}

// member is one etcd process of a cluster. Its name, directory, URLs and
// flags stay the same across restarts.
type member struct {
	name   string
	dir    string // holds data/ and etcd.log
	client string // client URL
	args   []string
	// run is the current process; nil while the member is killed.
	run *run
}

// run is one etcd process.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result; read only after done is closed
}

func (r *run) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// StartCluster starts n etcd processes as one cluster on 127.0.0.1, each
// with a data directory of the test's own and a heartbeat of 50 ms and an
// election timeout of 500 ms, and returns once every member serves
// clients and the cluster answers a linearizable read. Every member is
// killed when the test ends; when the test failed, the tail of each
// member's log is shown.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: a cluster needs at least one member, not %d", n)
	}
	c := startMembers(t, n, "member", clusterHeartbeatMS, clusterElectionMS)
	c.waitReady()
	return c
}

// startMembers starts n members as a new cluster (not waiting for them to
// serve) and registers Stop as the test's cleanup. A lone member is
// called prefix; members of a larger cluster prefix-0, prefix-1, ...
func startMembers(t testing.TB, n int, prefix string, heartbeatMS, electionMS int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, bin: Binary(t), electionMS: electionMS, clock: clock.RealClock{}}
	ports := FreePorts(t, 2*n)
	peers := make([]string, n)
	for i := range n {
		name := prefix
		if n > 1 {
			name = fmt.Sprintf("%s-%d", prefix, i)
		}
		peers[i] = fmt.Sprintf("%s=http://127.0.0.1:%d", name, ports[2*i+1])
		c.members = append(c.members, &member{
			name:   name,
			dir:    t.TempDir(),
			client: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
		})
	}
	for i, m := range c.members {
		peer := strings.TrimPrefix(peers[i], m.name+"=")
		m.args = []string{
			"--name=" + m.name,
			"--data-dir=" + filepath.Join(m.dir, "data"),
			"--listen-client-urls=" + m.client,
			"--advertise-client-urls=" + m.client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=" + strings.Join(peers, ","),
			"--initial-cluster-token=knode-etcdtest",
			fmt.Sprintf("--heartbeat-interval=%d", heartbeatMS),
			fmt.Sprintf("--election-timeout=%d", electionMS),
		}
	}
	t.Cleanup(c.Stop)
	for _, m := range c.members {
		c.start(m, "new")
	}
	return c
}

// start runs m's process with the given --initial-cluster-state. Its
// output is appended to m's log, which thus spans restarts.
func (c *Cluster) start(m *member, state string) {
	c.t.Helper()
	logFile, err := os.OpenFile(m.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "=== etcdtest: starting %s with --initial-cluster-state=%s\n", m.name, state)
	r := &run{
		cmd:  exec.Command(c.bin, append(append([]string(nil), m.args...), "--initial-cluster-state="+state)...),
		done: make(chan struct{}),
	}
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", c.bin, err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	m.run = r
}

func (m *member) logPath() string { return filepath.Join(m.dir, "etcd.log") }

// waitReady returns once every member serves clients and a linearizable
// read succeeds. It fails the test when a member exits first, or after
// startTimeout.
func (c *Cluster) waitReady() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, m := range c.members {
		go func(r *run) {
			select {
			case <-r.done:
				cancel()
			case <-ctx.Done():
			}
		}(m.run)
	}
	err := answers(ctx, c.Endpoints())
	for _, m := range c.members {
		if m.run.exited() {
			c.t.Fatalf("etcd member %s exited before the cluster was ready: %v", m.name, m.run.err)
		}
	}
	if err != nil {
		c.t.Fatalf("etcd cluster at %v not ready: %v", c.Endpoints(), err)
	}
}

// answers waits until every endpoint serves a serializable read (the
// member is up and has joined its cluster) and the cluster a
// linearizable one (it has a leader), or ctx ends.
func answers(ctx context.Context, endpoints []string) error {
	for _, ep := range endpoints {
		if err := read(ctx, []string{ep}, clientv3.WithSerializable()); err != nil {
			return fmt.Errorf("%s: %w", ep, err)
		}
	}
	return read(ctx, endpoints)
}

// read does one Get through a client of endpoints. The client waits for a
// connection (gRPC wait-for-ready), so one call with a deadline is enough.
func read(ctx context.Context, endpoints []string, opts ...clientv3.OpOption) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: startTimeout, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Get(ctx, "/knode-etcdtest-ready", opts...)
	return err
}

// Endpoints are the members' client URLs, in member order, whether the
// member runs or not. The caller may change the returned slice.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client
	}
	return out
}

// RequestTimeout is how long a member waits for a write to commit, or for
// the leader to confirm a linearizable read, before it fails the request
// with "etcdserver: request timed out": etcd's 5 s plus two election
// timeouts. Without a quorum, a request can wait that long (or, for a
// read queued behind another, twice that) before it fails.
func (c *Cluster) RequestTimeout() time.Duration {
	return 5*time.Second + 2*time.Duration(c.electionMS)*time.Millisecond
}

// member returns member i, failing the test for an index out of range.
func (c *Cluster) member(i int) *member {
	c.t.Helper()
	if i < 0 || i >= len(c.members) {
		c.t.Fatalf("etcdtest: no member %d in a cluster of %d", i, len(c.members))
	}
	return c.members[i]
}

// Kill9 kills member i with SIGKILL and returns once the process is gone.
// Killing a member that is not running fails the test.
func (c *Cluster) Kill9(i int) {
	c.t.Helper()
	m := c.member(i)
	if m.run == nil {
		c.t.Fatalf("etcdtest: member %d (%s) is not running", i, m.name)
	}
	m.kill()
}

func (m *member) kill() {
	_ = m.run.cmd.Process.Kill()
	<-m.run.done
	m.run = nil
}

// Restart starts member i again after Kill9: on its data directory and
// ports, as a member of the existing cluster. It returns once the member
// listens for clients, not once it serves them: a member serves only
// after it has rejoined, which needs a quorum of running members (two of
// three), so the caller waits for that itself. Restarting a running
// member, or one that exits at once (say, another process took one of
// its ports), fails the test.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.member(i)
	if m.run != nil {
		c.t.Fatalf("etcdtest: member %d (%s) is running; Kill9 it first", i, m.name)
	}
	c.start(m, "existing")
	if err := c.waitListening(m); err != nil {
		c.t.Fatalf("etcd member %s after a restart: %v", m.name, err)
	}
}

// waitListening returns nil once m's client port accepts connections, and
// an error when m's process exits first or after startTimeout.
func (c *Cluster) waitListening(m *member) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	tick := c.clock.NewTicker(listenPoll)
	defer tick.Stop()
	addr := strings.TrimPrefix(m.client, "http://")
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-m.run.done:
			return fmt.Errorf("exited: %v", m.run.err)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("does not listen on %s after %s", addr, startTimeout), err)
		case <-tick.C():
		}
	}
}

// Stop kills every running member. It is the test's cleanup, which also
// shows the tail of each member's log when the test failed; a test may
// call it earlier.
func (c *Cluster) Stop() {
	for _, m := range c.members {
		if m.run != nil {
			m.kill()
		}
	}
	if !c.t.Failed() || c.logsShown {
		return
	}
	c.logsShown = true
	for _, m := range c.members {
		b, _ := os.ReadFile(m.logPath())
		c.t.Logf("etcd member %s (%s) log:\n%s", m.name, m.client, lastLines(string(b), logTail))
	}
}

// lastLines is the last n lines of s, saying how many it left out.
func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) <= n {
		return strings.Join(ls, "\n")
	}
	return fmt.Sprintf("[%d lines before these]\n%s", len(ls)-n, strings.Join(ls[len(ls)-n:], "\n"))
}
