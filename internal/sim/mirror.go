package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/apiserver"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/controller/tainteviction"
	"knode/internal/storage"
	"knode/internal/storage/memory"
)

var (
	nodesGVR       = corev1.SchemeGroupVersion.WithResource("nodes")
	podsGVR        = corev1.SchemeGroupVersion.WithResource("pods")
	leasesGVR      = coordinationv1.SchemeGroupVersion.WithResource("leases")
	claimsGVR      = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	volumesGVR     = corev1.SchemeGroupVersion.WithResource("persistentvolumes")
	attachmentsGVR = storagev1.SchemeGroupVersion.WithResource("volumeattachments")
	setsGVR        = appsv1.SchemeGroupVersion.WithResource("statefulsets")
	revisionsGVR   = appsv1.SchemeGroupVersion.WithResource("controllerrevisions")
)

// mirror follows the store synchronously and keeps the nodes, node leases,
// pods, PersistentVolumeClaims, PersistentVolumes, VolumeAttachments,
// StatefulSets and ControllerRevisions decoded, as informers would in a
// server, but without a goroutine:
// refresh reads every change since the last one, so what the mirror shows
// depends only on the writes made so far. Each change is decoded once and
// handed to the observer; the components read the mirror (the node
// lifecycle controller through its Source, taint eviction through Lookup,
// the agents' volume managers directly) and never list through the API.
// The attach/detach controller, the PV binder, the StatefulSet controller
// and the pod garbage collector are the exception: their Step and Sync
// list through the API.
type mirror struct {
	store *memory.Store
	api   *apiserver.Server
	rev   int64

	nodePrefix, leasePrefix, podPrefix          string
	claimPrefix, volumePrefix, attachmentPrefix string
	setPrefix, revisionPrefix                   string

	nodes  map[string]*corev1.Node
	leases map[string]*coordinationv1.Lease
	pods   map[types.NamespacedName]*corev1.Pod
	// podsOn indexes pods by spec.nodeName.
	podsOn map[string]map[types.NamespacedName]struct{}
	// names are the nodes' names, sorted.
	names []string
	// fresh are the pods bound, or bound anew under another UID, since the
	// last NewlyBound.
	fresh map[types.NamespacedName]struct{}

	claims      map[types.NamespacedName]*corev1.PersistentVolumeClaim
	volumes     map[string]*corev1.PersistentVolume
	attachments map[string]*storagev1.VolumeAttachment

	sets map[types.NamespacedName]*appsv1.StatefulSet
	// revisions holds the ControllerRevisions' names, as namespace/name.
	revisions map[string]bool

	observer observer
	// changes is refreshOrdered's scratch space.
	changes []change
}

// observer hears every change, in revision order, except that a batch of
// agents' changes comes ordered by agent (see refreshOrdered); old is nil
// for a new object and cur is nil for a deleted one. Leases are not
// handed on.
type observer interface {
	nodeChanged(old, cur *corev1.Node)
	podChanged(old, cur *corev1.Pod)
	claimChanged(old, cur *corev1.PersistentVolumeClaim)
	volumeChanged(old, cur *corev1.PersistentVolume)
	attachmentChanged(old, cur *storagev1.VolumeAttachment)
	setChanged(old, cur *appsv1.StatefulSet)
	revisionChanged()
}

