package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPodRequests(t *testing.T) {
	container := func(cpu, memory string) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests(cpu, memory)}}
	}
	sidecar := func(cpu, memory string) corev1.Container {
		c := container(cpu, memory)
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		return c
	}
	spec := func(init []corev1.Container, regular ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{InitContainers: init, Containers: regular}}
	}
	const mi = 1024 * 1024
	cases := []struct {
		name    string
		pod     *corev1.Pod
		want    Resources
		nonZero Resources
	}{
		{
			name:    "no requests",
			pod:     spec(nil, container("", "")),
			want:    Resources{},
			nonZero: Resources{MilliCPU: 100, Memory: 200 * mi},
		},
		{
			name:    "regular containers add up",
			pod:     spec(nil, container("1", "1Gi"), container("500m", "")),
			want:    Resources{MilliCPU: 1500, Memory: 1024 * mi},
			nonZero: Resources{MilliCPU: 1500, Memory: 1224 * mi},
		},
		{
			name:    "an explicit zero gets no default",
			pod:     spec(nil, container("0", "0")),
			want:    Resources{},
			nonZero: Resources{},
		},
		{
			// Upstream's own example: init 2/1G and 2/3G, regular 2/1G and 1/1G.
			name:    "an init container larger than the sum wins per resource",
			pod:     spec([]corev1.Container{container("2", "1Gi"), container("2", "3Gi")}, container("2", "1Gi"), container("1", "1Gi")),
			want:    Resources{MilliCPU: 3000, Memory: 3072 * mi},
			nonZero: Resources{MilliCPU: 3000, Memory: 3072 * mi},
		},
		{
			name: "sidecars run beside the regular containers and the later init containers",
			pod: spec([]corev1.Container{
				container("1", ""), // alone: 1
				sidecar("500m", ""),
				container("2", ""), // beside the sidecar: 2.5
			}, container("1", "")),
			want:    Resources{MilliCPU: 2500},
			nonZero: Resources{MilliCPU: 2500, Memory: 2 * 200 * mi},
		},
		{
			name:    "sidecars add to the regular sum",
			pod:     spec([]corev1.Container{sidecar("500m", "")}, container("1", "")),
			want:    Resources{MilliCPU: 1500},
			nonZero: Resources{MilliCPU: 1500, Memory: 2 * 200 * mi},
		},
		{
			name: "overhead comes on top",
			pod: func() *corev1.Pod {
				p := spec(nil, container("1", ""))
				p.Spec.Overhead = requests("250m", "64Mi")
				return p
			}(),
			want:    Resources{MilliCPU: 1250, Memory: 64 * mi},
			nonZero: Resources{MilliCPU: 1250, Memory: 264 * mi},
		},
		{
			name: "pod-level requests replace the containers' sum",
			pod: func() *corev1.Pod {
				p := spec(nil, container("1", ""), container("", ""))
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: requests("3", "")}
				return p
			}(),
			want: Resources{MilliCPU: 3000},
			// memory is named nowhere: each container gets the default.
			nonZero: Resources{MilliCPU: 3000, Memory: 2 * 200 * mi},
		},
		{
			name: "ephemeral storage and scalar resources",
			pod: spec(nil, corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceEphemeralStorage: mustQ("1Gi"),
				"example.com/gpu":               mustQ("2"),
				"hugepages-2Mi":                 mustQ("4Mi"),
				"unknown-native":                mustQ("7"),
			}}}),
			want: Resources{EphemeralStorage: 1024 * mi, Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 2, "hugepages-2Mi": 4 * mi}},
			nonZero: Resources{MilliCPU: 100, Memory: 200 * mi, EphemeralStorage: 1024 * mi,
				Scalar: map[corev1.ResourceName]int64{"example.com/gpu": 2, "hugepages-2Mi": 4 * mi}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, PodRequests(tc.pod, false)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.nonZero, PodRequests(tc.pod, true)); diff != "" {
				t.Errorf("non-zero requests (-want +got):\n%s", diff)
			}
		})
	}
}
