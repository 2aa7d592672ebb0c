package main

import (
	"encoding/pem"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// --server URLs become the balancer's host:port list, 443 by default; a
// URL that is not https with a host is refused, naming it.
func TestServerBalancer(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lb, err := serverBalancer([]string{"https://10.0.0.1:6443", "https://cp.example"}, &rest.Config{}, log)
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
		if _, err := serverBalancer([]string{bad}, &rest.Config{}, log); err == nil || !strings.Contains(err.Error(), "--server") {
			t.Errorf("--server %q: %v", bad, err)
		}
	}
}

// pemOf is a PEM CERTIFICATE block around der (the rule compares the
// certificates' bytes, not their meaning, so any bytes do).
func pemOf(der string) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(der)})
}

// writeKubeconfig writes clusters (and a context per cluster) to a file
// in dir, with current as the current context's cluster.
func writeKubeconfig(t *testing.T, dir, current string, clusters map[string]*clientcmdapi.Cluster) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for name, c := range clusters {
		cfg.Clusters[name] = c
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "node"}
	}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{Token: "t"}
	cfg.CurrentContext = current
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Without --server, the kubeconfig's servers are the current cluster's
// and those of the other entries that trust the same CA (by data or by a
// file, relative to the kubeconfig), in name order, each once.
func TestKubeconfigServers(t *testing.T) {
	caX, caY := pemOf("ca-x"), pemOf("ca-y")
	for _, tc := range []struct {
		name     string
		current  string
		clusters map[string]*clientcmdapi.Cluster
		files    map[string][]byte
		want     []string
	}{
		{
			name:    "one server",
			current: "a",
			clusters: map[string]*clientcmdapi.Cluster{
				"a": {Server: "https://10.0.0.1:6443", CertificateAuthorityData: caX},
			},
			want: []string{"https://10.0.0.1:6443"},
		},
		{
			name:    "same CA by data or file; another CA, no CA and a repeated URL left out",
			current: "m",
			clusters: map[string]*clientcmdapi.Cluster{
				"m":         {Server: "https://10.0.0.1:6443", CertificateAuthorityData: caX},
				"b-same":    {Server: "https://10.0.0.2:6443", CertificateAuthorityData: caX},
				"c-other":   {Server: "https://10.9.0.1:6443", CertificateAuthorityData: caY},
				"d-file":    {Server: "https://10.0.0.3:6443", CertificateAuthority: "ca.crt"},
				"e-repeat":  {Server: "https://10.0.0.1:6443", CertificateAuthorityData: caX},
				"f-none":    {Server: "https://10.0.0.4:6443"},
				"g-missing": {Server: "https://10.0.0.5:6443", CertificateAuthority: "missing.crt"},
				"h-two-cas": {Server: "https://10.0.0.6:6443", CertificateAuthorityData: append(slices.Clone(caX), caY...)},
			},
			// The same certificate, written differently.
			files: map[string][]byte{"ca.crt": append([]byte("# the cluster CA\n"), caX...)},
			want:  []string{"https://10.0.0.1:6443", "https://10.0.0.2:6443", "https://10.0.0.3:6443"},
		},
		{
			name:    "the current cluster's CA by file",
			current: "a",
			clusters: map[string]*clientcmdapi.Cluster{
				"a": {Server: "https://10.0.0.1:6443", CertificateAuthority: "ca.crt"},
				"b": {Server: "https://10.0.0.2:6443", CertificateAuthorityData: caX},
				"c": {Server: "https://10.0.0.3:6443", CertificateAuthorityData: caY},
			},
			files: map[string][]byte{"ca.crt": caX},
			want:  []string{"https://10.0.0.1:6443", "https://10.0.0.2:6443"},
		},
		{
			name:    "a current cluster without a CA stands alone",
			current: "a",
			clusters: map[string]*clientcmdapi.Cluster{
				"a": {Server: "https://10.0.0.1:6443", InsecureSkipTLSVerify: true},
				"b": {Server: "https://10.0.0.2:6443"},
			},
			want: []string{"https://10.0.0.1:6443"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := kubeconfigServers(writeKubeconfig(t, dir, tc.current, tc.clusters))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("servers %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("no current context", func(t *testing.T) {
		path := writeKubeconfig(t, t.TempDir(), "nope", map[string]*clientcmdapi.Cluster{"a": {Server: "https://10.0.0.1:6443"}})
		if _, err := kubeconfigServers(path); err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("kubeconfigServers: %v, want an error naming the context", err)
		}
	})
}
