package bootstrap

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Envelope format, version 1:
//
//	magic "KNBS" | version (1 byte) = 1 | salt (16 bytes) | nonce (12 bytes) | ciphertext
//
// The ciphertext is AES-256-GCM over the JSON object {"files": {name:
// base64 content}}, with everything before it as additional data, so no
// header byte can change unnoticed. The key is PBKDF2-HMAC-SHA256 of the
// token's secret with the salt and kdfIterations rounds: a generated
// secret needs no stretching, but an operator may choose a short one, and
// anyone who can read etcd can try guesses offline. The round count is
// fixed by the version, so a forged header cannot make Open spin.
const (
	magic         = "KNBS"
	version       = 1
	saltLen       = 16
	nonceLen      = 12
	headerLen     = len(magic) + 1 + saltLen + nonceLen
	kdfIterations = 100_000
	keyLen        = 32
)

var (
	// ErrWrongToken: the data is bootstrap data, but the token's secret does
	// not open it. GCM cannot tell a wrong secret from altered data, so
	// this is also what a changed ciphertext gives.
	ErrWrongToken = errors.New("the token does not open the cluster's bootstrap data")
	// ErrMalformed: the data is not bootstrap data this release can read,
	// or what it holds breaks the envelope's rules.
	ErrMalformed = errors.New("malformed bootstrap data")
)

type plaintext struct {
	Files map[string][]byte `json:"files"`
}

// Seal encrypts files (file name to content) under token's secret (a full
// token or a bare secret; see ParseToken). Names must be plain file names
// (see checkName); there must be at least one. Each call uses a new random
// salt and nonce, so sealing the same input twice gives different bytes.
// Seal does not check token's CA hash against the files.
func Seal(token string, files map[string][]byte) ([]byte, error) {
	t, err := ParseToken(token)
	if err != nil {
		return nil, err
	}
	if err := checkFiles(files); err != nil {
		return nil, fmt.Errorf("bootstrap: cannot seal: %w", err)
	}
	body, err := json.Marshal(plaintext{Files: files})
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	header := make([]byte, headerLen)
	copy(header, magic)
	header[len(magic)] = version
	if _, err := rand.Read(header[len(magic)+1:]); err != nil {
		return nil, fmt.Errorf("bootstrap: random salt and nonce: %w", err)
	}
	salt := header[len(magic)+1 : len(magic)+1+saltLen]
	nonce := header[len(magic)+1+saltLen:]
	aead, err := newAEAD(t.Secret, salt)
	if err != nil {
		return nil, err
	}
	return aead.Seal(header, nonce, body, header), nil
}

// Open decrypts data sealed by Seal with token's secret and returns the
// files. Errors wrap ErrInvalidToken (token), ErrMalformed (not readable
// bootstrap data, another envelope version, or contents that break Seal's
// rules) or ErrWrongToken (the secret does not open it).
func Open(token string, data []byte) (map[string][]byte, error) {
	t, err := ParseToken(token)
	if err != nil {
		return nil, err
	}
	switch {
	case len(data) == 0:
		return nil, fmt.Errorf("%w: it is empty", ErrMalformed)
	case !strings.HasPrefix(string(data[:min(len(data), len(magic))]), magic):
		return nil, fmt.Errorf("%w: it does not start with %q", ErrMalformed, magic)
	case len(data) < len(magic)+1:
		return nil, fmt.Errorf("%w: it ends before the version", ErrMalformed)
	case data[len(magic)] != version:
		return nil, fmt.Errorf("%w: it is envelope version %d, and this release reads version %d only (is a newer knode server in the cluster?)", ErrMalformed, data[len(magic)], version)
	case len(data) < headerLen+16:
		return nil, fmt.Errorf("%w: %d bytes is too short for version %d", ErrMalformed, len(data), version)
	}
	header := data[:headerLen]
	salt := header[len(magic)+1 : len(magic)+1+saltLen]
	nonce := header[len(magic)+1+saltLen:]
	aead, err := newAEAD(t.Secret, salt)
	if err != nil {
		return nil, err
	}
	body, err := aead.Open(nil, nonce, data[headerLen:], header)
	if err != nil {
		return nil, fmt.Errorf("%w: authentication failed (a token of another cluster, or the data was altered)", ErrWrongToken)
	}
	var p plaintext
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: decrypted, but not the expected JSON: %v", ErrMalformed, err)
	}
	if err := checkFiles(p.Files); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return p.Files, nil
}

func newAEAD(secret string, salt []byte) (cipher.AEAD, error) {
	key, err := pbkdf2.Key(sha256.New, secret, salt, kdfIterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: deriving the key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return aead, nil
}

// maxNameLen is the longest file name the envelope carries.
const maxNameLen = 255

func checkFiles(files map[string][]byte) error {
	if len(files) == 0 {
		return errors.New("no files")
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := checkName(name); err != nil {
			return err
		}
	}
	return nil
}

// checkName accepts what can only name a file directly inside the PKI
// directory: 1 to 255 characters of [A-Za-z0-9._-], starting with a letter
// or digit (so never ".", ".." or a hidden temporary file).
func checkName(name string) error {
	if name == "" || len(name) > maxNameLen {
		return fmt.Errorf("file name %q: must have 1 to %d characters", name, maxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return fmt.Errorf("file name %q: must be letters, digits, '.', '_' and '-', starting with a letter or digit", name)
		}
	}
	return nil
}
