package storage

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestContinueRoundTrip(t *testing.T) {
	for _, key := range []string{"/registry/pods/ns/a", "/registry/pods/ns/ä\x00b", ""} {
		gotKey, gotRev, err := DecodeContinue(EncodeContinue(key, 42), "")
		if err != nil {
			t.Fatalf("DecodeContinue: %v", err)
		}
		if diff := cmp.Diff([]any{key, int64(42)}, []any{gotKey, gotRev}); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	}
}

func TestDecodeContinueRejects(t *testing.T) {
	tests := []struct {
		name, token, prefix string
	}{
		{"not base64", "%%", ""},
		{"not json", "bm90IGpzb24", ""},
		{"zero revision", EncodeContinue("/a/b", 0), "/a/"},
		{"negative revision", EncodeContinue("/a/b", -3), "/a/"},
		{"other prefix", EncodeContinue("/b/c", 5), "/a/"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := DecodeContinue(tc.token, tc.prefix); !errors.Is(err, ErrInvalidContinue) {
				t.Errorf("DecodeContinue = %v, want ErrInvalidContinue", err)
			}
		})
	}
}
