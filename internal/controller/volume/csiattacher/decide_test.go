package csiattacher

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"knode/internal/volume"
)

const driver = "hostpath.csi.knode.io"

var (
	finalizer = volume.AttacherFinalizer(driver)
	now       = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	allCaps   = Caps{PublishUnpublish: true}
)

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestAccessMode(t *testing.T) {
	rwo, rwop, rox, rwx := corev1.ReadWriteOnce, corev1.ReadWriteOncePod, corev1.ReadOnlyMany, corev1.ReadWriteMany
	tests := []struct {
		name    string
		modes   []corev1.PersistentVolumeAccessMode
		snmw    bool
		want    csi.VolumeCapability_AccessMode_Mode
		wantErr string
	}{
		{"RWO", []corev1.PersistentVolumeAccessMode{rwo}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""},
		{"RWO with SINGLE_NODE_MULTI_WRITER", []corev1.PersistentVolumeAccessMode{rwo}, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, ""},
		{"RWOP", []corev1.PersistentVolumeAccessMode{rwop}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""},
		{"RWOP with SINGLE_NODE_MULTI_WRITER", []corev1.PersistentVolumeAccessMode{rwop}, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, ""},
		{"RWOP twice is alone", []corev1.PersistentVolumeAccessMode{rwop, rwop}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, ""},
		{"RWOP with another", []corev1.PersistentVolumeAccessMode{rwop, rwx}, false, csi.VolumeCapability_AccessMode_UNKNOWN, "Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume"},
		{"RWX wins over RWO and ROX", []corev1.PersistentVolumeAccessMode{rwo, rox, rwx}, false, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, ""},
		{"ROX", []corev1.PersistentVolumeAccessMode{rox}, true, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, ""},
		{"ROX with RWO", []corev1.PersistentVolumeAccessMode{rox, rwo}, false, csi.VolumeCapability_AccessMode_UNKNOWN, "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume"},
		{"none", nil, false, csi.VolumeCapability_AccessMode_UNKNOWN, "unsupported AccessMode combination: []"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AccessMode(tt.modes, tt.snmw)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("AccessMode(%v, %v) = %v, %q; want %v, %q", tt.modes, tt.snmw, got, errString(err), tt.want, tt.wantErr)
			}
		})
	}
}

func TestCapability(t *testing.T) {
	mount := func(fs string, flags ...string) *csi.VolumeCapability {
		return &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}
	}
	tests := []struct {
		name    string
		spec    corev1.PersistentVolumeSpec
		def     string
		want    *csi.VolumeCapability
		wantErr string
	}{
		{
			name: "mount with the PV's fsType and options",
			spec: corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, MountOptions: []string{"noatime"},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{FSType: "xfs"}}},
			def:  "ext4",
			want: mount("xfs", "noatime"),
		},
		{
			name: "default fsType when the PV has none",
			spec: corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{}}},
			def:  "ext4",
			want: mount("ext4"),
		},
		{
			name: "block ignores fsType",
			spec: corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeMode: ptr.To(corev1.PersistentVolumeBlock),
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{FSType: "xfs"}}},
			want: &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
			},
		},
		{name: "not CSI", spec: corev1.PersistentVolumeSpec{}, wantErr: "CSI volume source was nil"},
		{
			name: "bad access modes",
			spec: corev1.PersistentVolumeSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{}}},
			wantErr: "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Capability(&tt.spec, false, tt.def)
			if errString(err) != tt.wantErr {
				t.Fatalf("error %q, want %q", errString(err), tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("capability (-want +got):\n%s", diff)
			}
		})
	}
}

func csiNode(name string, drivers ...storagev1.CSINodeDriver) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: drivers}}
}

