package apiserver_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"knode/internal/apitest"
)

func newPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

func condition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func TestBinding(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, newPod("p", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(node string) error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}, metav1.CreateOptions{})
	}
	if err := bind("n1"); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "n1" {
		t.Errorf("nodeName %q after binding to n1", p.Spec.NodeName)
	}
	if c := condition(p, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("PodScheduled after binding: %+v", c)
	}
	if err := bind("n2"); !apierrors.IsConflict(err) {
		t.Errorf("second binding: %v, want Conflict", err)
	}
	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("binding without a target: %v, want Invalid", err)
	}
}

func TestEvictionWithoutBudget(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	running, err := pods.Create(ctx, newPod("running", "n1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running.Status.Phase = corev1.PodRunning
	running.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := pods.UpdateStatus(ctx, running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, newPod("pending", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	// A running pod bound to a node is marked and deleted gracefully.
	if err := evict("running"); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.DeletionTimestamp == nil {
		t.Errorf("evicted pod has no deletionTimestamp")
	}
	if c := condition(p, corev1.DisruptionTarget); c == nil || c.Reason != "EvictionByEvictionAPI" || c.Message != "Eviction API: evicting" {
		t.Errorf("DisruptionTarget after eviction: %+v", c)
	}
	// A pending, unscheduled pod goes at once.
	if err := evict("pending"); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "pending", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("evicted pending pod: %v, want NotFound", err)
	}
	if err := evict("missing"); !apierrors.IsNotFound(err) {
		t.Errorf("evicting a missing pod: %v, want NotFound", err)
	}
}

// kubectl drain finds the eviction subresource through discovery.
func TestDiscoveryListsPodSubresources(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	list, err := s.Admin.Discovery().ServerResourcesForGroupVersion("v1")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		found[r.Name] = r
	}
	if r, ok := found["pods/eviction"]; !ok || r.Group != "policy" || r.Version != "v1" || r.Kind != "Eviction" {
		t.Errorf("pods/eviction in discovery: %+v (present %v)", r, ok)
	}
	if r, ok := found["pods/binding"]; !ok || r.Kind != "Binding" {
		t.Errorf("pods/binding in discovery: %+v (present %v)", r, ok)
	}
}

// With a budget, an eviction takes one disruption from it; when none is
// left the eviction is refused with 429 and the budget's cause.
func TestEvictionWithBudget(t *testing.T) {
	s := apitest.Start(t, apitest.Options{})
	ctx := context.Background()
	pods := s.Admin.CoreV1().Pods("default")
	for _, name := range []string{"a", "b"} {
		p, err := pods.Create(ctx, newPod(name, "n1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pdbs := s.Admin.PolicyV1().PodDisruptionBudgets("default")
	one := intstr.FromInt32(1)
	pdb, err := pdbs.Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// No disruption controller runs here: set the status it would.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	if _, err := pdbs.UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evict := func(name string) error {
		return pods.EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	}
	if err := evict("a"); err != nil {
		t.Fatalf("first eviction: %v", err)
	}
	got, err := pdbs.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, recorded := got.Status.DisruptedPods["a"]; got.Status.DisruptionsAllowed != 0 || !recorded {
		t.Errorf("budget after one eviction: allowed %d, disruptedPods %v", got.Status.DisruptionsAllowed, got.Status.DisruptedPods)
	}
	err = evict("b")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: %v, want 429", err)
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil || len(status.Status().Details.Causes) != 1 ||
		status.Status().Details.Causes[0].Message != "The disruption budget web needs 1 healthy pods and has 2 currently" {
		t.Errorf("429 details: %+v", status.Status().Details)
	}
	if p, err := pods.Get(ctx, "b", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("refused eviction still deleted pod b: %v", err)
	}
}
