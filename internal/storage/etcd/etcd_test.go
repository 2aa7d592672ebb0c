package etcd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knode/internal/storage"
	"knode/internal/storage/etcd/etcdtest"
	"knode/internal/storage/storagetest"
)

func newEmbedded(t testing.TB, dir string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := NewEmbedded(ctx, EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("NewEmbedded: %v", err)
	}
	return s
}

// TestEmbeddedConformance gives every subtest its own server and data
// directory; with 10ms ticks a server is ready in a few tens of ms.
func TestEmbeddedConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		s := newEmbedded(t, t.TempDir())
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return s
	})
}

func TestEmbeddedStartsAtRevisionOne(t *testing.T) {
	s := newEmbedded(t, t.TempDir())
	defer s.Close()
	rev, err := s.Revision(t.Context())
	if err != nil || rev != 1 {
		t.Fatalf("Revision of a new embedded store = %d, %v; want 1, nil", rev, err)
	}
}

func TestEmbedConfig(t *testing.T) {
	ec := embedConfig(EmbeddedConfig{DataDir: "/data"}.withDefaults())
	type summary struct {
		Dir                                string
		TickMs, ElectionMs                 uint
		UnsafeNoFsync                      bool
		Listeners                          int
		AdvertisePeer                      string
		InitialCluster                     string
		AutoCompactionRetention            string
		ClientURLsAdvertised, MetricsPorts int
	}
	got := summary{
		Dir:                     ec.Dir,
		TickMs:                  ec.TickMs,
		ElectionMs:              ec.ElectionMs,
		UnsafeNoFsync:           ec.UnsafeNoFsync,
		Listeners:               len(ec.ListenPeerUrls) + len(ec.ListenClientUrls) + len(ec.ListenClientHttpUrls),
		AdvertisePeer:           ec.AdvertisePeerUrls[0].String(),
		InitialCluster:          ec.InitialCluster,
		AutoCompactionRetention: ec.AutoCompactionRetention,
		ClientURLsAdvertised:    len(ec.AdvertiseClientUrls),
		MetricsPorts:            len(ec.ListenMetricsUrls),
	}
	want := summary{
		Dir:                     "/data",
		TickMs:                  10,
		ElectionMs:              100,
		UnsafeNoFsync:           false,
		AdvertisePeer:           notListened,
		InitialCluster:          "knode=" + notListened,
		AutoCompactionRetention: "0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("embed config (-want +got):\n%s", diff)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string // substring of the error; "" for none
	}{
		{"embedded ok", EmbeddedConfig{DataDir: "/d"}.Validate(), ""},
		{"embedded no dir", EmbeddedConfig{}.Validate(), "dataDir: Required value"},
		{"embedded short election", EmbeddedConfig{DataDir: "/d", HeartbeatInterval: 100 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond}.Validate(),
			`electionTimeout: Invalid value: "200ms": must be at least 5 times heartbeatInterval`},
		{"embedded long election", EmbeddedConfig{DataDir: "/d", ElectionTimeout: time.Minute}.Validate(), "electionTimeout"},
		{"client ok", ClientConfig{Endpoints: []string{"http://127.0.0.1:2379"}}.Validate(), ""},
		{"client no endpoints", ClientConfig{}.Validate(), "endpoints: Required value"},
		{"client empty endpoint", ClientConfig{Endpoints: []string{"x", ""}}.Validate(), "endpoints[1]: Invalid value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.want == "" && tc.err != nil:
				t.Errorf("unexpected error: %v", tc.err)
			case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", tc.err, tc.want)
			}
		})
	}
}

