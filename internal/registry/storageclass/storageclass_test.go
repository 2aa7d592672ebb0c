package storageclass

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Upstream messages produced by apimachinery helpers, spelled out so a
// change in which helper runs shows up here.
const (
	msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
	msgQualifiedKey  = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

// newClass is a defaulted, valid class changed by each mutate.
func newClass(mutate ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "fast"},
		Provisioner: "hostpath.csi.knode.io",
		Parameters:  map[string]string{"type": "ssd"},
	}
	Default(sc)
	for _, m := range mutate {
		m(sc)
	}
	return sc
}

func term(exprs ...corev1.TopologySelectorLabelRequirement) corev1.TopologySelectorTerm {
	return corev1.TopologySelectorTerm{MatchLabelExpressions: exprs}
}

func TestDefault(t *testing.T) {
	sc := &storagev1.StorageClass{Provisioner: "p"}
	Default(sc)
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("reclaimPolicy = %v, want Delete", sc.ReclaimPolicy)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("volumeBindingMode = %v, want Immediate", sc.VolumeBindingMode)
	}
	set := newClass(func(sc *storagev1.StorageClass) {
		sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	Default(set)
	if *set.ReclaimPolicy != corev1.PersistentVolumeReclaimRetain || *set.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		t.Errorf("defaults overwrote set values: %v %v", *set.ReclaimPolicy, *set.VolumeBindingMode)
	}
}

