package etcdtest_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"knode/internal/storage/etcd/etcdtest"
)

// requestTimeout bounds one request that is expected to succeed; a busy
// machine may take a few seconds to elect a leader.
const requestTimeout = 20 * time.Second

func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func put(cli *clientv3.Client, key string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, err := cli.Put(ctx, key, "v")
	return err
}

// putSoon puts key, trying again while the attempts fail, for up to
// requestTimeout: a write sent on the connection to a member killed a
// moment ago fails (the client does not resend writes), and the next one
// goes to a member that runs.
func putSoon(t *testing.T, cli *clientv3.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	failures := 0
	for {
		_, err := cli.Put(ctx, key, "v")
		if err == nil {
			return
		}
		failures++
		if ctx.Err() != nil {
			t.Fatalf("put %s failed %d times in %s, the last time with: %v", key, failures, requestTimeout, err)
		}
		runtime.Gosched()
	}
}

// TestClusterQuorum: a three-member cluster takes writes with one member
// killed, none with two, and again once they are back, with every earlier
// write kept; each member answers through its own endpoint.
func TestClusterQuorum(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	eps := c.Endpoints()
	if len(eps) != 3 {
		t.Fatalf("%d endpoints, want 3: %v", len(eps), eps)
	}
	cli := newClient(t, eps)
	ctx := context.Background()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Members) != 3 {
		t.Fatalf("%d members, want 3: %v", len(resp.Members), resp.Members)
	}
	if err := put(cli, "/a", requestTimeout); err != nil {
		t.Fatalf("put with all members: %v", err)
	}

	c.Kill9(0)
	putSoon(t, cli, "/b")

	c.Kill9(1)
	// Member 2 alone has no quorum: a write cannot commit (the deadline
	// is the client's, as etcd's own request timeout is 5 s and more).
	if err := put(cli, "/c", 2*time.Second); err == nil {
		t.Fatal("put with members 0 and 1 killed succeeded, want it to fail without a quorum")
	}

	c.Restart(0)
	c.Restart(1)
	putSoon(t, cli, "/d")
	// Every member serves again, and from its own data has the writes
	// acknowledged before and while it was down.
	for i, ep := range eps {
		one := newClient(t, []string{ep})
		for _, key := range []string{"/a", "/b", "/d"} {
			ctx, cancel := context.WithTimeout(ctx, requestTimeout)
			got, err := one.Get(ctx, key)
			cancel()
			if err != nil || len(got.Kvs) != 1 {
				t.Errorf("member %d: get %s: %v, %v", i, key, err, got)
			}
		}
	}
}

// TestStartOneMember: Start's etcd answers at the URL it returns.
func TestStartOneMember(t *testing.T) {
	ep := etcdtest.Start(t)
	cli := newClient(t, []string{ep})
	if err := put(cli, "/x", requestTimeout); err != nil {
		t.Fatalf("put to %s: %v", ep, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	got, err := cli.Get(ctx, "/x")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("get /x: %v, %s", err, fmt.Sprint(got))
	}
}
