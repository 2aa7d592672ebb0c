package swap

import (
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	podreg "knode/internal/registry/pod"
)

const (
	gi          = int64(1) << 30
	nodeMemory  = 40 * gi // as upstream's TestGenerateLinuxContainerResourcesWithSwap
	nodeSwapCap = 5 * gi
)

// list builds a ResourceList from name=quantity pairs.
func list(pairs ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		l[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return l
}

func ctr(requests, limits corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
}

func podWith(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{Containers: containers}}
}

func TestLimit(t *testing.T) {
	burstable := ctr(list("memory", "1Gi"), list("memory", "2Gi"))
	guaranteed := ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi"))
	withAnnotations := func(a map[string]string) *corev1.Pod {
		p := podWith(burstable)
		p.Annotations = a
		return p
	}
	withPriority := func(p int32) *corev1.Pod {
		pod := podWith(burstable)
		pod.Spec.Priority = ptr.To(p)
		return pod
	}
	withStatus := func(p *corev1.Pod, q corev1.PodQOSClass) *corev1.Pod {
		p.Status.QOSClass = q
		return p
	}
	memOnly := func(request string) *corev1.Pod {
		return podWith(ctr(list("memory", request), nil))
	}
	maxStr := strconv.FormatInt(math.MaxInt64, 10)

	tests := []struct {
		name                string
		pod                 *corev1.Pod
		container           int // index in pod.Spec.Containers
		behavior            string
		nodeMemory, nodeSwp int64
		want                int64
		wantErr             string
	}{
		{name: "NoSwap", pod: podWith(burstable), behavior: NoSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "empty behavior is NoSwap", pod: podWith(burstable), behavior: "", nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "unknown behavior", pod: podWith(burstable), behavior: "UnlimitedSwap", nodeMemory: nodeMemory, nodeSwp: nodeSwapCap,
			wantErr: "unknown swap behavior UnlimitedSwap"},
		{name: "burstable container gets its share", pod: podWith(burstable), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap,
			want: 128 << 20}, // 1Gi/40Gi * 5Gi
		{name: "request without a limit", pod: memOnly("1Gi"), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap,
			want: 128 << 20},
		{name: "limit without a request: request 0 gives 0", pod: podWith(ctr(list("cpu", "1"), list("memory", "1Gi"))), behavior: LimitedSwap,
			nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "second container of the pod", pod: podWith(guaranteed, ctr(list("memory", "4Gi"), list("memory", "8Gi"))), container: 1,
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap, want: 512 << 20},
		{name: "request equals limit in a burstable pod", pod: podWith(ctr(list("memory", "1Gi"), list("memory", "1Gi"))),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "request equals limit in other units", pod: podWith(ctr(list("memory", "1Gi"), list("memory", "1073741824"))),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "no memory request or limit", pod: podWith(burstable, ctr(list("cpu", "1"), nil)), container: 1,
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "zero memory request and limit", pod: podWith(burstable, ctr(list("memory", "0"), list("memory", "0"))), container: 1,
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "guaranteed pod", pod: podWith(guaranteed), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "best-effort pod", pod: podWith(ctr(nil, nil)), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "status qosClass BestEffort wins over the spec", pod: withStatus(podWith(burstable), corev1.PodQOSBestEffort),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "status qosClass Burstable wins over the spec", pod: withStatus(podWith(guaranteed, ctr(list("memory", "1Gi"), list("memory", "3Gi"))), corev1.PodQOSBurstable),
			container: 1, behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap, want: 128 << 20},
		{name: "priority at system-cluster-critical", pod: withPriority(2000000000), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "priority at system-node-critical", pod: withPriority(2000001000), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "priority just below critical", pod: withPriority(1999999999), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap,
			want: 128 << 20},
		{name: "static pod from a file", pod: withAnnotations(map[string]string{"kubernetes.io/config.source": "file"}),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "static pod from http", pod: withAnnotations(map[string]string{"kubernetes.io/config.source": "http"}),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "source api is not static", pod: withAnnotations(map[string]string{"kubernetes.io/config.source": "api"}),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap, want: 128 << 20},
		{name: "mirror pod", pod: withAnnotations(map[string]string{"kubernetes.io/config.mirror": "abc"}),
			behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap},
		{name: "request equals node memory gets all swap", pod: memOnly("40Gi"), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: nodeSwapCap,
			want: nodeSwapCap},
		{name: "request above node memory", pod: memOnly("40Gi"), behavior: LimitedSwap, nodeMemory: nodeMemory - 1, nodeSwp: nodeSwapCap,
			wantErr: "container request 42949672960 is larger than total node memory 42949672959"},
		{name: "node memory 0", pod: podWith(burstable), behavior: LimitedSwap, nodeMemory: 0, nodeSwp: nodeSwapCap,
			wantErr: "total node memory is 0"},
		{name: "negative node memory", pod: podWith(burstable), behavior: LimitedSwap, nodeMemory: -1, nodeSwp: nodeSwapCap,
			wantErr: "total node memory is 0"},
		{name: "node memory 0 for an ineligible pod is no error", pod: podWith(guaranteed), behavior: LimitedSwap, nodeMemory: 0, nodeSwp: nodeSwapCap},
		{name: "node swap 0", pod: podWith(burstable), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: 0},
		{name: "negative node swap", pod: podWith(burstable), behavior: LimitedSwap, nodeMemory: nodeMemory, nodeSwp: -gi},
		{name: "truncates 2/3 toward zero", pod: memOnly("1"), behavior: LimitedSwap, nodeMemory: 3, nodeSwp: 2, want: 0},
		{name: "truncates 4/3 toward zero", pod: memOnly("2"), behavior: LimitedSwap, nodeMemory: 3, nodeSwp: 2, want: 1},
		{name: "milli-bytes round up to whole bytes", pod: memOnly("1500m"), behavior: LimitedSwap, nodeMemory: 4, nodeSwp: 4, want: 2},
		{name: "everything at MaxInt64 does not overflow", pod: memOnly(maxStr), behavior: LimitedSwap,
			nodeMemory: math.MaxInt64, nodeSwp: math.MaxInt64, want: math.MaxInt64},
		{name: "near MaxInt64 stays within node swap", pod: memOnly(strconv.FormatInt(math.MaxInt64-1, 10)), behavior: LimitedSwap,
			nodeMemory: math.MaxInt64, nodeSwp: math.MaxInt64 - 1, want: math.MaxInt64 - 1},
		{name: "float rounding above node swap is capped", pod: memOnly("1Gi"), behavior: LimitedSwap,
			nodeMemory: gi, nodeSwp: 1<<62 - 1, want: 1<<62 - 1}, // float64(2^62-1) rounds up to 2^62
		{name: "huge node, small request", pod: memOnly("1Gi"), behavior: LimitedSwap,
			nodeMemory: 1 << 62, nodeSwp: 1 << 62, want: gi},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.pod.DeepCopy()
			got, err := Limit(tt.pod, &tt.pod.Spec.Containers[tt.container], tt.behavior, tt.nodeMemory, tt.nodeSwp)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("Limit = %d, %q; want %d, %q", got, errString(err), tt.want, tt.wantErr)
			}
			if diff := cmp.Diff(before, tt.pod); diff != "" {
				t.Errorf("Limit changed the pod (-before +after):\n%s", diff)
			}
		})
	}
}

