//go:build linux

package mountns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
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

// TestNoMountsSharesTheHostNamespace: without mounts the init needs no
// privilege, stays in the caller's mount namespace and still changes to
// the working directory.
func TestNoMountsSharesTheHostNamespace(t *testing.T) {
	dir := t.TempDir()
	own, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Skipf("no mount namespace link: %v", err)
	}
	out, err := run(t, Spec{Dir: dir, Path: "/bin/sh", Args: []string{"sh", "-c", "readlink /proc/self/ns/mnt; pwd"}})
	if err != nil {
		t.Fatalf("setup failed: %v", err)
	}
	if want := own + "\n" + dir + "\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
}

// startHeld starts spec with Hold and returns the command, its pipe and
// its output buffer.
func startHeld(t *testing.T, spec Spec) (*exec.Cmd, *Pipe, *bytes.Buffer) {
	t.Helper()
	spec.Hold = true
	cmd, pipe, err := Command(spec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	err = cmd.Start()
	pipe.CloseChild()
	if err != nil {
		_ = pipe.Wait()
		t.Fatal(err)
	}
	return cmd, pipe, &out
}

// TestHoldRunsAfterRelease: a released init runs the command, and what the
// caller did between Start and Release (here: write a file) is in place.
// That the command cannot run before the release is
// TestHoldWithoutReleaseRunsNothing's.
func TestHoldRunsAfterRelease(t *testing.T) {
	file := filepath.Join(t.TempDir(), "placed")
	cmd, pipe, out := startHeld(t, Spec{Path: "/bin/cat", Args: []string{"cat", file}})
	if err := os.WriteFile(file, []byte("placed before the command ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pipe.Release()
	if err := pipe.Wait(); err != nil {
		t.Fatalf("setup failed: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("command failed: %v\n%s", err, out)
	}
	if got := out.String(); got != "placed before the command ran\n" {
		t.Errorf("output %q: the command ran before the release", got)
	}
}

// TestHoldWithoutReleaseRunsNothing: an init let go without the release
// exits without running the command, and says so.
func TestHoldWithoutReleaseRunsNothing(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	cmd, pipe, _ := startHeld(t, Spec{Path: "/usr/bin/touch", Args: []string{"touch", marker}})
	err := pipe.Wait()
	_ = cmd.Wait()
	if err == nil || !strings.Contains(err.Error(), "did not release") {
		t.Errorf("Wait = %v, want the init's report that it was not released", err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the command ran without the release: %v", err)
	}
}
