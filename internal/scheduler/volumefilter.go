package scheduler

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

// Reasons of the volume filters. All but ReasonReadWriteOnceElsewhere are
// upstream's words (VolumeBinding, NodeVolumeLimits, VolumeRestrictions).
const (
	// ReasonUnboundImmediate is the whole message part when a claim of
	// the pod should have been bound by the PV controller already (its
	// class binds Immediately, or it has no class) but is not.
	ReasonUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"
	// ReasonVolumeNodeConflict: a bound volume's node affinity excludes
	// the node.
	ReasonVolumeNodeConflict = "node(s) had volume node affinity conflict"
	// ReasonVolumeBindConflict: an unbound WaitForFirstConsumer claim has
	// neither a matching available volume nor a way to be provisioned on
	// the node (or it was already given another node).
	ReasonVolumeBindConflict = "node(s) didn't find available persistent volumes to bind"
	// ReasonVolumeNotExist: a claim is bound to a volume that does not
	// exist.
	ReasonVolumeNotExist = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	// ReasonMaxVolumeCount: the node's CSINode limits a driver to fewer
	// volumes than its pods and the new pod would use.
	ReasonMaxVolumeCount = "node(s) exceed max volume count"
	// ReasonReadWriteOncePodConflict: another pod uses a ReadWriteOncePod
	// claim of the pod.
	ReasonReadWriteOncePodConflict = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
	// ReasonReadWriteOnceElsewhere is knode's own: another pod uses a
	// ReadWriteOnce claim of the pod on a different node, and the volume
	// can be attached to one node at a time.
	ReasonReadWriteOnceElsewhere = "node(s) didn't run the pods already using a ReadWriteOnce PersistentVolumeClaim of the pod"
)

// noProvisioner is the provisioner of classes that cannot provision.
const noProvisioner = "kubernetes.io/no-provisioner"

var (
	statusVolumeRWOP     = &Status{Code: Unschedulable, Reasons: []string{ReasonReadWriteOncePodConflict}}
	statusVolumeRWO      = &Status{Code: UnschedulableAndUnresolvable, Reasons: []string{ReasonReadWriteOnceElsewhere}}
	statusMaxVolumeCount = &Status{Code: Unschedulable, Reasons: []string{ReasonMaxVolumeCount}}
)

// podVolumes is what the volume filters work out once per pod and
// decision (upstream's PreFilter state of VolumeRestrictions,
// NodeVolumeLimits and VolumeBinding), so that each node costs only what
// depends on it. It reads the snapshot it was made from, which must not
// change while it is in use, and is used by one goroutine.
//
// Cost model: building it is O(claims + volumes of the claims' classes);
// then each node costs O(users of its ReadWriteOnce claims), plus, when
// the node's CSINode limits one of its drivers, O(claims of the node's
// pods) map lookups, plus O(bound volumes' affinity terms + candidate
// volumes) for the binding check. BenchmarkScheduleVolumes measures about
// 2,500 decisions/s over 1,000 nodes on a 2-core machine, against some
// 20,000 for pods without claims, which pay none of this.
type podVolumes struct {
	pod  *PodInfo
	snap *Snapshot
	// bound are the pod's fully bound claims, in the pod's order.
	bound []boundClaim
	// delayed are its unbound WaitForFirstConsumer claims, smallest
	// request first.
	delayed []*delayedClaim
	// rwop are the other counted pods using its ReadWriteOncePod claims;
	// rwo those using its ReadWriteOnce-only claims, with their nodes.
	rwop, rwo []claimUser
	// csi are the pod's distinct CSI volumes as NodeVolumeLimits counts
	// them, and drivers their distinct drivers.
	csi     []csiVolume
	drivers []string
	// scratch is reused by limits for each node.
	scratch []csiVolume
}

// csiVolume is a volume as NodeVolumeLimits counts it: a driver and a
// handle, or for a claim not bound yet the claim (upstream gives it a
// made-up handle from the claim's key).
type csiVolume struct {
	driver, handle string
	pending        types.NamespacedName
}

type boundClaim struct {
	claim *corev1.PersistentVolumeClaim
	pv    *volumeEntry // nil: the volume does not exist
}

type claimUser struct {
	pod  types.NamespacedName
	node string
}

// delayedClaim is an unbound claim whose class waits for the first
// consumer.
type delayedClaim struct {
	claim *corev1.PersistentVolumeClaim
	class *storagev1.StorageClass
	// selected is the node the claim was already given
	// (volume.kubernetes.io/selected-node), "" for none.
	selected string
	// prebound are the volumes whose claimRef names this claim, whatever
	// their phase; candidates the Available volumes that could take it,
	// smallest first. Both leave node affinity to be checked per node.
	prebound, candidates []*volumeEntry
}

