package statefulset

import (
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/controller/ownership"
	"knode/internal/controller/podstate"
)

// MaxBatchSize caps a Parallel phase's batch, as upstream's MaxBatchSize.
const MaxBatchSize = 500

// Claim is how the pods of a StatefulSet's namespace relate to it.
type Claim struct {
	// Owned are the pods the set controls whose labels its selector
	// matches and whose names are <set>-<ordinal>, whatever their phase
	// or deletion.
	Owned []*corev1.Pod
	// Adopt are orphans, not being deleted, that the set would own.
	// Empty while the set is being deleted.
	Adopt []*corev1.Pod
	// Release are pods the set controls that its selector or name no
	// longer matches. Empty while the set is being deleted.
	Release []*corev1.Pod
}

// ClaimPods sorts pods as upstream's ClaimPods does with the filter
// isMemberOf: a pod is the set's when the selector matches its labels and
// its name is <set>-<number>. Other controllers' pods are never touched.
func ClaimPods(set *appsv1.StatefulSet, pods []*corev1.Pod) Claim {
	var c Claim
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil {
		return c
	}
	deleting := set.DeletionTimestamp != nil
	for _, p := range pods {
		member := isMember(set, p)
		switch ownership.Relate(set, sel, p) {
		case ownership.Owned:
			if member {
				c.Owned = append(c.Owned, p)
			} else if !deleting {
				c.Release = append(c.Release, p)
			}
		case ownership.Stray:
			if !deleting {
				c.Release = append(c.Release, p)
			}
		case ownership.Orphan:
			if member && !deleting && p.DeletionTimestamp == nil {
				c.Adopt = append(c.Adopt, p)
			}
		}
	}
	return c
}

// ActionKind is what an Action writes.
type ActionKind int

const (
	// CreatePod creates NewClaims, then Pod, then applies ClaimUpdates.
	// Any DeletingClaims fail it before the pod is created.
	CreatePod ActionKind = iota + 1
	// DeletePod deletes Pod.
	DeletePod
	// UpdatePod brings an existing pod in line with its identity, storage
	// and claims: it creates NewClaims (DeletingClaims fail it), applies
	// ClaimUpdates, and writes Pod when PodChanged.
	UpdatePod
	// EnsureClaims creates the missing claims of a Pending pod and applies
	// ClaimUpdates; DeletingClaims fail it.
	EnsureClaims
	// FixClaims applies ClaimUpdates for a condemned pod.
	FixClaims
)

