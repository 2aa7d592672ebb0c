package pods

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// PodLister lists the pods bound to a node from a cache; the pods are
// shared and read-only. ok is false until the cache has been filled, and a
// pass then lists from the server.
type PodLister interface {
	PodsOn(nodeName string) (pods []*corev1.Pod, ok bool)
}

// podCache holds the node's pods as Run's list and watch last delivered
// them, in the role of the kubelet's API pod source.
type podCache struct {
	mu     sync.Mutex
	filled bool
	pods   map[types.NamespacedName]*corev1.Pod
}

// PodsOn implements PodLister.
func (c *podCache) PodsOn(nodeName string) ([]*corev1.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.filled {
		return nil, false
	}
	out := make([]*corev1.Pod, 0, len(c.pods))
	for _, p := range c.pods {
		if p.Spec.NodeName == nodeName {
			out = append(out, p)
		}
	}
	return out, true
}

// replace sets the cache to a list's items.
func (c *podCache) replace(items []corev1.Pod) {
	pods := make(map[types.NamespacedName]*corev1.Pod, len(items))
	for i := range items {
		p := &items[i]
		pods[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = p
	}
	c.mu.Lock()
	c.pods, c.filled = pods, true
	c.mu.Unlock()
}

// apply takes in one watch event; it reports whether the event was a
// change of a pod.
func (c *podCache) apply(ev watch.Event) bool {
	p, ok := ev.Object.(*corev1.Pod)
	if !ok {
		return false
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.Type {
	case watch.Added, watch.Modified:
		c.pods[key] = p
	case watch.Deleted:
		delete(c.pods, key)
	default:
		return false
	}
	return true
}
