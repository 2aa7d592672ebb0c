package cri

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/runtime"
	"knode/internal/agent/swap"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func specPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "prod", UID: "u-1",
			Labels:        map[string]string{"app": "web"},
			Annotations:   map[string]string{"note": "hi"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox:1",
				Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}},
			}},
		},
	}
}

func TestSandboxConfig(t *testing.T) {
	pod := specPod()
	got, err := sandboxConfig(pod, sandboxInput{attempt: 2, logDir: "/logs/prod_web_u-1", cgroupParent: "kubepods/burstable/podu-1"})
	if err != nil {
		t.Fatal(err)
	}
	kept := podToKeep(pod)
	data, _ := json.Marshal(kept)
	want := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "prod", Uid: "u-1", Attempt: 2},
		Hostname:     "web",
		LogDirectory: "/logs/prod_web_u-1",
		PortMappings: []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080}},
		Labels: map[string]string{
			"app": "web", LabelPodName: "web", LabelPodNamespace: "prod", LabelPodUID: "u-1", LabelManaged: "true",
		},
		Annotations: map[string]string{"note": "hi", AnnotationPod: string(data)},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			CgroupParent: "/kubepods/burstable/podu-1",
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD,
			}},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("sandbox config (-want +got):\n%s", diff)
	}
	if len(kept.ManagedFields) != 0 {
		t.Error("the kept pod has managedFields")
	}
}