func (k ActionKind) String() string {
	switch k {
	case CreatePod:
		return "CreatePod"
	case DeletePod:
		return "DeletePod"
	case UpdatePod:
		return "UpdatePod"
	case EnsureClaims:
		return "EnsureClaims"
	case FixClaims:
		return "FixClaims"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one write of a plan, about one pod. Its fields are shared
// with the plan's inputs where unchanged: the executor must not modify
// them.
type Action struct {
	Kind ActionKind
	// Pod is the pod to create or delete, or the pod whose claims (or
	// self, with PodChanged) are updated.
	Pod        *corev1.Pod
	PodChanged bool
	// NewClaims are claims to create, with the owner references the
	// retention policy wants.
	NewClaims []*corev1.PersistentVolumeClaim
	// DeletingClaims are the errors for the pod's claims that are being
	// deleted: the action fails with them.
	DeletingClaims []error
	// ClaimUpdates are existing claims with corrected owner references.
	ClaimUpdates []*corev1.PersistentVolumeClaim
	// ConflictingClaims name claims another controller holds, each
	// reported by a ConflictingController warning.
	ConflictingClaims []string
	// Reason says why a pod is deleted: "failed", "succeeded", "scale
	// down" or "update".
	Reason string
	// Index is the pod's position in its phase (ordinal order for the
	// pods in range, descending ordinals for the condemned), for the
	// batches of a Parallel set.
	Index int
}

// Plan is one pass's writes for a StatefulSet, in upstream's order of
// phases: the pods in range (create, recreate, update), the condemned
// pods' claims, the condemned pods (scale down), the rolling update.
//
// Monotonic (OrderedReady) plans hold only what upstream does before it
// stops at its first blocking pod; the executor runs them in order and
// stops at the first failure. Parallel plans run phase by phase in
// batches of 1, 2, 4, ... positions (at most MaxBatchSize); a batch with a
// failure ends the pass.
type Plan struct {
	Monotonic bool
	// Replicas, CondemnedClaims, ScaleDown and Rolling are the phases.
	Replicas        []Action
	CondemnedClaims []Action
	ScaleDown       []Action
	Rolling         []Action
	// InRange are the pods at the ordinals the set keeps, in ordinal
	// order; a missing pod is the pod to create, which has no uid.
	InRange []*corev1.Pod
	// Condemned are the set's pods at other ordinals, highest first.
	Condemned []*corev1.Pod
	// Wait says what the pass stops at, "" when it does not stop (for
	// logs and tests).
	Wait string
}

// Actions are the plan's actions in the order they run.
func (p *Plan) Actions() []Action {
	var out []Action
	for _, ph := range [][]Action{p.Replicas, p.CondemnedClaims, p.ScaleDown, p.Rolling} {
		out = append(out, ph...)
	}
	return out
}

// Decide plans one pass for set, as upstream's updateStatefulSet (1.33,
// default feature gates): pods are the pods set owns (ClaimPods), current
// and update its revisions, claims the PVCs of its namespace by name.
//
// Pods at ordinals [start, start+replicas) are kept; missing ones are
// created from the current revision below a RollingUpdate partition and
// from the update revision otherwise. Failed and Succeeded pods are
// deleted (and recreated once gone). A pod being deleted keeps its
// ordinal until it is gone. OrderedReady (monotonic) stops at the first
// pod that is missing (after creating it), terminating, not Running and
// Ready, or not available (minReadySeconds); Parallel does not wait. Only
// then are pods at other ordinals deleted, highest first (OrderedReady:
// one per pass, each only once all others are healthy, save the first
// unhealthy one), and then, for RollingUpdate, the highest pod at or above
// the partition that is not at the update revision, once every pod above
// it is healthy (maxUnavailable is ignored, as with MaxUnavailableStatefulSet
// off). A set being deleted gets no actions.
func Decide(set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, pods []*corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim, now time.Time) (Plan, error) {
	var plan Plan
	currentSet, err := ApplyRevision(set, current)
	if err != nil {
		return plan, err
	}
	updateSet, err := ApplyRevision(set, update)
	if err != nil {
		return plan, err
	}
	n, start := replicaCount(set), startOrdinal(set)
	replicas := make([]*corev1.Pod, max(n, 0))
	var condemned []*corev1.Pod
	for _, p := range pods {
		switch ord := Ordinal(p); {
		case inRange(p, set):
			replicas[ord-start] = p
		case ord >= 0:
			condemned = append(condemned, p)
		}
	}
	for i := range replicas {
		if replicas[i] == nil {
			replicas[i] = versionedPod(currentSet, updateSet, current.Name, update.Name, start+i)
		}
	}
	sort.SliceStable(condemned, func(i, j int) bool { return Ordinal(condemned[i]) > Ordinal(condemned[j]) })
	plan.InRange, plan.Condemned = replicas, condemned

	var firstUnhealthy *corev1.Pod
	for _, p := range replicas {
		if firstUnhealthy == nil && !healthy(p) {
			firstUnhealthy = p
		}
	}
	for i := len(condemned) - 1; i >= 0 && firstUnhealthy == nil; i-- {
		if !healthy(condemned[i]) {
			firstUnhealthy = condemned[i]
		}
	}

	if set.DeletionTimestamp != nil {
		return plan, nil
	}
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	plan.Monotonic = monotonic
	minReady := time.Duration(set.Spec.MinReadySeconds) * time.Second

	// The pods in range, as upstream's processReplica.
	for i, p := range replicas {
		stop, wait := decideReplica(&plan, set, updateSet, p, i, claims, monotonic, minReady, now)
		if stop && monotonic {
			plan.Wait = wait
			return plan, nil
		}
	}

	// The condemned pods' claims follow the retention policy first.
	for i, p := range condemned {
		if !claimsMatch(updateSet, p, claims) {
			fixed, conflicting := claimFixes(updateSet, p, claims)
			plan.CondemnedClaims = append(plan.CondemnedClaims, Action{Kind: FixClaims, Pod: p, ClaimUpdates: fixed, ConflictingClaims: conflicting, Index: i})
		}
	}

	// Scale down, highest ordinal first, as upstream's processCondemned.
	for i, p := range condemned {
		if terminating(p) {
			if monotonic {
				plan.Wait = fmt.Sprintf("waiting for Pod %s to Terminate prior to scale down", p.Name)
				return plan, nil
			}
			continue
		}
		blocker := p.Name
		if firstUnhealthy != nil {
			blocker = firstUnhealthy.Name
		}
		if monotonic && p != firstUnhealthy && !runningAndReady(p) {
			plan.Wait = fmt.Sprintf("waiting for Pod %s to be Running and Ready prior to scale down", blocker)
			return plan, nil
		}
		if monotonic && p != firstUnhealthy && !podstate.Available(p, minReady, now) {
			plan.Wait = fmt.Sprintf("waiting for Pod %s to be Available prior to scale down", blocker)
			return plan, nil
		}
		plan.ScaleDown = append(plan.ScaleDown, Action{Kind: DeletePod, Pod: p, Reason: "scale down", Index: i})
		if monotonic {
			return plan, nil
		}
	}

	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return plan, nil
	}

	// The rolling update: one pod at a time, highest ordinal first, down
	// to the partition.
	updateMin := 0
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		updateMin = int(*ru.Partition)
	}
	deleted := map[*corev1.Pod]bool{}
	for _, a := range plan.Replicas {
		if a.Kind == DeletePod {
			deleted[a.Pod] = true
		}
	}
	for target := len(replicas) - 1; target >= updateMin; target-- {
		p := replicas[target]
		if deleted[p] {
			// Deleted earlier in this pass: terminating from now on.
			plan.Wait = fmt.Sprintf("waiting for Pod %s to update", p.Name)
			return plan, nil
		}
		if revisionOf(p) != update.Name && !terminating(p) && p.UID != "" {
			plan.Rolling = append(plan.Rolling, Action{Kind: DeletePod, Pod: p, Reason: "update", Index: target})
			return plan, nil
		}
		if !healthy(p) {
			plan.Wait = fmt.Sprintf("waiting for Pod %s to update", p.Name)
			return plan, nil
		}
	}
	return plan, nil
}

