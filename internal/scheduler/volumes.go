package scheduler

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

// storage is the part of a Snapshot the volume filters read: the claims,
// volumes, storage classes and CSINodes as the informers last showed them,
// the scheduler's own assumptions laid over claims and volumes (a claim
// given a selected node, a volume given a claimRef, before the write is
// seen), and which counted pods use each claim.
//
// An assumption lasts until the informer brings a newer version of the
// object, which replaces it, or until it is restored; so a pass never picks
// a volume another pod of the pass took, as upstream's assume cache does.
type storage struct {
	claims        map[types.NamespacedName]*corev1.PersistentVolumeClaim
	assumedClaims map[types.NamespacedName]*corev1.PersistentVolumeClaim
	volumes       map[string]*volumeEntry
	// byClass indexes volumes by their class (volume.VolumeClass).
	byClass  map[string]map[string]struct{}
	classes  map[string]*storagev1.StorageClass
	csiNodes map[string]*storagev1.CSINode
	// users are, per claim, the counted pods (bound or assumed, not
	// finished) that use it.
	users map[types.NamespacedName]map[types.NamespacedName]claimUse
}

// claimUse is where a counted pod uses a claim, and whether the pod is
// being deleted.
type claimUse struct {
	node    string
	leaving bool
}

// volumeEntry is one PersistentVolume: the informer's version, the
// scheduler's assumed version (nil when none), and its node affinity,
// parsed once.
type volumeEntry struct {
	api, assumed *corev1.PersistentVolume
	affinity     volumeAffinity
}

// current is the version the filters read.
func (e *volumeEntry) current() *corev1.PersistentVolume {
	if e.assumed != nil {
		return e.assumed
	}
	return e.api
}

func newStorage() storage {
	return storage{
		claims:        map[types.NamespacedName]*corev1.PersistentVolumeClaim{},
		assumedClaims: map[types.NamespacedName]*corev1.PersistentVolumeClaim{},
		volumes:       map[string]*volumeEntry{},
		byClass:       map[string]map[string]struct{}{},
		classes:       map[string]*storagev1.StorageClass{},
		csiNodes:      map[string]*storagev1.CSINode{},
		users:         map[types.NamespacedName]map[types.NamespacedName]claimUse{},
	}
}

// use records that the pod, counted on node, uses the claims of its
// namespace.
func (st *storage) use(pod types.NamespacedName, claims []string, u claimUse) {
	for _, c := range claims {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: c}
		m := st.users[key]
		if m == nil {
			m = map[types.NamespacedName]claimUse{}
			st.users[key] = m
		}
		m[pod] = u
	}
}

// release undoes use.
func (st *storage) release(pod types.NamespacedName, claims []string) {
	for _, c := range claims {
		key := types.NamespacedName{Namespace: pod.Namespace, Name: c}
		delete(st.users[key], pod)
		if len(st.users[key]) == 0 {
			delete(st.users, key)
		}
	}
}

// SetClaim adds a PersistentVolumeClaim or replaces it with a newer
// version, which also ends the scheduler's assumption about it.
func (s *Snapshot) SetClaim(pvc *corev1.PersistentVolumeClaim) {
	key := types.NamespacedName{Namespace: pvc.Namespace, Name: pvc.Name}
	s.storage.claims[key] = pvc
	delete(s.storage.assumedClaims, key)
}

// RemoveClaim forgets a PersistentVolumeClaim.
func (s *Snapshot) RemoveClaim(key types.NamespacedName) {
	delete(s.storage.claims, key)
	delete(s.storage.assumedClaims, key)
}

// Claim returns the claim as the filters see it (with the scheduler's
// assumption, if any), or nil.
func (s *Snapshot) Claim(key types.NamespacedName) *corev1.PersistentVolumeClaim {
	if c := s.storage.assumedClaims[key]; c != nil {
		return c
	}
	return s.storage.claims[key]
}

// SetVolume adds a PersistentVolume or replaces it with a newer version,
// which also ends the scheduler's assumption about it.
func (s *Snapshot) SetVolume(pv *corev1.PersistentVolume) {
	st := &s.storage
	if old := st.volumes[pv.Name]; old != nil {
		st.unindex(old.api)
	}
	st.volumes[pv.Name] = &volumeEntry{api: pv, affinity: newVolumeAffinity(pv)}
	class := volume.VolumeClass(pv)
	m := st.byClass[class]
	if m == nil {
		m = map[string]struct{}{}
		st.byClass[class] = m
	}
	m[pv.Name] = struct{}{}
}

