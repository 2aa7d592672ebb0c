package csidriver

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	storagev1 "k8s.io/api/storage/v1"
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

func newDriver(mutate ...func(*storagev1.CSIDriver)) *storagev1.CSIDriver {
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "hostpath.csi.knode.io"}}
	Default(d)
	for _, m := range mutate {
		m(d)
	}
	return d
}

func TestDefault(t *testing.T) {
	d := &storagev1.CSIDriver{}
	Default(d)
	want := storagev1.CSIDriverSpec{
		AttachRequired:       ptr.To(true),
		PodInfoOnMount:       ptr.To(false),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		StorageCapacity:      ptr.To(false),
		FSGroupPolicy:        ptr.To(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy),
		RequiresRepublish:    ptr.To(false),
		SELinuxMount:         ptr.To(false),
	}
	if diff := cmp.Diff(want, d.Spec); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	set := &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{
		AttachRequired:       ptr.To(false),
		PodInfoOnMount:       ptr.To(true),
		VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral},
		FSGroupPolicy:        ptr.To(storagev1.FileFSGroupPolicy),
		SELinuxMount:         ptr.To(true),
	}}
	Default(set)
	if *set.Spec.AttachRequired || !*set.Spec.PodInfoOnMount || set.Spec.VolumeLifecycleModes[0] != storagev1.VolumeLifecycleEphemeral ||
		*set.Spec.FSGroupPolicy != storagev1.FileFSGroupPolicy || !*set.Spec.SELinuxMount {
		t.Errorf("defaults overwrote set values: %+v", set.Spec)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		d    *storagev1.CSIDriver
		want []string
	}{
		{name: "defaulted", d: newDriver()},
		{name: "both lifecycle modes, tokens", d: newDriver(func(d *storagev1.CSIDriver) {
			d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: ""}, {Audience: "vault", ExpirationSeconds: ptr.To(int64(600))}}
		})},
		{
			name: "undefaulted object",
			d:    &storagev1.CSIDriver{},
			want: []string{
				"spec.attachedRequired|Required value|",
				"spec.podInfoOnMount|Required value|",
				"spec.storageCapacity|Required value|",
				"spec.seLinuxMount|Required value|",
			},
		},
		{
			name: "unknown fsGroupPolicy",
			d:    newDriver(func(d *storagev1.CSIDriver) { d.Spec.FSGroupPolicy = ptr.To(storagev1.FSGroupPolicy("Sometimes")) }),
			want: []string{`spec.fsGroupPolicy|Unsupported value|supported values: "File", "None", "ReadWriteOnceWithFSType"`},
		},
		{
			name: "unknown lifecycle mode",
			d: newDriver(func(d *storagev1.CSIDriver) {
				d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Persistent", "Forever"}
			}),
			want: []string{`spec.volumeLifecycleModes|Unsupported value|supported values: "Persistent", "Ephemeral"`},
		},
		{
			name: "repeated audience",
			d: newDriver(func(d *storagev1.CSIDriver) {
				d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a"}, {Audience: "a", ExpirationSeconds: ptr.To(int64(1))}}
			}),
			want: []string{"spec.tokenRequests[1].audience|Duplicate value|"},
		},
		{
			name: "token expirations out of range",
			d: newDriver(func(d *storagev1.CSIDriver) {
				d.Spec.TokenRequests = []storagev1.TokenRequest{
					{Audience: "a", ExpirationSeconds: ptr.To(int64(599))},
					{Audience: "b", ExpirationSeconds: ptr.To(int64(1)<<32 + 1)},
					{Audience: "c", ExpirationSeconds: ptr.To(int64(1) << 32)},
				}
			}),
			want: []string{
				"spec.tokenRequests[0].expirationSeconds|Invalid value|may not specify a duration less than 10 minutes",
				"spec.tokenRequests[1].expirationSeconds|Invalid value|may not specify a duration larger than 2^32 seconds",
			},
		},
		{
			name: "update period under 10 s",
			d:    newDriver(func(d *storagev1.CSIDriver) { d.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To(int64(9)) }),
			want: []string{"spec.nodeAllocatableUpdatePeriodSeconds|Invalid value|must be greater than or equal to 10 seconds"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Validate(tt.d))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*storagev1.CSIDriver)
		want   []string
	}{
		{name: "mutable fields", mutate: func(d *storagev1.CSIDriver) {
			d.Spec.PodInfoOnMount = ptr.To(true)
			d.Spec.RequiresRepublish = ptr.To(true)
			d.Spec.StorageCapacity = ptr.To(true)
			d.Spec.FSGroupPolicy = ptr.To(storagev1.NoneFSGroupPolicy)
			d.Spec.SELinuxMount = ptr.To(true)
			d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a"}}
		}},
		{
			name:   "attachRequired",
			mutate: func(d *storagev1.CSIDriver) { d.Spec.AttachRequired = ptr.To(false) },
			want:   []string{"spec.attachedRequired|Invalid value|field is immutable"},
		},
		{
			name: "volumeLifecycleModes",
			mutate: func(d *storagev1.CSIDriver) {
				d.Spec.VolumeLifecycleModes = append(d.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral)
			},
			want: []string{"spec.volumeLifecycleModes|Invalid value|field is immutable"},
		},
		{
			name:   "spec rules still apply",
			mutate: func(d *storagev1.CSIDriver) { d.Spec.FSGroupPolicy = ptr.To(storagev1.FSGroupPolicy("x")) },
			want:   []string{`spec.fsGroupPolicy|Unsupported value|supported values: "File", "None", "ReadWriteOnceWithFSType"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newDriver()
			d := old.DeepCopy()
			tt.mutate(d)
			if diff := cmp.Diff(tt.want, flat(Kind().ValidateUpdate(d, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	k := Kind()
	d := newDriver(func(d *storagev1.CSIDriver) { d.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To(int64(30)) })
	k.PrepareForCreate(d)
	if d.Spec.NodeAllocatableUpdatePeriodSeconds != nil {
		t.Error("create kept nodeAllocatableUpdatePeriodSeconds, whose feature is off")
	}

	old := newDriver()
	old.Generation = 3
	same := old.DeepCopy()
	same.Labels = map[string]string{"a": "b"}
	k.PrepareForUpdate(same, old)
	if same.Generation != 3 {
		t.Errorf("metadata-only update: generation %d, want 3", same.Generation)
	}
	changed := old.DeepCopy()
	changed.Spec.PodInfoOnMount = ptr.To(true)
	changed.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To(int64(30))
	k.PrepareForUpdate(changed, old)
	if changed.Generation != 4 || changed.Spec.NodeAllocatableUpdatePeriodSeconds != nil {
		t.Errorf("spec update: generation %d, period %v; want 4 and nil", changed.Generation, changed.Spec.NodeAllocatableUpdatePeriodSeconds)
	}
	kept := old.DeepCopy()
	kept.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To(int64(60))
	old.Spec.NodeAllocatableUpdatePeriodSeconds = ptr.To(int64(30))
	k.PrepareForUpdate(kept, old)
	if kept.Spec.NodeAllocatableUpdatePeriodSeconds == nil || *kept.Spec.NodeAllocatableUpdatePeriodSeconds != 60 {
		t.Error("an update dropped a period the stored object already had")
	}
}

func TestRow(t *testing.T) {
	tests := []struct {
		name string
		d    *storagev1.CSIDriver
		want []interface{}
	}{
		{
			name: "defaulted",
			d:    newDriver(),
			want: []interface{}{"hostpath.csi.knode.io", true, false, false, "<unset>", false, "Persistent", "5m"},
		},
		{
			name: "set",
			d: newDriver(func(d *storagev1.CSIDriver) {
				d.Spec.AttachRequired = ptr.To(false)
				d.Spec.PodInfoOnMount = ptr.To(true)
				d.Spec.StorageCapacity = ptr.To(true)
				d.Spec.RequiresRepublish = ptr.To(true)
				d.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "a"}, {Audience: "b"}}
				d.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{"Persistent", "Ephemeral"}
			}),
			want: []interface{}{"hostpath.csi.knode.io", false, true, true, "a,b", true, "Persistent,Ephemeral", "5m"},
		},
		{
			name: "nothing set",
			d:    &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: storagev1.CSIDriverSpec{TokenRequests: []storagev1.TokenRequest{}}},
			want: []interface{}{"x", true, false, false, "", false, "<none>", "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.d.Name != "x" {
				tt.d.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Minute))
			}
			if diff := cmp.Diff(tt.want, row(tt.d, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	k := Kind()
	if len(k.Columns) != 8 || k.Namespaced || k.HasStatus || k.Resource != "csidrivers" {
		t.Errorf("kind = %+v", k)
	}
}
