package daemonset

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

func newDS() *appsv1.DaemonSet {
	labels := map[string]string{"app": "agent"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "ns"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
			},
		},
	}
	Default(ds)
	return ds
}

func TestDefault(t *testing.T) {
	ds := newDS()
	want := appsv1.DaemonSetUpdateStrategy{
		Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			MaxSurge:       ptr.To(intstr.FromInt32(0)),
		},
	}
	if diff := cmp.Diff(want, ds.Spec.UpdateStrategy); diff != "" {
		t.Errorf("update strategy (-want +got):\n%s", diff)
	}
	if ptr.Deref(ds.Spec.RevisionHistoryLimit, 0) != 10 {
		t.Errorf("revisionHistoryLimit = %v", ds.Spec.RevisionHistoryLimit)
	}
	onDelete := newDS()
	onDelete.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
	Default(onDelete)
	if onDelete.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Error("OnDelete got a rollingUpdate")
	}
}

func TestValidate(t *testing.T) {
	ru := func(unavailable, surge intstr.IntOrString) func(*appsv1.DaemonSet) {
		return func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &unavailable, MaxSurge: &surge}
		}
	}
	tests := []struct {
		name   string
		mutate func(*appsv1.DaemonSet)
		want   []string
	}{
		{name: "valid", mutate: func(*appsv1.DaemonSet) {}},
		{name: "empty selector", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector|Invalid value|empty selector is invalid for daemonset"}},
		{name: "selector does not match", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Labels = map[string]string{"app": "x"} },
			want: []string{"spec.template.metadata.labels|Invalid value|`selector` does not match template `labels`"}},
		{name: "activeDeadlineSeconds", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](1) },
			want: []string{"spec.template.spec.activeDeadlineSeconds|Forbidden|activeDeadlineSeconds in DaemonSet is not Supported"}},
		{name: "surge only", mutate: ru(intstr.FromInt32(0), intstr.FromString("10%"))},
		{name: "both set", mutate: ru(intstr.FromInt32(1), intstr.FromInt32(1)),
			want: []string{"spec.updateStrategy.rollingUpdate.maxSurge|Invalid value|may not be set when maxUnavailable is non-zero"}},
		{name: "both zero", mutate: ru(intstr.FromInt32(0), intstr.FromInt32(0)),
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable|Required value|cannot be 0 when maxSurge is 0"}},
		{name: "over 100%", mutate: ru(intstr.FromString("150%"), intstr.FromInt32(0)),
			want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|must not be greater than 100%"}},
		{name: "unknown strategy", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.UpdateStrategy.Type = "Sometimes" },
			want: []string{`spec.updateStrategy|Unsupported value|supported values: "RollingUpdate", "OnDelete"`}},
		{name: "negative minReadySeconds", mutate: func(ds *appsv1.DaemonSet) { ds.Spec.MinReadySeconds = -1 },
			want: []string{"spec.minReadySeconds|Invalid value|must be greater than or equal to 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := newDS()
			tt.mutate(ds)
			if diff := cmp.Diff(tt.want, flat(Validate(ds))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGenerations(t *testing.T) {
	k := Kind()
	ds := newDS()
	ds.Annotations = map[string]string{appsv1.DeprecatedTemplateGeneration: "42"}
	k.PrepareForCreate(ds)
	if TemplateGeneration(ds) != 1 || ds.Generation != 1 {
		t.Fatalf("create: template generation %d, generation %d", TemplateGeneration(ds), ds.Generation)
	}
	old := ds.DeepCopy()

	// A client cannot set the template generation.
	upd := old.DeepCopy()
	upd.Annotations[appsv1.DeprecatedTemplateGeneration] = "9"
	k.PrepareForUpdate(upd, old)
	if TemplateGeneration(upd) != 1 || upd.Generation != 1 {
		t.Errorf("annotation-only update: template generation %d, generation %d", TemplateGeneration(upd), upd.Generation)
	}
	// A spec change outside the template moves only the generation.
	upd = old.DeepCopy()
	upd.Spec.MinReadySeconds = 5
	k.PrepareForUpdate(upd, old)
	if TemplateGeneration(upd) != 1 || upd.Generation != 2 {
		t.Errorf("spec update: template generation %d, generation %d", TemplateGeneration(upd), upd.Generation)
	}
	// A template change moves both.
	upd = old.DeepCopy()
	upd.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
	k.PrepareForUpdate(upd, old)
	if TemplateGeneration(upd) != 2 || upd.Generation != 2 {
		t.Errorf("template update: template generation %d, generation %d", TemplateGeneration(upd), upd.Generation)
	}
	// The status subresource keeps both.
	st := old.DeepCopy()
	delete(st.Annotations, appsv1.DeprecatedTemplateGeneration)
	st.Spec.MinReadySeconds = 7
	st.Status.NumberReady = 3
	k.Status.PrepareForUpdate(st, old)
	if TemplateGeneration(st) != 1 || st.Spec.MinReadySeconds != 0 || st.Status.NumberReady != 3 {
		t.Errorf("status update: %+v", st)
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	old := newDS()
	old.Status.CollisionCount = ptr.To[int32](2)
	ds := old.DeepCopy()
	ds.Status.NumberReady = -1
	ds.Status.CollisionCount = ptr.To[int32](1)
	want := []string{
		"status.numberReady|Invalid value|must be greater than or equal to 0",
		"status.collisionCount|Invalid value|cannot be decremented",
	}
	if diff := cmp.Diff(want, flat(ValidateStatusUpdate(ds, old))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestRow(t *testing.T) {
	ds := newDS()
	ds.CreationTimestamp = metav1.NewTime(now.Add(-3 * time.Hour))
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, NumberReady: 2, UpdatedNumberScheduled: 3, NumberAvailable: 2}
	want := []interface{}{"agent", int64(3), int64(3), int64(2), int64(3), int64(2), "<none>", "3h", "c", "busybox:1.36", "app=agent"}
	if diff := cmp.Diff(want, row(ds, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
	if got := row(ds, now)[6]; got != "kubernetes.io/os=linux" {
		t.Errorf("NODE SELECTOR = %v", got)
	}
	if len(Kind().Columns) != len(want) {
		t.Errorf("%d columns, %d cells", len(Kind().Columns), len(want))
	}
}
