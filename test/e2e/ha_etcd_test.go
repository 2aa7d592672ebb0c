package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"knode/internal/storage/etcd/etcdtest"
)

// What TestHAEtcdMemberLoss asserts, and how long it waits.
const (
	// memberLossGrace is how long after one etcd member (the leader) is
	// killed writes may still fail: the one sent on a connection to the
	// killed member, and those proposed before the two others have
	// elected a new leader (an election timeout of 0.5 to 1 s). Every
	// write started later must succeed. The same grace applies after the
	// first success once the quorum is back.
	memberLossGrace = 3 * time.Second
	// quorumClientRetries is how long etcd's client goes on retrying a
	// read that a member without a leader refuses (100 tries, 25 ms
	// apart).
	quorumClientRetries = 3 * time.Second
	// recoveryBound is the longest from restarting the two members to the
	// first write that succeeds: they rejoin, elect a leader, and the
	// servers' clients reconnect.
	recoveryBound = 20 * time.Second
	// haWriteTimeout is the client's deadline for one create: it only
	// keeps a hung request from hanging the test, and is longer than
	// every bound the test asserts, so a hang breaks a bound.
	haWriteTimeout = 40 * time.Second
	// haWriters write at most one Lease per haWritePeriod each.
	haWriters     = 6
	haWritePeriod = 50 * time.Millisecond
)

// quorumLossBound is the longest a write may take to fail once two of the
// three members are gone. Reads that reached the last member before it
// noticed it had no leader wait for etcd's request timeout, in at most
// two rounds of its read loop (one already under way, the next); then
// the member refuses at once, and the client gives up after its retries.
// The API server must answer then, not hang.
func quorumLossBound(c *etcdtest.Cluster) time.Duration {
	return 2*c.RequestTimeout() + quorumClientRetries
}

// attempt is one create of a Lease by the writers.
type attempt struct {
	name       string
	server     int
	start, end time.Time
	rv         string // the acknowledged resourceVersion; "" when err is set
	err        error
}

// writeLog collects the writers' attempts, and the start of the create
// each writer is waiting on.
type writeLog struct {
	mu       sync.Mutex
	attempts []attempt
	inFlight map[int]attempt // by writer
}

func (l *writeLog) begin(writer int, a attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight == nil {
		l.inFlight = map[int]attempt{}
	}
	l.inFlight[writer] = a
}

func (l *writeLog) end(writer int, a attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight, writer)
	l.attempts = append(l.attempts, a)
}

// matching are the attempts done so far for which keep is true.
func (l *writeLog) matching(keep func(attempt) bool) []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []attempt
	for _, a := range l.attempts {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// waiting are the creates under way.
func (l *writeLog) waiting() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []attempt
	for _, a := range l.inFlight {
		out = append(out, a)
	}
	return out
}

// writers create Leases in "default" from haWriters goroutines, spread
// over the clients.
type writers struct {
	log    writeLog
	stop   chan struct{}      // closed: start no more creates
	cancel context.CancelFunc // ends the creates under way
	done   chan struct{}      // closed once every writer has returned
}

func startWriters(clients []kubernetes.Interface) *writers {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writers{stop: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := range haWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, i, i%len(clients), clients[i%len(clients)])
		}()
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

func (w *writers) run(ctx context.Context, writer, server int, client kubernetes.Interface) {
	leases := client.CoordinationV1().Leases("default")
	tick := time.NewTicker(haWritePeriod)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("ha-etcd-%d-%05d", writer, seq)
		holder := name
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}
		a := attempt{name: name, server: server, start: time.Now()}
		w.log.begin(writer, a)
		reqCtx, cancel := context.WithTimeout(ctx, haWriteTimeout)
		got, err := leases.Create(reqCtx, lease, metav1.CreateOptions{})
		cancel()
		a.end = time.Now()
		if err != nil {
			a.err = err
		} else {
			a.rv = got.ResourceVersion
		}
		w.log.end(writer, a)
	}
}

// finish lets the creates under way end, and returns once the writers
// have.
func (w *writers) finish() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// abort ends the creates under way, and returns once the writers have.
func (w *writers) abort() {
	w.cancel()
	w.finish()
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// etcdLeader is the one of the candidate members (indexes into
// endpoints) that reports itself as the cluster's leader.
func etcdLeader(t *testing.T, endpoints []string, candidates ...int) int {
	t.Helper()
	leader := -1
	eventually(t, "an etcd member reports itself as the leader", 20*time.Second, 50*time.Millisecond, func() (bool, string) {
		var msgs []string
		for _, i := range candidates {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoints[i]}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				msgs = append(msgs, err.Error())
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := cli.Status(ctx, endpoints[i])
			cancel()
			cli.Close()
			switch {
			case err != nil:
				msgs = append(msgs, err.Error())
			case st.Leader != 0 && st.Leader == st.Header.MemberId:
				leader = i
				return true, ""
			}
		}
		return false, fmt.Sprintf("none of members %v leads: %s", candidates, strings.Join(msgs, "; "))
	})
	return leader
}

