//go:build linux

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/runtime"
)

// TestVolumeMountsInOwnNamespace: with Config.Volumes set, a container
// sees its volumes at their mountPaths (subPath included), writes land in
// the volume on the host, and the host never gets the mount points.
func TestVolumeMountsInOwnNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	vols := map[string]string{"data": t.TempDir(), "conf": t.TempDir()}
	if err := os.WriteFile(filepath.Join(vols["conf"], "greeting"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r, err := New(Config{RootDir: root, Clock: testingclock.NewFakeClock(t0),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Volumes: func(pod *corev1.Pod, name string) (string, error) {
			if p, ok := vols[name]; ok {
				return p, nil
			}
			return "", errors.New("no such volume")
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killAndSettle(t, r) })
	top := fmt.Sprintf("/knode-volume-test-%d", os.Getpid())
	pod := shPod("u1", corev1.RestartPolicyNever, "cat "+top+"/conf/greeting > "+top+"/data/copy && echo done > "+top+"/sub/file && pwd")
	pod.Spec.Containers[0].WorkingDir = top + "/data"
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "conf", MountPath: top + "/conf", ReadOnly: true},
		{Name: "data", MountPath: top + "/data"},
		{Name: "data", MountPath: top + "/sub", SubPath: "nested/dir"},
	}
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "exit", terminated)
	log, _ := os.ReadFile(c.LogPath)
	if c.State.Terminated.ExitCode != 0 {
		t.Fatalf("container failed: %+v\n%s", c.State.Terminated, log)
	}
	if got := strings.TrimSpace(string(log)); got != top+"/data" {
		t.Errorf("working directory = %q, want the volume's mountPath", got)
	}
	if got, _ := os.ReadFile(filepath.Join(vols["data"], "copy")); string(got) != "hello" {
		t.Errorf("volume data/copy = %q, want what the container copied from conf", got)
	}
	if got, _ := os.ReadFile(filepath.Join(vols["data"], "nested", "dir", "file")); string(got) != "done\n" {
		t.Errorf("subPath file = %q", got)
	}
	if _, err := os.Lstat(top); !os.IsNotExist(err) {
		t.Errorf("the host has %s (%v)", top, err)
	}
}

// TestVolumeLookupFailureIsAStartError: a volume the agent cannot resolve
// fails the start, naming the volume.
func TestVolumeLookupFailureIsAStartError(t *testing.T) {
	r, err := New(Config{RootDir: t.TempDir(), Clock: testingclock.NewFakeClock(t0),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Volumes: func(*corev1.Pod, string) (string, error) { return "", errors.New("not mounted yet") }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killAndSettle(t, r) })
	pod := shPod("u1", corev1.RestartPolicyNever, "true")
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if err := r.StartPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	c := waitFor(t, r, pod.UID, "start error", func(c runtime.ContainerStatus) bool {
		return c.State.Terminated != nil || (c.State.Waiting != nil && c.LastTerminationState.Terminated != nil)
	})
	term := c.State.Terminated
	if term == nil {
		term = c.LastTerminationState.Terminated
	}
	if term.Reason != runtime.ReasonStartError || !strings.Contains(term.Message, `volume "data": not mounted yet`) {
		t.Errorf("terminated = %+v, want StartError naming the volume", term)
	}
}

// TestRemovePodKeepsVolumes: RemovePod leaves the volumes directory, which
// the volume manager owns, and everything mounted in it.
func TestRemovePodKeepsVolumes(t *testing.T) {
	r := newRuntime(t, testingclock.NewFakeClock(t0), "")
	pod := shPod("u1", corev1.RestartPolicyNever, "true")
	ctx := context.Background()
	if err := r.StartPod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, pod.UID, "exit", terminated)
	keep := filepath.Join(r.podsDir, "u1", "volumes", "kubernetes.io~empty-dir", "cache", "f")
	if err := os.MkdirAll(filepath.Dir(keep), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.StopPod(ctx, pod.UID, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.RemovePod(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("RemovePod removed the volumes directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(r.podsDir, "u1", "main")); !os.IsNotExist(err) {
		t.Errorf("RemovePod left the container's directory: %v", err)
	}
}
