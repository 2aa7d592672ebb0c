package bootstrap

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Token grammar. A full token is tokenPrefix, the CA hash (hashLen hex
// digits), tokenUserSep, the user, ":" and the secret; the only user a
// server accepts is serverUser. Any other token is a bare secret.
const (
	tokenPrefix  = "K10"
	tokenUserSep = "::"
	serverUser   = "server"
	hashLen      = 2 * sha256.Size
)

// Bounds on a secret, in bytes.
const (
	// MinSecretLen is the shortest secret accepted. The secret is the only
	// thing between a reader of etcd and the cluster CA's key; a generated
	// one is 64 hex digits.
	MinSecretLen = 16
	// MaxSecretLen is the longest secret accepted.
	MaxSecretLen = 1024
)

var (
	// ErrInvalidToken: a token that does not follow the grammar.
	ErrInvalidToken = errors.New("invalid cluster token")
	// ErrOtherCluster: a token or a PKI directory that belongs to another
	// cluster than the one whose bootstrap data is in etcd.
	ErrOtherCluster = errors.New("belongs to another cluster")
)

// Token is a parsed cluster token. The zero value is not a token.
type Token struct {
	// CAHash is the lower-case hex SHA-256 of the cluster's ca.crt file,
	// byte for byte; empty for a bare secret, which pins no CA.
	CAHash string
	// Secret is what the key of the bootstrap data is derived from: at
	// least MinSecretLen printable ASCII characters other than space.
	Secret string
}

// NewToken returns a token with a new random secret (32 bytes from
// crypto/rand, in hex) and no CA hash.
func NewToken() (Token, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Token{}, fmt.Errorf("bootstrap: generating a token: %w", err)
	}
	return Token{Secret: hex.EncodeToString(b)}, nil
}

// ParseToken reads a full token (K10<64 hex digits>::server:<secret>) or a
// bare secret. A string that starts with "K10" is always read as a full
// token. The errors wrap ErrInvalidToken and say what is wrong, never
// quoting the secret.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return Token{}, fmt.Errorf("%w: it is empty", ErrInvalidToken)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return Token{}, fmt.Errorf("%w: byte %d is a space, a control or a non-ASCII character; a token is printable ASCII", ErrInvalidToken, i)
		}
	}
	if !strings.HasPrefix(s, tokenPrefix) {
		return Token{Secret: s}, checkSecret(s)
	}
	const shape = "a token starting with " + tokenPrefix + " must be " + tokenPrefix + "<64 hex digits: the SHA-256 of the CA certificate>" + tokenUserSep + serverUser + ":<secret>"
	rest := s[len(tokenPrefix):]
	hash, rest, ok := strings.Cut(rest, tokenUserSep)
	if !ok {
		return Token{}, fmt.Errorf("%w: no %q after the CA hash; %s", ErrInvalidToken, tokenUserSep, shape)
	}
	if len(hash) != hashLen {
		return Token{}, fmt.Errorf("%w: the CA hash has %d characters, not %d; %s", ErrInvalidToken, len(hash), hashLen, shape)
	}
	if _, err := hex.DecodeString(hash); err != nil {
		return Token{}, fmt.Errorf("%w: the CA hash is not hexadecimal; %s", ErrInvalidToken, shape)
	}
	user, secret, ok := strings.Cut(rest, ":")
	if !ok {
		return Token{}, fmt.Errorf("%w: no user and secret after %q; %s", ErrInvalidToken, tokenUserSep, shape)
	}
	if user != serverUser {
		return Token{}, fmt.Errorf("%w: it is a token for %q, and a server needs the server token (`knode token` on a server prints it)", ErrInvalidToken, user)
	}
	if err := checkSecret(secret); err != nil {
		return Token{}, err
	}
	return Token{CAHash: strings.ToLower(hash), Secret: secret}, nil
}

func checkSecret(s string) error {
	switch {
	case len(s) < MinSecretLen:
		return fmt.Errorf("%w: the secret has %d characters, and at least %d are needed", ErrInvalidToken, len(s), MinSecretLen)
	case len(s) > MaxSecretLen:
		return fmt.Errorf("%w: the secret has %d characters, and at most %d are allowed", ErrInvalidToken, len(s), MaxSecretLen)
	}
	return nil
}

// String is the token in the form ParseToken reads: full when CAHash is
// set, else the bare secret.
func (t Token) String() string {
	if t.CAHash == "" {
		return t.Secret
	}
	return tokenPrefix + t.CAHash + tokenUserSep + serverUser + ":" + t.Secret
}

// CAHash is the hash a full token carries for a ca.crt file's content.
func CAHash(caCertFile []byte) string {
	sum := sha256.Sum256(caCertFile)
	return hex.EncodeToString(sum[:])
}

// WithCA returns t pinned to the CA certificate file caCertFile.
func (t Token) WithCA(caCertFile []byte) Token {
	t.CAHash = CAHash(caCertFile)
	return t
}

// CheckCA reports, wrapping ErrOtherCluster, whether t pins a CA other than
// caCertFile. A bare secret pins none and always passes.
func (t Token) CheckCA(caCertFile []byte) error {
	if t.CAHash == "" {
		return nil
	}
	if got := CAHash(caCertFile); got != t.CAHash {
		return fmt.Errorf("the token pins the CA with SHA-256 %s, but the cluster's CA has %s: the token %w", t.CAHash, got, ErrOtherCluster)
	}
	return nil
}
