package pod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func container(name string, requests, limits v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Image: "x", Resources: v1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func TestQOSClass(t *testing.T) {
	cases := []struct {
		name           string
		containers     []v1.Container
		initContainers []v1.Container
		podResources   *v1.ResourceRequirements
		want           v1.PodQOSClass
	}{
		{name: "nothing requested", containers: []v1.Container{container("a", nil, nil)}, want: v1.PodQOSBestEffort},
		{
			name:       "only other resources",
			containers: []v1.Container{container("a", v1.ResourceList{"ephemeral-storage": q("1Gi")}, v1.ResourceList{"example.com/gpu": q("1")})},
			want:       v1.PodQOSBestEffort,
		},
		{
			name:       "zero quantities do not count",
			containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("0")}, v1.ResourceList{"memory": q("0")})},
			want:       v1.PodQOSBestEffort,
		},
		{name: "requests only", containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("100m")}, nil)}, want: v1.PodQOSBurstable},
		{
			name:       "equal cpu and memory",
			containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")})},
			want:       v1.PodQOSGuaranteed,
		},
		{
			name:       "equal but written differently",
			containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("1000m"), "memory": q("1024Mi")}, v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")})},
			want:       v1.PodQOSGuaranteed,
		},
		{
			name:       "limit on cpu only",
			containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("1")}, v1.ResourceList{"cpu": q("1")})},
			want:       v1.PodQOSBurstable,
		},
		{
			name:       "request below limit",
			containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")}, v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")})},
			want:       v1.PodQOSBurstable,
		},
		{
			name: "one container guaranteed, one best effort",
			containers: []v1.Container{
				container("a", v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}),
				container("b", nil, nil),
			},
			want: v1.PodQOSBurstable,
		},
		{
			name: "init container counts",
			containers: []v1.Container{
				container("a", v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}),
			},
			initContainers: []v1.Container{container("i", v1.ResourceList{"cpu": q("100m")}, nil)},
			want:           v1.PodQOSBurstable,
		},
		{
			name:       "a quantity too large to add is not summed",
			containers: []v1.Container{container("a", v1.ResourceList{"cpu": q("1e99999999"), "memory": q("1")}, v1.ResourceList{"cpu": q("1e99999999"), "memory": q("1")})},
			want:       v1.PodQOSBurstable,
		},
		{
			name:         "pod-level resources decide when set",
			containers:   []v1.Container{container("a", v1.ResourceList{"cpu": q("100m")}, nil)},
			podResources: &v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}, Limits: v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")}},
			want:         v1.PodQOSGuaranteed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1.PodSpec{Containers: tc.containers, InitContainers: tc.initContainers, Resources: tc.podResources}
			if got := QOSClass(spec); got != tc.want {
				t.Errorf("qosClass = %s, want %s", got, tc.want)
			}
		})
	}
}

