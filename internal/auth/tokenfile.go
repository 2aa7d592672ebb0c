package auth

import (
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TokenFile authenticates static bearer tokens, as kube-apiserver's
// --token-auth-file does. It is immutable once parsed and safe for
// concurrent use.
//
// Tokens are kept only as SHA-256 digests and looked up by digest, so the
// time a lookup takes does not depend on how much of a guess matches a real
// token.
type TokenFile struct {
	users map[[sha256.Size]byte]*User
}

// LoadTokenFile reads a token file; see ParseTokenFile for the format.
func LoadTokenFile(path string) (*TokenFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: token file: %w", err)
	}
	defer f.Close()
	tf, err := ParseTokenFile(f)
	if err != nil {
		return nil, fmt.Errorf("auth: token file %s: %w", path, err)
	}
	return tf, nil
}

// ParseTokenFile reads upstream's static token CSV: one record a line,
//
//	token,user,uid[,"group1,group2,..."]
//
// Blank lines and lines starting with # are skipped; spaces around a field
// are trimmed, and so are spaces around each group name. Stricter than
// upstream, which warns and carries on: a record with fewer than three
// fields, an empty token or user, a token containing white space (it could
// never be presented) or a token seen before is an error naming its line.
// Error messages never contain a token.
func ParseTokenFile(r io.Reader) (*TokenFile, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true

	tf := &TokenFile{users: map[[sha256.Size]byte]*User{}}
	for {
		record, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return tf, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: %w", pe.StartLine, pe.Err)
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(record) == 1 && strings.TrimSpace(record[0]) == "" {
			continue // a line of white space only
		}
		token, user, err := tokenRecord(record)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		key := sha256.Sum256([]byte(token))
		if _, dup := tf.users[key]; dup {
			return nil, fmt.Errorf("line %d: %w", line, field.Duplicate(field.NewPath("token"), field.OmitValueType{}))
		}
		tf.users[key] = user
	}
}

// tokenRecord checks one parsed record and returns its token and user.
func tokenRecord(record []string) (string, *User, error) {
	if len(record) < 3 {
		return "", nil, fmt.Errorf("must have at least 3 fields (token, user name, user uid), found %d", len(record))
	}
	token := strings.TrimSpace(record[0])
	name := strings.TrimSpace(record[1])
	uid := strings.TrimSpace(record[2])
	var errs field.ErrorList
	switch {
	case token == "":
		errs = append(errs, field.Required(field.NewPath("token"), ""))
	case strings.ContainsFunc(token, isSpace):
		errs = append(errs, field.Invalid(field.NewPath("token"), field.OmitValueType{}, "must not contain white space"))
	}
	if name == "" {
		errs = append(errs, field.Required(field.NewPath("user"), ""))
	}
	if len(errs) > 0 {
		return "", nil, errs.ToAggregate()
	}
	var groups []string
	if len(record) >= 4 {
		for g := range strings.SplitSeq(record[3], ",") {
			groups = append(groups, strings.TrimSpace(g))
		}
	}
	return token, newUser(name, uid, groups), nil
}

func isSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\v' || r == '\f'
}

// Len returns the number of tokens.
func (t *TokenFile) Len() int { return len(t.users) }

// Authenticate implements Authenticator for "Authorization: Bearer <token>".
// A bearer token it does not know is ErrInvalidToken.
func (t *TokenFile) Authenticate(r *http.Request) (*User, bool, error) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, false, nil
	}
	user, ok := t.users[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, false, ErrInvalidToken
	}
	return user.clone(), true, nil
}
