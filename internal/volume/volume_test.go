package volume

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestAttachmentName(t *testing.T) {
	// sha256sum of the three strings joined, computed outside Go.
	const want = "csi-59e9999ac7f92968c74bb9bedc0e1d473845c286b599f46c8c10fc5cfad80089"
	if got := AttachmentName("vol-1", BuiltinDriver, "node-a"); got != want {
		t.Fatalf("AttachmentName = %s, want %s", got, want)
	}
}

func TestUniqueNameRoundTrip(t *testing.T) {
	n := UniqueName(BuiltinDriver, "pvc-1^x")
	if n != "kubernetes.io/csi/hostpath.csi.knode.io^pvc-1^x" {
		t.Fatalf("UniqueName = %s", n)
	}
	d, h, ok := ParseUniqueName(n)
	if !ok || d != BuiltinDriver || h != "pvc-1^x" {
		t.Fatalf("ParseUniqueName = %q %q %v", d, h, ok)
	}
	for _, bad := range []corev1.UniqueVolumeName{"kubernetes.io/empty-dir/x", "kubernetes.io/csi/^h", "kubernetes.io/csi/d^", "kubernetes.io/csi/d"} {
		if _, _, ok := ParseUniqueName(bad); ok {
			t.Errorf("ParseUniqueName(%q) ok", bad)
		}
	}
}

func TestAttacherFinalizer(t *testing.T) {
	for driver, want := range map[string]string{
		BuiltinDriver:       "external-attacher/hostpath-csi-knode-io",
		"example.com/disk/": "external-attacher/example-com-disk-X",
	} {
		if got := AttacherFinalizer(driver); got != want {
			t.Errorf("AttacherFinalizer(%q) = %q, want %q", driver, got, want)
		}
	}
}

func TestPaths(t *testing.T) {
	if got := PublishPath("/var/lib/knode", "uid-1", "pv-1"); got != "/var/lib/knode/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount" {
		t.Errorf("PublishPath = %s", got)
	}
	// sha256("vol-1") = 2f2e...; only the shape is checked here.
	got := StagingPath("/r", BuiltinDriver, "vol-1")
	if len(got) != len("/r/plugins/kubernetes.io/csi/hostpath.csi.knode.io/")+64+len("/globalmount") {
		t.Errorf("StagingPath = %s", got)
	}
}

func TestPodClaims(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c1"}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "c", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c1"}}},
		{Name: "d", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c2"}}},
	}}}
	got := PodClaims(pod)
	if len(got) != 2 || got[0] != "c1" || got[1] != "c2" {
		t.Fatalf("PodClaims = %v", got)
	}
}
