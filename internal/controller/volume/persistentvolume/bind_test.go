package persistentvolume

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	annBound     = "pv.kubernetes.io/bound-by-controller"
	annCompleted = "pv.kubernetes.io/bind-completed"
)

func TestBindVolume(t *testing.T) {
	claim := pvc("c", "1Gi")
	fullRef := &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "c", UID: "uid-c", ResourceVersion: "7"}
	tests := []struct {
		name        string
		pv          *corev1.PersistentVolume
		wantChanged bool
		wantRef     *corev1.ObjectReference
		wantAnn     map[string]string
	}{
		{name: "free volume gets claimRef and bound-by-controller", pv: pv("v", "1Gi"),
			wantChanged: true, wantRef: fullRef, wantAnn: map[string]string{annBound: "yes"}},
		{name: "user pre-binding gets the UID, not the annotation", pv: pv("v", "1Gi", claimRef("c", "")),
			wantChanged: true, wantRef: fullRef},
		{name: "bound already: nothing to write", pv: pv("v", "1Gi", claimRef("c", "uid-c"), volAnn(annBound, "yes")),
			wantRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "c", UID: "uid-c"},
			wantAnn: map[string]string{annBound: "yes"}},
		{name: "provisioned for the claim: nothing to write", pv: pv("v", "1Gi", claimRef("c", "uid-c")),
			wantRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "c", UID: "uid-c"}},
		{name: "claimed by another claim: rebound by the controller", pv: pv("v", "1Gi", claimRef("d", "uid-d")),
			wantChanged: true, wantRef: fullRef, wantAnn: map[string]string{annBound: "yes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pv.DeepCopy()
			got, changed := BindVolume(tt.pv, claim)
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(tt.wantRef, got.Spec.ClaimRef); diff != "" {
				t.Errorf("claimRef (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAnn, got.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.pv); diff != "" {
				t.Errorf("BindVolume changed its argument:\n%s", diff)
			}
		})
	}
}

func TestBindClaim(t *testing.T) {
	vol := pv("v", "1Gi")
	tests := []struct {
		name        string
		claim       *corev1.PersistentVolumeClaim
		wantChanged bool
		wantAnn     map[string]string
	}{
		{name: "chosen by the controller", claim: pvc("c", "1Gi"), wantChanged: true,
			wantAnn: map[string]string{annBound: "yes", annCompleted: "yes"}},
		{name: "named by the user", claim: pvc("c", "1Gi", naming("v")), wantChanged: true,
			wantAnn: map[string]string{annCompleted: "yes"}},
		{name: "done already", claim: pvc("c", "1Gi", naming("v"), claimAnn(annCompleted, "yes")),
			wantAnn: map[string]string{annCompleted: "yes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := BindClaim(tt.claim, vol)
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if got.Spec.VolumeName != "v" {
				t.Errorf("volumeName = %q, want v", got.Spec.VolumeName)
			}
			if diff := cmp.Diff(tt.wantAnn, got.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnbindVolume(t *testing.T) {
	byController := UnbindVolume(pv("v", "1Gi", claimRef("c", "uid-c"), volAnn(annBound, "yes")))
	if byController.Spec.ClaimRef != nil || byController.Annotations != nil {
		t.Errorf("controller's binding kept claimRef %v, annotations %v", byController.Spec.ClaimRef, byController.Annotations)
	}
	byUser := UnbindVolume(pv("v", "1Gi", claimRef("c", "uid-c")))
	want := &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "c"}
	if diff := cmp.Diff(want, byUser.Spec.ClaimRef); diff != "" {
		t.Errorf("user's pre-binding (-want +got):\n%s", diff)
	}
}

func TestClaimStatus(t *testing.T) {
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	gi := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s)}
	}
	boundClaim := func(size string) *corev1.PersistentVolumeClaim {
		return pvc("c", "1Gi", func(c *corev1.PersistentVolumeClaim) {
			c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: rwo, Capacity: gi(size)}
		})
	}
	tests := []struct {
		name        string
		claim       *corev1.PersistentVolumeClaim
		phase       corev1.PersistentVolumeClaimPhase
		pv          *corev1.PersistentVolume
		want        corev1.PersistentVolumeClaimStatus
		wantChanged bool
	}{
		{name: "pending stays pending", claim: pvc("c", "1Gi"), phase: corev1.ClaimPending,
			want: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
		{name: "becoming bound takes the volume's modes and size", claim: pvc("c", "1Gi"), phase: corev1.ClaimBound, pv: pv("v", "5Gi"),
			want: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: rwo, Capacity: gi("5Gi")}, wantChanged: true},
		{name: "bound already keeps its size", claim: boundClaim("2Gi"), phase: corev1.ClaimBound, pv: pv("v", "5Gi"),
			want: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: rwo, Capacity: gi("2Gi")}},
		{name: "becoming bound with a pending resize reports the old size", claim: pvc("c", "1Gi"), phase: corev1.ClaimBound,
			pv:   pv("v", "5Gi", volAnn(AnnPreResizeCapacity, "3Gi")),
			want: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: rwo, Capacity: gi("3Gi")}, wantChanged: true},
		{name: "lost clears modes and size", claim: boundClaim("5Gi"), phase: corev1.ClaimLost,
			want: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}, wantChanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := ClaimStatus(tt.claim, tt.phase, tt.pv)
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumePhase(t *testing.T) {
	v := pv("v", "1Gi", func(v *corev1.PersistentVolume) { v.Status.Message = "old" })
	same, changed := VolumePhase(v, corev1.VolumeAvailable, "new", now)
	if changed || same != v {
		t.Errorf("same phase: changed = %v, got a copy %v", changed, same != v)
	}
	got, changed := VolumePhase(v, corev1.VolumeFailed, "broken", now)
	if !changed {
		t.Fatal("new phase reported no change")
	}
	want := corev1.PersistentVolumeStatus{Phase: corev1.VolumeFailed, Message: "broken", LastPhaseTransitionTime: &metav1.Time{Time: now}}
	if diff := cmp.Diff(want, got.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if v.Status.Phase != corev1.VolumeAvailable {
		t.Error("VolumePhase changed its argument")
	}
}
