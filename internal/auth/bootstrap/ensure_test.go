package bootstrap

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"knode/internal/auth"
	"knode/internal/storage"
	"knode/internal/storage/etcd"
)

// newEtcd starts an embedded etcd (a real one, in this process) and returns
// its storage, closed when the test ends.
func newEtcd(t *testing.T) *etcd.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := etcd.NewEmbedded(ctx, etcd.EmbeddedConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("NewEmbedded: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// server is one knode server's data directory.
type server struct{ dataDir, pkiDir string }

func newServer(t *testing.T) server {
	dir := t.TempDir()
	return server{dataDir: dir, pkiDir: filepath.Join(dir, "pki")}
}

func (s server) config(store Store) Config {
	return Config{Store: store, PKIDir: s.pkiDir, DataDir: s.dataDir}
}

// ensure runs Ensure with a deadline.
func ensure(t *testing.T, cfg Config) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return Ensure(ctx, cfg)
}

func mustEnsure(t *testing.T, cfg Config) string {
	t.Helper()
	token, err := ensure(t, cfg)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	return token
}

func mustEnsurePKI(t *testing.T, s server) *auth.PKI {
	t.Helper()
	p, err := auth.EnsurePKI(auth.PKIConfig{Dir: s.pkiDir})
	if err != nil {
		t.Fatalf("EnsurePKI: %v", err)
	}
	return p
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %v, want %v", path, got, want)
	}
}

