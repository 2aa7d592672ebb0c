package disruption

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func budget(mutate ...func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 1},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	for _, m := range mutate {
		m(pdb)
	}
	return pdb
}

func minAvailable(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = &v }
}

func maxUnavailable(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &v }
}

// pod is a pod of controller "rs" (scale set in the tests), Ready unless
// changed.
func pod(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}, ResourceVersion: "7",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "rs", Controller: ptr.To(true)}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func unready(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

func deleting(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }

func orphan(p *corev1.Pod) { p.OwnerReferences = nil }

func controlledBy(uid types.UID) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.OwnerReferences[0].UID = uid }
}

type counts struct{ Expected, Desired, Healthy, Allowed int32 }

func TestCompute(t *testing.T) {
	three := []*corev1.Pod{pod("a"), pod("b"), pod("c")}
	tests := []struct {
		name      string
		pdb       *policyv1.PodDisruptionBudget
		pods      []*corev1.Pod
		scales    Scales
		want      counts
		unmanaged []string
		wantErr   error
	}{
		{name: "minAvailable int", pdb: budget(minAvailable(intstr.FromInt32(2))), pods: three, want: counts{3, 2, 3, 1}},
		{name: "minAvailable int, not enough", pdb: budget(minAvailable(intstr.FromInt32(3))), pods: []*corev1.Pod{pod("a"), pod("b", unready), pod("c")}, want: counts{3, 3, 2, 0}},
		{name: "minAvailable int counts pods, not scale", pdb: budget(minAvailable(intstr.FromInt32(1))), pods: three, scales: Scales{"rs": 10}, want: counts{3, 1, 3, 2}},
		{name: "minAvailable percent rounds up", pdb: budget(minAvailable(intstr.FromString("50%"))), pods: three, scales: Scales{"rs": 3}, want: counts{3, 2, 3, 1}},
		{name: "minAvailable percent uses the scale", pdb: budget(minAvailable(intstr.FromString("50%"))), pods: three, scales: Scales{"rs": 5}, want: counts{5, 3, 3, 0}},
		{name: "maxUnavailable int", pdb: budget(maxUnavailable(intstr.FromInt32(1))), pods: three, scales: Scales{"rs": 3}, want: counts{3, 2, 3, 1}},
		{name: "maxUnavailable int with a pod down", pdb: budget(maxUnavailable(intstr.FromInt32(1))), pods: []*corev1.Pod{pod("a"), pod("b", unready), pod("c")}, scales: Scales{"rs": 3}, want: counts{3, 2, 2, 0}},
		{name: "maxUnavailable percent rounds up", pdb: budget(maxUnavailable(intstr.FromString("30%"))), pods: three, scales: Scales{"rs": 3}, want: counts{3, 2, 3, 1}},
		{name: "maxUnavailable above expected: desired 0", pdb: budget(maxUnavailable(intstr.FromInt32(5))), pods: three, scales: Scales{"rs": 3}, want: counts{3, 0, 3, 3}},
		{
			name: "maxUnavailable adds the scales of each controller once",
			pdb:  budget(maxUnavailable(intstr.FromInt32(1))), pods: []*corev1.Pod{pod("a"), pod("b"), pod("c", controlledBy("rs2"))},
			scales: Scales{"rs": 2, "rs2": 4}, want: counts{6, 5, 3, 0},
		},
		{name: "pods being deleted are not healthy", pdb: budget(minAvailable(intstr.FromInt32(2))), pods: []*corev1.Pod{pod("a"), pod("b", deleting), pod("c")}, want: counts{3, 2, 2, 0}},
		{name: "no pods: nothing allowed", pdb: budget(maxUnavailable(intstr.FromInt32(1))), want: counts{0, 0, 0, 0}},
		{
			name: "unmanaged pods are reported and not expected",
			pdb:  budget(maxUnavailable(intstr.FromInt32(1))), pods: []*corev1.Pod{pod("a"), pod("b", orphan)},
			scales: Scales{"rs": 1}, want: counts{1, 0, 2, 2}, unmanaged: []string{"b"},
		},
		{
			name: "a controller without scale fails",
			pdb:  budget(maxUnavailable(intstr.FromInt32(1))), pods: []*corev1.Pod{pod("a", controlledBy("ds"))},
			wantErr: ErrNoController,
		},
		{name: "neither bound set: desired 0", pdb: budget(), pods: three, want: counts{0, 0, 3, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Compute(tt.pdb, tt.pods, tt.scales, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			s := r.Status
			got := counts{s.ExpectedPods, s.DesiredHealthy, s.CurrentHealthy, s.DisruptionsAllowed}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("expected, desired, healthy, allowed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.unmanaged, r.Unmanaged); diff != "" {
				t.Errorf("unmanaged (-want +got):\n%s", diff)
			}
			cond := s.Conditions[0]
			wantReason := policyv1.InsufficientPodsReason
			if s.DisruptionsAllowed > 0 {
				wantReason = policyv1.SufficientPodsReason
			}
			if len(s.Conditions) != 1 || cond.Type != policyv1.DisruptionAllowedCondition || cond.Reason != wantReason || s.ObservedGeneration != 1 {
				t.Errorf("conditions %+v, observedGeneration %d", s.Conditions, s.ObservedGeneration)
			}
		})
	}
}

func TestComputeDisruptedPods(t *testing.T) {
	recorded := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	pdb := budget(minAvailable(intstr.FromInt32(1)), func(p *policyv1.PodDisruptionBudget) {
		p.Status.DisruptedPods = map[string]metav1.Time{
			"fresh":   recorded(30 * time.Second),
			"stale":   recorded(3 * time.Minute),
			"gone":    recorded(10 * time.Second),
			"leaving": recorded(10 * time.Second),
		}
	})
	pods := []*corev1.Pod{pod("fresh"), pod("stale"), pod("leaving", deleting), pod("other")}
	r, err := Compute(pdb, pods, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]metav1.Time{"fresh": recorded(30 * time.Second)}, r.Status.DisruptedPods); diff != "" {
		t.Errorf("disruptedPods (-want +got):\n%s", diff)
	}
	// fresh is not healthy while recorded; stale counts again; leaving is going.
	if r.Status.CurrentHealthy != 2 || r.Status.DisruptionsAllowed != 1 {
		t.Errorf("healthy %d allowed %d, want 2 and 1", r.Status.CurrentHealthy, r.Status.DisruptionsAllowed)
	}
	if !r.Recheck.Equal(now.Add(90 * time.Second)) {
		t.Errorf("recheck = %v, want %v", r.Recheck, now.Add(90*time.Second))
	}
	if diff := cmp.Diff([]string{"stale"}, r.NotDeleted); diff != "" {
		t.Errorf("not deleted (-want +got):\n%s", diff)
	}
}

