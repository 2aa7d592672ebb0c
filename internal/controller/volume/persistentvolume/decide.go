package persistentvolume

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/volume"
)

// Event reasons, upstream's.
const (
	ReasonFailedBinding              = "FailedBinding"
	ReasonVolumeMismatch             = "VolumeMismatch"
	ReasonVolumeFailedRecycle        = "VolumeFailedRecycle"
	ReasonVolumeFailedDelete         = "VolumeFailedDelete"
	ReasonVolumeUnknownReclaimPolicy = "VolumeUnknownReclaimPolicy"
	ReasonExternalProvisioning       = "ExternalProvisioning"
	ReasonProvisioningFailed         = "ProvisioningFailed"
	ReasonWaitForFirstConsumer       = "WaitForFirstConsumer"
	ReasonWaitForPodScheduled        = "WaitForPodScheduled"
	ReasonClaimLost                  = "ClaimLost"
	ReasonClaimMisbound              = "ClaimMisbound"
)

// inTreePrefix starts the names of upstream's in-tree volume plugins; knode
// has none of them, so a class or volume naming one cannot be served.
const inTreePrefix = "kubernetes.io/"

// State is what one pass of the controller sees. Its objects are shared
// and never modified by the decisions.
type State struct {
	// Volumes by name.
	Volumes map[string]*corev1.PersistentVolume
	// Claims by "namespace/name".
	Claims map[string]*corev1.PersistentVolumeClaim
	// Classes by name.
	Classes map[string]*storagev1.StorageClass
	// Unscheduled maps a claim's "namespace/name" to the names of the
	// pods, not terminated and not yet scheduled, that use it. nil means
	// the pods were not looked at; the WaitForFirstConsumer event is then
	// the generic one.
	Unscheduled map[string][]string
}

// ClaimKey is the "namespace/name" key of a claim.
func ClaimKey(claim *corev1.PersistentVolumeClaim) string {
	return claim.Namespace + "/" + claim.Name
}

// refKey is the key of the claim a claimRef names.
func refKey(ref *corev1.ObjectReference) string { return ref.Namespace + "/" + ref.Name }

// sortedVolumes is s.Volumes by name.
func (s *State) sortedVolumes() []*corev1.PersistentVolume {
	out := make([]*corev1.PersistentVolume, 0, len(s.Volumes))
	for _, pv := range s.Volumes {
		out = append(out, pv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Event is an event a decision wants recorded.
type Event struct {
	// On is the object the event is about: a claim or a volume.
	On corev1.ObjectReference
	// Type is Normal or Warning.
	Type, Reason, Message string
}

// ClaimRef is the reference events about claim carry.
func ClaimRef(claim *corev1.PersistentVolumeClaim) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
}

// VolumeRef is the reference events about pv carry.
func VolumeRef(pv *corev1.PersistentVolume) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion}
}

// ClaimPlan is what to do with one claim. At most one of AssignClass,
// Bind and Provisioner is set.
type ClaimPlan struct {
	// AssignClass is the default class to write into the claim's
	// spec.storageClassName; nothing else happens to the claim in this
	// pass.
	AssignClass string
	// Bind names the volume to bind the claim to: the volume's claimRef,
	// its phase Bound, the claim's volumeName and annotations, then its
	// status Bound, each written only if it differs.
	Bind string
	// Provisioner is written into the claim's two storage-provisioner
	// annotations, after which the ExternalProvisioning event is recorded.
	Provisioner string
	// Phase, when set, is the claim's new phase (Pending or Lost); its
	// status access modes and capacity are cleared.
	Phase corev1.PersistentVolumeClaimPhase
	// PhaseEvent is recorded only if writing Phase changed the claim.
	PhaseEvent *Event
	// Events are recorded whatever the writes do. Upstream repeats them on
	// every pass; the controller records each once while it keeps being
	// wanted.
	Events []Event
	// Err is a state the controller cannot repair, reported as the pass's
	// error.
	Err error
}

// ExternalProvisioningMessage is the ExternalProvisioning event's message
// for provisioner.
func ExternalProvisioningMessage(provisioner string) string {
	return fmt.Sprintf("Waiting for a volume to be created either by the external provisioner '%s' "+
		"or manually by the system administrator. If volume creation is delayed, please verify that "+
		"the provisioner is running and correctly registered.", provisioner)
}