func newMirror(store *memory.Store, api *apiserver.Server, rev int64, o observer) (*mirror, error) {
	m := &mirror{
		store: store, api: api, rev: rev, observer: o,
		nodes: map[string]*corev1.Node{}, leases: map[string]*coordinationv1.Lease{},
		pods: map[types.NamespacedName]*corev1.Pod{}, podsOn: map[string]map[types.NamespacedName]struct{}{},
		fresh:  map[types.NamespacedName]struct{}{},
		claims: map[types.NamespacedName]*corev1.PersistentVolumeClaim{}, volumes: map[string]*corev1.PersistentVolume{},
		attachments: map[string]*storagev1.VolumeAttachment{},
		sets:        map[types.NamespacedName]*appsv1.StatefulSet{}, revisions: map[string]bool{},
	}
	for _, p := range []struct {
		gvr schema.GroupVersionResource
		to  *string
		sub string
	}{
		{nodesGVR, &m.nodePrefix, ""},
		{podsGVR, &m.podPrefix, ""},
		{leasesGVR, &m.leasePrefix, corev1.NamespaceNodeLease + "/"},
		{claimsGVR, &m.claimPrefix, ""},
		{volumesGVR, &m.volumePrefix, ""},
		{attachmentsGVR, &m.attachmentPrefix, ""},
		{setsGVR, &m.setPrefix, ""},
		{revisionsGVR, &m.revisionPrefix, ""},
	} {
		prefix, ok := api.StoragePrefix(p.gvr)
		if !ok {
			return nil, fmt.Errorf("sim: the API server does not serve %s", p.gvr)
		}
		*p.to = prefix + p.sub
	}
	return m, nil
}

// refresh applies every change written since the last call.
func (m *mirror) refresh() error { return m.refreshOrdered(nil) }

// change is one decoded change: obj is nil for a deletion, and for the
// kinds not decoded (ControllerRevisions), whose put says whether it is a
// creation or update rather than a deletion. rank is its node's rank, when
// refreshOrdered has one.
type change struct {
	gvr  schema.GroupVersionResource
	key  string
	obj  runtime.Object
	put  bool
	rank int
}

// refreshOrdered is refresh, but when rank is not nil it applies the
// changes ordered by the rank of the node each concerns (the Node or Lease
// itself, or the node a pod is bound to), and by revision for equal ranks.
func (m *mirror) refreshOrdered(rank func(node string) int) error {
	events, rev, err := m.store.Changes("/registry/", m.rev)
	if err != nil {
		return fmt.Errorf("sim: following the store: %w", err)
	}
	m.rev = rev
	changes := m.changes[:0]
	for i := range events {
		c, ok, err := m.decode(&events[i])
		if err != nil {
			return err
		}
		if ok {
			changes = append(changes, c)
		}
	}
	if rank != nil && len(changes) > 1 {
		for i := range changes {
			changes[i].rank = rank(m.nodeOf(changes[i]))
		}
		slices.SortStableFunc(changes, func(a, b change) int { return cmp.Compare(a.rank, b.rank) })
	}
	for _, c := range changes {
		m.apply(c)
	}
	clear(changes)
	m.changes = changes
	return nil
}

// decode reads one stored change; ok is false for a kind the mirror does
// not follow.
func (m *mirror) decode(ev *storage.Event) (c change, ok bool, err error) {
	c.key = ev.KV.Key
	switch {
	case strings.HasPrefix(c.key, m.nodePrefix):
		c.gvr = nodesGVR
	case strings.HasPrefix(c.key, m.podPrefix):
		c.gvr = podsGVR
	case strings.HasPrefix(c.key, m.leasePrefix):
		c.gvr = leasesGVR
	case strings.HasPrefix(c.key, m.claimPrefix):
		c.gvr = claimsGVR
	case strings.HasPrefix(c.key, m.volumePrefix):
		c.gvr = volumesGVR
	case strings.HasPrefix(c.key, m.attachmentPrefix):
		c.gvr = attachmentsGVR
	case strings.HasPrefix(c.key, m.setPrefix):
		c.gvr = setsGVR
	case strings.HasPrefix(c.key, m.revisionPrefix):
		// Not decoded: nothing reads a revision's content.
		c.gvr, c.put = revisionsGVR, ev.Type == storage.Put
		return c, true, nil
	default:
		return c, false, nil
	}
	if ev.Type == storage.Put {
		if c.obj, err = m.api.DecodeStored(c.gvr, ev.KV); err != nil {
			return c, false, err
		}
	}
	return c, true, nil
}

