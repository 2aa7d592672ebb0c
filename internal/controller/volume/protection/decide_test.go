package protection

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const pvcFinalizer = "kubernetes.io/pvc-protection"

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func claim() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "claim-uid"}}
}

// pod builds a pod of namespace ns on node-1 using the claim "data"; opts
// adjust it.
func pod(opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "pod-uid"},
		Spec: corev1.PodSpec{NodeName: "node-1", Volumes: []corev1.Volume{{Name: "d",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// ephemeral makes the pod's only volume the generic ephemeral volume
// "scratch", whose claim is "web-scratch".
func ephemeral(p *corev1.Pod) {
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
}

func shutDown(p *corev1.Pod) {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	p.DeletionGracePeriodSeconds = ptr.To[int64](0)
}

func TestPodUsesClaim(t *testing.T) {
	ephClaim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "web-scratch", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-uid", Controller: ptr.To(true)}}}}
	foreignEph := ephClaim.DeepCopy()
	foreignEph.OwnerReferences[0].UID = "other"
	tests := []struct {
		name  string
		pod   *corev1.Pod
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{name: "running pod", pod: pod(), claim: claim(), want: true},
		{name: "pending scheduled pod", pod: pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), claim: claim(), want: true},
		{name: "unscheduled pod", pod: pod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), claim: claim()},
		{name: "finished pod still keeps it (upstream)", pod: pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), claim: claim(), want: true},
		{name: "failed pod still keeps it (upstream)", pod: pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), claim: claim(), want: true},
		{name: "pod in another namespace", pod: pod(func(p *corev1.Pod) { p.Namespace = "other" }), claim: claim()},
		{name: "pod using another claim", pod: pod(func(p *corev1.Pod) { p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "logs" }), claim: claim()},
		{name: "pod with no volumes", pod: pod(func(p *corev1.Pod) { p.Spec.Volumes = nil }), claim: claim()},
		{name: "ephemeral volume of the pod", pod: pod(ephemeral), claim: ephClaim, want: true},
		{name: "ephemeral volume of a shut-down pod", pod: pod(ephemeral, shutDown), claim: ephClaim},
		{name: "ephemeral name clash with a claim the pod does not own", pod: pod(ephemeral), claim: foreignEph},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodUsesClaim(tt.pod, tt.claim); got != tt.want {
				t.Errorf("PodUsesClaim = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPodShutDown(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "running", pod: pod()},
		{name: "deleting with grace", pod: pod(func(p *corev1.Pod) {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(now))
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		})},
		{name: "deleting without a grace period field", pod: pod(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) })},
		{name: "deleting with grace zero", pod: pod(shutDown), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PodShutDown(tt.pod); got != tt.want {
				t.Errorf("PodShutDown = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFinalizerDecisions(t *testing.T) {
	deleting := ptr.To(metav1.NewTime(now))
	tests := []struct {
		name                    string
		finalizers              []string
		deletion                *metav1.Time
		wantCandidate, wantNeed bool
	}{
		{name: "new, without finalizer", wantNeed: true},
		{name: "with finalizer", finalizers: []string{pvcFinalizer}},
		{name: "with another finalizer only", finalizers: []string{"x"}, wantNeed: true},
		{name: "deleting with finalizer", finalizers: []string{"x", pvcFinalizer}, deletion: deleting, wantCandidate: true},
		{name: "deleting without finalizer", finalizers: []string{"x"}, deletion: deleting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claim()
			c.Finalizers, c.DeletionTimestamp = tt.finalizers, tt.deletion
			if got := DeletionCandidate(c, pvcFinalizer); got != tt.wantCandidate {
				t.Errorf("DeletionCandidate = %v, want %v", got, tt.wantCandidate)
			}
			if got := NeedsFinalizer(c, pvcFinalizer); got != tt.wantNeed {
				t.Errorf("NeedsFinalizer = %v, want %v", got, tt.wantNeed)
			}
		})
	}
	if diff := cmp.Diff([]string{"a", "b"}, withoutFinalizer([]string{"a", pvcFinalizer, "b", pvcFinalizer}, pvcFinalizer)); diff != "" {
		t.Errorf("withoutFinalizer (-want +got):\n%s", diff)
	}
}

func TestVolumeInUse(t *testing.T) {
	for phase, want := range map[corev1.PersistentVolumePhase]bool{
		corev1.VolumeBound: true, corev1.VolumeAvailable: false, corev1.VolumeReleased: false,
		corev1.VolumeFailed: false, corev1.VolumePending: false, "": false,
	} {
		pv := &corev1.PersistentVolume{Status: corev1.PersistentVolumeStatus{Phase: phase}}
		if got := VolumeInUse(pv); got != want {
			t.Errorf("VolumeInUse(%q) = %v, want %v", phase, got, want)
		}
	}
}
