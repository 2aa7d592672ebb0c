package pod

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// fuzzSeeds are pod manifests that reach most branches: containers of every
// kind, volumes, probes, affinity, tolerations and a busy status.
var fuzzSeeds = []string{
	`{}`,
	`{"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"cpu":"1e99999999","memory":"1"},"requests":{"cpu":"1"}}}],
	  "overhead":{"memory":"9e999999"},"resources":{"limits":{"cpu":"1e999999"}},"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1e9999999"}}]}}`,
	`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`,
	`{"metadata":{"name":"p","annotations":{"kubernetes.io/config.mirror":"x","controller.kubernetes.io/pod-deletion-cost":"-3"}},
	  "spec":{"nodeName":"n","hostNetwork":true,"terminationGracePeriodSeconds":-4,"activeDeadlineSeconds":0,
	  "schedulingGates":[{"name":"g"}],"readinessGates":[{"conditionType":"x/y"}],
	  "initContainers":[{"name":"side","image":"x","restartPolicy":"Always","startupProbe":{"grpc":{"port":9}}},{"name":"i","image":"busybox@sha256:abc"}],
	  "containers":[{"name":"c","image":"nginx:latest","ports":[{"containerPort":80,"hostPort":81,"protocol":"SCTP","name":"h"}],
	    "env":[{"name":"A","valueFrom":{"fieldRef":{"fieldPath":"metadata.labels['x']"},"resourceFieldRef":{"resource":"limits.cpu","divisor":"1m"}}}],
	    "envFrom":[{"configMapRef":{"name":"c"},"secretRef":{"name":"s"}}],
	    "resources":{"limits":{"cpu":"1","memory":"1Gi","hugepages-2Mi":"2Mi","example.com/x":"1"},"requests":{"cpu":"2"}},
	    "resizePolicy":[{"resourceName":"cpu","restartPolicy":"RestartContainer"}],
	    "volumeMounts":[{"name":"v","mountPath":"/v","subPathExpr":"$(X)","recursiveReadOnly":"Enabled"}],
	    "volumeDevices":[{"name":"v","devicePath":"/v"}],
	    "livenessProbe":{"httpGet":{"port":"http","httpHeaders":[{"name":"bad header","value":""}]}},
	    "lifecycle":{"preStop":{"sleep":{"seconds":-1}}},
	    "securityContext":{"procMount":"Unmasked","allowPrivilegeEscalation":false,"capabilities":{"add":["CAP_SYS_ADMIN"]},"seccompProfile":{"type":"Localhost"}}}],
	  "volumes":[{"name":"v","projected":{"sources":[{"serviceAccountToken":{"path":"t"}},{"downwardAPI":{"items":[{"path":"t","resourceFieldRef":{"resource":"limits.memory"}}]}}]}},
	    {"name":"w"},{"name":"h","hostPath":{"path":"/x","type":"Socket"},"nfs":{"server":"s","path":"/"}}],
	  "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Gt","values":["1"]}],"matchFields":[{"key":"metadata.name","operator":"In","values":["n"]}]}]}},
	    "podAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":101,"podAffinityTerm":{"topologyKey":"z","labelSelector":{"matchExpressions":[{"key":"a","operator":"In"}]}}}]}},
	  "tolerations":[{"operator":"Exists"},{"key":"k","effect":"NoExecute","tolerationSeconds":5}],
	  "dnsPolicy":"None","dnsConfig":{"nameservers":["::1"],"searches":["."]},
	  "securityContext":{"sysctls":[{"name":"kernel.shm_rmid_forced","value":"1"}],"fsGroupChangePolicy":"Always"},
	  "overhead":{"cpu":"100m"},"os":{"name":"linux"},"hostUsers":false},
	 "status":{"phase":"Running","reason":"NodeLost","podIP":"10.0.0.1","podIPs":[{"ip":"10.0.0.2"},{"ip":"fd00::1"}],"hostIPs":[{"ip":"1.2.3.4"},{"ip":"1.2.3.4"}],
	  "conditions":[{"type":"Ready","status":"True"},{"type":"Initialized","status":"False"},{"type":"PodScheduled","reason":"SchedulingGated"}],
	  "initContainerStatuses":[{"name":"side","started":true,"ready":true,"state":{"running":{}},"restartCount":2,"lastState":{"terminated":{"finishedAt":"2024-01-01T00:00:00Z"}}},
	    {"name":"i","state":{"terminated":{"exitCode":1,"signal":9}}}],
	  "containerStatuses":[{"name":"c","state":{"terminated":{"reason":"Completed"}}},{"name":"d","ready":true,"state":{"running":{}}}]}}`,
}

// longExponent finds quantities like "1e-99999999". Decoding one takes
// minutes inside apimachinery's ParseQuantity, before any code of this
// package runs, so such inputs are skipped rather than left to stall the
// fuzzer. (Large positive exponents decode quickly and are kept: this
// package must stay fast on them.)
var longExponent = regexp.MustCompile(`[eE]-[0-9]{5,}`)

func decodeFuzzPod(data []byte) (*v1.Pod, bool) {
	if longExponent.Match(data) {
		return nil, false
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(data, pod); err != nil {
		return nil, false
	}
	return pod, true
}

// FuzzValidatePod feeds arbitrary JSON through every Kind function in the
// order the REST layer calls them. Nothing may panic.
func FuzzValidatePod(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	k := Kind()
	f.Fuzz(func(t *testing.T, data []byte) {
		pod, ok := decodeFuzzPod(data)
		if !ok {
			return
		}
		old := pod.DeepCopy()

		k.Default(pod)
		k.PrepareForCreate(pod)
		_ = k.Validate(pod)

		// An update to itself, and an update from the raw input.
		same := pod.DeepCopy()
		k.Default(same)
		k.PrepareForUpdate(same, pod)
		_ = k.ValidateUpdate(same, pod)
		k.Default(old)
		_ = k.ValidateUpdate(pod.DeepCopy(), old)

		// The status subresource.
		st := old.DeepCopy()
		k.Status.PrepareForUpdate(st, pod)
		_ = k.Status.ValidateUpdate(st, pod)

		_ = k.DeleteGracePeriod(old, nil)
		_ = k.DeleteGracePeriod(old, old.Spec.TerminationGracePeriodSeconds)
		_ = k.Fields(old)
		_ = k.Row(old, time.Unix(1_700_000_000, 0))
	})
}

// FuzzPodTable checks the printer on arbitrary pods: one string cell per
// column, and a non-empty STATUS.
func FuzzPodTable(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), int64(0))
	}
	f.Add([]byte(`{"metadata":{"creationTimestamp":"2030-01-01T00:00:00Z","deletionTimestamp":"2030-01-01T00:00:00Z"},"status":{"phase":"Pending"}}`), int64(-1<<40))
	f.Fuzz(func(t *testing.T, data []byte, offset int64) {
		pod, ok := decodeFuzzPod(data)
		if !ok {
			return
		}
		cells := row(pod, time.Unix(1_700_000_000, 0).Add(time.Duration(offset)))
		if len(cells) != len(columns) {
			t.Fatalf("%d cells for %d columns", len(cells), len(columns))
		}
		for i, c := range cells {
			if _, ok := c.(string); !ok {
				t.Fatalf("cell %d (%s) is %T, want string", i, columns[i].Name, c)
			}
		}
		if pod.Status.Phase != "" && cells[2] == "" {
			t.Fatalf("empty STATUS for phase %q", pod.Status.Phase)
		}
	})
}
