package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// kubectlVersions are the kubectl releases knode promises to work with.
var kubectlVersions = []string{"1.27", "1.30", "1.32", "1.33"}

// documentedNode is the Node from the Kubernetes "Nodes" concept page.
const documentedNode = `{
  "kind": "Node",
  "apiVersion": "v1",
  "metadata": {
    "name": "10.240.79.157",
    "labels": {
      "name": "my-first-k8s-node"
    }
  }
}
`

// TestKubectl runs the node workflow of each supported kubectl version
// against one server.
func TestKubectl(t *testing.T) {
	var installed []string
	for _, v := range kubectlVersions {
		if _, err := os.Stat(kubectlPath(v)); err == nil {
			installed = append(installed, v)
		}
	}
	if len(installed) == 0 {
		if os.Getenv("KNODE_E2E_ALLOW_NO_KUBECTL") == "1" {
			t.Skipf("no kubectl among %v in %s (KNODE_E2E_ALLOW_NO_KUBECTL=1)", kubectlVersions, kubectlDir())
		}
		t.Fatalf("no kubectl among %v in %s; install them or set KNODE_E2E_ALLOW_NO_KUBECTL=1", kubectlVersions, kubectlDir())
	}
	s := startServer(t, serverOptions{})
	cs := s.Clientset(t)
	for _, v := range kubectlVersions {
		t.Run("kubectl-"+v, func(t *testing.T) {
			if _, err := os.Stat(kubectlPath(v)); err != nil {
				t.Skipf("%s is not installed", kubectlPath(v))
			}
			k := &kubectlSession{t: t, s: s, cs: cs, version: v, suffix: strings.ReplaceAll(v, ".", "-")}
			t.Run("create-documented-node", k.createDocumentedNode)
			t.Run("apply-describe-explain", k.applyDescribeExplain)
			t.Run("label-annotate-taint-cordon", k.labelAnnotateTaintCordon)
			t.Run("watch", k.watch)
			t.Run("leases-events-namespaces-pods", k.leasesEventsNamespacesPods)
			t.Run("delete", k.delete)
		})
	}
}

// kubectlSession is one kubectl version's walk through the node workflow.
// Its node names carry the version so versions never collide.
type kubectlSession struct {
	t       *testing.T
	s       *server
	cs      kubernetes.Interface
	version string
	suffix  string // version with dots as dashes: "1-30"
}

func (k *kubectlSession) run(t *testing.T, args ...string) kubectlResult {
	t.Helper()
	return k.s.kubectl(t, k.version, args...)
}

func (k *kubectlSession) must(t *testing.T, args ...string) kubectlResult {
	t.Helper()
	return k.s.mustKubectl(t, k.version, args...)
}

// node is the name of the node this session applies and edits.
func (k *kubectlSession) node() string { return "e2e-node-" + k.suffix }

// wantStdout fails unless the trimmed stdout is exactly want.
func wantStdout(t *testing.T, res kubectlResult, want string) {
	t.Helper()
	if got := strings.TrimSpace(res.Stdout); got != want {
		t.Errorf("stdout = %q, want %q\n%s", got, want, res)
	}
}

// row finds the line of a `kubectl get` table whose first column is name.
func row(out, name string) ([]string, bool) {
	for _, l := range lines(out) {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == name {
			return f, true
		}
	}
	return nil, false
}

// deleteNodeAtEnd removes a node when the test ends, whatever happened.
func (k *kubectlSession) deleteNodeAtEnd(t *testing.T, name string) {
	t.Cleanup(func() {
		err := k.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: deleting node %s: %v", name, err)
		}
	})
}

