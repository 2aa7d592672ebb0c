package cri_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/runtime"
	"knode/internal/agent/runtime/cri"
	"knode/internal/agent/runtime/cri/critest"
)

// waitTimeout bounds every wait on containerd.
const waitTimeout = 60 * time.Second

// world is one containerd shared by the subtests of TestCRI.
type world struct {
	env        critest.Env
	logs       string
	cgroupRoot string
	// volumes holds the pods' volumes: <volumes>/<uid>/<name>.
	volumes string
	// memoryLimit is the memory limit the resource decider gives.
	memoryLimit atomic.Int64
}

// TestCRI runs pods in a containerd of its own (see critest): one
// containerd, registry and network for all subtests, which run in turn.
func TestCRI(t *testing.T) {
	cgroupRoot := critest.CgroupRoot(t)
	env := critest.Setup(t)
	w := &world{
		env:        env,
		logs:       t.TempDir(),
		cgroupRoot: cgroupRoot,
		volumes:    t.TempDir(),
	}
	w.memoryLimit.Store(64 << 20)
	t.Run("pod serves on its address, logs and execs", w.testServe)
	t.Run("restart back-off and exit reasons", w.testRestarts)
	t.Run("image pull failures", w.testImagePulls)
	t.Run("adoption and KillContainer", w.testAdoption)
	t.Run("version and images", w.testVersionAndImages)
	t.Run("nothing is left behind", w.testNothingLeft)
}

// events records a runtime's events.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) record(pod *corev1.Pod, eventtype, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf("%s %s %s: %s", pod.Name, eventtype, reason, message))
}

// count counts the events whose text contains s.
func (e *events) count(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.list {
		if strings.Contains(ev, s) {
			n++
		}
	}
	return n
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.list, "\n")
}

// newClock is a fake clock at the real time: the exit times the runtime
// reads back from containerd when it adopts pods are real.
func newClock() *testingclock.FakeClock { return testingclock.NewFakeClock(time.Now()) }

// newRuntime is a Runtime on w's containerd and clk, with a resource
// decider that puts each pod under w's cgroup root and limits memory, and
// volumes in w.volumes. It is
// closed (not stopping its pods) when the test ends.
func (w *world) newRuntime(t *testing.T, clk *testingclock.FakeClock, ev *events) *cri.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := cri.New(ctx, cri.Config{
		Endpoint:   w.env.Endpoint,
		Clock:      clk,
		PodLogsDir: w.logs,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Events:     ev.record,
		Resources: func(pod *corev1.Pod, c *corev1.Container) (runtime.ContainerResources, error) {
			return runtime.ContainerResources{
				CgroupParent: w.cgroupRoot + "/pod" + string(pod.UID),
				Linux:        cgroups.Resources{CPUShares: 512, MemoryLimit: w.memoryLimit.Load()},
			}, nil
		},
		Volumes: func(pod *corev1.Pod, volume string) (string, error) {
			dir := filepath.Join(w.volumes, string(pod.UID), volume)
			return dir, os.MkdirAll(dir, 0o755)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func newPod(name string, policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "crit", UID: uuid.NewUUID()},
		Spec:       corev1.PodSpec{RestartPolicy: policy, Containers: containers},
	}
}

func container(name, image string, cmd ...string) corev1.Container {
	return corev1.Container{Name: name, Image: image, Command: cmd, ImagePullPolicy: corev1.PullIfNotPresent}
}

// waitFor steps r (Sync) until cond holds for the pod's status, failing
// the test at waitTimeout.
func waitFor(t *testing.T, r *cri.Runtime, uid types.UID, what string, cond func(runtime.PodStatus) bool) runtime.PodStatus {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		st, serr := r.PodStatus(uid)
		if serr == nil && cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up; last status %+v (sync error: %v)", what, st, err)
		}
		err = r.Sync(context.Background())
		select {
		case <-r.Changes():
		case <-tick.C:
		}
	}
}

