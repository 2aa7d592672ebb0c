package storage

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// continueToken is what a continue string carries: the last key a page
// returned and the revision every page of the list reads at.
type continueToken struct {
	Key      string `json:"key"`
	Revision int64  `json:"rv"`
}

// EncodeContinue returns the continue string for a list of prefix that has
// returned every key up to and including lastKey, read at revision. Stores
// use it so that their tokens share one format; callers treat the string as
// opaque.
func EncodeContinue(lastKey string, revision int64) string {
	b, err := json.Marshal(continueToken{Key: lastKey, Revision: revision})
	if err != nil {
		// A struct of a string and an int always marshals.
		panic(fmt.Sprintf("storage: encoding continue token: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeContinue reverses EncodeContinue for a list of prefix. It returns the
// key the next page starts after and the revision to read at, or an error
// wrapping ErrInvalidContinue when the token is malformed, has no positive
// revision, or names a key outside prefix.
func DecodeContinue(token, prefix string) (lastKey string, revision int64, err error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", 0, fmt.Errorf("%w: not base64: %v", ErrInvalidContinue, err)
	}
	var t continueToken
	if err := json.Unmarshal(b, &t); err != nil {
		return "", 0, fmt.Errorf("%w: %v", ErrInvalidContinue, err)
	}
	if t.Revision <= 0 {
		return "", 0, fmt.Errorf("%w: revision %d must be positive", ErrInvalidContinue, t.Revision)
	}
	if !strings.HasPrefix(t.Key, prefix) {
		return "", 0, fmt.Errorf("%w: key %q is not under prefix %q", ErrInvalidContinue, t.Key, prefix)
	}
	return t.Key, t.Revision, nil
}
