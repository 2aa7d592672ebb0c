package tainteviction

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Lookup is where Observe reads the current objects; it returns nil for an
// object that does not exist.
type Lookup struct {
	Node func(name string) *corev1.Node
	Pod  func(key types.NamespacedName) *corev1.Pod
}

// Observe is the event-driven step, for a driver that follows nodes and
// pods itself (the simulator): it looks again at just the named nodes and
// pods, which changed since the last call, reading them through l, then
// deletes the pods whose time has come. Calling it with no names fires
// what is due. Like Sync it blocks until its writes are done.
func (c *Controller) Observe(ctx context.Context, l Lookup, nodes []string, pods []types.NamespacedName) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pass(ctx, view{node: l.Node, pod: l.Pod}, append([]string(nil), nodes...), append([]types.NamespacedName(nil), pods...))
}
