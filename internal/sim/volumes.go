package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"knode/internal/controller/volume/attachdetach"
	"knode/internal/controller/volume/persistentvolume"
	"knode/internal/volume"
)

// Volumes: pods with a persistent volume of their own, and what attaches
// and detaches it.
//
// A pods statement with volume gives each pod a PersistentVolumeClaim,
// data-<pod>, pre-bound to a PersistentVolume made for it, pv-<pod>: a
// ReadWriteOnce CSI volume with the handle vol-<pod> of the simulated
// driver SimDriver, whose CSIDriver says attachRequired. The pod mounts it
// at /data. A StatefulSet with volume gets the same volumes, made before
// the StatefulSet controller creates the claims, and pre-bound to them by
// name only (see statefulsets.go).
//
// The real PV binder (controller/volume/persistentvolume) completes each
// binding, and the real attach/detach controller
// (controller/volume/attachdetach) creates and deletes the
// VolumeAttachments and keeps the Nodes' status.volumesAttached. The agents
// register their Nodes with volumes.kubernetes.io/controller-managed-
// attach-detach, as knode agent does. Both controllers list through the
// API on each pass; they run when something they read changes (a claim, a
// volume, an attachment, a pod that uses a claim, or the readiness,
// out-of-service taint, controller-managed annotation or volume lists of a
// Node while any claim or attachment exists) and the attach/detach
// controller also just after its earliest
// forced detach falls due (NextDue, with the margin its Run loop adds), and
// after its period when a pass failed. A scenario without volumes never
// runs them. What a server's 100 ms reconciler loop adds to that, passes in
// which nothing changed, changes nothing.
//
// The World stands in for the driver's attacher (the external-attacher and
// ControllerPublish): it marks each of SimDriver's new VolumeAttachments
// attached at the instant it sees it. It puts no finalizer on them, so a
// VolumeAttachment the controller deletes is gone at once: that is the
// detach.
//
// As upstream, a pod evicted from a silent node stays Terminating (no
// agent confirms that its containers stopped) and keeps its volume: the
// 6-minute wait for a forced detach starts only once the pod is gone (the
// force-delete action, or the pod garbage collector) or ended. The
// out-of-service taint does not release the volume by itself: it has the
// pod garbage collector force-delete the pod at its next pass, and then
// the controller detaches the volume at once, without the 6-minute wait,
// whether or not --disable-force-detach-on-timeout is set.
//
// Each agent process has a volume manager of its own, simVolumes, in the
// place of internal/agent/volumes (which needs CSI drivers and a
// filesystem): from the pods it runs, it lists their volumes in use, so the
// agent reports them in status.volumesInUse, and it tells the pod worker a
// pod's volumes are ready once they were reported and are attached.

// SimDriver is the CSI driver of the volumes a scenario gives its pods.
const SimDriver = "sim.csi.knode.io"

// volumeSize is the capacity of every scenario volume.
var volumeSize = resource.MustParse("1Gi")

// volumeName and mountPath are the name of a scenario pod's volume and
// where its container mounts it.
const (
	volumeName = "data"
	mountPath  = "/data"
)

// attachDetachDueMargin is how long after NextDue the attach/detach
// controller passes again, as its Run loop waits: a forced detach needs a
// pass strictly after it.
const attachDetachDueMargin = time.Millisecond

// volumeControllers builds the PV binder and the attach/detach controller,
// the latter counting its forced detaches on a registry of the World's own.
func (w *World) volumeControllers() error {
	binder, err := persistentvolume.New(persistentvolume.Config{Client: w.admin, Clock: w.clk, Logger: w.log})
	if err != nil {
		return err
	}
	w.adMetrics = prometheus.NewRegistry()
	ad, err := attachdetach.New(attachdetach.Config{
		Client:                      w.admin,
		Clock:                       w.clk,
		Logger:                      w.log,
		Metrics:                     w.adMetrics,
		DisableForceDetachOnTimeout: w.settings.DisableForceDetachOnTimeout,
	})
	if err != nil {
		return err
	}
	w.binder, w.attachDetach = binder, ad
	return nil
}

// volumeFor makes pod's claim and the volume pre-bound to it, and returns
// the pod volume that mounts the claim.
func (w *World) volumeFor(pod string) (corev1.Volume, error) {
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: volumeName + "-" + pod, Namespace: metav1.NamespaceDefault},
		Spec:       claimSpec("pv-" + pod),
	}
	made, err := w.admin.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(w.ctx, claim, metav1.CreateOptions{})
	if err != nil {
		return corev1.Volume{}, fmt.Errorf("creating PersistentVolumeClaim %s: %w", claim.Name, err)
	}
	if err := w.createVolume(pod, made.Namespace, made.Name, made.UID); err != nil {
		return corev1.Volume{}, err
	}
	return corev1.Volume{
		Name:         volumeName,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: made.Name}},
	}, nil
}

