package hostpath

import (
	"errors"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// findSanity returns the csi-sanity binary: on PATH, else in
// $(go env GOPATH)/bin. Missing, the test is skipped, unless
// KNODE_REQUIRE_CSI_SANITY=1 makes that a failure.
func findSanity(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("csi-sanity"); err == nil {
		return p
	}
	for _, gopath := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(gopath, "bin", "csi-sanity")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := "csi-sanity not found on PATH or in $GOPATH/bin; install it with go install github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity@v5.6.0"
	if os.Getenv("KNODE_REQUIRE_CSI_SANITY") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

var ranSpecs = regexp.MustCompile(`Ran (\d+) of (\d+) Specs`)

// TestCSISanity runs the real csi-sanity against the driver serving all
// three services on one socket, once without topology and once with, with
// the node attach limit tested. Every spec must pass, and afterwards
// nothing may stay mounted or provisioned.
func TestCSISanity(t *testing.T) {
	bin := findSanity(t)
	if os.Geteuid() != 0 {
		if os.Getenv("KNODE_REQUIRE_CSI_SANITY") == "1" {
			t.Fatal("csi-sanity needs root to bind-mount")
		}
		t.Skip("csi-sanity needs root to bind-mount")
	}
	for _, tc := range []struct {
		name     string
		topology map[string]string
	}{
		{"no-topology", nil},
		{"topology", map[string]string{"topology.hostpath.csi.knode.io/zone": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testDir(t)
			data := filepath.Join(dir, "data")
			d, err := New(Config{
				DataDir:           data,
				NodeID:            "sanity-node",
				Topology:          tc.topology,
				MaxVolumesPerNode: 3,
				Logger:            testLogger(t),
			})
			if err != nil {
				t.Fatal(err)
			}
			sock := filepath.Join(dir, "csi.sock")
			srv, err := d.Start(sock, All)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Stop() })

			cmd := exec.CommandContext(t.Context(), bin,
				"--csi.endpoint", "unix://"+sock,
				// csi-sanity makes and removes these itself.
				"--csi.mountdir", filepath.Join(dir, "mount"),
				"--csi.stagingdir", filepath.Join(dir, "staging"),
				"--csi.testnodevolumeattachlimit",
				"--ginkgo.no-color",
			)
			out, err := cmd.CombinedOutput()
			m := ranSpecs.FindSubmatch(out)
			if err != nil || m == nil {
				t.Fatalf("csi-sanity failed (%v):\n%s", err, tail(string(out), 200))
			}
			t.Logf("csi-sanity (%s): %s", tc.name, m[0])
			if string(m[1]) == "0" {
				t.Errorf("csi-sanity ran no specs:\n%s", tail(string(out), 50))
			}
			if !strings.Contains(string(out), "0 Failed") {
				t.Errorf("csi-sanity output has no \"0 Failed\":\n%s", tail(string(out), 50))
			}

			if left := mountsUnder(t, dir); len(left) > 0 {
				t.Errorf("mounts left after csi-sanity: %v", left)
			}
			vols, err := d.store.volumes()
			if err != nil {
				t.Fatal(err)
			}
			if len(vols) > 0 {
				t.Errorf("%d volumes left after csi-sanity, e.g. %+v", len(vols), vols[0])
			}
			entries, err := os.ReadDir(filepath.Join(data, volumesDir))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			if len(entries) > 0 {
				t.Errorf("%d volume directories left after csi-sanity", len(entries))
			}
		})
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
