package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"knode/internal/auth/bootstrap"
	"knode/internal/server/join"
	"knode/internal/storage/etcd/etcdtest"
)

// embeddedMember runs a server whose embedded etcd is a cluster member:
// the first with --cluster-init, the others with --join through first.
func embeddedMember(t *testing.T, name string, first *server, extra ...string) *server {
	t.Helper()
	peer := etcdtest.FreePorts(t, 1)[0]
	args := append([]string{"--etcd-name", name, "--etcd-peer-port", strconv.Itoa(peer)}, haLeaderArgs...)
	if first == nil {
		args = append(args, "--cluster-init")
	} else {
		args = append(args, "--join", first.URL, "--token-file", filepath.Join(first.DataDir, "token"), "--storage-dir", first.StorageDir)
	}
	return startServer(t, serverOptions{Args: append(args, extra...)})
}

// etcdMembers lists the members through s's join path, with the admin
// kubeconfig (kubectl get --raw).
func etcdMembers(t *testing.T, s *server) []join.Member {
	t.Helper()
	out := s.mustKubectl(t, "1.33", "get", "--raw", join.MembersPath)
	var l join.MemberList
	if err := json.Unmarshal([]byte(out.Stdout), &l); err != nil {
		t.Fatalf("decoding %q: %v", out.Stdout, err)
	}
	return l.Members
}

func memberNames(ms []join.Member) []string {
	var names []string
	for _, m := range ms {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// writeLease creates a Lease named name through c, retrying for a few
// seconds while the cluster settles; it fails the test if no attempt was
// acknowledged.
func writeLease(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	holder := name
	eventually(t, "create Lease "+name, 20*time.Second, 100*time.Millisecond, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := c.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}, metav1.CreateOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

func mustHaveLeases(t *testing.T, c kubernetes.Interface, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := c.CoordinationV1().Leases("default").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Errorf("Lease %s: %v", name, err)
		}
	}
}

// TestHAEmbeddedCluster forms three servers into one embedded etcd
// cluster with --cluster-init and --join, with a real agent and 60
// simulated nodes on them, kills one with SIGKILL, replaces it with a new
// server of the same member name, and kills another. It checks that the
// cluster goes on: one RegisteredNode per node, writes before, during and
// after are all there and the replacement serves them, and no node goes
// NotReady.
func TestHAEmbeddedCluster(t *testing.T) {
	// The fleet's Leases are of 10 s: a grace period of 12 s.
	grace := "--node-monitor-grace-period=" + clusterNodeGrace.String()
	a := embeddedMember(t, "a", nil, grace)
	b := embeddedMember(t, "b", a, grace)
	c := embeddedMember(t, "c", a, grace)
	if got := memberNames(etcdMembers(t, a)); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("members %q, want a, b and c", got)
	}
	ca, cb, cc := a.Clientset(t), b.Clientset(t), c.Clientset(t)
	// One CA: a's admin kubeconfig works against c.
	writeLease(t, ca, "before")
	mustHaveLeases(t, cc, "before")
	tokenGrantsOnlyTheJoin(t, b, a)

	// Nodes on every server: an agent told of the three, and a fleet
	// with one balancer per server. b lives throughout.
	nodes := followNodes(t, cb)
	agent := startAgent(t, a, "emb-agent", t.TempDir(), "--runtime=none", "--server", a.URL, "--server", b.URL, "--server", c.URL)
	startFleet(t, a, []*server{a, b, c}, "emb-fleet", 60, "", "--zones", "2")
	eventually(t, "61 nodes Ready", 60*time.Second, 200*time.Millisecond, func() (bool, string) {
		n := nodes.readyCount("emb-")
		return n == 61, fmt.Sprintf("%d Ready", n)
	})
	registeredOnce(t, cb, "emb-", 61)

	c.Kill9()
	killed := time.Now()
	writeLease(t, cb, "during")
	t.Logf("a write through b was acknowledged %s after c was killed", time.Since(killed).Round(time.Millisecond))
	mustHaveLeases(t, ca, "before", "during")

	// The replacement takes c's member name: the join removes the dead
	// member and adds the new one, so the cluster is three again.
	d := embeddedMember(t, "c", b, grace)
	ms := etcdMembers(t, b)
	if got := memberNames(ms); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("members after the replacement %q, want a, b and c", got)
	}
	if !slices.ContainsFunc(ms, func(m join.Member) bool {
		return m.Name == "c" && slices.Contains(m.PeerURLs, fmt.Sprintf("https://127.0.0.1:%s", peerPort(d)))
	}) {
		t.Fatalf("member c is not at the replacement's peer URL: %+v", ms)
	}
	cd := d.Clientset(t)
	mustHaveLeases(t, cd, "before", "during")
	writeLease(t, cd, "after")
	mustHaveLeases(t, ca, "after")
	mustHaveLeases(t, cb, "after")

	// The cluster survives the loss of another member now that it is
	// three again: kill a, write through d.
	a.Kill9()
	killedA := time.Now()
	writeLease(t, cd, "after-a")
	mustHaveLeases(t, cb, "before", "during", "after", "after-a")

	// a ran the controllers: b or d leads now, and gives every node a
	// fresh grace period. The nodes keep renewing through it, through
	// the servers left: none goes NotReady.
	eventually(t, "the agent renews a grace period past a's kill", clusterNodeGrace+30*time.Second, 200*time.Millisecond, func() (bool, string) {
		if bad := nodes.notReadyExcept(""); len(bad) > 0 {
			t.Fatalf("nodes went NotReady: %q\n--- agent (tail) ---\n%s", bad, tail(agent.stderr.String(), 10))
		}
		renewed, err := nodeLeaseRenewed(cb, "emb-agent")
		if err != nil {
			return false, err.Error()
		}
		return renewed.After(killedA.Add(clusterNodeGrace + 2*time.Second)), renewed.String()
	})
	if bad := nodes.notReadyExcept(""); len(bad) > 0 {
		t.Fatalf("nodes went NotReady: %q", bad)
	}
	if n := nodes.readyCount("emb-"); n != 61 {
		t.Fatalf("%d nodes were Ready, want 61", n)
	}
}

// tokenGrantsOnlyTheJoin: the cluster token (first's), as a server
// presents it to s (basic credentials server:<secret>), may list the etcd
// members but not read the API.
func tokenGrantsOnlyTheJoin(t *testing.T, s, first *server) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(first.DataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := bootstrap.ParseToken(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(s.RestConfig(t))
	cfg.Username, cfg.Password = "server", token.Secret
	c := kubernetes.NewForConfigOrDie(cfg)
	if _, err := c.CoreV1().RESTClient().Get().AbsPath(join.MembersPath).DoRaw(context.Background()); err != nil {
		t.Errorf("GET %s with the cluster token: %v", join.MembersPath, err)
	}
	if _, err := c.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("listing nodes with the cluster token: %v, want 403", err)
	}
}

// peerPort is the --etcd-peer-port s was started with.
func peerPort(s *server) string {
	for i, arg := range s.args {
		if arg == "--etcd-peer-port" && i+1 < len(s.args) {
			return s.args[i+1]
		}
	}
	return ""
}