func TestNodeID(t *testing.T) {
	annotated := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{volume.AnnAttacherNodeID: "old-id"}}}
	tests := []struct {
		name    string
		node    *storagev1.CSINode
		va      *storagev1.VolumeAttachment
		want    string
		wantErr string
	}{
		{"from the CSINode", csiNode("n1", storagev1.CSINodeDriver{Name: "other", NodeID: "x"}, storagev1.CSINodeDriver{Name: driver, NodeID: "id-1"}), nil, "id-1", ""},
		{"the CSINode wins over the annotation", csiNode("n1", storagev1.CSINodeDriver{Name: driver, NodeID: "id-1"}), annotated, "id-1", ""},
		{"no CSINode", nil, nil, "", `csinode.storage.k8s.io "n1" not found`},
		{"CSINode without the driver", csiNode("n1", storagev1.CSINodeDriver{Name: "other", NodeID: "x"}), nil, "", "CSINode n1 does not contain driver " + driver},
		{"no CSINode, annotation", nil, annotated, "old-id", ""},
		{"CSINode without the driver, annotation", csiNode("n1"), annotated, "old-id", ""},
		{"no CSINode, no annotation", nil, &storagev1.VolumeAttachment{}, "", `csinode.storage.k8s.io "n1" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeID(driver, "n1", tt.node, tt.va)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("NodeID = %q, %q; want %q, %q", got, errString(err), tt.want, tt.wantErr)
			}
		})
	}
}

func testPV(mutate ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1", Finalizers: []string{volume.PVProtectionFinalizer}},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: "vol-1", FSType: "ext4", ReadOnly: true,
				VolumeAttributes: map[string]string{"k": "v"},
			}},
		},
	}
	for _, m := range mutate {
		m(pv)
	}
	return pv
}

func testVA(mutate ...func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-abc"},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driver, NodeName: "n1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv1")},
		},
	}
	for _, m := range mutate {
		m(va)
	}
	return va
}

func withFinalizer(va *storagev1.VolumeAttachment) { va.Finalizers = append(va.Finalizers, finalizer) }
func withNodeID(id string) func(*storagev1.VolumeAttachment) {
	return func(va *storagev1.VolumeAttachment) {
		if va.Annotations == nil {
			va.Annotations = map[string]string{}
		}
		va.Annotations[volume.AnnAttacherNodeID] = id
	}
}

func TestPlanAttach(t *testing.T) {
	node := csiNode("n1", storagev1.CSINodeDriver{Name: driver, NodeID: "id-1"})
	request := func(readonly bool) *csi.ControllerPublishVolumeRequest {
		return &csi.ControllerPublishVolumeRequest{
			VolumeId: "vol-1", NodeId: "id-1", Readonly: readonly, VolumeContext: map[string]string{"k": "v"},
			VolumeCapability: &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			},
		}
	}
	withMeta := testVA(withFinalizer, withNodeID("id-1"))
	tests := []struct {
		name    string
		va      *storagev1.VolumeAttachment
		pv      *corev1.PersistentVolume
		node    *storagev1.CSINode
		caps    Caps
		want    Attach
		wantErr string
	}{
		{
			name: "attached already",
			va:   testVA(func(va *storagev1.VolumeAttachment) { va.Status.Attached = true }), pv: testPV(), node: node, caps: allCaps,
			want: Attach{Done: true},
		},
		{
			name: "driver does not attach",
			va:   testVA(), pv: nil, node: nil, caps: Caps{},
			want: Attach{Trivial: true},
		},
		{
			name: "first attach: PV finalizer, VA finalizer and annotation, request",
			va:   testVA(), pv: testPV(), node: node, caps: allCaps,
			want: Attach{PVFinalizer: true, Meta: withMeta, Request: request(false)},
		},
		{
			name: "readonly only with PUBLISH_READONLY",
			va:   withMeta, pv: testPV(func(pv *corev1.PersistentVolume) { pv.Finalizers = append(pv.Finalizers, finalizer) }), node: node,
			caps: Caps{PublishUnpublish: true, PublishReadonly: true},
			want: Attach{Request: request(true)},
		},
		{
			name: "a changed node ID is written again",
			va:   testVA(withFinalizer, withNodeID("stale")), pv: testPV(), node: node, caps: allCaps,
			want: Attach{PVFinalizer: true, Meta: withMeta, Request: request(false)},
		},
		{
			name: "PV missing",
			va:   testVA(), pv: nil, node: node, caps: allCaps,
			wantErr: `persistentvolume "pv1" not found`,
		},
		{
			name: "PV being deleted",
			va:   testVA(), pv: testPV(func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{Time: now} }), node: node, caps: allCaps,
			wantErr: `PersistentVolume "pv1" is marked for deletion`,
		},
		{
			name: "no CSINode: the PV finalizer still comes first, the VA is not touched",
			va:   testVA(), pv: testPV(), node: nil, caps: allCaps,
			want:    Attach{PVFinalizer: true},
			wantErr: `csinode.storage.k8s.io "n1" not found`,
		},
		{
			name: "not a CSI PV",
			va:   testVA(), pv: testPV(func(pv *corev1.PersistentVolume) { pv.Spec.CSI = nil }), node: node, caps: allCaps,
			want:    Attach{PVFinalizer: true},
			wantErr: "pv spec contained non-csi source that was not migrated",
		},
		{
			name: "inline volume",
			va: testVA(func(va *storagev1.VolumeAttachment) {
				va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &testPV().Spec}
			}),
			node: node, caps: allCaps,
			want: Attach{Meta: testVA(withFinalizer, withNodeID("id-1"), func(va *storagev1.VolumeAttachment) {
				va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: &testPV().Spec}
			}), Request: request(false)},
		},
		{
			name: "no source",
			va:   testVA(func(va *storagev1.VolumeAttachment) { va.Spec.Source = storagev1.VolumeAttachmentSource{} }),
			node: node, caps: allCaps,
			wantErr: "neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanAttach(driver, tt.va, tt.pv, tt.node, tt.caps, "")
			if errString(got.Err) != tt.wantErr {
				t.Errorf("Err = %q, want %q", errString(got.Err), tt.wantErr)
			}
			got.Err = nil
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanDetach(t *testing.T) {
	node := csiNode("n1", storagev1.CSINodeDriver{Name: driver, NodeID: "id-1"})
	tests := []struct {
		name    string
		va      *storagev1.VolumeAttachment
		pv      *corev1.PersistentVolume
		node    *storagev1.CSINode
		want    *csi.ControllerUnpublishVolumeRequest
		done    bool
		wantErr string
	}{
		{name: "no finalizer: nothing to do", va: testVA(withNodeID("id-1")), pv: testPV(), node: node, done: true},
		{name: "unpublish", va: testVA(withFinalizer, withNodeID("id-1")), pv: testPV(), node: node, want: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "id-1"}},
		{name: "CSINode gone: the annotation", va: testVA(withFinalizer, withNodeID("old")), pv: testPV(), node: nil, want: &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "old"}},
		{name: "CSINode gone, no annotation", va: testVA(withFinalizer), pv: testPV(), node: nil, wantErr: `csinode.storage.k8s.io "n1" not found`},
		{name: "PV gone", va: testVA(withFinalizer, withNodeID("id-1")), pv: nil, node: node, wantErr: `persistentvolume "pv1" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanDetach(driver, tt.va, tt.pv, tt.node)
			if got.Done != tt.done || errString(got.Err) != tt.wantErr {
				t.Errorf("Done, Err = %v, %q; want %v, %q", got.Done, errString(got.Err), tt.done, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got.Request, protocmp.Transform()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWithoutFinalizer(t *testing.T) {
	va := testVA(withFinalizer)
	got, had := WithoutFinalizer(driver, va)
	if !had || got.Finalizers != nil || len(va.Finalizers) != 1 {
		t.Errorf("alone: had %v, finalizers %v (original %v); want true, nil, untouched", had, got.Finalizers, va.Finalizers)
	}
	va = testVA(func(va *storagev1.VolumeAttachment) { va.Finalizers = []string{"a", finalizer, "b"} })
	got, had = WithoutFinalizer(driver, va)
	if diff := cmp.Diff([]string{"a", "b"}, got.Finalizers); !had || diff != "" {
		t.Errorf("among others: had %v, finalizers (-want +got):\n%s", had, diff)
	}
	if _, had := WithoutFinalizer(driver, testVA()); had {
		t.Error("a VolumeAttachment without the finalizer had it")
	}
}

func TestReleasePV(t *testing.T) {
	deleting := func(pv *corev1.PersistentVolume) {
		pv.DeletionTimestamp = &metav1.Time{Time: now}
		pv.Finalizers = append(pv.Finalizers, finalizer)
	}
	other := storagev1.VolumeAttachment{Spec: storagev1.VolumeAttachmentSpec{Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pv2")}}}
	mine := *testVA(func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "another.driver" })
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		vas  []storagev1.VolumeAttachment
		want bool
	}{
		{"deleting, no attachment", testPV(deleting), []storagev1.VolumeAttachment{other}, true},
		{"deleting, still named by an attachment of any attacher", testPV(deleting), []storagev1.VolumeAttachment{other, mine}, false},
		{"not deleting", testPV(func(pv *corev1.PersistentVolume) { pv.Finalizers = append(pv.Finalizers, finalizer) }), nil, false},
		{"deleting without the finalizer", testPV(func(pv *corev1.PersistentVolume) { pv.DeletionTimestamp = &metav1.Time{Time: now} }), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ReleasePV(driver, tt.pv, tt.vas); got != tt.want {
				t.Errorf("ReleasePV = %v, want %v", got, tt.want)
			}
		})
	}
}

// applyJSONPatch applies patch to an object with the given finalizers
// and returns the finalizers after it, or the patch's error.
func applyJSONPatch(t *testing.T, finalizers []string, patch []byte) ([]string, error) {
	t.Helper()
	meta := map[string]any{"name": "x"}
	if finalizers != nil {
		meta["finalizers"] = finalizers
	}
	doc, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s does not decode: %v", patch, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil, err
	}
	var obj metav1.PartialObjectMetadata
	if err := json.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	return obj.Finalizers, nil
}

func TestFinalizerPatches(t *testing.T) {
	for _, existing := range [][]string{nil, {}, {"a"}, {"a", "b"}} {
		got, err := applyJSONPatch(t, existing, AddFinalizerPatch(existing, finalizer))
		want := append(append([]string{}, existing...), finalizer)
		if diff := cmp.Diff(want, got); err != nil || diff != "" {
			t.Errorf("adding to %v: %v, (-want +got):\n%s", existing, err, diff)
		}
	}
	// The guard: a patch made for no finalizers fails once one appeared.
	if _, err := applyJSONPatch(t, []string{"new"}, AddFinalizerPatch(nil, finalizer)); err == nil {
		t.Error("a patch made for nil finalizers applied to a changed list")
	}

	patch, ok := RemoveFinalizerPatch([]string{"a", finalizer, "b"}, finalizer)
	if !ok {
		t.Fatal("RemoveFinalizerPatch did not find the finalizer")
	}
	got, err := applyJSONPatch(t, []string{"a", finalizer, "b"}, patch)
	if diff := cmp.Diff([]string{"a", "b"}, got); err != nil || diff != "" {
		t.Errorf("removing: %v, (-want +got):\n%s", err, diff)
	}
	if _, err := applyJSONPatch(t, []string{finalizer, "b"}, patch); err == nil {
		t.Error("a remove patch applied after the list moved")
	}
	if _, ok := RemoveFinalizerPatch([]string{"a"}, finalizer); ok {
		t.Error("RemoveFinalizerPatch found a finalizer that is not there")
	}
}

func TestMergePatch(t *testing.T) {
	va := testVA(func(va *storagev1.VolumeAttachment) {
		va.Status.AttachError = &storagev1.VolumeError{Message: "boom", ErrorCode: ptr.To[int32](9)}
		va.Status.AttachmentMetadata = map[string]string{"old": "1"}
	})
	next := va.DeepCopy()
	next.Status.Attached = true
	next.Status.AttachmentMetadata = map[string]string{"new": "2"}
	next.Status.AttachError = nil
	patch, err := MergePatch(va, next)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(`{"status":{"attached":true,"attachError":null,"attachmentMetadata":{"new":"2","old":null}}}`), &want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
}

func TestCapsOf(t *testing.T) {
	rpc := func(ty csi.ControllerServiceCapability_RPC_Type) *csi.ControllerServiceCapability {
		return &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: ty}}}
	}
	got := CapsOf(&csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{
		rpc(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		rpc(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME),
		rpc(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
	}})
	if want := (Caps{PublishUnpublish: true, SingleNodeMultiWriter: true}); got != want {
		t.Errorf("CapsOf = %+v, want %+v", got, want)
	}
	if got := CapsOf(&csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{rpc(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY)}}); got != (Caps{PublishReadonly: true}) {
		t.Errorf("CapsOf(PUBLISH_READONLY) = %+v", got)
	}
}

// The gRPC code goes into attach errors only, and only for the driver's
// errors. (knode's API server, following Kubernetes 1.33's gates, drops
// it again; upstream's attacher sends it all the same.)
func TestVolumeError(t *testing.T) {
	grpcErr := status.Error(codes.FailedPrecondition, "in use")
	tests := []struct {
		name     string
		err      error
		withCode bool
		want     *storagev1.VolumeError
	}{
		{"driver error, attach", grpcErr, true, &storagev1.VolumeError{Time: metav1.NewTime(now), Message: "rpc error: code = FailedPrecondition desc = in use", ErrorCode: ptr.To[int32](9)}},
		{"driver error, detach", grpcErr, false, &storagev1.VolumeError{Time: metav1.NewTime(now), Message: "rpc error: code = FailedPrecondition desc = in use"}},
		{"own error", errors.New("CSINode n1 does not contain driver x"), true, &storagev1.VolumeError{Time: metav1.NewTime(now), Message: "CSINode n1 does not contain driver x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, volumeError(tt.err, now, tt.withCode)); diff != "" {
				t.Errorf("volumeError (-want +got):\n%s", diff)
			}
		})
	}
}
