package controllerrevision

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
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

func newCR(data string) *appsv1.ControllerRevision {
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d4b9c", Namespace: "ns"},
		Revision:   2,
	}
	if data != "" {
		cr.Data = runtime.RawExtension{Raw: []byte(data)}
	}
	return cr
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.GroupVersion.String() != "apps/v1" || k.Resource != "controllerrevisions" || k.Kind != "ControllerRevision" ||
		k.ListKind != "ControllerRevisionList" || k.SingularName != "controllerrevision" || !k.Namespaced ||
		k.HasStatus || k.Status != nil || k.Scale != nil || k.Default != nil || len(k.ShortNames) != 0 {
		t.Errorf("kind = %+v", k)
	}
	cr := newCR(`{"spec":{}}`)
	if got := len(k.Row(cr, now)); got != len(k.Columns) {
		t.Errorf("%d cells for %d columns", got, len(k.Columns))
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "web-7d4b9c", "metadata.namespace": "ns"}, k.Fields(cr)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		data     string
		revision int64
		want     []string
	}{
		{name: "object", data: `{"spec":{"template":{}}}`, revision: 1},
		{name: "empty object", data: `{}`},
		{name: "no data", revision: 1, want: []string{"data|Required value|data is mandatory"}},
		{name: "null", data: `null`, want: []string{"data|Required value|data is mandatory"}},
		{name: "not an object", data: `[1,2]`, want: []string{"data|Required value|data must be a valid JSON object"}},
		{name: "a string", data: `"x"`, want: []string{"data|Required value|data must be a valid JSON object"}},
		{name: "not JSON", data: `{"a":`, want: []string{"data|Invalid value|error parsing data: unexpected end of JSON input"}},
		{name: "negative revision", data: `{}`, revision: -1, want: []string{"revision|Invalid value|must be greater than or equal to 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := newCR(tt.data)
			cr.Revision = tt.revision
			if diff := cmp.Diff(tt.want, flat(Kind().Validate(cr))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	const stored = `{"spec":{"template":{"a":1}}}`
	immutable := []string{"data|Invalid value|field is immutable"}
	tests := []struct {
		name     string
		old      string
		data     string
		revision int64
		want     []string
	}{
		{name: "unchanged", old: stored, data: stored, revision: 2},
		{name: "revision may change", old: stored, data: stored, revision: 5},
		{name: "negative revision", old: stored, data: stored, revision: -1,
			want: []string{"revision|Invalid value|must be greater than or equal to 0"}},
		{name: "data changed", old: stored, data: `{"spec":{"template":{"a":2}}}`, revision: 2, want: immutable},
		{name: "data removed", old: stored, revision: 2, want: immutable},
		{name: "data only reformatted", old: "{\n  \"spec\": {\"template\": {\"a\": 1}}\n}", data: stored, revision: 2},
		{name: "keys reordered is a change", old: `{"a":1,"b":2}`, data: `{"b":2,"a":1}`, revision: 2, want: immutable},
		{name: "stored data that is not an object is kept", old: `[1]`, data: `[1]`, revision: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newCR(tt.old)
			cr := newCR(tt.data)
			cr.Revision = tt.revision
			if diff := cmp.Diff(tt.want, flat(Kind().ValidateUpdate(cr, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRow(t *testing.T) {
	cr := newCR(`{}`)
	cr.CreationTimestamp = metav1.NewTime(now.Add(-3 * time.Hour))
	cr.OwnerReferences = []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Pod", Name: "not-the-controller"},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", Controller: ptr.To(true)},
	}
	want := []interface{}{"web-7d4b9c", "statefulset.apps/web", int64(2), "3h"}
	if diff := cmp.Diff(want, row(cr, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	var names []string
	for _, c := range columns() {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Controller", "Revision", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}

func TestController(t *testing.T) {
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want string
	}{
		{name: "none", want: "<none>"},
		{name: "owner that is not the controller", refs: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "d"}}, want: "<none>"},
		{name: "daemonset", refs: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", Controller: ptr.To(true)}},
			want: "daemonset.apps/agent"},
		{name: "core group", refs: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ReplicationController", Name: "rc", Controller: ptr.To(true)}},
			want: "replicationcontroller/rc"},
		{name: "custom group", refs: []metav1.OwnerReference{{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "s", Controller: ptr.To(true)}},
			want: "statefulset.apps.kruise.io/s"},
		{name: "apiVersion that does not parse", refs: []metav1.OwnerReference{{APIVersion: "a/b/c", Kind: "Thing", Name: "t", Controller: ptr.To(true)}},
			want: "thing/t"},
		{name: "no kind and no group", refs: []metav1.OwnerReference{{APIVersion: "v1", Name: "bare", Controller: ptr.To(true)}},
			want: "bare"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cr := newCR(`{}`)
			cr.OwnerReferences = tt.refs
			if got := Controller(cr); got != tt.want {
				t.Errorf("Controller = %q, want %q", got, tt.want)
			}
		})
	}
}