// volumesFor works out the pod's volume state from the snapshot. A
// non-empty message means the pod cannot be scheduled anywhere now
// (upstream's PreFilter rejections): a claim missing, lost or being
// deleted, or an unbound claim the PV controller should bind itself.
func (s *Snapshot) volumesFor(pod *PodInfo) (*podVolumes, string) {
	ns := pod.Key.Namespace
	st := &s.storage
	v := &podVolumes{pod: pod, snap: s}
	claims := make([]*corev1.PersistentVolumeClaim, len(pod.claims))
	// VolumeRestrictions: every claim must exist.
	for i, name := range pod.claims {
		c := st.claims[types.NamespacedName{Namespace: ns, Name: name}]
		if c == nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q not found", name)
		}
		claims[i] = c
	}
	// VolumeBinding: none may be lost or on its way out.
	for _, c := range claims {
		if c.Status.Phase == corev1.ClaimLost {
			return nil, fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", c.Name, c.Spec.VolumeName)
		}
		if c.DeletionTimestamp != nil {
			return nil, fmt.Sprintf("persistentvolumeclaim %q is being deleted", c.Name)
		}
	}
	for i, name := range pod.claims {
		key := types.NamespacedName{Namespace: ns, Name: name}
		c := s.Claim(key)
		switch {
		case fullyBound(c):
			v.bound = append(v.bound, boundClaim{claim: c, pv: st.volumes[c.Spec.VolumeName]})
		case c.Spec.VolumeName == "" && s.delayBinding(c):
			v.delayed = append(v.delayed, s.newDelayedClaim(c))
		default:
			return nil, ReasonUnboundImmediate
		}
		modes := claims[i].Spec.AccessModes
		switch {
		case slices.Contains(modes, corev1.ReadWriteOncePod):
			v.rwop = st.appendUsers(v.rwop, key, pod.Key, true)
		case slices.Contains(modes, corev1.ReadWriteOnce) && !slices.Contains(modes, corev1.ReadWriteMany) && !slices.Contains(modes, corev1.ReadOnlyMany):
			v.rwo = st.appendUsers(v.rwo, key, pod.Key, false)
		}
		if cv, ok := s.csiVolume(claims[i]); ok {
			if !slices.Contains(v.csi, cv) {
				v.csi = append(v.csi, cv)
			}
			if !slices.Contains(v.drivers, cv.driver) {
				v.drivers = append(v.drivers, cv.driver)
			}
		}
	}
	// Smaller requests pick their volumes first, as upstream.
	slices.SortStableFunc(v.delayed, func(a, b *delayedClaim) int {
		qa, qb := claimRequest(a.claim), claimRequest(b.claim)
		return qa.Cmp(qb)
	})
	return v, ""
}

// appendUsers adds the counted pods using claim, but self and, unless
// leaving is set, those being deleted, in a fixed order.
func (st *storage) appendUsers(out []claimUser, claim, self types.NamespacedName, leaving bool) []claimUser {
	start := len(out)
	for pod, u := range st.users[claim] {
		if pod != self && (leaving || !u.leaving) {
			out = append(out, claimUser{pod: pod, node: u.node})
		}
	}
	slices.SortFunc(out[start:], func(a, b claimUser) int { return compareKeys(a.pod, b.pod) })
	return out
}

// fullyBound reports whether the PV controller finished binding the claim.
func fullyBound(c *corev1.PersistentVolumeClaim) bool {
	_, done := c.Annotations[volume.AnnBindCompleted]
	return c.Spec.VolumeName != "" && done
}

