package bootstrap

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"knode/internal/atomicfile"
	"knode/internal/auth"
)

// DefaultKey is where the bootstrap data lives in etcd: outside
// "/registry/", where the API server keeps objects, so no resource can
// read or overwrite it.
const DefaultKey = "/knode/bootstrap/pki"

// TokenFileName is the file in the data directory that holds the cluster
// token (0600, one line).
const TokenFileName = "token"

// ErrTokenRequired: etcd holds another server's bootstrap data and this
// server has no token to open it with.
var ErrTokenRequired = errors.New("a cluster token is required")

// sharedFiles are the files of the PKI directory every server of a
// cluster must hold byte for byte; see the package comment for why the
// others are per server. CACertFile is the anchor: a PKI directory that has
// it holds the cluster's shared files or belongs to another cluster.
var sharedFiles = []string{auth.CACertFile, auth.CAKeyFile}

// Store is the little of etcd that Ensure needs. Both calls must be
// linearizable.
type Store interface {
	// Get returns key's value; ok is false when the key does not exist.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// CreateIfAbsent writes value at key only if key does not exist, in
	// one atomic step, and says whether it wrote.
	CreateIfAbsent(ctx context.Context, key string, value []byte) (created bool, err error)
}

// Config is what Ensure works on. Token and TokenFile are named after the
// `knode server` flags they come from, and errors name those flags.
type Config struct {
	// Store reaches the cluster's etcd. Required.
	Store Store
	// PKIDir is the directory auth.EnsurePKI will use. Required; created
	// (0700) if missing.
	PKIDir string
	// DataDir holds TokenFileName. Required; created (0700) if missing.
	DataDir string
	// Token is the cluster token given on the command line (--token): a
	// full token or a bare secret. At most one of Token and TokenFile.
	Token string
	// TokenFile is a file whose content, without surrounding white space,
	// is the token (--token-file).
	TokenFile string
	// Key is the etcd key of the bootstrap data; default DefaultKey. It
	// must start with "/" and not with "/registry/". Clusters sharing one
	// etcd need different keys.
	Key string
	// Clock stamps a CA that Ensure creates. Nil means the real clock.
	Clock clock.PassiveClock
}

func (c *Config) validate() error {
	var errs field.ErrorList
	if c.Store == nil {
		errs = append(errs, field.Required(field.NewPath("store"), "the cluster's etcd"))
	}
	if c.PKIDir == "" {
		errs = append(errs, field.Required(field.NewPath("pkiDir"), "the directory auth.EnsurePKI uses"))
	}
	if c.DataDir == "" {
		errs = append(errs, field.Required(field.NewPath("dataDir"), "where the token file is kept"))
	}
	if c.Token != "" && c.TokenFile != "" {
		errs = append(errs, field.Forbidden(field.NewPath("tokenFile"), "--token and --token-file cannot both be given"))
	}
	if c.Key == "" {
		c.Key = DefaultKey
	}
	if !strings.HasPrefix(c.Key, "/") || strings.HasPrefix(c.Key, "/registry/") {
		errs = append(errs, field.Invalid(field.NewPath("key"), c.Key, `must start with "/" and not with "/registry/", where objects are stored`))
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if len(errs) > 0 {
		return fmt.Errorf("bootstrap: invalid config: %w", errs.ToAggregate())
	}
	return nil
}

// TokenPath is where a server with data directory dataDir keeps its token.
func TokenPath(dataDir string) string { return filepath.Join(dataDir, TokenFileName) }

// LoadToken reads the token a server left in dataDir. A missing file gives
// an error wrapping fs.ErrNotExist.
func LoadToken(dataDir string) (Token, error) {
	t, ok, err := readToken(TokenPath(dataDir))
	if err != nil {
		return Token{}, err
	}
	if !ok {
		return Token{}, fmt.Errorf("bootstrap: %s: %w", TokenPath(dataDir), fs.ErrNotExist)
	}
	return t, nil
}

// readToken parses the token file at path; ok is false when there is none.
func readToken(path string) (t Token, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Token{}, false, nil
	}
	if err != nil {
		return Token{}, false, fmt.Errorf("bootstrap: %w", err)
	}
	if t, err = ParseToken(strings.TrimSpace(string(b))); err != nil {
		return Token{}, false, fmt.Errorf("bootstrap: %s: %w", path, err)
	}
	return t, true, nil
}

