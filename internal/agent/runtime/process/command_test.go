//go:build linux

package process

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "u-1",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"note": "hi"},
		},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa"},
		Status: corev1.PodStatus{
			HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func TestBuildCommand(t *testing.T) {
	base := field.NewPath("spec", "containers").Index(0)
	tests := []struct {
		name     string
		c        corev1.Container
		wantArgv []string
		wantEnv  []string
		wantErr  string
	}{
		{
			name:     "command, args and expansion",
			c:        corev1.Container{Command: []string{"sh", "-c"}, Args: []string{"echo $(GREETING) $$(x) $(UNDEFINED) $(", "$"}, Env: []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}},
			wantArgv: []string{"sh", "-c", "echo hello $(x) $(UNDEFINED) $(", "$"},
			wantEnv:  []string{"PATH=/bin", "HOSTNAME=web", "GREETING=hello"},
		},
		{
			name: "env refers to earlier env and overrides PATH",
			c: corev1.Container{Command: []string{"run"}, Env: []corev1.EnvVar{
				{Name: "A", Value: "x"}, {Name: "B", Value: "$(A)-y"}, {Name: "PATH", Value: "/opt/bin:$(PATH)"},
			}},
			wantArgv: []string{"run"},
			wantEnv:  []string{"PATH=/opt/bin:/bin", "HOSTNAME=web", "A=x", "B=x-y"},
		},
		{
			name: "downward API",
			c: corev1.Container{Command: []string{"run"}, Env: []corev1.EnvVar{
				fieldEnv("N", "metadata.name"), fieldEnv("NS", "metadata.namespace"), fieldEnv("UID", "metadata.uid"),
				fieldEnv("L", "metadata.labels['app']"), fieldEnv("AN", "metadata.annotations['note']"),
				fieldEnv("NODE", "spec.nodeName"), fieldEnv("SA", "spec.serviceAccountName"),
				fieldEnv("HIP", "status.hostIP"), fieldEnv("HIPS", "status.hostIPs"),
				fieldEnv("PIP", "status.podIP"), fieldEnv("PIPS", "status.podIPs"),
			}},
			wantArgv: []string{"run"},
			wantEnv: []string{"PATH=/bin", "HOSTNAME=web", "N=web", "NS=prod", "UID=u-1", "L=web", "AN=hi", "NODE=node-1", "SA=sa",
				"HIP=10.0.0.1", "HIPS=10.0.0.1,fd00::1", "PIP=10.0.0.1", "PIPS=10.0.0.1,fd00::1"},
		},
		{
			name:     "optional configMap key is skipped",
			c:        corev1.Container{Command: []string{"run"}, Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k", Optional: ptr.To(true)}}}}},
			wantArgv: []string{"run"},
			wantEnv:  []string{"PATH=/bin", "HOSTNAME=web"},
		},
		{
			name:    "no command",
			c:       corev1.Container{Image: "nginx"},
			wantErr: `spec.containers[0].command: Required value: the process runtime does not run images ("nginx"): give the command to run`,
		},
		{
			name:    "configMap key",
			c:       corev1.Container{Command: []string{"run"}, Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{Key: "k"}}}}},
			wantErr: "spec.containers[0].env[0].valueFrom.configMapKeyRef: Forbidden: not supported by the process runtime",
		},
		{
			name:    "unknown field path",
			c:       corev1.Container{Command: []string{"run"}, Env: []corev1.EnvVar{fieldEnv("X", "spec.hostname")}},
			wantErr: `spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "spec.hostname"`,
		},
		{
			name:    "envFrom",
			c:       corev1.Container{Command: []string{"run"}, EnvFrom: []corev1.EnvFromSource{{Prefix: "x"}}},
			wantErr: "spec.containers[0].envFrom: Forbidden: not supported by the process runtime",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := buildCommand(testPod(), &tt.c, base, "/bin")
			if tt.wantErr != "" {
				if err == nil || !startsWith(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantArgv, got.argv); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEnv, got.env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	_ = os.Mkdir(bin, 0o755)
	_ = os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	_ = os.WriteFile(filepath.Join(bin, "data"), []byte("x"), 0o644)
	tests := []struct {
		name, cmd, want, wantErr string
	}{
		{name: "found on PATH", cmd: "tool", want: filepath.Join(bin, "tool")},
		{name: "relative to the working directory", cmd: "bin/tool", want: filepath.Join(bin, "tool")},
		{name: "absolute", cmd: filepath.Join(bin, "tool"), want: filepath.Join(bin, "tool")},
		{name: "not on PATH", cmd: "nope", wantErr: `exec: "nope": executable file not found in $PATH`},
		{name: "not executable", cmd: filepath.Join(bin, "data"), wantErr: `exec: "` + filepath.Join(bin, "data") + `": ` + filepath.Join(bin, "data") + ": permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lookPath(tt.cmd, "/nonexistent:"+bin, dir)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("lookPath = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