// decideReplica appends what upstream's processReplica does for the pod
// at position i, and says whether it stops a monotonic pass and why.
func decideReplica(plan *Plan, set, updateSet *appsv1.StatefulSet, p *corev1.Pod, i int, claims map[string]*corev1.PersistentVolumeClaim, monotonic bool, minReady time.Duration, now time.Time) (stop bool, wait string) {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		reason := "failed"
		if p.Status.Phase == corev1.PodSucceeded {
			reason = "succeeded"
		}
		if p.DeletionTimestamp == nil {
			plan.Replicas = append(plan.Replicas, Action{Kind: DeletePod, Pod: p, Reason: reason, Index: i})
		}
		return true, fmt.Sprintf("waiting for %s Pod %s to be gone", reason, p.Name)
	}
	if !created(p) {
		if claimIsStale(set, p, claims) {
			return true, fmt.Sprintf("waiting for the stale claims of Pod %s to be deleted", p.Name)
		}
		create, deleting := missingClaims(set, p, claims)
		fixed, conflicting := claimFixes(set, p, claims)
		plan.Replicas = append(plan.Replicas, Action{
			Kind: CreatePod, Pod: p, NewClaims: create, DeletingClaims: deleting,
			ClaimUpdates: fixed, ConflictingClaims: conflicting, Index: i,
		})
		// A pod just created is not created in this pass's eyes; a
		// monotonic pass stops here, a parallel one has nothing more.
		return true, fmt.Sprintf("waiting for Pod %s to be created", p.Name)
	}
	claimsDone := false
	if p.Status.Phase == corev1.PodPending {
		create, deleting := missingClaims(set, p, claims)
		fixed, conflicting := claimFixes(set, p, claims)
		if len(create)+len(deleting)+len(fixed)+len(conflicting) > 0 {
			plan.Replicas = append(plan.Replicas, Action{
				Kind: EnsureClaims, Pod: p, NewClaims: create, DeletingClaims: deleting,
				ClaimUpdates: fixed, ConflictingClaims: conflicting, Index: i,
			})
		}
		claimsDone = true
	}
	if monotonic {
		switch {
		case terminating(p):
			return true, fmt.Sprintf("waiting for Pod %s to Terminate", p.Name)
		case !runningAndReady(p):
			return true, fmt.Sprintf("waiting for Pod %s to be Running and Ready", p.Name)
		case !podstate.Available(p, minReady, now):
			return true, fmt.Sprintf("waiting for Pod %s to be Available", p.Name)
		}
	}
	retentionOK := claimsDone || claimsMatch(updateSet, p, claims)
	if identityMatches(set, p) && storageMatches(set, p) && retentionOK {
		return false, ""
	}
	a := Action{Kind: UpdatePod, Pod: p, Index: i}
	q := p
	if !identityMatches(updateSet, p) || !storageMatches(updateSet, p) {
		q = p.DeepCopy()
		a.PodChanged = true
		if !identityMatches(updateSet, q) {
			updateIdentity(updateSet, q)
		}
		if !storageMatches(updateSet, q) {
			updateStorage(updateSet, q)
			a.NewClaims, a.DeletingClaims = missingClaims(updateSet, q, claims)
		}
		a.Pod = q
	}
	if !claimsMatch(updateSet, q, claims) {
		a.ClaimUpdates, a.ConflictingClaims = claimFixes(updateSet, q, claims)
	}
	plan.Replicas = append(plan.Replicas, a)
	return false, ""
}