// storageProblem is what a message must say about etcd without a quorum.
var storageProblem = regexp.MustCompile(`no leader|timed out|timeout|leader changed|unavailable|quorum`)

// clearStorageError reports why err, the failure of a write while etcd
// has no quorum, is not what a client should get: a Kubernetes Status
// with a server-side code that says the storage is unavailable or timed
// out (500, 503 or 504) and a message that names etcd and the problem.
func clearStorageError(err error) string {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return fmt.Sprintf("not a Kubernetes Status: %v", err)
	}
	s := st.Status()
	switch s.Code {
	case 500, 503, 504:
	default:
		return fmt.Sprintf("code %d (%s), want 500, 503 or 504: %s", s.Code, s.Reason, s.Message)
	}
	if !strings.Contains(s.Message, "etcd") || !storageProblem.MatchString(s.Message) {
		return fmt.Sprintf("the message does not say that etcd has %s: %q", storageProblem, s.Message)
	}
	return ""
}

// TestHAEtcdMemberLoss runs three `knode server` on a three-member etcd
// cluster while writers create Leases through all three with client-go:
//   - with the etcd leader killed (SIGKILL), every create started
//     memberLossGrace after the kill succeeds;
//   - with the new leader killed too, every create started after that
//     kill fails, within quorumLossBound, with a Status that says etcd has
//     no leader or timed out;
//   - once both members are restarted, a create succeeds within
//     recoveryBound, every one started memberLossGrace after that
//     succeeds, and every create acknowledged before, during and after
//     is listed, through every server, with its resourceVersion.
func TestHAEtcdMemberLoss(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 3)
	endpoints := cluster.Endpoints()
	args := append([]string{"--etcd-servers", strings.Join(endpoints, ",")}, haLeaderArgs...)
	a := startServer(t, serverOptions{Args: args})
	join := append(append([]string(nil), args...), "--storage-dir", a.StorageDir, "--token-file", filepath.Join(a.DataDir, "token"))
	servers := []*server{a, startServer(t, serverOptions{Args: join}), startServer(t, serverOptions{Args: join})}
	clients := make([]kubernetes.Interface, len(servers))
	for i, s := range servers {
		clients[i] = s.Clientset(t)
	}

	w := startWriters(clients)
	// On a failure the writers stop before the servers and etcd do.
	t.Cleanup(w.abort)
	log := &w.log
	waitAcked := func(what string, after time.Time, n int) {
		t.Helper()
		eventually(t, what, 30*time.Second, 20*time.Millisecond, func() (bool, string) {
			got := len(log.matching(func(a attempt) bool { return a.err == nil && !a.start.Before(after) }))
			return got >= n, fmt.Sprintf("%d acknowledged", got)
		})
	}
	failedAfter := func(after time.Time) []attempt {
		return log.matching(func(a attempt) bool { return a.err != nil && !a.start.Before(after) })
	}

	// All members up: every create succeeds.
	waitAcked("creates with every etcd member up", time.Now(), 3*haWriters)
	if failed := failedAfter(time.Time{}); len(failed) > 0 {
		t.Fatalf("%d creates failed with every etcd member up; the first: %v", len(failed), failed[0].err)
	}

	// Kill the leader: the two others elect another one and go on.
	first := etcdLeader(t, endpoints, 0, 1, 2)
	cluster.Kill9(first)
	killed1 := time.Now()
	settled := killed1.Add(memberLossGrace)
	waitAcked("creates started after the grace period with the etcd leader killed", settled, 3*haWriters)
	for _, f := range log.matching(func(a attempt) bool { return a.err != nil && !a.end.Before(killed1) }) {
		t.Logf("with the etcd leader killed: create %s, started %s from the kill, failed after %s: %v",
			f.name, f.start.Sub(killed1).Round(time.Millisecond), f.end.Sub(f.start).Round(time.Millisecond), f.err)
	}
	for _, f := range failedAfter(settled) {
		t.Errorf("create %s through server %d, started %s after the etcd leader was killed (grace %s), failed: %v",
			f.name, f.server, f.start.Sub(killed1).Round(time.Millisecond), memberLossGrace, f.err)
	}

	// Kill the new leader: with one member of three left no write can
	// commit, and every create must fail, in time and clearly.
	var rest []int
	for i := range endpoints {
		if i != first {
			rest = append(rest, i)
		}
	}
	second := etcdLeader(t, endpoints, rest...)
	cluster.Kill9(second)
	killed2 := time.Now()
	bound := quorumLossBound(cluster)
	startedAfter2 := func(a attempt) bool { return !a.start.Before(killed2) }
	// Two creates per writer: the first ones wait on etcd's request
	// timeout, later ones find that the last member knows it has no
	// leader.
	eventually(t, "creates fail with two members killed", 2*bound, 50*time.Millisecond, func() (bool, string) {
		now := time.Now()
		for _, h := range log.waiting() {
			if since := laterOf(h.start, killed2); now.Sub(since) > bound {
				t.Fatalf("create %s through server %d, started %s from the second kill, has not returned %s after the kill or its start: it hangs",
					h.name, h.server, h.start.Sub(killed2).Round(time.Millisecond), bound)
			}
		}
		done := log.matching(startedAfter2)
		return len(done) >= 2*haWriters, fmt.Sprintf("%d creates started after the kill have returned", len(done))
	})
	restarted := time.Now()
	cluster.Restart(first)
	cluster.Restart(second)

	// Creates that were still waiting at the restart may succeed once
	// the members are back.
	noQuorum := log.matching(func(a attempt) bool { return startedAfter2(a) && a.end.Before(restarted) })
	firstFail, slowest := time.Duration(-1), time.Duration(0)
	messages := map[string]int{}
	for _, f := range noQuorum {
		took := f.end.Sub(f.start)
		switch {
		case f.err == nil:
			t.Errorf("create %s through server %d, started %s after the second member was killed, succeeded (resourceVersion %s) without a quorum",
				f.name, f.server, f.start.Sub(killed2).Round(time.Millisecond), f.rv)
			continue
		case took > bound:
			t.Errorf("create %s through server %d took %s to fail, want at most %s: %v", f.name, f.server, took.Round(time.Millisecond), bound, f.err)
		}
		if why := clearStorageError(f.err); why != "" {
			t.Errorf("create %s through server %d failed unclearly: %s", f.name, f.server, why)
		}
		messages[f.err.Error()]++
		slowest = max(slowest, took)
		if d := f.end.Sub(killed2); firstFail < 0 || d < firstFail {
			firstFail = d
		}
	}
	anyFail := time.Duration(-1)
	for _, f := range log.matching(func(a attempt) bool { return a.err != nil && !a.end.Before(killed2) && a.end.Before(restarted) }) {
		if d := f.end.Sub(killed2); anyFail < 0 || d < anyFail {
			anyFail = d
		}
	}
	t.Logf("without a quorum: the first create failed %s after the second kill, the first one started after the kill %s after it; %d creates started after the kill failed, the slowest in %s (bound %s)",
		anyFail.Round(time.Millisecond), firstFail.Round(time.Millisecond), len(noQuorum), slowest.Round(time.Millisecond), bound)
	for msg, n := range messages {
		t.Logf("without a quorum: %d times %q", n, msg)
	}

	// Both members back: creates succeed again.
	var recovered time.Duration
	eventually(t, "a create succeeds after the restart", 2*recoveryBound, 20*time.Millisecond, func() (bool, string) {
		ok := log.matching(func(a attempt) bool { return a.err == nil && a.end.After(restarted) })
		if len(ok) == 0 {
			return false, "none yet"
		}
		recovered = ok[0].end.Sub(restarted)
		for _, a := range ok {
			recovered = min(recovered, a.end.Sub(restarted))
		}
		return true, ""
	})
	t.Logf("the first create succeeded %s after the restart of the two members", recovered.Round(time.Millisecond))
	if recovered > recoveryBound {
		t.Errorf("the first create succeeded %s after the restart, want at most %s", recovered.Round(time.Millisecond), recoveryBound)
	}
	resumed := restarted.Add(recovered).Add(memberLossGrace)
	waitAcked("creates started after the grace period after the restart", resumed, 3*haWriters)
	w.finish()
	for _, f := range failedAfter(resumed) {
		t.Errorf("create %s through server %d, started %s after the first success after the restart (grace %s), failed: %v",
			f.name, f.server, f.start.Sub(restarted.Add(recovered)).Round(time.Millisecond), memberLossGrace, f.err)
	}

	// Durability: every acknowledged create is there, through every
	// server, with the resourceVersion it was acknowledged with.
	acked := log.matching(func(a attempt) bool { return a.err == nil })
	t.Logf("%d creates tried, %d acknowledged", len(log.matching(func(attempt) bool { return true })), len(acked))
	var maxRV uint64
	for _, a := range acked {
		maxRV = max(maxRV, parseRV(t, a.rv))
	}
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		list, err := c.CoordinationV1().Leases("default").List(ctx, metav1.ListOptions{})
		cancel()
		if err != nil {
			t.Fatalf("listing Leases through server %d: %v", i, err)
		}
		stored := map[string]string{}
		for _, l := range list.Items {
			stored[l.Name] = l.ResourceVersion
		}
		var missing []string
		for _, a := range acked {
			switch got, ok := stored[a.name]; {
			case !ok:
				missing = append(missing, a.name)
			case got != a.rv:
				t.Errorf("server %d lists Lease %s at resourceVersion %s, acknowledged with %s", i, a.name, got, a.rv)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			t.Errorf("server %d: %d of %d acknowledged Leases are missing: %v", i, len(missing), len(acked), missing)
		}
		if n := parseRV(t, list.ResourceVersion); n < maxRV {
			t.Errorf("server %d lists at resourceVersion %d, below the highest acknowledged %d", i, n, maxRV)
		}
	}
}
