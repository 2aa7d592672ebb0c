package agent

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// followRetry is the pause, on the agent's clock, before the agent lists
// its Node again after its watch ended or failed.
const followRetry = time.Second

// nodeCache holds the agent's own Node as its watch last delivered it, in
// the role of the kubelet's node informer. It answers NotFound until the
// first list or event, and after the Node's deletion.
type nodeCache struct {
	mu   sync.Mutex
	node *corev1.Node
	// onSet, when set, is told of every new version (Config.OnNode).
	onSet func(*corev1.Node)
}

// Get implements NodeLister.
func (c *nodeCache) Get(name string) (*corev1.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.node == nil || c.node.Name != name {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return c.node, nil
}

func (c *nodeCache) set(node *corev1.Node) {
	c.mu.Lock()
	c.node = node
	c.mu.Unlock()
	if c.onSet != nil && node != nil {
		c.onSet(node)
	}
}

// follow keeps cache current until ctx ends: it lists the Node by
// metadata.name (the only read of nodes a node's identity may make), then
// watches from the list's revision. When the watch ends or fails it waits
// followRetry on the clock and lists again.
func (a *Agent) follow(ctx context.Context, cache *nodeCache) {
	selector := fields.OneTermEqualSelector(metav1.ObjectNameField, a.cfg.NodeName).String()
	for ctx.Err() == nil {
		if err := a.followOnce(ctx, cache, selector); err != nil && ctx.Err() == nil {
			a.log.Debug("following the node failed", "err", err)
		}
		timer := a.cfg.Clock.NewTimer(followRetry)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// followOnce is one list and the watch that follows it; it returns when
// the watch ends.
func (a *Agent) followOnce(ctx context.Context, cache *nodeCache, selector string) error {
	nodes := a.cfg.Client.CoreV1().Nodes()
	list, err := nodes.List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return err
	}
	cache.set(nil)
	for i := range list.Items {
		cache.set(&list.Items[i])
	}
	w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if node, ok := ev.Object.(*corev1.Node); ok {
				cache.set(node)
			}
		case watch.Deleted:
			cache.set(nil)
		case watch.Error:
			return apierrors.FromObject(ev.Object)
		}
	}
	return nil
}
