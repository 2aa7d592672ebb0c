package disruption

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// MaxDisruptedPodSize is the most disruptedPods records a budget may hold
// before evictions are refused (upstream's limit).
const MaxDisruptedPodSize = 2000

// Eviction messages, upstream's.
const (
	// MsgViolates is the message of every 429 an eviction gets.
	MsgViolates = "Cannot evict pod as it would violate the pod's disruption budget."
	// MsgTooManyBudgets is the message of the 500 for a pod that two or
	// more budgets cover.
	MsgTooManyBudgets = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)

var budgetsResource = schema.GroupResource{Group: policyv1.GroupName, Resource: "poddisruptionbudget"}

// Decision is what the eviction subresource must do once Decide allowed
// an eviction.
type Decision struct {
	// Budget, when not nil, is the covering budget with one disruption
	// spent: disruptionsAllowed decremented and the pod recorded in
	// status.disruptedPods at now. The handler must write it through
	// poddisruptionbudgets/status with the resourceVersion it carries
	// (the one the handler read), and only then delete the pod. On a
	// conflict it re-reads the budgets and calls Decide again.
	Budget *policyv1.PodDisruptionBudget
	// PodResourceVersion, when not empty, must be the delete's
	// resourceVersion precondition: the pod is evicted without spending
	// the budget because it is not Ready, and must not become Ready
	// meanwhile.
	PodResourceVersion string
}

// IgnoresBudgets reports whether pod may be evicted without looking at any
// budget: it has finished (Succeeded or Failed), is Pending, or is already
// being deleted.
func IgnoresBudgets(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

// Decide decides an eviction of pod under the budgets of its namespace
// (pdbs may hold others; only those that Select the pod count), at now, as
// upstream's eviction subresource does:
//   - a pod that IgnoresBudgets, or that no budget covers, may go: zero
//     Decision;
//   - a pod two budgets cover: 500 with MsgTooManyBudgets;
//   - otherwise Allowed decides under the one budget.
//
// The error is an *apierrors.StatusError to send as is (429, 403 or 500).
// In a dry run the handler writes nothing, but the decision is the same.
func Decide(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget, now time.Time) (Decision, error) {
	if IgnoresBudgets(pod) {
		return Decision{}, nil
	}
	var cover []*policyv1.PodDisruptionBudget
	for i := range pdbs {
		if Selects(&pdbs[i], pod) {
			cover = append(cover, &pdbs[i])
		}
	}
	switch len(cover) {
	case 0:
		return Decision{}, nil
	case 1:
		return Allowed(cover[0], pod, now)
	}
	return Decision{}, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: MsgTooManyBudgets,
	}}
}

// Allowed decides an eviction of pod under pdb, the one budget covering
// it, at now:
//   - a pod that is not Ready goes without spending the budget when the
//     budget's unhealthyPodEvictionPolicy is AlwaysAllow, or when it has
//     currentHealthy >= desiredHealthy > 0; the delete must then carry the
//     pod's resourceVersion;
//   - status.observedGeneration behind metadata.generation: 429, cause
//     "The disruption budget <name> is still being processed by the
//     server.";
//   - disruptionsAllowed < 0, or more than MaxDisruptedPodSize records:
//     403;
//   - disruptionsAllowed == 0: 429, cause "The disruption budget <name>
//     needs <desiredHealthy> healthy pods and has <currentHealthy>
//     currently";
//   - otherwise one disruption is spent (see Decision.Budget).
//
// pdb is not changed.
func Allowed(pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod, now time.Time) (Decision, error) {
	if !podReady(pod) {
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p != nil && *p == policyv1.AlwaysAllow {
			return Decision{PodResourceVersion: pod.ResourceVersion}, nil
		}
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return Decision{PodResourceVersion: pod.ResourceVersion}, nil
		}
	}
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return Decision{}, tooManyRequests(fmt.Sprintf("The disruption budget %s is still being processed by the server.", pdb.Name))
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return Decision{}, apierrors.NewForbidden(budgetsResource, pdb.Name, errors.New("pdb disruptions allowed is negative"))
	}
	if len(pdb.Status.DisruptedPods) > MaxDisruptedPodSize {
		return Decision{}, apierrors.NewForbidden(budgetsResource, pdb.Name, errors.New("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		return Decision{}, tooManyRequests(fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently",
			pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy))
	}
	spent := pdb.DeepCopy()
	spent.Status.DisruptionsAllowed--
	if spent.Status.DisruptionsAllowed == 0 {
		setAllowedCondition(&spent.Status, now)
	}
	if spent.Status.DisruptedPods == nil {
		spent.Status.DisruptedPods = map[string]metav1.Time{}
	}
	spent.Status.DisruptedPods[pod.Name] = metav1.NewTime(now)
	return Decision{Budget: spent}, nil
}

// tooManyRequests is the 429 an eviction gets, with the DisruptionBudget
// cause.
func tooManyRequests(cause string) error {
	err := apierrors.NewTooManyRequests(MsgViolates, 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type:    policyv1.DisruptionBudgetCause,
		Message: cause,
	})
	return err
}