func writeTokenFile(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// storedFiles opens the bootstrap data in store with token.
func storedFiles(t *testing.T, store Store, token string) map[string][]byte {
	t.Helper()
	data, ok, err := store.Get(t.Context(), DefaultKey)
	if err != nil || !ok {
		t.Fatalf("Get %s = %v, %v", DefaultKey, ok, err)
	}
	files, err := Open(token, data)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return files
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestEnsureFirstServer(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	a := newServer(t)
	// What a crash in the middle of making a CA leaves behind.
	if err := os.MkdirAll(filepath.Join(a.dataDir, scratchPrefix+"123", "nested"), 0o700); err != nil {
		t.Fatal(err)
	}
	token := mustEnsure(t, a.config(store))

	parsed, err := ParseToken(token)
	if err != nil {
		t.Fatalf("Ensure returned %q: %v", token, err)
	}
	ca := readFile(t, filepath.Join(a.pkiDir, auth.CACertFile))
	if parsed.CAHash != CAHash(ca) {
		t.Errorf("token pins %s, want the hash of ca.crt %s", parsed.CAHash, CAHash(ca))
	}
	if got := readFile(t, TokenPath(a.dataDir)); string(got) != token+"\n" {
		t.Errorf("token file holds %q, want %q", got, token+"\n")
	}
	checkMode(t, TokenPath(a.dataDir), 0o600)
	checkMode(t, filepath.Join(a.pkiDir, auth.CAKeyFile), 0o600)
	checkMode(t, filepath.Join(a.pkiDir, auth.CACertFile), 0o644)
	// Only the shared files: the serving and client pairs are EnsurePKI's.
	if got, want := dirNames(t, a.pkiDir), []string{auth.CACertFile, auth.CAKeyFile}; !slices.Equal(got, want) {
		t.Errorf("pki dir holds %v, want %v", got, want)
	}
	// The scratch directories, this run's and the stale one, are gone.
	if got, want := dirNames(t, a.dataDir), []string{"pki", TokenFileName}; !slices.Equal(got, want) {
		t.Errorf("data dir holds %v, want %v", got, want)
	}
	files := storedFiles(t, store, token)
	for _, name := range []string{auth.CACertFile, auth.CAKeyFile} {
		if !bytes.Equal(files[name], readFile(t, filepath.Join(a.pkiDir, name))) {
			t.Errorf("%s in etcd differs from the one in the pki dir", name)
		}
	}
	if len(files) != 2 {
		t.Errorf("etcd holds %d files, want ca.crt and ca.key only", len(files))
	}
	p := mustEnsurePKI(t, a)
	if !bytes.Equal(p.CAPEM(), ca) {
		t.Error("EnsurePKI replaced the CA Ensure wrote")
	}

	// A restart, with no flag, finds everything in place.
	if again := mustEnsure(t, a.config(store)); again != token {
		t.Errorf("Ensure on restart = %q, want %q", again, token)
	}
	if !bytes.Equal(readFile(t, filepath.Join(a.pkiDir, auth.CACertFile)), ca) {
		t.Error("restart changed ca.crt")
	}
	// LoadToken reads what `knode token` prints.
	if got, err := LoadToken(a.dataDir); err != nil || got.String() != token {
		t.Errorf("LoadToken = %v, %v; want %q", got, err, token)
	}
}

// TestEnsureKeyHiddenFromObjects: the bootstrap key is outside the
// prefix the API server lists objects under.
func TestEnsureKeyHiddenFromObjects(t *testing.T) {
	s := newEtcd(t)
	mustEnsure(t, newServer(t).config(EtcdStore{Client: s.Client()}))
	res, err := s.List(t.Context(), "/registry/", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 0 {
		t.Errorf("/registry/ holds %d keys after Ensure, want none", len(res.Items))
	}
	if _, err := s.Get(t.Context(), DefaultKey); err != nil {
		t.Errorf("Get %s: %v", DefaultKey, err)
	}
}

func TestEnsureJoin(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	a := newServer(t)
	token := mustEnsure(t, a.config(store))
	pa := mustEnsurePKI(t, a)
	secret, err := ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		cfg  func(Config) Config
	}{
		{name: "full token from a file", cfg: func(c Config) Config { c.TokenFile = writeTokenFile(t, token); return c }},
		{name: "full token on the command line", cfg: func(c Config) Config { c.Token = token; return c }},
		{name: "bare secret", cfg: func(c Config) Config { c.Token = secret.Secret; return c }},
		{name: "given token replaces a bad token file", cfg: func(c Config) Config {
			if err := os.WriteFile(TokenPath(c.DataDir), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			c.Token = token
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newServer(t)
			got := mustEnsure(t, tc.cfg(b.config(store)))
			if got != token {
				t.Errorf("joining Ensure = %q, want the cluster's %q", got, token)
			}
			if tf := readFile(t, TokenPath(b.dataDir)); string(tf) != token+"\n" {
				t.Errorf("joining server's token file = %q, want the full token", tf)
			}
			for _, name := range []string{auth.CACertFile, auth.CAKeyFile} {
				if !bytes.Equal(readFile(t, filepath.Join(a.pkiDir, name)), readFile(t, filepath.Join(b.pkiDir, name))) {
					t.Errorf("%s differs between the servers", name)
				}
			}
			checkMode(t, filepath.Join(b.pkiDir, auth.CAKeyFile), 0o600)
			pb := mustEnsurePKI(t, b)
			servingA := readFile(t, filepath.Join(a.pkiDir, auth.ServingCertFile))
			servingB := readFile(t, filepath.Join(b.pkiDir, auth.ServingCertFile))
			if bytes.Equal(servingA, servingB) {
				t.Error("both servers have the same serving certificate")
			}
			// B's serving certificate is trusted by A's clients.
			certs, err := auth.ParseCertificates(servingB)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pa.CertPool(), DNSName: "localhost"}); err != nil {
				t.Errorf("B's serving certificate does not verify against A's CA: %v", err)
			}
			if !bytes.Equal(pa.CAPEM(), pb.CAPEM()) {
				t.Error("the servers' PKIs have different CAs")
			}
			// B restarts without the flag: its token file is enough.
			if again := mustEnsure(t, b.config(store)); again != token {
				t.Errorf("restarted B: Ensure = %q, want %q", again, token)
			}
		})
	}
}

// TestEnsureExistingCA: a server that ran before this package (a PKI but
// no token) shares the CA it has.
func TestEnsureExistingCA(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	a := newServer(t)
	mustEnsurePKI(t, a)
	before := readFile(t, filepath.Join(a.pkiDir, auth.CACertFile))
	token := mustEnsure(t, a.config(store))
	if parsed, _ := ParseToken(token); parsed.CAHash != CAHash(before) {
		t.Errorf("token pins %s, want the existing CA's %s", parsed.CAHash, CAHash(before))
	}
	if !bytes.Equal(readFile(t, filepath.Join(a.pkiDir, auth.CACertFile)), before) {
		t.Error("Ensure replaced the existing CA")
	}
	if files := storedFiles(t, store, token); !bytes.Equal(files[auth.CACertFile], before) {
		t.Error("etcd does not hold the existing CA")
	}
}

func TestEnsureRefuses(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	a := newServer(t)
	token := mustEnsure(t, a.config(store))
	parsed, err := ParseToken(token)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	otherFile := writeTokenFile(t, other.String())
	// A data directory of another cluster.
	foreign := newServer(t)
	mustEnsurePKI(t, foreign)

	for _, tc := range []struct {
		name    string
		server  server
		store   Store
		cfg     func(Config) Config
		wantIs  error
		wantMsg string
	}{
		{name: "no token", wantIs: ErrTokenRequired,
			wantMsg: "etcd already holds the cluster's bootstrap data (/knode/bootstrap/pki), written by another server; start this server with the cluster's token (--token-file"},
		{name: "wrong token from a file", cfg: func(c Config) Config { c.TokenFile = otherFile; return c }, wantIs: ErrWrongToken,
			wantMsg: "bootstrap: --token-file " + otherFile + ": the token does not open the cluster's bootstrap data: authentication failed"},
		{name: "wrong token on the command line", cfg: func(c Config) Config { c.Token = other.String(); return c }, wantIs: ErrWrongToken,
			wantMsg: "bootstrap: --token: the token does not open the cluster's bootstrap data"},
		{name: "right secret, another CA pinned", cfg: func(c Config) Config { c.Token = Token{CAHash: testHash, Secret: parsed.Secret}.String(); return c },
			wantIs: ErrOtherCluster, wantMsg: "the token pins the CA with SHA-256 " + testHash},
		{name: "invalid token", cfg: func(c Config) Config { c.Token = "short"; return c }, wantIs: ErrInvalidToken,
			wantMsg: "bootstrap: --token: invalid cluster token: the secret has 5 characters"},
		{name: "bad token file in the data dir", cfg: func(c Config) Config {
			if err := os.WriteFile(TokenPath(c.DataDir), []byte("garbage"), 0o600); err != nil {
				t.Fatal(err)
			}
			return c
		}, wantIs: ErrInvalidToken, wantMsg: "/" + TokenFileName + ": invalid cluster token: the secret has 7 characters"},
		{name: "unreadable token file", cfg: func(c Config) Config { c.TokenFile = filepath.Join(t.TempDir(), "absent"); return c }, wantIs: fs.ErrNotExist,
			wantMsg: "bootstrap: --token-file: open "},
		{name: "pki dir of another cluster", server: foreign, cfg: func(c Config) Config { c.Token = token; return c }, wantIs: ErrOtherCluster,
			wantMsg: "its ca.crt is not the cluster's CA: it belongs to another cluster; remove its files to join this cluster"},
		{name: "pinned token, etcd without data, no CA", store: EtcdStore{Client: newEtcd(t).Client()}, cfg: func(c Config) Config { c.Token = token; return c },
			wantIs: ErrOtherCluster, wantMsg: "the token pins a CA, but etcd holds no bootstrap data (/knode/bootstrap/pki) and"},
		{name: "token and token file", cfg: func(c Config) Config { c.Token, c.TokenFile = token, otherFile; return c },
			wantMsg: "tokenFile: Forbidden: --token and --token-file cannot both be given"},
		{name: "key among objects", cfg: func(c Config) Config { c.Key = "/registry/bootstrap"; return c },
			wantMsg: `key: Invalid value: "/registry/bootstrap": must start with "/" and not with "/registry/"`},
		{name: "no store", store: Store(nil), cfg: func(c Config) Config { c.Store = nil; return c },
			wantMsg: "store: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.server
			if s == (server{}) {
				s = newServer(t)
			}
			var before []byte
			if b, err := os.ReadFile(filepath.Join(s.pkiDir, auth.CACertFile)); err == nil {
				before = b
			}
			st := tc.store
			if st == nil {
				st = store
			}
			cfg := s.config(st)
			if tc.cfg != nil {
				cfg = tc.cfg(cfg)
			}
			got, err := ensure(t, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) || (tc.wantIs != nil && !errors.Is(err, tc.wantIs)) {
				t.Fatalf("Ensure = %q, %v; want an error wrapping %v containing %q", got, err, tc.wantIs, tc.wantMsg)
			}
			if strings.Contains(err.Error(), parsed.Secret) || strings.Contains(err.Error(), other.Secret) {
				t.Errorf("error %q quotes a secret", err)
			}
			after, _ := os.ReadFile(filepath.Join(s.pkiDir, auth.CACertFile))
			if !bytes.Equal(before, after) {
				t.Errorf("a refused Ensure changed %s/%s", s.pkiDir, auth.CACertFile)
			}
		})
	}
	// The cluster's data is untouched by all that.
	if files := storedFiles(t, store, token); !bytes.Equal(files[auth.CACertFile], readFile(t, filepath.Join(a.pkiDir, auth.CACertFile))) {
		t.Error("the stored CA changed")
	}
}