// given is the token this server was started with, and where it came
// from, for error messages.
type given struct {
	token  Token
	source string // "--token", "--token-file F" or the token file's path
}

// Ensure makes cfg.PKIDir hold the cluster's shared files and
// cfg.DataDir/token the cluster's full token, which it returns. Call it
// before auth.EnsurePKI, which then issues this server's own certificates
// from the shared CA.
//
// The token is the one given (Token or TokenFile), else the one in the
// data directory. With no bootstrap data in etcd, this server is the
// first: it seals the CA in its PKI directory (one it creates there if it
// has none) under its token (a new one if it has none) and stores it
// unless another server stored some first; then it joins like the others.
// A joining server opens the stored data with its token and writes the
// shared files it lacks.
//
// It refuses (ErrTokenRequired) to join without a token, (ErrWrongToken)
// with a token that does not open the data, and (ErrOtherCluster) with a
// token pinning another CA or a PKI directory holding another CA; it then
// changes nothing in the PKI directory. Ensure blocks on etcd until ctx
// ends. Only one process at a time may run it on a data directory;
// servers with different data directories may run it at once.
func Ensure(ctx context.Context, cfg Config) (string, error) {
	if err := cfg.validate(); err != nil {
		return "", err
	}
	for _, dir := range []string{cfg.DataDir, cfg.PKIDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("bootstrap: %w", err)
		}
	}
	g, haveGiven, err := cfg.given()
	if err != nil {
		return "", err
	}
	tokenPath := TokenPath(cfg.DataDir)
	stored, haveStored, err := readToken(tokenPath)
	if err != nil {
		if !haveGiven {
			return "", err
		}
		// The given token replaces a token file that cannot be read.
		haveStored = false
	}
	if !haveGiven && haveStored {
		g, haveGiven = given{token: stored, source: tokenPath}, true
	}

	data, ok, err := cfg.Store.Get(ctx, cfg.Key)
	if err != nil {
		return "", fmt.Errorf("bootstrap: reading %s from etcd: %w", cfg.Key, err)
	}
	if !ok {
		var generated bool
		if !haveGiven {
			t, err := NewToken()
			if err != nil {
				return "", err
			}
			g, haveGiven, generated = given{token: t, source: "the token this server generated"}, true, true
		}
		created, err := cfg.first(ctx, g, stored, haveStored)
		if err != nil {
			// A generated token stays in the token file even now: etcd
			// may have stored the data although the write failed.
			return "", err
		}
		if !created {
			if generated {
				// The token file holds a secret that opens nothing.
				_ = os.Remove(tokenPath)
				return "", fmt.Errorf("bootstrap: %w: another server stored the cluster's bootstrap data in etcd (%s) while this one was creating it; start this server with that server's token (--token-file, or --token; `knode token --data-dir DIR` prints it)", ErrTokenRequired, cfg.Key)
			}
			// Join the winner with the same token.
		}
		if data, ok, err = cfg.Store.Get(ctx, cfg.Key); err != nil {
			return "", fmt.Errorf("bootstrap: reading %s from etcd: %w", cfg.Key, err)
		}
		if !ok {
			return "", fmt.Errorf("bootstrap: %s vanished from etcd right after it was created; was it deleted?", cfg.Key)
		}
	}
	if !haveGiven {
		return "", fmt.Errorf("bootstrap: %w: etcd already holds the cluster's bootstrap data (%s), written by another server; start this server with the cluster's token (--token-file, or --token; `knode token --data-dir DIR` on a server prints it)", ErrTokenRequired, cfg.Key)
	}
	return cfg.join(g, data, stored, haveStored)
}