// delayBinding reports whether the claim's class waits for the first
// consumer. No class, or a class that does not exist, binds Immediately.
func (s *Snapshot) delayBinding(c *corev1.PersistentVolumeClaim) bool {
	sc := s.storage.classes[volume.ClaimClass(c)]
	return sc != nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

func claimRequest(c *corev1.PersistentVolumeClaim) resource.Quantity {
	return c.Spec.Resources.Requests[corev1.ResourceStorage]
}

// newDelayedClaim gathers what matching the claim needs that does not
// depend on the node. A selected node the snapshot does not know (deleted
// since) counts as no selection, so that the pod can go elsewhere: a
// departure from upstream, whose pod would wait for the provisioner to
// give the claim up.
func (s *Snapshot) newDelayedClaim(c *corev1.PersistentVolumeClaim) *delayedClaim {
	st := &s.storage
	class := volume.ClaimClass(c)
	d := &delayedClaim{claim: c, class: st.classes[class]}
	if sel, ok := c.Annotations[volume.AnnSelectedNode]; ok && s.Node(sel) != nil {
		d.selected = sel
		return d
	}
	var selector labels.Selector
	if c.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(c.Spec.Selector)
		if err != nil {
			return d // matches no volume; provisioning may still do
		}
		selector = sel
	}
	want := claimRequest(c)
	for _, name := range sortedNames(st.byClass[class]) {
		e := st.volumes[name]
		pv := e.current()
		preboundHere := pv.Spec.ClaimRef != nil && boundToClaim(pv, c)
		if pv.Spec.ClaimRef != nil && !preboundHere {
			continue
		}
		have := pv.Spec.Capacity[corev1.ResourceStorage]
		if have.Cmp(want) < 0 || volumeModeMismatch(c, pv) || pv.DeletionTimestamp != nil {
			continue
		}
		if preboundHere {
			d.prebound = append(d.prebound, e)
			continue
		}
		if pv.Status.Phase != corev1.VolumeAvailable ||
			(selector != nil && !selector.Matches(labels.Set(pv.Labels))) ||
			!accessModesFit(c, pv) ||
			deref(c.Spec.VolumeAttributesClassName) != deref(pv.Spec.VolumeAttributesClassName) {
			continue
		}
		d.candidates = append(d.candidates, e)
	}
	slices.SortStableFunc(d.candidates, func(a, b *volumeEntry) int {
		qa, qb := a.current().Spec.Capacity[corev1.ResourceStorage], b.current().Spec.Capacity[corev1.ResourceStorage]
		return qa.Cmp(qb)
	})
	return d
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// boundToClaim reports whether the volume's claimRef names the claim (and
// its uid, when the claimRef has one).
func boundToClaim(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) bool {
	ref := pv.Spec.ClaimRef
	return ref != nil && ref.Name == c.Name && ref.Namespace == c.Namespace && (ref.UID == "" || ref.UID == c.UID)
}

// volumeModeMismatch compares volume modes, an unset one being Filesystem.
func volumeModeMismatch(c *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	want, have := corev1.PersistentVolumeFilesystem, corev1.PersistentVolumeFilesystem
	if c.Spec.VolumeMode != nil {
		want = *c.Spec.VolumeMode
	}
	if pv.Spec.VolumeMode != nil {
		have = *pv.Spec.VolumeMode
	}
	return want != have
}

// accessModesFit reports whether the volume offers every mode the claim
// asks for.
func accessModesFit(c *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) bool {
	for _, m := range c.Spec.AccessModes {
		if !slices.Contains(pv.Spec.AccessModes, m) {
			return false
		}
	}
	return true
}

// csiVolume names the CSI volume a claim stands for, as NodeVolumeLimits
// does: the bound volume's driver and handle; for a claim not bound (or
// bound to a volume not seen) its class's provisioner and the claim. ok
// is false for a volume that is not CSI or a claim without a class.
func (s *Snapshot) csiVolume(c *corev1.PersistentVolumeClaim) (cv csiVolume, ok bool) {
	st := &s.storage
	if c.Spec.VolumeName != "" {
		if e := st.volumes[c.Spec.VolumeName]; e != nil {
			if src := e.api.Spec.CSI; src != nil {
				return csiVolume{driver: src.Driver, handle: src.VolumeHandle}, true
			}
			return cv, false
		}
	}
	sc := st.classes[volume.ClaimClass(c)]
	if sc == nil {
		return cv, false
	}
	return csiVolume{driver: sc.Provisioner, pending: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}}, true
}

// filter runs the volume filters on a node in upstream's order
// (VolumeRestrictions, NodeVolumeLimits, VolumeBinding), leaving out the
// pods in gone (those preemption would evict; nil for none).
func (v *podVolumes) filter(n *NodeInfo, gone map[types.NamespacedName]bool) *Status {
	for _, u := range v.rwop {
		if !gone[u.pod] {
			return statusVolumeRWOP
		}
	}
	for _, u := range v.rwo {
		if u.node != n.Node.Name {
			return statusVolumeRWO
		}
	}
	if st := v.limits(n, gone); st != nil {
		return st
	}
	return v.binding(n)
}