func TestConditionTransitionTime(t *testing.T) {
	earlier := metav1.NewTime(now.Add(-time.Hour))
	pdb := budget(minAvailable(intstr.FromInt32(1)), func(p *policyv1.PodDisruptionBudget) {
		p.Status.Conditions = []metav1.Condition{{
			Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason, LastTransitionTime: earlier,
		}}
	})
	r, _ := Compute(pdb, []*corev1.Pod{pod("a"), pod("b")}, nil, now)
	if got := r.Status.Conditions[0].LastTransitionTime; !got.Equal(&earlier) {
		t.Errorf("unchanged condition moved its transition time to %v", got)
	}
	r, _ = Compute(pdb, []*corev1.Pod{pod("a")}, nil, now)
	if got := r.Status.Conditions[0]; got.Status != metav1.ConditionFalse || !got.LastTransitionTime.Time.Equal(now) {
		t.Errorf("flipped condition = %+v, want False at now", got)
	}
	fs := FailSafe(pdb, errors.New("boom"), now)
	if c := fs.Conditions[0]; fs.DisruptionsAllowed != 0 || c.Reason != policyv1.SyncFailedReason || c.Message != "boom" {
		t.Errorf("fail safe = %+v", fs)
	}
}

func TestSelects(t *testing.T) {
	tests := []struct {
		name     string
		selector *metav1.LabelSelector
		ns       string
		want     bool
	}{
		{name: "matching labels", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, ns: "ns", want: true},
		{name: "other labels", selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, ns: "ns", want: false},
		{name: "empty selector matches all", selector: &metav1.LabelSelector{}, ns: "ns", want: true},
		{name: "null selector matches none", selector: nil, ns: "ns", want: false},
		{name: "other namespace", selector: &metav1.LabelSelector{}, ns: "elsewhere", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdb := budget(func(p *policyv1.PodDisruptionBudget) { p.Spec.Selector = tt.selector; p.Namespace = tt.ns })
			if got := Selects(pdb, pod("a")); got != tt.want {
				t.Errorf("Selects = %v, want %v", got, tt.want)
			}
		})
	}
}

