package attachdetach

import (
	"cmp"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ForceReason says why a detach did not wait for the node to unmount: the
// value of the reason label of the forced-detach counter.
type ForceReason string

const (
	// Verified: the detach waited until the node no longer reported the
	// volume in use (or the wait was not needed).
	Verified ForceReason = ""
	// ReasonTimeout: MaxWaitForUnmountDuration passed since the detach was
	// first wanted.
	ReasonTimeout ForceReason = "timeout"
	// ReasonOutOfService: the node carries the out-of-service taint.
	ReasonOutOfService ForceReason = "out-of-service"
)

// NodeView is what the decision knows of one node.
type NodeView struct {
	// Exists is false for a node that is not in the snapshot (deleted).
	Exists bool
	// Managed: the node carries the controller-managed annotation (for a
	// deleted node: it did when last seen and still has wanted volumes).
	Managed bool
	// Ready: the node's Ready condition is True. False when !Exists.
	Ready bool
	// OutOfService: the node carries the out-of-service taint key. False
	// when !Exists.
	OutOfService bool
	// InUse is status.volumesInUse, or for a deleted node the last value
	// seen. When InUseKnown is false (a node never seen) every volume
	// counts as in use.
	InUse      []corev1.UniqueVolumeName
	InUseKnown bool
	// Attached is status.volumesAttached as it is now.
	Attached []corev1.AttachedVolume
}

func (n NodeView) inUse(v corev1.UniqueVolumeName) bool {
	return !n.InUseKnown || v == "" || slices.Contains(n.InUse, v)
}

// Attachment is one VolumeAttachment that names a PV, as the decision sees
// it.
type Attachment struct {
	Name string
	UID  types.UID
	Node string
	PV   string
	// Volume is the unique volume name, "" when neither its PV nor its
	// node's status tells it.
	Volume corev1.UniqueVolumeName
	// Attached is status.attached.
	Attached bool
	// Deleting: the attachment is being deleted (its detach is under way),
	// or this controller already asked for its deletion.
	Deleting bool
}

// World is the input of Decide.
type World struct {
	// Nodes holds every node that exists, and every deleted node that an
	// attachment or a Wanted names.
	Nodes map[string]NodeView
	// Wanted is the output of Desire.
	Wanted []Wanted
	// Attachments are the VolumeAttachments that name a PV.
	Attachments []Attachment
	// DetachRequested holds, by attachment name, when the controller first
	// found the attachment unwanted (the previous Plan's DetachRequested).
	DetachRequested map[string]time.Time
}

// Params are the reconciler's settings.
type Params struct {
	// MaxWaitForUnmount is how long a detach of a volume the node still
	// reports in use waits before it is forced (when the node is not
	// Ready).
	MaxWaitForUnmount time.Duration
	// DisableForceDetachOnTimeout turns the forced detach on timeout off.
	DisableForceDetachOnTimeout bool
}

// Detach is one attachment to delete.
type Detach struct {
	Attachment
	// Forced is why the unmount was not verified; Verified when it was.
	Forced ForceReason
}

// NodeStatus is the status.volumesAttached one node should carry.
type NodeStatus struct {
	Node            string
	VolumesAttached []corev1.AttachedVolume
}

// Plan is what one pass does, in this order: write the Status of each node
// that has a Detach; delete the Detach attachments whose node's write
// succeeded (or whose node is gone); create the Attach attachments; write
// the remaining Status entries.
type Plan struct {
	Detach []Detach
	// Waiting are unwanted attachments left in place because their node
	// still reports the volume in use.
	Waiting []Attachment
	Attach  []Wanted
	// Blocked are wanted volumes not attached because they are Exclusive
	// and attached to another node.
	Blocked []Wanted
	// Status lists the existing managed nodes whose status.volumesAttached
	// must change, and those with a Detach, sorted by node.
	Status []NodeStatus
	// DetachRequested is the next pass's World.DetachRequested.
	DetachRequested map[string]time.Time
	// NextForce is the earliest time a Waiting attachment's detach becomes
	// forced by the timeout; zero when none will. A pass must run strictly
	// after it to act.
	NextForce time.Time
}

// Decide reconciles w at now, as upstream's reconciler does (section 10 of
// the node facts). Detaches come first, so that a volume moving to another
// node is freed before it is wanted there. For each attachment on a
// managed or deleted node that is not wanted and not already being
// deleted:
//
//  1. the detach-request time is recorded on first sight and elapsed is
//     measured from it;
//  2. timeoutExpired = elapsed > MaxWaitForUnmount && !DisableForceDetachOnTimeout;
//  3. forceDetach = the node is not Ready (or gone) && timeoutExpired;
//  4. outOfService = the node carries the out-of-service taint key;
//  5. while the node reports the volume in use and neither 3 nor 4 holds,
//     it waits;
//  6. otherwise it is removed from the node's status.volumesAttached (the
//     node's status is written, whether or not it looks changed) and
//     detached, Forced ReasonTimeout when timeoutExpired, else
//     ReasonOutOfService when outOfService, else Verified.
//
// A wanted attachment that is attached has its detach-request time
// cleared. A wanted volume without an attachment is attached, unless it is
// Exclusive and attached to another node, or its node is gone. Attachments
// on existing nodes that are not managed are left alone. Every existing
// managed node's status.volumesAttached lists the attached, not-deleting
// attachments of the node that are not detached by this plan, by name,
// with an empty device path, as upstream's CSI attacher reports it.
func Decide(w World, p Params, now time.Time) Plan {
	plan := Plan{DetachRequested: map[string]time.Time{}}
	wanted := make(map[string]bool, len(w.Wanted))
	for _, x := range w.Wanted {
		wanted[x.AttachmentName()] = true
	}
	atts := slices.Clone(w.Attachments)
	slices.SortFunc(atts, func(a, b Attachment) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Name, b.Name))
	})

	detached := map[string]bool{}
	byName := make(map[string]Attachment, len(atts))
	for _, a := range atts {
		byName[a.Name] = a
		node := w.Nodes[a.Node]
		if node.Exists && !node.Managed || a.Deleting {
			continue
		}
		if wanted[a.Name] {
			if t, ok := w.DetachRequested[a.Name]; ok && !a.Attached {
				plan.DetachRequested[a.Name] = t
			}
			continue
		}
		requested, ok := w.DetachRequested[a.Name]
		if !ok {
			requested = now
		}
		plan.DetachRequested[a.Name] = requested
		elapsed := now.Sub(requested)
		timeoutExpired := elapsed > p.MaxWaitForUnmount && !p.DisableForceDetachOnTimeout
		healthy := node.Exists && node.Ready
		forceDetach := !healthy && timeoutExpired
		if node.inUse(a.Volume) && !forceDetach && !node.OutOfService {
			plan.Waiting = append(plan.Waiting, a)
			if !healthy && !p.DisableForceDetachOnTimeout {
				due := requested.Add(p.MaxWaitForUnmount)
				if plan.NextForce.IsZero() || due.Before(plan.NextForce) {
					plan.NextForce = due
				}
			}
			continue
		}
		d := Detach{Attachment: a}
		switch {
		case timeoutExpired:
			d.Forced = ReasonTimeout
		case node.OutOfService:
			d.Forced = ReasonOutOfService
		}
		plan.Detach = append(plan.Detach, d)
		detached[a.Name] = true
	}

	for _, x := range w.Wanted {
		if !w.Nodes[x.Node].Exists {
			continue
		}
		if _, ok := byName[x.AttachmentName()]; ok {
			continue
		}
		if x.Exclusive && attachedElsewhere(atts, x) {
			plan.Blocked = append(plan.Blocked, x)
			continue
		}
		plan.Attach = append(plan.Attach, x)
	}

	detachOn := map[string]bool{}
	for _, d := range plan.Detach {
		detachOn[d.Node] = true
	}
	for _, name := range slices.Sorted(maps.Keys(w.Nodes)) {
		node := w.Nodes[name]
		if !node.Exists || !node.Managed {
			continue
		}
		var want []corev1.AttachedVolume
		for _, a := range atts {
			if a.Node == name && a.Attached && !a.Deleting && !detached[a.Name] && a.Volume != "" {
				want = append(want, corev1.AttachedVolume{Name: a.Volume})
			}
		}
		slices.SortFunc(want, func(a, b corev1.AttachedVolume) int { return cmp.Compare(a.Name, b.Name) })
		want = slices.CompactFunc(want, func(a, b corev1.AttachedVolume) bool { return a.Name == b.Name })
		// A node with a detach is written even when its status looks
		// right: the view may be stale, and the detach must not start
		// before the node's status is known not to list the volume.
		if !sameAttached(node.Attached, want) || detachOn[name] {
			plan.Status = append(plan.Status, NodeStatus{Node: name, VolumesAttached: want})
		}
	}
	return plan
}

// attachedElsewhere reports whether x's volume is attached to a node other
// than x's. An attachment being detached still counts until it is gone.
func attachedElsewhere(atts []Attachment, x Wanted) bool {
	for _, a := range atts {
		if a.Node == x.Node || !a.Attached {
			continue
		}
		if a.Volume == x.Volume || a.Volume == "" && a.PV == x.PV {
			return true
		}
	}
	return false
}

// sameAttached compares two volumesAttached lists as sets.
func sameAttached(a, b []corev1.AttachedVolume) bool {
	if len(a) != len(b) {
		return false
	}
	set := make(map[corev1.AttachedVolume]int, len(a))
	for _, v := range a {
		set[v]++
	}
	for _, v := range b {
		if set[v] == 0 {
			return false
		}
		set[v]--
	}
	return true
}
