package persistentvolume

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
)

const (
	immediate = storagev1.VolumeBindingImmediate
	wffc      = storagev1.VolumeBindingWaitForFirstConsumer
)

// ev is an event on the claim ns/c (as pvc("c") builds it).
func ev(typ, reason, msg string) Event {
	return Event{On: ClaimRef(pvc("c", "1Gi")), Type: typ, Reason: reason, Message: msg}
}

func TestDecideClaim(t *testing.T) {
	gold := sc("gold", "hostpath.csi.knode.io", immediate)
	goldWait := sc("gold", "hostpath.csi.knode.io", wffc)
	bound := claimAnn(annCompleted, "yes")
	selected := claimAnn("volume.kubernetes.io/selected-node", "node-1")
	tests := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		st    *State
		want  ClaimPlan
	}{
		{name: "binds the matching volume",
			claim: pvc("c", "1Gi"), st: state(gold, pv("v", "1Gi")),
			want: ClaimPlan{Bind: "v"}},
		{name: "no volume: the class's external provisioner",
			claim: pvc("c", "1Gi"), st: state(gold),
			want: ClaimPlan{Provisioner: "hostpath.csi.knode.io"}},
		{name: "class missing: ProvisioningFailed",
			claim: pvc("c", "1Gi"), st: state(),
			want: ClaimPlan{Events: []Event{ev(corev1.EventTypeWarning, ReasonProvisioningFailed, `storageclass.storage.k8s.io "gold" not found`)}}},
		{name: "in-tree provisioner: ProvisioningFailed",
			claim: pvc("c", "1Gi"), st: state(sc("gold", "kubernetes.io/no-provisioner", immediate)),
			want: ClaimPlan{Events: []Event{ev(corev1.EventTypeWarning, ReasonProvisioningFailed, "no volume plugin matched name: kubernetes.io/no-provisioner")}}},
		{name: "class without binding mode is an error",
			claim: pvc("c", "1Gi"), st: state(&storagev1.StorageClass{ObjectMeta: gold.ObjectMeta, Provisioner: "p"}),
			want: ClaimPlan{Err: cmpopts.AnyError}},
		{name: "wait for first consumer: no binding, the event, Pending",
			claim: pvc("c", "1Gi"), st: state(goldWait, pv("v", "1Gi")),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeNormal, ReasonWaitForFirstConsumer, "waiting for first consumer to be created before binding")}}},
		{name: "wait for first consumer with an unscheduled pod",
			claim: pvc("c", "1Gi"), st: func() *State { s := state(goldWait); s.Unscheduled = map[string][]string{"ns/c": {"web-0"}}; return s }(),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeNormal, ReasonWaitForPodScheduled, "waiting for pod web-0 to be scheduled")}}},
		{name: "wait for first consumer with two unscheduled pods",
			claim: pvc("c", "1Gi"), st: func() *State { s := state(goldWait); s.Unscheduled = map[string][]string{"ns/c": {"a", "b"}}; return s }(),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeNormal, ReasonWaitForPodScheduled, "waiting for pods a,b to be scheduled")}}},
		{name: "wait for first consumer: node selected, provision",
			claim: pvc("c", "1Gi", selected), st: state(goldWait, pv("v", "1Gi")),
			want: ClaimPlan{Provisioner: "hostpath.csi.knode.io"}},
		{name: "wait for first consumer: the scheduler pre-bound a volume",
			claim: pvc("c", "1Gi"), st: state(goldWait, pv("v", "1Gi", claimRef("c", "uid-c"), volAnn(annBound, "yes"))),
			want: ClaimPlan{Bind: "v"}},
		{name: "no class at all: the default class is assigned",
			claim: pvc("c", "1Gi", claimClass(nil)), st: state(sc("std", "p", immediate, isDefault)),
			want: ClaimPlan{AssignClass: "std"}},
		{name: "explicitly no class: no default, FailedBinding",
			claim: pvc("c", "1Gi", claimClass(ptr.To(""))), st: state(sc("std", "p", immediate, isDefault)),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeNormal, ReasonFailedBinding, "no persistent volumes available for this claim and no storage class is set")}}},
		{name: "no class, no default: FailedBinding",
			claim: pvc("c", "1Gi", claimClass(nil)), st: state(),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeNormal, ReasonFailedBinding, "no persistent volumes available for this claim and no storage class is set")}}},
		{name: "no class, a class-less volume fits: bound before any default",
			claim: pvc("c", "1Gi", claimClass(nil)), st: state(sc("std", "p", immediate, isDefault), pv("v", "1Gi", class(""))),
			want: ClaimPlan{Bind: "v"}},
		{name: "names a missing volume: Pending",
			claim: pvc("c", "1Gi", naming("v")), st: state(gold),
			want: ClaimPlan{Phase: corev1.ClaimPending}},
		{name: "names a free volume that fits",
			claim: pvc("c", "1Gi", naming("v")), st: state(gold, pv("v", "1Gi", volPhase(corev1.VolumePending))),
			want: ClaimPlan{Bind: "v"}},
		{name: "names a free volume that is too small",
			claim: pvc("c", "2Gi", naming("v")), st: state(gold, pv("v", "1Gi")),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeWarning, ReasonVolumeMismatch, `Cannot bind to requested volume "v": requested PV is too small`)}}},
		{name: "names a volume pre-bound to it",
			claim: pvc("c", "1Gi", naming("v")), st: state(gold, pv("v", "1Gi", claimRef("c", ""))),
			want: ClaimPlan{Bind: "v"}},
		{name: "names a volume bound elsewhere",
			claim: pvc("c", "1Gi", naming("v")), st: state(gold, pv("v", "1Gi", claimRef("d", "uid-d"))),
			want: ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev(corev1.EventTypeWarning, ReasonFailedBinding, `volume "v" already bound to a different claim.`)}}},
		{name: "controller's choice taken by another claim is an error",
			claim: pvc("c", "1Gi", naming("v"), claimAnn(annBound, "yes")), st: state(gold, pv("v", "1Gi", claimRef("d", "uid-d"))),
			want: ClaimPlan{Events: []Event{ev(corev1.EventTypeWarning, ReasonFailedBinding, `volume "v" already bound to a different claim.`)}, Err: cmpopts.AnyError}},
		{name: "bound claim whose volumeName was cleared is Lost",
			claim: pvc("c", "1Gi", bound), st: state(gold),
			want: ClaimPlan{Phase: corev1.ClaimLost, PhaseEvent: ptr.To(ev(corev1.EventTypeWarning, ReasonClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!"))}},
		{name: "bound claim whose volume is gone is Lost",
			claim: pvc("c", "1Gi", bound, naming("v")), st: state(gold),
			want: ClaimPlan{Phase: corev1.ClaimLost, PhaseEvent: ptr.To(ev(corev1.EventTypeWarning, ReasonClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!"))}},
		{name: "bound claim whose volume came unbound is bound again",
			claim: pvc("c", "1Gi", bound, naming("v")), st: state(gold, pv("v", "1Gi")),
			want: ClaimPlan{Bind: "v"}},
		{name: "bound claim whose volume is bound to it",
			claim: pvc("c", "1Gi", bound, naming("v")), st: state(gold, pv("v", "1Gi", claimRef("c", "uid-c"))),
			want: ClaimPlan{Bind: "v"}},
		{name: "bound claim whose volume is another claim's is misbound",
			claim: pvc("c", "1Gi", bound, naming("v")), st: state(gold, pv("v", "1Gi", claimRef("d", "uid-d"))),
			want: ClaimPlan{Phase: corev1.ClaimLost, PhaseEvent: ptr.To(ev(corev1.EventTypeWarning, ReasonClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly"))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideClaim(tt.st, tt.claim)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExternalProvisioningMessage(t *testing.T) {
	want := "Waiting for a volume to be created either by the external provisioner 'hostpath.csi.knode.io' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
	if got := ExternalProvisioningMessage("hostpath.csi.knode.io"); got != want {
		t.Errorf("got %q", got)
	}
}

func TestDecideVolume(t *testing.T) {
	boundClaim := pvc("c", "1Gi", naming("v"), claimAnn(annCompleted, "yes"))
	released := []PhaseChange{{Phase: corev1.VolumeReleased}}
	available := []PhaseChange{{Phase: corev1.VolumeAvailable}}
	provisioned := volAnn("pv.kubernetes.io/provisioned-by", "hostpath.csi.knode.io")
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		st   *State
		want VolumePlan
	}{
		{name: "unclaimed is Available", pv: pv("v", "1Gi", volPhase(corev1.VolumePending)), st: state(),
			want: VolumePlan{Phases: available}},
		{name: "claimRef removed from a Released volume: Available", pv: pv("v", "1Gi", volPhase(corev1.VolumeReleased)), st: state(),
			want: VolumePlan{Phases: available}},
		{name: "pre-bound without UID is Available", pv: pv("v", "1Gi", claimRef("c", "")), st: state(),
			want: VolumePlan{Phases: available}},
		{name: "claim names it: Bound", pv: pv("v", "1Gi", claimRef("c", "uid-c")), st: state(boundClaim),
			want: VolumePlan{Phases: []PhaseChange{{Phase: corev1.VolumeBound}}}},
		{name: "claim gone, Retain: Released only", pv: pv("v", "1Gi", claimRef("c", "uid-c"), volPhase(corev1.VolumeBound)), st: state(),
			want: VolumePlan{Phases: released}},
		{name: "claim replaced by one of another UID: Released", pv: pv("v", "1Gi", claimRef("c", "uid-old"), volPhase(corev1.VolumeBound)), st: state(boundClaim),
			want: VolumePlan{Phases: released}},
		{name: "claim gone, Delete, external provisioner: Released, left to it",
			pv: pv("v", "1Gi", claimRef("c", "uid-c"), volPhase(corev1.VolumeBound), policy(corev1.PersistentVolumeReclaimDelete), provisioned), st: state(),
			want: VolumePlan{Phases: released}},
		{name: "Released stays Released", pv: pv("v", "1Gi", claimRef("c", "uid-c"), volPhase(corev1.VolumeReleased)), st: state(),
			want: VolumePlan{}},
		{name: "claim not yet bound: left to the claim's pass", pv: pv("v", "1Gi", claimRef("c", "uid-c")), st: state(pvc("c", "1Gi")),
			want: VolumePlan{}},
		{name: "claim not yet bound, volume modes differ: VolumeMismatch on both",
			pv: pv("v", "1Gi", claimRef("c", "uid-c"), block), st: state(pvc("c", "1Gi")),
			want: VolumePlan{Events: []Event{
				{On: VolumeRef(pv("v", "1Gi")), Type: corev1.EventTypeWarning, Reason: ReasonVolumeMismatch, Message: `Cannot bind PersistentVolume to requested PersistentVolumeClaim "c" due to incompatible volumeMode.`},
				ev(corev1.EventTypeWarning, ReasonVolumeMismatch, `Cannot bind PersistentVolume "v" to requested PersistentVolumeClaim due to incompatible volumeMode.`),
			}}},
		{name: "claim bound elsewhere, provisioned with Delete: released",
			pv: pv("v", "1Gi", claimRef("c", "uid-c"), volPhase(corev1.VolumeBound), policy(corev1.PersistentVolumeReclaimDelete), provisioned),
			st: state(pvc("c", "1Gi", naming("w"))), want: VolumePlan{Phases: released}},
		{name: "claim bound elsewhere: unbound",
			pv: pv("v", "1Gi", claimRef("c", "uid-c"), volPhase(corev1.VolumeBound), volAnn(annBound, "yes")),
			st: state(pvc("c", "1Gi", naming("w"))), want: VolumePlan{Unbind: true, Phases: available}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecideVolume(tt.st, tt.pv)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReclaim(t *testing.T) {
	failed := func(v *corev1.PersistentVolume, reason, msg string) []PhaseChange {
		return []PhaseChange{{Phase: corev1.VolumeFailed, Message: msg, Event: &Event{On: VolumeRef(v), Type: corev1.EventTypeWarning, Reason: reason, Message: msg}}}
	}
	del := policy(corev1.PersistentVolumeReclaimDelete)
	noDeleter := pv("v", "1Gi", del, func(v *corev1.PersistentVolume) {
		v.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/data"}
	})
	inTree := pv("v", "1Gi", del, volAnn("pv.kubernetes.io/provisioned-by", "kubernetes.io/host-path"))
	recycle := pv("v", "1Gi", policy(corev1.PersistentVolumeReclaimRecycle))
	unknown := pv("v", "1Gi", policy("Shred"))
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want []PhaseChange
	}{
		{name: "Retain", pv: pv("v", "1Gi")},
		{name: "Delete, provisioned externally", pv: pv("v", "1Gi", del, volAnn("pv.kubernetes.io/provisioned-by", "hostpath.csi.knode.io"))},
		{name: "Delete, static CSI volume", pv: pv("v", "1Gi", del, csiSource)},
		{name: "Delete, no deleter", pv: noDeleter,
			want: failed(noDeleter, ReasonVolumeFailedDelete, `error getting deleter volume plugin for volume "v": no deletable volume plugin matched`)},
		{name: "Delete, in-tree provisioner", pv: inTree,
			want: failed(inTree, ReasonVolumeFailedDelete, "no volume plugin matched name: kubernetes.io/host-path")},
		{name: "Recycle", pv: recycle, want: failed(recycle, ReasonVolumeFailedRecycle, "No recycler plugin found for the volume!")},
		{name: "unknown policy", pv: unknown, want: failed(unknown, ReasonVolumeUnknownReclaimPolicy, "Volume has unrecognized PersistentVolumeReclaimPolicy")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Reclaim(tt.pv)); diff != "" {
				t.Errorf("Reclaim (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReleaseThenReclaim(t *testing.T) {
	v := pv("v", "1Gi", claimRef("c", "uid-c"), volPhase(corev1.VolumeBound), policy(corev1.PersistentVolumeReclaimRecycle))
	got := DecideVolume(state(), v)
	var phases []corev1.PersistentVolumePhase
	for _, ch := range got.Phases {
		phases = append(phases, ch.Phase)
	}
	if diff := cmp.Diff([]corev1.PersistentVolumePhase{corev1.VolumeReleased, corev1.VolumeFailed}, phases); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	// A Failed volume is reclaimed again but not moved back to Released.
	v.Status.Phase = corev1.VolumeFailed
	if got := DecideVolume(state(), v); len(got.Phases) != 1 || got.Phases[0].Phase != corev1.VolumeFailed {
		t.Errorf("Failed volume: %+v", got.Phases)
	}
}

func TestUnscheduledUsers(t *testing.T) {
	pod := func(name, node string, phase corev1.PodPhase, claims ...string) corev1.Pod {
		p := corev1.Pod{}
		p.Name, p.Namespace, p.Spec.NodeName, p.Status.Phase = name, "ns", node, phase
		for _, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "v-" + c,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
		return p
	}
	eph := pod("e", "", corev1.PodPending)
	eph.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}}
	got := UnscheduledUsers([]corev1.Pod{
		pod("b", "", corev1.PodPending, "data", "data"),
		pod("a", "", corev1.PodPending, "data"),
		pod("scheduled", "node-1", corev1.PodRunning, "data"),
		pod("done", "", corev1.PodFailed, "data"),
		eph,
	})
	want := map[string][]string{"ns/data": {"a", "b"}, "ns/e-scratch": {"e"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UnscheduledUsers (-want +got):\n%s", diff)
	}
}
