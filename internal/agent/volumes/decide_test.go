package volumes

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAccessMode(t *testing.T) {
	tests := []struct {
		modes []corev1.PersistentVolumeAccessMode
		snmw  bool
		want  csi.VolumeCapability_AccessMode_Mode
	}{
		{nil, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{nil, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteOnce}, false, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, false, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{[]corev1.PersistentVolumeAccessMode{"Bogus"}, false, csi.VolumeCapability_AccessMode_UNKNOWN},
	}
	for _, tt := range tests {
		if got := accessMode(tt.modes, tt.snmw); got != tt.want {
			t.Errorf("accessMode(%v, singleNodeMultiWriter=%v) = %v, want %v", tt.modes, tt.snmw, got, tt.want)
		}
	}
}

func csiPV(readOnly bool) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:  []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			MountOptions: []string{"noatime"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "d", VolumeHandle: "h1", FSType: "ext4", ReadOnly: readOnly,
				VolumeAttributes: map[string]string{"k": "v"},
			}},
		},
	}
}

func TestPublishRequest(t *testing.T) {
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime"}}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}, Spec: corev1.PodSpec{ServiceAccountName: "sa"}}
	tests := []struct {
		name          string
		pv            *corev1.PersistentVolume
		claimReadOnly bool
		podInfo       map[string]string
		caps          nodeCaps
		want          *csi.NodePublishVolumeRequest
	}{
		{
			name: "staging driver",
			pv:   csiPV(false),
			caps: nodeCaps{stage: true},
			want: &csi.NodePublishVolumeRequest{VolumeId: "h1", PublishContext: map[string]string{"dev": "x"}, StagingTargetPath: "/stage", TargetPath: "/target",
				VolumeCapability: capability, VolumeContext: map[string]string{"k": "v"}},
		},
		{
			name: "no staging, read-only claim",
			pv:   csiPV(false), claimReadOnly: true,
			want: &csi.NodePublishVolumeRequest{VolumeId: "h1", PublishContext: map[string]string{"dev": "x"}, TargetPath: "/target",
				VolumeCapability: capability, Readonly: true, VolumeContext: map[string]string{"k": "v"}},
		},
		{
			name: "read-only PV, pod info",
			pv:   csiPV(true), podInfo: podInfoAttributes(pod),
			want: &csi.NodePublishVolumeRequest{VolumeId: "h1", PublishContext: map[string]string{"dev": "x"}, TargetPath: "/target",
				VolumeCapability: capability, Readonly: true, VolumeContext: map[string]string{
					"k":                                      "v",
					"csi.storage.k8s.io/pod.name":            "p",
					"csi.storage.k8s.io/pod.namespace":       "ns",
					"csi.storage.k8s.io/pod.uid":             "u1",
					"csi.storage.k8s.io/serviceAccount.name": "sa",
					"csi.storage.k8s.io/ephemeral":           "false",
				}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := publishRequest(tt.pv, "/target", "/stage", tt.claimReadOnly, map[string]string{"dev": "x"}, tt.podInfo, tt.caps)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	stage := stageRequest(csiPV(false), "/stage", map[string]string{"dev": "x"}, nodeCaps{stage: true})
	wantStage := &csi.NodeStageVolumeRequest{VolumeId: "h1", PublishContext: map[string]string{"dev": "x"}, StagingTargetPath: "/stage",
		VolumeCapability: capability, VolumeContext: map[string]string{"k": "v"}}
	if diff := cmp.Diff(wantStage, stage, protocmp.Transform()); diff != "" {
		t.Errorf("stage request (-want +got):\n%s", diff)
	}
}

func TestCheckHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	missing := filepath.Join(dir, "missing")
	typ := func(t corev1.HostPathType) *corev1.HostPathType { return &t }
	tests := []struct {
		name    string
		path    string
		typ     *corev1.HostPathType
		wantErr string
		// created is a path the check must have created, with its kind.
		created string
		isDir   bool
	}{
		{name: "unset type checks nothing", path: missing},
		{name: "empty type checks nothing", path: missing, typ: typ(corev1.HostPathUnset)},
		{name: "backsteps", path: dir + "/../etc", wantErr: "invalid HostPath `" + dir + "/../etc`: must not contain '..'"},
		{name: "Directory", path: dir, typ: typ(corev1.HostPathDirectory)},
		{name: "Directory missing", path: missing, typ: typ(corev1.HostPathDirectory), wantErr: "hostPath " + missing + " doesn't exist"},
		{name: "Directory is a file", path: file, typ: typ(corev1.HostPathDirectory), wantErr: "hostPath type check failed: " + file + " is not a directory, it's a File"},
		{name: "DirectoryOrCreate creates", path: filepath.Join(dir, "new", "sub"), typ: typ(corev1.HostPathDirectoryOrCreate), created: filepath.Join(dir, "new", "sub"), isDir: true},
		{name: "DirectoryOrCreate on a file", path: file, typ: typ(corev1.HostPathDirectoryOrCreate), wantErr: "hostPath type check failed: " + file + " is not a directory, it's a File"},
		{name: "File", path: file, typ: typ(corev1.HostPathFile)},
		{name: "File is a directory", path: dir, typ: typ(corev1.HostPathFile), wantErr: "hostPath type check failed: " + dir + " is not a file, it's a Directory"},
		{name: "FileOrCreate creates", path: filepath.Join(dir, "newfile"), typ: typ(corev1.HostPathFileOrCreate), created: filepath.Join(dir, "newfile")},
		{name: "FileOrCreate on a directory", path: dir, typ: typ(corev1.HostPathFileOrCreate), wantErr: "hostPath type check failed: " + dir + " is not a file, it's a Directory"},
		{name: "Socket", path: sock, typ: typ(corev1.HostPathSocket)},
		{name: "Socket is a file", path: file, typ: typ(corev1.HostPathSocket), wantErr: "hostPath type check failed: " + file + " is not a socket file, it's a File"},
		{name: "CharDevice", path: "/dev/null", typ: typ(corev1.HostPathCharDev)},
		{name: "CharDevice is a file", path: file, typ: typ(corev1.HostPathCharDev), wantErr: "hostPath type check failed: " + file + " is not a character device, it's a File"},
		{name: "BlockDevice is a char device", path: "/dev/null", typ: typ(corev1.HostPathBlockDev), wantErr: "hostPath type check failed: /dev/null is not a block device, it's a CharDevice"},
		{name: "bad type", path: dir, typ: typ("Weird"), wantErr: "Weird is an invalid volume type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkHostPath(tt.path, tt.typ)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.created != "" {
				info, err := os.Stat(tt.created)
				if err != nil || info.IsDir() != tt.isDir {
					t.Fatalf("%s: %v, dir %v; want created (dir %v)", tt.created, err, info != nil && info.IsDir(), tt.isDir)
				}
			}
		})
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:             "/plain",
		`/with\040space`:     "/with space",
		`/tab\011and\134bs`:  "/tab\tand\\bs",
		`/trailing\04`:       `/trailing\04`,
		`/not\999octal\040x`: `/not\999octal x`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRetry(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newRetry()
	if r.waiting(t0) {
		t.Fatal("a fresh retry waits")
	}
	var waits []time.Duration
	now := t0
	for range 10 {
		r.failed(now, os.ErrInvalid)
		waits = append(waits, r.notBefore.Sub(now))
		if !r.waiting(r.notBefore.Add(-time.Nanosecond)) || r.waiting(r.notBefore) {
			t.Fatalf("waiting is wrong around notBefore %v", r.notBefore)
		}
		now = r.notBefore
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 64 * time.Second, 122 * time.Second, 122 * time.Second}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	r.succeeded()
	r.failed(now, os.ErrInvalid)
	if got := r.notBefore.Sub(now); got != 500*time.Millisecond {
		t.Errorf("after a success the wait is %v, want 500ms", got)
	}
	if !strings.Contains(r.err.Error(), "invalid") {
		t.Errorf("err = %v", r.err)
	}
}
