package pod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDefaultMinimalPod(t *testing.T) {
	got := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "c", Image: "nginx",
			Ports: []v1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
	defaultPod(got)

	want := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "c", Image: "nginx",
				Ports:                    []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				ImagePullPolicy:          v1.PullAlways,
			}},
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
			DNSPolicy:                     v1.DNSClusterFirst,
			SecurityContext:               &v1.PodSecurityContext{},
			SchedulerName:                 "default-scheduler",
			EnableServiceLinks:            ptr(true),
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaulted pod (-want +got):\n%s", diff)
	}
}

func TestDefaultKeepsSetValues(t *testing.T) {
	got := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{
			Name: "c", Image: "nginx", ImagePullPolicy: v1.PullNever,
			TerminationMessagePath: "/tmp/x", TerminationMessagePolicy: v1.TerminationMessageFallbackToLogsOnError,
			Ports: []v1.ContainerPort{{ContainerPort: 53, Protocol: v1.ProtocolUDP}},
		}},
		RestartPolicy:                 v1.RestartPolicyNever,
		TerminationGracePeriodSeconds: ptr(int64(0)),
		DNSPolicy:                     v1.DNSDefault,
		SecurityContext:               &v1.PodSecurityContext{RunAsUser: ptr(int64(1000))},
		SchedulerName:                 "other",
		EnableServiceLinks:            ptr(false),
		Tolerations:                   []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists}},
		Priority:                      ptr(int32(7)),
	}}
	want := got.DeepCopy()
	want.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	defaultPod(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("set values changed (-want +got):\n%s", diff)
	}
}

func TestDefaultImagePullPolicy(t *testing.T) {
	digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"nginx", v1.PullAlways},
		{"nginx:latest", v1.PullAlways},
		{"library/nginx", v1.PullAlways},
		{"docker.io/library/nginx", v1.PullAlways},
		{"registry.example.com:5000/team/app", v1.PullAlways},
		{"localhost:5000/app", v1.PullAlways},
		{"localhost/app:latest", v1.PullAlways},
		{"nginx:1.25", v1.PullIfNotPresent},
		{"registry.example.com:5000/team/app:v2", v1.PullIfNotPresent},
		{"nginx@" + digest, v1.PullIfNotPresent},
		{"nginx:latest@" + digest, v1.PullAlways},
		{"nginx:1.25@" + digest, v1.PullIfNotPresent},
		// References that do not parse get IfNotPresent, as upstream.
		{"", v1.PullIfNotPresent},
		{"NGINX", v1.PullIfNotPresent},
		{"nginx:", v1.PullIfNotPresent},
		{"nginx@sha256:abc", v1.PullIfNotPresent},
		{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullIfNotPresent},
		// An upper-case first component is taken as a registry host.
		{"Registry/app", v1.PullAlways},
	}
	for _, tc := range cases {
		t.Run(tc.image, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{
				Containers:          []v1.Container{{Name: "c", Image: tc.image}},
				InitContainers:      []v1.Container{{Name: "i", Image: tc.image}},
				EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "e", Image: tc.image}}},
			}}
			defaultPod(pod)
			got := []v1.PullPolicy{pod.Spec.Containers[0].ImagePullPolicy, pod.Spec.InitContainers[0].ImagePullPolicy, pod.Spec.EphemeralContainers[0].ImagePullPolicy}
			want := []v1.PullPolicy{tc.want, tc.want, tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("pull policy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultResources(t *testing.T) {
	cases := []struct {
		name string
		in   v1.ResourceRequirements
		want v1.ResourceRequirements
	}{
		{
			name: "limits only become requests",
			in:   v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")}},
			want: v1.ResourceRequirements{
				Limits:   v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")},
				Requests: v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")},
			},
		},
		{
			name: "an existing request is kept",
			in: v1.ResourceRequirements{
				Limits:   v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")},
				Requests: v1.ResourceList{"cpu": q("100m")},
			},
			want: v1.ResourceRequirements{
				Limits:   v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")},
				Requests: v1.ResourceList{"cpu": q("100m"), "memory": q("1Gi")},
			},
		},
		{
			name: "requests only stay as they are",
			in:   v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("1")}},
			want: v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("1")}},
		},
		{
			name: "sub-milli quantities round up",
			in:   v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("0.0001")}},
			want: v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("1m")}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{
				Containers:     []v1.Container{{Name: "c", Image: "x", Resources: *tc.in.DeepCopy()}},
				InitContainers: []v1.Container{{Name: "i", Image: "x", Resources: *tc.in.DeepCopy()}},
			}}
			defaultPod(pod)
			cmpQ := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
			for _, got := range []v1.ResourceRequirements{pod.Spec.Containers[0].Resources, pod.Spec.InitContainers[0].Resources} {
				if diff := cmp.Diff(tc.want, got, cmpQ); diff != "" {
					t.Errorf("resources (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestDefaultHostNetworkPorts(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		HostNetwork: true,
		Containers: []v1.Container{{Name: "c", Image: "x", Ports: []v1.ContainerPort{
			{ContainerPort: 80}, {ContainerPort: 443, HostPort: 8443},
		}}},
	}}
	defaultPod(pod)
	got := []int32{pod.Spec.Containers[0].Ports[0].HostPort, pod.Spec.Containers[0].Ports[1].HostPort}
	if diff := cmp.Diff([]int32{80, 8443}, got); diff != "" {
		t.Errorf("host ports (-want +got):\n%s", diff)
	}

	// Without host networking nothing is copied.
	pod = &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "x", Ports: []v1.ContainerPort{{ContainerPort: 80}}}}}}
	defaultPod(pod)
	if hp := pod.Spec.Containers[0].Ports[0].HostPort; hp != 0 {
		t.Errorf("hostPort = %d without hostNetwork, want 0", hp)
	}
}