func TestPodQOS(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{name: "no resources", pod: podWith(ctr(nil, nil)), want: corev1.PodQOSBestEffort},
		{name: "no containers", pod: podWith(), want: corev1.PodQOSBestEffort},
		{name: "only other resources", pod: podWith(ctr(list("ephemeral-storage", "1Gi"), list("ephemeral-storage", "1Gi"))), want: corev1.PodQOSBestEffort},
		{name: "zero quantities do not count", pod: podWith(ctr(list("cpu", "0", "memory", "0"), nil)), want: corev1.PodQOSBestEffort},
		{name: "cpu and memory limits equal requests", pod: podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi"))),
			want: corev1.PodQOSGuaranteed},
		{name: "limits only (requests default to them)", pod: podWith(ctr(nil, list("cpu", "1", "memory", "1Gi"))), want: corev1.PodQOSBurstable},
		{name: "memory limit missing", pod: podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1"))), want: corev1.PodQOSBurstable},
		{name: "cpu only, request equals limit", pod: podWith(ctr(list("cpu", "1"), list("cpu", "1"))), want: corev1.PodQOSBurstable},
		{name: "request below limit", pod: podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "2Gi"))), want: corev1.PodQOSBurstable},
		{name: "two guaranteed containers", pod: podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")),
			ctr(list("cpu", "2", "memory", "2Gi"), list("cpu", "2", "memory", "2Gi"))), want: corev1.PodQOSGuaranteed},
		{name: "second container's request below its limit", pod: podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")),
			ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "2", "memory", "1Gi"))), want: corev1.PodQOSBurstable},
		{name: "guaranteed plus best-effort container", pod: podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")), ctr(nil, nil)),
			want: corev1.PodQOSBurstable},
		{name: "burstable init container", pod: func() *corev1.Pod {
			p := podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")))
			p.Spec.InitContainers = []corev1.Container{ctr(list("memory", "1Gi"), nil)}
			return p
		}(), want: corev1.PodQOSBurstable},
		{name: "pod-level resources guaranteed", pod: func() *corev1.Pod {
			p := podWith(ctr(nil, nil))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "1Gi"), Limits: list("cpu", "1", "memory", "1Gi")}
			return p
		}(), want: corev1.PodQOSGuaranteed},
		{name: "pod-level requests only", pod: func() *corev1.Pod {
			p := podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")))
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: list("memory", "1Gi")}
			return p
		}(), want: corev1.PodQOSBurstable},
		{name: "pod-level hugepages only: containers decide", pod: func() *corev1.Pod {
			p := podWith(ctr(list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi")))
			p.Spec.Resources = &corev1.ResourceRequirements{Limits: list("hugepages-2Mi", "2Mi")}
			return p
		}(), want: corev1.PodQOSGuaranteed},
		{name: "status wins", pod: withQOS(podWith(ctr(nil, nil)), corev1.PodQOSGuaranteed), want: corev1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		if got := podreg.PodQOS(tt.pod); got != tt.want {
			t.Errorf("%s: PodQOS = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func withQOS(p *corev1.Pod, q corev1.PodQOSClass) *corev1.Pod {
	p.Status.QOSClass = q
	return p
}
