//go:build linux

package mountns

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanOrdersParentsFirst(t *testing.T) {
	got := Plan([]Mount{{Target: "/a/b/c"}, {Target: "/a"}, {Target: "/x/y"}, {Target: "/b"}})
	var targets []string
	for _, m := range got {
		targets = append(targets, m.Target)
	}
	if want := "/a /b /x/y /a/b/c"; strings.Join(targets, " ") != want {
		t.Fatalf("Plan order = %v, want %s", targets, want)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Scratch: "/s"}, "no command"},
		{Spec{Path: "/bin/true", Args: []string{"true"}, Scratch: "rel"}, "scratch"},
		{Spec{Path: "/bin/true", Args: []string{"true"}, Scratch: "/s", Mounts: []Mount{{Source: "/a", Target: "/"}}}, "mounts[0].target"},
		{Spec{Path: "/bin/true", Args: []string{"true"}, Scratch: "/s", Mounts: []Mount{{Source: "/a", Target: "/b/../c"}}}, "mounts[0].target"},
		{Spec{Path: "/bin/true", Args: []string{"true"}, Scratch: "/s", Mounts: []Mount{{Source: "a", Target: "/c"}}}, "mounts[0].source"},
	} {
		err := tc.spec.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.spec, err, tc.want)
		}
	}
}

func mountCount(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// run starts spec's command through the init and returns its output and
// the setup error, if any.
func run(t *testing.T, spec Spec) (string, error) {
	t.Helper()
	cmd, pipe, err := Command(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		pipe.CloseChild()
		t.Fatal(err)
	}
	pipe.CloseChild()
	setupErr := pipe.Wait()
	waitErr := cmd.Wait()
	if setupErr == nil && waitErr != nil {
		t.Fatalf("command failed: %v\n%s", waitErr, out.String())
	}
	return out.String(), setupErr
}

func TestVolumesAtTheirMountPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	config := filepath.Join(dir, "config")
	scratch := filepath.Join(dir, "scratch")
	for _, d := range []string{data, config, scratch} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(config, "in"), []byte("from-host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A top-level path the host does not have, a path inside a host
	// directory (/etc), and a read-only volume.
	top := fmt.Sprintf("/knode-mountns-test-%d", os.Getpid())
	inEtc := fmt.Sprintf("/etc/knode-mountns-test-%d/conf", os.Getpid())
	before := mountCount(t)
	script := strings.Join([]string{
		"cat " + inEtc + "/in",
		"echo written > " + top + "/data/out",
		"if echo x > " + inEtc + "/nope 2>/dev/null; then echo WROTE-READ-ONLY; fi",
		"test -f /etc/hostname && echo host-etc-visible",
		"pwd",
	}, "; ")
	out, err := run(t, Spec{
		Mounts: []Mount{
			{Source: config, Target: inEtc, ReadOnly: true},
			{Source: data, Target: top + "/data"},
		},
		Scratch: scratch,
		Dir:     top,
		Path:    "/bin/sh",
		Args:    []string{"sh", "-c", script},
	})
	if err != nil {
		t.Fatalf("setup failed: %v", err)
	}
	for _, want := range []string{"from-host", "host-etc-visible", top + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "WROTE-READ-ONLY") {
		t.Errorf("a read-only volume was writable: %q", out)
	}
	got, err := os.ReadFile(filepath.Join(data, "out"))
	if err != nil || string(got) != "written\n" {
		t.Errorf("the container's write did not land in the volume: %q, %v", got, err)
	}
	for _, p := range []string{top, filepath.Dir(inEtc)} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("the host now has %s (%v); mount points must stay in the namespace", p, err)
		}
	}
	if after := mountCount(t); after != before {
		t.Errorf("the host's mount table changed: %d lines, was %d", after, before)
	}
}

func TestSetupFailureIsReported(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	dir := t.TempDir()
	_, err := run(t, Spec{
		Mounts:  []Mount{{Source: filepath.Join(dir, "missing"), Target: "/x"}},
		Scratch: dir,
		Path:    "/bin/true",
		Args:    []string{"true"},
	})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("setup error = %v, want one naming the missing source", err)
	}
}