// limits is NodeVolumeLimits: per driver that the node's CSINode gives an
// allocatable count, the node's distinct CSI volumes plus the pod's new
// ones must not pass it.
func (v *podVolumes) limits(n *NodeInfo, gone map[types.NamespacedName]bool) *Status {
	if len(v.drivers) == 0 {
		return nil
	}
	cn := v.snap.storage.csiNodes[n.Node.Name]
	if cn == nil {
		return nil
	}
	var attached []csiVolume // the node's, gathered on first need
	gathered := false
	for _, driver := range v.drivers {
		max, ok := allocatableCount(cn, driver)
		if !ok {
			continue
		}
		if !gathered {
			v.scratch = v.attached(v.scratch[:0], n, gone)
			attached, gathered = v.scratch, true
		}
		count := 0
		for _, cv := range attached {
			if cv.driver == driver {
				count++
			}
		}
		for _, cv := range v.csi {
			if cv.driver == driver && !slices.Contains(attached, cv) {
				count++
			}
		}
		if count > int(max) {
			return statusMaxVolumeCount
		}
	}
	return nil
}

// allocatableCount is the CSINode's volume limit for driver; ok is false
// when it sets none.
func allocatableCount(cn *storagev1.CSINode, driver string) (int32, bool) {
	for i := range cn.Spec.Drivers {
		d := &cn.Spec.Drivers[i]
		if d.Name == driver && d.Allocatable != nil && d.Allocatable.Count != nil {
			return *d.Allocatable.Count, true
		}
	}
	return 0, false
}

// attached appends to out the distinct CSI volumes of the node's pods but
// those in gone; a claim that does not exist is not counted.
func (v *podVolumes) attached(out []csiVolume, n *NodeInfo, gone map[types.NamespacedName]bool) []csiVolume {
	for key, claims := range n.volumePods {
		if gone[key] {
			continue
		}
		for _, name := range claims {
			c := v.snap.storage.claims[types.NamespacedName{Namespace: key.Namespace, Name: name}]
			if c == nil {
				continue
			}
			if cv, ok := v.snap.csiVolume(c); ok && !slices.Contains(out, cv) {
				out = append(out, cv)
			}
		}
	}
	return out
}

// binding is VolumeBinding's filter: bound volumes' node affinity must
// admit the node, and each unbound WaitForFirstConsumer claim must find an
// available volume there or be provisionable there.
func (v *podVolumes) binding(n *NodeInfo) *Status {
	nodeConflict, bindConflict, missing := false, false, false
	for _, b := range v.bound {
		if b.pv == nil {
			missing = true
			break
		}
		if !b.pv.affinity.matches(n.Node.Labels) {
			nodeConflict = true
			break
		}
	}
	if len(v.delayed) > 0 {
		_, ok := v.assign(n.Node)
		bindConflict = !ok
	}
	if !nodeConflict && !bindConflict && !missing {
		return nil
	}
	st := &Status{Code: UnschedulableAndUnresolvable}
	if nodeConflict {
		st.Reasons = append(st.Reasons, ReasonVolumeNodeConflict)
	}
	if bindConflict {
		st.Reasons = append(st.Reasons, ReasonVolumeBindConflict)
	}
	if missing {
		st.Reasons = append(st.Reasons, ReasonVolumeNotExist)
	}
	return st
}

// volumePlan is what must happen before a pod with unbound
// WaitForFirstConsumer claims is bound to its node (upstream's PreBind):
// volumes to pre-bind to their claims and claims to give the node for
// provisioning; then the scheduler waits until every one is fully bound.
type volumePlan struct {
	node       string
	bindings   []planBinding
	provisions []planProvision
	// written is set once the writes went through.
	written bool
}

// planBinding is a static volume for a claim: pv is the volume with its
// claimRef set; write is false when it was already so, and done once
// written. rv is the version written (or read), so that the wait can tell
// the informer caught up.
type planBinding struct {
	pv          *corev1.PersistentVolume
	claim       types.NamespacedName
	write, done bool
	rv          string
}

// planProvision is a claim to provision: claim carries the selected-node
// annotation. The other fields are planBinding's.
type planProvision struct {
	claim       *corev1.PersistentVolumeClaim
	write, done bool
	rv          string
}

// assignment is where a node would take each delayed claim from.
type assignment struct {
	volumes   []*volumeEntry  // chosen static volumes
	claims    []*delayedClaim // the claim of each, in the same order
	provision []*delayedClaim // claims to provision
}

