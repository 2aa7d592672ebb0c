package scheduler

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/loop"
)

// Run follows node, pod and storage informers (claims, volumes, classes,
// CSINodes) until ctx ends, keeping the snapshot and queue current and
// scheduling pods as they become ready: new pending pods at once, failed
// ones after their backoff when a change may help (see the package doc),
// pods waiting for their volumes once their claims are bound, and every
// 30 s on the clock those left unschedulable for 5 minutes. The caches of
// every informer must fill before it starts, so the server must serve the
// storage kinds. It blocks, and returns after its writes in flight are
// done; it returns early only if ctx ends before the informer caches
// fill.
func (s *Scheduler) Run(ctx context.Context) {
	factory := s.factory
	if factory == nil {
		factory = informers.NewSharedInformerFactory(s.client, 0)
		defer factory.Shutdown()
	}
	watched := []struct {
		what     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"nodes", factory.Core().V1().Nodes().Informer(), s.nodeHandler()},
		{"pods", factory.Core().V1().Pods().Informer(), s.podHandler()},
		{"persistentvolumeclaims", factory.Core().V1().PersistentVolumeClaims().Informer(), s.ClaimHandler()},
		{"persistentvolumes", factory.Core().V1().PersistentVolumes().Informer(), s.VolumeHandler()},
		{"storageclasses", factory.Storage().V1().StorageClasses().Informer(), s.ClassHandler()},
		{"csinodes", factory.Storage().V1().CSINodes().Informer(), s.CSINodeHandler()},
	}
	var synced []cache.InformerSynced
	for _, w := range watched {
		reg, err := w.informer.AddEventHandler(w.handler)
		if err != nil {
			s.log.Error("watching "+w.what, "err", err)
			return
		}
		defer func() { _ = w.informer.RemoveEventHandler(reg) }()
		synced = append(synced, w.informer.HasSynced, reg.HasSynced)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}

	ticker := s.clock.NewTicker(flushPeriod)
	defer ticker.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, s.parallelism)
	for {
		s.mu.Lock()
		now := s.clock.Now()
		s.queue.flush(now)
		s.expireWaits(now)
		s.mu.Unlock()
		for ctx.Err() == nil {
			o, ok := s.decide()
			if !ok {
				break
			}
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := s.apply(ctx, o); err != nil && ctx.Err() == nil {
					s.log.Warn("scheduling failed", "pod", o.info.Key.String(), "err", err)
				}
			})
		}

		s.mu.Lock()
		next, backingOff := s.nextWake()
		s.mu.Unlock()
		var timer clock.Timer
		var due <-chan time.Time
		if backingOff {
			if timer = loop.TimerUntil(s.clock, next); timer == nil {
				continue // ended while deciding
			}
			due = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-s.wake:
		case <-ticker.C():
			s.mu.Lock()
			now := s.clock.Now()
			s.queue.flush(now)
			s.expireWaits(now)
			s.mu.Unlock()
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

// nodeHandler keeps nodes in the snapshot; a node added, or changed in
// what the filters read, sends failed pods back.
func (s *Scheduler) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			s.mu.Lock()
			s.snap.SetNode(n)
			s.queue.moveAll(s.clock.Now())
			s.mu.Unlock()
			s.signal()
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, _ := oldObj.(*corev1.Node)
			cur, ok := newObj.(*corev1.Node)
			if !ok {
				return
			}
			s.mu.Lock()
			s.snap.SetNode(cur)
			moved := old == nil || nodeChangeMayHelp(old, cur)
			if moved {
				s.queue.moveAll(s.clock.Now())
			}
			s.mu.Unlock()
			if moved {
				s.signal()
			}
		},
		DeleteFunc: func(obj any) {
			if _, name, ok := deletedKey(obj); ok {
				s.mu.Lock()
				s.snap.RemoveNode(name)
				s.checkWaiting()
				s.mu.Unlock()
			}
		},
	}
}

// nodeChangeMayHelp reports whether a node update changed what the
// filters read: labels, taints, spec.unschedulable or allocatable.
// Heartbeats (conditions, times) do not.
func nodeChangeMayHelp(old, cur *corev1.Node) bool {
	return old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
}

// podHandler keeps bound pods in the snapshot and pending ones in the
// queue; a bound pod deleted or finished sends failed pods back.
func (s *Scheduler) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				s.observePod(p)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if p, ok := newObj.(*corev1.Pod); ok {
				s.observePod(p)
			}
		},
		DeleteFunc: func(obj any) {
			ns, name, ok := deletedKey(obj)
			if !ok {
				return
			}
			key := types.NamespacedName{Namespace: ns, Name: name}
			s.mu.Lock()
			s.queue.remove(key)
			delete(s.assumed, key)
			s.forgetWait(key)
			_, counted := s.snap.NodeOf(key)
			if counted {
				s.snap.RemovePod(key)
				s.queue.moveAll(s.clock.Now())
			}
			s.mu.Unlock()
			if p := deletedPod(obj); p != nil {
				s.events.forget(p.UID)
			}
			if counted {
				s.signal()
			}
		},
	}
}

// observePod takes in a new version of a pod.
func (s *Scheduler) observePod(p *corev1.Pod) {
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Spec.NodeName != "" {
		s.queue.remove(key)
		delete(s.assumed, key)
		s.forgetWait(key)
		if isTerminal(p) {
			if _, counted := s.snap.NodeOf(key); counted {
				s.snap.RemovePod(key)
				s.queue.moveAll(s.clock.Now())
				s.signal()
			}
			return
		}
		s.snap.AddPod(p)
		// A pod on its way out no longer holds its ReadWriteOnce claims.
		if p.DeletionTimestamp != nil && usesClaims(p) {
			if s.queue.moveClaimPods(s.clock.Now()) {
				s.signal()
			}
		}
		return
	}
	if _, binding := s.assumed[key]; binding {
		return // an older version; the binding is in flight
	}
	if !s.isPending(p) {
		s.queue.remove(key)
		return
	}
	if s.queue.upsert(NewPodInfo(p), s.clock.Now()) {
		s.signal()
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

// deletedPod returns the pod of a delete notification, or nil.
func deletedPod(obj any) *corev1.Pod {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, _ := obj.(*corev1.Pod)
	return p
}

// forgetWait drops a pod's volume wait: the pod is gone, or bound by
// someone else. What it wrote stays assumed until the informer shows it.
// Call it under mu.
func (s *Scheduler) forgetWait(key types.NamespacedName) {
	delete(s.waiting, key)
}