func (k *kubectlSession) createDocumentedNode(t *testing.T) {
	const name = "10.240.79.157"
	path := writeFile(t, "node.json", documentedNode)
	k.deleteNodeAtEnd(t, name)

	res := k.must(t, "create", "-f", path)
	wantStdout(t, res, "node/10.240.79.157 created")

	// The label from the manifest is stored.
	res = k.must(t, "get", "node", name, "-o", "jsonpath={.metadata.labels.name}")
	wantStdout(t, res, "my-first-k8s-node")

	// Validation is on: a field Node does not have is refused, whether
	// kubectl checks it against the OpenAPI schema or asks the server to.
	bogus := writeFile(t, "bogus.json", `{"kind":"Node","apiVersion":"v1","metadata":{"name":"e2e-bogus-`+k.suffix+`"},"spec":{"bogusField":true}}`)
	res = k.run(t, "create", "-f", bogus)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "unknown field") || !strings.Contains(res.Stderr, "bogusField") {
		t.Errorf("create with an unknown field: want a refusal naming bogusField:\n%s", res)
	}
	if res.ExitCode == 0 {
		k.deleteNodeAtEnd(t, "e2e-bogus-"+k.suffix)
	}

	// A second create of the same name is refused.
	res = k.run(t, "create", "-f", path)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, `nodes "10.240.79.157" already exists`) {
		t.Errorf("second create: want a non-zero exit and AlreadyExists:\n%s", res)
	}

	res = k.must(t, "get", "nodes")
	ls := lines(res.Stdout)
	if len(ls) == 0 || collapse(ls[0]) != "NAME STATUS ROLES AGE VERSION" {
		t.Fatalf("get nodes: want the header NAME STATUS ROLES AGE VERSION:\n%s", res)
	}
	f, ok := row(res.Stdout, name)
	if !ok {
		t.Fatalf("get nodes: no row for %s:\n%s", name, res)
	}
	if len(f) < 4 || f[1] != "Unknown" || f[2] != "<none>" {
		t.Errorf("get nodes: row %q, want STATUS Unknown and ROLES <none>\n%s", f, res)
	}

	res = k.must(t, "get", "nodes", "-o", "wide")
	ls = lines(res.Stdout)
	wantHeader := "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME"
	if len(ls) == 0 || collapse(ls[0]) != wantHeader {
		t.Fatalf("get nodes -o wide: want the header %q:\n%s", wantHeader, res)
	}
	f, ok = row(res.Stdout, name)
	if !ok {
		t.Fatalf("get nodes -o wide: no row for %s:\n%s", name, res)
	}
	// No kubelet version: the VERSION cell is empty, so the row has 9 fields.
	wantRow := []string{name, "Unknown", "<none>", f[3], "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}
	if strings.Join(f, " ") != strings.Join(wantRow, " ") {
		t.Errorf("get nodes -o wide: row %q, want %q\n%s", f, wantRow, res)
	}

	// The JSON form round-trips the object kubectl sent.
	res = k.must(t, "get", "node", name, "-o", "jsonpath={.kind}/{.apiVersion}/{.metadata.name}")
	wantStdout(t, res, "Node/v1/10.240.79.157")
}