func containerStatus(st runtime.PodStatus, name string) runtime.ContainerStatus {
	for _, list := range [][]runtime.ContainerStatus{st.InitContainers, st.Containers} {
		for _, c := range list {
			if c.Name == name {
				return c
			}
		}
	}
	return runtime.ContainerStatus{}
}

// wallClock is cs with its times in UTC without monotonic readings, for
// comparing a status rebuilt from the runtime with one kept in memory.
func wallClock(cs runtime.ContainerStatus) runtime.ContainerStatus {
	for _, st := range []*corev1.ContainerState{&cs.State, &cs.LastTerminationState} {
		if r := st.Running; r != nil {
			r.StartedAt = metav1.NewTime(r.StartedAt.Round(0).UTC())
		}
		if term := st.Terminated; term != nil {
			term.StartedAt = metav1.NewTime(term.StartedAt.Round(0).UTC())
			term.FinishedAt = metav1.NewTime(term.FinishedAt.Round(0).UTC())
		}
	}
	return cs
}

func running(name string) func(runtime.PodStatus) bool {
	return func(st runtime.PodStatus) bool { return containerStatus(st, name).State.Running != nil }
}

func waitingReason(name, reason string) func(runtime.PodStatus) bool {
	return func(st runtime.PodStatus) bool {
		w := containerStatus(st, name).State.Waiting
		return w != nil && w.Reason == reason
	}
}

// stopAndRemove stops the pod at once, waits until it stopped, and removes
// it.
func stopAndRemove(t *testing.T, r *cri.Runtime, uid types.UID) {
	t.Helper()
	if err := r.StopPod(context.Background(), uid, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, uid, "the pod to stop", runtime.PodStatus.Stopped)
	if err := r.RemovePod(context.Background(), uid); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PodStatus(uid); err == nil {
		t.Fatal("PodStatus after RemovePod: no error")
	}
}

