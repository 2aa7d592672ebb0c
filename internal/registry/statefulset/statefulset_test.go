package statefulset

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// newSTS is a valid, defaulted StatefulSet with one claim template that its
// container mounts.
func newSTS() *appsv1.StatefulSet {
	labels := map[string]string{"app": "web"}
	ss := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: appsv1.StatefulSetSpec{
			ServiceName: "web",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "busybox:1.36",
					VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				}}},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					},
				},
			}},
		},
	}
	Default(ss)
	return ss
}

func TestKind(t *testing.T) {
	k := Kind()
	if k.GroupVersion.String() != "apps/v1" || k.Resource != "statefulsets" || k.Kind != "StatefulSet" ||
		k.ListKind != "StatefulSetList" || k.SingularName != "statefulset" || !k.Namespaced || !k.HasStatus ||
		k.Status == nil || k.Scale == nil {
		t.Errorf("kind = %+v", k)
	}
	if diff := cmp.Diff([]string{"sts"}, k.ShortNames); diff != "" {
		t.Errorf("short names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"all"}, k.Categories); diff != "" {
		t.Errorf("categories (-want +got):\n%s", diff)
	}
	ss := newSTS()
	if got := len(k.Row(ss, now)); got != len(k.Columns) {
		t.Errorf("%d cells for %d columns", got, len(k.Columns))
	}
	if diff := cmp.Diff(fields.Set{"metadata.name": "web", "metadata.namespace": "ns"}, k.Fields(ss)); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
}

func TestDefault(t *testing.T) {
	ss := newSTS()
	wantSpec := appsv1.StatefulSetSpec{
		Replicas:            ptr.To[int32](1),
		PodManagementPolicy: appsv1.OrderedReadyPodManagement,
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
			Type:          appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)},
		},
		RevisionHistoryLimit: ptr.To[int32](10),
		PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		},
	}
	got := ss.Spec.DeepCopy()
	got.Selector, got.Template, got.VolumeClaimTemplates, got.ServiceName = nil, corev1.PodTemplateSpec{}, nil, ""
	if diff := cmp.Diff(wantSpec, *got); diff != "" {
		t.Errorf("spec defaults (-want +got):\n%s", diff)
	}
	if ss.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyAlways || ss.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirst {
		t.Errorf("template not defaulted: %+v", ss.Spec.Template.Spec)
	}
	claim := ss.Spec.VolumeClaimTemplates[0]
	if claim.Status.Phase != corev1.ClaimPending || ptr.Deref(claim.Spec.VolumeMode, "") != corev1.PersistentVolumeFilesystem {
		t.Errorf("claim template defaults: phase %q, volumeMode %v", claim.Status.Phase, claim.Spec.VolumeMode)
	}
}

