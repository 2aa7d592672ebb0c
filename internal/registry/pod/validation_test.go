package pod

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestValidateCreate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1.Pod)
		want   []string
	}{
		{name: "minimal pod is valid", mutate: func(*v1.Pod) {}},
		{
			name: "pod with the usual trimmings is valid",
			mutate: func(p *v1.Pod) {
				p.Spec.NodeName = "node-1"
				p.Spec.HostNetwork = true
				p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
				p.Spec.ServiceAccountName = "default"
				p.Spec.PriorityClassName = "system-node-critical"
				p.Spec.ActiveDeadlineSeconds = ptr(int64(60))
				p.Spec.TerminationGracePeriodSeconds = ptr(int64(-5)) // accepted, as upstream
				p.Spec.Tolerations = []v1.Toleration{
					{Operator: v1.TolerationOpExists},
					{Key: "node.kubernetes.io/not-ready", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
					{Key: "dedicated", Value: "gpu", Effect: v1.TaintEffectNoSchedule},
				}
				p.Spec.Volumes = []v1.Volume{
					{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
					{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
					{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/p"}}},
				}
				c := &p.Spec.Containers[0]
				c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 8080, Protocol: v1.ProtocolTCP}}
				c.Env = []v1.EnvVar{{Name: "my.var-1", Value: "x"}, {Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}}
				c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true}}
				c.Resources = v1.ResourceRequirements{
					Limits:   v1.ResourceList{"cpu": q("1"), "memory": q("1Gi"), "example.com/gpu": q("1")},
					Requests: v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi"), "example.com/gpu": q("1")},
				}
				c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromString("http"), Scheme: v1.URISchemeHTTP}}, SuccessThreshold: 1}
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
					NodeSelectorTerms: []v1.NodeSelectorTerm{{
						MatchExpressions: []v1.NodeSelectorRequirement{
							{Key: "zone", Operator: v1.NodeSelectorOpIn, Values: []string{"a", "b"}},
							{Key: "gpu", Operator: v1.NodeSelectorOpExists},
							{Key: "cores", Operator: v1.NodeSelectorOpGt, Values: []string{"4"}},
						},
						MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}},
					}},
				}}}
				p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox", TerminationMessagePolicy: v1.TerminationMessageReadFile, ImagePullPolicy: v1.PullIfNotPresent}}
			},
		},

		// Containers.
		{
			name:   "no containers",
			mutate: func(p *v1.Pod) { p.Spec.Containers = nil },
			want:   []string{"spec.containers: Required value"},
		},
		{
			name:   "container name not a DNS label",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Name = "Web_1" },
			want:   []string{`spec.containers[0].name: Invalid value: "Web_1": ` + dnsLabelMsg},
		},
		{
			name:   "container name missing",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Name = "" },
			want:   []string{"spec.containers[0].name: Required value"},
		},
		{
			name: "duplicate container names",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
			},
			want: []string{`spec.containers[1].name: Duplicate value: "c"`},
		},
		{
			name: "init container reuses a container name",
			mutate: func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{p.Spec.Containers[0]}
			},
			want: []string{`spec.initContainers[0].name: Duplicate value: "c"`},
		},
		{
			name:   "image missing",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "" },
			want:   []string{"spec.containers[0].image: Required value"},
		},
		{
			name:   "image with surrounding whitespace",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = " nginx" },
			want:   []string{`spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace`},
		},
		{
			name:   "unknown pull policy",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			want:   []string{`spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"`},
		},
		{
			name:   "unknown termination message policy",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].TerminationMessagePolicy = "Maybe" },
			want:   []string{`spec.containers[0].terminationMessagePolicy: Unsupported value: "Maybe": supported values: "File", "FallbackToLogsOnError"`},
		},
		{
			name: "regular container with restartPolicy",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].RestartPolicy = ptr(v1.ContainerRestartPolicyAlways)
			},
			want: []string{"spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"},
		},
		{
			name: "init container restartPolicy other than Always",
			mutate: func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always", RestartPolicy: ptr(v1.ContainerRestartPolicy("Never"))}}
			},
			want: []string{`spec.initContainers[0].restartPolicy: Unsupported value: "Never": supported values: "Always"`},
		},
		{
			name: "probes on a plain init container",
			mutate: func(p *v1.Pod) {
				probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 1}
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always", ReadinessProbe: probe}}
			},
			want: []string{"spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always"},
		},
		{
			name: "probes on a sidecar are validated, not refused",
			mutate: func(p *v1.Pod) {
				probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, SuccessThreshold: 2}
				p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always", RestartPolicy: ptr(v1.ContainerRestartPolicyAlways), LivenessProbe: probe}}
			},
			want: []string{"spec.initContainers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"},
		},
		{
			name: "probe with two handlers and none",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{
					Exec:      &v1.ExecAction{},
					TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(0)},
				}, TerminationGracePeriodSeconds: ptr(int64(5))}
				p.Spec.Containers[0].StartupProbe = &v1.Probe{SuccessThreshold: 1}
			},
			want: []string{
				"spec.containers[0].readinessProbe.exec.command: Required value",
				"spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
				"spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes",
				"spec.containers[0].startupProbe: Required value: must specify a handler type",
			},
		},
		{
			name: "httpGet probe with bad port and scheme",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(70000), Scheme: "FTP"}}, SuccessThreshold: 1}
			},
			want: []string{
				"spec.containers[0].livenessProbe.httpGet.port: Invalid value: 70000: must be between 1 and 65535, inclusive",
				`spec.containers[0].livenessProbe.httpGet.scheme: Unsupported value: "FTP": supported values: "HTTP", "HTTPS"`,
			},
		},
		{
			name: "preStop sleep longer than the grace period",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 31}}}
			},
			want: []string{"spec.containers[0].lifecycle.preStop.sleep: Invalid value: 31: must be non-negative and less than terminationGracePeriodSeconds (30)"},
		},

		// Ports.
		{
			name: "port rules",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{
					{Name: "web", ContainerPort: 0, Protocol: v1.ProtocolTCP},
					{Name: "web", ContainerPort: 70000, HostPort: -1, Protocol: "ICMP"},
					{Name: "Http_1", ContainerPort: 80},
				}
			},
			want: []string{
				"spec.containers[0].ports[0].containerPort: Required value",
				`spec.containers[0].ports[1].name: Duplicate value: "web"`,
				"spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
				"spec.containers[0].ports[1].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive",
				`spec.containers[0].ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
				`spec.containers[0].ports[2].name: Invalid value: "Http_1": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`,
				"spec.containers[0].ports[2].protocol: Required value",
			},
		},
		{
			name: "host port conflict across containers",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: "TCP"}}
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "x", TerminationMessagePolicy: "File", ImagePullPolicy: "Always",
					Ports: []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080, Protocol: "TCP"}}})
			},
			want: []string{`spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"`},
		},
		{
			name: "hostNetwork needs hostPort equal to containerPort",
			mutate: func(p *v1.Pod) {
				p.Spec.HostNetwork = true
				p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 81, Protocol: "TCP"}}
			},
			want: []string{"spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` when `hostNetwork` is true"},
		},

		// Env.
		{
			name: "env rules",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Env = []v1.EnvVar{
					{Name: ""},
					{Name: "A=B"},
					{Name: "X", ValueFrom: &v1.EnvVarSource{}},
					{Name: "Y", Value: "v", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"}}},
					{Name: "Z", ValueFrom: &v1.EnvVarSource{
						SecretKeyRef:    &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}, Key: "k"},
						ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "c"}},
					}},
					{Name: "F", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.phase"}}},
				}
			},
			want: []string{
				"spec.containers[0].env[0].name: Required value",
				`spec.containers[0].env[1].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '='`,
				"spec.containers[0].env[2].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
				"spec.containers[0].env[3].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
				"spec.containers[0].env[4].valueFrom.configMapKeyRef.key: Required value",
				"spec.containers[0].env[4].valueFrom: Invalid value: \"\": may not have more than one field specified at a time",
				`spec.containers[0].env[5].valueFrom.fieldRef.fieldPath: Unsupported value: "status.phase": supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"`,
			},
		},
		{
			name: "env resource selector",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Env = []v1.EnvVar{
					{Name: "A", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.gpu"}}},
					{Name: "B", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: q("1k")}}},
					{Name: "C", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v2", FieldPath: "metadata.name"}}},
				}
			},
			want: []string{
				`spec.containers[0].env[0].valueFrom.resourceFieldRef.resource: Unsupported value: "limits.gpu": supported values: "limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu", "requests.ephemeral-storage", "requests.memory"`,
				`spec.containers[0].env[1].valueFrom.resourceFieldRef.divisor: Invalid value: "limits.cpu": only divisor's values 1m and 1 are supported with the cpu resource`,
				`spec.containers[0].env[2].valueFrom.fieldRef.fieldPath: Invalid value: "metadata.name": error converting fieldPath: unsupported pod version: v2`,
			},
		},
		{
			name: "envFrom without a source",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{Prefix: "P_"}}
			},
			want: []string{"spec.containers[0].envFrom: Invalid value: \"\": must specify one of: `configMapRef` or `secretRef`"},
		},

		// Resources.
		{
			name: "request above limit",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{
					Limits:   v1.ResourceList{"cpu": q("500m"), "memory": q("1Gi")},
					Requests: v1.ResourceList{"cpu": q("1"), "memory": q("2Gi")},
				}
			},
			want: []string{
				`spec.containers[0].resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 500m`,
				`spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi`,
			},
		},
		{
			name: "negative quantities and unknown names",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{
					Limits:   v1.ResourceList{"cpu": q("-1"), "foo": q("1"), "pods": q("1")},
					Requests: v1.ResourceList{"memory": q("-1Mi")},
				}
			},
			want: []string{
				`spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0`,
				`spec.containers[0].resources.limits[foo]: Invalid value: "foo": must be a standard resource type or fully qualified`,
				`spec.containers[0].resources.limits[foo]: Invalid value: "foo": must be a standard resource for containers`,
				`spec.containers[0].resources.limits[pods]: Invalid value: "pods": must be a standard resource for containers`,
				`spec.containers[0].resources.requests[memory]: Invalid value: "-1Mi": must be greater than or equal to 0`,
			},
		},
		{
			name: "extended resources are whole and not overcommitted",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{
					Limits:   v1.ResourceList{"example.com/gpu": q("500m")},
					Requests: v1.ResourceList{"example.com/gpu": q("1"), "example.com/fpga": q("1")},
				}
			},
			want: []string{
				`spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer`,
				"spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
				`spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 500m`,
			},
		},
		{
			name: "resize policy",
			mutate: func(p *v1.Pod) {
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: v1.RestartContainer}, {ResourceName: "gpu", RestartPolicy: v1.NotRequired}}
			},
			want: []string{
				`spec.containers[0].resizePolicy: Invalid value: "RestartContainer": must be 'NotRequired' when ` + "`restartPolicy`" + ` is 'Never'`,
				`spec.containers[0].resizePolicy: Unsupported value: "gpu": supported values: "cpu", "memory"`,
			},
		},

		{
			name: "quantities too large to work with",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{
					Limits:   v1.ResourceList{"cpu": q("1e99999999"), "ephemeral-storage": q("1e40"), "memory": q("1e39")},
					Requests: v1.ResourceList{"cpu": q("1"), "memory": q("9999999999999999999999999999999999999999")},
				}
				p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr(q("-1e50"))}}}}
				p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("1e41")}}
			},
			want: []string{
				"spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity",
				"spec.containers[0].resources.limits[cpu]: Invalid value: must be less than 1e40",
				"spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: must be less than 1e40",
				// 40 nines is just below the bound, so it is still compared.
				`spec.containers[0].resources.requests: Invalid value: "9999999999999999999999999999999999999999": must be less than or equal to memory limit of 1e39`,
				"spec.resources.limits[cpu]: Invalid value: must be less than 1e40",
				"spec.volumes[0].emptyDir.sizeLimit: Invalid value: must be less than 1e40",
			},
		},

		// Volumes and mounts.
		{
			name: "volume name rules",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{
					{Name: "", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
					{Name: "Data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
					{Name: "x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
					{Name: "x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				}
			},
			want: []string{
				"spec.volumes[0].name: Required value",
				`spec.volumes[1].name: Invalid value: "Data": ` + dnsLabelMsg,
				`spec.volumes[3].name: Duplicate value: "x"`,
			},
		},
		{
			name: "volume with two sources or none",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{
					{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
					{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}, DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
					{Name: "c"},
				}
			},
			want: []string{
				"spec.volumes[0].hostPath: Forbidden: may not specify more than 1 volume type",
				// Upstream's spelling.
				"spec.volumes[1].downwarAPI: Forbidden: may not specify more than 1 volume type",
				"spec.volumes[2]: Required value: must specify a volume type",
			},
		},
		{
			name: "volume source shapes",
			mutate: func(p *v1.Pod) {
				bad := int32(01000)
				p.Spec.Volumes = []v1.Volume{
					{Name: "a", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x/../y", Type: ptr(v1.HostPathType("Pipe"))}}},
					{Name: "b", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{DefaultMode: &bad, Items: []v1.KeyToPath{{Key: "k", Path: "/abs"}}}}},
					{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
					{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}},
					{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr(q("-1"))}}},
					{Name: "f", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{}}},
				}
			},
			want: []string{
				`spec.volumes[0].hostPath.path: Invalid value: "/x/../y": must not contain '..'`,
				`spec.volumes[0].hostPath.type: Unsupported value: "Pipe": supported values: "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"`,
				"spec.volumes[1].secret.secretName: Required value",
				"spec.volumes[1].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
				`spec.volumes[1].secret.items[0].path: Invalid value: "/abs": must be a relative path`,
				"spec.volumes[2].configMap.name: Required value",
				"spec.volumes[3].persistentVolumeClaim.claimName: Required value",
				"spec.volumes[4].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity",
				"spec.volumes[5].hostPath.path: Required value",
			},
		},
		{
			name: "downward API and projected volumes",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{
					{Name: "a", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
						{Path: "n", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}},
						{Path: "m"},
					}}}},
					{Name: "b", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
						{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t", ExpirationSeconds: ptr(int64(60))}},
						{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}, ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}},
					}}}},
				}
			},
			want: []string{
				`spec.volumes[0].downwardAPI.fieldRef.fieldPath: Unsupported value: "spec.nodeName": supported values: "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"`,
				"spec.volumes[0].downwardAPI: Required value: one of fieldRef and resourceFieldRef is required",
				"spec.volumes[1].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
				"spec.volumes[1].projected.sources[1]: Forbidden: may not specify more than 1 volume type per source",
				"spec.volumes[1].projected.sources[0].serviceAccountToken: Forbidden: must not be specified when serviceAccountName is not set",
			},
		},
		{
			name: "volume mount rules",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
				p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
					{Name: "x", MountPath: "/x"},
					{Name: "data"},
					{Name: "data", MountPath: "/x", SubPath: "../up"},
					{Name: "data", MountPath: "/y", MountPropagation: ptr(v1.MountPropagationBidirectional)},
				}
			},
			want: []string{
				`spec.containers[0].volumeMounts[0].name: Not found: "x"`,
				"spec.containers[0].volumeMounts[1].mountPath: Required value",
				`spec.containers[0].volumeMounts[2].mountPath: Invalid value: "/x": must be unique`,
				`spec.containers[0].volumeMounts.subPath: Invalid value: "../up": must not contain '..'`,
				"spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
			},
		},

		// Pod-level fields.
		{
			name:   "unknown restart policy",
			mutate: func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			want:   []string{`spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`},
		},
		{
			name:   "unknown DNS policy",
			mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = "Google" },
			want:   []string{`spec.dnsPolicy: Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`},
		},
		{
			name:   "DNS policy None without config",
			mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone },
			want:   []string{"spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"},
		},
		{
			name: "DNS config",
			mutate: func(p *v1.Pod) {
				p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "x"}, Searches: []string{"ns.svc.", ".", "my_zone.local", "-bad"}, Options: []v1.PodDNSConfigOption{{}}}
			},
			want: []string{
				`spec.dnsConfig.nameservers: Invalid value: ["1.1.1.1","8.8.8.8","9.9.9.9","x"]: must not have more than 3 nameservers`,
				`spec.dnsConfig.nameservers[3]: Invalid value: "x": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`,
				`spec.dnsConfig.searches[3]: Invalid value: "-bad": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '_', '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '_?[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\._?[a-z0-9]([-_a-z0-9]*[a-z0-9])?)*')`,
				"spec.dnsConfig.options[0]: Required value: must not be empty",
			},
		},
		{
			name:   "activeDeadlineSeconds must be positive",
			mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr(int64(0)) },
			want:   []string{"spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"},
		},
		{
			name:   "terminationGracePeriodSeconds missing",
			mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil },
			want:   []string{"spec.terminationGracePeriodSeconds: Required value"},
		},
		{
			name:   "nodeSelector key and value",
			mutate: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"k": "bad value"} },
			want:   []string{`spec.nodeSelector: Invalid value: "bad value": ` + labelValueMsg},
		},
		{
			name:   "nodeName not a DNS subdomain",
			mutate: func(p *v1.Pod) { p.Spec.NodeName = "Node_1" },
			want:   []string{`spec.nodeName: Invalid value: "Node_1": ` + dnsSubdomainMsg},
		},
		{
			name: "name-like fields",
			mutate: func(p *v1.Pod) {
				p.Spec.ServiceAccountName = "Bad_SA"
				p.Spec.Hostname = "host.name"
				p.Spec.PriorityClassName = "Bad_Name"
				p.Spec.RuntimeClassName = ptr("Bad_RC")
			},
			want: []string{
				`spec.serviceAccountName: Invalid value: "Bad_SA": ` + dnsSubdomainMsg,
				`spec.hostname: Invalid value: "host.name": must not contain dots`,
				`spec.priorityClassName: Invalid value: "Bad_Name": ` + dnsSubdomainMsg,
				`spec.runtimeClassName: Invalid value: "Bad_RC": ` + dnsSubdomainMsg,
			},
		},
		{
			name: "preemption policy, overhead and os",
			mutate: func(p *v1.Pod) {
				p.Spec.PreemptionPolicy = ptr(v1.PreemptionPolicy("Sometimes"))
				p.Spec.Overhead = v1.ResourceList{"cpu": q("-1")}
				p.Spec.OS = &v1.PodOS{Name: "plan9"}
			},
			want: []string{
				`spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"`,
				`spec.overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0`,
				`spec.os.name: Unsupported value: "plan9": supported values: "linux", "windows"`,
			},
		},

		// Tolerations.
		{
			name: "toleration rules",
			mutate: func(p *v1.Pod) {
				p.Spec.Tolerations = []v1.Toleration{
					{Operator: v1.TolerationOpEqual, Value: "v"},
					{Key: "a", Operator: v1.TolerationOpExists, Value: "x"},
					{Key: "b", Operator: "In", Effect: "NoAdmit"},
					{Key: "c", Effect: v1.TaintEffectNoSchedule, TolerationSeconds: ptr(int64(10))},
					{Key: "d", Value: "bad value"},
					{Key: "bad key!", Operator: v1.TolerationOpExists},
				}
			},
			want: []string{
				"spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
				"spec.tolerations[1].operator: Invalid value: \"x\": value must be empty when `operator` is 'Exists'",
				`spec.tolerations[2].operator: Unsupported value: "In": supported values: "Equal", "Exists"`,
				`spec.tolerations[2].effect: Unsupported value: "NoAdmit": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`,
				"spec.tolerations[3].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
				`spec.tolerations[4].operator: Invalid value: "bad value": ` + labelValueMsg,
				`spec.tolerations[5].key: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			},
		},

		// Affinity.
		{
			name: "node affinity operators and value counts",
			mutate: func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
					NodeSelectorTerms: []v1.NodeSelectorTerm{{
						MatchExpressions: []v1.NodeSelectorRequirement{
							{Key: "a", Operator: "Near"},
							{Key: "b", Operator: v1.NodeSelectorOpIn},
							{Key: "c", Operator: v1.NodeSelectorOpLt, Values: []string{"1", "2"}},
							{Key: "d", Operator: v1.NodeSelectorOpDoesNotExist, Values: []string{"x"}},
							{Key: "e", Operator: v1.NodeSelectorOpNotIn, Values: []string{"bad value"}},
						},
						MatchFields: []v1.NodeSelectorRequirement{
							{Key: "metadata.uid", Operator: v1.NodeSelectorOpIn, Values: []string{"n"}},
							{Key: "metadata.name", Operator: v1.NodeSelectorOpExists},
						},
					}},
				}}}
			},
			want: []string{
				`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`,
				"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
				"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[2].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
				"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[3].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
				`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[4].values[0]: Invalid value: "bad value": ` + labelValueMsg,
				`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key: Invalid value: "metadata.uid": not a valid field selector key`,
				`spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[1].operator: Invalid value: "Exists": not a valid selector operator`,
			},
		},
		{
			name: "empty required node selector and bad preferred weight",
			mutate: func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  &v1.NodeSelector{},
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 0, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "e", Operator: v1.NodeSelectorOpIn, Values: []string{"bad value"}}}}}},
				}}
			},
			want: []string{
				"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: Required value: must have at least one node selector term",
				"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
			},
		},
		{
			name: "pod anti-affinity term",
			mutate: func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Namespaces:    []string{"Bad_NS"},
				}}}}
			},
			want: []string{
				`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespace: Invalid value: "Bad_NS": ` + dnsLabelMsg,
				"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
				`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: "": name part must be non-empty`,
				`spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: "": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
			},
		},

		// Security contexts and host namespaces.
		{
			name: "security context ids and conflicts",
			mutate: func(p *v1.Pod) {
				p.Spec.HostPID = true
				p.Spec.ShareProcessNamespace = ptr(true)
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr(int64(-1)), Sysctls: []v1.Sysctl{{Name: "net.core.somaxconn"}, {Name: "net.core.somaxconn"}, {Name: "Bad"}}}
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr(true), AllowPrivilegeEscalation: ptr(false), ProcMount: ptr(v1.UnmaskedProcMount)}
			},
			want: []string{
				"spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`",
				`spec.containers[0].securityContext: Invalid value: {"privileged":true,"allowPrivilegeEscalation":false,"procMount":"Unmasked"}: cannot set ` + "`allowPrivilegeEscalation` to false and `privileged` to true",
				"spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
				"spec.securityContext.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
				`spec.securityContext.sysctls[1].name: Duplicate value: "net.core.somaxconn"`,
				`spec.securityContext.sysctls[2].name: Invalid value: "Bad": must have at most 253 characters and match regex ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`,
			},
		},
		{
			name: "own user namespace with host namespaces",
			mutate: func(p *v1.Pod) {
				p.Spec.HostUsers = ptr(false)
				p.Spec.HostNetwork = true
				p.Spec.HostIPC = true
			},
			want: []string{
				"spec.hostNetwork: Forbidden: when `pod.Spec.HostUsers` is false",
				"spec.HostIPC: Forbidden: when `pod.Spec.HostUsers` is false",
			},
		},

		// Gates, annotations, create-only rules.
		{
			name: "readiness and scheduling gates",
			mutate: func(p *v1.Pod) {
				p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "bad type!"}}
				p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}, {Name: "example.com/wait"}}
				p.Spec.NodeName = "node-1"
			},
			want: []string{
				`spec.readinessGates[0].conditionType: Invalid value: "bad type!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`spec.schedulingGates[1]: Duplicate value: "example.com/wait"`,
				"spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared",
			},
		},
		{
			name: "ephemeral containers cannot be set on create",
			mutate: func(p *v1.Pod) {
				p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
			},
			want: []string{"spec.ephemeralContainers: Forbidden: cannot be set on create"},
		},
		{
			name: "mirror pod annotation needs nodeName",
			mutate: func(p *v1.Pod) {
				p.Annotations = map[string]string{v1.MirrorPodAnnotationKey: "abc"}
			},
			want: []string{`metadata.annotations[kubernetes.io/config.mirror]: Invalid value: "abc": must set spec.nodeName if mirror pod annotation is set`},
		},
		{
			name: "pod deletion cost must be an int32",
			mutate: func(p *v1.Pod) {
				p.Annotations = map[string]string{v1.PodDeletionCost: "+10"}
			},
			want: []string{`metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: "+10": must be a 32bit integer`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod()
			tc.mutate(pod)
			got := errStrings(validateCreate(pod))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidDeletionCost(t *testing.T) {
	cases := map[string]bool{
		"0": true, "10": true, "-10": true, "2147483647": true, "-2147483648": true,
		"": false, "+10": false, "010": false, "2147483648": false, "1.5": false, "abc": false,
	}
	for value, want := range cases {
		if got := validDeletionCost(map[string]string{v1.PodDeletionCost: value}); got != want {
			t.Errorf("validDeletionCost(%q) = %v, want %v", value, got, want)
		}
	}
	if !validDeletionCost(nil) {
		t.Error("validDeletionCost(no annotation) = false, want true")
	}
}

// Every error a create produces names a field under metadata or spec, so a
// client can point at what to fix.
func TestValidateCreateErrorPathsAreRooted(t *testing.T) {
	pod := newPod()
	pod.Spec.Containers[0].Name = ""
	pod.Spec.RestartPolicy = "x"
	for _, e := range validateCreate(pod) {
		if !strings.HasPrefix(e.Field, "spec.") && !strings.HasPrefix(e.Field, "metadata.") {
			t.Errorf("error path %q is not rooted at the object", e.Field)
		}
	}
}
