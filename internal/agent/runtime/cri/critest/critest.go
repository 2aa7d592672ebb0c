// Package critest gives tests a real containerd to run pods in, on this
// machine and nowhere else: an image built from busybox-static without a
// daemon (BuildImage), a registry on 127.0.0.1 (StartRegistry, Push), a
// bridge network of the test's own (BridgeNetwork), and a containerd of the
// test's own with the CRI plugin (StartContainerd). Setup does all of it.
//
// What the caller must do: run as root, with Debian's containerd, runc,
// containernetworking-plugins, umoci, skopeo, docker-registry and
// busybox-static installed (RequireTools skips the test otherwise, or fails
// it when KNODE_REQUIRE_CONTAINERD=1). Everything is removed when the test
// ends, failed or not: the containerd's pods, processes, mounts and
// directories, the registry, and the bridge.
//
// What it keeps off the machine: the containerd runs in a mount namespace
// of its own, with a directory of the test's over /run, so that its shims'
// sockets (which containerd 1.6 places under /run/containerd/s) and the
// pods' network namespaces never appear on the host; runc's state, the
// CNI IP allocations and every image live in temporary directories. What
// it cannot keep off: libcni (inside containerd 1.6) writes its result
// cache to /var/lib/cni/results while a pod runs and removes the entries
// when the pod's network is torn down; and containers whose pod names no
// cgroup parent get cgroups under /k8s.io in each hierarchy, which runc
// removes with the container. StartContainerd removes those directories
// when they did not exist before it and are empty once it stopped.
// CgroupRoot gives tests a cgroup parent of their own instead.
//
// The network is a bridge the test creates with the gateway address on it
// (the bridge plugin's isGateway is off, so that the plugin leaves the
// machine's IP forwarding alone): the test reaches its pods' addresses
// directly, and pods have no route beyond their /24.
package critest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// Tools are the programs the harness runs.
var Tools = []string{"containerd", "containerd-shim-runc-v2", "runc", "umoci", "skopeo", "docker-registry", "ip", "mount"}

// Busybox is busybox-static's binary, the only file of the test image.
const Busybox = "/bin/busybox"

// CNIBinDir is where Debian's containernetworking-plugins are.
const CNIBinDir = "/usr/lib/cni"

// RequireEnv, set to 1, turns RequireTools' skips into failures (CI sets
// it where containerd must be tested).
const RequireEnv = "KNODE_REQUIRE_CONTAINERD"

// clk times the harness's waits.
var clk clock.WithTicker = clock.RealClock{}

// RequireTools skips the test unless every tool is installed (Tools,
// Busybox, the CNI bridge, host-local and loopback plugins), or fails it
// instead when KNODE_REQUIRE_CONTAINERD=1; it skips it too when it does
// not run as root.
func RequireTools(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("containerd tests need root")
	}
	var missing []string
	for _, tool := range Tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, f := range []string{Busybox, CNIBinDir + "/bridge", CNIBinDir + "/host-local", CNIBinDir + "/loopback"} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := "containerd tests need " + strings.Join(missing, ", ")
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1)", msg, RequireEnv)
	}
	t.Skip(msg)
}

// run runs a command and fails the test with its output when it fails.
func run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	out, err := output(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// output runs a command (at most two minutes) and returns its combined
// output.
func output(env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// poll calls f every interval until it returns true or timeout passes;
// it reports whether f succeeded.
func poll(timeout, interval time.Duration, f func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := clk.NewTicker(interval)
	defer tick.Stop()
	for {
		if f() {
			return true
		}
		select {
		case <-ctx.Done():
			return f()
		case <-tick.C():
		}
	}
}

// mkdirTemp makes a directory with a short path (unix sockets live in it)
// and removes it when the test ends, after the cleanups registered later.
func mkdirTemp(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}

func fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatal(fmt.Sprintf(format, args...))
}