func TestDefaultNestedTypes(t *testing.T) {
	got := &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{
			{Name: "none"},
			{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}},
			{Name: "dapi", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
			{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		},
		Containers: []v1.Container{{
			Name: "c", Image: "x:1",
			Env:            []v1.EnvVar{{Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9000}}},
			Lifecycle:      &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}},
		}},
		DeprecatedServiceAccount: "builder",
	}}
	defaultPod(got)

	mode := int32(0644)
	wantVolumes := []v1.Volume{
		{Name: "none", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "hp", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x", Type: ptr(v1.HostPathUnset)}}},
		{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: &mode}}},
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, DefaultMode: &mode}}},
		{Name: "dapi", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: &mode, Items: []v1.DownwardAPIVolumeFile{{Path: "n", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}}}},
		{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3600))}}}}}},
	}
	if diff := cmp.Diff(wantVolumes, got.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}

	c := got.Spec.Containers[0]
	wantProbe := &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080), Scheme: v1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	if diff := cmp.Diff(wantProbe, c.LivenessProbe); diff != "" {
		t.Errorf("liveness probe (-want +got):\n%s", diff)
	}
	if s := c.ReadinessProbe.GRPC.Service; s == nil || *s != "" {
		t.Errorf("grpc service = %v, want pointer to empty string", s)
	}
	if diff := cmp.Diff(&v1.HTTPGetAction{Path: "/", Port: intstr.FromString("http"), Scheme: v1.URISchemeHTTP}, c.Lifecycle.PreStop.HTTPGet); diff != "" {
		t.Errorf("preStop httpGet (-want +got):\n%s", diff)
	}
	if v := c.Env[0].ValueFrom.FieldRef.APIVersion; v != "v1" {
		t.Errorf("env fieldRef apiVersion = %q, want v1", v)
	}
	if got.Spec.ServiceAccountName != "builder" || got.Spec.DeprecatedServiceAccount != "builder" {
		t.Errorf("service account = %q / %q, want builder / builder", got.Spec.ServiceAccountName, got.Spec.DeprecatedServiceAccount)
	}
}

func TestDefaultServiceAccountNameWins(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{ServiceAccountName: "new", DeprecatedServiceAccount: "old", Containers: []v1.Container{{Name: "c", Image: "x"}}}}
	defaultPod(pod)
	if pod.Spec.ServiceAccountName != "new" || pod.Spec.DeprecatedServiceAccount != "new" {
		t.Errorf("service account = %q / %q, want new / new", pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount)
	}
}

func TestNormalizeStatusIPs(t *testing.T) {
	cases := []struct {
		name string
		in   v1.PodStatus
		want v1.PodStatus
	}{
		{"podIP fills podIPs",
			v1.PodStatus{PodIP: "10.0.0.1"},
			v1.PodStatus{PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}}}},
		{"podIPs fills podIP",
			v1.PodStatus{PodIPs: []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}},
			v1.PodStatus{PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}}},
		{"podIP wins a disagreement",
			v1.PodStatus{PodIP: "10.0.0.2", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}},
			v1.PodStatus{PodIP: "10.0.0.2", PodIPs: []v1.PodIP{{IP: "10.0.0.2"}}}},
		{"hostIP fills hostIPs",
			v1.PodStatus{HostIP: "192.168.0.1"},
			v1.PodStatus{HostIP: "192.168.0.1", HostIPs: []v1.HostIP{{IP: "192.168.0.1"}}}},
		{"hostIPs fills hostIP",
			v1.PodStatus{HostIPs: []v1.HostIP{{IP: "192.168.0.1"}}},
			v1.PodStatus{HostIP: "192.168.0.1", HostIPs: []v1.HostIP{{IP: "192.168.0.1"}}}},
		{"a hostIP disagreement is left for validation",
			v1.PodStatus{HostIP: "192.168.0.2", HostIPs: []v1.HostIP{{IP: "192.168.0.1"}}},
			v1.PodStatus{HostIP: "192.168.0.2", HostIPs: []v1.HostIP{{IP: "192.168.0.1"}}}},
		{"empty stays empty", v1.PodStatus{}, v1.PodStatus{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in
			normalizeStatusIPs(&got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// A zero written with a huge exponent is stored as a plain zero, so later
// comparisons do not have to rescale it.
func TestDefaultPlainZero(t *testing.T) {
	huge := q("0e99999999")
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "c", Image: "x",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": huge}},
			Env:       []v1.EnvVar{{Name: "E", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: huge}}}},
		}},
		Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr(huge)}}}},
	}}
	defaultPod(pod)
	plain := resource.Quantity{Format: resource.DecimalSI}
	got := []resource.Quantity{
		pod.Spec.Containers[0].Resources.Limits["cpu"],
		pod.Spec.Containers[0].Resources.Requests["cpu"],
		pod.Spec.Containers[0].Env[0].ValueFrom.ResourceFieldRef.Divisor,
		*pod.Spec.Volumes[0].EmptyDir.SizeLimit,
	}
	for i, g := range got {
		if diff := cmp.Diff(plain, g); diff != "" {
			t.Errorf("quantity %d not a plain zero (-want +got):\n%s", i, diff)
		}
	}
	// And the update path stays quick: comparing it with 1 is cheap now (a
	// regression here shows up as a test timeout).
	old := newPod()
	pod.Name, pod.Namespace = old.Name, old.Namespace
	validateUpdate(pod, old)
}
