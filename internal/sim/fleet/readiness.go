package fleet

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// readiness follows the fleet's nodes as the server reports them and
// counts those Ready now and those not Ready after having been Ready (a
// node still registering is not "not Ready"). It keeps the largest number
// of the latter seen at once. Its methods are safe for concurrent use.
type readiness struct {
	mu sync.Mutex
	// nodes holds each node seen: true when it is Ready now.
	nodes       map[string]bool
	everReady   map[string]bool
	ready       int
	notReady    int
	notReadyMax int
}

func newReadiness() *readiness {
	return &readiness{nodes: map[string]bool{}, everReady: map[string]bool{}}
}

// isReady reports whether node's Ready condition is True.
func isReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// observe records the node's current state; deleted removes it.
func (r *readiness) observe(name string, ready, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	was, known := r.nodes[name]
	if known {
		if was {
			r.ready--
		} else if r.everReady[name] {
			r.notReady--
		}
	}
	if deleted {
		delete(r.nodes, name)
		delete(r.everReady, name)
		return
	}
	r.nodes[name] = ready
	switch {
	case ready:
		r.ready++
		r.everReady[name] = true
	case r.everReady[name]:
		r.notReady++
		r.notReadyMax = max(r.notReadyMax, r.notReady)
	}
}

// counts returns the nodes Ready now, those not Ready now after having
// been Ready, and the largest number of the latter so far.
func (r *readiness) counts() (ready, notReady, notReadyMax int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready, r.notReady, r.notReadyMax
}
