package critest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tag is the tag BuildImage gives its image in the layout.
const Tag = "1"

// ImageCmd is the image's default command: it sleeps until killed, so the
// image can also be the sandbox (pause) image.
var ImageCmd = []string{"sleep", "inf"}

// BuildImage builds an OCI image layout in dir/image (dir must exist) and
// returns the layout's path; the image is tagged Tag. Its one layer holds
// busybox-static as /bin/busybox, a symlink to it in /bin for each of its
// applets (sh, sleep, httpd, cat, nc, wget, ...), /etc, /root, /var and a
// sticky /tmp; PATH is /bin:/sbin:/usr/bin:/usr/sbin and the command is
// ImageCmd. No daemon is involved (umoci).
func BuildImage(t testing.TB, dir string) string {
	t.Helper()
	layout := filepath.Join(dir, "image")
	root := filepath.Join(dir, "rootfs")
	for _, d := range []string{"bin", "etc", "root", "var", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(Busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(run(t, nil, Busybox, "--list")) {
		if applet == "busybox" || strings.Contains(applet, "/") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "group"), []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := layout + ":" + Tag
	run(t, nil, "umoci", "init", "--layout", layout)
	run(t, nil, "umoci", "new", "--image", ref)
	run(t, nil, "umoci", "insert", "--image", ref, root, "/")
	args := []string{"config", "--image", ref, "--config.env", "PATH=/bin:/sbin:/usr/bin:/usr/sbin"}
	for _, a := range ImageCmd {
		args = append(args, "--config.cmd", a)
	}
	run(t, nil, "umoci", args...)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	return layout
}

// Push copies the image tagged Tag in the layout ociDir to ref
// ("127.0.0.1:PORT/name:tag") over plain HTTP.
func Push(t testing.TB, ociDir, ref string) {
	t.Helper()
	tmp := t.TempDir()
	run(t, []string{"TMPDIR=" + tmp, "HOME=" + tmp}, "skopeo", "--insecure-policy", "copy", "--quiet",
		"--dest-tls-verify=false", "oci:"+ociDir+":"+Tag, "docker://"+ref)
}