// delayBinding reports whether the claim's class binds at the first
// consumer. No class, or a class that does not exist, binds at once; a
// class without a binding mode is an error.
func delayBinding(s *State, claim *corev1.PersistentVolumeClaim) (bool, error) {
	name := volume.ClaimClass(claim)
	if name == "" {
		return false, nil
	}
	sc := s.Classes[name]
	if sc == nil {
		return false, nil
	}
	if sc.VolumeBindingMode == nil {
		return false, fmt.Errorf("VolumeBindingMode not set for StorageClass %q", name)
	}
	return *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer, nil
}

// DecideClaim is what one pass does with claim, as upstream's syncClaim
// decides it:
//
//   - A claim that has not completed binding (no bind-completed annotation)
//     and names no volume gets the best volume (FindVolume). Failing that,
//     a claim without any class gets the default class; a
//     WaitForFirstConsumer claim the scheduler has not yet given a node
//     (selected-node) waits, Pending, with the WaitForFirstConsumer (or
//     WaitForPodScheduled) event; a claim with a class is handed to that
//     class's external provisioner; a claim without a class stays Pending
//     with FailedBinding.
//   - A claim that names a volume is bound to it when the volume is free
//     and fits (CheckVolume; else VolumeMismatch) or is already bound or
//     pre-bound to it; it stays Pending while the volume is missing or
//     bound elsewhere (FailedBinding).
//   - A claim that completed binding is kept bound to its volume, and goes
//     Lost (ClaimLost, ClaimMisbound) when the volume is gone, its
//     volumeName was cleared, or the volume is bound to another claim.
func DecideClaim(s *State, claim *corev1.PersistentVolumeClaim) ClaimPlan {
	ref := ClaimRef(claim)
	if metav1.HasAnnotation(claim.ObjectMeta, volume.AnnBindCompleted) {
		return decideBoundClaim(s, claim, ref)
	}
	if claim.Spec.VolumeName != "" {
		return decideNamedClaim(s, claim, ref)
	}

	delay, err := delayBinding(s, claim)
	if err != nil {
		return ClaimPlan{Err: err}
	}
	pv, err := FindVolume(claim, s.sortedVolumes(), delay)
	if err != nil {
		return ClaimPlan{Err: fmt.Errorf("error finding PV for claim %q: %w", ClaimKey(claim), err)}
	}
	if pv != nil {
		return ClaimPlan{Bind: pv.Name}
	}
	if !HasClass(claim) {
		classes := make([]*storagev1.StorageClass, 0, len(s.Classes))
		for _, sc := range s.Classes {
			classes = append(classes, sc)
		}
		if def := DefaultClass(classes); def != nil {
			return ClaimPlan{AssignClass: def.Name}
		}
	}

	_, selected := claim.Annotations[volume.AnnSelectedNode]
	class := volume.ClaimClass(claim)
	switch {
	case delay && !selected:
		ev := Event{On: ref, Type: corev1.EventTypeNormal, Reason: ReasonWaitForFirstConsumer, Message: "waiting for first consumer to be created before binding"}
		if pods := s.Unscheduled[ClaimKey(claim)]; len(pods) == 1 {
			ev.Reason, ev.Message = ReasonWaitForPodScheduled, fmt.Sprintf("waiting for pod %s to be scheduled", pods[0])
		} else if len(pods) > 1 {
			ev.Reason, ev.Message = ReasonWaitForPodScheduled, fmt.Sprintf("waiting for pods %s to be scheduled", strings.Join(pods, ","))
		}
		return ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev}}
	case class != "":
		sc := s.Classes[class]
		if sc == nil {
			return ClaimPlan{Events: []Event{{On: ref, Type: corev1.EventTypeWarning, Reason: ReasonProvisioningFailed,
				Message: fmt.Sprintf("storageclass.storage.k8s.io %q not found", class)}}}
		}
		if strings.HasPrefix(sc.Provisioner, inTreePrefix) {
			return ClaimPlan{Events: []Event{{On: ref, Type: corev1.EventTypeWarning, Reason: ReasonProvisioningFailed,
				Message: "no volume plugin matched name: " + sc.Provisioner}}}
		}
		return ClaimPlan{Provisioner: sc.Provisioner}
	default:
		return ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{{On: ref, Type: corev1.EventTypeNormal, Reason: ReasonFailedBinding,
			Message: "no persistent volumes available for this claim and no storage class is set"}}}
	}
}

