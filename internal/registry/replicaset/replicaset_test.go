package replicaset

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

func newRS() *appsv1.ReplicaSet {
	labels := map[string]string{"app": "web"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
			},
		},
	}
	Default(rs)
	return rs
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.GroupVersion.String() != "apps/v1" || k.Resource != "replicasets" || k.Kind != "ReplicaSet" || !k.Namespaced || !k.HasStatus ||
		k.Status == nil || k.ShortNames[0] != "rs" {
		t.Errorf("kind = %+v", k)
	}
	rs := newRS()
	if got := len(k.Row(rs, now)); got != len(k.Columns) {
		t.Errorf("%d cells for %d columns", got, len(k.Columns))
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "web", "metadata.namespace": "ns"}, k.Fields(rs)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	rs := newRS()
	if ptr.Deref(rs.Spec.Replicas, -1) != 1 || rs.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("replicas %v, restartPolicy %q", rs.Spec.Replicas, rs.Spec.Template.Spec.RestartPolicy)
	}
	rs.Spec.Replicas = ptr.To[int32](0)
	Default(rs)
	if *rs.Spec.Replicas != 0 {
		t.Error("an explicit 0 replicas was defaulted")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.ReplicaSet)
		want   []string
	}{
		{name: "valid", mutate: func(*appsv1.ReplicaSet) {}},
		{name: "negative replicas", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Replicas = ptr.To[int32](-1) },
			want: []string{"spec.replicas|Invalid value|must be greater than or equal to 0"}},
		{name: "no selector", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = nil },
			want: []string{"spec.selector|Required value|", "spec.template.metadata.labels|Invalid value|`selector` does not match template `labels`"}},
		{name: "empty selector", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector|Invalid value|empty selector is invalid for deployment"}},
		{name: "selector does not match", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Selector.MatchLabels = map[string]string{"app": "db"} },
			want: []string{"spec.template.metadata.labels|Invalid value|`selector` does not match template `labels`"}},
		{name: "template checked as a pod", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.Containers = nil },
			want: []string{"spec.template.spec.containers|Required value|"}},
		{name: "template restartPolicy", mutate: func(rs *appsv1.ReplicaSet) { rs.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []string{`spec.template.spec.restartPolicy|Unsupported value|supported values: "Always"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newRS()
			tt.mutate(rs)
			if diff := cmp.Diff(tt.want, flat(Validate(rs))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	k := Kind()
	old := newRS()
	old.Generation = 4
	old.Status.Replicas = 3

	rs := old.DeepCopy()
	rs.Status = appsv1.ReplicaSetStatus{}
	rs.Labels = map[string]string{"x": "y"}
	k.PrepareForUpdate(rs, old)
	if rs.Generation != 4 || rs.Status.Replicas != 3 {
		t.Errorf("metadata-only update: generation %d, status %+v", rs.Generation, rs.Status)
	}
	rs.Spec.Replicas = ptr.To[int32](5)
	k.PrepareForUpdate(rs, old)
	if rs.Generation != 5 {
		t.Errorf("spec update: generation %d, want 5", rs.Generation)
	}

	rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "v": "2"}}
	rs.Spec.Template.Labels = map[string]string{"app": "web", "v": "2"}
	got := flat(k.ValidateUpdate(rs, old))
	if len(got) != 1 || got[0][:len("spec.selector|Invalid value|")] != "spec.selector|Invalid value|" {
		t.Errorf("selector change: %v", got)
	}

	// The status subresource keeps the spec and checks the counters.
	st := old.DeepCopy()
	st.Spec.Replicas = ptr.To[int32](9)
	st.Status = appsv1.ReplicaSetStatus{Replicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}
	k.Status.PrepareForUpdate(st, old)
	if *st.Spec.Replicas != 1 {
		t.Error("status update changed the spec")
	}
	want := []string{
		"status.readyReplicas|Invalid value|cannot be greater than status.replicas",
		"status.availableReplicas|Invalid value|cannot be greater than status.replicas",
	}
	if diff := cmp.Diff(want, flat(k.Status.ValidateUpdate(st, old))); diff != "" {
		t.Errorf("status errors (-want +got):\n%s", diff)
	}
}

func TestCreateResetsStatus(t *testing.T) {
	rs := newRS()
	rs.Status.Replicas = 7
	Kind().PrepareForCreate(rs)
	if rs.Status.Replicas != 0 || rs.Generation != 1 {
		t.Errorf("status %+v generation %d", rs.Status, rs.Generation)
	}
}

func TestRow(t *testing.T) {
	rs := newRS()
	rs.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
	rs.Spec.Replicas = ptr.To[int32](4)
	rs.Status = appsv1.ReplicaSetStatus{Replicas: 3, ReadyReplicas: 2}
	rs.Spec.Template.Spec.Containers = append(rs.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "envoy"})
	want := []interface{}{"web", int64(4), int64(3), int64(2), "90s", "c,side", "busybox:1.36,envoy", "app=web"}
	if diff := cmp.Diff(want, row(rs, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestScale(t *testing.T) {
	rules := Kind().Scale
	type got struct {
		Spec, Status int32
		Selector     string
	}
	tests := []struct {
		name string
		edit func(*appsv1.ReplicaSet)
		want got
	}{
		{"defaulted", func(*appsv1.ReplicaSet) {}, got{1, 0, "app=web"}},
		{"scaled up, two running", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Replicas = ptr.To(int32(5))
			rs.Status.Replicas = 2
			rs.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}
		}, got{5, 2, "app=web,tier in (a,b)"}},
		{"no replicas, no selector", func(rs *appsv1.ReplicaSet) {
			rs.Spec.Replicas = nil
			rs.Spec.Selector = nil
		}, got{0, 0, ""}},
		{"empty selector", func(rs *appsv1.ReplicaSet) { rs.Spec.Selector = &metav1.LabelSelector{} }, got{1, 0, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := newRS()
			tc.edit(rs)
			var g got
			g.Spec, g.Status, g.Selector = rules.Get(rs)
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		})
	}
	rs := newRS()
	rules.Set(rs, 7)
	if ptr.Deref(rs.Spec.Replicas, -1) != 7 {
		t.Errorf("after Set(7), spec.replicas = %v", rs.Spec.Replicas)
	}
}
