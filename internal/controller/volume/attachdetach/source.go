package attachdetach

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// errNotSynced is returned by the informer source until every cache has
// synced: acting on a partial cache would detach volumes whose pods are not
// listed yet.
var errNotSynced = errors.New("attachdetach: informer caches not synced yet")

// source reads a Snapshot.
type source interface {
	snapshot(ctx context.Context) (Snapshot, error)
}

// apiSource lists every kind through the API server on each call.
type apiSource struct{ client kubernetes.Interface }

func (s apiSource) snapshot(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	nodes, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("listing pods: %w", err)
	}
	pvcs, err := s.client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	pvs, err := s.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("listing persistentvolumes: %w", err)
	}
	drivers, err := s.client.StorageV1().CSIDrivers().List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("listing csidrivers: %w", err)
	}
	vas, err := s.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return snap, fmt.Errorf("listing volumeattachments: %w", err)
	}
	snap.Nodes = pointers(nodes.Items)
	snap.Pods = pointers(pods.Items)
	snap.Claims = pointers(pvcs.Items)
	snap.Volumes = pointers(pvs.Items)
	snap.Drivers = pointers(drivers.Items)
	snap.Attachments = pointers(vas.Items)
	return snap, nil
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// informerSource reads the caches of a shared informer factory.
type informerSource struct {
	nodes   cache.SharedIndexInformer
	pods    cache.SharedIndexInformer
	pvcs    cache.SharedIndexInformer
	pvs     cache.SharedIndexInformer
	drivers cache.SharedIndexInformer
	vas     cache.SharedIndexInformer
}

func newInformerSource(f informers.SharedInformerFactory) *informerSource {
	return &informerSource{
		nodes:   f.Core().V1().Nodes().Informer(),
		pods:    f.Core().V1().Pods().Informer(),
		pvcs:    f.Core().V1().PersistentVolumeClaims().Informer(),
		pvs:     f.Core().V1().PersistentVolumes().Informer(),
		drivers: f.Storage().V1().CSIDrivers().Informer(),
		vas:     f.Storage().V1().VolumeAttachments().Informer(),
	}
}

func (s *informerSource) informers() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{s.nodes, s.pods, s.pvcs, s.pvs, s.drivers, s.vas}
}

func (s *informerSource) snapshot(context.Context) (Snapshot, error) {
	for _, inf := range s.informers() {
		if !inf.HasSynced() {
			return Snapshot{}, errNotSynced
		}
	}
	return Snapshot{
		Nodes:       cached[corev1.Node](s.nodes),
		Pods:        cached[corev1.Pod](s.pods),
		Claims:      cached[corev1.PersistentVolumeClaim](s.pvcs),
		Volumes:     cached[corev1.PersistentVolume](s.pvs),
		Drivers:     cached[storagev1.CSIDriver](s.drivers),
		Attachments: cached[storagev1.VolumeAttachment](s.vas),
	}, nil
}

func cached[T any](inf cache.SharedIndexInformer) []*T {
	var out []*T
	_ = cache.ListAll(inf.GetStore(), labels.Everything(), func(obj any) {
		if o, ok := obj.(*T); ok {
			out = append(out, o)
		}
	})
	return out
}
