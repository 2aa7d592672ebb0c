package poddisruptionbudget

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func newPDB(mutate ...func(*policyv1.PodDisruptionBudget)) *policyv1.PodDisruptionBudget {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	for _, m := range mutate {
		m(pdb)
	}
	return pdb
}

func minA(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) { p.Spec.MinAvailable = &v }
}

func maxU(v intstr.IntOrString) func(*policyv1.PodDisruptionBudget) {
	return func(p *policyv1.PodDisruptionBudget) { p.Spec.MaxUnavailable = &v }
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		pdb  *policyv1.PodDisruptionBudget
		want []string
	}{
		{name: "minAvailable int", pdb: newPDB(minA(intstr.FromInt32(2)))},
		{name: "maxUnavailable percent", pdb: newPDB(maxU(intstr.FromString("25%")))},
		{name: "neither", pdb: newPDB()},
		{name: "both", pdb: newPDB(minA(intstr.FromInt32(1)), maxU(intstr.FromInt32(1))), want: []string{"spec|Invalid value|minAvailable and maxUnavailable cannot be both set"}},
		{name: "negative", pdb: newPDB(minA(intstr.FromInt32(-1))), want: []string{"spec.minAvailable|Invalid value|must be greater than or equal to 0"}},
		{name: "over 100%", pdb: newPDB(maxU(intstr.FromString("101%"))), want: []string{"spec.maxUnavailable|Invalid value|must not be greater than 100%"}},
		{name: "not a percent", pdb: newPDB(maxU(intstr.FromString("half"))), want: []string{`spec.maxUnavailable|Invalid value|a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')`}},
		{name: "unknown eviction policy", pdb: newPDB(func(p *policyv1.PodDisruptionBudget) {
			p.Spec.UnhealthyPodEvictionPolicy = ptr.To(policyv1.UnhealthyPodEvictionPolicyType("Never"))
		}), want: []string{`spec.unhealthyPodEvictionPolicy|Unsupported value|supported values: "AlwaysAllow", "IfHealthyBudget"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Validate(tt.pdb, false))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerationAndStatus(t *testing.T) {
	k := Kind()
	pdb := newPDB(maxU(intstr.FromInt32(1)))
	pdb.Status.DisruptionsAllowed = 4
	k.PrepareForCreate(pdb)
	if pdb.Generation != 1 || pdb.Status.DisruptionsAllowed != 0 {
		t.Fatalf("create: generation %d, status %+v", pdb.Generation, pdb.Status)
	}
	old := pdb.DeepCopy()
	old.Status.ObservedGeneration = 1

	upd := old.DeepCopy()
	upd.Status = policyv1.PodDisruptionBudgetStatus{}
	upd.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	k.PrepareForUpdate(upd, old)
	if upd.Generation != 2 || upd.Status.ObservedGeneration != 1 {
		t.Errorf("spec update: generation %d, status %+v", upd.Generation, upd.Status)
	}

	st := old.DeepCopy()
	st.Spec.MaxUnavailable = nil
	st.Status.CurrentHealthy = -2
	k.Status.PrepareForUpdate(st, old)
	if st.Spec.MaxUnavailable == nil {
		t.Error("status update changed the spec")
	}
	want := []string{"status.currentHealthy|Invalid value|must be greater than or equal to 0"}
	if diff := cmp.Diff(want, flat(k.Status.ValidateUpdate(st, old))); diff != "" {
		t.Errorf("status errors (-want +got):\n%s", diff)
	}
	st.Status.CurrentHealthy = 0
	st.Status.Conditions = []metav1.Condition{{Type: "DisruptionAllowed", Status: "Maybe", Reason: "x"}}
	got := flat(k.Status.ValidateUpdate(st, old))
	if len(got) == 0 || !strings.HasPrefix(got[0], "status.conditions[0]") {
		t.Errorf("bad condition accepted: %v", got)
	}
}

func TestRow(t *testing.T) {
	pdb := newPDB(minA(intstr.FromString("50%")))
	pdb.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Minute))
	pdb.Status.DisruptionsAllowed = 1
	want := []interface{}{"web", "50%", "N/A", int64(1), "5m"}
	if diff := cmp.Diff(want, row(pdb, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	k := Kind()
	if len(k.Columns) != len(want) || k.ShortNames[0] != "pdb" || k.GroupVersion.String() != "policy/v1" || !k.HasStatus {
		t.Errorf("kind = %+v", k)
	}
}
