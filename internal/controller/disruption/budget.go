package disruption

import (
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// DeletionTimeout is how long a pod recorded in status.disruptedPods is
// taken to be on its way out. Until then it does not count as healthy;
// after it the record is dropped and the pod counts again (upstream's
// DeletionTimeout).
const DeletionTimeout = 2 * time.Minute

// Scales maps a controller's UID to its scale (spec.replicas): the
// controllers the pods of a budget belong to. A budget given as
// maxUnavailable, or as a percentage minAvailable, counts the pods it
// expects by adding up the scales of its pods' controllers.
type Scales map[types.UID]int32

// ErrNoController is wrapped by Compute when a budget needs the scale of a
// pod's controller and Scales does not know it (for example a DaemonSet,
// which has no scale).
var ErrNoController = errors.New("found no controllers for pod")

// Result is what Compute decides for one budget.
type Result struct {
	// Status is the budget's new status, conditions included.
	Status policyv1.PodDisruptionBudgetStatus
	// Recheck, when not zero, is the earliest time a disruptedPods record
	// expires: the status must be computed again then.
	Recheck time.Time
	// Unmanaged lists the budget's pods that have no controller; they do
	// not count towards expectedPods of a maxUnavailable or percentage
	// budget.
	Unmanaged []string
	// NotDeleted lists the pods whose disruptedPods record expired while
	// they still exist.
	NotDeleted []string
}

// Selects reports whether pdb covers pod: same namespace, and the selector
// matches the pod's labels. A null selector matches nothing and an empty
// one everything, as policy/v1 defines.
func Selects(pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod) bool {
	if pdb.Namespace != pod.Namespace {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(pod.Labels))
}

// Compute is the budget's status at now, given the pods it selects and the
// scales of their controllers, as upstream's disruption controller computes
// it:
//   - maxUnavailable: expectedPods is the sum of the controllers' scales,
//     desiredHealthy = expectedPods - maxUnavailable (a percentage of
//     expectedPods, rounded up), at least 0;
//   - minAvailable as an integer: desiredHealthy is that number and
//     expectedPods the number of selected pods;
//   - minAvailable as a percentage: expectedPods from the scales,
//     desiredHealthy that percentage of it, rounded up;
//   - currentHealthy counts the Ready pods that are not being deleted and
//     not recorded in disruptedPods within DeletionTimeout;
//   - disruptionsAllowed = currentHealthy - desiredHealthy, and 0 when
//     negative or when expectedPods is 0.
//
// The DisruptionAllowed condition is True/SufficientPods when disruptions
// are allowed and False/InsufficientPods otherwise; its
// lastTransitionTime moves to now only when its status changes. An error
// (ErrNoController, a malformed intOrString) means the caller should record
// FailSafe instead.
func Compute(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, scales Scales, now time.Time) (Result, error) {
	var r Result
	expected, desired, unmanaged, err := expectedPods(pdb, pods, scales)
	if err != nil {
		return Result{}, err
	}
	r.Unmanaged = unmanaged
	disrupted, recheck, notDeleted := liveDisruptions(pdb, pods, now)
	r.Recheck, r.NotDeleted = recheck, notDeleted
	healthy := currentHealthy(pods, disrupted, now)
	allowed := healthy - desired
	if expected <= 0 || allowed <= 0 {
		allowed = 0
	}
	r.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		DisruptedPods:      disrupted,
		DisruptionsAllowed: allowed,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		Conditions:         copyConditions(pdb.Status.Conditions),
	}
	setAllowedCondition(&r.Status, now)
	return r, nil
}

// FailSafe is the status recorded when Compute fails: the old status with
// no disruptions allowed and the DisruptionAllowed condition
// False/SyncFailed carrying the error.
func FailSafe(pdb *policyv1.PodDisruptionBudget, cause error, now time.Time) policyv1.PodDisruptionBudgetStatus {
	s := *pdb.Status.DeepCopy()
	s.DisruptionsAllowed = 0
	setCondition(&s.Conditions, metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.SyncFailedReason,
		Message:            cause.Error(),
		ObservedGeneration: s.ObservedGeneration,
	}, now)
	return s
}

