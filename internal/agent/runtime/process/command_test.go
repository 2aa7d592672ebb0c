//go:build linux

package process

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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

func TestCgroupValues(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name                  string
		limits, requests      corev1.ResourceList
		wantCPU, wantMem, wgt string
	}{
		{"no limits", nil, nil, "max 100000", "max", "1"},
		{"half a cpu and 64Mi", corev1.ResourceList{"cpu": q("500m"), "memory": q("64Mi")}, corev1.ResourceList{"cpu": q("500m")}, "50000 100000", "67108864", "20"},
		{"two cpus", corev1.ResourceList{"cpu": q("2")}, corev1.ResourceList{"cpu": q("2")}, "200000 100000", "max", "79"},
		{"tiny limit is the least quota", corev1.ResourceList{"cpu": q("1m")}, corev1.ResourceList{"cpu": q("1m")}, "1000 100000", "max", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []string{cpuMax(tt.limits), memoryMax(tt.limits), cpuWeight(tt.requests)}
			if diff := cmp.Diff([]string{tt.wantCPU, tt.wantMem, tt.wgt}, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCgroupTree(t *testing.T) {
	root := t.TempDir()
	if _, err := newCgroups(root, "knode", false); err == nil {
		t.Fatalf("newCgroups without cgroup.controllers succeeded")
	}
	_ = os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset io memory pids\n"), 0o644)
	if _, err := newCgroups(root, "knode", false); err == nil {
		t.Fatalf("newCgroups without the cpu controller succeeded")
	}
	_ = os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("cpuset cpu io memory pids\n"), 0o644)
	cg, err := newCgroups(root, "knode/agent", false)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := cg.create("u1", "app", 2, corev1.ResourceRequirements{
		Limits:   corev1.ResourceList{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("1Gi")},
		Requests: corev1.ResourceList{"cpu": resource.MustParse("250m")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "knode", "agent", "podu1", "app-2"); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}
	read := func(path string) string {
		data, _ := os.ReadFile(path)
		return string(data)
	}
	got := map[string]string{
		"root subtree":  read(filepath.Join(root, "cgroup.subtree_control")),
		"agent subtree": read(filepath.Join(root, "knode", "agent", "cgroup.subtree_control")),
		"pod subtree":   read(filepath.Join(root, "knode", "agent", "podu1", "cgroup.subtree_control")),
		"cpu.max":       read(filepath.Join(dir, "cpu.max")),
		"memory.max":    read(filepath.Join(dir, "memory.max")),
		"cpu.weight":    read(filepath.Join(dir, "cpu.weight")),
	}
	want := map[string]string{
		"root subtree": "+cpu +memory", "agent subtree": "+cpu +memory", "pod subtree": "+cpu +memory",
		"cpu.max": "25000 100000", "memory.max": "1073741824", "cpu.weight": "10",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_ = os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n"), 0o644)
	if !oomKilled(dir) {
		t.Errorf("oomKilled = false with oom_kill 1")
	}
	if err := cg.removePod("u1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "knode", "agent", "podu1")); !os.IsNotExist(err) {
		t.Errorf("pod cgroup still there: %v", err)
	}
}