// given reads Token or TokenFile; ok is false when neither is set.
func (c *Config) given() (g given, ok bool, err error) {
	switch {
	case c.Token != "":
		t, err := ParseToken(c.Token)
		if err != nil {
			return given{}, false, fmt.Errorf("bootstrap: --token: %w", err)
		}
		return given{token: t, source: "--token"}, true, nil
	case c.TokenFile != "":
		source := "--token-file " + c.TokenFile
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return given{}, false, fmt.Errorf("bootstrap: --token-file: %w", err)
		}
		t, err := ParseToken(strings.TrimSpace(string(b)))
		if err != nil {
			return given{}, false, fmt.Errorf("bootstrap: %s: %w", source, err)
		}
		return given{token: t, source: source}, true, nil
	}
	return given{}, false, nil
}

// GivenToken reads the token a server was started with: token (--token)
// or, when that is empty, the file tokenFile (--token-file); ok is false
// when both are empty. Errors name the flag.
func GivenToken(token, tokenFile string) (t Token, ok bool, err error) {
	g, ok, err := (&Config{Token: token, TokenFile: tokenFile}).given()
	return g.token, ok, err
}

// first seals this server's CA (making one if the PKI directory has none)
// under g's secret and stores it unless bootstrap data appeared meanwhile.
// Before storing, it leaves g's secret in the token file, so that the data
// is never in etcd with a token nobody holds. It writes nothing to the
// PKI directory: join does that once the stored data is known.
func (c *Config) first(ctx context.Context, g given, stored Token, haveStored bool) (created bool, err error) {
	local, err := readFiles(c.PKIDir, sharedFiles)
	if err != nil {
		return false, err
	}
	files := local
	if _, ok := local[auth.CACertFile]; ok {
		for _, name := range sharedFiles {
			if _, ok := local[name]; !ok {
				return false, fmt.Errorf("bootstrap: %s has %s but not %s, and etcd holds no bootstrap data to take it from", c.PKIDir, auth.CACertFile, name)
			}
		}
		if err := checkCA(files); err != nil {
			return false, fmt.Errorf("bootstrap: %s: %w", c.PKIDir, err)
		}
		if err := g.token.CheckCA(files[auth.CACertFile]); err != nil {
			return false, fmt.Errorf("bootstrap: %s: %w; %s holds another CA", g.source, err, c.PKIDir)
		}
	} else {
		if g.token.CAHash != "" {
			return false, fmt.Errorf("bootstrap: %s: the token pins a CA, but etcd holds no bootstrap data (%s) and %s has no CA: the token %w, or --etcd-servers is not the cluster's etcd", g.source, c.Key, c.PKIDir, ErrOtherCluster)
		}
		if files, err = c.newCA(); err != nil {
			return false, err
		}
	}
	sealed, err := Seal(g.token.String(), files)
	if err != nil {
		return false, err
	}
	if !haveStored || stored.Secret != g.token.Secret {
		// The bare secret is right whichever server's CA ends up stored.
		if err := writeToken(TokenPath(c.DataDir), Token{Secret: g.token.Secret}); err != nil {
			return false, err
		}
	}
	created, err = c.Store.CreateIfAbsent(ctx, c.Key, sealed)
	if err != nil {
		return false, fmt.Errorf("bootstrap: storing %s in etcd: %w", c.Key, err)
	}
	return created, nil
}

// scratchPrefix begins the name of the directory newCA makes a CA in.
const scratchPrefix = ".bootstrap-ca-"

