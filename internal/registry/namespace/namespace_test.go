package namespace

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func nsWith(finalizers ...v1.FinalizerName) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: v1.NamespaceSpec{Finalizers: finalizers}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ns   *v1.Namespace
		want []string
	}{
		{name: "no finalizers", ns: nsWith()},
		{name: "standard and qualified finalizers", ns: nsWith("kubernetes", "orphan", "foregroundDeletion", "example.com/cleanup")},
		{
			name: "unprefixed finalizer that is not standard",
			ns:   nsWith("kubernetes", "cleanup"),
			want: []string{"spec.finalizers|Invalid value|name is neither a standard finalizer name nor is it fully qualified"},
		},
		{
			name: "finalizer that is not a qualified name",
			ns:   nsWith("example.com/bad name"),
			want: []string{"spec.finalizers|Invalid value|" + msgQualifiedName},
		},
	}
	k := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, flat(k.Validate(tc.ns))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, flat(k.ValidateUpdate(tc.ns, nsWith()))); diff != "" {
				t.Errorf("ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateFinalizeUpdate(t *testing.T) {
	got := flat(ValidateFinalizeUpdate(nsWith("kubernetes", "cleanup"), nsWith("kubernetes")))
	want := []string{"spec.finalizers[1]|Invalid value|name is neither a standard finalizer name nor is it fully qualified"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ValidateFinalizeUpdate (-want +got):\n%s", diff)
	}
	if errs := ValidateFinalizeUpdate(nsWith(), nsWith("kubernetes")); len(errs) != 0 {
		t.Errorf("removing every finalizer rejected: %v", errs)
	}
}

func TestPrepareForFinalize(t *testing.T) {
	old := nsWith("kubernetes")
	old.Status.Phase = v1.NamespaceTerminating
	ns := nsWith()
	ns.Status.Phase = v1.NamespaceActive
	PrepareForFinalize(ns, old)
	if ns.Status.Phase != v1.NamespaceTerminating || len(ns.Spec.Finalizers) != 0 {
		t.Errorf("finalize kept %q %v", ns.Status.Phase, ns.Spec.Finalizers)
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	tests := []struct {
		name    string
		phase   v1.NamespacePhase
		deleted bool
		want    []string
	}{
		{name: "active", phase: v1.NamespaceActive},
		{name: "terminating while deleted", phase: v1.NamespaceTerminating, deleted: true},
		{name: "terminating while not deleted", phase: v1.NamespaceTerminating, want: []string{"status.Phase|Invalid value|may only be 'Active' if `deletionTimestamp` is empty"}},
		{name: "active while deleted", phase: v1.NamespaceActive, deleted: true, want: []string{"status.Phase|Invalid value|may only be 'Terminating' if `deletionTimestamp` is not empty"}},
		{name: "empty phase", phase: "", want: []string{"status.Phase|Invalid value|may only be 'Active' if `deletionTimestamp` is empty"}},
	}
	k := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsWith("kubernetes")
			ns.Status.Phase = tc.phase
			if tc.deleted {
				ns.DeletionTimestamp = &deleted
			}
			if diff := cmp.Diff(tc.want, flat(k.Status.ValidateUpdate(ns, nsWith()))); diff != "" {
				t.Errorf("status ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	tests := []struct {
		name       string
		ns         v1.Namespace
		wantLabels map[string]string
		wantPhase  v1.NamespacePhase
	}{
		{
			name:       "label and phase added",
			ns:         v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
			wantLabels: map[string]string{"kubernetes.io/metadata.name": "a"},
			wantPhase:  v1.NamespaceActive,
		},
		{
			name:       "label corrected, others kept",
			ns:         v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"kubernetes.io/metadata.name": "b", "team": "x"}}},
			wantLabels: map[string]string{"kubernetes.io/metadata.name": "a", "team": "x"},
			wantPhase:  v1.NamespaceActive,
		},
		{
			name:      "no name yet, no label",
			ns:        v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "a-"}},
			wantPhase: v1.NamespaceActive,
		},
		{
			name:       "phase kept",
			ns:         v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: v1.NamespaceStatus{Phase: v1.NamespaceTerminating}},
			wantLabels: map[string]string{"kubernetes.io/metadata.name": "a"},
			wantPhase:  v1.NamespaceTerminating,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns.DeepCopy()
			Kind().Default(ns)
			if diff := cmp.Diff(tc.wantLabels, ns.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if ns.Status.Phase != tc.wantPhase {
				t.Errorf("phase = %q, want %q", ns.Status.Phase, tc.wantPhase)
			}
			if len(ns.Spec.Finalizers) != 0 {
				t.Errorf("Default added finalizers: %v", ns.Spec.Finalizers)
			}
		})
	}
}