// TestReopen writes through one server, closes it, starts another on the
// same directory, and expects every key back and the revision to go on.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := newEmbedded(t, dir)
	const n = 50
	var last int64
	for i := range n {
		rev, err := s.Create(t.Context(), fmt.Sprintf("/reopen/%06d", i), []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		last = rev
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = newEmbedded(t, dir)
	defer s.Close()
	checkKeys(t, s, "/reopen/", n, last)
}

// checkKeys expects keys 0..n-1 under prefix with their index as value, the
// store revision at least last, and a new write to land after last.
func checkKeys(t *testing.T, s *Store, prefix string, n int, last int64) {
	t.Helper()
	res, err := s.List(t.Context(), prefix, storage.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(res.Items) < n {
		t.Fatalf("%d keys survived, want at least %d", len(res.Items), n)
	}
	for i := range n {
		kv := res.Items[i]
		if want := fmt.Sprintf("%s%06d", prefix, i); kv.Key != want || string(kv.Value) != fmt.Sprint(i) {
			t.Fatalf("item %d = %s=%q, want %s=%q", i, kv.Key, kv.Value, want, fmt.Sprint(i))
		}
	}
	if res.Revision < last {
		t.Errorf("revision went back from %d to %d", last, res.Revision)
	}
	rev, err := s.Create(t.Context(), prefix+"after", nil)
	if err != nil {
		t.Fatalf("Create after restart: %v", err)
	}
	if rev <= last {
		t.Errorf("write after restart got revision %d, not after %d", rev, last)
	}
}

// crashDirEnv names the data directory of the child process that
// TestKillNineDurability kills.
const crashDirEnv = "KNODE_ETCD_CRASH_CHILD_DIR"

// TestCrashChild is the child process of TestKillNineDurability: it writes
// keys until it is killed and prints a line for every acknowledged write.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestKillNineDurability")
	}
	s := newEmbedded(t, dir)
	for i := 0; i < 1_000_000; i++ {
		rev, err := s.Create(context.Background(), fmt.Sprintf("/crash/%06d", i), []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		fmt.Printf("ack %d %d\n", i, rev)
	}
}

// TestKillNineDurability kills a process that is writing through an embedded
// store with SIGKILL, then reopens its data directory: every write the
// process saw acknowledged must be there.
func TestKillNineDurability(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked, lastRev := -1, int64(0)
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		var i int
		var rev int64
		if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &i, &rev); err != nil {
			continue
		}
		acked, lastRev = i, rev
		if i >= 200 && !killed {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatalf("kill: %v", err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed: %v", err)
	}
	t.Logf("child acknowledged %d writes, last at revision %d", acked+1, lastRev)

	s := newEmbedded(t, dir)
	defer s.Close()
	checkKeys(t, s, "/crash/", acked+1, lastRev)
}

// TestExternalConformance runs the suite through NewClient against a real
// etcd process, shared by every subtest.
func TestExternalConformance(t *testing.T) {
	endpoint := etcdtest.Start(t)
	storagetest.Run(t, func(t *testing.T) storage.Interface {
		s, err := NewClient(t.Context(), ClientConfig{Endpoints: []string{endpoint}})
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestNewClientUnreachable(t *testing.T) {
	port := etcdtest.FreePorts(t, 1)[0]
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := NewClient(ctx, ClientConfig{Endpoints: []string{fmt.Sprintf("http://127.0.0.1:%d", port)}})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NewClient to a closed port = %v, want a deadline error", err)
	}
}

// TestEmbeddedListensNowhere checks that starting the embedded server opens
// no listening TCP or unix socket in this process.
func TestEmbeddedListensNowhere(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs Linux /proc")
	}
	before := listeningSockets(t)
	s := newEmbedded(t, t.TempDir())
	defer s.Close()
	if _, err := s.Create(t.Context(), "/listen/a", nil); err != nil {
		t.Fatal(err)
	}
	after := listeningSockets(t)
	for inode, where := range after {
		if _, ok := before[inode]; !ok {
			t.Errorf("embedded server opened a listening socket: %s", where)
		}
	}
}

// listeningSockets maps the inodes of this process's listening sockets to a
// description.
func listeningSockets(t *testing.T) map[string]string {
	t.Helper()
	listening := map[string]string{}
	for _, f := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 9 && fs[3] == "0A" { // TCP_LISTEN
				listening[fs[9]] = "tcp " + fs[1]
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/net/unix"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) > 6 && fs[3] == "00010000" { // accepting connections
				listening[fs[6]] = "unix " + strings.Join(fs[7:], " ")
			}
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{}
	for _, e := range ents {
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.HasPrefix(link, "socket:[") {
			continue
		}
		inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
		if where, ok := listening[inode]; ok {
			mine[inode] = where
		}
	}
	return mine
}

func TestEmbeddedDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	s := newEmbedded(t, dir)
	_, err := NewEmbedded(t.Context(), EmbeddedConfig{DataDir: dir})
	if !errors.Is(err, ErrDataDirInUse) {
		t.Fatalf("second NewEmbedded on one directory = %v, want ErrDataDirInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing releases the directory.
	s = newEmbedded(t, dir)
	s.Close()
}