// decideNamedClaim is DecideClaim for a claim that names its volume and
// has not completed binding.
func decideNamedClaim(s *State, claim *corev1.PersistentVolumeClaim, ref corev1.ObjectReference) ClaimPlan {
	pv := s.Volumes[claim.Spec.VolumeName]
	switch {
	case pv == nil:
		return ClaimPlan{Phase: corev1.ClaimPending}
	case pv.Spec.ClaimRef == nil:
		if err := CheckVolume(pv, claim); err != nil {
			return ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{{On: ref, Type: corev1.EventTypeWarning, Reason: ReasonVolumeMismatch,
				Message: fmt.Sprintf("Cannot bind to requested volume %q: %s", pv.Name, err)}}}
		}
		return ClaimPlan{Bind: pv.Name}
	case BoundToClaim(pv, claim):
		return ClaimPlan{Bind: pv.Name}
	}
	ev := Event{On: ref, Type: corev1.EventTypeWarning, Reason: ReasonFailedBinding,
		Message: fmt.Sprintf("volume %q already bound to a different claim.", pv.Name)}
	if !metav1.HasAnnotation(claim.ObjectMeta, volume.AnnBoundByController) {
		return ClaimPlan{Phase: corev1.ClaimPending, Events: []Event{ev}}
	}
	// Only a removed bind-completed annotation gets a claim here.
	return ClaimPlan{Events: []Event{ev}, Err: fmt.Errorf("invalid binding of claim %q to volume %q: volume already claimed by %q",
		ClaimKey(claim), pv.Name, refKey(pv.Spec.ClaimRef))}
}

// decideBoundClaim is DecideClaim for a claim that completed binding.
func decideBoundClaim(s *State, claim *corev1.PersistentVolumeClaim, ref corev1.ObjectReference) ClaimPlan {
	lost := func(reason, msg string) ClaimPlan {
		return ClaimPlan{Phase: corev1.ClaimLost, PhaseEvent: &Event{On: ref, Type: corev1.EventTypeWarning, Reason: reason, Message: msg}}
	}
	if claim.Spec.VolumeName == "" {
		return lost(ReasonClaimLost, "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!")
	}
	pv := s.Volumes[claim.Spec.VolumeName]
	switch {
	case pv == nil:
		return lost(ReasonClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!")
	case pv.Spec.ClaimRef == nil, pv.Spec.ClaimRef.UID == claim.UID:
		// Either the volume came unbound or the claim is correctly bound:
		// binding again repairs the first and writes nothing for the second.
		return ClaimPlan{Bind: pv.Name}
	default:
		return lost(ReasonClaimMisbound, "Two claims are bound to the same volume, this one is bound incorrectly")
	}
}

// PhaseChange is one phase a volume is moved to.
type PhaseChange struct {
	Phase   corev1.PersistentVolumePhase
	Message string
	// Event is recorded only if the volume was not already in Phase.
	Event *Event
}

// VolumePlan is what to do with one volume.
type VolumePlan struct {
	// Unbind rolls the volume's binding back (UnbindVolume) before Phases
	// are written.
	Unbind bool
	// Phases are written in order, each only if the volume is not already
	// in it.
	Phases []PhaseChange
	// Events are recorded whatever the writes do, once while they keep
	// being wanted (see ClaimPlan.Events).
	Events []Event
}

// ClaimFor is the claim pv's claimRef names, as s holds it, or nil when it
// is missing or is another claim of that name (a different UID): the one
// the volume was bound to is gone.
func ClaimFor(s *State, pv *corev1.PersistentVolume) *corev1.PersistentVolumeClaim {
	ref := pv.Spec.ClaimRef
	if ref == nil {
		return nil
	}
	claim := s.Claims[refKey(ref)]
	if claim == nil || claim.UID != ref.UID {
		return nil
	}
	return claim
}

// DecideVolume is what one pass does with pv, as upstream's syncVolume
// decides it:
//
//   - a volume with no claimRef, or pre-bound to a claim without a UID, is
//     Available;
//   - a volume whose claim is gone (ClaimFor is nil) is Released (unless
//     it is already Released or Failed) and then reclaimed (Reclaim);
//   - a volume whose claim does not name it yet waits for the claim's
//     pass, or, when their volume modes differ, reports VolumeMismatch on
//     both;
//   - a volume whose claim names it is Bound;
//   - a volume whose claim names another volume is released and reclaimed
//     when it was provisioned with the Delete policy, and unbound
//     otherwise (Available again).
func DecideVolume(s *State, pv *corev1.PersistentVolume) VolumePlan {
	available := []PhaseChange{{Phase: corev1.VolumeAvailable}}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID == "" {
		return VolumePlan{Phases: available}
	}
	release := func() VolumePlan {
		var phases []PhaseChange
		if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
			phases = append(phases, PhaseChange{Phase: corev1.VolumeReleased})
		}
		return VolumePlan{Phases: append(phases, Reclaim(pv)...)}
	}
	claim := ClaimFor(s, pv)
	switch {
	case claim == nil:
		return release()
	case claim.Spec.VolumeName == "":
		if VolumeModeMismatch(claim, pv) {
			return VolumePlan{Events: []Event{
				{On: VolumeRef(pv), Type: corev1.EventTypeWarning, Reason: ReasonVolumeMismatch,
					Message: fmt.Sprintf("Cannot bind PersistentVolume to requested PersistentVolumeClaim %q due to incompatible volumeMode.", claim.Name)},
				{On: ClaimRef(claim), Type: corev1.EventTypeWarning, Reason: ReasonVolumeMismatch,
					Message: fmt.Sprintf("Cannot bind PersistentVolume %q to requested PersistentVolumeClaim due to incompatible volumeMode.", pv.Name)},
			}}
		}
		return VolumePlan{}
	case claim.Spec.VolumeName == pv.Name:
		return VolumePlan{Phases: []PhaseChange{{Phase: corev1.VolumeBound}}}
	case metav1.HasAnnotation(pv.ObjectMeta, volume.AnnDynamicallyProvisioned) && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete:
		return release()
	default:
		return VolumePlan{Unbind: true, Phases: available}
	}
}

