package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const systemPython = "/usr/bin/python3"

// TestPythonClient runs testdata/python_client.py, which uses the official
// Kubernetes Python client (Debian's python3-kubernetes).
func TestPythonClient(t *testing.T) {
	if out, err := exec.Command(systemPython, "-c", "import kubernetes").CombinedOutput(); err != nil {
		msg := "python3-kubernetes is not installed (" + systemPython + " -c 'import kubernetes': " + strings.TrimSpace(string(out)) + ")"
		if os.Getenv("KNODE_REQUIRE_PYTHON_CLIENT") == "1" {
			t.Fatal(msg + "; KNODE_REQUIRE_PYTHON_CLIENT=1")
		}
		t.Skip(msg)
	}
	s := startServer(t, serverOptions{})
	cs := s.Clientset(t)
	ctx := context.Background()
	for _, name := range []string{"py-node-a", "py-node-b"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e": "python"}}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating node %s: %v", name, err)
		}
	}

	script, err := filepath.Abs(filepath.Join("testdata", "python_client.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, script, s.Kubeconfig, "py-node-b")
	cmd.Env = append(os.Environ(), "HOME="+s.Home, "KUBECONFIG=")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n--- stdout ---\n%s\n--- stderr ---\n%s", systemPython, script, err, out, stderr.String())
	}
	want := []string{
		"nodes: py-node-a,py-node-b",
		"list resourceVersion set: True",
		"smp: py-node-b smp",
		"jsonpatch: py-node-b jsonpatch",
		"labels: e2e=python,e2e-python=smp,e2e-python-json=jsonpatch",
		"selected: py-node-b",
		"missing: 404 Not Found",
	}
	if diff := cmp.Diff(want, lines(string(out))); diff != "" {
		t.Errorf("python client output (-want +got):\n%s\nstderr:\n%s", diff, stderr.String())
	}

	// The patches reached storage.
	got, err := cs.CoreV1().Nodes().Get(ctx, "py-node-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"e2e": "python", "e2e-python": "smp", "e2e-python-json": "jsonpatch"}
	if diff := cmp.Diff(wantLabels, got.Labels); diff != "" {
		t.Errorf("py-node-b labels after the python patches (-want +got):\n%s", diff)
	}
}
