package persistentvolume

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func TestDefault(t *testing.T) {
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}},
	}}
	Default(pv)
	if pv.Status.Phase != corev1.VolumePending || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
		pv.Spec.VolumeMode == nil || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem ||
		pv.Spec.HostPath.Type == nil || *pv.Spec.HostPath.Type != corev1.HostPathUnset {
		t.Errorf("defaults: spec %+v status %+v", pv.Spec, pv.Status)
	}
	set := &corev1.PersistentVolume{
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeBlock),
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	Default(set)
	if set.Status.Phase != corev1.VolumeBound || set.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || *set.Spec.VolumeMode != corev1.PersistentVolumeBlock {
		t.Errorf("defaults overwrote set values: %+v", set)
	}
}

func TestPrepare(t *testing.T) {
	k := Kind()
	created := metav1.NewTime(now)
	pv := newPV(func(pv *corev1.PersistentVolume) {
		pv.CreationTimestamp = created
		pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound, Message: "m"}
		pv.Spec.VolumeAttributesClassName = ptr.To("gold")
	})
	k.PrepareForCreate(pv)
	want := corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &created}
	if diff := cmp.Diff(want, pv.Status); diff != "" {
		t.Errorf("create status (-want +got):\n%s", diff)
	}
	if pv.Spec.VolumeAttributesClassName != nil {
		t.Error("create kept volumeAttributesClassName, whose feature is off")
	}

	old := pv.DeepCopy()
	old.Status.Phase = corev1.VolumeAvailable

	upd := old.DeepCopy()
	upd.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeFailed}
	upd.Spec.StorageClassName = "other"
	upd.Spec.VolumeAttributesClassName = ptr.To("gold")
	k.PrepareForUpdate(upd, old)
	if upd.Status.Phase != corev1.VolumeAvailable || upd.Spec.StorageClassName != "other" || upd.Spec.VolumeAttributesClassName != nil {
		t.Errorf("main update: status %+v, class %q, vac %v", upd.Status, upd.Spec.StorageClassName, upd.Spec.VolumeAttributesClassName)
	}

	// Status: spec is kept; an unchanged phase keeps its transition time.
	st := old.DeepCopy()
	st.Spec.StorageClassName = "other"
	st.Status.LastPhaseTransitionTime = nil
	st.Status.Message = "hello"
	k.Status.PrepareForUpdate(st, old)
	if st.Spec.StorageClassName != "standard" || st.Status.LastPhaseTransitionTime == nil || !st.Status.LastPhaseTransitionTime.Equal(&created) || st.Status.Message != "hello" {
		t.Errorf("status update: spec %+v status %+v", st.Spec, st.Status)
	}
	later := metav1.NewTime(now.Add(time.Minute))
	bound := old.DeepCopy()
	bound.Status.Phase = corev1.VolumeBound
	bound.Status.LastPhaseTransitionTime = &later
	k.Status.PrepareForUpdate(bound, old)
	if !bound.Status.LastPhaseTransitionTime.Equal(&later) {
		t.Errorf("status update lost the client's transition time: %v", bound.Status.LastPhaseTransitionTime)
	}
	if errs := k.Status.ValidateUpdate(bound, old); len(errs) != 0 {
		t.Errorf("status update refused: %v", errs)
	}
}

func TestRow(t *testing.T) {
	created := metav1.NewTime(now.Add(-2 * time.Hour))
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want []interface{}
	}{
		{
			name: "available",
			pv:   newPV(func(pv *corev1.PersistentVolume) { pv.Status.Phase = corev1.VolumeAvailable }),
			want: []interface{}{"pvc-1234", "1Gi", "RWO", "Retain", "Available", "", "standard", "<unset>", "", "120m", "Filesystem"},
		},
		{
			name: "bound, every mode, beta class annotation wins",
			pv: newPV(func(pv *corev1.PersistentVolume) {
				pv.Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound, Reason: "r"}
				pv.Spec.ClaimRef = &corev1.ObjectReference{Namespace: "default", Name: "data"}
				pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod, corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOnce, corev1.ReadWriteOnce, "Other"}
				pv.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "beta"}
				pv.Spec.VolumeAttributesClassName = ptr.To("gold")
				pv.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
				pv.Spec.PersistentVolumeReclaimPolicy = corev1.PersistentVolumeReclaimDelete
			}),
			want: []interface{}{"pvc-1234", "1Gi", "RWO,ROX,RWX,RWOP", "Delete", "Bound", "default/data", "beta", "gold", "r", "120m", "Block"},
		},
		{
			name: "terminating, nothing set",
			pv: &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "x", DeletionTimestamp: &created},
				Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}},
			want: []interface{}{"x", "0", "", "", "Terminating", "", "", "<unset>", "", "<unknown>", "<unset>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.pv.Name != "x" {
				tt.pv.CreationTimestamp = created
			}
			if diff := cmp.Diff(tt.want, row(tt.pv, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	want := []string{"Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass", "VolumeAttributesClass", "Reason", "Age", "VolumeMode"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.Columns[len(k.Columns)-1].Priority != 1 || k.ShortNames[0] != "pv" || k.Namespaced || !k.HasStatus {
		t.Errorf("kind = %+v", k)
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "pvc-1234", "name": "pvc-1234"}, k.Fields(newPV())); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}
