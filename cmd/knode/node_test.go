package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"knode/internal/apitest"
	"knode/internal/volume"
)

// fenceCloud answers as an exec provider for two machines: "off" is shut
// down, "running" runs.
const fenceCloud = `#!/bin/sh
case "$1 $2" in
"instance-shutdown off") echo '{"shutdown": true}' ;;
"instance-shutdown running") echo '{"shutdown": false}' ;;
"instance-exists off" | "instance-exists running") echo '{"exists": true}' ;;
*) exit 3 ;;
esac
`

// fenceEnv is an API server with nodes "off" and "running" (each with a
// taint of its own), an admin kubeconfig for it, and an exec cloud-config
// whose command is fenceCloud.
type fenceEnv struct {
	t           *testing.T
	s           *apitest.Server
	kubeconfig  string
	cloudConfig string
}

func newFenceEnv(t *testing.T) *fenceEnv {
	t.Helper()
	ctx := context.Background()
	s := apitest.Start(t, apitest.Options{})
	// clientcmd sends a kubeconfig's credentials only over TLS: put a TLS
	// proxy in front of the plain-HTTP test server.
	backend, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(backend))
	t.Cleanup(proxy.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: proxy.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: apitest.AdminToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	e := &fenceEnv{t: t, s: s, kubeconfig: filepath.Join(dir, "admin.kubeconfig"), cloudConfig: filepath.Join(dir, "cloud.yaml")}
	if err := clientcmd.WriteToFile(*kc, e.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cloud.sh"), []byte(fenceCloud), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cloudConfig, []byte("command: ./cloud.sh\ntimeout: 30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"off", "running"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "example.com/rack", Value: "r1", Effect: corev1.TaintEffectNoSchedule},
		}}}
		if _, err := s.Admin.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// fence runs `knode node fence` with args and returns its output.
func (e *fenceEnv) fence(args ...string) (string, error) {
	e.t.Helper()
	var out bytes.Buffer
	cmd := newRootCommand()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"node", "fence", "--kubeconfig", e.kubeconfig}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// taints are the node's taints as key=value:effect.
func (e *fenceEnv) taints(name string) []string {
	e.t.Helper()
	n, err := e.s.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.ToString())
	}
	return out
}

const rackTaint = "example.com/rack=r1:NoSchedule"
const oosTaint = volume.TaintOutOfService + "=nodeshutdown:NoExecute"

// The exec provider decides: a running machine is refused, a shut-down
// one is tainted (once), and --force taints without asking.
func TestNodeFence(t *testing.T) {
	e := newFenceEnv(t)
	cloud := []string{"--cloud-provider", "exec", "--cloud-config", e.cloudConfig}

	_, err := e.fence(append([]string{"running"}, cloud...)...)
	want := "refusing to fence running: the cloud provider reports its instance exists and is not shut down; confirm the machine is off, or use --force"
	if err == nil || err.Error() != want {
		t.Errorf("fencing a running machine: %v\nwant %s", err, want)
	}
	if diff := cmp.Diff([]string{rackTaint}, e.taints("running")); diff != "" {
		t.Errorf("running's taints (-want +got):\n%s", diff)
	}

	out, err := e.fence(append([]string{"off"}, cloud...)...)
	if err != nil {
		t.Fatalf("fencing a shut-down machine: %v", err)
	}
	if first, _, _ := strings.Cut(out, "\n"); first != "node/off fenced: instance is shut down" {
		t.Errorf("output = %q, want it to start with node/off fenced: instance is shut down", out)
	}
	if diff := cmp.Diff([]string{rackTaint, oosTaint}, e.taints("off")); diff != "" {
		t.Errorf("off's taints (-want +got):\n%s", diff)
	}

	out, err = e.fence(append([]string{"off"}, cloud...)...)
	if want := "node/off already fenced: it has the " + volume.TaintOutOfService + " taint\n"; err != nil || out != want {
		t.Errorf("fencing again = %q, %v; want %q", out, err, want)
	}
	if diff := cmp.Diff([]string{rackTaint, oosTaint}, e.taints("off")); diff != "" {
		t.Errorf("off's taints after fencing again (-want +got):\n%s", diff)
	}

	out, err = e.fence("running", "--force")
	if first, _, _ := strings.Cut(out, "\n"); err != nil || first != "node/running fenced: --force" {
		t.Errorf("forced fencing = %q, %v", out, err)
	}
	if diff := cmp.Diff([]string{rackTaint, oosTaint}, e.taints("running")); diff != "" {
		t.Errorf("running's taints after --force (-want +got):\n%s", diff)
	}
}

func TestNodeFenceNeedsAProviderOrForce(t *testing.T) {
	e := newFenceEnv(t)
	_, err := e.fence("off")
	if err == nil || !strings.Contains(err.Error(), "refusing to fence off: no cloud provider is configured") {
		t.Errorf("fencing without a provider: %v", err)
	}
	if diff := cmp.Diff([]string{rackTaint}, e.taints("off")); diff != "" {
		t.Errorf("off's taints (-want +got):\n%s", diff)
	}
	if _, err := e.fence("off", "--cloud-config", e.cloudConfig); err == nil || err.Error() != "--cloud-config needs --cloud-provider" {
		t.Errorf("--cloud-config alone: %v", err)
	}
	if _, err := e.fence("missing", "--force"); err == nil || !strings.Contains(err.Error(), `"missing" not found`) {
		t.Errorf("fencing a missing node: %v", err)
	}
}

func TestNodeFenceDefaultKubeconfig(t *testing.T) {
	cmd, _, err := newRootCommand().Find([]string{"node", "fence"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cmd.Flags().Lookup("kubeconfig").DefValue, filepath.Join(defaultDataDir(), "admin.kubeconfig"); got != want {
		t.Errorf("--kubeconfig defaults to %s, want %s", got, want)
	}
}
