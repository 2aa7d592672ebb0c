package priorityclass

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func class(name string, value int32) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	Default(pc)
	return pc
}

func TestSystem(t *testing.T) {
	got := map[string]int32{}
	for _, pc := range System() {
		got[pc.Name] = pc.Value
		if errs := Validate(pc); len(errs) != 0 {
			t.Errorf("%s does not validate: %v", pc.Name, errs)
		}
		if pc.GlobalDefault || pc.PreemptionPolicy == nil || *pc.PreemptionPolicy != corev1.PreemptLowerPriority {
			t.Errorf("%s: %+v", pc.Name, pc)
		}
	}
	want := map[string]int32{"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built-in classes (-want +got):\n%s", diff)
	}
	System()[0].Value = 1
	if System()[0].Value != 2000001000 {
		t.Error("System shares its values between calls")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		pc   *schedulingv1.PriorityClass
		want []string
	}{
		{name: "user class", pc: class("batch", 1000)},
		{name: "highest user value", pc: class("top", 1000000000)},
		{name: "above the user ceiling", pc: class("greedy", 1000000001),
			want: []string{"value|Forbidden|maximum allowed value of a user defined priority is 1000000000"}},
		{name: "negative is fine", pc: class("low", -5)},
		{name: "unknown system name", pc: class("system-mine", 5),
			want: []string{"metadata.name|Forbidden|priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"}},
		{name: "system name, wrong value", pc: class("system-node-critical", 5),
			want: []string{"metadata.name|Forbidden|priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000"}},
		{name: "system name as default", pc: func() *schedulingv1.PriorityClass {
			pc := class("system-cluster-critical", 2000000000)
			pc.GlobalDefault = true
			return pc
		}(), want: []string{"metadata.name|Forbidden|priority class names with 'system-' prefix are reserved for system use only. error: globalDefault of system-cluster-critical PriorityClass must be false"}},
		{name: "unknown preemption policy", pc: func() *schedulingv1.PriorityClass {
			pc := class("odd", 1)
			pc.PreemptionPolicy = ptr.To(corev1.PreemptionPolicy("Sometimes"))
			return pc
		}(), want: []string{`preemptionPolicy|Unsupported value|supported values: "PreemptLowerPriority", "Never"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Validate(tt.pc))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := class("batch", 100)
	pc := old.DeepCopy()
	pc.Description = "now described"
	pc.GlobalDefault = true
	if errs := ValidateUpdate(pc, old); len(errs) != 0 {
		t.Errorf("description and globalDefault change refused: %v", errs)
	}
	pc.Value = 101
	pc.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	want := []string{"value|Forbidden|may not be changed in an update.", "preemptionPolicy|Invalid value|field is immutable"}
	if diff := cmp.Diff(want, flat(ValidateUpdate(pc, old))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestRow(t *testing.T) {
	pc := class("batch", 100)
	pc.CreationTimestamp = metav1.NewTime(now.Add(-48 * time.Hour))
	want := []interface{}{"batch", int64(100), false, "2d", "PreemptLowerPriority"}
	if diff := cmp.Diff(want, row(pc, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	k := Kind()
	if k.Namespaced || k.HasStatus || k.ShortNames[0] != "pc" || len(k.Columns) != len(want) || k.GroupVersion.String() != "scheduling.k8s.io/v1" {
		t.Errorf("kind = %+v", k)
	}
}
