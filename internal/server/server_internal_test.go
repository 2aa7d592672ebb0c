package server

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"knode/internal/auth"
)

func TestKubeletClient(t *testing.T) {
	p, err := auth.EnsurePKI(auth.PKIConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	agentCA, err := auth.EnsurePKI(auth.PKIConfig{Dir: t.TempDir(), Hosts: []string{"10.0.0.7"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("ca.crt", agentCA.CAPEM())
	garbage := write("garbage.crt", []byte("not PEM"))

	cfg, err := kubeletClient(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs != nil {
		t.Error("without --kubelet-certificate-authority agents are verified")
	}
	if leaf := cfg.Certificate.Leaf; leaf == nil || leaf.Subject.CommonName != auth.KubeletClientUser || len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != auth.MastersGroup {
		t.Errorf("client certificate %v, want the kubelet-client pair", leaf)
	}

	cfg, err = kubeletClient(p, good)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's serving certificate, from the CA in the file, verifies
	// against RootCAs; the cluster's own does not.
	agentServing := agentCA.TLSConfig().Certificates[0].Leaf
	if _, err := agentServing.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, DNSName: "10.0.0.7"}); err != nil {
		t.Errorf("an agent signed by the CA in the file does not verify: %v", err)
	}
	if _, err := p.TLSConfig().Certificates[0].Leaf.Verify(x509.VerifyOptions{Roots: cfg.RootCAs}); err == nil {
		t.Error("a certificate of another CA verifies")
	}

	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.crt"), "--kubelet-certificate-authority: open "},
		{garbage, "--kubelet-certificate-authority " + garbage + ": no PEM CERTIFICATE block"},
	} {
		if _, err := kubeletClient(p, tc.file); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("kubeletClient(%s): %v, want an error starting %q", tc.file, err, tc.want)
		}
	}
}
