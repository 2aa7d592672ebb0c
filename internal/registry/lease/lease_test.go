package lease

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

const msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

// nodeLease is what a kubelet writes into kube-node-lease.
func nodeLease() *coordinationv1.Lease {
	renew := metav1.NewMicroTime(time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC))
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("node-1"),
			LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime:            &renew,
		},
	}
}

func TestValidate(t *testing.T) {
	oldest := coordinationv1.OldestEmulationVersion
	tests := []struct {
		name   string
		mutate func(s *coordinationv1.LeaseSpec)
		want   []string
	}{
		{name: "node lease", mutate: func(*coordinationv1.LeaseSpec) {}},
		{name: "empty spec", mutate: func(s *coordinationv1.LeaseSpec) { *s = coordinationv1.LeaseSpec{} }},
		{
			name:   "zero duration",
			mutate: func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr.To[int32](0) },
			want:   []string{"spec.leaseDurationSeconds|Invalid value|must be greater than 0"},
		},
		{
			name:   "negative duration",
			mutate: func(s *coordinationv1.LeaseSpec) { s.LeaseDurationSeconds = ptr.To[int32](-5) },
			want:   []string{"spec.leaseDurationSeconds|Invalid value|must be greater than 0"},
		},
		{name: "zero transitions", mutate: func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = ptr.To[int32](0) }},
		{
			name:   "negative transitions",
			mutate: func(s *coordinationv1.LeaseSpec) { s.LeaseTransitions = ptr.To[int32](-1) },
			want:   []string{"spec.leaseTransitions|Invalid value|must be greater than or equal to 0"},
		},
		{name: "known strategy", mutate: func(s *coordinationv1.LeaseSpec) { s.Strategy = &oldest; s.PreferredHolder = ptr.To("a") }},
		{name: "prefixed strategy", mutate: func(s *coordinationv1.LeaseSpec) {
			s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("example.com/mine")
		}},
		{
			name: "unknown unprefixed strategy",
			mutate: func(s *coordinationv1.LeaseSpec) {
				s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("Newest")
			},
			want: []string{`spec.strategy.strategy|Unsupported value|supported values: "OldestEmulationVersion"`},
		},
		{
			name: "prefixed strategy that is not a qualified name",
			mutate: func(s *coordinationv1.LeaseSpec) {
				s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("example.com/bad one")
			},
			want: []string{"spec.strategy.strategy|Invalid value|" + msgQualifiedName},
		},
		{
			name:   "preferred holder without strategy",
			mutate: func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr.To("a") },
			want:   []string{"spec.preferredHolder|Forbidden|may only be specified if `strategy` is defined"},
		},
		{
			name: "preferred holder with empty strategy",
			mutate: func(s *coordinationv1.LeaseSpec) {
				s.PreferredHolder = ptr.To("a")
				s.Strategy = ptr.To[coordinationv1.CoordinatedLeaseStrategy]("")
			},
			want: []string{
				`spec.strategy.strategy|Unsupported value|supported values: "OldestEmulationVersion"`,
				"spec.preferredHolder|Forbidden|may only be specified if `strategy` is defined",
			},
		},
		{name: "empty preferred holder", mutate: func(s *coordinationv1.LeaseSpec) { s.PreferredHolder = ptr.To("") }},
	}
	k := Kind()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := nodeLease()
			tc.mutate(&l.Spec)
			if diff := cmp.Diff(tc.want, flat(k.Validate(l))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, flat(k.ValidateUpdate(l, nodeLease()))); diff != "" {
				t.Errorf("ValidateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	oldest := coordinationv1.OldestEmulationVersion
	k := Kind()

	l := nodeLease()
	l.Spec.Strategy = &oldest
	l.Spec.PreferredHolder = ptr.To("a")
	k.PrepareForCreate(l)
	if l.Spec.Strategy != nil || l.Spec.PreferredHolder != nil {
		t.Errorf("create kept coordinated fields: %+v", l.Spec)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "node-1" {
		t.Errorf("create lost holder")
	}

	l = nodeLease()
	l.Spec.Strategy = &oldest
	l.Spec.PreferredHolder = ptr.To("a")
	k.PrepareForUpdate(l, nodeLease())
	if l.Spec.Strategy != nil || l.Spec.PreferredHolder != nil {
		t.Errorf("update started using coordinated fields: %+v", l.Spec)
	}

	old := nodeLease()
	old.Spec.Strategy = &oldest
	old.Spec.PreferredHolder = ptr.To("a")
	l = nodeLease()
	l.Spec.Strategy = &oldest
	l.Spec.PreferredHolder = ptr.To("b")
	k.PrepareForUpdate(l, old)
	if l.Spec.Strategy == nil || l.Spec.PreferredHolder == nil || *l.Spec.PreferredHolder != "b" {
		t.Errorf("update dropped coordinated fields already in use: %+v", l.Spec)
	}
}

func TestTableAndFields(t *testing.T) {
	now := time.Date(2025, 1, 10, 12, 0, 0, 0, time.UTC)
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
		if c.Description == "" {
			t.Errorf("column %s has no description", c.Name)
		}
	}
	if diff := cmp.Diff([]string{"Name", "Holder", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}

	l := nodeLease()
	l.CreationTimestamp = metav1.NewTime(now.Add(-72 * time.Hour))
	if diff := cmp.Diff([]interface{}{"node-1", "node-1", "3d"}, k.Row(l, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	free := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	if diff := cmp.Diff([]interface{}{"x", "", "<unknown>"}, k.Row(free, now)); diff != "" {
		t.Errorf("unheld row (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "node-1", "metadata.namespace": "kube-node-lease"}, k.Fields(l)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.GroupVersion.String() != "coordination.k8s.io/v1" || k.Resource != "leases" || k.Kind != "Lease" ||
		k.ListKind != "LeaseList" || !k.Namespaced || k.HasStatus || k.Status != nil {
		t.Errorf("unexpected kind data: %+v", k)
	}
	if _, ok := k.New().(*coordinationv1.Lease); !ok {
		t.Errorf("New() = %T", k.New())
	}
}

// FuzzValidateLease: no input may make a Kind function panic.
func FuzzValidateLease(f *testing.F) {
	seed, _ := json.Marshal(nodeLease())
	f.Add(seed)
	f.Add([]byte(`{"spec":{"leaseDurationSeconds":-1,"leaseTransitions":-1,"strategy":"a/b/c","preferredHolder":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := &coordinationv1.Lease{}
		if err := json.Unmarshal(data, l); err != nil {
			return
		}
		k := Kind()
		old := l.DeepCopy()
		_ = k.Validate(l)
		k.PrepareForUpdate(l, old)
		_ = k.ValidateUpdate(l, old)
		k.PrepareForCreate(l)
		_ = k.Row(l, time.Now())
		_ = k.Fields(l)
	})
}