// claimSpec is the spec of every scenario claim: ReadWriteOnce, volumeSize,
// no StorageClass (so it binds at once, to a volume made for it), naming
// volume, or no volume when it is "" (the binder finds the one pre-bound
// to the claim).
func claimSpec(volume string) corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: volumeSize}},
		StorageClassName: ptr.To(""),
		VolumeName:       volume,
	}
}

// createVolume makes pod's PersistentVolume, pv-<pod>: a ReadWriteOnce CSI
// volume of SimDriver with the handle vol-<pod>, pre-bound to the claim
// namespace/name (and uid, when the claim exists already; "" leaves it to
// the binder). SimDriver's CSIDriver is made first, once.
func (w *World) createVolume(pod, namespace, name string, uid types.UID) error {
	if !w.driverMade {
		driver := &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: SimDriver},
			Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)},
		}
		if _, err := w.admin.StorageV1().CSIDrivers().Create(w.ctx, driver, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CSIDriver %s: %w", SimDriver, err)
		}
		w.driverMade = true
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + pod},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: volumeSize},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: namespace, Name: name, UID: uid,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: SimDriver, VolumeHandle: "vol-" + pod},
			},
		},
	}
	if _, err := w.admin.CoreV1().PersistentVolumes().Create(w.ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating PersistentVolume %s: %w", pv.Name, err)
	}
	return nil
}

// claimChanged implements observer: the scheduler hears of it, and the
// binder, the attach/detach controller and, once it exists, the
// StatefulSet controller pass.
func (w *World) claimChanged(old, cur *corev1.PersistentVolumeClaim) {
	if !w.started() {
		return
	}
	switch {
	case old == nil:
		w.claimEvents.OnAdd(cur, false)
	case cur == nil:
		w.claimEvents.OnDelete(old)
	default:
		w.claimEvents.OnUpdate(old, cur)
	}
	w.kick("PV binder", w.bindVolumes)
	w.kickAttachDetach()
	w.kickSets()
}

// volumeChanged implements observer, as claimChanged.
func (w *World) volumeChanged(old, cur *corev1.PersistentVolume) {
	if !w.started() {
		return
	}
	switch {
	case old == nil:
		w.volumeEvents.OnAdd(cur, false)
	case cur == nil:
		w.volumeEvents.OnDelete(old)
	default:
		w.volumeEvents.OnUpdate(old, cur)
	}
	w.kick("PV binder", w.bindVolumes)
	w.kickAttachDetach()
}

// attachmentChanged implements observer: the attach/detach controller
// passes, a new attachment of SimDriver waits for the attacher, and a
// forced detach is counted in its node's zone.
func (w *World) attachmentChanged(old, cur *storagev1.VolumeAttachment) {
	if !w.started() {
		return
	}
	if cur == nil {
		w.countForcedDetach(old)
	} else if cur.Spec.Attacher == SimDriver && !cur.Status.Attached && cur.DeletionTimestamp == nil {
		w.unattached[cur.Name] = true
		w.kick("attacher", w.attach)
	}
	w.kickAttachDetach()
}

// kickAttachDetach runs the attach/detach controller as soon as the
// current callback ends.
func (w *World) kickAttachDetach() { w.kick("attach/detach controller", w.passAttachDetach) }

// usesClaims reports whether p has a volume that names a claim.
func usesClaims(p *corev1.Pod) bool {
	if p == nil {
		return false
	}
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].PersistentVolumeClaim != nil {
			return true
		}
	}
	return false
}

// attachDetachReads reports whether a Node changed in what the
// attach/detach controller reads of it: its existence, readiness,
// out-of-service taint, controller-managed annotation, volumesInUse and
// volumesAttached. A heartbeat alone does not count.
func attachDetachReads(old, cur *corev1.Node) bool {
	if old == nil || cur == nil {
		return true
	}
	return attachdetach.NodeReady(old) != attachdetach.NodeReady(cur) ||
		volume.OutOfService(old) != volume.OutOfService(cur) ||
		attachdetach.Managed(old) != attachdetach.Managed(cur) ||
		!slices.Equal(old.Status.VolumesInUse, cur.Status.VolumesInUse) ||
		!slices.Equal(old.Status.VolumesAttached, cur.Status.VolumesAttached)
}