// barrier holds every caller of CreateIfAbsent until n have arrived, so
// that n servers that all found no bootstrap data create it at once.
type barrier struct {
	Store
	mu      sync.Mutex
	n       int
	arrived chan struct{}
}

func newBarrier(s Store, n int) *barrier {
	return &barrier{Store: s, n: n, arrived: make(chan struct{})}
}

func (b *barrier) CreateIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	b.mu.Lock()
	if b.n--; b.n == 0 {
		close(b.arrived)
	}
	b.mu.Unlock()
	select {
	case <-b.arrived:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return b.Store.CreateIfAbsent(ctx, key, value)
}

// race runs Ensure for each config at once, all past their first read
// before any writes.
func race(t *testing.T, store Store, cfgs ...Config) ([]string, []error) {
	t.Helper()
	b := newBarrier(store, len(cfgs))
	tokens, errs := make([]string, len(cfgs)), make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, cfg := range cfgs {
		cfg.Store = b
		wg.Go(func() { tokens[i], errs[i] = ensure(t, cfg) })
	}
	wg.Wait()
	return tokens, errs
}

// TestEnsureRaceSameToken: servers started together with one token all end
// with the CA of whichever stored its data first.
func TestEnsureRaceSameToken(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	servers := []server{newServer(t), newServer(t), newServer(t)}
	var cfgs []Config
	for _, s := range servers {
		cfg := s.config(store)
		cfg.Token = testSecret
		cfgs = append(cfgs, cfg)
	}
	tokens, errs := race(t, store, cfgs...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("server %d: Ensure: %v", i, err)
		}
	}
	stored := storedFiles(t, store, testSecret)
	for i, s := range servers {
		if tokens[i] != tokens[0] {
			t.Errorf("server %d got token %q, server 0 %q", i, tokens[i], tokens[0])
		}
		for _, name := range []string{auth.CACertFile, auth.CAKeyFile} {
			if !bytes.Equal(readFile(t, filepath.Join(s.pkiDir, name)), stored[name]) {
				t.Errorf("server %d: %s is not the stored one", i, name)
			}
		}
		if got, want := dirNames(t, s.dataDir), []string{"pki", TokenFileName}; !slices.Equal(got, want) {
			t.Errorf("server %d: data dir holds %v, want %v", i, got, want)
		}
		mustEnsurePKI(t, s)
	}
	if parsed, _ := ParseToken(tokens[0]); parsed.CAHash != CAHash(stored[auth.CACertFile]) || parsed.Secret != testSecret {
		t.Errorf("token %q does not pin the stored CA with the given secret", tokens[0])
	}
}

