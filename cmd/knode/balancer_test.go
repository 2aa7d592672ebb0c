package main

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// --server URLs become the balancer's host:port list, 443 by default; a
// URL that is not https with a host is refused, naming it.
func TestServerBalancer(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lb, err := serverBalancer([]string{"https://10.0.0.1:6443", "https://cp.example"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	if got, want := lb.Servers(), []string{"10.0.0.1:6443", "cp.example:443"}; !slices.Equal(got, want) {
		t.Errorf("servers %v, want %v", got, want)
	}
	if !strings.HasPrefix(lb.Addr(), "127.0.0.1:") {
		t.Errorf("the balancer listens on %s, want 127.0.0.1", lb.Addr())
	}
	for _, bad := range []string{"http://10.0.0.1:6443", "10.0.0.1:6443", "https://"} {
		if _, err := serverBalancer([]string{bad}, log); err == nil || !strings.Contains(err.Error(), "--server") {
			t.Errorf("--server %q: %v", bad, err)
		}
	}
}
