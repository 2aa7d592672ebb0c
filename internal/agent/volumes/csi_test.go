package volumes_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/volume"
)

func TestCSIVolumeLifecycle(t *testing.T) {
	w := newWorld(t)
	w.startDriver()
	handle, publishContext := w.csiVolume("pv1", "written before")
	unique := volume.UniqueName(volume.BuiltinDriver, handle)
	p1 := w.pod("p1", claimVolume("data", "pv1"))
	target1 := volume.PublishPath(w.root, p1.UID, "pv1")
	staging := volume.StagingPath(w.root, volume.BuiltinDriver, handle)

	// Listed in use at once. Until the node reported it in use, nothing
	// is looked at or mounted, not even a failed attachment.
	w.setup(w.m, p1, false, "")
	wantInUse(t, w.m, unique)
	if n := w.takeKicks(); n != 1 {
		t.Errorf("InUseChanged was called %d times when the volume came into use, want 1", n)
	}
	va := w.setAttachStatus(w.attach("pv1", handle), storagev1.VolumeAttachmentStatus{AttachError: &storagev1.VolumeError{Message: "attach boom"}})
	w.setup(w.m, p1, false, "")
	if exists(staging) || exists(filepath.Dir(target1)) {
		t.Fatal("something was made before the volume was reported in use")
	}
	if got := w.takeEvents(); len(got) != 0 {
		t.Errorf("events before the report: %v", got)
	}
	w.m.ReportedInUse(w.m.InUse())

	// Reported: the attach error is a FailedMount, then the back-off holds.
	wantErr := `MountVolume.WaitForAttach failed for volume "pv1" : attach boom`
	w.setup(w.m, p1, false, wantErr)
	if diff := cmp.Diff([]event{{Pod: "p1", Type: "Warning", Reason: "FailedMount", Message: wantErr}}, w.takeEvents()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	w.setAttachStatus(va, storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: publishContext})
	w.clk.Step(499 * time.Millisecond)
	w.setup(w.m, p1, false, wantErr)
	if got := w.takeEvents(); len(got) != 0 {
		t.Errorf("a retry inside the back-off recorded %v", got)
	}
	w.clk.Step(time.Millisecond)
	w.setup(w.m, p1, true, "")

	// Staged once, published at the pod's target, which shows the volume.
	path, err := w.m.HostPath(p1, "data")
	if err != nil || path != target1 {
		t.Fatalf("HostPath = %q, %v; want %q", path, err, target1)
	}
	if !w.mounted(staging) || !w.mounted(target1) {
		t.Fatalf("mounted: staging %v, target %v; want both", w.mounted(staging), w.mounted(target1))
	}
	if got := readFile(t, filepath.Join(target1, "hello")); got != "written before" {
		t.Errorf("the target shows %q, want what was written to the volume", got)
	}
	if err := os.WriteFile(filepath.Join(target1, "from-p1"), []byte("p1 was here"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(w.data, "volumes", handle, "from-p1")); got != "p1 was here" {
		t.Errorf("the volume has %q, want what the pod wrote", got)
	}
	wantVolData(t, filepath.Dir(target1), map[string]string{
		"specVolID": "pv1", "volumeHandle": handle, "driverName": volume.BuiltinDriver, "nodeName": nodeName,
		"attachmentID": volume.AttachmentName(handle, volume.BuiltinDriver, nodeName), "volumeLifecycleMode": "Persistent",
	})
	wantVolData(t, filepath.Dir(staging), map[string]string{"volumeHandle": handle, "driverName": volume.BuiltinDriver})
	w.setup(w.m, p1, true, "")

	// A second pod of the node shares the staged volume; it names the
	// claim twice, and both names are the one target.
	p2 := w.pod("p2", claimVolume("shared", "pv1"), claimVolume("again", "pv1"))
	target2 := volume.PublishPath(w.root, p2.UID, "pv1")
	w.setup(w.m, p2, true, "")
	for _, name := range []string{"shared", "again"} {
		if got, err := w.m.HostPath(p2, name); err != nil || got != target2 {
			t.Errorf("HostPath(p2, %s) = %q, %v; want %q", name, got, err, target2)
		}
	}
	if got := readFile(t, filepath.Join(target2, "from-p1")); got != "p1 was here" {
		t.Errorf("p2 sees %q", got)
	}
	if n := len(mountsUnder(t, staging)); n != 1 {
		t.Errorf("%d mounts at the staging path, want 1", n)
	}

	// Teardown of p1 unpublishes its target only.
	if err := w.teardown(w.m, p1, true); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Dir(target1)) || !w.mounted(staging) || !w.mounted(target2) {
		t.Errorf("after p1's teardown: p1's dir exists %v, staged %v, p2 published %v; want false, true, true",
			exists(filepath.Dir(target1)), w.mounted(staging), w.mounted(target2))
	}
	if _, err := w.m.HostPath(p1, "data"); err == nil {
		t.Error("HostPath of a torn-down pod answered")
	}
	wantInUse(t, w.m, unique)
	if n := w.takeKicks(); n != 0 {
		t.Errorf("InUseChanged was called %d times while the volume stayed in use", n)
	}

	// The last user's teardown unpublishes, unstages, and only then drops
	// the volume from InUse.
	if err := w.teardown(w.m, p2, true); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Dir(staging)) || exists(filepath.Join(w.root, "pods", string(p2.UID))) {
		t.Errorf("left behind: staging dir %v, pod dir %v", exists(filepath.Dir(staging)), exists(filepath.Join(w.root, "pods", string(p2.UID))))
	}
	if m := mountsUnder(t, w.root); len(m) != 0 {
		t.Errorf("still mounted: %v", m)
	}
	wantInUse(t, w.m)
	if n := w.takeKicks(); n != 1 {
		t.Errorf("InUseChanged was called %d times when the volume left, want 1", n)
	}
	if got := readFile(t, filepath.Join(w.data, "volumes", handle, "from-p1")); got != "p1 was here" {
		t.Errorf("after teardown the volume has %q", got)
	}
	if err := w.teardown(w.m, p2, true); err != nil {
		t.Errorf("a second Teardown: %v", err)
	}
	if got := w.takeEvents(); len(got) != 0 {
		t.Errorf("events: %v", got)
	}
}

