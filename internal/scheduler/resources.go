package scheduler

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults the scoring counts for a container that requests no cpu or no
// memory, so that such pods still spread (upstream's
// DefaultMilliCPURequest and DefaultMemoryRequest). Filters never use
// them.
const (
	DefaultMilliCPURequest int64 = 100
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Resources is an amount of what the scheduler counts. CPU is in
// millicores, memory and ephemeral storage in bytes, Pods is a count (only
// allocatable has one), and Scalar holds every other countable resource
// (extended resources, hugepages-*, attachable-volumes-*) in its own
// units. The zero value is nothing; a nil Scalar map means no scalar
// resources.
type Resources struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Pods             int64
	Scalar           map[corev1.ResourceName]int64
}

// ResourcesFrom converts a ResourceList: cpu in millicores, everything
// else in whole units; names the scheduler does not count are dropped.
func ResourcesFrom(rl corev1.ResourceList) Resources {
	var r Resources
	r.add(rl)
	return r
}

// add adds rl to r.
func (r *Resources) add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.Pods += q.Value()
		default:
			if isScalar(name) {
				r.addScalar(name, q.Value())
			}
		}
	}
}

func (r *Resources) addScalar(name corev1.ResourceName, v int64) {
	if r.Scalar == nil {
		r.Scalar = map[corev1.ResourceName]int64{}
	}
	r.Scalar[name] += v
}

// plus adds o to r.
func (r *Resources) plus(o Resources) {
	r.MilliCPU += o.MilliCPU
	r.Memory += o.Memory
	r.EphemeralStorage += o.EphemeralStorage
	r.Pods += o.Pods
	for name, v := range o.Scalar {
		r.addScalar(name, v)
	}
}

// minus takes o from r; scalar entries that reach zero are dropped.
func (r *Resources) minus(o Resources) {
	r.MilliCPU -= o.MilliCPU
	r.Memory -= o.Memory
	r.EphemeralStorage -= o.EphemeralStorage
	r.Pods -= o.Pods
	for name, v := range o.Scalar {
		r.addScalar(name, -v)
		if r.Scalar[name] == 0 {
			delete(r.Scalar, name)
		}
	}
}

// atLeast raises each amount of r to o's where o's is larger.
func (r *Resources) atLeast(o Resources) {
	r.MilliCPU = max(r.MilliCPU, o.MilliCPU)
	r.Memory = max(r.Memory, o.Memory)
	r.EphemeralStorage = max(r.EphemeralStorage, o.EphemeralStorage)
	r.Pods = max(r.Pods, o.Pods)
	for name, v := range o.Scalar {
		if cur, ok := r.Scalar[name]; !ok || v > cur {
			if r.Scalar == nil {
				r.Scalar = map[corev1.ResourceName]int64{}
			}
			r.Scalar[name] = v
		}
	}
}

// clone returns a copy that shares nothing with r.
func (r Resources) clone() Resources {
	c := r
	c.Scalar = nil
	for name, v := range r.Scalar {
		c.addScalar(name, v)
	}
	return c
}

// isEmpty reports whether r requests nothing at all.
func (r Resources) isEmpty() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.EphemeralStorage != 0 {
		return false
	}
	for _, v := range r.Scalar {
		if v != 0 {
			return false
		}
	}
	return true
}

// isScalar reports whether name is counted in Resources.Scalar: an
// extended resource, a hugepages size, an attachable-volumes count, or a
// kubernetes.io-prefixed native resource.
func isScalar(name corev1.ResourceName) bool {
	s := string(name)
	return isExtended(name) ||
		strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix) ||
		strings.Contains(s, corev1.ResourceDefaultNamespacePrefix)
}

// isExtended reports whether name is an extended resource: a qualified
// name with a domain outside kubernetes.io, not a quota "requests." name.
func isExtended(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) {
		return false
	}
	if strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// podLevelResources are the resources a pod-level request
// (spec.resources.requests) sets for the whole pod.
var podLevelResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// PodRequests is what pod asks of a node, as the scheduler counts it:
//   - regular containers and restartable (sidecar) init containers run
//     together, so their requests add up;
//   - each other init container runs alone beside the sidecars started
//     before it, and the pod needs the largest of those moments if that
//     is more than the sum above (per resource);
//   - a pod-level request for cpu or memory replaces the containers' sum;
//   - the pod overhead comes on top.
//
// With nonZero, a container that states no cpu (memory) request counts
// DefaultMilliCPURequest (DefaultMemoryRequest) for it; with pod-level
// requests, only for a resource that neither the pod nor any container
// names. Scoring uses that form; filters never do.
func PodRequests(pod *corev1.Pod, nonZero bool) Resources {
	podLevel := podLevelRequestsSet(pod)
	defCPU, defMemory := nonZero, nonZero
	if podLevel && nonZero {
		// Defaults apply only to what neither the pod nor any container
		// names.
		named := podNames(pod)
		defCPU, defMemory = !named[corev1.ResourceCPU], !named[corev1.ResourceMemory]
	}
	var sum, sidecars, initPeak Resources
	for i := range pod.Spec.Containers {
		sum.plus(containerRequests(pod.Spec.Containers[i].Resources.Requests, defCPU, defMemory))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := containerRequests(c.Resources.Requests, defCPU, defMemory)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum.plus(req)
			sidecars.plus(req)
			initPeak.atLeast(sidecars)
			continue
		}
		req.plus(sidecars)
		initPeak.atLeast(req)
	}
	sum.atLeast(initPeak)
	if podLevel {
		for _, name := range podLevelResources {
			if q, ok := pod.Spec.Resources.Requests[name]; ok {
				switch name {
				case corev1.ResourceCPU:
					sum.MilliCPU = q.MilliValue()
				case corev1.ResourceMemory:
					sum.Memory = q.Value()
				}
			}
		}
	}
	if pod.Spec.Overhead != nil {
		sum.add(pod.Spec.Overhead)
	}
	return sum
}

// containerRequests converts one container's requests; a cpu (memory)
// request it does not state counts as the default when defCPU
// (defMemory).
func containerRequests(requests corev1.ResourceList, defCPU, defMemory bool) Resources {
	r := ResourcesFrom(requests)
	if _, ok := requests[corev1.ResourceCPU]; !ok && defCPU {
		r.MilliCPU += DefaultMilliCPURequest
	}
	if _, ok := requests[corev1.ResourceMemory]; !ok && defMemory {
		r.Memory += DefaultMemoryRequest
	}
	return r
}

// podLevelRequestsSet reports whether the pod states a pod-level request
// for a resource that pod-level requests may set.
func podLevelRequestsSet(pod *corev1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for _, name := range podLevelResources {
		if _, ok := pod.Spec.Resources.Requests[name]; ok {
			return true
		}
	}
	return false
}

// podNames is the set of resource names the pod or any of its containers
// requests.
func podNames(pod *corev1.Pod) map[corev1.ResourceName]bool {
	named := map[corev1.ResourceName]bool{}
	if pod.Spec.Resources != nil {
		for name := range pod.Spec.Resources.Requests {
			named[name] = true
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range cs {
			for name := range cs[i].Resources.Requests {
				named[name] = true
			}
		}
	}
	return named
}
