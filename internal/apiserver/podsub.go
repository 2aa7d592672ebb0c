package apiserver

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/auth"
	"knode/internal/storage"
)

// Pod subresources that take a POST: binding (the scheduler's) and
// eviction (policy/v1, honouring PodDisruptionBudgets).
const (
	subBinding  = "binding"
	subEviction = "eviction"
)

var pdbResource = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")

// maxDisruptedPods bounds a budget's disruptedPods map, as upstream.
const maxDisruptedPods = 2000

// isPodPost reports whether a request is a POST to a pod subresource.
func (s *Server) isPodPost(st *objectStore, a auth.Attributes) bool {
	return st.kind.Resource == "pods" && st.kind.GroupVersion.Group == "" && a.Verb == "create" &&
		(a.Subresource == subBinding || a.Subresource == subEviction)
}

func (s *Server) servePodPost(ctx context.Context, w http.ResponseWriter, r *http.Request, st *objectStore, namespace string, a auth.Attributes) error {
	wo, err := parseWriteOptions(r)
	if err != nil {
		return err
	}
	data, err := readBody(r)
	if err != nil {
		return err
	}
	user, _ := auth.UserFrom(ctx)
	ct := r.Header.Get("Content-Type")
	switch a.Subresource {
	case subBinding:
		obj, _, err := decodeObject(&corev1.Binding{}, corev1.SchemeGroupVersion.WithKind("Binding"), ct, data, wo.fv)
		if err != nil {
			return err
		}
		b := obj.(*corev1.Binding)
		if err := s.admit(ctx, AdmissionAttributes{Operation: "CREATE", Kind: st.kind, Namespace: namespace, Name: a.Name, Subresource: subBinding, Object: b, User: user, DryRun: wo.dryRun}); err != nil {
			return err
		}
		if err := s.bind(ctx, st, namespace, a.Name, b, wo.dryRun); err != nil {
			return err
		}
	case subEviction:
		obj, _, err := decodeObject(&policyv1.Eviction{}, policyv1.SchemeGroupVersion.WithKind("Eviction"), ct, data, wo.fv)
		if err != nil {
			return err
		}
		ev := obj.(*policyv1.Eviction)
		if ev.Name != "" && ev.Name != a.Name {
			return apierrors.NewBadRequest("name in URL does not match name in Eviction object")
		}
		if err := s.admit(ctx, AdmissionAttributes{Operation: "CREATE", Kind: st.kind, Namespace: namespace, Name: a.Name, Subresource: subEviction, Object: ev, User: user, DryRun: wo.dryRun}); err != nil {
			return err
		}
		if err := s.evict(ctx, st, namespace, a.Name, ev, wo.dryRun); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusCreated, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
	return nil
}

// bind assigns a pod to a node, as upstream's binding: only a pod with no
// node yet and not being deleted, setting PodScheduled True and adding the
// binding's annotations.
func (s *Server) bind(ctx context.Context, st *objectStore, namespace, name string, b *corev1.Binding, dryRun bool) error {
	if b.Name != "" && b.Name != name {
		return apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, name, fieldErrorListAt("target.kind", b.Target.Kind, "must be empty or 'Node'"))
	}
	if b.Target.Name == "" {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Binding"}, name, fieldErrorListAt("target.name", "", "must not be empty"))
	}
	now := metav1.NewTime(s.clock.Now().Truncate(1e9))
	_, err := st.rawUpdate(ctx, namespace, name, func(current runtime.Object) (runtime.Object, error) {
		pod := current.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(st.gr, name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(st.gr, name, fmt.Errorf("pod %v is already assigned to node %q", name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodCondition(pod, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now})
		return pod, nil
	}, nil, dryRun)
	return err
}

// setPodCondition replaces or adds a condition, keeping the transition
// time when the status does not change.
func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			if pod.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = pod.Status.Conditions[i].LastTransitionTime
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}

// evict deletes a pod unless its PodDisruptionBudget forbids it (429), in
// the order of upstream's eviction subresource.
func (s *Server) evict(ctx context.Context, st *objectStore, namespace, name string, ev *policyv1.Eviction, dryRun bool) error {
	obj, err := st.Get(ctx, namespace, name)
	if err != nil {
		return err
	}
	pod := obj.(*corev1.Pod)
	opts := deleteOptions{dryRun: dryRun}
	if ev.DeleteOptions != nil {
		opts.gracePeriod = ev.DeleteOptions.GracePeriodSeconds
		opts.preconditions = ev.DeleteOptions.Preconditions
		opts.dryRun = dryRun || len(ev.DeleteOptions.DryRun) > 0
	}
	if canIgnorePDB(pod) {
		return s.deleteEvicted(ctx, st, pod, opts)
	}
	pdbs, err := s.matchingBudgets(ctx, pod)
	if err != nil {
		return err
	}
	switch len(pdbs) {
	case 0:
		return s.deleteEvicted(ctx, st, pod, opts)
	case 1:
	default:
		return apierrors.NewInternalError(fmt.Errorf("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."))
	}
	pdb := pdbs[0]
	if !podReady(pod) {
		unhealthyAllowed := pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow
		if unhealthyAllowed || (pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0) {
			rv := pod.ResourceVersion
			if opts.preconditions == nil {
				opts.preconditions = &metav1.Preconditions{}
			}
			opts.preconditions.ResourceVersion = &rv
			return s.deleteEvicted(ctx, st, pod, opts)
		}
	}
	if err := s.checkAndDecrement(ctx, pdb, pod, opts.dryRun); err != nil {
		return err
	}
	return s.deleteEvicted(ctx, st, pod, opts)
}

// canIgnorePDB: finished, pending and terminating pods are evicted without
// asking their budget.
func canIgnorePDB(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return pod.DeletionTimestamp != nil
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// matchingBudgets lists the PodDisruptionBudgets of pod's namespace whose
// selector matches it; none when budgets are not served.
func (s *Server) matchingBudgets(ctx context.Context, pod *corev1.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	pst, ok := s.stores[pdbResource]
	if !ok {
		return nil, nil
	}
	res, err := pst.List(ctx, pod.Namespace, storage.ListOptions{}, nil)
	if err != nil {
		return nil, err
	}
	var out []*policyv1.PodDisruptionBudget
	for _, item := range res.items {
		pdb := item.(*policyv1.PodDisruptionBudget)
		if pdb.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out, nil
}

// checkAndDecrement takes one disruption from the budget, recording the pod
// in disruptedPods, or refuses with upstream's 429 or 403.
func (s *Server) checkAndDecrement(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pod *corev1.Pod, dryRun bool) error {
	pst := s.stores[pdbResource]
	now := metav1.NewTime(s.clock.Now())
	_, err := pst.Update(ctx, pdb.Namespace, pdb.Name, func(current runtime.Object) (runtime.Object, error) {
		b := current.(*policyv1.PodDisruptionBudget).DeepCopy()
		b.ResourceVersion = "" // retried on conflict, re-judged each time
		if b.Status.ObservedGeneration < b.Generation {
			return nil, budgetRefusal(b, fmt.Sprintf("The disruption budget %s is still being processed by the server.", b.Name))
		}
		if b.Status.DisruptionsAllowed < 0 {
			return nil, apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), b.Name, fmt.Errorf("pdb disruptions allowed is negative"))
		}
		if len(b.Status.DisruptedPods) > maxDisruptedPods {
			return nil, apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), b.Name, fmt.Errorf("DisruptedPods map too big - too many evictions not confirmed by PDB controller"))
		}
		if b.Status.DisruptionsAllowed == 0 {
			return nil, budgetRefusal(b, fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", b.Name, b.Status.DesiredHealthy, b.Status.CurrentHealthy))
		}
		b.Status.DisruptionsAllowed--
		if b.Status.DisruptedPods == nil {
			b.Status.DisruptedPods = map[string]metav1.Time{}
		}
		b.Status.DisruptedPods[pod.Name] = now
		return b, nil
	}, updateOptions{status: true, dryRun: dryRun})
	return err
}

