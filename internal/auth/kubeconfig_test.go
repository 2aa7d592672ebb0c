package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/clientcmd"
	testingclock "k8s.io/utils/clock/testing"
)

func TestKubeconfig(t *testing.T) {
	data, err := Kubeconfig("https://127.0.0.1:6443", []byte("CA"), []byte("CERT"), []byte("KEY"), "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatalf("client-go cannot load the kubeconfig: %v", err)
	}
	type summary struct {
		Current, Server, Cluster, AuthInfo string
		CA, Cert, Key                      string
		Clusters, Users, Contexts          int
	}
	got := summary{
		Current:  cfg.CurrentContext,
		Clusters: len(cfg.Clusters), Users: len(cfg.AuthInfos), Contexts: len(cfg.Contexts),
	}
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil {
		got.Cluster, got.AuthInfo = c.Cluster, c.AuthInfo
	}
	if c := cfg.Clusters["knode"]; c != nil {
		got.Server, got.CA = c.Server, string(c.CertificateAuthorityData)
	}
	if u := cfg.AuthInfos["alice"]; u != nil {
		got.Cert, got.Key = string(u.ClientCertificateData), string(u.ClientKeyData)
	}
	want := summary{Current: "knode", Server: "https://127.0.0.1:6443", Cluster: "knode", AuthInfo: "alice",
		CA: "CA", Cert: "CERT", Key: "KEY", Clusters: 1, Users: 1, Contexts: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubeconfig (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(string(data), "apiVersion: v1\n") || !strings.Contains(string(data), "kind: Config") {
		t.Errorf("not a v1 kubeconfig:\n%s", data)
	}

	named, err := Kubeconfig("https://h:1", []byte("CA"), []byte("C"), []byte("K"), "u", "other")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := clientcmd.Load(named); cfg.CurrentContext != "other" || cfg.Contexts["other"].Cluster != "knode" {
		t.Errorf("context name not honoured:\n%s", named)
	}
}

func TestKubeconfigInvalid(t *testing.T) {
	tests := []struct {
		name          string
		server, user  string
		ca, cert, key string
		wantErr       string
	}{
		{name: "no server", user: "u", ca: "a", cert: "b", key: "c", wantErr: "server: Required value"},
		{name: "http server", server: "http://h:1", user: "u", ca: "a", cert: "b", key: "c", wantErr: `server: Invalid value: "http://h:1": must be an https:// URL with a host`},
		{name: "no host", server: "https://", user: "u", ca: "a", cert: "b", key: "c", wantErr: `server: Invalid value: "https://"`},
		{name: "everything missing", server: "https://h", wantErr: "[certificateAuthorityData: Required value, clientCertificateData: Required value, clientKeyData: Required value, user: Required value]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Kubeconfig(tc.server, []byte(tc.ca), []byte(tc.cert), []byte(tc.key), tc.user, "")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteAdminKubeconfig(t *testing.T) {
	dir := t.TempDir()
	p := mustEnsure(t, PKIConfig{Dir: dir, Clock: testingclock.NewFakePassiveClock(t0)})
	path := filepath.Join(dir, "admin.kubeconfig")
	if err := WriteAdminKubeconfig(p, "https://127.0.0.1:6443", path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.AuthInfos["kubernetes-admin"]
	if u == nil || string(u.ClientCertificateData) != string(readFile(t, dir, AdminCertFile)) {
		t.Fatalf("admin credentials not embedded: %+v", cfg.AuthInfos)
	}
	if got := string(cfg.Clusters["knode"].CertificateAuthorityData); got != string(p.CAPEM()) {
		t.Error("CA not embedded")
	}
	if _, err := clientcmd.BuildConfigFromFlags("", path); err != nil {
		t.Errorf("client-go cannot build a rest config: %v", err)
	}
}

func TestNodeKubeconfig(t *testing.T) {
	p := mustEnsure(t, PKIConfig{Dir: t.TempDir(), Clock: testingclock.NewFakePassiveClock(t0)})
	data, err := NodeKubeconfig(p, "https://10.0.0.1:6443", "worker-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.AuthInfos["system:node:worker-1"]
	if u == nil || cfg.Contexts[cfg.CurrentContext].AuthInfo != "system:node:worker-1" {
		t.Fatalf("node user missing:\n%s", data)
	}
	c := parseCert(t, u.ClientCertificateData)
	if c.Subject.CommonName != "system:node:worker-1" || !cmp.Equal(c.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %v", c.Subject)
	}

	for name, tc := range map[string]struct{ node, want string }{
		"empty":     {"", "nodeName: Required value"},
		"uppercase": {"Worker", `nodeName: Invalid value: "Worker"`},
	} {
		if _, err := NodeKubeconfig(p, "https://h", tc.node); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