// haveVolumes reports whether any claim or attachment exists: until one
// does, no change concerns the volume controllers but their own kinds'.
func (w *World) haveVolumes() bool {
	return len(w.mirror.claims) > 0 || len(w.mirror.attachments) > 0
}

// passAttachDetach runs one pass of the attach/detach controller, then sets
// a timer for its next one: just after its earliest forced detach falls
// due, or after its period if this pass failed, whichever comes first.
func (w *World) passAttachDetach() {
	w.volumePasses++
	var next time.Time
	if err := w.attachDetach.Step(w.ctx); err != nil {
		w.log.Warn("attach/detach pass failed", "err", err)
		next = w.clk.Now().Add(attachdetach.DefaultReconcilerSyncLoopPeriod)
	}
	if due := w.attachDetach.NextDue(); !due.IsZero() {
		due = due.Add(attachDetachDueMargin)
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	if !next.IsZero() {
		w.attachDetachDue.set(w, next, w.passAttachDetach)
	}
}

// bindVolumes runs one pass of the PV binder; after a failed one it passes
// again after its resync period.
func (w *World) bindVolumes() {
	w.volumePasses++
	if err := w.binder.Sync(w.ctx); err != nil {
		w.log.Warn("PV binder pass failed", "err", err)
		w.bindDue.set(w, w.clk.Now().Add(persistentvolume.DefaultResyncPeriod), w.bindVolumes)
	}
}

// attach marks attached, by name, the VolumeAttachments of SimDriver
// waiting for it, as the driver's attacher does once ControllerPublish
// succeeded. One that changed meanwhile comes back through
// attachmentChanged.
func (w *World) attach() {
	names := sortedKeys(w.unattached)
	clear(w.unattached)
	for _, name := range names {
		va := w.mirror.attachments[name]
		if va == nil || va.Status.Attached || va.DeletionTimestamp != nil {
			continue
		}
		va = va.DeepCopy()
		va.Status.Attached = true
		if _, err := w.admin.StorageV1().VolumeAttachments().UpdateStatus(w.ctx, va, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			w.log.Warn("attaching failed", "volumeAttachment", name, "err", err)
		}
	}
}

// countForcedDetach counts va, just deleted, in its node's zone when the
// attach/detach controller detached it without a verified unmount: its
// node still listed the volume in status.volumesInUse, or carried the
// out-of-service taint. Only the controller deletes attachments here, and
// the Node it judged is the one the mirror holds (its own status write
// before the delete leaves both alone), so this is the controller's own
// rule; the tests check the count against its
// attachdetach_controller_forced_detaches metric. The simulator never
// deletes a Node, so an attachment's node is always there.
func (w *World) countForcedDetach(va *storagev1.VolumeAttachment) {
	node := w.mirror.nodes[va.Spec.NodeName]
	if node == nil || va.Spec.Source.PersistentVolumeName == nil {
		return
	}
	pv := w.mirror.volumes[*va.Spec.Source.PersistentVolumeName]
	if pv == nil || pv.Spec.CSI == nil {
		return
	}
	inUse := slices.Contains(node.Status.VolumesInUse, volume.UniqueName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle))
	if !inUse && !volume.OutOfService(node) {
		return
	}
	zone := w.zoneOf(node.Name)
	w.forceDetached[zone]++
	if m := w.marksOf(zone); !m.forceDetached {
		m.forceDetached, m.firstForceDetached = true, w.Now()
	}
}