func TestSandboxConfigVariants(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*corev1.Pod)
		check  func(*testing.T, *runtimeapi.PodSandboxConfig)
	}{
		{
			name: "host network, PID and IPC: the node's namespaces and no hostname",
			mutate: func(p *corev1.Pod) {
				p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				ns := c.Linux.SecurityContext.NamespaceOptions
				if ns.Network != runtimeapi.NamespaceMode_NODE || ns.Pid != runtimeapi.NamespaceMode_NODE || ns.Ipc != runtimeapi.NamespaceMode_NODE || c.Hostname != "" {
					t.Errorf("namespaces %v, hostname %q", ns, c.Hostname)
				}
			},
		},
		{
			name:   "shared process namespace",
			mutate: func(p *corev1.Pod) { p.Spec.ShareProcessNamespace = ptr.To(true) },
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if pid := c.Linux.SecurityContext.NamespaceOptions.Pid; pid != runtimeapi.NamespaceMode_POD {
					t.Errorf("pid namespace %v, want POD", pid)
				}
			},
		},
		{
			name: "spec.hostname and dnsPolicy None",
			mutate: func(p *corev1.Pod) {
				p.Spec.Hostname = "h1"
				p.Spec.DNSPolicy = corev1.DNSNone
				p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.b"},
					Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}}}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				want := &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.b"}, Options: []string{"ndots:2", "edns0"}}
				if c.Hostname != "h1" || !cmp.Equal(want, c.DnsConfig, protocmp.Transform()) {
					t.Errorf("hostname %q, dns %v", c.Hostname, c.DnsConfig)
				}
			},
		},
		{
			name: "ClusterFirst: the node's resolv.conf",
			mutate: func(p *corev1.Pod) {
				p.Spec.DNSPolicy = corev1.DNSClusterFirst
				p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.DnsConfig != nil {
					t.Errorf("dns %v, want none", c.DnsConfig)
				}
			},
		},
		{
			name: "a privileged container, pod user, groups and sysctls",
			mutate: func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "i", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
				p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000),
					FSGroup: ptr.To[int64](3000), SupplementalGroups: []int64{4000}, Sysctls: []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}}
			},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				sc := c.Linux.SecurityContext
				if !sc.Privileged || sc.RunAsUser.GetValue() != 1000 || sc.RunAsGroup.GetValue() != 2000 ||
					!cmp.Equal(sc.SupplementalGroups, []int64{3000, 4000}) || c.Linux.Sysctls["net.core.somaxconn"] != "1024" {
					t.Errorf("security context %v, sysctls %v", sc, c.Linux.Sysctls)
				}
			},
		},
		{
			name:   "no cgroup parent",
			mutate: func(p *corev1.Pod) {},
			check: func(t *testing.T, c *runtimeapi.PodSandboxConfig) {
				if c.Linux.CgroupParent != "" {
					t.Errorf("cgroup parent %q", c.Linux.CgroupParent)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := specPod()
			tt.mutate(pod)
			got, err := sandboxConfig(pod, sandboxInput{})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}

func TestContainerConfig(t *testing.T) {
	pod := specPod()
	c := &corev1.Container{
		Name: "c", Image: "busybox:1",
		Command:    []string{"sh", "-c"},
		Args:       []string{"echo $(A) $$(B) $(NOPE)"},
		WorkingDir: "/w",
		Env:        []corev1.EnvVar{{Name: "A", Value: "a"}, {Name: "DEV", Value: "mine"}},
		TTY:        true, Stdin: true,
		TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			Capabilities:             &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}},
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			RunAsUser:                ptr.To[int64](7),
		},
	}
	env, err := runtime.ContainerEnv(pod, c, nil, "CRI")
	if err != nil {
		t.Fatal(err)
	}
	in := containerInput{
		restartCount: 3,
		imageRef:     "sha256:abc",
		env:          env,
		mounts:       []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/vol/data"}},
		res: runtime.ContainerResources{
			Linux:   cgroups.Resources{CPUShares: 512, CPUQuota: 50000, MemoryLimit: 1 << 30, CPUSetCPUs: "1", CPUSetMems: "0"},
			Env:     []corev1.EnvVar{{Name: "DEV", Value: "plugin"}, {Name: "GPU", Value: "0"}},
			Mounts:  []runtime.Mount{{HostPath: "/host/lib", ContainerPath: "/lib/x", ReadOnly: true}},
			Devices: []runtime.Device{{HostPath: "/dev/x0", ContainerPath: "/dev/x", Permissions: "rw"}},
		},
		resources:    true,
		startedAt:    t0,
		backoffDelay: 20 * time.Second,
		lastRestart:  t0,
	}
	got := containerConfig(pod, c, in)
	want := &runtimeapi.ContainerConfig{
		Metadata:   &runtimeapi.ContainerMetadata{Name: "c", Attempt: 3},
		Image:      &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "busybox:1"},
		Command:    []string{"sh", "-c"},
		Args:       []string{"echo a $(B) $(NOPE)"},
		WorkingDir: "/w",
		Envs: []*runtimeapi.KeyValue{
			{Key: "A", Value: []byte("a")}, {Key: "DEV", Value: []byte("mine")}, {Key: "GPU", Value: []byte("0")},
		},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/data", HostPath: "/vol/data"},
			{ContainerPath: "/lib/x", HostPath: "/host/lib", Readonly: true},
		},
		Devices: []*runtimeapi.Device{{ContainerPath: "/dev/x", HostPath: "/dev/x0", Permissions: "rw"}},
		Labels: map[string]string{
			LabelPodName: "web", LabelPodNamespace: "prod", LabelPodUID: "u-1", LabelContainerName: "c", LabelManaged: "true",
		},
		Annotations: map[string]string{
			AnnotationContainerHash:            got.Annotations[AnnotationContainerHash],
			AnnotationRestartCount:             "3",
			AnnotationTerminationMessagePath:   "/dev/termination-log",
			AnnotationTerminationMessagePolicy: "File",
			AnnotationTerminationGracePeriod:   "30",
			AnnotationStartedAt:                "2025-06-01T12:00:00Z",
			AnnotationBackoffDelay:             "20s",
			AnnotationLastRestart:              "2025-06-01T12:00:00Z",
		},
		LogPath: "c/3.log",
		Stdin:   true,
		Tty:     true,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources: &runtimeapi.LinuxContainerResources{
				CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 1 << 30, CpusetCpus: "1", CpusetMems: "0",
			},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				Capabilities:     &runtimeapi.Capability{AddCapabilities: []string{"NET_ADMIN"}, DropCapabilities: []string{"ALL"}},
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
				RunAsUser:        &runtimeapi.Int64Value{Value: 7},
				ReadonlyRootfs:   true,
				NoNewPrivs:       true,
			},
		},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("container config (-want +got):\n%s", diff)
	}
	if got.Annotations[AnnotationContainerHash] == "" {
		t.Error("no hash annotation")
	}

	// Without a decider: no resources; a first run has no last restart;
	// no command keeps the image's.
	c2 := &corev1.Container{Name: "d", Image: "x", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}
	got = containerConfig(pod, c2, containerInput{env: &runtime.Env{}, startedAt: t0})
	if got.Linux.Resources != nil || got.Command != nil || got.Args != nil || got.LogPath != "d/0.log" {
		t.Errorf("config %v", got)
	}
	if _, ok := got.Annotations[AnnotationLastRestart]; ok || got.Annotations[AnnotationContainerPorts] != `[{"containerPort":80}]` {
		t.Errorf("annotations %v", got.Annotations)
	}
}

