package swap

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"
)

// SystemCriticalPriority is the priority of system-cluster-critical
// (2000000000). A pod at or above it is critical and never gets swap.
const SystemCriticalPriority int32 = 2000000000

// The annotations upstream's IsCriticalPod reads: a pod whose config source
// is not the API server is a static pod; a pod with the mirror annotation is
// the API copy of one.
const (
	configSourceAnnotation = "kubernetes.io/config.source"
	apiserverSource        = "api"
)

// Limit is the swap, in bytes, that container of pod may use under behavior
// on a node with nodeMemoryBytes of memory and nodeSwapBytes of swap.
//
// NoSwap and "" give 0. LimitedSwap gives 0 unless every condition holds:
// the pod is not critical (static pod, mirror pod, or priority >=
// SystemCriticalPriority); its QoS class is Burstable (status.qosClass when
// set, else computed as upstream); the container's memory request and limit
// are not both zero and are not equal. Then the share is
//
//	int64(float64(request) / float64(nodeMemoryBytes) * float64(nodeSwapBytes))
//
// truncated toward zero, as upstream computes it. It is 0 when nodeSwapBytes
// is 0 or less, and never more than nodeSwapBytes (upstream can overflow to
// a negative number near MaxInt64; knode caps it).
//
// A node memory of 0 or less, or a request larger than the node memory, is
// an error with 0, which the caller applies as NoSwap (upstream logs
// "cannot calculate swap allocation amount; disallowing swap"). An unknown
// behavior is an error with 0 too; ValidateBehavior keeps it out.
//
// Limit is pure: it neither changes pod nor container.
func Limit(pod *corev1.Pod, container *corev1.Container, behavior string, nodeMemoryBytes, nodeSwapBytes int64) (int64, error) {
	switch behavior {
	case "", NoSwap:
		return 0, nil
	case LimitedSwap:
	default:
		return 0, fmt.Errorf("unknown swap behavior %s", behavior)
	}
	if isCritical(pod) || podQOS(pod) != corev1.PodQOSBurstable {
		return 0, nil
	}
	// Upstream also rules out "request and limit both zero"; equal
	// quantities already cover it.
	request := container.Resources.Requests.Memory()
	if request.Cmp(*container.Resources.Limits.Memory()) == 0 {
		return 0, nil
	}
	return share(request.Value(), nodeMemoryBytes, nodeSwapBytes)
}

// share is upstream's calcSwapForBurstablePods with its two errors, plus a
// cap at nodeSwap so that rounding near MaxInt64 cannot overflow.
func share(request, nodeMemory, nodeSwap int64) (int64, error) {
	if nodeMemory <= 0 {
		return 0, fmt.Errorf("total node memory is 0")
	}
	if request > nodeMemory {
		return 0, fmt.Errorf("container request %d is larger than total node memory %d", request, nodeMemory)
	}
	if nodeSwap <= 0 || request <= 0 {
		return 0, nil
	}
	swap := float64(request) / float64(nodeMemory) * float64(nodeSwap)
	if swap >= math.MaxInt64 {
		return nodeSwap, nil
	}
	return min(int64(swap), nodeSwap), nil
}

// isCritical is upstream's IsCriticalPod.
func isCritical(pod *corev1.Pod) bool {
	if source, ok := pod.Annotations[configSourceAnnotation]; ok && source != apiserverSource {
		return true
	}
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}

// podQOS is upstream's GetPodQOS: the class the API server recorded in
// status.qosClass, or, when that is empty, the class computed from the
// spec.
//
// The computation matches the one knode's pod registry stamps at creation
// (internal/registry/pod qosClass, unexported there), itself upstream's
// ComputePodQOS: only positive cpu and memory quantities count, over regular
// and init containers, unless pod-level resources name cpu or memory.
// BestEffort when nothing is requested or limited; Guaranteed when every
// container limits both cpu and memory and the summed requests equal the
// summed limits; Burstable otherwise.
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	var lists []corev1.ResourceRequirements
	if r := pod.Spec.Resources; r != nil && (namesCPUOrMemory(r.Requests) || namesCPUOrMemory(r.Limits)) {
		lists = []corev1.ResourceRequirements{*r}
	} else {
		for _, c := range pod.Spec.InitContainers {
			lists = append(lists, c.Resources)
		}
		for _, c := range pod.Spec.Containers {
			lists = append(lists, c.Resources)
		}
	}
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	guaranteed := true
	for _, r := range lists {
		addPositive(requests, r.Requests)
		if cpu, mem := addPositive(limits, r.Limits); !cpu || !mem {
			guaranteed = false
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	if guaranteed && len(requests) == len(limits) {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				return corev1.PodQOSBurstable
			}
		}
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

func namesCPUOrMemory(list corev1.ResourceList) bool {
	_, cpu := list[corev1.ResourceCPU]
	_, mem := list[corev1.ResourceMemory]
	return cpu || mem
}

// addPositive adds list's positive cpu and memory quantities into sum and
// says which of the two it found.
func addPositive(sum, list corev1.ResourceList) (cpu, memory bool) {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		q, ok := list[name]
		if !ok || q.Sign() <= 0 {
			continue
		}
		total := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			total.Add(prev)
		}
		sum[name] = total
		if name == corev1.ResourceCPU {
			cpu = true
		} else {
			memory = true
		}
	}
	return cpu, memory
}
