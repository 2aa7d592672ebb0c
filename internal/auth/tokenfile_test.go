package auth

import (
	"crypto/sha256"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// users returns token → user for a parsed file, for comparison.
func users(tf *TokenFile, tokens ...string) map[string]*User {
	out := map[string]*User{}
	for _, tok := range tokens {
		if u, ok := tf.users[sha256.Sum256([]byte(tok))]; ok {
			out[tok] = u
		}
	}
	return out
}

func TestParseTokenFile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// tokens to look up in the result.
		tokens  []string
		want    map[string]*User
		wantErr string
	}{
		{name: "empty file", in: "", want: map[string]*User{}},
		{name: "upstream example", in: "31ada4fd-adec-460c-809a-9e56ceb75269,kubelet-bootstrap,10001,\"system:kubelet-bootstrap\"\n",
			tokens: []string{"31ada4fd-adec-460c-809a-9e56ceb75269"},
			want: map[string]*User{"31ada4fd-adec-460c-809a-9e56ceb75269": {Name: "kubelet-bootstrap", UID: "10001",
				Groups: []string{"system:kubelet-bootstrap", "system:authenticated"}}}},
		{name: "comments, blank lines, several groups, no groups", in: strings.Join([]string{
			"# static tokens",
			"",
			"tok1,alice,1,\"dev,ops\"",
			"   ",
			"#tok9,mallory,9",
			"tok2,bob,2",
			"tok3, carol , 3 , \" a , ,b \"",
			"tok4,dave,",
			"",
		}, "\n"),
			tokens: []string{"tok1", "tok2", "tok3", "tok4", "tok9"},
			want: map[string]*User{
				"tok1": {Name: "alice", UID: "1", Groups: []string{"dev", "ops", "system:authenticated"}},
				"tok2": {Name: "bob", UID: "2", Groups: []string{"system:authenticated"}},
				"tok3": {Name: "carol", UID: "3", Groups: []string{"a", "b", "system:authenticated"}},
				"tok4": {Name: "dave", UID: "", Groups: []string{"system:authenticated"}},
			}},
		{name: "windows line endings", in: "tok1,alice,1\r\ntok2,bob,2\r\n", tokens: []string{"tok1", "tok2"},
			want: map[string]*User{
				"tok1": {Name: "alice", UID: "1", Groups: []string{"system:authenticated"}},
				"tok2": {Name: "bob", UID: "2", Groups: []string{"system:authenticated"}},
			}},
		{name: "too few fields", in: "# c\n\ntok1,alice,1\ntok2,bob\n",
			wantErr: "line 4: must have at least 3 fields (token, user name, user uid), found 2"},
		{name: "empty token", in: "tok1,alice,1\n,bob,2\n", wantErr: "line 2: token: Required value"},
		{name: "empty user", in: "tok1,,1\n", wantErr: "line 1: user: Required value"},
		{name: "token with a space", in: "\"to k\",alice,1\n", wantErr: "line 1: token: Invalid value: must not contain white space"},
		{name: "duplicate token", in: "tok1,alice,1\ntok1,bob,2\n", wantErr: "line 2: token: Duplicate value"},
		{name: "unterminated quote", in: "tok1,alice,1\ntok2,bob,2,\"g1,g2\n", wantErr: "line 2: extraneous or missing \" in quoted-field"},
		{name: "bare quote", in: "tok1,al\"ice,1\n", wantErr: "line 1: bare \" in non-quoted-field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tf, err := ParseTokenFile(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, users(tf, tc.tokens...)); diff != "" {
				t.Errorf("users (-want +got):\n%s", diff)
			}
			if tf.Len() != len(tc.want) {
				t.Errorf("Len = %d, want %d", tf.Len(), len(tc.want))
			}
		})
	}
}

func TestParseTokenFileNeverEchoesTokens(t *testing.T) {
	for _, in := range []string{"s3cr3t,alice,1\ns3cr3t,bob,2\n", "\"s3cr3t x\",alice,1\n", "s3cr3t,,1\n"} {
		_, err := ParseTokenFile(strings.NewReader(in))
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("input %q: err = %v, want an error without the token", in, err)
		}
	}
}

func TestTokenFileAuthenticate(t *testing.T) {
	tf, err := ParseTokenFile(strings.NewReader("abc,alice,1,\"dev\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	alice := &User{Name: "alice", UID: "1", Groups: []string{"dev", "system:authenticated"}}
	tests := []struct {
		name     string
		header   []string
		wantUser *User
		wantOK   bool
		wantErr  error
	}{
		{name: "no header"},
		{name: "bearer", header: []string{"Bearer abc"}, wantUser: alice, wantOK: true},
		{name: "scheme case-insensitive", header: []string{"bEaReR abc"}, wantUser: alice, wantOK: true},
		{name: "trailing words ignored", header: []string{"Bearer abc def"}, wantUser: alice, wantOK: true},
		{name: "unknown token", header: []string{"Bearer abd"}, wantErr: ErrInvalidToken},
		{name: "prefix of a token", header: []string{"Bearer ab"}, wantErr: ErrInvalidToken},
		{name: "basic auth is not ours", header: []string{"Basic YWxpY2U6cHc="}},
		{name: "scheme only", header: []string{"Bearer"}},
		{name: "empty token", header: []string{"Bearer "}},
		{name: "two spaces", header: []string{"Bearer  abc"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, h := range tc.header {
				r.Header.Add("Authorization", h)
			}
			user, ok, err := tf.Authenticate(r)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if ok != tc.wantOK {
				t.Errorf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.wantUser, user); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}

	// A caller changing the returned user does not change the file's.
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer abc")
	u, _, _ := tf.Authenticate(r)
	u.Groups[0] = "system:masters"
	again, _, _ := tf.Authenticate(r)
	if diff := cmp.Diff(alice, again); diff != "" {
		t.Errorf("stored user changed through a returned one:\n%s", diff)
	}
}

func TestLoadTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "tokens.csv")
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(good, []byte("abc,alice,1\n"), 0o600)
	os.WriteFile(bad, []byte("abc,alice\n"), 0o600)

	tf, err := LoadTokenFile(good)
	if err != nil || tf.Len() != 1 {
		t.Fatalf("LoadTokenFile(good) = %v, %v", tf, err)
	}
	if _, err := LoadTokenFile(bad); err == nil || !strings.Contains(err.Error(), bad+": line 1:") {
		t.Errorf("err = %v, want it to name the file and line", err)
	}
	if _, err := LoadTokenFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
}

// FuzzTokenFile: parsing never panics, and every record of a file that
// parses authenticates to a user with AuthenticatedGroup.
func FuzzTokenFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"tok,user,uid\n",
		"tok,user,uid,\"g1,g2\"\n# comment\n\n",
		"\"a\"\"b\",u,1\n",
		"tok,user\n",
		"\"unterminated,u,1\n",
		"t\r\nx,y,z\r\n",
		",,,,,,\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		tf, err := ParseTokenFile(strings.NewReader(in))
		if err != nil {
			return
		}
		if tf.Len() > strings.Count(in, "\n")+1 {
			t.Fatalf("%d tokens from %d lines", tf.Len(), strings.Count(in, "\n")+1)
		}
		for _, u := range tf.users {
			if u.Name == "" || !u.InGroup(AuthenticatedGroup) {
				t.Fatalf("bad user %+v", u)
			}
		}
	})
}
