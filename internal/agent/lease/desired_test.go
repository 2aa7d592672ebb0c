package lease

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)

func TestDesiredLease(t *testing.T) {
	nodeRef := NodeOwnerReference("node-1", "uid-1")
	otherRef := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "uid-x"}
	later := t0.Add(10 * time.Second)
	tests := []struct {
		name     string
		existing *coordinationv1.Lease
		owner    *metav1.OwnerReference
		want     *coordinationv1.Lease
	}{
		{
			name:  "new lease with its owner",
			owner: &nodeRef,
			want: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Name: "node-1", Namespace: "kube-node-lease",
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "uid-1"}},
				},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("node-1"),
					LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime:            &metav1.MicroTime{Time: later},
				},
			},
		},
		{
			name: "new lease with the owner unknown",
			want: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease"},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("node-1"),
					LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime:            &metav1.MicroTime{Time: later},
				},
			},
		},
		{
			name: "renewal keeps metadata and adds a missing owner",
			existing: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("node-1"),
					LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime:            &metav1.MicroTime{Time: t0},
					AcquireTime:          &metav1.MicroTime{Time: t0},
				},
			},
			owner: &nodeRef,
			want: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Name: "node-1", Namespace: "kube-node-lease", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
					OwnerReferences: []metav1.OwnerReference{nodeRef},
				},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("node-1"),
					LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime:            &metav1.MicroTime{Time: later},
					AcquireTime:          &metav1.MicroTime{Time: t0},
				},
			},
		},
		{
			name: "someone else's owner reference is left alone",
			existing: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", OwnerReferences: []metav1.OwnerReference{otherRef}},
			},
			owner: &nodeRef,
			want: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", OwnerReferences: []metav1.OwnerReference{otherRef}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("node-1"),
					LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime:            &metav1.MicroTime{Time: later},
				},
			},
		},
		{
			name: "holder and duration are asserted again",
			existing: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", OwnerReferences: []metav1.OwnerReference{nodeRef}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("someone-else"),
					LeaseDurationSeconds: ptr.To[int32](15),
					RenewTime:            &metav1.MicroTime{Time: t0},
				},
			},
			want: &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", OwnerReferences: []metav1.OwnerReference{nodeRef}},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity:       ptr.To("node-1"),
					LeaseDurationSeconds: ptr.To[int32](40),
					RenewTime:            &metav1.MicroTime{Time: later},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *coordinationv1.Lease
			if tt.existing != nil {
				before = tt.existing.DeepCopy()
			}
			got := desiredLease(tt.existing, "kube-node-lease", "node-1", 40, tt.owner, later)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("desiredLease (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tt.existing); diff != "" {
				t.Errorf("desiredLease modified its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestNeedsOwner(t *testing.T) {
	tests := []struct {
		name     string
		existing *coordinationv1.Lease
		want     bool
	}{
		{name: "no lease yet", want: true},
		{name: "lease without references", existing: &coordinationv1.Lease{}, want: true},
		{
			name:     "lease with a reference",
			existing: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{NodeOwnerReference("n", "u")}}},
			want:     false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsOwner(tt.existing); got != tt.want {
				t.Errorf("needsOwner = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestJittered(t *testing.T) {
	tests := []struct {
		name   string
		factor float64
		r      float64
		want   time.Duration
	}{
		{name: "lowest draw waits the interval", factor: 0.04, r: 0, want: 10 * time.Second},
		{name: "middle draw", factor: 0.04, r: 0.5, want: 10200 * time.Millisecond},
		{name: "highest draw stays under 1.04 × interval", factor: 0.04, r: 0.999, want: 10399600 * time.Microsecond},
		{name: "negative factor disables jitter", factor: -1, r: 0.9, want: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jittered(10*time.Second, tt.factor, tt.r); got != tt.want {
				t.Errorf("jittered = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cs := fake.NewClientset()
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; nil means valid
	}{
		{name: "minimal", cfg: Config{Client: cs, NodeName: "node-1"}},
		{
			name: "nothing",
			want: []string{"client: Required value", "nodeName: Required value"},
		},
		{
			name: "bad node name and negative numbers",
			cfg:  Config{Client: cs, NodeName: "Node_1", LeaseDurationSeconds: -1, RenewInterval: -time.Second},
			want: []string{`nodeName: Invalid value: "Node_1"`, "leaseDurationSeconds: Invalid value: -1: must be greater than zero", `renewInterval: Invalid value: "-1s": must not be negative`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want errors %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want time.Duration
	}{
		{name: "kubelet default: a quarter of 40s", cfg: Config{}, want: 10 * time.Second},
		{name: "a quarter of a longer lease", cfg: Config{LeaseDurationSeconds: 60}, want: 15 * time.Second},
		{name: "explicit interval wins", cfg: Config{LeaseDurationSeconds: 60, RenewInterval: 3 * time.Second}, want: 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Client = fake.NewClientset()
			cfg.NodeName = "node-1"
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.RenewInterval(); got != tt.want {
				t.Errorf("RenewInterval = %v, want %v", got, tt.want)
			}
		})
	}
}
