package nodelifecycle

import (
	"context"
	"fmt"
	"sort"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordlisters "k8s.io/client-go/listers/coordination/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Source is where the controller reads the cluster. Objects it returns may
// be shared with a cache: callers never modify them.
type Source interface {
	// Nodes returns every node.
	Nodes(ctx context.Context) ([]*corev1.Node, error)
	// Leases returns the node Leases (namespace kube-node-lease) by name.
	Leases(ctx context.Context) (map[string]*coordinationv1.Lease, error)
	// NewlyBound returns the pods bound to a node (or moved to another one)
	// since the previous call; the first call returns every bound pod.
	NewlyBound(ctx context.Context) ([]*corev1.Pod, error)
	// Node returns one node, or an error for which apierrors.IsNotFound
	// holds when it does not exist.
	Node(ctx context.Context, name string) (*corev1.Node, error)
	// PodsOnNode returns the pods bound to the named node.
	PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error)
}

// NewClientSource reads straight from the API server on every call: each
// pass sees exactly what the server holds, which makes stepping the
// controller deterministic. It suits tests and the simulator; a real server
// should use informers (leave Config.Source nil).
func NewClientSource(client kubernetes.Interface) Source {
	return &clientSource{client: client, bound: map[types.UID]string{}}
}

type clientSource struct {
	client kubernetes.Interface
	mu     sync.Mutex
	bound  map[types.UID]string // pod UID → node it was bound to at the last NewlyBound
}

func (s *clientSource) Nodes(ctx context.Context) ([]*corev1.Node, error) {
	list, err := s.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *clientSource) Leases(ctx context.Context) (map[string]*coordinationv1.Lease, error) {
	list, err := s.client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing node leases: %w", err)
	}
	out := make(map[string]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func (s *clientSource) NewlyBound(ctx context.Context) ([]*corev1.Pod, error) {
	list, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := make(map[types.UID]string, len(list.Items))
	var out []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName == "" {
			continue
		}
		next[p.UID] = p.Spec.NodeName
		if s.bound[p.UID] != p.Spec.NodeName {
			out = append(out, p)
		}
	}
	s.bound = next
	return out, nil
}

func (s *clientSource) Node(ctx context.Context, name string) (*corev1.Node, error) {
	return s.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (s *clientSource) PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error) {
	list, err := s.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods on node %s: %w", node, err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

// podNodeIndex indexes pods by spec.nodeName.
const podNodeIndex = "spec.nodeName"

// informerSource reads from shared informers' caches. Pod bindings and
// node changes are collected from informer events.
type informerSource struct {
	nodes  corelisters.NodeLister
	leases coordlisters.LeaseLister
	pods   cache.SharedIndexInformer
	synced []cache.InformerSynced

	mu           sync.Mutex
	bound        []string            // namespace/name of pods bound since the last NewlyBound
	changed      map[string]struct{} // nodes added or updated since the last drain
	notify       chan struct{}       // signalled (non-blocking) when changed grows
	indexedByPod bool
}

func newInformerSource(f informers.SharedInformerFactory) (*informerSource, error) {
	s := &informerSource{changed: map[string]struct{}{}, notify: make(chan struct{}, 1)}
	nodeInf := f.Core().V1().Nodes()
	leaseInf := f.Coordination().V1().Leases()
	podInf := f.Core().V1().Pods()
	s.nodes, s.leases, s.pods = nodeInf.Lister(), leaseInf.Lister(), podInf.Informer()
	s.synced = []cache.InformerSynced{nodeInf.Informer().HasSynced, leaseInf.Informer().HasSynced, s.pods.HasSynced}

	if _, ok := s.pods.GetIndexer().GetIndexers()[podNodeIndex]; ok {
		s.indexedByPod = true
	} else if err := s.pods.AddIndexers(cache.Indexers{podNodeIndex: func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return nil, nil
		}
		return []string{p.Spec.NodeName}, nil
	}}); err == nil {
		s.indexedByPod = true
	}

	if _, err := s.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
				s.podBound(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Pod)
			n, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 && n.Spec.NodeName != "" && n.Spec.NodeName != o.Spec.NodeName {
				s.podBound(n)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.nodeChanged(obj) },
		UpdateFunc: func(_, obj any) { s.nodeChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("watching nodes: %w", err)
	}
	return s, nil
}

func (s *informerSource) podBound(p *corev1.Pod) {
	s.mu.Lock()
	s.bound = append(s.bound, p.Namespace+"/"+p.Name)
	s.mu.Unlock()
}

func (s *informerSource) nodeChanged(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.mu.Lock()
	s.changed[n.Name] = struct{}{}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// drainChanged returns the nodes changed since the last call.
func (s *informerSource) drainChanged() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.changed))
	for n := range s.changed {
		out = append(out, n)
	}
	clear(s.changed)
	sort.Strings(out)
	return out
}

func (s *informerSource) Nodes(context.Context) ([]*corev1.Node, error) {
	return s.nodes.List(labels.Everything())
}

func (s *informerSource) Leases(context.Context) (map[string]*coordinationv1.Lease, error) {
	list, err := s.leases.Leases(corev1.NamespaceNodeLease).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make(map[string]*coordinationv1.Lease, len(list))
	for _, l := range list {
		out[l.Name] = l
	}
	return out, nil
}

func (s *informerSource) NewlyBound(context.Context) ([]*corev1.Pod, error) {
	s.mu.Lock()
	keys := s.bound
	s.bound = nil
	s.mu.Unlock()
	var out []*corev1.Pod
	for _, k := range keys {
		obj, ok, err := s.pods.GetIndexer().GetByKey(k)
		if err != nil || !ok {
			continue
		}
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *informerSource) Node(_ context.Context, name string) (*corev1.Node, error) {
	return s.nodes.Get(name)
}

func (s *informerSource) PodsOnNode(_ context.Context, node string) ([]*corev1.Pod, error) {
	var objs []any
	if s.indexedByPod {
		var err error
		if objs, err = s.pods.GetIndexer().ByIndex(podNodeIndex, node); err != nil {
			return nil, err
		}
	} else {
		objs = s.pods.GetIndexer().List()
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out, nil
}