// forceDelete deletes the pods bound to node at once (grace period 0), as
// an operator does with kubectl delete --force --grace-period=0.
func (w *World) forceDelete(node string) error {
	for _, p := range w.mirror.podsOnNode(node) {
		err := w.admin.CoreV1().Pods(p.Namespace).Delete(w.ctx, p.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptr.To[int64](0),
			Preconditions:      &metav1.Preconditions{UID: ptr.To(p.UID)},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-deleting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// outOfServiceTaint is the taint an operator puts on a node known to be
// off, as the Kubernetes documentation writes it.
var outOfServiceTaint = corev1.Taint{Key: volume.TaintOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// markOutOfService adds the out-of-service taint to node, unless it has
// the key already, when on is set; otherwise it removes every taint with
// that key, as kubectl taint nodes <node> node.kubernetes.io/out-of-service-
// does.
func (w *World) markOutOfService(node string, on bool) error {
	n := w.mirror.nodes[node]
	if n == nil {
		return fmt.Errorf("node %s is not registered", node)
	}
	if volume.OutOfService(n) == on {
		return nil
	}
	n = n.DeepCopy()
	if on {
		n.Spec.Taints = append(n.Spec.Taints, outOfServiceTaint)
	} else {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == volume.TaintOutOfService })
	}
	if _, err := w.admin.CoreV1().Nodes().Update(w.ctx, n, metav1.UpdateOptions{}); err != nil {
		if on {
			return fmt.Errorf("tainting node %s out of service: %w", node, err)
		}
		return fmt.Errorf("removing node %s's out-of-service taint: %w", node, err)
	}
	return nil
}

// simVolumes is one agent process's volume manager (its agent.Volumes):
// it stands in for internal/agent/volumes with the same contract towards
// the pod worker, the status poster and the attach/detach controller. A
// pod's CSI volumes are in use (InUse, so status.volumesInUse) from its
// first Setup until its Teardown or Cleanup; Setup reports them ready once
// the node has reported them in use (ReportedInUse) and their
// VolumeAttachments are attached. Mounting and unmounting take no time and
// touch no file, and a change to InUse asks for a status pass at once, as
// the real manager's InUseChanged does.
//
// It reads claims, volumes and attachments from the World's mirror: no
// agent writes them, so nothing changes them while a batch of agents'
// callbacks runs (see lanes.go). Only its agent's callbacks call it.
type simVolumes struct {
	a *simAgent
	// pods holds the unique names of the CSI volumes of each pod set up,
	// or being set up.
	pods map[types.UID][]corev1.UniqueVolumeName
	// inUse is the union of pods' volumes, sorted.
	inUse []corev1.UniqueVolumeName
	// reported is what the Node's status.volumesInUse last held.
	reported map[corev1.UniqueVolumeName]bool
}

func newSimVolumes(a *simAgent) *simVolumes {
	return &simVolumes{a: a, pods: map[types.UID][]corev1.UniqueVolumeName{}, reported: map[corev1.UniqueVolumeName]bool{}}
}

// Setup implements pods.Volumes. A claim that is not bound to a CSI volume
// is an error, and the pod is not processed, as the real manager does.
func (v *simVolumes) Setup(_ context.Context, pod *corev1.Pod) (bool, error) {
	m := v.a.w.mirror
	var names []corev1.UniqueVolumeName
	ready := true
	for _, claimName := range volume.PodClaims(pod) {
		claim := m.claims[types.NamespacedName{Namespace: pod.Namespace, Name: claimName}]
		if claim == nil || claim.Status.Phase != corev1.ClaimBound || claim.Spec.VolumeName == "" {
			return false, fmt.Errorf("persistentvolumeclaim %q is not bound", claimName)
		}
		pv := m.volumes[claim.Spec.VolumeName]
		if pv == nil || pv.Spec.CSI == nil {
			return false, fmt.Errorf("persistentvolumeclaim %q: volume %q is not a CSI volume", claimName, claim.Spec.VolumeName)
		}
		src := pv.Spec.CSI
		name := volume.UniqueName(src.Driver, src.VolumeHandle)
		names = append(names, name)
		va := m.attachments[volume.AttachmentName(src.VolumeHandle, src.Driver, v.a.name)]
		ready = ready && v.reported[name] && va != nil && va.Status.Attached && va.DeletionTimestamp == nil
	}
	if !slices.Equal(v.pods[pod.UID], names) {
		v.pods[pod.UID] = names
		v.refresh()
	}
	return ready, nil
}

// Teardown implements pods.Volumes: the pod's volumes are down at once.
func (v *simVolumes) Teardown(_ context.Context, uid types.UID) (bool, error) {
	if _, ok := v.pods[uid]; ok {
		delete(v.pods, uid)
		v.refresh()
	}
	return true, nil
}

// Cleanup implements pods.Volumes.
func (v *simVolumes) Cleanup(_ context.Context, keep func(types.UID) bool) error {
	changed := false
	for uid := range v.pods {
		if !keep(uid) {
			delete(v.pods, uid)
			changed = true
		}
	}
	if changed {
		v.refresh()
	}
	return nil
}

// InUse implements agent.Volumes; the slice is the caller's.
func (v *simVolumes) InUse() []corev1.UniqueVolumeName {
	if len(v.inUse) == 0 {
		return nil
	}
	return slices.Clone(v.inUse)
}

// ReportedInUse implements agent.Volumes.
func (v *simVolumes) ReportedInUse(names []corev1.UniqueVolumeName) {
	clear(v.reported)
	for _, n := range names {
		v.reported[n] = true
	}
}

// refresh recomputes inUse and, when it changed, asks for a status pass.
func (v *simVolumes) refresh() {
	var all []corev1.UniqueVolumeName
	for _, names := range v.pods {
		all = append(all, names...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if slices.Equal(all, v.inUse) {
		return
	}
	v.inUse = all
	v.a.kick(statusNow)
}