// PodsAfter are the plan's pods as its writes left them, the pods the
// status counts: a pod created is the server's answer in created (by
// name), a pod deleted (deleted by name) is counted as terminating from
// now, and a pod that was to be created but was not is left out.
func (p *Plan) PodsAfter(created map[string]*corev1.Pod, deleted map[string]bool, now time.Time) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(p.InRange)+len(p.Condemned))
	add := func(pod *corev1.Pod) {
		switch {
		case pod.UID == "":
			if c := created[pod.Name]; c != nil {
				out = append(out, c)
			}
		case deleted[pod.Name] && pod.DeletionTimestamp == nil:
			cp := pod.DeepCopy()
			cp.DeletionTimestamp = &metav1.Time{Time: now}
			out = append(out, cp)
		default:
			out = append(out, pod)
		}
	}
	for _, pod := range p.InRange {
		add(pod)
	}
	for _, pod := range p.Condemned {
		add(pod)
	}
	return out
}

// Status is set's status for pods (PodsAfter), as upstream computes it:
// replicas (pods created, terminating ones too), readyReplicas (Running
// and Ready), availableReplicas (Ready for minReadySeconds),
// currentReplicas and updatedReplicas (not terminating, by revision
// label), the revisions and collisionCount, observedGeneration; and, for
// RollingUpdate, currentRevision becomes updateRevision once every
// replica is updated and Ready (upstream's completeRollingUpdate). next is
// when a Ready pod becomes available (zero: none pending).
func Status(set *appsv1.StatefulSet, current, update *appsv1.ControllerRevision, collisionCount int32, pods []*corev1.Pod, now time.Time) (s appsv1.StatefulSetStatus, next time.Time) {
	s.ObservedGeneration = set.Generation
	s.CurrentRevision = current.Name
	s.UpdateRevision = update.Name
	s.CollisionCount = &collisionCount
	minReady := time.Duration(set.Spec.MinReadySeconds) * time.Second
	for _, p := range pods {
		if created(p) {
			s.Replicas++
		}
		if runningAndReady(p) {
			s.ReadyReplicas++
			if podstate.Available(p, minReady, now) {
				s.AvailableReplicas++
			} else if at := podstate.ReadySince(p); !at.IsZero() {
				if due := at.Add(minReady); next.IsZero() || due.Before(next) {
					next = due
				}
			}
		}
		if created(p) && !terminating(p) {
			if revisionOf(p) == current.Name {
				s.CurrentReplicas++
			}
			if revisionOf(p) == update.Name {
				s.UpdatedReplicas++
			}
		}
	}
	want := int32(replicaCount(set))
	if set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType &&
		s.UpdatedReplicas == want && s.ReadyReplicas == want && s.Replicas == want {
		s.CurrentReplicas = s.UpdatedReplicas
		s.CurrentRevision = s.UpdateRevision
	}
	return s, next
}

// StatusChanged reports whether upstream would write s over old (its
// inconsistentStatus): a newer observedGeneration, or a different count
// or revision. collisionCount alone does not count.
func StatusChanged(old, s appsv1.StatefulSetStatus) bool {
	return s.ObservedGeneration > old.ObservedGeneration ||
		s.Replicas != old.Replicas ||
		s.CurrentReplicas != old.CurrentReplicas ||
		s.ReadyReplicas != old.ReadyReplicas ||
		s.UpdatedReplicas != old.UpdatedReplicas ||
		s.CurrentRevision != old.CurrentRevision ||
		s.AvailableReplicas != old.AvailableReplicas ||
		s.UpdateRevision != old.UpdateRevision
}

// created: the API server has the pod (it has a phase).
func created(p *corev1.Pod) bool { return p.Status.Phase != "" }

// terminating: the pod is being deleted.
func terminating(p *corev1.Pod) bool { return p.DeletionTimestamp != nil }

// runningAndReady: phase Running and condition Ready True.
func runningAndReady(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podstate.Ready(p)
}

// healthy: Running and Ready and not being deleted (1.33's isHealthy,
// which does not wait for minReadySeconds).
func healthy(p *corev1.Pod) bool { return runningAndReady(p) && !terminating(p) }
