package podtemplate

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func flat(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, fmt.Sprintf("%s|%s|%s", e.Field, e.Type, e.Detail))
	}
	return out
}

func template() *corev1.PodTemplateSpec {
	t := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
	}
	Default(t)
	return t
}

func TestDefault(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		HostNetwork: true,
		Containers: []corev1.Container{{
			Name: "c", Image: "busybox",
			Ports:     []corev1.ContainerPort{{ContainerPort: 80}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		}},
	}}
	Default(tmpl)
	s := tmpl.Spec
	type got struct {
		Restart       corev1.RestartPolicy
		DNS           corev1.DNSPolicy
		Grace         *int64
		Scheduler     string
		ServiceLinks  *bool
		Requests      corev1.ResourceList
		HostPort      int32
		Protocol      corev1.Protocol
		PullPolicy    corev1.PullPolicy
		TermMsgPolicy corev1.TerminationMessagePolicy
	}
	want := got{
		Restart: corev1.RestartPolicyAlways, DNS: corev1.DNSClusterFirst, Grace: ptr.To[int64](30), Scheduler: "default-scheduler",
		Protocol: corev1.ProtocolTCP, PullPolicy: corev1.PullAlways, TermMsgPolicy: corev1.TerminationMessageReadFile,
	}
	c := s.Containers[0]
	have := got{s.RestartPolicy, s.DNSPolicy, s.TerminationGracePeriodSeconds, s.SchedulerName, s.EnableServiceLinks,
		c.Resources.Requests, c.Ports[0].HostPort, c.Ports[0].Protocol, c.ImagePullPolicy, c.TerminationMessagePolicy}
	if diff := cmp.Diff(want, have); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestValidateForController(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	path := field.NewPath("spec", "template")
	tests := []struct {
		name     string
		mutate   func(*corev1.PodTemplateSpec)
		selector *metav1.LabelSelector
		want     []string
	}{
		{name: "valid", mutate: func(*corev1.PodTemplateSpec) {}},
		{
			name:   "labels do not match the selector",
			mutate: func(t *corev1.PodTemplateSpec) { t.Labels = map[string]string{"app": "db"} },
			want:   []string{"spec.template.metadata.labels|Invalid value|`selector` does not match template `labels`"},
		},
		{
			name:   "pod rules apply, under the template's path",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Image = "" },
			want:   []string{"spec.template.spec.containers[0].image|Required value|"},
		},
		{
			name:   "restartPolicy must be Always",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.RestartPolicy = corev1.RestartPolicyNever },
			want:   []string{`spec.template.spec.restartPolicy|Unsupported value|supported values: "Always"`},
		},
		{
			name:   "no activeDeadlineSeconds",
			mutate: func(t *corev1.PodTemplateSpec) { t.Spec.ActiveDeadlineSeconds = ptr.To[int64](5) },
			want:   []string{"spec.template.spec.activeDeadlineSeconds|Forbidden|activeDeadlineSeconds in ReplicaSet is not Supported"},
		},
		{
			name:   "bad label key at upstream's path",
			mutate: func(t *corev1.PodTemplateSpec) { t.Labels["bad key"] = "x" },
			want: []string{"spec.template.labels|Invalid value|name part must consist of alphanumeric characters, '-', '_' or '.', " +
				"and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
		},
		{
			name:   "pod annotations are checked at the template's annotations",
			mutate: func(t *corev1.PodTemplateSpec) { t.Annotations = map[string]string{corev1.PodDeletionCost: "x"} },
			want:   []string{"spec.template.annotations[controller.kubernetes.io/pod-deletion-cost]|Invalid value|must be a 32bit integer"},
		},
		{
			name: "ephemeral containers refused",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "e", Image: "busybox"}}}
			},
			want: []string{"spec.template.spec.ephemeralContainers|Forbidden|ephemeral containers not allowed in pod template"},
		},
		{
			name: "nodeName with scheduling gates is a pod-create rule only",
			mutate: func(t *corev1.PodTemplateSpec) {
				t.Spec.NodeName = "n"
				t.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "g"}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := template()
			tt.mutate(tmpl)
			s := sel
			if tt.selector != nil {
				s = tt.selector
			}
			if diff := cmp.Diff(tt.want, flat(ValidateForController(tmpl, s, "ReplicaSet", path))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestContainerCells(t *testing.T) {
	tmpl := template()
	tmpl.Spec.Containers = append(tmpl.Spec.Containers, corev1.Container{Name: "side", Image: "envoy:1"})
	names, images := ContainerCells(tmpl)
	if names != "c,side" || images != "busybox:1.36,envoy:1" {
		t.Errorf("cells = %q %q", names, images)
	}
}