// status sets a budget's status numbers, observed at its generation.
func status(allowed, healthy, desired int32) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) {
		p.Status.ObservedGeneration = p.Generation
		p.Status.DisruptionsAllowed, p.Status.CurrentHealthy, p.Status.DesiredHealthy = allowed, healthy, desired
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		pdbs       []*policyv1.PodDisruptionBudget
		wantCode   int32
		wantCause  string
		spend      bool
		podVersion string
	}{
		{name: "no budget", pod: pod("a")},
		{name: "budget of other pods", pod: pod("a"), pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 0, 0), func(p *policyv1.PodDisruptionBudget) {
			p.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
		})}},
		{name: "allowed: spends one", pod: pod("a"), pdbs: []*policyv1.PodDisruptionBudget{budget(status(1, 3, 2))}, spend: true},
		{
			name: "no disruption allowed: 429", pod: pod("a"), pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 2, 2))},
			wantCode: http.StatusTooManyRequests, wantCause: "The disruption budget web needs 2 healthy pods and has 2 currently",
		},
		{
			name: "budget not yet observed: 429", pod: pod("a"), pdbs: []*policyv1.PodDisruptionBudget{budget(status(5, 5, 0), func(p *policyv1.PodDisruptionBudget) { p.Status.ObservedGeneration = 0 })},
			wantCode: http.StatusTooManyRequests, wantCause: "The disruption budget web is still being processed by the server.",
		},
		{name: "negative allowance: 403", pod: pod("a"), pdbs: []*policyv1.PodDisruptionBudget{budget(status(-1, 0, 0))}, wantCode: http.StatusForbidden},
		{
			name: "too many records: 403", pod: pod("a"),
			pdbs: []*policyv1.PodDisruptionBudget{budget(status(3, 3, 0), func(p *policyv1.PodDisruptionBudget) {
				p.Status.DisruptedPods = map[string]metav1.Time{}
				for i := range MaxDisruptedPodSize + 1 {
					p.Status.DisruptedPods[strconv.Itoa(i)] = metav1.NewTime(now)
				}
			})},
			wantCode: http.StatusForbidden,
		},
		{name: "two budgets: 500", pod: pod("a"), pdbs: []*policyv1.PodDisruptionBudget{budget(status(1, 1, 0)), budget(status(1, 1, 0))}, wantCode: http.StatusInternalServerError},
		{name: "pending pod ignores budgets", pod: pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 0, 3))}},
		{name: "succeeded pod ignores budgets", pod: pod("a", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 0, 3))}},
		{name: "deleting pod ignores budgets", pod: pod("a", deleting), pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 0, 3))}},
		{
			name: "unready pod of a healthy budget goes free", pod: pod("a", unready),
			pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 2, 2))}, podVersion: "7",
		},
		{
			name: "unready pod of an unhealthy budget: 429", pod: pod("a", unready),
			pdbs:     []*policyv1.PodDisruptionBudget{budget(status(0, 1, 2))},
			wantCode: http.StatusTooManyRequests, wantCause: "The disruption budget web needs 2 healthy pods and has 1 currently",
		},
		{
			name: "unready pod, AlwaysAllow", pod: pod("a", unready),
			pdbs: []*policyv1.PodDisruptionBudget{budget(status(0, 0, 2), func(p *policyv1.PodDisruptionBudget) {
				p.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.AlwaysAllow)
			})},
			podVersion: "7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pdbs []policyv1.PodDisruptionBudget
			for _, p := range tt.pdbs {
				pdbs = append(pdbs, *p)
			}
			d, err := Decide(tt.pod, pdbs, now)
			if tt.wantCode != 0 {
				var se *apierrors.StatusError
				if !errors.As(err, &se) || se.ErrStatus.Code != tt.wantCode {
					t.Fatalf("err = %v, want code %d", err, tt.wantCode)
				}
				if tt.wantCode == http.StatusTooManyRequests {
					st := se.ErrStatus
					if st.Message != MsgViolates || st.Reason != metav1.StatusReasonTooManyRequests || len(st.Details.Causes) != 1 ||
						st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || st.Details.Causes[0].Message != tt.wantCause {
						t.Errorf("429 status = %+v", st)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if d.PodResourceVersion != tt.podVersion {
				t.Errorf("pod resourceVersion precondition = %q, want %q", d.PodResourceVersion, tt.podVersion)
			}
			if !tt.spend {
				if d.Budget != nil {
					t.Errorf("budget spent: %+v", d.Budget.Status)
				}
				return
			}
			orig := tt.pdbs[0]
			if d.Budget == nil || d.Budget.Status.DisruptionsAllowed != orig.Status.DisruptionsAllowed-1 {
				t.Fatalf("budget = %+v, want one disruption spent", d.Budget)
			}
			if at, ok := d.Budget.Status.DisruptedPods["a"]; !ok || !at.Time.Equal(now) {
				t.Errorf("disruptedPods = %v, want a at now", d.Budget.Status.DisruptedPods)
			}
			if c := d.Budget.Status.Conditions; len(c) != 1 || c[0].Reason != policyv1.InsufficientPodsReason {
				t.Errorf("conditions after spending the last disruption = %+v", c)
			}
			if orig.Status.DisruptionsAllowed != 1 || orig.Status.DisruptedPods != nil {
				t.Error("Decide changed the budget it was given")
			}
		})
	}
}
