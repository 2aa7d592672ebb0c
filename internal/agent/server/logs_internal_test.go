package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTailOffset(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than one read chunk
	for _, tc := range []struct {
		name, content string
		n             int64
		want          string
	}{
		{"empty", "", 3, ""},
		{"zero lines", "a\nb\n", 0, ""},
		{"last line", "a\nb\n", 1, "b\n"},
		{"all", "a\nb\n", 2, "a\nb\n"},
		{"more than there is", "a\nb\n", 5, "a\nb\n"},
		{"no final newline", "a\nb\nc", 2, "b\nc"},
		{"blank lines count", "a\n\n\nb\n", 3, "\n\nb\n"},
		{"a line longer than a chunk", "first\n" + long + "\nlast\n", 2, long + "\nlast\n"},
		{"lines across chunks", long + "\n" + long + "\nend\n", 3, long + "\n" + long + "\nend\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := tc.content[tailOffset(f, tc.n):]; got != tc.want {
				t.Errorf("tail %d = %.40q, want %.40q", tc.n, got, tc.want)
			}
		})
	}
}
