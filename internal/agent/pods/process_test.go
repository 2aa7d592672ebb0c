//go:build linux

package pods_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/agent/pods"
	"knode/internal/agent/runtime/process"
	"knode/internal/agent/server"
)

// TestProcessPodLifecycle runs a real process through the worker: it
// starts, reports Running with the node's IP in its environment, and on
// deletion gets SIGTERM, after which the worker finishes the deletion.
func TestProcessPodLifecycle(t *testing.T) {
	c := newCluster(t, roomy)
	root := t.TempDir()
	rt, err := process.New(process.Config{RootDir: root, Clock: c.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.KillAll)
	// A worker acting as the node on the process runtime.
	w, err := pods.New(pods.Config{Client: c.nodeClient, NodeName: nodeName, Runtime: rt, Clock: c.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ready, out := filepath.Join(dir, "ready"), filepath.Join(dir, "out")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	p := pod("web", corev1.RestartPolicyAlways, "ignored")
	p.Spec.Containers[0].Command = []string{"sh", "-c", `trap "echo got TERM >> ` + out + `; exit 0" TERM; echo "ip=$MY_IP" > ` + out + `; sleep 100 & echo > ` + ready + `; wait`}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MY_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	created := c.create(p)
	// until runs Sync on every runtime change until done holds.
	until := func(what string, done func() bool) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			if err := w.Sync(c.ctx); err != nil {
				t.Fatal(err)
			}
			if done() {
				return
			}
			select {
			case <-rt.Changes():
			case <-timeout:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	if err := w.Sync(c.ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.get("web").Status.Phase; got != corev1.PodRunning {
		t.Fatalf("phase = %s, want Running", got)
	}
	// The trap must be set before the delete: wait for the container to
	// say it is ready (opening the pipe blocks until it writes).
	opened := make(chan error, 1)
	go func() {
		f, err := os.Open(ready)
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the container never became ready")
	}
	if err := c.admin.CoreV1().Pods("default").Delete(c.ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	until("the pod to be deleted", func() bool {
		_, err := c.admin.CoreV1().Pods("default").Get(c.ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := rt.PodStatus(created.UID); err == nil {
		t.Errorf("runtime still holds the pod")
	}
	data, _ := os.ReadFile(out)
	if want := "ip=" + nodeIP + "\ngot TERM\n"; string(data) != want {
		t.Errorf("container wrote %q, want %q", data, want)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", string(created.UID))); !os.IsNotExist(err) {
		t.Errorf("pod directory kept after deletion: %v", err)
	}
}

// listPods is a PodLister that lists from the server.
type listPods struct{ c *cluster }

func (l listPods) PodsOn(node string) ([]*corev1.Pod, bool) {
	list, err := l.c.admin.CoreV1().Pods("").List(l.c.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, false
	}
	var out []*corev1.Pod
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == node {
			out = append(out, &list.Items[i])
		}
	}
	return out, true
}

// TestContainerLog: the worker finds a process container's log file, and
// its errors carry the kubelet's messages.
func TestContainerLog(t *testing.T) {
	c := newCluster(t, roomy)
	rt, err := process.New(process.Config{RootDir: t.TempDir(), Clock: c.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.KillAll)
	w, err := pods.New(pods.Config{Client: c.nodeClient, NodeName: nodeName, Runtime: rt, Clock: c.clk, Pods: listPods{c}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The container says hello in its log, then on the fifo, so that once
	// the fifo is read the log holds it.
	ready := filepath.Join(t.TempDir(), "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	p := pod("web", corev1.RestartPolicyAlways, "ignored")
	p.Spec.Containers[0].Command = []string{"sh", "-c", "echo hello; echo > " + ready + "; exec sleep 100"}
	c.create(p)
	if err := w.Sync(c.ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Pods(); len(got) != 1 || got[0].Name != "web" {
		t.Errorf("Pods() = %v, want web", got)
	}
	file, err := w.ContainerLog("default", "web", "a", false)
	if err != nil {
		t.Fatal(err)
	}
	path, live := file.Path, file.Live
	if file.CRI {
		t.Error("the process runtime's log is taken for a CRI log")
	}
	if !live() {
		t.Error("the running container's log is not live")
	}
	said := make(chan error, 1)
	go func() {
		f, err := os.Open(ready)
		if err == nil {
			_, err = io.ReadAll(f)
			f.Close()
		}
		said <- err
	}()
	select {
	case err := <-said:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the container never said hello")
	}
	if data, _ := os.ReadFile(path); string(data) != "hello\n" {
		t.Errorf("log %s holds %q, want hello", path, data)
	}
	for _, tc := range []struct {
		pod, container string
		previous       bool
		want           error
		msg            string
	}{
		{"db", "a", false, server.ErrLogNotFound, `pod "db" does not exist`},
		{"web", "b", false, server.ErrLogNotFound, `container "b" not found in pod "web"`},
		{"web", "a", true, server.ErrLogUnavailable, `previous terminated container "a" in pod "web" not found`},
	} {
		_, err := w.ContainerLog("default", tc.pod, tc.container, tc.previous)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ContainerLog(%s, %s, previous %v) = %v, want %v with %q", tc.pod, tc.container, tc.previous, err, tc.want, tc.msg)
		}
	}
}
