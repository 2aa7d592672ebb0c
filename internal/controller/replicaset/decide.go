package replicaset

import (
	"math"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"knode/internal/controller/ownership"
	"knode/internal/controller/podstate"
)

// BurstReplicas caps the pods one pass creates or deletes for one
// ReplicaSet (upstream's --concurrent burst of 500).
const BurstReplicas = 500

var controllerKind = appsv1.SchemeGroupVersion.WithKind("ReplicaSet")

// Claim is how the pods of a ReplicaSet's namespace relate to it.
type Claim struct {
	// Owned are the active pods the ReplicaSet controls and selects.
	Owned []*corev1.Pod
	// Adopt are active orphans the selector matches; once adopted they
	// count as owned. Empty while the ReplicaSet is being deleted.
	Adopt []*corev1.Pod
	// Release are active pods the ReplicaSet controls that its selector no
	// longer matches: the controller reference must go. Empty while the ReplicaSet is being deleted.
	Release []*corev1.Pod
	// Terminating counts the pods it controls and selects that are being
	// deleted and have not finished.
	Terminating int32
}

// ClaimPods sorts pods (those of rs's namespace) as upstream's claim does.
// A pod is active when it has not finished (Succeeded, Failed) and is not
// being deleted; other controllers' pods are ignored.
func ClaimPods(rs *appsv1.ReplicaSet, pods []*corev1.Pod) Claim {
	var c Claim
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return c
	}
	deleting := rs.DeletionTimestamp != nil
	for _, pod := range pods {
		switch ownership.Relate(rs, sel, pod) {
		case ownership.Stray:
			if !deleting && active(pod) {
				c.Release = append(c.Release, pod)
			}
		case ownership.Owned:
			if terminating(pod) {
				c.Terminating++
			} else if active(pod) {
				c.Owned = append(c.Owned, pod)
			}
		case ownership.Orphan:
			if !deleting && active(pod) {
				c.Adopt = append(c.Adopt, pod)
			}
		}
	}
	return c
}

// Scale decides how rs reaches its replica count from the active pods it
// owns: create that many pods, or delete these, the pods it is cheapest to
// lose first (see Rank). At most BurstReplicas either way.
func Scale(rs *appsv1.ReplicaSet, owned []*corev1.Pod, now time.Time) (create int, remove []*corev1.Pod) {
	want := 1
	if rs.Spec.Replicas != nil {
		want = int(*rs.Spec.Replicas)
	}
	diff := len(owned) - want
	switch {
	case diff < 0:
		return min(-diff, BurstReplicas), nil
	case diff > 0:
		return 0, Rank(owned, owned, now)[:min(diff, BurstReplicas)]
	}
	return 0, nil
}

// Rank returns pods ordered for deletion, first the one to delete first,
// as upstream's ActivePodsWithRanks orders them:
//  1. not yet bound to a node before bound;
//  2. phase Pending, then Unknown, then Running;
//  3. not Ready before Ready;
//  4. lower controller.kubernetes.io/pod-deletion-cost first;
//  5. more pods of related on the same node first (doubled-up pods go);
//  6. among Ready pods, Ready for less time first, compared on a log2
//     scale of the time since (LogarithmicScaleDown), ties by UID;
//  7. more container restarts first;
//  8. newer first (created later), on the same log2 scale, ties by UID.
//
// related are the pods whose placement counts in rule 5 (the owner's
// active pods). pods is not changed.
func Rank(pods, related []*corev1.Pod, now time.Time) []*corev1.Pod {
	onNode := map[string]int{}
	for _, p := range related {
		if active(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	type ranked struct {
		pod  *corev1.Pod
		rank int
	}
	rs := make([]ranked, len(pods))
	for i, p := range pods {
		rs[i] = ranked{p, onNode[p.Spec.NodeName]}
	}
	sort.SliceStable(rs, func(i, j int) bool { return deleteFirst(rs[i].pod, rs[j].pod, rs[i].rank, rs[j].rank, now) })
	out := make([]*corev1.Pod, len(rs))
	for i := range rs {
		out[i] = rs[i].pod
	}
	return out
}

var phaseOrder = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// deleteFirst reports whether a should be deleted before b.
func deleteFirst(a, b *corev1.Pod, rankA, rankB int, now time.Time) bool {
	if a.Spec.NodeName != b.Spec.NodeName && (a.Spec.NodeName == "" || b.Spec.NodeName == "") {
		return a.Spec.NodeName == ""
	}
	if pa, pb := phaseOrder[a.Status.Phase], phaseOrder[b.Status.Phase]; pa != pb {
		return pa < pb
	}
	readyA, readyB := podstate.Ready(a), podstate.Ready(b)
	if readyA != readyB {
		return !readyA
	}
	if ca, cb := deletionCost(a), deletionCost(b); ca != cb {
		return ca < cb
	}
	if rankA != rankB {
		return rankA > rankB
	}
	if readyA && readyB {
		ta, tb := podstate.ReadySince(a), podstate.ReadySince(b)
		if !ta.Equal(tb) {
			if ta.IsZero() || tb.IsZero() {
				return afterOrZero(ta, tb)
			}
			if d := logRankDiff(ta, tb, now); d != 0 {
				return d < 0
			}
			return a.UID < b.UID
		}
	}
	if ra, rb := maxRestarts(a), maxRestarts(b); ra != rb {
		return ra > rb
	}
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		if ta.IsZero() || tb.IsZero() {
			return afterOrZero(ta, tb)
		}
		if d := logRankDiff(ta, tb, now); d != 0 {
			return d < 0
		}
		return a.UID < b.UID
	}
	return false
}

// afterOrZero: a zero time first, else the later time first.
func afterOrZero(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero()
	}
	return a.After(b)
}