// nodeOf is the node a change concerns; "" for the storage and apps
// kinds, which no agent writes.
func (m *mirror) nodeOf(c change) string {
	switch c.gvr {
	case nodesGVR:
		return strings.TrimPrefix(c.key, m.nodePrefix)
	case leasesGVR:
		return strings.TrimPrefix(c.key, m.leasePrefix)
	case claimsGVR, volumesGVR, attachmentsGVR, setsGVR, revisionsGVR:
		return ""
	}
	if p, ok := c.obj.(*corev1.Pod); ok {
		return p.Spec.NodeName
	}
	ns, name, _ := strings.Cut(strings.TrimPrefix(c.key, m.podPrefix), "/")
	if p := m.pods[types.NamespacedName{Namespace: ns, Name: name}]; p != nil {
		return p.Spec.NodeName
	}
	return ""
}

func (m *mirror) apply(c change) {
	switch c.gvr {
	case nodesGVR:
		name := strings.TrimPrefix(c.key, m.nodePrefix)
		old := m.nodes[name]
		cur, _ := c.obj.(*corev1.Node)
		i, found := slices.BinarySearch(m.names, name)
		switch {
		case cur == nil:
			delete(m.nodes, name)
			if found {
				m.names = slices.Delete(m.names, i, i+1)
			}
		default:
			m.nodes[name] = cur
			if !found {
				m.names = slices.Insert(m.names, i, name)
			}
		}
		m.observer.nodeChanged(old, cur)
	case leasesGVR:
		name := strings.TrimPrefix(c.key, m.leasePrefix)
		if l, ok := c.obj.(*coordinationv1.Lease); ok {
			m.leases[name] = l
		} else {
			delete(m.leases, name)
		}
	case podsGVR:
		ns, name, _ := strings.Cut(strings.TrimPrefix(c.key, m.podPrefix), "/")
		k := types.NamespacedName{Namespace: ns, Name: name}
		old := m.pods[k]
		cur, _ := c.obj.(*corev1.Pod)
		if old != nil {
			delete(m.podsOn[old.Spec.NodeName], k)
		}
		if cur == nil {
			delete(m.pods, k)
			delete(m.fresh, k)
		} else {
			if cur.Spec.NodeName != "" && (old == nil || old.UID != cur.UID || old.Spec.NodeName != cur.Spec.NodeName) {
				m.fresh[k] = struct{}{}
			}
			m.pods[k] = cur
			on := m.podsOn[cur.Spec.NodeName]
			if on == nil {
				on = map[types.NamespacedName]struct{}{}
				m.podsOn[cur.Spec.NodeName] = on
			}
			on[k] = struct{}{}
		}
		m.observer.podChanged(old, cur)
	case claimsGVR:
		ns, name, _ := strings.Cut(strings.TrimPrefix(c.key, m.claimPrefix), "/")
		k := types.NamespacedName{Namespace: ns, Name: name}
		old := m.claims[k]
		cur, _ := c.obj.(*corev1.PersistentVolumeClaim)
		setOrDelete(m.claims, k, cur)
		m.observer.claimChanged(old, cur)
	case volumesGVR:
		name := strings.TrimPrefix(c.key, m.volumePrefix)
		old := m.volumes[name]
		cur, _ := c.obj.(*corev1.PersistentVolume)
		setOrDelete(m.volumes, name, cur)
		m.observer.volumeChanged(old, cur)
	case attachmentsGVR:
		name := strings.TrimPrefix(c.key, m.attachmentPrefix)
		old := m.attachments[name]
		cur, _ := c.obj.(*storagev1.VolumeAttachment)
		setOrDelete(m.attachments, name, cur)
		m.observer.attachmentChanged(old, cur)
	case setsGVR:
		ns, name, _ := strings.Cut(strings.TrimPrefix(c.key, m.setPrefix), "/")
		k := types.NamespacedName{Namespace: ns, Name: name}
		old := m.sets[k]
		cur, _ := c.obj.(*appsv1.StatefulSet)
		setOrDelete(m.sets, k, cur)
		m.observer.setChanged(old, cur)
	case revisionsGVR:
		name := strings.TrimPrefix(c.key, m.revisionPrefix)
		if c.put {
			m.revisions[name] = true
		} else {
			delete(m.revisions, name)
		}
		m.observer.revisionChanged()
	}
}