// Defaulting copies limits into requests, so a pod that names only limits
// for cpu and memory is Guaranteed by the time PrepareForCreate runs.
func TestPrepareForCreateAfterDefault(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{container("a", nil, v1.ResourceList{"cpu": q("1"), "memory": q("1Gi")})}}}
	pod.Status = v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.9", Reason: "Sneaky"}
	defaultPod(pod)
	prepareForCreate(pod)
	want := v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSGuaranteed}
	if diff := cmp.Diff(want, pod.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestPrepareForCreateGated(t *testing.T) {
	pod := newPod()
	pod.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "wait"}}
	prepareForCreate(pod)
	want := v1.PodStatus{
		Phase:    v1.PodPending,
		QOSClass: v1.PodQOSBestEffort,
		Conditions: []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: "SchedulingGated",
			Message: "Scheduling is blocked due to non-empty scheduling gates",
		}},
	}
	if diff := cmp.Diff(want, pod.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestPrepareForStatusUpdate(t *testing.T) {
	old := newPod()
	old.Spec.NodeName = "node-1"
	old.Status = v1.PodStatus{
		Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort, ObservedGeneration: 3,
		Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue, ObservedGeneration: 2}},
	}
	pod := old.DeepCopy()
	pod.Spec.NodeName = "node-2"
	pod.Spec.Containers[0].Image = "changed"
	pod.Status = v1.PodStatus{
		Phase:  v1.PodRunning,
		PodIP:  "10.0.0.5",
		HostIP: "192.168.1.10",
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: v1.ConditionTrue, ObservedGeneration: 4},
		},
	}
	prepareForStatusUpdate(pod, old)

	if diff := cmp.Diff(old.Spec, pod.Spec); diff != "" {
		t.Errorf("spec not kept (-want +got):\n%s", diff)
	}
	want := v1.PodStatus{
		Phase:              v1.PodRunning,
		QOSClass:           v1.PodQOSBestEffort,
		ObservedGeneration: 3,
		PodIP:              "10.0.0.5",
		PodIPs:             []v1.PodIP{{IP: "10.0.0.5"}},
		HostIP:             "192.168.1.10",
		HostIPs:            []v1.HostIP{{IP: "192.168.1.10"}},
		Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, ObservedGeneration: 2},
			{Type: v1.PodReady, Status: v1.ConditionTrue, ObservedGeneration: 4},
		},
	}
	if diff := cmp.Diff(want, pod.Status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	terminated := func(code int32) v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}
	}
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	cases := []struct {
		name string
		old  func(*v1.Pod)
		new  func(*v1.Pod)
		want []string
	}{
		{
			name: "kubelet reports running",
			new: func(p *v1.Pod) {
				p.Status.Phase = v1.PodRunning
				p.Status.PodIP, p.Status.PodIPs = "10.0.0.5", []v1.PodIP{{IP: "10.0.0.5"}, {IP: "fd00::5"}}
				p.Status.HostIP, p.Status.HostIPs = "192.168.1.10", []v1.HostIP{{IP: "192.168.1.10"}}
				p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: "example.com/ready", Status: v1.ConditionTrue}}
				p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: running, Ready: true}}
			},
		},
		{
			name: "unknown phase",
			new:  func(p *v1.Pod) { p.Status.Phase = "Sleeping" },
			want: []string{`status.phase: Unsupported value: "Sleeping": supported values: "Pending", "Running", "Succeeded", "Failed", "Unknown"`},
		},
		{
			name: "bad and empty condition types",
			new: func(p *v1.Pod) {
				p.Status.Conditions = []v1.PodCondition{{Type: ""}, {Type: "bad type!"}}
			},
			// Upstream roots these at metadata.
			want: []string{
				`metadata.conditions[0].Type: Invalid value: "": name part must be non-empty`,
				`metadata.conditions[0].Type: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`metadata.conditions[1].Type: Invalid value: "bad type!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			},
		},
		{
			name: "nodeName change",
			new:  func(p *v1.Pod) { p.Spec.NodeName = "other" },
			want: []string{"status.nodeName: Forbidden: may not be changed directly"},
		},
		{
			name: "nominated node name",
			new:  func(p *v1.Pod) { p.Status.NominatedNodeName = "Bad_Node" },
			want: []string{`status.nominatedNodeName: Invalid value: "Bad_Node": ` + dnsSubdomainMsg},
		},
		{
			name: "qos class is immutable",
			new:  func(p *v1.Pod) { p.Status.QOSClass = v1.PodQOSGuaranteed },
			want: []string{`status.qosClass: Invalid value: "Guaranteed": field is immutable`},
		},
		{
			name: "pod IPs",
			new: func(p *v1.Pod) {
				p.Status.PodIP = "10.0.0.1"
				p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.2"}, {IP: "10.0.0.3"}, {IP: "10.0.0.3"}}
			},
			want: []string{
				"status.podIPs[0].ip: Invalid value: \"10.0.0.2\": must be equal to `podIP`",
				`status.podIPs: Invalid value: [{"ip":"10.0.0.2"},{"ip":"10.0.0.3"},{"ip":"10.0.0.3"}]: may specify no more than one IP for each IP family`,
				`status.podIPs[2]: Duplicate value: {"ip":"10.0.0.3"}`,
			},
		},
		{
			name: "invalid pod IP",
			new: func(p *v1.Pod) {
				p.Status.PodIP = "10.0.0.300"
				p.Status.PodIPs = []v1.PodIP{{IP: "10.0.0.300"}}
			},
			want: []string{`status.podIPs[0]: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`},
		},
		{
			name: "host IP disagreement",
			new: func(p *v1.Pod) {
				p.Status.HostIP = "192.168.1.1"
				p.Status.HostIPs = []v1.HostIP{{IP: "192.168.1.2"}}
			},
			want: []string{"status.hostIPs[0].ip: Invalid value: \"192.168.1.2\": must be equal to `hostIP`"},
		},
		{
			name: "terminated container restarts under Never",
			old: func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: terminated(0)}}
			},
			new:  func(p *v1.Pod) { p.Status.ContainerStatuses[0].State = running },
			want: []string{"status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"},
		},
		{
			name: "failed container restarts under OnFailure",
			old: func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyOnFailure
				p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: terminated(1)}}
			},
			new: func(p *v1.Pod) { p.Status.ContainerStatuses[0].State = running },
		},
		{
			name: "succeeded container restarts under OnFailure",
			old: func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyOnFailure
				p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: terminated(0)}}
			},
			new:  func(p *v1.Pod) { p.Status.ContainerStatuses[0].State = running },
			want: []string{"status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"},
		},
		{
			name: "sidecar restarts under Never",
			old: func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				p.Spec.InitContainers = []v1.Container{{Name: "side", Image: "x", RestartPolicy: ptr(v1.ContainerRestartPolicyAlways)}, {Name: "once", Image: "x"}}
				p.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "side", State: terminated(0)}, {Name: "once", State: terminated(0)}}
			},
			new: func(p *v1.Pod) {
				p.Status.InitContainerStatuses[0].State = running
				p.Status.InitContainerStatuses[1].State = running
			},
			want: []string{"status.initContainerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state"},
		},
		{
			name: "restarts are free under Always",
			old:  func(p *v1.Pod) { p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: terminated(0)}} },
			new:  func(p *v1.Pod) { p.Status.ContainerStatuses[0].State = running },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := newPod()
			old.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort}
			if tc.old != nil {
				tc.old(old)
			}
			pod := old.DeepCopy()
			tc.new(pod)
			got := errStrings(validateStatusUpdate(pod, old))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// The status subresource, end to end through its two functions: a spec
// change is dropped rather than refused.
func TestStatusSubresourceDropsSpecChanges(t *testing.T) {
	old := newPod()
	old.ObjectMeta.CreationTimestamp = metav1.Unix(0, 0)
	old.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort}
	pod := old.DeepCopy()
	pod.Spec.NodeName = "sneaky"
	pod.Status.Phase = v1.PodRunning
	kind := Kind()
	kind.Status.PrepareForUpdate(pod, old)
	if errs := kind.Status.ValidateUpdate(pod, old); len(errs) != 0 {
		t.Fatalf("unexpected errors: %v", errStrings(errs))
	}
	if pod.Spec.NodeName != "" || pod.Status.Phase != v1.PodRunning {
		t.Errorf("nodeName = %q, phase = %q; want \"\" and Running", pod.Spec.NodeName, pod.Status.Phase)
	}
}