func TestLinuxResources(t *testing.T) {
	tests := []struct {
		name string
		in   cgroups.Resources
		want *runtimeapi.LinuxContainerResources
	}{
		{name: "nothing", in: cgroups.Resources{}, want: &runtimeapi.LinuxContainerResources{}},
		{
			name: "quota with the default period",
			in:   cgroups.Resources{CPUShares: 2, CPUQuota: 1000},
			want: &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuQuota: 1000, CpuPeriod: 100000},
		},
		{
			name: "quota with a period; no quota means no period",
			in:   cgroups.Resources{CPUQuota: 5000, CPUPeriod: 10000},
			want: &runtimeapi.LinuxContainerResources{CpuQuota: 5000, CpuPeriod: 10000},
		},
		{name: "negative quota and memory are unlimited", in: cgroups.Resources{CPUQuota: -1, MemoryLimit: -1, CPUPeriod: 10000}, want: &runtimeapi.LinuxContainerResources{}},
		{
			name: "cgroup v1 swap",
			in:   cgroups.Resources{MemoryLimit: 100, Swap: map[string]string{swap.MemswLimitFile: "150"}},
			want: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 100, MemorySwapLimitInBytes: 150},
		},
		{
			name: "cgroup v2 swap",
			in:   cgroups.Resources{MemoryLimit: 100, Swap: map[string]string{swap.SwapMaxFile: "0"}},
			want: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 100, Unified: map[string]string{"memory.swap.max": "0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, linuxResources(tt.in), protocmp.Transform()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPullPolicy(t *testing.T) {
	tests := []struct {
		image  string
		policy corev1.PullPolicy
		want   corev1.PullPolicy
	}{
		{image: "busybox", want: corev1.PullAlways},
		{image: "busybox:latest", want: corev1.PullAlways},
		{image: "busybox:1.36", want: corev1.PullIfNotPresent},
		{image: "127.0.0.1:5000/knode/busybox", want: corev1.PullAlways},
		{image: "127.0.0.1:5000/knode/busybox:1", want: corev1.PullIfNotPresent},
		{image: "busybox@sha256:abc", want: corev1.PullIfNotPresent},
		{image: "busybox", policy: corev1.PullNever, want: corev1.PullNever},
	}
	for _, tt := range tests {
		if got := pullPolicy(&corev1.Container{Image: tt.image, ImagePullPolicy: tt.policy}); got != tt.want {
			t.Errorf("pullPolicy(%q, %q) = %q, want %q", tt.image, tt.policy, got, tt.want)
		}
	}
}

// TestNextBackoffAgreesWithPlan drives a Plan through crashes and
// restarts, some after long runs, and checks that nextBackoff predicts,
// before each restart, the back-off the Plan holds after it.
func TestNextBackoffAgreesWithPlan(t *testing.T) {
	cfg := runtime.BackoffConfig{Initial: 10 * time.Second, Max: 40 * time.Second}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
	}
	now := t0
	plan := runtime.NewPlan(pod, now, cfg)
	plan.Started(0, "id", now)
	// How long each run lasts before it crashes.
	runs := []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second, 10 * time.Minute, time.Second, time.Second}
	for n, run := range runs {
		now = now.Add(run)
		plan.Exited(0, 1, runtime.ReasonError, "", now)
		finished := now
		next, ok := plan.NextDue()
		if !ok {
			t.Fatalf("run %d: no restart due", n)
		}
		now = next
		rec := plan.Record(0)
		delay, last := nextBackoff(rec, finished, now, cfg)
		plan.Started(0, "id", now)
		after := plan.Record(0)
		if after.BackoffDelay != delay || !after.LastRestart.Equal(last) {
			t.Fatalf("run %d: predicted %v at %v, plan holds %v at %v", n, delay, last, after.BackoffDelay, after.LastRestart)
		}
	}
}

func TestMountPropagation(t *testing.T) {
	for in, want := range map[corev1.MountPropagationMode]runtimeapi.MountPropagation{
		corev1.MountPropagationNone:            runtimeapi.MountPropagation_PROPAGATION_PRIVATE,
		corev1.MountPropagationHostToContainer: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER,
		corev1.MountPropagationBidirectional:   runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL,
	} {
		if got := mountPropagation(&in); got != want {
			t.Errorf("%s: %v, want %v", in, got, want)
		}
	}
	if got := mountPropagation(nil); got != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
		t.Errorf("nil: %v", got)
	}
}