// setOrDelete stores cur under k, or deletes k when cur is nil.
func setOrDelete[K comparable, V any](m map[K]*V, k K, cur *V) {
	if cur == nil {
		delete(m, k)
		return
	}
	m[k] = cur
}

// podsOnNode returns the pods bound to node, by key.
func (m *mirror) podsOnNode(node string) []*corev1.Pod {
	keys := make([]types.NamespacedName, 0, len(m.podsOn[node]))
	for k := range m.podsOn[node] {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	out := make([]*corev1.Pod, len(keys))
	for i, k := range keys {
		out[i] = m.pods[k]
	}
	return out
}

func (m *mirror) lookup() tainteviction.Lookup {
	return tainteviction.Lookup{
		Node: func(name string) *corev1.Node { return m.nodes[name] },
		Pod:  func(key types.NamespacedName) *corev1.Pod { return m.pods[key] },
	}
}

// source is the node lifecycle controller's view of the mirror. Every read
// refreshes it first, so the controller sees its own writes.
type source struct{ m *mirror }

var _ nodelifecycle.Source = source{}

func (s source) Nodes(context.Context) ([]*corev1.Node, error) {
	if err := s.m.refresh(); err != nil {
		return nil, err
	}
	out := make([]*corev1.Node, len(s.m.names))
	for i, name := range s.m.names {
		out[i] = s.m.nodes[name]
	}
	return out, nil
}

func (s source) Leases(context.Context) (map[string]*coordinationv1.Lease, error) {
	if err := s.m.refresh(); err != nil {
		return nil, err
	}
	out := make(map[string]*coordinationv1.Lease, len(s.m.leases))
	for name, l := range s.m.leases {
		out[name] = l
	}
	return out, nil
}

// NewlyBound returns the pods bound since the last call, by key.
func (s source) NewlyBound(context.Context) ([]*corev1.Pod, error) {
	if err := s.m.refresh(); err != nil {
		return nil, err
	}
	out := make([]*corev1.Pod, 0, len(s.m.fresh))
	for k := range s.m.fresh {
		out = append(out, s.m.pods[k])
	}
	clear(s.m.fresh)
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out, nil
}

func (s source) Node(_ context.Context, name string) (*corev1.Node, error) {
	if err := s.m.refresh(); err != nil {
		return nil, err
	}
	n, ok := s.m.nodes[name]
	if !ok {
		return nil, apierrors.NewNotFound(nodesGVR.GroupResource(), name)
	}
	return n, nil
}

func (s source) PodsOnNode(_ context.Context, node string) ([]*corev1.Pod, error) {
	if err := s.m.refresh(); err != nil {
		return nil, err
	}
	return s.m.podsOnNode(node), nil
}

// nodeLister serves each agent's reads of its own Node from the mirror, in
// the role of the kubelet's node informer.
type nodeLister struct{ m *mirror }

func (l nodeLister) Get(name string) (*corev1.Node, error) {
	if n := l.m.nodes[name]; n != nil {
		return n, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
}

// podLister serves each pod worker's pods from the mirror, in the role of
// the kubelet's API pod source.
type podLister struct{ m *mirror }

func (l podLister) PodsOn(nodeName string) ([]*corev1.Pod, bool) {
	keys := l.m.podsOn[nodeName]
	out := make([]*corev1.Pod, 0, len(keys))
	for k := range keys {
		out = append(out, l.m.pods[k])
	}
	return out, true
}