func wantVolData(t *testing.T, dir string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "vol_data.json"))), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s/vol_data.json (-want +got):\n%s", dir, diff)
	}
}

func TestCSIDriverWithoutAttachment(t *testing.T) {
	w := newWorld(t)
	w.startDriver()
	if _, err := w.admin.StorageV1().CSIDrivers().Create(w.ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: volume.BuiltinDriver},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.csiVolume("pv1", "no attach")
	p := w.pod("p", claimVolume("data", "pv1"))
	w.setup(w.m, p, false, "")
	w.m.ReportedInUse(w.m.InUse())
	w.setup(w.m, p, true, "")
	path, err := w.m.HostPath(p, "data")
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(path, "hello")); got != "no attach" {
		t.Errorf("target shows %q", got)
	}
	if err := w.teardown(w.m, p, true); err != nil {
		t.Fatal(err)
	}
}

func TestCSIFailures(t *testing.T) {
	w := newWorld(t)
	p := w.pod("p", claimVolume("data", "pv1"))

	// A claim that is missing, then not bound.
	w.setup(w.m, p, false, `error processing PVC default/pv1: failed to fetch PVC from API server: persistentvolumeclaims "pv1" not found`)
	w.claim("pv1", "", []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce})
	w.setup(w.m, p, false, "error processing PVC default/pv1: PVC is not bound")
	wantInUse(t, w.m)
	if got := w.takeEvents(); len(got) != 0 {
		t.Errorf("processing errors recorded events: %v", got)
	}

	// A bound claim of a driver that is not registered.
	w.startDriver()
	handle, pc := w.csiVolume("pv2", "x")
	w.plugins.Close()
	p2 := w.pod("p2", claimVolume("data", "pv2"))
	w.setup(w.m, p2, false, "")
	w.m.ReportedInUse(w.m.InUse())
	// Reported, but no attachment (which the node may not even read), then
	// one not attached yet: waiting, no error.
	w.setup(w.m, p2, false, "")
	va2 := w.attach("pv2", handle)
	w.setup(w.m, p2, false, "")
	w.setAttachStatus(va2, storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: pc})
	wantErr := `MountVolume.MountDevice failed for volume "pv2" : kubernetes.io/csi: attacher.MountDevice failed to create newCsiDriverClient: driver name hostpath.csi.knode.io not found in the list of registered CSI drivers`
	w.setup(w.m, p2, false, wantErr)
	if diff := cmp.Diff([]event{{Pod: "p2", Type: "Warning", Reason: "FailedMount", Message: wantErr}}, w.takeEvents()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Registered again, it mounts after the back-off.
	if err := w.plugins.Sync(w.ctx); err != nil {
		t.Fatal(err)
	}
	w.clk.Step(500 * time.Millisecond)
	w.setup(w.m, p2, true, "")

	// An attachment being deleted is an error, as upstream.
	p3 := w.pod("p3", claimVolume("data", "pv3"))
	handle3, pc3 := w.csiVolume("pv3", "x")
	va := w.attach("pv3", handle3)
	va.Finalizers = []string{"test/hold"}
	va, err := w.admin.StorageV1().VolumeAttachments().Update(w.ctx, va, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.setAttachStatus(va, storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: pc3})
	if err := w.admin.StorageV1().VolumeAttachments().Delete(w.ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.setup(w.m, p3, false, "")
	w.m.ReportedInUse(w.m.InUse())
	w.setup(w.m, p3, false, `MountVolume.WaitForAttach failed for volume "pv3" : volume attachment is being deleted`)

	if err := w.teardown(w.m, p2, true); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []*corev1.Pod{p, p3} {
		if err := w.teardown(w.m, pod, true); err != nil {
			t.Fatal(err)
		}
	}
	wantInUse(t, w.m)
	if m := mountsUnder(t, w.root); len(m) != 0 {
		t.Errorf("still mounted: %v", m)
	}
}

func TestReadWriteOncePod(t *testing.T) {
	w := newWorld(t)
	w.startDriver()
	handle, pc := w.csiVolume("pv1", "x", corev1.ReadWriteOncePod)
	w.setAttachStatus(w.attach("pv1", handle), storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: pc})
	p1 := w.pod("p1", claimVolume("data", "pv1"))
	p2 := w.pod("p2", claimVolume("data", "pv1"))
	w.setup(w.m, p1, false, "")
	w.m.ReportedInUse(w.m.InUse())
	w.setup(w.m, p1, true, "")
	w.setup(w.m, p2, false, `MountVolume.SetUp failed for volume "pv1" : volume uses the ReadWriteOncePod access mode and is already in use by another pod`)
	if err := w.teardown(w.m, p1, true); err != nil {
		t.Fatal(err)
	}
	w.clk.Step(time.Second)
	w.setup(w.m, p2, true, "")
	if err := w.teardown(w.m, p2, true); err != nil {
		t.Fatal(err)
	}
}

