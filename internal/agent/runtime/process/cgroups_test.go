//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/runtime"
)

// fixtureCgroups is a Manager over a plain directory tree laid out as a
// cgroup v1 (or v2) host, and the tree's root. Nothing is enforced: the
// tests read what was written.
func fixtureCgroups(t *testing.T, mode cgroups.Mode) (*cgroups.Manager, string) {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{"cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": ""}
	if mode != cgroups.V2 {
		for _, ctl := range []string{"cpu", "cpuacct", "memory", "pids"} {
			if err := os.Mkdir(filepath.Join(root, ctl), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		files = map[string]string{"cpuset/cpuset.cpus": "0-1\n", "cpuset/cpuset.mems": "0\n"}
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := cgroups.New(cgroups.Config{Mode: mode, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return m, root
}

// controlFile is a control file of cgroup path in a fixture tree: in
// controller ctl's hierarchy on v1, in the one tree on v2.
func controlFile(root string, mode cgroups.Mode, ctl, path, name string) string {
	if mode == cgroups.V2 {
		return filepath.Join(root, path, name)
	}
	return filepath.Join(root, ctl, path, name)
}

// decider is a runtime.ResourceDecider whose answer a test changes.
type decider struct {
	mu  sync.Mutex
	res runtime.ContainerResources
	err error
}

func (d *decider) decide(*corev1.Pod, *corev1.Container) (runtime.ContainerResources, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.res, d.err
}

func (d *decider) set(change func(*runtime.ContainerResources), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if change != nil {
		change(&d.res)
	}
	d.err = err
}

const fixturePod = "kubepods/burstable/podu1"

// newPodCgroup makes the pod's cgroup, as the container manager would.
func newPodCgroup(t *testing.T, m *cgroups.Manager, path string) {
	t.Helper()
	if err := m.Create(path, cgroups.Resources{}); err != nil {
		t.Fatal(err)
	}
}

// TestContainerCgroup runs a container with a decision on fixture trees:
// its cgroup gets the decision's values and its process, UpdateResources
// rewrites them, the device plugin variables follow the container's own, an
// OOM kill the cgroup records is the run's reason, and the cgroup is gone
// once the run ended while the pod's stays.
func TestContainerCgroup(t *testing.T) {
	for _, mode := range []cgroups.Mode{cgroups.V1, cgroups.V2} {
		t.Run(mode.String(), func(t *testing.T) {
			m, root := fixtureCgroups(t, mode)
			newPodCgroup(t, m, fixturePod)
			d := &decider{res: runtime.ContainerResources{
				CgroupParent: fixturePod,
				Linux:        cgroups.Resources{CPUShares: 512, CPUQuota: 50000, CPUPeriod: 100000, MemoryLimit: 64 << 20, CPUSetCPUs: "1"},
				Env:          []corev1.EnvVar{{Name: "DEVICE", Value: "gpu-0"}, {Name: "POD", Value: "from-the-plugin"}},
				Devices:      []runtime.Device{{HostPath: "/dev/null", ContainerPath: "/dev/null", Permissions: "rw"}},
			}}
			r := newRuntimeWith(t, Config{Clock: testingclock.NewFakeClock(t0), Cgroups: m, Resources: d.decide})
			dir := t.TempDir()
			ready, waitReady := readyFifo(t, dir)
			goFifo := filepath.Join(dir, "go")
			if err := syscall.Mkfifo(goFifo, 0o600); err != nil {
				t.Fatal(err)
			}
			pod := shPod("u1", corev1.RestartPolicyNever, `echo "$DEVICE $POD"; echo > `+ready+`; read x < `+goFifo+`; exit 3`)
			if err := r.StartPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			waitReady()
			pid, _ := pidOf(t, r.cfg.RootDir, pod.UID, "main")
			ctr := fixturePod + "/main-0"
			file := func(ctl, name string) string {
				return strings.TrimSpace(readFile(t, controlFile(root, mode, ctl, ctr, name)))
			}
			got := map[string]string{}
			var want map[string]string
			if mode == cgroups.V2 {
				for _, f := range []string{"cpu.weight", "cpu.max", "memory.max", "cpuset.cpus", "cgroup.procs"} {
					got[f] = file("", f)
				}
				want = map[string]string{"cpu.weight": "20", "cpu.max": "50000 100000", "memory.max": "67108864",
					"cpuset.cpus": "1", "cgroup.procs": fmt.Sprint(pid)}
			} else {
				got["cpu.shares"], got["cpu.cfs_quota_us"] = file("cpu", "cpu.shares"), file("cpu", "cpu.cfs_quota_us")
				got["memory.limit_in_bytes"], got["cpuset.cpus"] = file("memory", "memory.limit_in_bytes"), file("cpuset", "cpuset.cpus")
				want = map[string]string{"cpu.shares": "512", "cpu.cfs_quota_us": "50000", "memory.limit_in_bytes": "67108864", "cpuset.cpus": "1"}
				for _, ctl := range []string{"cpu", "cpuacct", "cpuset", "memory", "pids"} {
					got[ctl+" cgroup.procs"] = file(ctl, "cgroup.procs")
					want[ctl+" cgroup.procs"] = fmt.Sprint(pid)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the container's cgroup (-want +got):\n%s", diff)
			}

			// The CPU manager's shared pool changes.
			d.set(func(res *runtime.ContainerResources) { res.Linux.CPUSetCPUs = "0" }, nil)
			if err := r.UpdateResources(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := file("cpuset", "cpuset.cpus"); got != "0" {
				t.Errorf("cpuset.cpus after UpdateResources = %q, want 0", got)
			}
			d.set(nil, errors.New("no cpu assignment"))
			err := r.UpdateResources(context.Background())
			if err == nil || !strings.Contains(err.Error(), "default/p (u1) container main: no cpu assignment") {
				t.Errorf("UpdateResources with a failing decider = %v, want an error naming the pod and container", err)
			}
			d.set(nil, nil)

			oom, content := controlFile(root, mode, "memory", ctr, "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"
			if mode == cgroups.V2 {
				oom, content = controlFile(root, mode, "", ctr, "memory.events"), "low 0\nhigh 0\nmax 2\noom 1\noom_kill 1\n"
			}
			if err := os.WriteFile(oom, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			writeFifo(t, goFifo)
			c := waitFor(t, r, pod.UID, "exit", terminated)
			if term := c.State.Terminated; term.Reason != runtime.ReasonOOMKilled || term.ExitCode != 3 {
				t.Errorf("terminated = %+v, want OOMKilled with the process's exit code 3", term)
			}
			if got := readFile(t, c.LogPath); got != "gpu-0 p\n" {
				t.Errorf("log = %q, want the plugin's DEVICE and the container's own POD", got)
			}
			for _, ctl := range []string{"cpu", "cpuset", "memory"} {
				if _, err := os.Stat(controlFile(root, mode, ctl, ctr, "")); !os.IsNotExist(err) {
					t.Errorf("%s: the run's cgroup is still there: %v", ctl, err)
				}
				if _, err := os.Stat(controlFile(root, mode, ctl, fixturePod, "")); err != nil {
					t.Errorf("%s: the pod's cgroup is gone: %v", ctl, err)
				}
			}
		})
	}
}

// TestCgroupFailureIsAStartError: a run whose cgroup cannot be written or
// joined never runs its command, and its StartError names the cgroup.
func TestCgroupFailureIsAStartError(t *testing.T) {
	tests := []struct {
		name, ctl, file, want string
	}{
		{"create", "cpu", "cpu.shares", "creating the container's cgroup " + fixturePod + "/main-0: "},
		{"place", "memory", "cgroup.procs", "placing the container's process in its cgroup " + fixturePod + "/main-0: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, root := fixtureCgroups(t, cgroups.V1)
			newPodCgroup(t, m, fixturePod)
			// A directory where the control file should be: writing it fails.
			if err := os.MkdirAll(filepath.Join(root, tt.ctl, fixturePod, "main-0", tt.file), 0o755); err != nil {
				t.Fatal(err)
			}
			d := &decider{res: runtime.ContainerResources{CgroupParent: fixturePod, Linux: cgroups.Resources{CPUShares: 2, MemoryLimit: 1 << 30}}}
			r := newRuntimeWith(t, Config{Clock: testingclock.NewFakeClock(t0), Cgroups: m, Resources: d.decide})
			marker := filepath.Join(t.TempDir(), "ran")
			pod := shPod("u1", corev1.RestartPolicyNever, "touch "+marker)
			if err := r.StartPod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			c := waitFor(t, r, pod.UID, "the start error", terminated)
			if term := c.State.Terminated; term.Reason != runtime.ReasonStartError || term.ExitCode != runtime.ExitCodeStartError ||
				!strings.HasPrefix(term.Message, tt.want) {
				t.Errorf("terminated = %+v, want StartError %q...", term, tt.want)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Errorf("the command ran although its cgroup failed: %v", err)
			}
			if _, err := os.Stat(filepath.Join(root, "memory", fixturePod, "main-0")); !os.IsNotExist(err) {
				t.Errorf("the failed run's cgroup is still there: %v", err)
			}
		})
	}
}

// TestDecisionErrorIsAConfigError: the decider's error keeps the container
// waiting with CreateContainerConfigError, and nothing runs.
func TestDecisionErrorIsAConfigError(t *testing.T) {
	m, _ := fixtureCgroups(t, cgroups.V1)
	d := &decider{err: errors.New("device plugin example.com/gpu: not registered")}
	r := newRuntimeWith(t, Config{Clock: testingclock.NewFakeClock(t0), Cgroups: m, Resources: d.decide})
	pod := shPod("u1", corev1.RestartPolicyNever, "true")
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	st, err := r.PodStatus(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.ContainerStateWaiting{Reason: runtime.ReasonCreateContainerConfigError, Message: "device plugin example.com/gpu: not registered"}
	if diff := cmp.Diff(want, st.Containers[0].State.Waiting); diff != "" {
		t.Errorf("waiting (-want +got):\n%s", diff)
	}
}

// TestAdoptedContainerKeepsItsCgroup: after an agent restart the adopted
// container's cgroup is still updated, checked for OOM kills and removed.
func TestAdoptedContainerKeepsItsCgroup(t *testing.T) {
	m, root := fixtureCgroups(t, cgroups.V1)
	newPodCgroup(t, m, fixturePod)
	d := &decider{res: runtime.ContainerResources{CgroupParent: fixturePod, Linux: cgroups.Resources{CPUSetCPUs: "1"}}}
	dir := t.TempDir()
	cfg := Config{RootDir: t.TempDir(), Clock: testingclock.NewFakeClock(t0), Cgroups: m, Resources: d.decide}
	old := newRuntimeWith(t, cfg)
	ready, waitReady := readyFifo(t, dir)
	pod := shPod("u1", corev1.RestartPolicyNever, `echo > `+ready+`; sleep 1000`)
	if err := old.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitReady()
	r := newRuntimeWith(t, cfg)
	if st, err := r.PodStatus(pod.UID); err != nil || !allRunning(st) {
		t.Fatalf("adopted pod: %+v, %v; want it running", st, err)
	}
	ctr := fixturePod + "/main-0"
	d.set(func(res *runtime.ContainerResources) { res.Linux.CPUSetCPUs = "0" }, nil)
	if err := r.UpdateResources(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(root, "cpuset", ctr, "cpuset.cpus"))); got != "0" {
		t.Errorf("the adopted container's cpuset.cpus = %q, want 0", got)
	}
	if err := os.WriteFile(filepath.Join(root, "memory", ctr, "memory.oom_control"), []byte("oom_kill 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.StopPod(context.Background(), pod.UID, 0); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "the kill", terminated)
	if term := c.State.Terminated; term.Reason != runtime.ReasonOOMKilled || term.ExitCode != ExitCodeUnknown {
		t.Errorf("terminated = %+v, want OOMKilled with exit code %d", term, ExitCodeUnknown)
	}
	if _, err := os.Stat(filepath.Join(root, "memory", ctr)); !os.IsNotExist(err) {
		t.Errorf("the adopted run's cgroup is still there: %v", err)
	}
}

// TestDevicePluginMountsAndDevices: the decision's mounts are bound (read-
// only when asked) and a device is bound at its own container path, in the
// container's mount namespace only.
func TestDevicePluginMountsAndDevices(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "libgpu.so"), []byte("driver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	top := fmt.Sprintf("/knode-device-test-%d", os.Getpid())
	dev := fmt.Sprintf("/dev/knode-device-test-%d", os.Getpid())
	d := &decider{res: runtime.ContainerResources{
		Mounts: []runtime.Mount{{HostPath: lib, ContainerPath: top + "/lib", ReadOnly: true}},
		Devices: []runtime.Device{
			{HostPath: "/dev/null", ContainerPath: dev, Permissions: "rw"},
			{HostPath: "/dev/zero", ContainerPath: "/dev/zero", Permissions: "r"},
		},
	}}
	r := newRuntimeWith(t, Config{Clock: testingclock.NewFakeClock(t0), Resources: d.decide})
	script := strings.Join([]string{
		"cat " + top + "/lib/libgpu.so",
		"echo x > " + dev + " && echo device-writable",
		"if (echo y > " + top + "/lib/new) 2>/dev/null; then echo WROTE-READ-ONLY; fi",
		"head -c 3 /dev/zero | wc -c",
	}, "; ")
	pod := shPod("u1", corev1.RestartPolicyNever, script)
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "exit", terminated)
	log := readFile(t, c.LogPath)
	if c.State.Terminated.ExitCode != 0 || log != "driver\ndevice-writable\n3\n" {
		t.Errorf("exit %d, log %q; want 0 and the mount, the device and no write to the read-only mount", c.State.Terminated.ExitCode, log)
	}
	for _, p := range []string{top, dev, filepath.Join(lib, "new")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("the host has %s (%v)", p, err)
		}
	}
}

func TestDevicePluginPathsAreChecked(t *testing.T) {
	tests := []struct {
		name string
		res  runtime.ContainerResources
		want string
	}{
		{"relative mount host path", runtime.ContainerResources{Mounts: []runtime.Mount{{HostPath: "lib", ContainerPath: "/lib"}}},
			`device plugin mounts[0].hostPath "lib": must be an absolute path`},
		{"mount at /", runtime.ContainerResources{Mounts: []runtime.Mount{{HostPath: "/lib", ContainerPath: "/"}}},
			`device plugin mounts[0].containerPath "/": must be an absolute path other than /`},
		{"device without a container path", runtime.ContainerResources{Devices: []runtime.Device{{HostPath: "/dev/null"}, {HostPath: "/dev/zero"}}},
			`device plugin devices[0].containerPath "": must be an absolute path other than /`},
	}
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := r.mounts(&corev1.Pod{}, &corev1.Container{}, tt.res)
			if err == nil || err.Error() != tt.want {
				t.Errorf("mounts = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestAppendEnv(t *testing.T) {
	got := appendEnv([]string{"PATH=/bin", "HOSTNAME=web", "A=mine"}, []corev1.EnvVar{
		{Name: "A", Value: "plugin"}, {Name: "VISIBLE_DEVICES", Value: "0,1"}, {Name: "VISIBLE_DEVICES", Value: "2"}, {Name: "", Value: "x"},
	})
	want := []string{"PATH=/bin", "HOSTNAME=web", "A=mine", "VISIBLE_DEVICES=0,1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