// assign matches the delayed claims on a node: the volume each claim
// gets, or that it is to be provisioned. ok is false when some claim can
// have neither there, or was given another node already.
func (v *podVolumes) assign(node *corev1.Node) (a assignment, ok bool) {
	for _, d := range v.delayed {
		if d.selected != "" && d.selected != node.Name {
			return a, false
		}
	}
	for _, d := range v.delayed {
		if d.selected == "" {
			if e := d.match(node.Labels, a.volumes); e != nil {
				a.volumes = append(a.volumes, e)
				a.claims = append(a.claims, d)
				continue
			}
		}
		a.provision = append(a.provision, d)
	}
	for _, d := range a.provision {
		if !d.provisionable(node.Labels) {
			return a, false
		}
	}
	return a, true
}

// plan is what must be written for the pod's delayed claims to be bound
// on node; nil when the pod has none, or none fits there. Its objects are
// new copies, to be assumed and written.
func (v *podVolumes) plan(node *corev1.Node) *volumePlan {
	if len(v.delayed) == 0 {
		return nil
	}
	a, ok := v.assign(node)
	if !ok {
		return nil
	}
	p := &volumePlan{node: node.Name}
	for i, e := range a.volumes {
		c := a.claims[i].claim
		pv, changed := bindVolume(e.current(), c)
		p.bindings = append(p.bindings, planBinding{pv: pv, claim: keyOf(c), write: changed, rv: e.api.ResourceVersion})
	}
	for _, d := range a.provision {
		c := d.claim
		pr := planProvision{claim: c, rv: c.ResourceVersion}
		if c.Annotations[volume.AnnSelectedNode] != node.Name {
			c = c.DeepCopy()
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, volume.AnnSelectedNode, node.Name)
			pr.claim, pr.write = c, true
		}
		p.provisions = append(p.provisions, pr)
	}
	return p
}

func keyOf(c *corev1.PersistentVolumeClaim) types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// match finds the claim's volume on a node with these labels, skipping
// those already chosen: a volume pre-bound to the claim wins (or, if its
// affinity excludes the node, nothing does); else the smallest candidate
// the node may use.
func (d *delayedClaim) match(nodeLabels map[string]string, chosen []*volumeEntry) *volumeEntry {
	for _, e := range d.prebound {
		if slices.Contains(chosen, e) {
			continue
		}
		if e.affinity.matches(nodeLabels) {
			return e
		}
		return nil
	}
	for _, e := range d.candidates {
		if !slices.Contains(chosen, e) && e.affinity.matches(nodeLabels) {
			return e
		}
	}
	return nil
}

// provisionable reports whether the claim's class can provision a volume
// for a node with these labels: it has a provisioner and its
// allowedTopologies admit the node. Storage capacity is not checked.
func (d *delayedClaim) provisionable(nodeLabels map[string]string) bool {
	sc := d.class
	if sc == nil || sc.Provisioner == "" || sc.Provisioner == noProvisioner {
		return false
	}
	return topologyAllows(sc.AllowedTopologies, nodeLabels)
}

// topologyAllows matches a class's allowedTopologies: no terms admit every
// node; otherwise some term with expressions must have every key among the
// labels with one of its values.
func topologyAllows(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
next:
	for _, t := range terms {
		if len(t.MatchLabelExpressions) == 0 {
			continue
		}
		for _, e := range t.MatchLabelExpressions {
			v, ok := nodeLabels[e.Key]
			if !ok || !slices.Contains(e.Values, v) {
				continue next
			}
		}
		return true
	}
	return false
}

// bindVolume returns a copy of pv with its claimRef naming the claim (and
// the bound-by-controller annotation when the scheduler, not the user,
// made the link), and whether anything changed.
func bindVolume(pv *corev1.PersistentVolume, c *corev1.PersistentVolumeClaim) (*corev1.PersistentVolume, bool) {
	out := pv.DeepCopy()
	changed := false
	ref := pv.Spec.ClaimRef
	if ref == nil || ref.Name != c.Name || ref.Namespace != c.Namespace || ref.UID != c.UID {
		out.Spec.ClaimRef = &corev1.ObjectReference{
			Kind:            "PersistentVolumeClaim",
			APIVersion:      "v1",
			Namespace:       c.Namespace,
			Name:            c.Name,
			UID:             c.UID,
			ResourceVersion: c.ResourceVersion,
		}
		changed = true
	}
	if !boundToClaim(pv, c) {
		if _, ok := out.Annotations[volume.AnnBoundByController]; !ok {
			metav1.SetMetaDataAnnotation(&out.ObjectMeta, volume.AnnBoundByController, "yes")
			changed = true
		}
	}
	return out, changed
}