func TestRestartRecovery(t *testing.T) {
	w := newWorld(t)
	w.startDriver()
	handle, pc := w.csiVolume("pv1", "kept")
	unique := volume.UniqueName(volume.BuiltinDriver, handle)
	w.setAttachStatus(w.attach("pv1", handle), storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: pc})
	p := w.pod("p", claimVolume("data", "pv1"), emptyDir("scratch", ""))
	gone := w.pod("gone", claimVolume("data", "pv1"))
	w.setup(w.m, p, false, "")
	w.m.ReportedInUse(w.m.InUse())
	w.setup(w.m, p, true, "")
	w.setup(w.m, gone, true, "")
	scratch, err := w.m.HostPath(p, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	target := volume.PublishPath(w.root, p.UID, "pv1")

	// The agent restarts: a new manager and a new plugin watcher, which
	// has not registered the driver yet.
	w.plugins.Close()
	m := w.newManager()
	wantInUse(t, m, unique)
	wantPods := []types.UID{gone.UID, p.UID}
	if diff := cmp.Diff(sorted(wantPods), sorted(m.Pods())); diff != "" {
		t.Errorf("Pods (-want +got):\n%s", diff)
	}

	// Setup of the running pod again is ready at once: nothing to report,
	// attach or call.
	w.setup(m, p, true, "")
	if got, err := m.HostPath(p, "scratch"); err != nil || got != scratch {
		t.Errorf("restored emptyDir HostPath = %q, %v; want %q", got, err, scratch)
	}
	if got, err := m.HostPath(p, "data"); err != nil || got != target {
		t.Errorf("HostPath after restart = %q, %v", got, err)
	}

	// The pod gone from the API is cleaned up once the driver is back.
	err = m.Cleanup(w.ctx, func(uid types.UID) bool { return uid == p.UID })
	if err == nil {
		t.Error("Cleanup succeeded without the driver")
	}
	if err := w.plugins.Sync(w.ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Cleanup(w.ctx, func(uid types.UID) bool { return uid == p.UID }); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(w.root, "pods", string(gone.UID))) {
		t.Error("the gone pod's directory is still there")
	}
	if !w.mounted(target) {
		t.Error("Cleanup took the kept pod's volume down")
	}

	// Teardown of the restored pod takes everything down.
	if err := w.teardown(m, p, true); err != nil {
		t.Fatal(err)
	}
	if mounts := mountsUnder(t, w.root); len(mounts) != 0 {
		t.Errorf("still mounted: %v", mounts)
	}
	if exists(scratch) {
		t.Error("the emptyDir is still there")
	}
	wantInUse(t, m)
	if got := readFile(t, filepath.Join(w.data, "volumes", handle, "hello")); got != "kept" {
		t.Errorf("the volume's content is %q after all this", got)
	}
}

func TestRestartWithAStagedVolumeAndNoPod(t *testing.T) {
	w := newWorld(t)
	w.startDriver()
	handle, pc := w.csiVolume("pv1", "x")
	w.setAttachStatus(w.attach("pv1", handle), storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: pc})
	p := w.pod("p", claimVolume("data", "pv1"))
	w.setup(w.m, p, false, "")
	w.m.ReportedInUse(w.m.InUse())
	w.setup(w.m, p, true, "")
	staging := volume.StagingPath(w.root, volume.BuiltinDriver, handle)
	// The pod's publish is gone (say, unpublished just before a crash),
	// the staging is not.
	target := volume.PublishPath(w.root, p.UID, "pv1")
	if err := unmountForTest(target); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(w.root, "pods")); err != nil {
		t.Fatal(err)
	}
	m := w.newManager()
	wantInUse(t, m, volume.UniqueName(volume.BuiltinDriver, handle))
	if len(m.Pods()) != 0 {
		t.Errorf("Pods = %v", m.Pods())
	}
	if err := m.Cleanup(w.ctx, func(types.UID) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if w.mounted(staging) || exists(filepath.Dir(staging)) {
		t.Error("the orphaned staging is still there")
	}
	wantInUse(t, m)
}

func sorted(uids []types.UID) []types.UID {
	out := slices.Clone(uids)
	slices.Sort(out)
	return out
}