// StatusEqual reports whether two statuses say the same thing, so that
// writing b over a would change nothing.
func StatusEqual(a, b policyv1.PodDisruptionBudgetStatus) bool {
	if len(a.DisruptedPods) == 0 && len(b.DisruptedPods) == 0 {
		a.DisruptedPods, b.DisruptedPods = nil, nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// expectedPods decides expectedPods and desiredHealthy.
func expectedPods(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, scales Scales) (expected, desired int32, unmanaged []string, err error) {
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		expected, unmanaged, err = scaleOf(pods, scales)
		if err != nil {
			return 0, 0, nil, err
		}
		maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = max(expected-int32(maxUnavailable), 0)
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
		expected = int32(len(pods))
	case pdb.Spec.MinAvailable != nil:
		expected, unmanaged, err = scaleOf(pods, scales)
		if err != nil {
			return 0, 0, nil, err
		}
		minAvailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(expected), true)
		if err != nil {
			return 0, 0, nil, err
		}
		desired = int32(minAvailable)
	}
	return expected, desired, unmanaged, nil
}

// scaleOf adds up the scales of the pods' controllers, each counted once;
// pods without a controller are returned as unmanaged.
func scaleOf(pods []*corev1.Pod, scales Scales) (int32, []string, error) {
	seen := map[types.UID]bool{}
	var total int32
	var unmanaged []string
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil {
			unmanaged = append(unmanaged, pod.Name)
			continue
		}
		if seen[ref.UID] {
			continue
		}
		scale, ok := scales[ref.UID]
		if !ok {
			return 0, nil, fmt.Errorf("%w %q", ErrNoController, pod.Name)
		}
		seen[ref.UID] = true
		total += scale
	}
	return total, unmanaged, nil
}

// liveDisruptions keeps the disruptedPods records of pods that still exist,
// are not yet being deleted, and were recorded less than DeletionTimeout
// ago. It returns the earliest expiry among those kept, and the pods whose
// record expired.
func liveDisruptions(pdb *policyv1.PodDisruptionBudget, pods []*corev1.Pod, now time.Time) (map[string]metav1.Time, time.Time, []string) {
	kept := map[string]metav1.Time{}
	var recheck time.Time
	var expired []string
	if pdb.Status.DisruptedPods == nil {
		return kept, recheck, nil
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		at, ok := pdb.Status.DisruptedPods[pod.Name]
		if !ok {
			continue
		}
		due := at.Add(DeletionTimeout)
		if due.Before(now) {
			expired = append(expired, pod.Name)
			continue
		}
		if recheck.IsZero() || due.Before(recheck) {
			recheck = due
		}
		kept[pod.Name] = at
	}
	sort.Strings(expired)
	return kept, recheck, expired
}

// currentHealthy counts the Ready pods that are neither being deleted nor
// recorded as disrupted within DeletionTimeout.
func currentHealthy(pods []*corev1.Pod, disrupted map[string]metav1.Time, now time.Time) int32 {
	var n int32
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if at, ok := disrupted[pod.Name]; ok && at.Add(DeletionTimeout).After(now) {
			continue
		}
		if podReady(pod) {
			n++
		}
	}
	return n
}

// setAllowedCondition sets DisruptionAllowed from disruptionsAllowed.
func setAllowedCondition(s *policyv1.PodDisruptionBudgetStatus, now time.Time) {
	c := metav1.Condition{
		Type:               policyv1.DisruptionAllowedCondition,
		Status:             metav1.ConditionFalse,
		Reason:             policyv1.InsufficientPodsReason,
		ObservedGeneration: s.ObservedGeneration,
	}
	if s.DisruptionsAllowed > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, policyv1.SufficientPodsReason
	}
	setCondition(&s.Conditions, c, now)
}

// setCondition replaces the condition of c's type, keeping its
// lastTransitionTime unless the status changes (then: now).
func setCondition(conds *[]metav1.Condition, c metav1.Condition, now time.Time) {
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	for i := range *conds {
		old := &(*conds)[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return
	}
	*conds = append(*conds, c)
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return []metav1.Condition{}
	}
	out := make([]metav1.Condition, len(in))
	copy(out, in)
	return out
}

// podReady reports whether the pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
