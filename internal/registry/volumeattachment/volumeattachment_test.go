package volumeattachment

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const msgSubdomain = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func newVA(mutate ...func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-0123abcd"},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "hostpath.csi.knode.io",
			NodeName: "node-1",
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pvc-1")},
		},
	}
	for _, m := range mutate {
		m(va)
	}
	return va
}

func inline() *corev1.PersistentVolumeSpec {
	return &corev1.PersistentVolumeSpec{
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "d.example.com", VolumeHandle: "h"}},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		va   *storagev1.VolumeAttachment
		want []string
	}{
		{name: "persistent volume", va: newVA()},
		{name: "inline volume", va: newVA(func(va *storagev1.VolumeAttachment) {
			va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: inline()}
		})},
		{
			name: "no attacher",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "" }),
			want: []string{
				"spec.attacher|Required value|",
				"spec.attacher|Required value|",
				"spec.attacher|Invalid value|" + msgSubdomain,
			},
		},
		{
			name: "attacher not a driver name",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "csi_" + strings.Repeat("a", 60) }),
			want: []string{
				"spec.attacher|Too long|may not be more than 63 bytes",
				"spec.attacher|Invalid value|" + msgSubdomain,
			},
		},
		{
			name: "no source",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.Source = storagev1.VolumeAttachmentSource{} }),
			want: []string{"spec.source|Required value|must specify exactly one of inlineVolumeSpec and persistentVolumeName"},
		},
		{
			name: "both sources",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.Source.InlineVolumeSpec = inline() }),
			want: []string{"spec.source|Forbidden|must specify exactly one of inlineVolumeSpec and persistentVolumeName"},
		},
		{
			name: "empty persistentVolumeName",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.Source.PersistentVolumeName = ptr.To("") }),
			want: []string{
				"spec.source.persistentVolumeName|Required value|must specify non empty persistentVolumeName",
				"spec.source.persistentVolumeName|Invalid value|" + msgSubdomain,
			},
		},
		{
			name: "persistentVolumeName not a subdomain",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.Source.PersistentVolumeName = ptr.To("PV_1") }),
			want: []string{"spec.source.persistentVolumeName|Invalid value|" + msgSubdomain},
		},
		{
			name: "inline spec checked as inline",
			va: newVA(func(va *storagev1.VolumeAttachment) {
				s := inline()
				s.Capacity = corev1.ResourceList{}
				s.StorageClassName = "x"
				va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: s}
			}),
			want: []string{"spec.source.inlineVolumeSpec.storageClassName|Forbidden|may not be specified in the context of inline volumes"},
		},
		{
			name: "bad node name",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "Node_1" }),
			want: []string{"spec.nodeName|Invalid value|" + msgSubdomain},
		},
		{
			name: "no node name",
			va:   newVA(func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "" }),
			want: []string{"spec.nodeName|Invalid value|" + msgSubdomain},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Kind().Validate(tt.va))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateStatus(t *testing.T) {
	tests := []struct {
		name   string
		status storagev1.VolumeAttachmentStatus
		want   []string
	}{
		{name: "attached with metadata", status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/sdb"}}},
		{name: "errors at the limits", status: storagev1.VolumeAttachmentStatus{
			AttachmentMetadata: map[string]string{"k": strings.Repeat("v", MaxAttachmentMetadataSize-1)},
			AttachError:        &storagev1.VolumeError{Message: strings.Repeat("m", MaxErrorMessageSize), ErrorCode: ptr.To(int32(0))},
		}},
		{
			name:   "metadata too large",
			status: storagev1.VolumeAttachmentStatus{AttachmentMetadata: map[string]string{"k": strings.Repeat("v", MaxAttachmentMetadataSize)}},
			want:   []string{"status.attachmentMetadata|Too long|may not be more than 262144 bytes"},
		},
		{
			name: "messages too long, negative codes",
			status: storagev1.VolumeAttachmentStatus{
				AttachError: &storagev1.VolumeError{Message: strings.Repeat("m", MaxErrorMessageSize+1), ErrorCode: ptr.To(int32(-1))},
				DetachError: &storagev1.VolumeError{Message: strings.Repeat("m", MaxErrorMessageSize+1)},
			},
			want: []string{
				// Upstream quotes the metadata limit here.
				"status.attachError.message|Too long|may not be more than 262144 bytes",
				"status.attachError.errorCode|Invalid value|must be between 0 and 2147483647, inclusive",
				"status.detachError.message|Too long|may not be more than 262144 bytes",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newVA()
			va := old.DeepCopy()
			va.Status = tt.status
			got := flat(Kind().Status.ValidateUpdate(va, old))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*storagev1.VolumeAttachment)
		want   []string
	}{
		{name: "metadata may change", mutate: func(va *storagev1.VolumeAttachment) {
			va.Finalizers = []string{"external-attacher/hostpath-csi-knode-io"}
			va.Annotations = map[string]string{"csi.alpha.kubernetes.io/node-id": "node-1"}
		}},
		{
			name:   "node name",
			mutate: func(va *storagev1.VolumeAttachment) { va.Spec.NodeName = "node-2" },
			want:   []string{"spec|Invalid value|field is immutable"},
		},
		{
			name:   "attacher",
			mutate: func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "other.example.com" },
			want:   []string{"spec|Invalid value|field is immutable"},
		},
		{
			name:   "source",
			mutate: func(va *storagev1.VolumeAttachment) { va.Spec.Source.PersistentVolumeName = ptr.To("pvc-2") },
			want:   []string{"spec|Invalid value|field is immutable"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newVA()
			va := old.DeepCopy()
			tt.mutate(va)
			if diff := cmp.Diff(tt.want, flat(Kind().ValidateUpdate(va, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	k := Kind()
	va := newVA(func(va *storagev1.VolumeAttachment) { va.Status.Attached = true })
	k.PrepareForCreate(va)
	if va.Status.Attached {
		t.Error("create kept the status")
	}

	old := newVA(func(va *storagev1.VolumeAttachment) {
		va.Labels = map[string]string{"a": "1"}
		va.Finalizers = []string{"f"}
		va.Status = storagev1.VolumeAttachmentStatus{Attached: true, DetachError: &storagev1.VolumeError{Message: "x", ErrorCode: ptr.To(int32(3))}}
	})

	main := old.DeepCopy()
	main.Status = storagev1.VolumeAttachmentStatus{}
	main.Labels = map[string]string{"a": "2"}
	k.PrepareForUpdate(main, old)
	if !main.Status.Attached || main.Labels["a"] != "2" {
		t.Errorf("main update: status %+v labels %v; want old status, new labels", main.Status, main.Labels)
	}

	st := old.DeepCopy()
	st.Spec.NodeName = "node-2"
	st.Labels = map[string]string{"a": "2"}
	st.Finalizers = nil
	st.Status = storagev1.VolumeAttachmentStatus{
		Attached:    false,
		AttachError: &storagev1.VolumeError{Message: "failed", ErrorCode: ptr.To(int32(5))},
		DetachError: &storagev1.VolumeError{Message: "still", ErrorCode: ptr.To(int32(4))},
	}
	k.Status.PrepareForUpdate(st, old)
	if st.Spec.NodeName != "node-1" || st.Labels["a"] != "1" || len(st.Finalizers) != 1 {
		t.Errorf("status update changed spec or metadata: %+v", st)
	}
	if st.Status.AttachError.ErrorCode != nil {
		t.Error("status update started an attach error code (its feature is off)")
	}
	if st.Status.DetachError.ErrorCode == nil || *st.Status.DetachError.ErrorCode != 4 || st.Status.AttachError.Message != "failed" {
		t.Errorf("status update lost fields: %+v", st.Status)
	}
	if errs := k.Status.ValidateUpdate(st, old); len(errs) != 0 {
		t.Errorf("status update refused: %v", errs)
	}
}

func TestRow(t *testing.T) {
	va := newVA(func(va *storagev1.VolumeAttachment) {
		va.Status.Attached = true
		va.CreationTimestamp = metav1.NewTime(now.Add(-3 * 24 * time.Hour))
	})
	want := []interface{}{"csi-0123abcd", "hostpath.csi.knode.io", "pvc-1", "node-1", true, "3d"}
	if diff := cmp.Diff(want, row(va, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	in := newVA(func(va *storagev1.VolumeAttachment) {
		va.Spec.Source = storagev1.VolumeAttachmentSource{InlineVolumeSpec: inline()}
	})
	if diff := cmp.Diff([]interface{}{"csi-0123abcd", "hostpath.csi.knode.io", "", "node-1", false, "<unknown>"}, row(in, now)); diff != "" {
		t.Errorf("inline row (-want +got):\n%s", diff)
	}
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Attacher", "PV", "Node", "Attached", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.Namespaced || !k.HasStatus || k.Resource != "volumeattachments" {
		t.Errorf("kind = %+v", k)
	}
}