// budgetRefusal is upstream's 429 for an eviction a budget blocks.
func budgetRefusal(pdb *policyv1.PodDisruptionBudget, cause string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

// deleteEvicted marks the pod DisruptionTarget (EvictionByEvictionAPI) and
// deletes it with the eviction's options.
func (s *Server) deleteEvicted(ctx context.Context, st *objectStore, pod *corev1.Pod, opts deleteOptions) error {
	if opts.dryRun {
		_, _, err := st.Delete(ctx, pod.Namespace, pod.Name, opts)
		return err
	}
	if pod.DeletionTimestamp == nil {
		now := metav1.NewTime(s.clock.Now().Truncate(1e9))
		_, err := st.Update(ctx, pod.Namespace, pod.Name, func(current runtime.Object) (runtime.Object, error) {
			p := current.(*corev1.Pod).DeepCopy()
			p.ResourceVersion = ""
			setPodCondition(p, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: now,
				Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
			})
			return p, nil
		}, updateOptions{status: true})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if opts.preconditions != nil && opts.preconditions.ResourceVersion != nil {
			// The condition moved the resourceVersion; the precondition
			// guarded the decision, which was taken on the pod we read.
			opts.preconditions.ResourceVersion = nil
		}
	}
	_, _, err := st.Delete(ctx, pod.Namespace, pod.Name, opts)
	return err
}
