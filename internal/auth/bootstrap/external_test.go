package bootstrap

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"knode/internal/auth"
	"knode/internal/storage/etcd"
	"knode/internal/storage/etcd/etcdtest"
)

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
	endpoint := etcdtest.Start(t)

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
