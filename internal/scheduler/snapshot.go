package scheduler

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeInfo is one node as the scheduler sees it: the Node and what the
// pods bound to it (and assumed onto it) request. Its fields are read-only
// outside the Snapshot that owns it.
type NodeInfo struct {
	// Node is nil while pods are known on a node the snapshot does not
	// have (not yet seen, or deleted before its pods).
	Node *corev1.Node
	// Allocatable is node.status.allocatable.
	Allocatable Resources
	// Requested sums the Requests of the node's pods; NonZeroRequested
	// sums their NonZero requests, for the score.
	Requested        Resources
	NonZeroRequested Resources
	pods             map[types.NamespacedName]podUsage
	// volumePods are the node's pods that use PVCs, with the claims' names
	// (in the pod's namespace); nil when none does.
	volumePods map[types.NamespacedName][]string
}

// podUsage is what one pod takes from its node, kept so that it can be
// given back and so that the preemption check can ask which pods a
// higher-priority pod could evict.
type podUsage struct {
	priority int32
	requests Resources
	nonZero  Resources
	claims   []string
}

// NumPods is how many pods the node counts against its pods capacity.
func (n *NodeInfo) NumPods() int { return len(n.pods) }

// Snapshot is the scheduler's view of the cluster: every node and the
// requests of the non-terminal pods bound to each, including pods the
// scheduler assumed onto a node before its binding was confirmed. It is
// changed one object at a time, so keeping it current costs nothing per
// scheduling decision. It is not safe for concurrent use.
type Snapshot struct {
	nodes map[string]*NodeInfo
	// where is the node each counted pod is on.
	where map[types.NamespacedName]string
	// sorted lists the nodes that have a Node, by name; nil when it must
	// be rebuilt.
	sorted []*NodeInfo
	// storage holds what the volume filters read.
	storage storage
}

// NewSnapshot returns an empty snapshot.
func NewSnapshot() *Snapshot {
	return &Snapshot{nodes: map[string]*NodeInfo{}, where: map[types.NamespacedName]string{}, storage: newStorage()}
}

// SetNode adds the node or replaces it with a newer version; its pods
// stay counted.
func (s *Snapshot) SetNode(node *corev1.Node) {
	n := s.nodes[node.Name]
	if n == nil {
		n = &NodeInfo{pods: map[types.NamespacedName]podUsage{}}
		s.nodes[node.Name] = n
		s.sorted = nil
	} else if n.Node == nil {
		s.sorted = nil
	}
	n.Node = node
	n.Allocatable = ResourcesFrom(node.Status.Allocatable)
}

// RemoveNode forgets the node. Pods still counted on it stay counted
// until removed, so that a node that comes back finds them.
func (s *Snapshot) RemoveNode(name string) {
	n := s.nodes[name]
	if n == nil {
		return
	}
	if n.Node != nil {
		s.sorted = nil
	}
	if len(n.pods) == 0 {
		delete(s.nodes, name)
		return
	}
	n.Node = nil
	n.Allocatable = Resources{}
}

// Nodes returns the nodes that have a Node, sorted by name. The slice is
// shared: do not change it, and do not keep it across changes to the
// snapshot.
func (s *Snapshot) Nodes() []*NodeInfo {
	if s.sorted == nil {
		s.sorted = make([]*NodeInfo, 0, len(s.nodes))
		for _, n := range s.nodes {
			if n.Node != nil {
				s.sorted = append(s.sorted, n)
			}
		}
		slices.SortFunc(s.sorted, func(a, b *NodeInfo) int { return strings.Compare(a.Node.Name, b.Node.Name) })
	}
	return s.sorted
}

// Node returns the named node, or nil if the snapshot has no Node by that
// name.
func (s *Snapshot) Node(name string) *NodeInfo {
	if n := s.nodes[name]; n != nil && n.Node != nil {
		return n
	}
	return nil
}

// NodeOf returns the node a pod is counted on, and whether it is.
func (s *Snapshot) NodeOf(key types.NamespacedName) (string, bool) {
	name, ok := s.where[key]
	return name, ok
}

// AddPod counts a bound pod on spec.nodeName, replacing whatever was
// counted for it before (an assumption, an older version, another node).
// A pod without a node, or a terminal one (Succeeded or Failed), is
// removed instead: it holds nothing.
func (s *Snapshot) AddPod(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" || isTerminal(pod) {
		s.RemovePod(types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		return
	}
	s.Assume(NewPodInfo(pod), pod.Spec.NodeName)
}

// Assume counts pi on node, replacing whatever was counted for it before:
// what the scheduler does between choosing a node and the binding's
// confirmation.
func (s *Snapshot) Assume(pi *PodInfo, node string) {
	s.RemovePod(pi.Key)
	n := s.nodes[node]
	if n == nil {
		n = &NodeInfo{pods: map[types.NamespacedName]podUsage{}}
		s.nodes[node] = n
	}
	u := podUsage{priority: pi.Priority, requests: pi.Requests.clone(), nonZero: pi.NonZero.clone(), claims: pi.claims}
	n.pods[pi.Key] = u
	n.Requested.plus(u.requests)
	n.NonZeroRequested.plus(u.nonZero)
	s.where[pi.Key] = node
	if len(u.claims) > 0 {
		if n.volumePods == nil {
			n.volumePods = map[types.NamespacedName][]string{}
		}
		n.volumePods[pi.Key] = u.claims
		s.storage.use(pi.Key, u.claims, claimUse{node: node, leaving: pi.Pod.DeletionTimestamp != nil})
	}
}

// RemovePod stops counting the pod, wherever it was counted.
func (s *Snapshot) RemovePod(key types.NamespacedName) {
	name, ok := s.where[key]
	if !ok {
		return
	}
	delete(s.where, key)
	n := s.nodes[name]
	u := n.pods[key]
	delete(n.pods, key)
	n.Requested.minus(u.requests)
	n.NonZeroRequested.minus(u.nonZero)
	if len(u.claims) > 0 {
		delete(n.volumePods, key)
		s.storage.release(key, u.claims)
	}
	if n.Node == nil && len(n.pods) == 0 {
		delete(s.nodes, name)
	}
}

// isTerminal reports whether the pod has finished and holds no resources.
func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