// newCA has auth.EnsurePKI make a CA in a scratch directory beside the PKI
// directory and returns the shared files from it. The PKI directory itself
// gets the CA only if this server's data is the one stored.
func (c *Config) newCA() (map[string][]byte, error) {
	parent := filepath.Dir(c.PKIDir)
	// Scratch directories of a run that crashed hold a CA key; no other
	// process uses this data directory (see Ensure), so none is in use.
	if stale, err := filepath.Glob(filepath.Join(parent, scratchPrefix+"*")); err == nil {
		for _, d := range stale {
			_ = os.RemoveAll(d)
		}
	}
	dir, err := os.MkdirTemp(parent, scratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	defer os.RemoveAll(dir)
	if _, err := auth.EnsurePKI(auth.PKIConfig{Dir: dir, Clock: c.Clock}); err != nil {
		return nil, fmt.Errorf("bootstrap: creating a CA: %w", err)
	}
	return readFiles(dir, sharedFiles)
}

// join opens data with g's token and makes the PKI directory and the token
// file agree with it.
func (c *Config) join(g given, data []byte, stored Token, haveStored bool) (string, error) {
	shared, err := Open(g.token.String(), data)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %s: %w", g.source, err)
	}
	if err := checkCA(shared); err != nil {
		return "", fmt.Errorf("bootstrap: the bootstrap data in etcd (%s): %w", c.Key, err)
	}
	if err := g.token.CheckCA(shared[auth.CACertFile]); err != nil {
		return "", fmt.Errorf("bootstrap: %s: %w", g.source, err)
	}
	names := make([]string, 0, len(shared))
	for name := range shared {
		names = append(names, name)
	}
	local, err := readFiles(c.PKIDir, names)
	if err != nil {
		return "", err
	}
	writes, err := filesToWrite(local, shared)
	if err != nil {
		return "", fmt.Errorf("bootstrap: %s: %w; remove its files to join this cluster", c.PKIDir, err)
	}
	for _, name := range writes {
		if err := atomicfile.Write(filepath.Join(c.PKIDir, name), shared[name], fileMode(name)); err != nil {
			return "", fmt.Errorf("bootstrap: %w", err)
		}
	}
	full := g.token.WithCA(shared[auth.CACertFile])
	if !haveStored || stored != full {
		if err := writeToken(TokenPath(c.DataDir), full); err != nil {
			return "", err
		}
	}
	return full.String(), nil
}

// filesToWrite decides which of the shared files to write into a PKI
// directory holding local (name to content, absent names missing). A
// directory without the CA certificate takes every shared file; one with
// the cluster's takes those it lacks; any other differing file is another
// cluster's, and refused. The CA certificate comes last, so that a crash
// part way leaves a directory without one, which the next start fills.
func filesToWrite(local, shared map[string][]byte) ([]string, error) {
	caLocal, haveCA := local[auth.CACertFile]
	if haveCA && !bytes.Equal(caLocal, shared[auth.CACertFile]) {
		return nil, fmt.Errorf("its %s is not the cluster's CA: it %w", auth.CACertFile, ErrOtherCluster)
	}
	var writes []string
	for name, content := range shared {
		if name == auth.CACertFile {
			continue
		}
		have, ok := local[name]
		switch {
		case !ok || !haveCA:
			writes = append(writes, name)
		case !bytes.Equal(have, content):
			return nil, fmt.Errorf("its %s differs from the cluster's: it %w", name, ErrOtherCluster)
		}
	}
	slices.Sort(writes)
	if !haveCA {
		writes = append(writes, auth.CACertFile)
	}
	return writes, nil
}

// checkCA checks that files hold a CA certificate and its key.
func checkCA(files map[string][]byte) error {
	certPEM, keyPEM := files[auth.CACertFile], files[auth.CAKeyFile]
	if certPEM == nil || keyPEM == nil {
		return fmt.Errorf("%w: it lacks %s or %s", ErrMalformed, auth.CACertFile, auth.CAKeyFile)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s and %s: %w", auth.CACertFile, auth.CAKeyFile, err)
	}
	if !pair.Leaf.IsCA {
		return fmt.Errorf("%s is not a CA certificate", auth.CACertFile)
	}
	return nil
}

// readFiles returns the content of each of names that exists in dir.
func readFiles(dir string, names []string) (map[string][]byte, error) {
	files := make(map[string][]byte, len(names))
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("bootstrap: %w", err)
		default:
			files[name] = b
		}
	}
	return files, nil
}

// fileMode: certificates and public keys are readable by all, anything
// else is treated as a secret.
func fileMode(name string) os.FileMode {
	if strings.HasSuffix(name, ".crt") || strings.HasSuffix(name, ".pub") {
		return 0o644
	}
	return 0o600
}

func writeToken(path string, t Token) error {
	if err := atomicfile.Write(path, []byte(t.String()+"\n"), 0o600); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	return nil
}