// Reclaim is what the volume's reclaim policy does once it is released:
//
//   - Retain keeps it Released;
//   - Delete leaves it to the external provisioner named by its
//     provisioned-by annotation, or to the CSI driver's provisioner for a
//     CSI volume; any other volume (or one provisioned by an in-tree
//     plugin) has no deleter in knode and goes Failed with
//     VolumeFailedDelete;
//   - Recycle goes Failed with VolumeFailedRecycle (knode has no
//     recycler);
//   - any other policy goes Failed with VolumeUnknownReclaimPolicy.
func Reclaim(pv *corev1.PersistentVolume) []PhaseChange {
	failed := func(reason, msg string) []PhaseChange {
		return []PhaseChange{{Phase: corev1.VolumeFailed, Message: msg,
			Event: &Event{On: VolumeRef(pv), Type: corev1.EventTypeWarning, Reason: reason, Message: msg}}}
	}
	switch pv.Spec.PersistentVolumeReclaimPolicy {
	case corev1.PersistentVolumeReclaimRetain:
		return nil
	case corev1.PersistentVolumeReclaimRecycle:
		return failed(ReasonVolumeFailedRecycle, "No recycler plugin found for the volume!")
	case corev1.PersistentVolumeReclaimDelete:
		if err := deleter(pv); err != nil {
			return failed(ReasonVolumeFailedDelete, err.Error())
		}
		return nil
	default:
		return failed(ReasonVolumeUnknownReclaimPolicy, "Volume has unrecognized PersistentVolumeReclaimPolicy")
	}
}

// errNoDeletablePlugin is upstream's error when no in-tree plugin can
// delete a volume's storage.
var errNoDeletablePlugin = errors.New("no deletable volume plugin matched")

// deleter returns nil when something outside the PV controller deletes
// pv's storage (an external provisioner), or why nothing can.
func deleter(pv *corev1.PersistentVolume) error {
	if name := pv.Annotations[volume.AnnDynamicallyProvisioned]; name != "" {
		if strings.HasPrefix(name, inTreePrefix) {
			return fmt.Errorf("no volume plugin matched name: %s", name)
		}
		return nil
	}
	if pv.Spec.CSI != nil {
		return nil
	}
	return fmt.Errorf("error getting deleter volume plugin for volume %q: %w", pv.Name, errNoDeletablePlugin)
}