func TestValidate(t *testing.T) {
	manyParams := map[string]string{}
	for i := 0; i <= maxParameters; i++ {
		manyParams[fmt.Sprint(i)] = ""
	}
	tests := []struct {
		name string
		sc   *storagev1.StorageClass
		want []string
	}{
		{name: "valid", sc: newClass()},
		{name: "upper-case provisioner is checked lowercased", sc: newClass(func(sc *storagev1.StorageClass) { sc.Provisioner = "Example.COM/Disk" })},
		{name: "no parameters", sc: newClass(func(sc *storagev1.StorageClass) { sc.Parameters = nil })},
		{name: "topology", sc: newClass(func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = []corev1.TopologySelectorTerm{
				term(corev1.TopologySelectorLabelRequirement{Key: "topology.kubernetes.io/zone", Values: []string{"a", "b"}}),
				term(corev1.TopologySelectorLabelRequirement{Key: "topology.kubernetes.io/zone", Values: []string{"c"}}),
			}
		})},
		{
			name: "no provisioner",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.Provisioner = "" }),
			want: []string{"provisioner|Required value|"},
		},
		{
			name: "provisioner not a qualified name",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.Provisioner = "bad provisioner!" }),
			want: []string{"provisioner|Invalid value|" + msgQualifiedName},
		},
		{
			name: "empty parameter key",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.Parameters = map[string]string{"": "x"} }),
			want: []string{"parameters|Invalid value|field can not be empty."},
		},
		{
			name: "too many parameters",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.Parameters = manyParams }),
			want: []string{"parameters|Too long|may not be more than 512 bytes"},
		},
		{
			name: "parameters over 256 KiB",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.Parameters = map[string]string{"a": strings.Repeat("x", 256*1024)}
			}),
			want: []string{"parameters|Too long|may not be more than 262144 bytes"},
		},
		{
			name: "parameters of exactly 256 KiB",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.Parameters = map[string]string{"a": strings.Repeat("x", 256*1024-1)}
			}),
		},
		{
			name: "Recycle",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRecycle) }),
			want: []string{`reclaimPolicy|Unsupported value|supported values: "Delete", "Retain"`},
		},
		{
			name: "unknown binding mode",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingMode("Later")) }),
			want: []string{`volumeBindingMode|Unsupported value|supported values: "Immediate", "WaitForFirstConsumer"`},
		},
		{
			name: "binding mode missing (not defaulted)",
			sc:   newClass(func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = nil }),
			want: []string{"volumeBindingMode|Required value|"},
		},
		{
			name: "topology expression without values, bad key",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.AllowedTopologies = []corev1.TopologySelectorTerm{term(corev1.TopologySelectorLabelRequirement{Key: "a/b/c"})}
			}),
			want: []string{
				"allowedTopologies[0].matchLabelExpressions[0].values|Required value|",
				"allowedTopologies[0].matchLabelExpressions[0].key|Invalid value|" + msgQualifiedKey,
			},
		},
		{
			name: "repeated value and key",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.AllowedTopologies = []corev1.TopologySelectorTerm{term(
					corev1.TopologySelectorLabelRequirement{Key: "zone", Values: []string{"a", "a"}},
					corev1.TopologySelectorLabelRequirement{Key: "zone", Values: []string{"b"}},
				)}
			}),
			want: []string{
				`allowedTopologies[0].matchLabelExpressions[0].values[1]|Duplicate value|`,
				`allowedTopologies[0].matchLabelExpressions[1].key|Duplicate value|`,
			},
		},
		{
			name: "repeated term",
			sc: newClass(func(sc *storagev1.StorageClass) {
				r := corev1.TopologySelectorLabelRequirement{Key: "zone", Values: []string{"a"}}
				sc.AllowedTopologies = []corev1.TopologySelectorTerm{term(r), term(r)}
			}),
			want: []string{"allowedTopologies[1].matchLabelExpressions|Duplicate value|"},
		},
		{
			// Upstream's quirk: an empty term equals each of the list's
			// seed entries, one per term.
			name: "empty term among two",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.AllowedTopologies = []corev1.TopologySelectorTerm{
					term(), term(corev1.TopologySelectorLabelRequirement{Key: "zone", Values: []string{"a"}}),
				}
			}),
			want: []string{
				"allowedTopologies[0].matchLabelExpressions|Duplicate value|",
				"allowedTopologies[0].matchLabelExpressions|Duplicate value|",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Validate(tt.sc))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*storagev1.StorageClass)
		want   []string
	}{
		{name: "labels and allowVolumeExpansion may change", mutate: func(sc *storagev1.StorageClass) {
			sc.Labels = map[string]string{"a": "b"}
			sc.AllowVolumeExpansion = ptr.To(true)
			sc.MountOptions = []string{"ro"}
		}},
		{
			name:   "parameters",
			mutate: func(sc *storagev1.StorageClass) { sc.Parameters["type"] = "hdd" },
			want:   []string{"parameters|Forbidden|updates to parameters are forbidden."},
		},
		{
			name:   "parameters from some to none",
			mutate: func(sc *storagev1.StorageClass) { sc.Parameters = nil },
			want:   []string{"parameters|Forbidden|updates to parameters are forbidden."},
		},
		{
			name:   "provisioner",
			mutate: func(sc *storagev1.StorageClass) { sc.Provisioner = "other.example.com" },
			want:   []string{"provisioner|Forbidden|updates to provisioner are forbidden."},
		},
		{
			name:   "reclaimPolicy",
			mutate: func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain) },
			want:   []string{"reclaimPolicy|Forbidden|updates to reclaimPolicy are forbidden."},
		},
		{
			name: "volumeBindingMode",
			mutate: func(sc *storagev1.StorageClass) {
				sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
			},
			want: []string{"volumeBindingMode|Invalid value|field is immutable"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newClass()
			sc := old.DeepCopy()
			tt.mutate(sc)
			if diff := cmp.Diff(tt.want, flat(Kind().ValidateUpdate(sc, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRow(t *testing.T) {
	tests := []struct {
		name string
		sc   *storagev1.StorageClass
		want []interface{}
	}{
		{
			name: "defaulted",
			sc:   newClass(),
			want: []interface{}{"fast", "hostpath.csi.knode.io", "Delete", "Immediate", false, "5m"},
		},
		{
			name: "default class, set fields",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
				sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
				sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
				sc.AllowVolumeExpansion = ptr.To(true)
			}),
			want: []interface{}{"fast (default)", "hostpath.csi.knode.io", "Retain", "WaitForFirstConsumer", true, "5m"},
		},
		{
			name: "beta default annotation, nothing set",
			sc: &storagev1.StorageClass{
				ObjectMeta:  metav1.ObjectMeta{Name: "old", Annotations: map[string]string{"storageclass.beta.kubernetes.io/is-default-class": "true"}},
				Provisioner: "p",
			},
			want: []interface{}{"old (default)", "p", "Delete", "Immediate", false, "<unknown>"},
		},
		{
			name: "annotation not true",
			sc: newClass(func(sc *storagev1.StorageClass) {
				sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "false"}
			}),
			want: []interface{}{"fast", "hostpath.csi.knode.io", "Delete", "Immediate", false, "5m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.sc.Name != "old" {
				tt.sc.CreationTimestamp = metav1.NewTime(now.Add(-5 * time.Minute))
			}
			if diff := cmp.Diff(tt.want, row(tt.sc, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"}, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.ShortNames[0] != "sc" || k.Namespaced || k.HasStatus || k.GroupVersion.String() != "storage.k8s.io/v1" {
		t.Errorf("kind = %+v", k)
	}
}
