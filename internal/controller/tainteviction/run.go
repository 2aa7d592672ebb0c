package tainteviction

import (
	"context"
	"knode/internal/controller/loop"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Run follows node and pod informers until ctx ends, making a pass after
// every relevant change and whenever a pending deletion falls due on the
// clock. It blocks; it returns early only if ctx ends before the informer
// caches fill.
func (c *Controller) Run(ctx context.Context) {
	factory := c.factory
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.client, 0)
		defer factory.Shutdown()
	}
	nodes := factory.Core().V1().Nodes()
	pods := factory.Core().V1().Pods()
	ch := newChanges()
	nodeReg, err := nodes.Informer().AddEventHandler(ch.nodeHandler())
	if err != nil {
		c.log.Error("watching nodes", "err", err)
		return
	}
	defer func() { _ = nodes.Informer().RemoveEventHandler(nodeReg) }()
	podReg, err := pods.Informer().AddEventHandler(ch.podHandler())
	if err != nil {
		c.log.Error("watching pods", "err", err)
		return
	}
	defer func() { _ = pods.Informer().RemoveEventHandler(podReg) }()

	factory.Start(ctx.Done())
	for _, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			return
		}
	}
	nodeLister, podLister := nodes.Lister(), pods.Lister()
	v := view{
		node: func(name string) *corev1.Node {
			n, err := nodeLister.Get(name)
			if err != nil {
				return nil
			}
			return n
		},
		pod: func(key types.NamespacedName) *corev1.Pod {
			p, err := podLister.Pods(key.Namespace).Get(key.Name)
			if err != nil {
				return nil
			}
			return p
		},
	}

	for {
		nodeNames, podKeys := ch.take()
		c.mu.Lock()
		err := c.pass(ctx, v, nodeNames, podKeys)
		next, pending := c.queue.next()
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			c.log.Warn("taint eviction pass failed", "err", err)
		}

		var timer clock.Timer
		var due <-chan time.Time
		if pending {
			if timer = loop.TimerUntil(c.clock, next); timer == nil {
				continue // fell due during the pass
			}
			due = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-ch.signal:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// changes collects the nodes and pods informers reported since the last
// pass, and signals that there is something to do.
type changes struct {
	mu     sync.Mutex
	nodes  map[string]struct{}
	pods   map[types.NamespacedName]struct{}
	signal chan struct{} // capacity 1: one pending wake-up is enough
}

func newChanges() *changes {
	return &changes{
		nodes:  map[string]struct{}{},
		pods:   map[types.NamespacedName]struct{}{},
		signal: make(chan struct{}, 1),
	}
}

func (ch *changes) addNode(name string) {
	ch.mu.Lock()
	ch.nodes[name] = struct{}{}
	ch.mu.Unlock()
	ch.wake()
}

func (ch *changes) addPod(key types.NamespacedName) {
	ch.mu.Lock()
	ch.pods[key] = struct{}{}
	ch.mu.Unlock()
	ch.wake()
}

func (ch *changes) wake() {
	select {
	case ch.signal <- struct{}{}:
	default:
	}
}

// take returns and clears what was collected.
func (ch *changes) take() ([]string, []types.NamespacedName) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	nodes := make([]string, 0, len(ch.nodes))
	for n := range ch.nodes {
		nodes = append(nodes, n)
	}
	pods := make([]types.NamespacedName, 0, len(ch.pods))
	for p := range ch.pods {
		pods = append(pods, p)
	}
	clear(ch.nodes)
	clear(ch.pods)
	return nodes, pods
}

// nodeHandler reports added and deleted nodes, and updates that change
// the NoExecute taints.
func (ch *changes) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				ch.addNode(n.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*corev1.Node)
			cur, ok := newObj.(*corev1.Node)
			if !ok {
				return
			}
			if old != nil && equality.Semantic.DeepEqual(NoExecuteTaints(old.Spec.Taints), NoExecuteTaints(cur.Spec.Taints)) {
				return
			}
			ch.addNode(cur.Name)
		},
		DeleteFunc: func(obj any) {
			if _, name, ok := deletedKey(obj); ok {
				ch.addNode(name)
			}
		},
	}
}

// podHandler reports added and deleted pods, and updates that change the
// tolerations or the node.
func (ch *changes) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				ch.addPod(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*corev1.Pod)
			cur, ok := newObj.(*corev1.Pod)
			if !ok {
				return
			}
			if old != nil && old.Spec.NodeName == cur.Spec.NodeName && equality.Semantic.DeepEqual(old.Spec.Tolerations, cur.Spec.Tolerations) {
				return
			}
			ch.addPod(types.NamespacedName{Namespace: cur.Namespace, Name: cur.Name})
		},
		DeleteFunc: func(obj any) {
			if ns, name, ok := deletedKey(obj); ok {
				ch.addPod(types.NamespacedName{Namespace: ns, Name: name})
			}
		},
	}
}

// deletedKey names a deleted object, which may come as a tombstone.
func deletedKey(obj any) (namespace, name string, ok bool) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return "", "", false
	}
	namespace, name, err = cache.SplitMetaNamespaceKey(key)
	return namespace, name, err == nil
}
