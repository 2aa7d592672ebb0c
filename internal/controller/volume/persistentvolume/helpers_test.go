package persistentvolume

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// pv builds an Available volume of class "gold" offering RWO; opts adjust
// it.
func pv(name, size string, opts ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "5"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:              "gold",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeAvailable},
	}
	for _, o := range opts {
		o(v)
	}
	return v
}

func modes(m ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) { v.Spec.AccessModes = m }
}

func class(c string) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) { v.Spec.StorageClassName = c }
}

func volPhase(p corev1.PersistentVolumePhase) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) { v.Status.Phase = p }
}

func label(k, val string) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) { v.Labels = map[string]string{k: val} }
}

func block(v *corev1.PersistentVolume) { v.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) }

func volDeleting(v *corev1.PersistentVolume) {
	v.DeletionTimestamp = ptr.To(metav1.NewTime(now))
}

// claimRef points the volume at claim ns/name with uid ("" for a
// pre-binding).
func claimRef(name string, uid types.UID) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) {
		v.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: name, UID: uid}
	}
}

func volAnn(k, val string) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) { metav1.SetMetaDataAnnotation(&v.ObjectMeta, k, val) }
}

func policy(p corev1.PersistentVolumeReclaimPolicy) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) { v.Spec.PersistentVolumeReclaimPolicy = p }
}

func csiSource(v *corev1.PersistentVolume) {
	v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "hostpath.csi.knode.io", VolumeHandle: "h"}
}

// pvc builds a claim ns/name (UID "uid-<name>") for size of class "gold"
// asking RWO; opts adjust it.
func pvc(name, size string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "7"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			StorageClassName: ptr.To("gold"),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func wants(m ...corev1.PersistentVolumeAccessMode) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.AccessModes = m }
}

func claimClass(name *string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = name }
}

func selecting(k, val string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{k: val}}
	}
}

func naming(volume string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = volume }
}

func claimAnn(k, val string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) { metav1.SetMetaDataAnnotation(&c.ObjectMeta, k, val) }
}

func blockClaim(c *corev1.PersistentVolumeClaim) {
	c.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
}

func sc(name, provisioner string, mode storagev1.VolumeBindingMode, opts ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	s := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	for _, o := range opts {
		o(s)
	}
	return s
}

func isDefault(s *storagev1.StorageClass) {
	s.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
}

func createdAt(t time.Time) func(*storagev1.StorageClass) {
	return func(s *storagev1.StorageClass) { s.CreationTimestamp = metav1.NewTime(t) }
}

// state builds a State of the given objects.
func state(objs ...any) *State {
	s := &State{Volumes: map[string]*corev1.PersistentVolume{}, Claims: map[string]*corev1.PersistentVolumeClaim{}, Classes: map[string]*storagev1.StorageClass{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.PersistentVolume:
			s.Volumes[o.Name] = o
		case *corev1.PersistentVolumeClaim:
			s.Claims[ClaimKey(o)] = o
		case *storagev1.StorageClass:
			s.Classes[o.Name] = o
		default:
			panic("unknown object")
		}
	}
	return s
}
