package topology

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Hint is one possible NUMA placement of a resource (from a provider) or of a
// container (the merged result).
type Hint struct {
	// Affinity is the set of NUMA nodes the placement uses. Nil means the
	// placement has no NUMA preference ("any node"); that is different from
	// a non-nil empty mask, which no placement can satisfy.
	Affinity *Mask
	// Preferred is true when Affinity is one of the narrowest placements
	// that satisfy the request.
	Preferred bool
}

// NewHint returns a hint whose Affinity is a copy of m.
func NewHint(m Mask, preferred bool) Hint {
	return Hint{Affinity: &m, Preferred: preferred}
}

// String prints the hint as "{affinity preferred}", with "<nil>" for any.
func (h Hint) String() string {
	if h.Affinity == nil {
		return fmt.Sprintf("{<nil> %t}", h.Preferred)
	}
	return fmt.Sprintf("{%s %t}", *h.Affinity, h.Preferred)
}

// IsEqual reports whether h and o have the same preference and the same
// affinity (both nil, or equal masks).
func (h Hint) IsEqual(o Hint) bool {
	if h.Preferred != o.Preferred {
		return false
	}
	if h.Affinity == nil || o.Affinity == nil {
		return h.Affinity == nil && o.Affinity == nil
	}
	return *h.Affinity == *o.Affinity
}

// HintProvider is a resource manager (CPU, memory, devices) that can place
// its resources on NUMA nodes.
//
// Hints are keyed by resource name. For one resource a nil list means "no
// preference" and an empty non-nil list means "cannot be satisfied". A nil
// or empty map means no preference for any resource.
type HintProvider interface {
	// TopologyHints returns the provider's hints for one container. Used by
	// the container scope.
	TopologyHints(pod *corev1.Pod, container *corev1.Container) map[string][]Hint
	// PodTopologyHints returns the provider's hints for the whole pod. Used
	// by the pod scope.
	PodTopologyHints(pod *corev1.Pod) map[string][]Hint
	// Allocate allocates the container's resources. It runs after the
	// merged hint is stored, so the provider may read it with the
	// manager's Affinity. An error rejects the pod; an error that has a
	// `Type() string` method (found with errors.As) gives the rejection
	// reason and message, any other error is UnexpectedAdmissionError.
	Allocate(pod *corev1.Pod, container *corev1.Container) error
}
