package volumes_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/volumes"
	"knode/internal/volume"
)

func emptyDir(name string, medium corev1.StorageMedium) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}
}

func hostPathVolume(name, path string, typ corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

func unmountForTest(path string) error { return unix.Unmount(path, 0) }

func TestEmptyDirAndHostPath(t *testing.T) {
	w := newWorld(t)
	hostDir := filepath.Join(w.root, "host", "made")
	hostFile := filepath.Join(w.root, "host", "file")
	mem := emptyDir("mem", corev1.StorageMediumMemory)
	mem.EmptyDir.SizeLimit = resource.NewQuantity(1<<20, resource.BinarySI)
	p := w.pod("p",
		emptyDir("scratch", ""),
		mem,
		hostPathVolume("dir", hostDir, corev1.HostPathDirectoryOrCreate),
		hostPathVolume("file", hostFile, corev1.HostPathFile),
	)
	scratch := volume.PodVolumeDir(w.root, p.UID, "kubernetes.io~empty-dir", "scratch")
	memDir := volume.PodVolumeDir(w.root, p.UID, "kubernetes.io~empty-dir", "mem")

	// The missing file fails the pod's setup, with upstream's event.
	wantErr := `MountVolume.SetUp failed for volume "file" : hostPath ` + hostFile + ` doesn't exist`
	w.setup(w.m, p, false, wantErr)
	if diff := cmp.Diff([]event{{Pod: "p", Type: "Warning", Reason: "FailedMount", Message: wantErr}}, w.takeEvents()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if _, err := w.m.HostPath(p, "file"); !errors.Is(err, volumes.ErrNotSetUp) {
		t.Errorf("HostPath of the failed volume: err = %v, want ErrNotSetUp", err)
	}
	if err := os.WriteFile(hostFile, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.setup(w.m, p, false, wantErr)
	w.clk.Step(500 * time.Millisecond)
	w.setup(w.m, p, true, "")
	if got := w.takeEvents(); len(got) != 0 {
		t.Errorf("events: %v", got)
	}

	for name, want := range map[string]string{"scratch": scratch, "mem": memDir, "dir": hostDir, "file": hostFile} {
		if got, err := w.m.HostPath(p, name); err != nil || got != want {
			t.Errorf("HostPath(%s) = %q, %v; want %q", name, got, err, want)
		}
	}
	if info, err := os.Stat(scratch); err != nil || info.Mode().Perm() != 0o777 || !info.IsDir() {
		t.Errorf("emptyDir: %v, %v; want a directory with mode 0777", info, err)
	}
	if info, err := os.Stat(hostDir); err != nil || !info.IsDir() {
		t.Errorf("DirectoryOrCreate did not create %s: %v", hostDir, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(memDir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*int64(st.Bsize) != 1<<20 {
		t.Errorf("medium Memory: filesystem type %#x of %d bytes; want a tmpfs of 1Mi", st.Type, int64(st.Blocks)*int64(st.Bsize))
	}
	if got := w.m.InUse(); len(got) != 0 {
		t.Errorf("InUse = %v, want none for local volumes", got)
	}

	if err := w.teardown(w.m, p, true); err != nil {
		t.Fatal(err)
	}
	if w.mounted(memDir) || exists(scratch) || exists(memDir) || exists(filepath.Join(w.root, "pods", string(p.UID))) {
		t.Errorf("after teardown: tmpfs %v, scratch %v, mem %v, pod dir %v; want all gone",
			w.mounted(memDir), exists(scratch), exists(memDir), exists(filepath.Join(w.root, "pods", string(p.UID))))
	}
	if got := readFile(t, hostFile); got != "host" || !exists(hostDir) {
		t.Errorf("teardown touched the host paths")
	}
}

func TestEmptyDirAfterRestart(t *testing.T) {
	w := newWorld(t)
	p := w.pod("p", emptyDir("mem", corev1.StorageMediumMemory), emptyDir("disk", ""))
	w.setup(w.m, p, true, "")
	disk, _ := w.m.HostPath(p, "disk")
	if err := os.WriteFile(filepath.Join(disk, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	mem, _ := w.m.HostPath(p, "mem")

	m := w.newManager()
	w.setup(m, p, true, "")
	if got := readFile(t, filepath.Join(disk, "f")); got != "x" {
		t.Errorf("Setup after a restart lost the emptyDir's content: %q", got)
	}
	if n := len(mountsUnder(t, mem)); n != 1 {
		t.Errorf("%d mounts at the memory emptyDir after a second Setup, want 1", n)
	}
	if err := w.teardown(m, p, true); err != nil {
		t.Fatal(err)
	}
	if exists(mem) || exists(disk) {
		t.Error("teardown after a restart left the emptyDirs")
	}
}

func TestUnsupportedVolumes(t *testing.T) {
	w := newWorld(t)
	p := w.pod("p",
		corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}},
		emptyDir("huge", corev1.StorageMediumHugePages),
	)
	w.setup(w.m, p, false, `failed to get Plugin from volumeSpec for volume "cm" err=no volume plugin matched
MountVolume.SetUp failed for volume "huge" : emptyDir medium "HugePages" is not supported`)
	if err := w.teardown(w.m, p, true); err != nil {
		t.Fatal(err)
	}
}
