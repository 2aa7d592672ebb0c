package bootstrap

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var testFiles = map[string][]byte{
	"ca.crt": []byte("certificate\n"),
	"ca.key": []byte("key\n"),
	"empty":  {},
}

// sealBody seals an arbitrary plaintext the way Seal does, for contents
// Seal itself refuses to produce.
func sealBody(t testing.TB, secret string, body []byte) []byte {
	t.Helper()
	header := append([]byte(magic), version)
	header = append(header, make([]byte, saltLen+nonceLen)...)
	if _, err := rand.Read(header[len(magic)+1:]); err != nil {
		t.Fatal(err)
	}
	aead, err := newAEAD(secret, header[len(magic)+1:len(magic)+1+saltLen])
	if err != nil {
		t.Fatal(err)
	}
	return aead.Seal(header, header[len(magic)+1+saltLen:], body, header)
}

func flip(data []byte, i int) []byte {
	out := bytes.Clone(data)
	out[i] ^= 0x01
	return out
}

func TestOpen(t *testing.T) {
	sealed, err := Seal(testSecret, testFiles)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	v2 := bytes.Clone(sealed)
	v2[len(magic)] = 2
	for _, tc := range []struct {
		name    string
		token   string
		data    []byte
		want    map[string][]byte
		wantIs  error
		wantMsg string
	}{
		{name: "round trip", token: testSecret, data: sealed, want: testFiles},
		{name: "a full token opens by its secret", token: "K10" + testHash + "::server:" + testSecret, data: sealed, want: testFiles},
		{name: "wrong token", token: testSecret + "x", data: sealed, wantIs: ErrWrongToken,
			wantMsg: "the token does not open the cluster's bootstrap data: authentication failed"},
		{name: "invalid token", token: "short", data: sealed, wantIs: ErrInvalidToken},
		{name: "empty data", token: testSecret, data: nil, wantIs: ErrMalformed, wantMsg: "it is empty"},
		{name: "not an envelope", token: testSecret, data: []byte(`{"files":{}}`), wantIs: ErrMalformed, wantMsg: `does not start with "KNBS"`},
		{name: "magic only", token: testSecret, data: []byte(magic), wantIs: ErrMalformed, wantMsg: "ends before the version"},
		{name: "prefix of magic", token: testSecret, data: []byte(magic[:2]), wantIs: ErrMalformed, wantMsg: "does not start with"},
		{name: "wrong version", token: testSecret, data: v2, wantIs: ErrMalformed, wantMsg: "it is envelope version 2, and this release reads version 1 only"},
		{name: "header only", token: testSecret, data: sealed[:headerLen], wantIs: ErrMalformed, wantMsg: "too short"},
		{name: "one byte short of a tag", token: testSecret, data: sealed[:headerLen+15], wantIs: ErrMalformed, wantMsg: "too short"},
		{name: "truncated ciphertext", token: testSecret, data: sealed[:len(sealed)-1], wantIs: ErrWrongToken},
		{name: "flipped salt", token: testSecret, data: flip(sealed, len(magic)+1), wantIs: ErrWrongToken},
		{name: "flipped nonce", token: testSecret, data: flip(sealed, len(magic)+1+saltLen), wantIs: ErrWrongToken},
		{name: "flipped ciphertext", token: testSecret, data: flip(sealed, headerLen), wantIs: ErrWrongToken},
		{name: "flipped tag", token: testSecret, data: flip(sealed, len(sealed)-1), wantIs: ErrWrongToken},
		{name: "trailing byte", token: testSecret, data: append(bytes.Clone(sealed), 0), wantIs: ErrWrongToken},
		{name: "sealed body not JSON", token: testSecret, data: sealBody(t, testSecret, []byte("not json")), wantIs: ErrMalformed, wantMsg: "not the expected JSON"},
		{name: "sealed body without files", token: testSecret, data: sealBody(t, testSecret, []byte(`{"files":{}}`)), wantIs: ErrMalformed, wantMsg: "no files"},
		{name: "sealed body with a path", token: testSecret, data: sealBody(t, testSecret, []byte(`{"files":{"../ca.key":""}}`)), wantIs: ErrMalformed, wantMsg: `file name "../ca.key"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case derives a key: slow under -race.
			t.Parallel()
			got, err := Open(tc.token, tc.data)
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("Open = %v, %v; want an error wrapping %q containing %q", got, err, tc.wantIs, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Open (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSeal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		token   string
		files   map[string][]byte
		wantMsg string // empty means success
	}{
		{name: "ok", token: testSecret, files: testFiles},
		{name: "invalid token", token: "", files: testFiles, wantMsg: "invalid cluster token: it is empty"},
		{name: "nil files", token: testSecret, files: nil, wantMsg: "cannot seal: no files"},
		{name: "empty files", token: testSecret, files: map[string][]byte{}, wantMsg: "cannot seal: no files"},
		{name: "empty name", token: testSecret, files: map[string][]byte{"": nil}, wantMsg: `file name "": must have 1 to 255`},
		{name: "dot dot", token: testSecret, files: map[string][]byte{"..": nil}, wantMsg: `file name ".."`},
		{name: "hidden", token: testSecret, files: map[string][]byte{".ca.key": nil}, wantMsg: `file name ".ca.key"`},
		{name: "path", token: testSecret, files: map[string][]byte{"a/b": nil}, wantMsg: `file name "a/b"`},
		{name: "longest name", token: testSecret, files: map[string][]byte{strings.Repeat("a", 255): nil}},
		{name: "name too long", token: testSecret, files: map[string][]byte{strings.Repeat("a", 256): nil}, wantMsg: "must have 1 to 255 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Seal(tc.token, tc.files)
			if tc.wantMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("Seal = %v; want an error containing %q", err, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if !bytes.HasPrefix(got, []byte{'K', 'N', 'B', 'S', version}) {
				t.Errorf("Seal = %q...; want the magic and version first", got[:5])
			}
			for name, content := range tc.files {
				if len(content) > 3 && bytes.Contains(got, content) {
					t.Errorf("sealed data contains %s in clear", name)
				}
			}
		})
	}
}

// TestSealIsRandomized: the same files and token never seal to the same
// bytes, since the salt and nonce are new each time.
func TestSealIsRandomized(t *testing.T) {
	a, err := Seal(testSecret, testFiles)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Seal(testSecret, testFiles)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[:headerLen], b[:headerLen]) {
		t.Errorf("two seals share salt and nonce %x", a[:headerLen])
	}
}

// FuzzOpen: Open never panics, and whatever it accepts is what Seal would
// accept and seals back to the same files.
func FuzzOpen(f *testing.F) {
	sealed, err := Seal(testSecret, testFiles)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(testSecret, sealed)
	f.Add(testSecret, flip(sealed, headerLen))
	f.Add(testSecret, sealed[:headerLen+16])
	f.Add(testSecret+"x", sealed)
	f.Add(testSecret, []byte{})
	f.Add(testSecret, []byte(magic+"\x02"))
	f.Add("K10"+testHash+"::server:"+testSecret, sealed)
	f.Fuzz(func(t *testing.T, token string, data []byte) {
		files, err := Open(token, data)
		if err != nil {
			if files != nil {
				t.Errorf("Open returned files with error %v", err)
			}
			if !errors.Is(err, ErrInvalidToken) && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrWrongToken) {
				t.Errorf("Open error %v wraps none of the sentinels", err)
			}
			return
		}
		if err := checkFiles(files); err != nil {
			t.Errorf("Open accepted files Seal refuses: %v", err)
		}
		again, err := Seal(token, files)
		if err != nil {
			t.Fatalf("Seal of opened files: %v", err)
		}
		back, err := Open(token, again)
		if err != nil {
			t.Fatalf("Open of resealed files: %v", err)
		}
		if diff := cmp.Diff(files, back); diff != "" {
			t.Errorf("reseal round trip (-first +second):\n%s", diff)
		}
	})
}
