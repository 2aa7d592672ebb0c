package swap

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	podreg "knode/internal/registry/pod"
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
	if isCritical(pod) || podreg.PodQOS(pod) != corev1.PodQOSBurstable {
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