// RemoveVolume forgets a PersistentVolume.
func (s *Snapshot) RemoveVolume(name string) {
	st := &s.storage
	if old := st.volumes[name]; old != nil {
		st.unindex(old.api)
		delete(st.volumes, name)
	}
}

func (st *storage) unindex(pv *corev1.PersistentVolume) {
	class := volume.VolumeClass(pv)
	delete(st.byClass[class], pv.Name)
	if len(st.byClass[class]) == 0 {
		delete(st.byClass, class)
	}
}

// Volume returns the volume as the filters see it (with the scheduler's
// assumption, if any), or nil.
func (s *Snapshot) Volume(name string) *corev1.PersistentVolume {
	if e := s.storage.volumes[name]; e != nil {
		return e.current()
	}
	return nil
}

// SetClass adds or replaces a StorageClass.
func (s *Snapshot) SetClass(sc *storagev1.StorageClass) { s.storage.classes[sc.Name] = sc }

// RemoveClass forgets a StorageClass.
func (s *Snapshot) RemoveClass(name string) { delete(s.storage.classes, name) }

// SetCSINode adds or replaces a CSINode.
func (s *Snapshot) SetCSINode(cn *storagev1.CSINode) { s.storage.csiNodes[cn.Name] = cn }

// RemoveCSINode forgets a CSINode.
func (s *Snapshot) RemoveCSINode(name string) { delete(s.storage.csiNodes, name) }

// assumeClaim lays pvc over the informer's version until a newer one comes.
func (s *Snapshot) assumeClaim(pvc *corev1.PersistentVolumeClaim) {
	key := types.NamespacedName{Namespace: pvc.Namespace, Name: pvc.Name}
	if _, ok := s.storage.claims[key]; ok {
		s.storage.assumedClaims[key] = pvc
	}
}

// assumeVolume lays pv over the informer's version until a newer one
// comes. The class and node affinity must be the informer's.
func (s *Snapshot) assumeVolume(pv *corev1.PersistentVolume) {
	if e := s.storage.volumes[pv.Name]; e != nil {
		e.assumed = pv
	}
}

// restore drops the assumptions the plan made and did not write. Those
// written stay until the informer brings the written version, being
// true; those the plan relied on (another pod's, for a claim they share)
// stay too.
func (s *Snapshot) restore(p *volumePlan) {
	for _, b := range p.bindings {
		if e := s.storage.volumes[b.pv.Name]; e != nil && b.write && !b.done && e.assumed == b.pv {
			e.assumed = nil
		}
	}
	for _, pr := range p.provisions {
		key := types.NamespacedName{Namespace: pr.claim.Namespace, Name: pr.claim.Name}
		if pr.write && !pr.done && s.storage.assumedClaims[key] == pr.claim {
			delete(s.storage.assumedClaims, key)
		}
	}
}

// volumeAffinity is a PersistentVolume's spec.nodeAffinity.required,
// parsed once. It is matched against a node's labels only, as upstream
// matches it.
type volumeAffinity struct {
	required bool
	terms    []nodeTerm
}

func newVolumeAffinity(pv *corev1.PersistentVolume) volumeAffinity {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return volumeAffinity{}
	}
	a := volumeAffinity{required: true}
	for i := range na.Required.NodeSelectorTerms {
		a.terms = append(a.terms, newNodeTerm(&na.Required.NodeSelectorTerms[i]))
	}
	return a
}

// matches reports whether a node with these labels satisfies the
// affinity: no affinity matches every node; otherwise some valid term
// must match.
func (a *volumeAffinity) matches(nodeLabels map[string]string) bool {
	if !a.required {
		return true
	}
	for i := range a.terms {
		if t := &a.terms[i]; !t.invalid && t.matchesNode("", nodeLabels) {
			return true
		}
	}
	return false
}

// podClaims is volume.PodClaims, without any allocation for a pod that
// uses no claim.
func podClaims(pod *corev1.Pod) []string {
	if !usesClaims(pod) {
		return nil
	}
	return volume.PodClaims(pod)
}

// usesClaims reports whether some volume of the pod is a claim.
func usesClaims(pod *corev1.Pod) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

// resourceVersion parses an object's resourceVersion; ok is false when it
// is not a number.
func resourceVersion(rv string) (int64, bool) {
	n, err := strconv.ParseInt(rv, 10, 64)
	return n, err == nil
}

// olderThan reports whether the informer's object (rv have) is older than
// the version the scheduler wrote (want). Unparsable versions are never
// older.
func olderThan(have, want string) bool {
	h, ok1 := resourceVersion(have)
	w, ok2 := resourceVersion(want)
	return ok1 && ok2 && h < w
}

// sortedNames returns a set's members in order.
func sortedNames(m map[string]struct{}) []string {
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