func TestDefaultKeepsExplicitValues(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		check  func(*appsv1.StatefulSet) string
		want   string
	}{
		{
			name:   "zero replicas",
			mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr.To[int32](0) },
			check:  func(ss *appsv1.StatefulSet) string { return fmt.Sprint(*ss.Spec.Replicas) },
			want:   "0",
		},
		{
			name:   "parallel",
			mutate: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = appsv1.ParallelPodManagement },
			check:  func(ss *appsv1.StatefulSet) string { return string(ss.Spec.PodManagementPolicy) },
			want:   "Parallel",
		},
		{
			name: "OnDelete gets no rollingUpdate",
			mutate: func(ss *appsv1.StatefulSet) {
				ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			},
			check: func(ss *appsv1.StatefulSet) string { return fmt.Sprint(ss.Spec.UpdateStrategy.RollingUpdate == nil) },
			want:  "true",
		},
		{
			name: "explicit RollingUpdate type stays without rollingUpdate",
			mutate: func(ss *appsv1.StatefulSet) {
				ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
			},
			check: func(ss *appsv1.StatefulSet) string { return fmt.Sprint(ss.Spec.UpdateStrategy.RollingUpdate == nil) },
			want:  "true",
		},
		{
			name: "partition defaulted inside a given rollingUpdate, maxUnavailable not",
			mutate: func(ss *appsv1.StatefulSet) {
				ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{
					Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{},
				}
			},
			check: func(ss *appsv1.StatefulSet) string {
				ru := ss.Spec.UpdateStrategy.RollingUpdate
				return fmt.Sprint(ptr.Deref(ru.Partition, -1), ru.MaxUnavailable == nil)
			},
			want: "0 true",
		},
		{
			name: "half a retention policy",
			mutate: func(ss *appsv1.StatefulSet) {
				ss.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				}
			},
			check: func(ss *appsv1.StatefulSet) string {
				p := ss.Spec.PersistentVolumeClaimRetentionPolicy
				return string(p.WhenDeleted) + "/" + string(p.WhenScaled)
			},
			want: "Retain/Delete",
		},
		{
			name:   "zero history",
			mutate: func(ss *appsv1.StatefulSet) { ss.Spec.RevisionHistoryLimit = ptr.To[int32](0) },
			check:  func(ss *appsv1.StatefulSet) string { return fmt.Sprint(*ss.Spec.RevisionHistoryLimit) },
			want:   "0",
		},
		{
			name: "claim quantities round up to milli-units",
			mutate: func(ss *appsv1.StatefulSet) {
				ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1.0001")
			},
			check: func(ss *appsv1.StatefulSet) string {
				q := ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
				return q.String()
			},
			want: "1001m",
		},
		{
			name: "a zero with an exponent becomes a plain zero",
			mutate: func(ss *appsv1.StatefulSet) {
				ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("0e99999999")}
			},
			check: func(ss *appsv1.StatefulSet) string {
				q := ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Limits[corev1.ResourceStorage]
				// The exact struct: a zero kept with its exponent differs.
				return fmt.Sprint(reflect.DeepEqual(q, resource.Quantity{Format: resource.DecimalExponent}))
			},
			want: "true",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := &appsv1.StatefulSet{Spec: *newSTS().Spec.DeepCopy()}
			ss.Spec.Replicas, ss.Spec.RevisionHistoryLimit, ss.Spec.PersistentVolumeClaimRetentionPolicy = nil, nil, nil
			ss.Spec.PodManagementPolicy, ss.Spec.UpdateStrategy = "", appsv1.StatefulSetUpdateStrategy{}
			tt.mutate(ss)
			Default(ss)
			if got := tt.check(ss); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	k := Kind()
	ss := newSTS()
	ss.Status.Replicas = 7
	ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	k.PrepareForCreate(ss)
	if ss.Status.Replicas != 0 || ss.Generation != 1 {
		t.Errorf("create: status %+v generation %d", ss.Status, ss.Generation)
	}
	if ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil {
		t.Error("create kept maxUnavailable with its feature gate off")
	}

	old := newSTS()
	old.Generation = 4
	old.Status.Replicas = 3
	upd := old.DeepCopy()
	upd.Status = appsv1.StatefulSetStatus{}
	upd.Labels = map[string]string{"x": "y"}
	k.PrepareForUpdate(upd, old)
	if upd.Generation != 4 || upd.Status.Replicas != 3 {
		t.Errorf("metadata-only update: generation %d, status %+v", upd.Generation, upd.Status)
	}
	upd.Spec.Replicas = ptr.To[int32](5)
	k.PrepareForUpdate(upd, old)
	if upd.Generation != 5 {
		t.Errorf("spec update: generation %d, want 5", upd.Generation)
	}

	// maxUnavailable survives an update only if the stored object has it.
	upd = old.DeepCopy()
	upd.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	k.PrepareForUpdate(upd, old)
	if upd.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil {
		t.Error("update added maxUnavailable with its feature gate off")
	}
	old.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	upd = old.DeepCopy()
	upd.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(3))
	k.PrepareForUpdate(upd, old)
	if got := upd.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable; got == nil || got.IntValue() != 3 {
		t.Errorf("maxUnavailable in use was dropped: %v", got)
	}
}