// logRankDiff compares how long ago a and b were on a log2 scale:
// negative when a is in a more recent bucket.
func logRankDiff(a, b, now time.Time) int64 {
	bucket := func(t time.Time) int64 {
		d := now.Sub(t)
		if d <= 0 {
			return -1
		}
		return int64(math.Log2(float64(d)))
	}
	return bucket(a) - bucket(b)
}

// deletionCost reads controller.kubernetes.io/pod-deletion-cost; 0 when
// absent or not an int32.
func deletionCost(p *corev1.Pod) int32 {
	v, err := strconv.ParseInt(p.Annotations[corev1.PodDeletionCost], 10, 32)
	if err != nil {
		return 0
	}
	return int32(v)
}

// maxRestarts is the highest restart count of the pod's containers, then
// of its init containers (sidecars) as a tie-breaker, folded into one
// comparable number.
func maxRestarts(p *corev1.Pod) int64 {
	var regular, side int32
	for _, s := range p.Status.ContainerStatuses {
		regular = max(regular, s.RestartCount)
	}
	for _, s := range p.Status.InitContainerStatuses {
		side = max(side, s.RestartCount)
	}
	return int64(regular)<<32 | int64(side)
}

// NewPod is the pod rs creates: its template, named <rs>-<random>, with rs
// as its controller.
func NewPod(rs *appsv1.ReplicaSet) *corev1.Pod {
	t := rs.Spec.Template.DeepCopy()
	prefix := rs.Name + "-"
	if len(apivalidation.NameIsDNSSubdomain(prefix, true)) != 0 {
		prefix = rs.Name
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    prefix,
			Namespace:       rs.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, controllerKind)},
		},
		Spec: t.Spec,
	}
}

// Status is rs's status from the active pods it owns after a pass, as
// upstream computes it: replicas, fullyLabeledReplicas (pods carrying every
// template label), readyReplicas, availableReplicas (Ready for
// minReadySeconds), terminatingReplicas, observedGeneration, and the
// ReplicaFailure condition while creating or deleting fails (manageErr).
// next is when a Ready pod becomes available (zero: none pending).
func Status(rs *appsv1.ReplicaSet, owned []*corev1.Pod, terminatingPods int32, manageErr error, manageCreate bool, now time.Time) (s appsv1.ReplicaSetStatus, next time.Time) {
	s = *rs.Status.DeepCopy()
	template := labels.SelectorFromSet(rs.Spec.Template.Labels)
	var full, ready, available int32
	minReady := time.Duration(rs.Spec.MinReadySeconds) * time.Second
	for _, p := range owned {
		if template.Matches(labels.Set(p.Labels)) {
			full++
		}
		if !podstate.Ready(p) {
			continue
		}
		ready++
		if at, ok := podstate.AvailableAt(p, minReady); ok && (minReady == 0 || at.Before(now)) {
			available++
		} else if ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	switch failed := replicaFailure(s.Conditions); {
	case manageErr != nil && failed < 0:
		reason := "FailedDelete"
		if manageCreate {
			reason = "FailedCreate"
		}
		s.Conditions = append(s.Conditions, appsv1.ReplicaSetCondition{
			Type:               appsv1.ReplicaSetReplicaFailure,
			Status:             corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
			Reason:             reason,
			Message:            manageErr.Error(),
		})
	case manageErr == nil && failed >= 0:
		s.Conditions = append(s.Conditions[:failed:failed], s.Conditions[failed+1:]...)
		if len(s.Conditions) == 0 {
			s.Conditions = nil
		}
	}
	s.Replicas = int32(len(owned))
	s.FullyLabeledReplicas = full
	s.ReadyReplicas = ready
	s.AvailableReplicas = available
	s.TerminatingReplicas = &terminatingPods
	s.ObservedGeneration = rs.Generation
	return s, next
}

// StatusEqual reports whether writing b over a would change nothing.
func StatusEqual(a, b appsv1.ReplicaSetStatus) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

func replicaFailure(conds []appsv1.ReplicaSetCondition) int {
	for i, c := range conds {
		if c.Type == appsv1.ReplicaSetReplicaFailure {
			return i
		}
	}
	return -1
}

// active: not finished and not being deleted.
func active(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// terminating: being deleted and not finished.
func terminating(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}