// TestEnsureRaceGeneratedTokens: servers started together without a token
// each make their own; one wins, the other is told to get its token, and
// joins once given it.
func TestEnsureRaceGeneratedTokens(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	a, b := newServer(t), newServer(t)
	tokens, errs := race(t, store, a.config(store), b.config(store))
	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	if errs[winner] != nil {
		t.Fatalf("both lost: %v; %v", errs[0], errs[1])
	}
	if !errors.Is(errs[loser], ErrTokenRequired) || !strings.Contains(errs[loser].Error(), "another server stored the cluster's bootstrap data in etcd (/knode/bootstrap/pki) while this one was creating it") {
		t.Fatalf("loser: Ensure = %v; want ErrTokenRequired telling it to use the winner's token", errs[loser])
	}
	servers := []server{a, b}
	l := servers[loser]
	if got := dirNames(t, l.pkiDir); len(got) != 0 {
		t.Errorf("loser's pki dir holds %v, want nothing", got)
	}
	if _, err := os.Stat(TokenPath(l.dataDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("loser kept a token file that opens nothing: %v", err)
	}
	// Given the winner's token, the loser joins.
	cfg := l.config(store)
	cfg.Token = tokens[winner]
	if got := mustEnsure(t, cfg); got != tokens[winner] {
		t.Errorf("loser rejoining: Ensure = %q, want %q", got, tokens[winner])
	}
	w := servers[winner]
	if !bytes.Equal(readFile(t, filepath.Join(w.pkiDir, auth.CAKeyFile)), readFile(t, filepath.Join(l.pkiDir, auth.CAKeyFile))) {
		t.Error("the servers have different CA keys")
	}
}

// TestEnsureResumesAfterCrash: a server that stored its data but stopped
// before writing its PKI directory finishes the job on its next start.
func TestEnsureResumesAfterCrash(t *testing.T) {
	store := EtcdStore{Client: newEtcd(t).Client()}
	a := newServer(t)
	token := mustEnsure(t, a.config(store))
	// The crash: the token file holds the bare secret (written before the
	// data was stored), the PKI directory nothing, or only the key.
	parsed, _ := ParseToken(token)
	if err := os.WriteFile(TokenPath(a.dataDir), []byte(parsed.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(a.pkiDir, auth.CACertFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.pkiDir, auth.CAKeyFile), []byte("half written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mustEnsure(t, a.config(store)); got != token {
		t.Errorf("Ensure after the crash = %q, want %q", got, token)
	}
	stored := storedFiles(t, store, token)
	for _, name := range []string{auth.CACertFile, auth.CAKeyFile} {
		if !bytes.Equal(readFile(t, filepath.Join(a.pkiDir, name)), stored[name]) {
			t.Errorf("%s is not the stored one after the restart", name)
		}
	}
	if got := readFile(t, TokenPath(a.dataDir)); string(got) != token+"\n" {
		t.Errorf("token file = %q, want the full token", got)
	}
}

// TestEtcdStore checks CreateIfAbsent's contract on etcd itself.
func TestEtcdStore(t *testing.T) {
	s := EtcdStore{Client: newEtcd(t).Client()}
	ctx := t.Context()
	if _, ok, err := s.Get(ctx, "/k"); ok || err != nil {
		t.Fatalf("Get of a missing key = %v, %v", ok, err)
	}
	if created, err := s.CreateIfAbsent(ctx, "/k", []byte("one")); !created || err != nil {
		t.Fatalf("first CreateIfAbsent = %v, %v", created, err)
	}
	if created, err := s.CreateIfAbsent(ctx, "/k", []byte("two")); created || err != nil {
		t.Fatalf("second CreateIfAbsent = %v, %v", created, err)
	}
	if v, ok, err := s.Get(ctx, "/k"); string(v) != "one" || !ok || err != nil {
		t.Fatalf("Get = %q, %v, %v; want the first value", v, ok, err)
	}
}

func TestFilesToWrite(t *testing.T) {
	crt, key := auth.CACertFile, auth.CAKeyFile
	shared := map[string][]byte{crt: []byte("ca"), key: []byte("key"), "sa.key": []byte("sa")}
	for _, tc := range []struct {
		name    string
		local   map[string][]byte
		want    []string
		wantErr string
	}{
		{name: "empty directory takes all, CA certificate last", local: nil, want: []string{key, "sa.key", crt}},
		{name: "a key without a certificate is a crash's leftover", local: map[string][]byte{key: []byte("other")}, want: []string{key, "sa.key", crt}},
		{name: "the cluster's CA, nothing missing", local: shared, want: nil},
		{name: "the cluster's CA, a file missing", local: map[string][]byte{crt: []byte("ca"), key: []byte("key")}, want: []string{"sa.key"}},
		{name: "another CA", local: map[string][]byte{crt: []byte("other")}, wantErr: "its ca.crt is not the cluster's CA: it belongs to another cluster"},
		{name: "the cluster's CA with another key", local: map[string][]byte{crt: []byte("ca"), key: []byte("other")}, wantErr: "its ca.key differs from the cluster's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := filesToWrite(tc.local, shared)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrOtherCluster) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("filesToWrite = %v, %v; want ErrOtherCluster containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("filesToWrite = %v, want %v", got, tc.want)
			}
		})
	}
}
