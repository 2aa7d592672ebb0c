package runtime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestContainerEnv(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status:     corev1.PodStatus{PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}},
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	base := field.NewPath("spec", "containers").Index(1)
	tests := []struct {
		name    string
		base    []corev1.EnvVar
		env     []corev1.EnvVar
		want    []string
		wantErr string
	}{
		{name: "nothing", want: []string{}},
		{
			name: "base first, later values replace in place, expansion of earlier names only",
			base: []corev1.EnvVar{{Name: "PATH", Value: "/bin"}},
			env: []corev1.EnvVar{
				{Name: "A", Value: "$(B)-x"}, {Name: "B", Value: "b"}, {Name: "PATH", Value: "/opt:$(PATH)"}, {Name: "C", Value: "$(A)$$(A)"},
			},
			want: []string{"PATH=/opt:/bin", "A=$(B)-x", "B=b", "C=$(B)-x$(A)"},
		},
		{
			name: "downward API",
			env:  []corev1.EnvVar{fieldEnv("N", "metadata.name"), fieldEnv("L", "metadata.labels['app']"), fieldEnv("IPS", "status.podIPs"), fieldEnv("NODE", "spec.nodeName")},
			want: []string{"N=web", "L=web", "IPS=10.0.0.5,fd00::5", "NODE=n1"},
		},
		{
			name: "optional secret key skipped",
			env:  []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k", Optional: ptr.To(true)}}}},
			want: []string{},
		},
		{
			name:    "secret key names the runtime",
			env:     []corev1.EnvVar{{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}}},
			wantErr: "spec.containers[1].env[0].valueFrom.secretKeyRef: Forbidden: not supported by the test runtime",
		},
		{
			name:    "resource field",
			env:     []corev1.EnvVar{{Name: "R", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}}},
			wantErr: "spec.containers[1].env[0].valueFrom.resourceFieldRef: Forbidden: not supported by the test runtime",
		},
		{
			name:    "unknown field",
			env:     []corev1.EnvVar{fieldEnv("X", "spec.hostname")},
			wantErr: `spec.containers[1].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.hostname"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ContainerEnv(pod, &corev1.Container{Env: tt.env}, base, "test", tt.base...)
			if tt.wantErr != "" {
				if err == nil || len(err.Error()) < len(tt.wantErr) || err.Error()[:len(tt.wantErr)] != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.List()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if got.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", got.Len(), len(tt.want))
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	tests := map[string]string{
		"":           "",
		"plain":      "plain",
		"$(A)":       "a",
		"x$(A)y$(A)": "xaya",
		"$$(A)":      "$(A)",
		"$$":         "$",
		"$(EMPTY)|":  "|",
		"$(NOPE)":    "$(NOPE)",
		"$(A":        "$(A",
		"$A":         "$A",
		"trailing $": "trailing $",
		"$($(A))":    "$($(A))",
	}
	for in, want := range tests {
		if got := Expand(in, lookup); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
	var e Env
	e.Set("A", "1")
	if got := e.Expand("$(A)"); got != "1" {
		t.Errorf("Env.Expand = %q", got)
	}
}
