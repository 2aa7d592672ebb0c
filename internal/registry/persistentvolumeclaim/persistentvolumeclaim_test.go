package persistentvolumeclaim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// Upstream messages produced by apimachinery helpers, spelled out so a
// change in which helper runs shows up here.
const (
	msgSubdomain     = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
	msgLabel         = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
	msgLabelValue    = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
	msgQualifiedName = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

// newPVC is a defaulted, valid claim changed by each mutate.
func newPVC(mutate ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")}},
		},
	}
	Default(pvc)
	for _, m := range mutate {
		m(pvc)
	}
	return pvc
}

// bound makes the claim bound to pv-1 with 1Gi.
func bound(pvc *corev1.PersistentVolumeClaim) {
	pvc.Spec.VolumeName = "pv-1"
	pvc.Spec.StorageClassName = ptr.To("standard")
	pvc.Status = corev1.PersistentVolumeClaimStatus{
		Phase:       corev1.ClaimBound,
		AccessModes: pvc.Spec.AccessModes,
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: qty("1Gi")},
	}
}

func TestDefault(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{}
	Default(pvc)
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("defaults: %+v", pvc)
	}
	set := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeMode: ptr.To(corev1.PersistentVolumeBlock)},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}}
	Default(set)
	if set.Status.Phase != corev1.ClaimLost || *set.Spec.VolumeMode != corev1.PersistentVolumeBlock {
		t.Errorf("defaults overwrote set values: %+v", set)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want []string
	}{
		{name: "minimal", pvc: newPVC()},
		{name: "everything set", pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany}
			pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}
			pvc.Spec.StorageClassName = ptr.To("standard")
			pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock)
			pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
			pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
		})},
		{name: "empty class name means no class", pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("") })},
		{name: "snapshot source", pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
		})},
		{
			name: "no access modes",
			pvc:  newPVC(func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.AccessModes = nil }),
			want: []string{"spec.accessModes|Required value|at least 1 access mode is required"},
		},
		{
			name: "unknown access mode",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"ReadMostly"}
			}),
			want: []string{`spec.accessModes|Unsupported value|supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`},
		},
		{
			name: "ReadWriteOncePod with another mode",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteOncePod}
			}),
			want: []string{"spec.accessModes|Forbidden|may not use ReadWriteOncePod with other access modes"},
		},
		{
			name: "no storage request",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: qty("1")}
			}),
			want: []string{"spec.resources[storage]|Required value|"},
		},
		{
			name: "zero storage request",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Resources.Requests[corev1.ResourceStorage] = qty("0")
			}),
			want: []string{"spec.resources[storage]|Invalid value|must be greater than zero"},
		},
		{
			name: "negative storage request",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Resources.Requests[corev1.ResourceStorage] = qty("-1Gi")
			}),
			want: []string{"spec.resources[storage]|Invalid value|must be greater than zero"},
		},
		{
			name: "selector with a bad value",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "bad value!"}}
			}),
			want: []string{"spec.selector.matchLabels|Invalid value|" + msgLabelValue},
		},
		{
			name: "selector expression with a bad value",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad value!"}},
				}}
			}),
			want: []string{"spec.selector.matchExpressions[0].values[0]|Invalid value|" + msgLabelValue},
		},
		{
			name: "selector with a bad operator",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
			}),
			want: []string{`spec.selector.matchExpressions[0].operator|Invalid value|not a valid selector operator`},
		},
		{
			name: "class name not a subdomain",
			pvc:  newPVC(func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("Fast_SSD") }),
			want: []string{"spec.storageClassName|Invalid value|" + msgSubdomain},
		},
		{
			name: "unknown volume mode",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeMode("Raw"))
			}),
			want: []string{`spec.volumeMode|Unsupported value|supported values: "Block", "Filesystem"`},
		},
		{
			name: "data source without name and kind",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{}
			}),
			want: []string{
				"spec.dataSource.name|Required value|",
				"spec.dataSource.kind|Required value|",
				"spec.dataSource|Invalid value|must be 'PersistentVolumeClaim' when referencing the default apiGroup",
			},
		},
		{
			name: "core data source that is not a claim, bad group",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
				pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("Example_Group"), Kind: "Thing", Name: "s"}
			}),
			want: []string{
				"spec.dataSource|Invalid value|must be 'PersistentVolumeClaim' when referencing the default apiGroup",
				"spec.dataSourceRef.apiGroup|Invalid value|" + msgSubdomain,
				"spec|Invalid value|must match dataSourceRef",
			},
		},
		{
			name: "dataSourceRef into another namespace beside a dataSource",
			pvc: newPVC(func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
				pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: ptr.To("Other_NS")}
			}),
			want: []string{
				"spec.dataSourceRef.namespace|Invalid value|" + msgLabel,
				"spec|Invalid value|may not be specified when dataSourceRef.namespace is specified",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, flat(Kind().Validate(tt.pvc))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareForCreate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		check  func(*testing.T, *corev1.PersistentVolumeClaim)
	}{
		{
			name: "status becomes Pending, disabled fields go",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{"storage": qty("1")}}
				pvc.Spec.VolumeAttributesClassName = ptr.To("gold")
				pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "PersistentVolumeClaim", Name: "src", Namespace: ptr.To("other")}
			},
			check: func(t *testing.T, pvc *corev1.PersistentVolumeClaim) {
				if diff := cmp.Diff(corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}, pvc.Status); diff != "" {
					t.Errorf("status (-want +got):\n%s", diff)
				}
				if pvc.Spec.VolumeAttributesClassName != nil || pvc.Spec.DataSourceRef.Namespace != nil {
					t.Errorf("disabled fields kept: %+v", pvc.Spec)
				}
				if pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Name != "src" {
					t.Errorf("dataSource not filled from dataSourceRef: %+v", pvc.Spec.DataSource)
				}
			},
		},
		{
			name: "dataSource fills dataSourceRef",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
			},
			check: func(t *testing.T, pvc *corev1.PersistentVolumeClaim) {
				want := &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
				if diff := cmp.Diff(want, pvc.Spec.DataSourceRef); diff != "" {
					t.Errorf("dataSourceRef (-want +got):\n%s", diff)
				}
				*pvc.Spec.DataSource.APIGroup = "changed"
				if *pvc.Spec.DataSourceRef.APIGroup != "snapshot.storage.k8s.io" {
					t.Error("dataSourceRef shares its apiGroup with dataSource")
				}
			},
		},
		{
			name: "a dataSource of another kind is dropped",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
			},
			check: func(t *testing.T, pvc *corev1.PersistentVolumeClaim) {
				if pvc.Spec.DataSource != nil || pvc.Spec.DataSourceRef != nil {
					t.Errorf("data sources = %+v %+v, want none", pvc.Spec.DataSource, pvc.Spec.DataSourceRef)
				}
				if errs := Validate(pvc); len(errs) != 0 {
					t.Errorf("claim refused after the drop: %v", errs)
				}
			},
		},
		{
			name: "a dataSource of another kind stays beside a dataSourceRef",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
				pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{Kind: "Secret", Name: "s"}
			},
			check: func(t *testing.T, pvc *corev1.PersistentVolumeClaim) {
				if pvc.Spec.DataSource == nil {
					t.Error("dataSource dropped although dataSourceRef states intent")
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pvc := newPVC(tt.mutate)
			Kind().PrepareForCreate(pvc)
			tt.check(t, pvc)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    func(*corev1.PersistentVolumeClaim)
		mutate func(*corev1.PersistentVolumeClaim)
		want   []string
	}{
		{name: "labels and annotations", mutate: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Labels = map[string]string{"a": "b"}
			pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "n"}
		}},
		{name: "volumeName set once", mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv-1" }},
		{name: "storageClassName from unset to set", mutate: func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.StorageClassName = ptr.To("standard")
		}},
		{
			name: "storageClassName from the beta annotation",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "gold"}
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("gold") },
		},
		{
			name: "storageClassName from the beta annotation, annotation dropped",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "gold"}
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = nil
				pvc.Spec.StorageClassName = ptr.To("gold")
			},
		},
		{
			name: "storageClassName other than the beta annotation",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "gold"}
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("silver") },
			want:   []string{"spec|Forbidden|" + msgSpecImmutable + "\n"},
		},
		{
			name: "beta annotation changed",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "gold"}
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "silver"}
			},
			want: []string{"metadata.annotations.volume.beta.kubernetes.io/storage-class|Invalid value|field is immutable"},
		},
		{
			name:   "storageClassName changed once set",
			old:    func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("standard") },
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = ptr.To("fast") },
			want:   []string{"spec|Forbidden|" + msgSpecImmutable + "\n"},
		},
		{
			name:   "volumeName changed once set",
			old:    func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv-1" },
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv-2" },
			want:   []string{"spec|Forbidden|" + msgSpecImmutable + "\n"},
		},
		{
			name: "access modes",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
			},
			want: []string{"spec|Forbidden|" + msgSpecImmutable + "\n"},
		},
		{
			name:   "request grown while unbound",
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests["storage"] = qty("2Gi") },
			want:   []string{"spec|Forbidden|" + msgSpecImmutable + "\n"},
		},
		{
			name:   "request grown while bound",
			old:    bound,
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests["storage"] = qty("2Gi") },
		},
		{
			name: "request shrunk above status capacity (expansion recovery)",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				bound(pvc)
				pvc.Spec.Resources.Requests["storage"] = qty("10Gi")
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests["storage"] = qty("2Gi") },
		},
		{
			name: "request shrunk to status capacity",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				bound(pvc)
				pvc.Spec.Resources.Requests["storage"] = qty("2Gi")
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests["storage"] = qty("1Gi") },
			want:   []string{"spec.resources.requests.storage|Forbidden|field can not be less than status.capacity"},
		},
		{
			name:   "request shrunk below status capacity",
			old:    bound,
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests["storage"] = qty("512Mi") },
			want:   []string{"spec.resources.requests.storage|Forbidden|field can not be less than status.capacity"},
		},
		{
			name:   "request shrunk while unbound",
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests["storage"] = qty("1Mi") },
			want:   []string{"spec|Forbidden|" + msgSpecImmutable + "\n"},
		},
		{
			name:   "volume mode",
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeMode = ptr.To(corev1.PersistentVolumeBlock) },
			want: []string{
				"spec|Forbidden|" + msgSpecImmutable + "\n",
				"volumeMode|Invalid value|field is immutable",
			},
		},
		{
			name:   "volumeAttributesClassName newly set is dropped (feature off)",
			old:    bound,
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = ptr.To("gold") },
		},
		{
			name: "stored volumeAttributesClassName changed (feature off)",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				bound(pvc)
				pvc.Spec.VolumeAttributesClassName = ptr.To("gold")
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = ptr.To("silver") },
			want:   []string{"spec.volumeAttributesClassName|Forbidden|update is forbidden when the VolumeAttributesClass feature gate is disabled"},
		},
		{
			name:   "stored volumeAttributesClassName is checked",
			old:    func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = ptr.To("Bad_Class") },
			mutate: func(pvc *corev1.PersistentVolumeClaim) {},
			want:   []string{"spec.volumeAttributesClassName|Invalid value|" + msgSubdomain},
		},
		{
			name: "stored volumeAttributesClassName emptied",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				bound(pvc)
				pvc.Spec.VolumeAttributesClassName = ptr.To("gold")
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = ptr.To("") },
			want: []string{
				"spec.volumeAttributesClassName|Forbidden|update is forbidden when the VolumeAttributesClass feature gate is disabled",
				"spec.volumeAttributesClassName|Forbidden|update from non-nil value to an empty string is forbidden",
			},
		},
		{
			name:   "stored volumeAttributesClassName removed from an unbound claim",
			old:    func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = ptr.To("gold") },
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeAttributesClassName = nil },
			want: []string{
				"spec|Forbidden|" + msgSpecImmutable + "\n",
				"spec.volumeAttributesClassName|Forbidden|update is forbidden when the VolumeAttributesClass feature gate is disabled",
				"spec.volumeAttributesClassName|Forbidden|update from non-nil value to nil is forbidden",
			},
		},
		{
			name: "stored invalid selector value may stay",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{"bad value!"}},
				}}
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv-1" },
		},
		{
			name: "stored dataSource without dataSourceRef (older object)",
			old: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"}
			},
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				NormalizeDataSources(&pvc.Spec)
				pvc.Spec.VolumeName = "pv-1"
			},
		},
		{
			name:   "create rules apply",
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests = nil },
			want: []string{
				"spec.resources[storage]|Required value|",
				"spec|Forbidden|" + msgSpecImmutable + "\n",
				"spec.resources.requests.storage|Forbidden|field can not be less than status.capacity",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPVC()
			if tt.old != nil {
				tt.old(old)
			}
			pvc := old.DeepCopy()
			tt.mutate(pvc)
			k := Kind()
			k.PrepareForUpdate(pvc, old)
			got := flat(k.ValidateUpdate(pvc, old))
			// The immutable-spec message ends with a diff whose exact
			// spacing go-cmp varies on purpose; compare up to it.
			for i, g := range got {
				if j := strings.Index(g, "\n"); j >= 0 {
					if len(g) == j+1 {
						t.Errorf("%q: no diff after the message", g)
					}
					got[i] = g[:j+1]
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrepareForUpdate(t *testing.T) {
	k := Kind()
	old := newPVC(bound)
	upd := old.DeepCopy()
	upd.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimLost}
	upd.Spec.VolumeAttributesClassName = ptr.To("gold")
	k.PrepareForUpdate(upd, old)
	if upd.Status.Phase != corev1.ClaimBound || upd.Spec.VolumeAttributesClassName != nil {
		t.Errorf("main update: status %+v, vac %v", upd.Status, upd.Spec.VolumeAttributesClassName)
	}

	// An older client resends a dataSource of another kind that the
	// stored object has: it stays.
	legacy := newPVC(func(pvc *corev1.PersistentVolumeClaim) {
		pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "Secret", Name: "s"}
	})
	resent := legacy.DeepCopy()
	k.PrepareForUpdate(resent, legacy)
	if resent.Spec.DataSource == nil || resent.Spec.DataSourceRef == nil {
		t.Errorf("update dropped a stored dataSource: %+v", resent.Spec)
	}
	if legacy.Spec.DataSourceRef != nil {
		t.Error("PrepareForUpdate changed old")
	}

	st := old.DeepCopy()
	st.Spec.VolumeName = "other"
	st.Status.Phase = corev1.ClaimLost
	st.Status.CurrentVolumeAttributesClassName = ptr.To("gold")
	st.Status.ModifyVolumeStatus = &corev1.ModifyVolumeStatus{Status: corev1.PersistentVolumeClaimModifyVolumePending}
	k.Status.PrepareForUpdate(st, old)
	if st.Spec.VolumeName != "pv-1" || st.Status.Phase != corev1.ClaimLost ||
		st.Status.CurrentVolumeAttributesClassName != nil || st.Status.ModifyVolumeStatus != nil {
		t.Errorf("status update: spec %+v status %+v", st.Spec, st.Status)
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.PersistentVolumeClaim)
		want   []string
	}{
		{name: "bound", mutate: bound},
		{name: "resize in progress", mutate: func(pvc *corev1.PersistentVolumeClaim) {
			bound(pvc)
			pvc.Status.AllocatedResources = corev1.ResourceList{"storage": qty("2Gi"), "example.com/iops": qty("100")}
			pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{"storage": corev1.PersistentVolumeClaimNodeResizePending}
		}},
		{
			name:   "no access modes",
			mutate: func(pvc *corev1.PersistentVolumeClaim) { pvc.Spec.AccessModes = nil },
			want:   []string{"Spec.accessModes|Required value|"},
		},
		{
			name: "negative capacity",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Status.Capacity = corev1.ResourceList{"storage": qty("-1")}
			},
			want: []string{"status.capacity[storage]|Invalid value|must be a valid resource quantity"},
		},
		{
			name: "resize bookkeeping for other resources",
			mutate: func(pvc *corev1.PersistentVolumeClaim) {
				pvc.Status.AllocatedResources = corev1.ResourceList{"cpu": qty("1"), "bad key!": qty("1"), "storage": qty("-1")}
				pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{
					"kubernetes.io/memory": corev1.PersistentVolumeClaimNodeResizePending,
					"storage":              "Resizing",
				}
			},
			want: []string{
				`status.allocatedResourceStatus|Unsupported value|supported values: "storage"`,
				`status.allocatedResourceStatus|Unsupported value|supported values: "ControllerResizeInProgress", "ControllerResizeInfeasible", "NodeResizeInProgress", "NodeResizeInfeasible", "NodeResizePending"`,
				"status.allocatedResources|Invalid value|" + msgQualifiedName,
				`status.allocatedResources|Unsupported value|supported values: "storage"`,
				"status.allocatedResources[storage]|Invalid value|must be a valid resource quantity",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newPVC()
			pvc := old.DeepCopy()
			tt.mutate(pvc)
			if diff := cmp.Diff(tt.want, flat(Kind().Status.ValidateUpdate(pvc, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRow(t *testing.T) {
	created := metav1.NewTime(now.Add(-10 * time.Second))
	tests := []struct {
		name string
		pvc  *corev1.PersistentVolumeClaim
		want []interface{}
	}{
		{
			name: "pending",
			pvc:  newPVC(),
			want: []interface{}{"data", "Pending", "", "", "", "", "<unset>", "10s", "Filesystem"},
		},
		{
			name: "bound",
			pvc:  newPVC(bound),
			want: []interface{}{"data", "Bound", "pv-1", "1Gi", "RWO", "standard", "<unset>", "10s", "Filesystem"},
		},
		{
			name: "terminating, beta class wins, vac",
			pvc: newPVC(bound, func(pvc *corev1.PersistentVolumeClaim) {
				pvc.DeletionTimestamp = &created
				pvc.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "beta"}
				pvc.Spec.VolumeAttributesClassName = ptr.To("gold")
				pvc.Status.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
			}),
			want: []interface{}{"data", "Terminating", "pv-1", "1Gi", "RWOP", "beta", "gold", "10s", "Filesystem"},
		},
		{
			name: "nothing set",
			pvc:  &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
			want: []interface{}{"x", "", "", "", "", "", "<unset>", "<unknown>", "<unset>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.pvc.Name != "x" {
				tt.pvc.CreationTimestamp = created
			}
			if diff := cmp.Diff(tt.want, row(tt.pvc, now)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	k := Kind()
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	want := []string{"Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass", "VolumeAttributesClass", "Age", "VolumeMode"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if k.ShortNames[0] != "pvc" || !k.Namespaced || !k.HasStatus {
		t.Errorf("kind = %+v", k)
	}
	wantFields := fields.Set{"metadata.name": "data", "metadata.namespace": "default", "name": "data"}
	if diff := cmp.Diff(wantFields, k.Fields(newPVC())); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}