const labelMsg = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*appsv1.StatefulSet)
		want   []string
	}{
		{name: "valid", mutate: func(*appsv1.StatefulSet) {}},
		{name: "valid without serviceName, claims or retention policy", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.ServiceName = ""
			ss.Spec.VolumeClaimTemplates = nil
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = nil
			ss.Spec.PersistentVolumeClaimRetentionPolicy = nil
		}},
		{name: "name with a dot", mutate: func(ss *appsv1.StatefulSet) { ss.Name = "web.v1" },
			want: []string{"metadata.name|Invalid value|must not contain dots"}},
		{name: "generateName with a dot", mutate: func(ss *appsv1.StatefulSet) { ss.GenerateName = "web.v1-" },
			want: []string{"metadata.generateName|Invalid value|must not contain dots"}},
		{name: "name too long for a label", mutate: func(ss *appsv1.StatefulSet) { ss.Name = strings.Repeat("a", 64) },
			want: []string{"metadata.name|Invalid value|must be no more than 63 characters"}},
		{name: "name the REST layer already refuses", mutate: func(ss *appsv1.StatefulSet) { ss.Name = "Web" }},
		{name: "no podManagementPolicy", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = "" },
			want: []string{"spec.podManagementPolicy|Required value|"}},
		{name: "unknown podManagementPolicy", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = "Random" },
			want: []string{"spec.podManagementPolicy|Invalid value|must be 'OrderedReady' or 'Parallel'"}},
		{name: "no updateStrategy type", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.UpdateStrategy.Type = "" },
			want: []string{"spec.updateStrategy|Required value|"}},
		{name: "unknown updateStrategy type", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.UpdateStrategy.Type = "Recreate" },
			want: []string{"spec.updateStrategy|Invalid value|must be 'RollingUpdate' or 'OnDelete'"}},
		{name: "rollingUpdate with OnDelete", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.Type = appsv1.OnDeleteStatefulSetStrategyType
		}, want: []string{"spec.updateStrategy.rollingUpdate|Invalid value|only allowed for updateStrategy 'RollingUpdate'"}},
		{name: "OnDelete alone", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
		}},
		{name: "RollingUpdate without rollingUpdate", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate = nil
		}},
		{name: "negative partition", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](-1)
		}, want: []string{"spec.updateStrategy.rollingUpdate.partition|Invalid value|must be greater than or equal to 0"}},
		{name: "maxUnavailable 0", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|cannot be 0"}},
		{name: "maxUnavailable 0%", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("0%"))
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|cannot be 0"}},
		{name: "maxUnavailable negative", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(-1))
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|must be greater than or equal to 0"}},
		{name: "maxUnavailable above 100%", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("101%"))
		}, want: []string{"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|must not be greater than 100%"}},
		{name: "maxUnavailable 100% and 1 are fine", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		}},
		{name: "maxUnavailable not a percentage", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("half"))
		}, want: []string{
			"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
			"spec.updateStrategy.rollingUpdate.maxUnavailable|Invalid value|cannot be 0",
		}},
		{name: "unknown retention policies", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = "Keep"
			ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = ""
		}, want: []string{
			`spec.persistentVolumeClaimRetentionPolicy.whenDeleted|Unsupported value|supported values: "Retain", "Delete"`,
			`spec.persistentVolumeClaimRetentionPolicy.whenScaled|Unsupported value|supported values: "Retain", "Delete"`,
		}},
		{name: "negative replicas", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr.To[int32](-1) },
			want: []string{"spec.replicas|Invalid value|must be greater than or equal to 0"}},
		{name: "negative minReadySeconds", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.MinReadySeconds = -1 },
			want: []string{"spec.minReadySeconds|Invalid value|must be greater than or equal to 0"}},
		{name: "negative ordinals.start", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: -1}
		}, want: []string{"spec.ordinals.start|Invalid value|must be greater than or equal to 0"}},
		{name: "ordinals from 5", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 5} }},
		{name: "negative revisionHistoryLimit is accepted, as upstream", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.RevisionHistoryLimit = ptr.To[int32](-1)
		}},
		{name: "serviceName not a DNS label", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "Web_Svc" },
			want: []string{"spec.serviceName|Invalid value|" + labelMsg}},
		{name: "no selector", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Selector = nil },
			want: []string{"spec.selector|Required value|", "spec.template.metadata.labels|Invalid value|`selector` does not match template `labels`"}},
		{name: "empty selector", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Selector = &metav1.LabelSelector{} },
			want: []string{"spec.selector|Invalid value|empty selector is invalid for statefulset"}},
		{name: "selector that does not parse", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}
			ss.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}, want: []string{
			`spec.selector.matchExpressions[0].operator|Invalid value|not a valid selector operator`,
			"spec.selector|Invalid value|",
			`spec.template.spec.restartPolicy|Unsupported value|supported values: "Always"`,
		}},
		{name: "selector does not match", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Selector.MatchLabels = map[string]string{"app": "db"} },
			want: []string{"spec.template.metadata.labels|Invalid value|`selector` does not match template `labels`"}},
		{name: "template restartPolicy", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure },
			want: []string{`spec.template.spec.restartPolicy|Unsupported value|supported values: "Always"`}},
		{name: "template activeDeadlineSeconds", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) },
			want: []string{"spec.template.spec.activeDeadlineSeconds|Forbidden|activeDeadlineSeconds in StatefulSet is not Supported"}},
		{name: "template checked as a pod", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Template.Spec.Containers[0].Image = "" },
			want: []string{"spec.template.spec.containers[0].image|Required value|"}},
		{name: "mount of neither a volume nor a claim", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Containers[0].VolumeMounts[0].Name = "logs"
		}, want: []string{"spec.template.spec.containers[0].volumeMounts[0].name|Not found|"}},
		{name: "a claim template replaces the template volume of its name", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data"}, {Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}},
		{name: "claim template without a name", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Name = ""
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = nil
		}, want: []string{"spec.volumeClaimTemplates[0].metadata.name|Required value|"}},
		{name: "claim template name not a DNS label", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Name = "my.data"
			ss.Spec.Template.Spec.Containers[0].VolumeMounts = nil
		}, want: []string{"spec.volumeClaimTemplates[0].metadata.name|Invalid value|must not contain dots"}},
		{name: "claim template checked as a claim", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Spec.AccessModes = nil
			ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests = nil
		}, want: []string{
			"spec.volumeClaimTemplates[0].spec.accessModes|Required value|at least 1 access mode is required",
			"spec.volumeClaimTemplates[0].spec.resources[storage]|Required value|",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := newSTS()
			tt.mutate(ss)
			if diff := cmp.Diff(tt.want, flat(Validate(ss))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	forbidden := []string{"spec|Forbidden|" + msgSpecUpdate}
	tests := []struct {
		name   string
		old    func(*appsv1.StatefulSet)
		mutate func(*appsv1.StatefulSet)
		want   []string
	}{
		{name: "no change", mutate: func(*appsv1.StatefulSet) {}},
		{name: "the fields that may change", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Replicas = ptr.To[int32](9)
			ss.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 3}
			ss.Spec.Template.Spec.Containers[0].Image = "busybox:1.37"
			ss.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
			ss.Spec.RevisionHistoryLimit = ptr.To[int32](2)
			ss.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
			ss.Spec.MinReadySeconds = 30
		}},
		{name: "serviceName", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.ServiceName = "other" }, want: forbidden},
		{name: "podManagementPolicy", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.PodManagementPolicy = appsv1.ParallelPodManagement }, want: forbidden},
		{name: "selector", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Selector.MatchLabels["tier"] = "x"
			ss.Spec.Template.Labels["tier"] = "x"
		}, want: forbidden},
		{name: "volumeClaimTemplates", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		}, want: forbidden},
		{name: "an invalid change is still refused", mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr.To[int32](-2) },
			want: []string{"spec.replicas|Invalid value|must be greater than or equal to 0"}},
		{name: "the template is still checked", mutate: func(ss *appsv1.StatefulSet) {
			ss.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyNever
		}, want: []string{`spec.template.spec.restartPolicy|Unsupported value|supported values: "Always"`}},
		{name: "stored serviceName and name are not rechecked", old: func(ss *appsv1.StatefulSet) {
			ss.Name = "web.v1"
			ss.Spec.ServiceName = "Web_Svc"
		}, mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr.To[int32](2) }},
		{name: "stored claim templates are not rechecked", old: func(ss *appsv1.StatefulSet) {
			ss.Spec.VolumeClaimTemplates[0].Spec.AccessModes = nil
		}, mutate: func(ss *appsv1.StatefulSet) { ss.Spec.Replicas = ptr.To[int32](2) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := newSTS()
			if tt.old != nil {
				tt.old(old)
			}
			ss := old.DeepCopy()
			tt.mutate(ss)
			if diff := cmp.Diff(tt.want, flat(Kind().ValidateUpdate(ss, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusUpdate(t *testing.T) {
	k := Kind()
	old := newSTS()
	old.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CollisionCount: ptr.To[int32](2)}

	st := old.DeepCopy()
	st.Spec.Replicas = ptr.To[int32](9)
	k.Status.PrepareForUpdate(st, old)
	if *st.Spec.Replicas != 1 {
		t.Error("a status update changed the spec")
	}

	tests := []struct {
		name   string
		status appsv1.StatefulSetStatus
		want   []string
	}{
		{name: "valid", status: appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 2, CurrentReplicas: 3, UpdatedReplicas: 1,
			AvailableReplicas: 2, ObservedGeneration: 1, CollisionCount: ptr.To[int32](2)}},
		{name: "negative counters", status: appsv1.StatefulSetStatus{Replicas: -1, ReadyReplicas: -1, CurrentReplicas: -1,
			UpdatedReplicas: -1, AvailableReplicas: -1, ObservedGeneration: -1, CollisionCount: ptr.To[int32](-1)},
			want: []string{
				"status.replicas|Invalid value|must be greater than or equal to 0",
				"status.readyReplicas|Invalid value|must be greater than or equal to 0",
				"status.currentReplicas|Invalid value|must be greater than or equal to 0",
				"status.updatedReplicas|Invalid value|must be greater than or equal to 0",
				"status.availableReplicas|Invalid value|must be greater than or equal to 0",
				"status.observedGeneration|Invalid value|must be greater than or equal to 0",
				"status.collisionCount|Invalid value|must be greater than or equal to 0",
				"status.collisionCount|Invalid value|cannot be decremented",
			}},
		{name: "counters above replicas", status: appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 2, CurrentReplicas: 2,
			UpdatedReplicas: 2, AvailableReplicas: 2, CollisionCount: ptr.To[int32](2)},
			want: []string{
				"status.readyReplicas|Invalid value|cannot be greater than status.replicas",
				"status.currentReplicas|Invalid value|cannot be greater than status.replicas",
				"status.updatedReplicas|Invalid value|cannot be greater than status.replicas",
				"status.availableReplicas|Invalid value|cannot be greater than status.replicas",
			}},
		{name: "counters exactly at replicas", status: appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 2, CurrentReplicas: 2,
			UpdatedReplicas: 2, AvailableReplicas: 2, CollisionCount: ptr.To[int32](2)}},
		{name: "available above ready", status: appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 1, AvailableReplicas: 2,
			CollisionCount: ptr.To[int32](2)},
			want: []string{"status.availableReplicas|Invalid value|cannot be greater than status.readyReplicas"}},
		{name: "collisionCount dropped", status: appsv1.StatefulSetStatus{Replicas: 3},
			want: []string{"status.collisionCount|Invalid value|cannot be decremented"}},
		{name: "collisionCount decremented", status: appsv1.StatefulSetStatus{Replicas: 3, CollisionCount: ptr.To[int32](1)},
			want: []string{"status.collisionCount|Invalid value|cannot be decremented"}},
		{name: "collisionCount incremented", status: appsv1.StatefulSetStatus{Replicas: 3, CollisionCount: ptr.To[int32](3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := old.DeepCopy()
			ss.Status = tt.status
			if diff := cmp.Diff(tt.want, flat(k.Status.ValidateUpdate(ss, old))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScale(t *testing.T) {
	k := Kind()
	ss := newSTS()
	ss.Spec.Replicas = ptr.To[int32](4)
	ss.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}
	ss.Status.Replicas = 2
	spec, status, sel := k.Scale.Get(ss)
	if spec != 4 || status != 2 || sel != "app=web,tier" {
		t.Errorf("Get = %d, %d, %q", spec, status, sel)
	}
	k.Scale.Set(ss, 7)
	if *ss.Spec.Replicas != 7 {
		t.Errorf("Set: replicas %d", *ss.Spec.Replicas)
	}
	ss.Spec.Replicas, ss.Spec.Selector = nil, nil
	if spec, _, sel := k.Scale.Get(ss); spec != 0 || sel != "" {
		t.Errorf("Get without replicas or selector = %d, %q", spec, sel)
	}
}

func TestRow(t *testing.T) {
	ss := newSTS()
	ss.CreationTimestamp = metav1.NewTime(now.Add(-90 * time.Second))
	ss.Spec.Replicas = ptr.To[int32](3)
	ss.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 2}
	ss.Spec.Template.Spec.Containers = append(ss.Spec.Template.Spec.Containers, corev1.Container{Name: "side", Image: "envoy"})
	want := []interface{}{"web", "2/3", "90s", "c,side", "busybox:1.36,envoy"}
	if diff := cmp.Diff(want, row(ss, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	ss.CreationTimestamp = metav1.Time{}
	if got := row(ss, now)[2]; got != "<unknown>" {
		t.Errorf("age without creationTimestamp = %v", got)
	}
	// Name and priority of each column; priority 1 is -o wide only.
	wantCols := []string{"Name/0", "Ready/0", "Age/0", "Containers/1", "Images/1"}
	var gotCols []string
	for _, c := range columns() {
		gotCols = append(gotCols, fmt.Sprintf("%s/%d", c.Name, c.Priority))
	}
	if diff := cmp.Diff(wantCols, gotCols); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
}