func TestPrepareForCreate(t *testing.T) {
	tests := []struct {
		name string
		in   []v1.FinalizerName
		want []v1.FinalizerName
	}{
		{name: "none", want: []v1.FinalizerName{"kubernetes"}},
		{name: "kubernetes already there", in: []v1.FinalizerName{"example.com/x", "kubernetes"}, want: []v1.FinalizerName{"example.com/x", "kubernetes"}},
		{name: "appended after others", in: []v1.FinalizerName{"example.com/x"}, want: []v1.FinalizerName{"example.com/x", "kubernetes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := nsWith(tc.in...)
			ns.Status.Phase = v1.NamespaceTerminating
			Kind().PrepareForCreate(ns)
			if diff := cmp.Diff(tc.want, ns.Spec.Finalizers); diff != "" {
				t.Errorf("finalizers (-want +got):\n%s", diff)
			}
			if ns.Status.Phase != v1.NamespaceActive {
				t.Errorf("phase = %q, want Active", ns.Status.Phase)
			}
		})
	}
}

func TestPrepareForUpdate(t *testing.T) {
	old := nsWith("kubernetes")
	old.Status.Phase = v1.NamespaceTerminating
	ns := nsWith("example.com/x")
	ns.Labels = map[string]string{"team": "x"}
	ns.Status.Phase = v1.NamespaceActive
	Kind().PrepareForUpdate(ns, old)
	if diff := cmp.Diff([]v1.FinalizerName{"kubernetes"}, ns.Spec.Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
	if ns.Status.Phase != v1.NamespaceTerminating {
		t.Errorf("phase = %q, want old's Terminating", ns.Status.Phase)
	}
	if ns.Labels["team"] != "x" {
		t.Errorf("metadata change lost")
	}

	ns = nsWith()
	ns.Status.Phase = v1.NamespaceTerminating
	Kind().Status.PrepareForUpdate(ns, nsWith("kubernetes"))
	if diff := cmp.Diff([]v1.FinalizerName{"kubernetes"}, ns.Spec.Finalizers); diff != "" {
		t.Errorf("status update changed spec (-want +got):\n%s", diff)
	}
	if ns.Status.Phase != v1.NamespaceTerminating {
		t.Errorf("status change lost")
	}
}

func TestTableAndFields(t *testing.T) {
	now := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Status", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.Columns[0].Format != "name" || k.Columns[2].Type != "string" {
		t.Errorf("column formats: %+v", k.Columns)
	}

	ns := nsWith()
	ns.Status.Phase = v1.NamespaceActive
	ns.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Minute))
	if diff := cmp.Diff([]interface{}{"team-a", "Active", "90m"}, k.Row(ns, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]interface{}{"x", "", "<unknown>"}, k.Row(&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, now)); diff != "" {
		t.Errorf("bare row (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "team-a", "status.phase": "Active"}, k.Fields(ns)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.Resource != "namespaces" || k.Kind != "Namespace" || k.ListKind != "NamespaceList" || k.Namespaced || !k.HasStatus || k.Status == nil {
		t.Errorf("unexpected kind data: %+v", k)
	}
	if diff := cmp.Diff([]string{"ns"}, k.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	if _, ok := k.New().(*v1.Namespace); !ok {
		t.Errorf("New() = %T", k.New())
	}
}
