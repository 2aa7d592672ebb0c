package attachdetach

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/volume"
)

func mkNode(name string, ready bool, taints ...corev1.Taint) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{volume.AnnControllerManagedAttachDetach: "true"}},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}},
	}
}

func mkPod(name, node string, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c},
		}})
	}
	return p
}

func mkClaim(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

// mkPV is a CSI PV of driver with handle "handle-<claim>", bound to claim.
func mkPV(name, claim, drv string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: modes,
			ClaimRef:    &corev1.ObjectReference{Namespace: "default", Name: claim, UID: types.UID("uid-" + claim)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: drv, VolumeHandle: "handle-" + claim},
			},
		},
	}
}

func podRef(names ...string) []corev1.ObjectReference {
	var out []corev1.ObjectReference
	for _, n := range names {
		out = append(out, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: n, UID: types.UID("uid-" + n)})
	}
	return out
}

func wanted(node, claim string, exclusive bool, pods ...string) Wanted {
	return Wanted{
		Node: node, PV: "pv-" + claim, Driver: driver, Handle: "handle-" + claim,
		Volume: volume.UniqueName(driver, "handle-"+claim), Exclusive: exclusive, Pods: podRef(pods...),
	}
}

func TestDesire(t *testing.T) {
	oos := corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}
	now := metav1.Now()
	base := func() Snapshot {
		return Snapshot{
			Nodes:   []*corev1.Node{mkNode("n1", true)},
			Claims:  []*corev1.PersistentVolumeClaim{mkClaim("c1", "pv-c1")},
			Volumes: []*corev1.PersistentVolume{mkPV("pv-c1", "c1", driver)},
		}
	}
	cases := []struct {
		name        string
		edit        func(s *Snapshot)
		managedGone map[string]bool
		want        []Wanted
	}{
		{
			name: "pod on a managed node using a bound CSI claim",
			edit: func(s *Snapshot) { s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")} },
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "two pods on one node share one entry, pods sorted",
			edit: func(s *Snapshot) { s.Pods = []*corev1.Pod{mkPod("p2", "n1", "c1"), mkPod("p1", "n1", "c1", "c1")} },
			want: []Wanted{wanted("n1", "c1", false, "p1", "p2")},
		},
		{
			name: "the same volume on two nodes: one entry each, by node",
			edit: func(s *Snapshot) {
				s.Nodes = append(s.Nodes, mkNode("n0", true))
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1"), mkPod("p0", "n0", "c1")}
			},
			want: []Wanted{wanted("n0", "c1", false, "p0"), wanted("n1", "c1", false, "p1")},
		},
		{
			name: "ReadWriteOnce makes it exclusive",
			edit: func(s *Snapshot) {
				s.Volumes = []*corev1.PersistentVolume{mkPV("pv-c1", "c1", driver, corev1.ReadWriteMany, corev1.ReadWriteOnce)}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", true, "p1")},
		},
		{
			name: "ReadWriteOncePod makes it exclusive",
			edit: func(s *Snapshot) {
				s.Volumes = []*corev1.PersistentVolume{mkPV("pv-c1", "c1", driver, corev1.ReadWriteOncePod)}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", true, "p1")},
		},
		{
			name: "unscheduled pod",
			edit: func(s *Snapshot) { s.Pods = []*corev1.Pod{mkPod("p1", "", "c1")} },
		},
		{
			name: "node without the annotation",
			edit: func(s *Snapshot) {
				s.Nodes[0].Annotations = nil
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "the annotation's presence counts, whatever its value",
			edit: func(s *Snapshot) {
				s.Nodes[0].Annotations[volume.AnnControllerManagedAttachDetach] = "false"
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "deleted node that was managed keeps its pods' volumes",
			edit: func(s *Snapshot) {
				s.Nodes = nil
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			managedGone: map[string]bool{"n1": true},
			want:        []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "node never seen",
			edit: func(s *Snapshot) {
				s.Nodes = nil
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "succeeded pod",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1", "c1")
				p.Status.Phase = corev1.PodSucceeded
				s.Pods = []*corev1.Pod{p}
			},
		},
		{
			name: "failed pod",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1", "c1")
				p.Status.Phase = corev1.PodFailed
				s.Pods = []*corev1.Pod{p}
			},
		},
		{
			name: "pod being deleted with every container terminated or waiting",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1", "c1")
				p.DeletionTimestamp = &now
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{
					{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
					{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}},
				}
				s.Pods = []*corev1.Pod{p}
			},
		},
		{
			name: "pod being deleted with a container running keeps its volume",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1", "c1")
				p.DeletionTimestamp = &now
				p.Status.ContainerStatuses = []corev1.ContainerStatus{
					{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
					{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
				}
				s.Pods = []*corev1.Pod{p}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "pod being deleted with an ephemeral container running keeps its volume",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1", "c1")
				p.DeletionTimestamp = &now
				p.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{}}
				s.Pods = []*corev1.Pod{p}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			// PodGC, not the taint itself, releases it: by force-deleting
			// the pod.
			name: "running pod being deleted on a not-ready out-of-service node keeps it",
			edit: func(s *Snapshot) {
				s.Nodes = []*corev1.Node{mkNode("n1", false, oos)}
				p := mkPod("p1", "n1", "c1")
				p.DeletionTimestamp = &now
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
				s.Pods = []*corev1.Pod{p}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "running pod being deleted on a ready out-of-service node keeps it",
			edit: func(s *Snapshot) {
				s.Nodes = []*corev1.Node{mkNode("n1", true, oos)}
				p := mkPod("p1", "n1", "c1")
				p.DeletionTimestamp = &now
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
				s.Pods = []*corev1.Pod{p}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "pod not being deleted on a not-ready out-of-service node keeps it",
			edit: func(s *Snapshot) {
				s.Nodes = []*corev1.Node{mkNode("n1", false, oos)}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "claim missing",
			edit: func(s *Snapshot) {
				s.Claims = nil
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "claim in another namespace does not count",
			edit: func(s *Snapshot) {
				s.Claims[0].Namespace = "other"
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "claim pending",
			edit: func(s *Snapshot) {
				s.Claims[0].Status.Phase = corev1.ClaimPending
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "claim bound without a volume name",
			edit: func(s *Snapshot) {
				s.Claims[0].Spec.VolumeName = ""
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "PV missing",
			edit: func(s *Snapshot) {
				s.Volumes = nil
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "PV without claimRef",
			edit: func(s *Snapshot) {
				s.Volumes[0].Spec.ClaimRef = nil
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "PV bound to another claim's UID",
			edit: func(s *Snapshot) {
				s.Volumes[0].Spec.ClaimRef.UID = "someone-else"
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "PV that is not CSI",
			edit: func(s *Snapshot) {
				s.Volumes[0].Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "CSIDriver with attachRequired false",
			edit: func(s *Snapshot) {
				s.Drivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
		},
		{
			name: "CSIDriver with attachRequired true",
			edit: func(s *Snapshot) {
				s.Drivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: driver}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)}}}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "CSIDriver without attachRequired",
			edit: func(s *Snapshot) {
				s.Drivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: driver}}}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "another driver's CSIDriver says nothing about this one",
			edit: func(s *Snapshot) {
				s.Drivers = []*storagev1.CSIDriver{{ObjectMeta: metav1.ObjectMeta{Name: "other.example.com"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}
				s.Pods = []*corev1.Pod{mkPod("p1", "n1", "c1")}
			},
			want: []Wanted{wanted("n1", "c1", false, "p1")},
		},
		{
			name: "generic ephemeral volume whose claim the pod controls",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1")
				p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
				c := mkClaim("p1-scratch", "pv-p1-scratch")
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p1", UID: p.UID, Controller: ptr.To(true)}}
				s.Claims = []*corev1.PersistentVolumeClaim{c}
				s.Volumes = []*corev1.PersistentVolume{mkPV("pv-p1-scratch", "p1-scratch", driver)}
				s.Pods = []*corev1.Pod{p}
			},
			want: []Wanted{wanted("n1", "p1-scratch", false, "p1")},
		},
		{
			name: "generic ephemeral volume whose claim another pod controls",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1")
				p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
				c := mkClaim("p1-scratch", "pv-p1-scratch")
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p1", UID: "older-p1", Controller: ptr.To(true)}}
				s.Claims = []*corev1.PersistentVolumeClaim{c}
				s.Volumes = []*corev1.PersistentVolume{mkPV("pv-p1-scratch", "p1-scratch", driver)}
				s.Pods = []*corev1.Pod{p}
			},
		},
		{
			name: "inline and other volume kinds are not attached",
			edit: func(s *Snapshot) {
				p := mkPod("p1", "n1")
				p.Spec.Volumes = []corev1.Volume{
					{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "i", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: driver}}},
				}
				s.Pods = []*corev1.Pod{p}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			got := Desire(s, tc.managedGone)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("wanted (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMultiAttachMessage(t *testing.T) {
	ref := func(ns, name string) corev1.ObjectReference { return corev1.ObjectReference{Namespace: ns, Name: name} }
	cases := []struct {
		name    string
		holders []corev1.ObjectReference
		want    string
	}{
		{"no pod holds it", nil, `Multi-Attach error for volume "pv1" Volume is already exclusively attached to one node and can't be attached to another`},
		{"pods of the namespace", []corev1.ObjectReference{ref("ns", "b"), ref("ns", "a")}, `Multi-Attach error for volume "pv1" Volume is already used by pod(s) a, b`},
		{"both", []corev1.ObjectReference{ref("ns", "a"), ref("x", "b"), ref("y", "c")}, `Multi-Attach error for volume "pv1" Volume is already used by pod(s) a and 2 pod(s) in different namespaces`},
		{"other namespaces only", []corev1.ObjectReference{ref("x", "b")}, `Multi-Attach error for volume "pv1" Volume is already used by 1 pod(s) in different namespaces`},
	}
	for _, tc := range cases {
		if got := MultiAttachMessage("pv1", "ns", tc.holders); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
