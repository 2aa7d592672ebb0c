package bootstrap

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	testHash   = strings.Repeat("ab", 32)
	testSecret = "0123456789abcdef-secret"
)

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    Token
		wantErr string // substring; empty means success
	}{
		{name: "bare secret", in: testSecret, want: Token{Secret: testSecret}},
		{name: "bare secret of exactly the minimum length", in: strings.Repeat("s", MinSecretLen), want: Token{Secret: strings.Repeat("s", MinSecretLen)}},
		{name: "bare secret of exactly the maximum length", in: strings.Repeat("s", MaxSecretLen), want: Token{Secret: strings.Repeat("s", MaxSecretLen)}},
		{name: "full", in: "K10" + testHash + "::server:" + testSecret, want: Token{CAHash: testHash, Secret: testSecret}},
		{name: "full with upper-case hash", in: "K10" + strings.ToUpper(testHash) + "::server:" + testSecret, want: Token{CAHash: testHash, Secret: testSecret}},
		{name: "full with colons in the secret", in: "K10" + testHash + "::server:a:b:c:0123456789abcdef", want: Token{CAHash: testHash, Secret: "a:b:c:0123456789abcdef"}},
		{name: "empty", in: "", wantErr: "invalid cluster token: it is empty"},
		{name: "secret one short", in: strings.Repeat("s", MinSecretLen-1), wantErr: "the secret has 15 characters, and at least 16 are needed"},
		{name: "secret one too long", in: strings.Repeat("s", MaxSecretLen+1), wantErr: "the secret has 1025 characters, and at most 1024 are allowed"},
		{name: "space", in: "0123456789 abcdef", wantErr: "byte 10 is a space"},
		{name: "trailing newline", in: testSecret + "\n", wantErr: "byte 23 is a space, a control or a non-ASCII character"},
		{name: "non-ASCII", in: "0123456789abcdéf", wantErr: "non-ASCII"},
		{name: "K10 without separator", in: "K10" + testHash + testSecret, wantErr: `no "::" after the CA hash`},
		{name: "short hash", in: "K10" + testHash[:63] + "::server:" + testSecret, wantErr: "the CA hash has 63 characters, not 64"},
		{name: "hash not hex", in: "K10" + strings.Repeat("zz", 32) + "::server:" + testSecret, wantErr: "the CA hash is not hexadecimal"},
		{name: "no user", in: "K10" + testHash + "::" + testSecret, wantErr: "no user and secret after"},
		{name: "node token", in: "K10" + testHash + "::node:" + testSecret, wantErr: `it is a token for "node", and a server needs the server token`},
		{name: "full with short secret", in: "K10" + testHash + "::server:short", wantErr: "the secret has 5 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseToken(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidToken) {
					t.Fatalf("ParseToken = %+v, %v; want an ErrInvalidToken containing %q", got, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), testSecret) {
					t.Errorf("error %q quotes the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseToken: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseToken (-want +got):\n%s", diff)
			}
			// String gives back what ParseToken reads, in canonical form.
			again, err := ParseToken(got.String())
			if err != nil || again != got {
				t.Errorf("ParseToken(String()) = %+v, %v; want %+v", again, err, got)
			}
		})
	}
}

func TestNewToken(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Errorf("two NewToken calls gave the same token %q", a)
	}
	if a.CAHash != "" || len(a.Secret) != 64 {
		t.Errorf("NewToken = %+v; want a 64-character secret and no CA hash", a)
	}
	if got, err := ParseToken(a.String()); err != nil || got != a {
		t.Errorf("ParseToken(%q) = %+v, %v", a.String(), got, err)
	}
}

func TestCheckCA(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nnot parsed\n-----END CERTIFICATE-----\n")
	bare := Token{Secret: testSecret}
	for _, tc := range []struct {
		name  string
		token Token
		ca    []byte
		want  error
	}{
		{name: "bare secret pins nothing", token: bare, ca: ca},
		{name: "pinned to this CA", token: bare.WithCA(ca), ca: ca},
		{name: "pinned to another CA", token: bare.WithCA(ca), ca: append([]byte{}, ca[1:]...), want: ErrOtherCluster},
		{name: "one byte more is another CA", token: bare.WithCA(ca), ca: append(append([]byte{}, ca...), '\n'), want: ErrOtherCluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.token.CheckCA(tc.ca)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("CheckCA = %v, want %v", err, tc.want)
			}
		})
	}
}
