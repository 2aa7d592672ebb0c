package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"knode/internal/auth/bootstrap"
)

func runToken(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTokenCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestTokenCommand(t *testing.T) {
	dir := t.TempDir()
	tok, err := bootstrap.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	tok = tok.WithCA([]byte("ca"))
	if err := os.WriteFile(filepath.Join(dir, bootstrap.TokenFileName), []byte(tok.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runToken(t, "--data-dir", dir)
	if err != nil || out != tok.String()+"\n" {
		t.Errorf("knode token = %q, %v; want %q", out, err, tok.String()+"\n")
	}

	empty := t.TempDir()
	_, err = runToken(t, "--data-dir", empty)
	if want := empty + " has no cluster token (has `knode server --data-dir " + empty + "` run with this release?)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("knode token on an empty dir: %v; want an error containing %q", err, want)
	}
}
