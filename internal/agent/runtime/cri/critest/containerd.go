package critest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Namespace is the containerd namespace the CRI plugin uses.
const Namespace = "k8s.io"

// Options configure StartContainerd.
type Options struct {
	// SandboxImage is the CRI plugin's sandbox (pause) image; containerd
	// pulls it through Mirrors before the first sandbox. Required.
	SandboxImage string
	// Mirrors are registries ("127.0.0.1:PORT") containerd pulls from over
	// plain HTTP.
	Mirrors []string
	// CNIConfDir holds the pod network's conflist (BridgeNetwork); "" means
	// an empty temporary directory (only host-network pods can run).
	CNIConfDir string
	// CNIBinDir holds the CNI plugins; "" means CNIBinDir.
	CNIBinDir string
}

// StartContainerd starts a containerd of the test's own, with the CRI
// plugin, and returns its CRI endpoint ("unix:///…/c.sock") once it
// answers. Its root, state, runc root and socket are in a new temporary
// directory with a short path; it runs in a mount namespace of its own
// with a temporary directory over /run (see the package doc). The
// snapshotter is overlayfs, or native where overlayfs cannot be mounted.
//
// When the test ends, failed or not, every sandbox is stopped and removed
// through the CRI, containerd is stopped, containers runc still knows of
// are deleted, its shims are killed, whatever is still mounted under its
// directories is unmounted, and the directories are removed.
func StartContainerd(t testing.TB, opts Options) string {
	t.Helper()
	if opts.SandboxImage == "" {
		t.Fatal("critest.StartContainerd: Options.SandboxImage is required")
	}
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = CNIBinDir
	}
	base := mkdirTemp(t, "kncd")
	if opts.CNIConfDir == "" {
		opts.CNIConfDir = filepath.Join(base, "net.d")
	}
	c := &containerd{
		base:     base,
		root:     filepath.Join(base, "root"),
		state:    filepath.Join(base, "state"),
		run:      filepath.Join(base, "run"),
		runcRoot: filepath.Join(base, "runc"),
		socket:   filepath.Join(base, "c.sock"),
		log:      filepath.Join(base, "containerd.log"),
	}
	for _, d := range []string{c.root, c.state, c.run, c.runcRoot, opts.CNIConfDir, filepath.Join(base, "tmp")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	snapshotter := "overlayfs"
	if err := tryOverlay(filepath.Join(base, "ovl")); err != nil {
		t.Logf("overlayfs cannot be mounted here (%v); containerd uses the native snapshotter", err)
		snapshotter = "native"
	}
	config := c.config(opts, snapshotter)
	configPath := filepath.Join(base, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	c.madeDirs = missingDirs()

	logFile, err := os.Create(c.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// /run is replaced in containerd's own mount namespace only: Go makes
	// the new namespace's mounts private before the shell runs.
	cmd := exec.Command("/bin/sh", "-c", `mount --bind "$0" /run && exec containerd --config "$1"`, c.run, configPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "TMPDIR="+filepath.Join(base, "tmp"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(func() { c.stop(t) })

	conn, err := grpc.NewClient("unix://"+c.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ready := poll(30*time.Second, 20*time.Millisecond, func() bool {
		select {
		case <-c.exited:
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := rt.Version(ctx, &runtimeapi.VersionRequest{})
		return err == nil
	})
	if !ready {
		t.Fatalf("containerd did not answer on %s:\n%s", c.socket, tail(c.log, 40))
	}
	return "unix://" + c.socket
}

// containerd is one started containerd.
type containerd struct {
	base, root, state, run, runcRoot, socket, log string
	cmd                                           *exec.Cmd
	exited                                        chan struct{}
	// madeDirs are machine-wide directories it may make (missingDirs),
	// deepest first, that did not exist before it started.
	madeDirs []string
}

func (c *containerd) config(opts Options, snapshotter string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `version = 2
root = %q
state = %q
temp = %q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.opt",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = %q
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, c.root, c.state, filepath.Join(c.base, "tmp"), c.socket, c.socket+".ttrpc", opts.SandboxImage,
		snapshotter, c.runcRoot, opts.CNIBinDir, opts.CNIConfDir)
	for _, m := range opts.Mirrors {
		fmt.Fprintf(&b, `
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%q]
    endpoint = [%q]
`, m, "http://"+m)
	}
	return b.String()
}

// stop takes containerd and everything it started down (see
// StartContainerd). Failures are the test's errors.
func (c *containerd) stop(t testing.TB) {
	if t.Failed() {
		t.Logf("containerd's log (last lines):\n%s", tail(c.log, 60))
	}
	if err := c.removeSandboxes(); err != nil {
		t.Errorf("removing the test containerd's sandboxes: %v", err)
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	if !poll(10*time.Second, 10*time.Millisecond, func() bool {
		select {
		case <-c.exited:
			return true
		default:
			return false
		}
	}) {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exited
	}
	// Containers runc still knows of (a test that failed halfway).
	runcRoot := filepath.Join(c.runcRoot, Namespace)
	if out, err := output(nil, "runc", "--root", runcRoot, "list", "-q"); err == nil {
		for _, id := range strings.Fields(out) {
			if out, err := output(nil, "runc", "--root", runcRoot, "delete", "--force", id); err != nil {
				t.Errorf("runc delete --force %s: %v: %s", id, err, out)
			}
		}
	}
	shims := c.shims()
	for _, pid := range shims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if !poll(10*time.Second, 10*time.Millisecond, func() bool { return !slices.ContainsFunc(shims, alive) }) {
		t.Errorf("containerd shims %v still running", shims)
	}
	if err := unmountUnder(c.base); err != nil {
		t.Errorf("unmounting under %s: %v", c.base, err)
	}
	for _, d := range c.madeDirs {
		_ = syscall.Rmdir(d) // only when empty: another test's containerd may use it
	}
}

// removeSandboxes stops and removes every pod sandbox, which removes
// their containers.
func (c *containerd) removeSandboxes() error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+c.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var errs []error
	for _, s := range resp.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// shims are the pids of containerd-shim-runc-v2 processes serving this
// containerd (their -address is its socket).
func (c *containerd) shims() []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == c.socket {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	return end >= 0 && end+2 < len(s) && s[end+2] != 'Z'
}

// unmountUnder detaches every mount of this mount namespace at or below
// dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// tryOverlay mounts and unmounts an overlay filesystem in dir.
func tryOverlay(dir string) error {
	var dirs []string
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		p := filepath.Join(dir, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return err
		}
		dirs = append(dirs, p)
	}
	defer os.RemoveAll(dir)
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", dirs[0], dirs[1], dirs[2])
	if err := syscall.Mount("overlay", dirs[3], "overlay", 0, opts); err != nil {
		return err
	}
	return syscall.Unmount(dirs[3], syscall.MNT_DETACH)
}

// missingDirs are the machine-wide directories containerd 1.6 makes
// that do not exist yet, deepest first: the k8s.io cgroups (where it puts
// containers whose pod names no cgroup parent) and libcni's cache.
func missingDirs() []string {
	matches, _ := filepath.Glob("/sys/fs/cgroup/*")
	candidates := []string{"/var/lib/cni/results", "/var/lib/cni"}
	for _, m := range matches {
		if info, err := os.Lstat(m); err == nil && info.IsDir() {
			candidates = append(candidates, filepath.Join(m, Namespace))
		}
	}
	var out []string
	for _, d := range candidates {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			out = append(out, d)
		}
	}
	return out
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
