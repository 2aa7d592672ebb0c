package persistentvolume

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"knode/internal/volume"
)

// columns are the server-side printer's volume columns, upstream's
// spelling; VolumeMode is a wide column.
func columns() []metav1.TableColumnDefinition {
	meta := metav1.ObjectMeta{}.SwaggerDoc()
	spec := corev1.PersistentVolumeSpec{}.SwaggerDoc()
	status := corev1.PersistentVolumeStatus{}.SwaggerDoc()
	return []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: meta["name"]},
		{Name: "Capacity", Type: "string", Description: spec["capacity"]},
		{Name: "Access Modes", Type: "string", Description: spec["accessModes"]},
		{Name: "Reclaim Policy", Type: "string", Description: spec["persistentVolumeReclaimPolicy"]},
		{Name: "Status", Type: "string", Description: status["phase"]},
		{Name: "Claim", Type: "string", Description: spec["claimRef"]},
		{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
		{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pv"},
		{Name: "Reason", Type: "string", Description: status["reason"]},
		{Name: "Age", Type: "string", Description: meta["creationTimestamp"]},
		{Name: "VolumeMode", Type: "string", Priority: 1, Description: spec["volumeMode"]},
	}
}

// row returns one cell per column, the wide one included. A volume being
// deleted shows STATUS Terminating; CLAIM is "<namespace>/<name>" or "".
func row(obj runtime.Object, now time.Time) []interface{} {
	pv := obj.(*corev1.PersistentVolume)
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	size := pv.Spec.Capacity[corev1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	return []interface{}{
		pv.Name,
		size.String(),
		AccessModes(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy),
		phase,
		claim,
		Class(pv),
		orUnset(pv.Spec.VolumeAttributesClassName),
		pv.Status.Reason,
		age(pv.CreationTimestamp, now),
		orUnset((*string)(pv.Spec.VolumeMode)),
	}
}

// AccessModes is kubectl's short form of access modes: each of RWO, ROX,
// RWX and RWOP that the list holds, in that order, joined by commas;
// unknown modes and repeats are left out.
func AccessModes(modes []corev1.PersistentVolumeAccessMode) string {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	var out []string
	for _, m := range []struct {
		mode  corev1.PersistentVolumeAccessMode
		short string
	}{
		{corev1.ReadWriteOnce, "RWO"},
		{corev1.ReadOnlyMany, "ROX"},
		{corev1.ReadWriteMany, "RWX"},
		{corev1.ReadWriteOncePod, "RWOP"},
	} {
		if has[m.mode] {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

// Class is the STORAGECLASS cell, read as kubectl reads it: the beta
// annotation when present (even empty), else spec.storageClassName.
func Class(pv *corev1.PersistentVolume) string {
	if c, ok := pv.Annotations[volume.AnnBetaStorageClass]; ok {
		return c
	}
	return pv.Spec.StorageClassName
}

func orUnset(s *string) string {
	if s == nil {
		return "<unset>"
	}
	return *s
}

// age is the AGE cell: the time since t, or "<unknown>" when t is unset.
func age(t metav1.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