// criClient is a raw CRI client on w's containerd.
func (w *world) criClient(t *testing.T) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(w.env.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

var criLogLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+ (stdout|stderr) (F|P) (.*)$`)

func (w *world) testServe(t *testing.T) {
	clk := newClock()
	ev := &events{}
	r := w.newRuntime(t, clk, ev)
	ctx := context.Background()
	pod := newPod("web", corev1.RestartPolicyAlways, container("httpd", w.env.Image, "sh", "-c",
		"mkdir -p /tmp/i && echo hi > /tmp/i/index.html && echo $(GREETING) > /data/out && echo serving && exec httpd -f -p 8080 -h /tmp/i"))
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.InitContainers = []corev1.Container{container("init", w.env.Image, "sh", "-c", "echo init")}
	if err := r.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := r.StartPod(ctx, pod); err != nil {
		t.Fatalf("StartPod of a pod the runtime holds: %v", err)
	}
	defer stopAndRemove(t, r, pod.UID)
	st := waitFor(t, r, pod.UID, "httpd to run", running("httpd"))
	if term := containerStatus(st, "init").State.Terminated; term == nil || term.Reason != runtime.ReasonCompleted {
		t.Errorf("init container %+v, want Completed", containerStatus(st, "init"))
	}

	if len(st.IPs) != 1 || !w.env.Network.Subnet.Contains(net.ParseIP(st.IPs[0])) {
		t.Fatalf("pod IPs %v, want one address in %s", st.IPs, w.env.Network.Subnet)
	}
	cs := containerStatus(st, "httpd")
	if !strings.HasPrefix(cs.ID, "containerd://") || cs.RestartCount != 0 || cs.LogFormat != runtime.LogFormatCRI {
		t.Errorf("container status %+v: want a containerd:// ID, no restart, CRI logs", cs)
	}
	wantLog := filepath.Join(w.logs, "crit_web_"+string(pod.UID), "httpd", "0.log")
	if cs.LogPath != wantLog || cs.PreviousLogPath != "" {
		t.Errorf("log paths %q, %q; want %q and none", cs.LogPath, cs.PreviousLogPath, wantLog)
	}

	body := httpGet(t, "http://"+net.JoinHostPort(st.IPs[0], "8080")+"/")
	if body != "hi\n" {
		t.Errorf("GET from the pod = %q, want %q", body, "hi\n")
	}

	// httpd answers: the command wrote its file.
	if data, err := os.ReadFile(filepath.Join(w.volumes, string(pod.UID), "data", "out")); err != nil || string(data) != "hello\n" {
		t.Errorf("the container's file in its volume = %q, %v; want %q (the expanded command)", data, err, "hello\n")
	}

	data, err := os.ReadFile(cs.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	if m := criLogLine.FindStringSubmatch(first); m == nil || m[1] != "stdout" || m[2] != "F" || m[3] != "serving" {
		t.Errorf("log line %q: want a CRI line with stdout F serving", first)
	}

	stdout, _, code, err := r.ExecSync(ctx, pod.UID, "httpd", []string{"cat", "/etc/hostname"}, 10*time.Second)
	if err != nil || code != 0 || string(stdout) != "web\n" {
		t.Errorf("exec cat /etc/hostname = %q, %d, %v; want the pod's hostname", stdout, code, err)
	}
	_, _, code, err = r.ExecSync(ctx, pod.UID, "httpd", []string{"sh", "-c", "exit 3"}, 10*time.Second)
	if err != nil || code != 3 {
		t.Errorf("exec exit 3 = %d, %v; want 3", code, err)
	}
	stdout, _, _, err = r.ExecSync(ctx, pod.UID, "httpd", []string{"cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(stdout)) != fmt.Sprint(64<<20) {
		t.Errorf("memory limit in the container = %q, %v; want %d (the resource decision)", stdout, err, 64<<20)
	}
	w.memoryLimit.Store(96 << 20)
	defer w.memoryLimit.Store(64 << 20)
	if err := r.UpdateResources(ctx); err != nil {
		t.Fatal(err)
	}
	stdout, _, _, err = r.ExecSync(ctx, pod.UID, "httpd", []string{"cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}, 10*time.Second)
	if err != nil || strings.TrimSpace(string(stdout)) != fmt.Sprint(96<<20) {
		t.Errorf("memory limit after UpdateResources = %q, %v; want %d", stdout, err, 96<<20)
	}
	if _, _, _, err := r.ExecSync(ctx, pod.UID, "nope", []string{"true"}, time.Second); err == nil {
		t.Error("exec in a container the pod does not have: no error")
	}
	u, err := r.ExecURL(ctx, pod.UID, "httpd", []string{"sh"}, false, true, true, false)
	if err != nil || !strings.HasPrefix(u.String(), "http://127.0.0.1:") {
		t.Errorf("ExecURL = %v, %v; want the runtime's stream server", u, err)
	}
	if u, err := r.PortForwardURL(ctx, pod.UID, 8080); err != nil || u.Host == "" {
		t.Errorf("PortForwardURL = %v, %v", u, err)
	}
	for _, want := range []string{"Normal Created: Created container: httpd", "Normal Started: Started container httpd", "Normal Pulled: "} {
		if ev.count(want) == 0 {
			t.Errorf("no event %q in:\n%s", want, ev)
		}
	}

	host := newPod("host", corev1.RestartPolicyAlways, container("c", w.env.Image, "sleep", "inf"))
	host.Spec.HostNetwork = true
	if err := r.StartPod(ctx, host); err != nil {
		t.Fatal(err)
	}
	defer stopAndRemove(t, r, host.UID)
	st = waitFor(t, r, host.UID, "the host-network pod to run", running("c"))
	if len(st.IPs) != 0 {
		t.Errorf("host-network pod IPs %v, want none", st.IPs)
	}
	hostname, _ := os.Hostname()
	if stdout, _, _, err := r.ExecSync(ctx, host.UID, "c", []string{"hostname"}, 10*time.Second); err != nil || strings.TrimSpace(string(stdout)) != hostname {
		t.Errorf("hostname in a host-network pod = %q, %v; want the node's %q", stdout, err, hostname)
	}
}

// httpGet gets url until it answers, failing at waitTimeout.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get(url)
		if err == nil {
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil {
				return string(data)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		<-tick.C
	}
}

func (w *world) testRestarts(t *testing.T) {
	clk := newClock()
	ev := &events{}
	r := w.newRuntime(t, clk, ev)
	ctx := context.Background()
	crash := newPod("crash", corev1.RestartPolicyAlways, container("c", w.env.Image, "sh", "-c", "echo run; exit 1"))
	done := newPod("done", corev1.RestartPolicyNever, container("c", w.env.Image, "sh", "-c", "exit 0"))
	for _, p := range []*corev1.Pod{crash, done} {
		if err := r.StartPod(ctx, p); err != nil {
			t.Fatal(err)
		}
		defer stopAndRemove(t, r, p.UID)
	}

	// The first restart is immediate; the next waits 10 s on the clock.
	st := waitFor(t, r, crash.UID, "the first restart to crash", func(st runtime.PodStatus) bool {
		cs := containerStatus(st, "c")
		return cs.RestartCount == 1 && cs.State.Waiting != nil && cs.State.Waiting.Reason == runtime.ReasonCrashLoopBackOff
	})
	cs := containerStatus(st, "c")
	last := cs.LastTerminationState.Terminated
	if last == nil || last.ExitCode != 1 || last.Reason != runtime.ReasonError {
		t.Errorf("last termination %+v, want exit 1, Error", last)
	}
	if !strings.HasSuffix(cs.LogPath, "/c/1.log") || !strings.HasSuffix(cs.PreviousLogPath, "/c/0.log") {
		t.Errorf("log paths %q, %q; want c/1.log and c/0.log", cs.LogPath, cs.PreviousLogPath)
	}
	for _, p := range []string{cs.LogPath, cs.PreviousLogPath} {
		if data, err := os.ReadFile(p); err != nil || !strings.Contains(string(data), " stdout F run") {
			t.Errorf("log %s = %q, %v; want the run's output", p, data, err)
		}
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.PodStatus(crash.UID); containerStatus(st, "c").RestartCount != 1 {
		t.Fatalf("restarted before the back-off passed: %+v", containerStatus(st, "c"))
	}
	clk.Step(runtime.DefaultBackoffInitial)
	waitFor(t, r, crash.UID, "the second restart", func(st runtime.PodStatus) bool {
		return containerStatus(st, "c").RestartCount == 2
	})
	if ev.count("Warning BackOff: Back-off restarting failed container c in pod crash_crit(") == 0 {
		t.Errorf("no BackOff event in:\n%s", ev)
	}

	st = waitFor(t, r, done.UID, "the Never pod to complete", func(st runtime.PodStatus) bool {
		return containerStatus(st, "c").State.Terminated != nil
	})
	term := containerStatus(st, "c").State.Terminated
	if term.ExitCode != 0 || term.Reason != runtime.ReasonCompleted || containerStatus(st, "c").RestartCount != 0 {
		t.Errorf("completed container %+v, want exit 0, Completed, no restart", containerStatus(st, "c"))
	}
}

func (w *world) testImagePulls(t *testing.T) {
	clk := newClock()
	ev := &events{}
	r := w.newRuntime(t, clk, ev)
	ctx := context.Background()
	missing := w.env.Registry + "/knode/missing:1"
	pull := newPod("pull", corev1.RestartPolicyAlways, container("c", missing, "true"))
	pull.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	never := newPod("never", corev1.RestartPolicyAlways, container("c", missing, "true"))
	never.Spec.Containers[0].ImagePullPolicy = corev1.PullNever
	for _, p := range []*corev1.Pod{pull, never} {
		if err := r.StartPod(ctx, p); err != nil {
			t.Fatal(err)
		}
		defer stopAndRemove(t, r, p.UID)
	}

	st := waitFor(t, r, pull.UID, "ErrImagePull", waitingReason("c", cri.ReasonErrImagePull))
	if msg := containerStatus(st, "c").State.Waiting.Message; !strings.Contains(msg, "knode/missing") {
		t.Errorf("ErrImagePull message %q does not name the image", msg)
	}
	// At the same instant, the failure still shows; a moment later, the
	// back-off.
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.PodStatus(pull.UID); !waitingReason("c", cri.ReasonErrImagePull)(st) {
		t.Errorf("ErrImagePull did not last until the clock moved: %+v", containerStatus(st, "c").State)
	}
	clk.Step(time.Second)
	st = waitFor(t, r, pull.UID, "ImagePullBackOff", waitingReason("c", cri.ReasonImagePullBackOff))
	want := fmt.Sprintf("Back-off pulling image %q", missing)
	if msg := containerStatus(st, "c").State.Waiting.Message; msg != want {
		t.Errorf("ImagePullBackOff message %q, want %q", msg, want)
	}
	if n := ev.count("Normal Pulling: Pulling image"); n != 1 {
		t.Errorf("%d pulls before the back-off passed, want 1:\n%s", n, ev)
	}
	clk.Step(cri.ImageBackoffInitial - time.Second)
	waitFor(t, r, pull.UID, "a second pull", func(runtime.PodStatus) bool {
		return ev.count("Normal Pulling: Pulling image") == 2
	})
	waitFor(t, r, pull.UID, "ErrImagePull again", waitingReason("c", cri.ReasonErrImagePull))
	if ev.count(fmt.Sprintf("Warning Failed: Failed to pull image %q", missing)) != 2 {
		t.Errorf("want two Failed events:\n%s", ev)
	}

	st = waitFor(t, r, never.UID, "ErrImageNeverPull", waitingReason("c", cri.ReasonErrImageNeverPull))
	want = fmt.Sprintf("Container image %q is not present with pull policy of Never", missing)
	if msg := containerStatus(st, "c").State.Waiting.Message; msg != want {
		t.Errorf("ErrImageNeverPull message %q, want %q", msg, want)
	}
}

func (w *world) testAdoption(t *testing.T) {
	clk := newClock()
	ctx := context.Background()
	ev := &events{}
	r1 := w.newRuntime(t, clk, ev)
	pod := newPod("adopt", corev1.RestartPolicyAlways,
		container("sleeper", w.env.Image, "sleep", "inf"),
		container("crasher", w.env.Image, "sh", "-c", "exit 2"))
	finished := newPod("finished", corev1.RestartPolicyNever, container("c", w.env.Image, "true"))
	for _, p := range []*corev1.Pod{pod, finished} {
		if err := r1.StartPod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	before := waitFor(t, r1, pod.UID, "sleeper running, crasher in back-off", func(st runtime.PodStatus) bool {
		c := containerStatus(st, "crasher")
		return running("sleeper")(st) && c.RestartCount == 1 && c.State.Waiting != nil
	})
	finishedBefore := waitFor(t, r1, finished.UID, "the Never pod to finish", func(st runtime.PodStatus) bool {
		return containerStatus(st, "c").State.Terminated != nil
	})
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r1.StartPod(ctx, newPod("late", corev1.RestartPolicyNever, container("c", w.env.Image))); !errors.Is(err, cri.ErrClosed) {
		t.Errorf("StartPod after Close = %v, want ErrClosed", err)
	}

	r2 := w.newRuntime(t, clk, ev)
	defer stopAndRemove(t, r2, finished.UID)
	after, err := r2.PodStatus(pod.UID)
	if err != nil {
		t.Fatalf("the pod was not adopted: %v", err)
	}
	// An ended run's finish time is the one containerd recorded, not when
	// the first runtime saw the exit; the rest is as it was.
	if st, err := r2.PodStatus(finished.UID); err != nil {
		t.Errorf("the finished pod was not adopted: %v", err)
	} else {
		a, b := containerStatus(st, "c"), containerStatus(finishedBefore, "c")
		a.State.Terminated.FinishedAt = b.State.Terminated.FinishedAt
		if !reflect.DeepEqual(wallClock(a), wallClock(b)) {
			t.Errorf("adopted finished pod %+v; before %+v", a, b)
		}
	}
	same := func(when string, st runtime.PodStatus) {
		t.Helper()
		for _, name := range []string{"sleeper", "crasher"} {
			b, a := containerStatus(before, name), containerStatus(st, name)
			if a.ID != b.ID || a.RestartCount != b.RestartCount || a.LogPath != b.LogPath {
				t.Errorf("%s, %s: ID %q restarts %d log %q; before %q, %d, %q", when, name, a.ID, a.RestartCount, a.LogPath, b.ID, b.RestartCount, b.LogPath)
			}
		}
		b, a := containerStatus(before, "sleeper").State.Running, containerStatus(st, "sleeper").State.Running
		if a == nil || !a.StartedAt.Equal(&b.StartedAt) {
			t.Errorf("%s: sleeper %+v, want running since %v", when, a, b.StartedAt)
		}
		if w := containerStatus(st, "crasher").State.Waiting; w == nil || w.Reason != runtime.ReasonCrashLoopBackOff {
			t.Errorf("%s: crasher %+v, want waiting in CrashLoopBackOff", when, containerStatus(st, "crasher").State)
		}
		if !slices.Equal(st.IPs, before.IPs) {
			t.Errorf("%s: IPs %v, before %v", when, st.IPs, before.IPs)
		}
	}
	same("adopted", after)
	for range 3 {
		if err := r2.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := r2.PodStatus(pod.UID)
	same("after syncs", st)

	// A kill ends the run with the reason given; the restart is immediate
	// (its first).
	if err := r2.KillContainer(ctx, pod.UID, "sleeper", 0, "Unhealthy", "liveness probe failed"); err != nil {
		t.Fatal(err)
	}
	st = waitFor(t, r2, pod.UID, "the killed sleeper to restart", func(st runtime.PodStatus) bool {
		c := containerStatus(st, "sleeper")
		return c.RestartCount == 1 && c.State.Running != nil
	})
	last := containerStatus(st, "sleeper").LastTerminationState.Terminated
	if last == nil || last.Reason != "Unhealthy" || last.Message != "liveness probe failed" || last.ExitCode != 137 {
		t.Errorf("killed run %+v, want Unhealthy, the message, exit 137", last)
	}
	if err := r2.KillContainer(ctx, pod.UID, "nope", 0, "x", "y"); err == nil {
		t.Error("KillContainer of a container the pod does not have: no error")
	}

	// sleep, as PID 1, ignores SIGTERM: it is killed when the grace has
	// passed on the clock.
	if err := r2.StopPod(ctx, pod.UID, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if st, _ := r2.PodStatus(pod.UID); !st.Stopping || !running("sleeper")(st) {
		t.Fatalf("stopping pod %+v: want the sleeper still running within its grace", st)
	}
	clk.Step(time.Minute)
	waitFor(t, r2, pod.UID, "the pod to stop at its deadline", runtime.PodStatus.Stopped)
	if err := r2.RemovePod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if ev.count("Normal Killing: Stopping container sleeper") == 0 {
		t.Errorf("no Killing event:\n%s", ev)
	}
}

func (w *world) testVersionAndImages(t *testing.T) {
	clk := newClock()
	r := w.newRuntime(t, clk, &events{})
	ctx := context.Background()
	v, err := r.Version(ctx)
	if err != nil || !regexp.MustCompile(`^containerd://\d+\.\d+\.\d+`).MatchString(v) {
		t.Errorf("Version = %q, %v; want containerd://X.Y.Z", v, err)
	}
	images, err := r.Images(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(images, func(img corev1.ContainerImage) bool {
		return slices.Contains(img.Names, w.env.Image) && img.SizeBytes > 0
	}) {
		t.Errorf("Images = %+v, want %s with its size", images, w.env.Image)
	}
}

func (w *world) testNothingLeft(t *testing.T) {
	ctx := context.Background()
	client := w.criClient(t)
	sandboxes, err := client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	containers, err := client.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sandboxes.Items) != 0 || len(containers.Containers) != 0 {
		t.Errorf("left in containerd: %d sandboxes, %d containers", len(sandboxes.Items), len(containers.Containers))
	}
	entries, err := os.ReadDir(w.logs)
	if err != nil || len(entries) != 0 {
		t.Errorf("left in the pod logs directory: %v, %v", entries, err)
	}
}
