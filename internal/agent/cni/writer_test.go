package cni_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/agent/cni"
)

func node(cidrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if len(cidrs) > 0 {
		n.Spec.PodCIDR = cidrs[0]
		n.Spec.PodCIDRs = cidrs
	}
	return n
}

func render(t *testing.T, n cni.Network, cidrs ...string) string {
	t.Helper()
	n.PodCIDRs = cidrs
	out, err := cni.Render(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// onDisk is the file's content, "" when it does not exist.
func onDisk(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cni.Config
		want string
	}{
		{"no dir", cni.Config{}, "dir: Required value"},
		{"relative dir", cni.Config{Dir: "net.d"}, `dir: Invalid value: "net.d": must be an absolute path`},
		{"single conf", cni.Config{Dir: "/x", FileName: "10-knode.conf"}, `fileName: Invalid value: "10-knode.conf"`},
		{"hidden", cni.Config{Dir: "/x", FileName: ".10-knode.conflist"}, `fileName: Invalid value`},
		{"subdir", cni.Config{Dir: "/x", FileName: "a/b.conflist"}, `fileName: Invalid value`},
		{"bad template", cni.Config{Dir: "/x", Network: cni.Network{Bridge: "much-too-long-name"}}, "network.bridge: Too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cni.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}

func TestSync(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc", "cni", "net.d") // created by Sync
	tmpl := cni.Network{Bridge: "kbr0", MTU: 1450}
	w, err := cni.New(cni.Config{Dir: dir, Network: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.Path(), filepath.Join(dir, cni.DefaultFileName); got != want {
		t.Fatalf("Path = %s, want %s", got, want)
	}

	step := func(desc string, n *corev1.Node, wantChanged bool, wantErr string, wantFile string) {
		t.Helper()
		changed, err := w.Sync(n)
		switch {
		case wantErr == "" && err != nil:
			t.Fatalf("%s: Sync: %v", desc, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Fatalf("%s: want an error with %q, got %v", desc, wantErr, err)
		}
		if changed != wantChanged {
			t.Errorf("%s: changed = %v, want %v", desc, changed, wantChanged)
		}
		if diff := cmp.Diff(wantFile, onDisk(t, w.Path())); diff != "" {
			t.Errorf("%s: file (-want +got):\n%s", desc, diff)
		}
		if got := w.Ready(); got != (wantFile != "") {
			t.Errorf("%s: Ready = %v, want %v", desc, got, wantFile != "")
		}
	}

	step("no pod CIDR yet", node(), false, "", "")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the directory was made before there was anything to write: %v", err)
	}
	v4 := render(t, tmpl, "10.244.1.0/24")
	step("first CIDR", node("10.244.1.0/24"), true, "", v4)
	step("same again", node("10.244.1.0/24"), false, "", v4)
	onlyOld := node()
	onlyOld.Spec.PodCIDR = "10.244.1.0/24"
	step("only spec.podCIDR, same network", onlyOld, false, "", v4)
	dual := render(t, tmpl, "10.244.1.0/24", "fd00:10:244:1::/64")
	step("dual stack", node("10.244.1.0/24", "fd00:10:244:1::/64"), true, "", dual)
	step("bad CIDRs leave the file", node("10.244.1.0/24", "10.244.2.0/24"), false, "podCIDRs[1]", dual)
	step("CIDRs cleared keep the file", node(), false, "", dual)
	step("no node", nil, false, "no node", dual)

	if err := os.WriteFile(w.Path(), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	step("a file changed behind our back is rewritten", node("10.244.1.0/24", "fd00:10:244:1::/64"), true, "", dual)

	fi, err := os.Stat(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", fi.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != cni.DefaultFileName {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want only %s (no temporary files)", names, cni.DefaultFileName)
	}

	if err := w.Remove(); err != nil {
		t.Fatal(err)
	}
	if w.Ready() || onDisk(t, w.Path()) != "" {
		t.Error("Remove left the file")
	}
	if err := w.Remove(); err != nil {
		t.Errorf("Remove of a missing file: %v", err)
	}
	step("written again after Remove", node("10.244.1.0/24"), true, "", v4)
}

func TestReadyNeedsAFile(t *testing.T) {
	dir := t.TempDir()
	w, err := cni.New(cni.Config{Dir: dir, FileName: "50-pods.conflist"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(w.Path(), 0o755); err != nil {
		t.Fatal(err)
	}
	if w.Ready() {
		t.Error("Ready with a directory at Path")
	}
	if err := os.Remove(w.Path()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.Path(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if w.Ready() {
		t.Error("Ready with an empty file at Path")
	}
	if changed, err := w.Sync(node("10.0.0.0/24")); err != nil || !changed {
		t.Fatalf("Sync = %v, %v; want a write", changed, err)
	}
	if !w.Ready() {
		t.Error("not Ready after a write")
	}
}

func TestSyncConcurrent(t *testing.T) {
	w, err := cni.New(cni.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			changed, err := w.Sync(node("10.0.0.0/24"))
			if err != nil {
				t.Error(err)
			}
			if changed {
				mu.Lock()
				writes++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if writes != 1 {
		t.Errorf("%d Syncs of the same node wrote, want 1", writes)
	}
	if got, want := onDisk(t, w.Path()), render(t, cni.Network{}, "10.0.0.0/24"); got != want {
		t.Errorf("file = %s, want %s", got, want)
	}
}