func nodeYAML(name, tier string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Node
metadata:
  name: %s
  labels:
    e2e-tier: %s
spec:
  podCIDR: 10.244.1.0/24
`, name, tier)
}

func (k *kubectlSession) applyDescribeExplain(t *testing.T) {
	name := k.node()
	k.deleteNodeAtEnd(t, name)

	res := k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(name, "a")))
	wantStdout(t, res, "node/"+name+" created")

	res = k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(name, "b")))
	wantStdout(t, res, "node/"+name+" configured")

	// Applying the same manifest again changes nothing.
	res = k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(name, "b")))
	wantStdout(t, res, "node/"+name+" unchanged")

	res = k.must(t, "get", "node", name, "-o", "yaml")
	for _, want := range []string{"kind: Node", "name: " + name, "e2e-tier: b", "podCIDR: 10.244.1.0/24",
		"kubectl.kubernetes.io/last-applied-configuration", "resourceVersion:", "uid:", "creationTimestamp:"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("get node -o yaml: missing %q:\n%s", want, res)
		}
	}
	if strings.Contains(res.Stdout, "e2e-tier: a") {
		t.Errorf("get node -o yaml: the old label value is still there:\n%s", res)
	}

	res = k.must(t, "describe", "node", name)
	wantFields := map[string]string{
		"Name:":   name,
		"Labels:": "e2e-tier=b",
		"Taints:": "<none>",
	}
	for key, val := range wantFields {
		found := false
		for _, l := range lines(res.Stdout) {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == key && f[1] == val {
				found = true
			}
		}
		if !found {
			t.Errorf("describe node: want a line %q %q:\n%s", key, val, res)
		}
	}
	if !strings.Contains(res.Stdout, "PodCIDR:") || !strings.Contains(res.Stdout, "10.244.1.0/24") {
		t.Errorf("describe node: want PodCIDR 10.244.1.0/24:\n%s", res)
	}

	res = k.must(t, "explain", "node.spec")
	for _, want := range []string{"podCIDR", "podCIDRs", "taints", "unschedulable", "providerID"} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("explain node.spec: missing %q:\n%s", want, res)
		}
	}
	if !strings.Contains(res.Stdout, "KIND:") || !strings.Contains(res.Stdout, "Node") {
		t.Errorf("explain node.spec: want KIND: Node:\n%s", res)
	}
}

func (k *kubectlSession) labelAnnotateTaintCordon(t *testing.T) {
	name := k.node() + "-edit"
	k.deleteNodeAtEnd(t, name)
	k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(name, "a")))
	jsonpath := func(path string) string {
		t.Helper()
		return strings.TrimSpace(k.must(t, "get", "node", name, "-o", "jsonpath="+path).Stdout)
	}

	wantStdout(t, k.must(t, "label", "node", name, "e2e-k=v"), "node/"+name+" labeled")
	if got := jsonpath("{.metadata.labels.e2e-k}"); got != "v" {
		t.Errorf("label e2e-k = %q after kubectl label, want v", got)
	}
	// Changing an existing label needs --overwrite.
	res := k.run(t, "label", "node", name, "e2e-k=w")
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "already has a value") {
		t.Errorf("label without --overwrite: want a refusal:\n%s", res)
	}

	// kubectl 1.27 alone says "annotate" rather than "annotated".
	annotated := "annotated"
	if k.version == "1.27" {
		annotated = "annotate"
	}
	wantStdout(t, k.must(t, "annotate", "node", name, "e2e-a=b"), "node/"+name+" "+annotated)
	if got := jsonpath("{.metadata.annotations.e2e-a}"); got != "b" {
		t.Errorf("annotation e2e-a = %q, want b", got)
	}

	wantStdout(t, k.must(t, "taint", "node", name, "e2e-k=v:NoSchedule"), "node/"+name+" tainted")
	if got := jsonpath(`{range .spec.taints[*]}{.key}={.value}:{.effect};{end}`); got != "e2e-k=v:NoSchedule;" {
		t.Errorf("taints = %q after kubectl taint, want e2e-k=v:NoSchedule;", got)
	}
	res = k.must(t, "describe", "node", name)
	if f, ok := row(res.Stdout, "Taints:"); !ok || len(f) < 2 || f[1] != "e2e-k=v:NoSchedule" {
		t.Errorf("describe node: want Taints: e2e-k=v:NoSchedule:\n%s", res)
	}
	wantStdout(t, k.must(t, "taint", "node", name, "e2e-k:NoSchedule-"), "node/"+name+" untainted")
	if got := jsonpath(`{range .spec.taints[*]}{.key};{end}`); got != "" {
		t.Errorf("taint keys = %q after removing the taint, want none", got)
	}

	wantStdout(t, k.must(t, "cordon", name), "node/"+name+" cordoned")
	if f, ok := row(k.must(t, "get", "nodes").Stdout, name); !ok || len(f) < 2 || f[1] != "Unknown,SchedulingDisabled" {
		t.Errorf("get nodes after cordon: row %q, want STATUS Unknown,SchedulingDisabled", f)
	}
	if got := jsonpath("{.spec.unschedulable}"); got != "true" {
		t.Errorf("spec.unschedulable = %q after cordon, want true", got)
	}
	wantStdout(t, k.must(t, "uncordon", name), "node/"+name+" uncordoned")
	if f, ok := row(k.must(t, "get", "nodes").Stdout, name); !ok || len(f) < 2 || f[1] != "Unknown" {
		t.Errorf("get nodes after uncordon: row %q, want STATUS Unknown", f)
	}
}

// watch runs `kubectl get nodes -w`, changes nodes, and reads the new lines.
func (k *kubectlSession) watch(t *testing.T) {
	name := k.node() + "-watch"
	k.deleteNodeAtEnd(t, name)
	// With no nodes kubectl prints nothing, not even the header, until the
	// first event; a node that exists before the watch shows it starts.
	before := k.node() + "-before-watch"
	k.deleteNodeAtEnd(t, before)
	k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(before, "a")))
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := k.s.kubectlCommand(ctx, k.version, "get", "nodes", "-w")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			got <- sc.Text()
		}
		close(got)
	}()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	var seen []string
	// await reads lines until one satisfies match.
	await := func(what string, match func(fields []string) bool) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case l, ok := <-got:
				if !ok {
					t.Fatalf("kubectl get nodes -w ended before %s; lines:\n%s\nstderr:\n%s", what, strings.Join(seen, "\n"), stderr.String())
				}
				seen = append(seen, l)
				if match(strings.Fields(l)) {
					return
				}
			case <-timeout:
				t.Fatalf("kubectl get nodes -w: no %s within 20s; lines:\n%s\nstderr:\n%s", what, strings.Join(seen, "\n"), stderr.String())
			}
		}
	}
	await("header", func(f []string) bool { return strings.Join(f, " ") == "NAME STATUS ROLES AGE VERSION" })
	await("line for the node "+before+" from the initial list", func(f []string) bool {
		return len(f) >= 3 && f[0] == before && f[1] == "Unknown" && f[2] == "<none>"
	})

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := k.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	await("line for the new node "+name, func(f []string) bool {
		return len(f) >= 3 && f[0] == name && f[1] == "Unknown" && f[2] == "<none>"
	})

	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := k.cs.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("cordoning node %s: %v", name, err)
	}
	await("line for the cordoned node "+name, func(f []string) bool {
		return len(f) >= 2 && f[0] == name && f[1] == "Unknown,SchedulingDisabled"
	})

	if err := k.cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting node %s: %v", name, err)
	}
	// kubectl prints a deleted object's last row again (without -o or
	// --output-watch-events there is no event column); the row for the
	// cordoned node then appears a second time.
	await("line for the deleted node "+name, func(f []string) bool {
		return len(f) >= 2 && f[0] == name && f[1] == "Unknown,SchedulingDisabled"
	})
}

func (k *kubectlSession) leasesEventsNamespacesPods(t *testing.T) {
	ctx := context.Background()
	node := k.node() + "-pods"
	k.deleteNodeAtEnd(t, node)
	k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(node, "a")))

	// A node lease, as an agent would keep it.
	holder := node
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: corev1.NamespaceNodeLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
	if _, err := k.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating lease: %v", err)
	}
	t.Cleanup(func() {
		_ = k.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(context.Background(), node, metav1.DeleteOptions{})
	})
	res := k.must(t, "get", "leases", "-A")
	if ls := lines(res.Stdout); len(ls) == 0 || collapse(ls[0]) != "NAMESPACE NAME HOLDER AGE" {
		t.Errorf("get leases -A: want the header NAMESPACE NAME HOLDER AGE:\n%s", res)
	}
	if !hasRow(res.Stdout, corev1.NamespaceNodeLease, node, holder) {
		t.Errorf("get leases -A: want a row %s %s %s:\n%s", corev1.NamespaceNodeLease, node, holder, res)
	}

	// No component of this release writes events, so there are none unless
	// another test made some; then the table must have the event columns.
	res = k.must(t, "get", "events", "-A")
	if strings.TrimSpace(res.Stdout) == "" {
		if !strings.Contains(res.Stderr, "No resources found") {
			t.Errorf("get events -A with no events: want No resources found:\n%s", res)
		}
	} else if ls := lines(res.Stdout); collapse(ls[0]) != "NAMESPACE LAST SEEN TYPE REASON OBJECT MESSAGE" {
		t.Errorf("get events -A: want the header NAMESPACE LAST SEEN TYPE REASON OBJECT MESSAGE:\n%s", res)
	}

	ns := "foo-" + k.suffix
	wantStdout(t, k.must(t, "create", "namespace", ns), "namespace/"+ns+" created")
	res = k.must(t, "get", "namespace", ns)
	if f, ok := row(res.Stdout, ns); !ok || len(f) < 2 || f[1] != "Active" {
		t.Errorf("get namespace %s: want STATUS Active:\n%s", ns, res)
	}

	// With no pods on the node kubectl says so.
	res = k.must(t, "get", "pods", "-A", "--field-selector", "spec.nodeName="+node)
	if strings.TrimSpace(res.Stdout) != "" || !strings.Contains(res.Stderr, "No resources found") {
		t.Errorf("get pods -A --field-selector spec.nodeName=%s with no pods: want No resources found:\n%s", node, res)
	}

	// One pod bound to the node and one elsewhere: the selector picks one.
	for _, p := range []struct{ name, node string }{{"on-node", node}, {"elsewhere", "e2e-other-node"}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName:   p.node,
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/e2e:1"}},
			},
		}
		if _, err := k.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, p.name, err)
		}
	}
	res = k.must(t, "get", "pods", "-A", "--field-selector", "spec.nodeName="+node)
	ls := lines(res.Stdout)
	if len(ls) != 2 || collapse(ls[0]) != "NAMESPACE NAME READY STATUS RESTARTS AGE" {
		t.Fatalf("get pods -A --field-selector spec.nodeName=%s: want a header and one row:\n%s", node, res)
	}
	if f := strings.Fields(ls[1]); len(f) < 4 || f[0] != ns || f[1] != "on-node" || f[2] != "0/1" || f[3] != "Pending" {
		t.Errorf("get pods: row %q, want %s on-node 0/1 Pending", f, ns)
	}
	res = k.must(t, "get", "pods", "-n", ns, "-o", "wide")
	if f, ok := row(res.Stdout, "elsewhere"); !ok || !contains(f, "e2e-other-node") {
		t.Errorf("get pods -o wide: want pod elsewhere on NODE e2e-other-node:\n%s", res)
	}
}

func (k *kubectlSession) delete(t *testing.T) {
	name := k.node() + "-delete"
	k.deleteNodeAtEnd(t, name)
	k.must(t, "apply", "-f", writeFile(t, "node.yaml", nodeYAML(name, "a")))

	wantStdout(t, k.must(t, "delete", "node", name), `node "`+name+`" deleted`)
	res := k.run(t, "get", "node", name)
	want := `Error from server (NotFound): nodes "` + name + `" not found`
	if res.ExitCode != 1 || strings.TrimSpace(res.Stderr) != want {
		t.Errorf("get node after delete: want exit code 1 and %q:\n%s", want, res)
	}
	res = k.run(t, "delete", "node", name)
	if res.ExitCode != 1 || strings.TrimSpace(res.Stderr) != want {
		t.Errorf("second delete: want exit code 1 and %q:\n%s", want, res)
	}
}

// hasRow reports whether some line of a table starts with the given cells.
func hasRow(out string, cells ...string) bool {
	for _, l := range lines(out) {
		f := strings.Fields(l)
		if len(f) >= len(cells) && strings.Join(f[:len(cells)], " ") == strings.Join(cells, " ") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
