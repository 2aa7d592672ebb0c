package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/volume"
)

// Plugin directories under a pod's volumes directory, upstream's names.
const (
	emptyDirPluginDir = "kubernetes.io~empty-dir"
	csiPluginDir      = "kubernetes.io~csi"
)

// Setup makes progress on the volumes of pod and reports whether all of
// them are ready, so that the containers may start. It does not wait: a
// volume that waits (to be reported in use, to be attached, or for the
// back-off after a failure) leaves ready false, and the caller calls again
// on a later pass. err says why a volume is not ready when something is
// wrong (a mount step failed, a claim is not bound); it never means that
// the caller should give up. Calling Setup for a ready pod is cheap and
// makes no API calls.
func (m *Manager) Setup(ctx context.Context, pod *corev1.Pod) (ready bool, err error) {
	m.ops.Lock()
	defer m.ops.Unlock()
	defer m.refresh()
	ps := m.pods[pod.UID]
	if ps == nil {
		ps = newPodState(pod.UID)
		m.pods[pod.UID] = ps
	}
	ps.pod = pod
	now := m.cfg.Clock.Now()
	ready = true
	var errs []error
	for i := range pod.Spec.Volumes {
		ok, err := m.setupVolume(ctx, ps, &pod.Spec.Volumes[i], now)
		if err != nil {
			errs = append(errs, err)
		}
		ready = ready && ok
	}
	if len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	return ready, nil
}

func newPodState(uid types.UID) *podState {
	return &podState{uid: uid, vols: map[string]*podVolume{}, devices: map[corev1.UniqueVolumeName]bool{}}
}

// volume returns the pod's volume under key, adding one of kind k.
func (ps *podState) volume(key string, k kind) *podVolume {
	v := ps.vols[key]
	if v == nil {
		v = &podVolume{kind: k, retry: newRetry()}
		ps.vols[key] = v
	}
	return v
}

// named returns the pod's volume that Setup knows by name, or nil.
func (ps *podState) named(name string) *podVolume {
	for _, v := range ps.vols {
		if slices.Contains(v.names, name) {
			return v
		}
	}
	return nil
}

func (m *Manager) setupVolume(ctx context.Context, ps *podState, v *corev1.Volume, now time.Time) (bool, error) {
	switch {
	case v.EmptyDir != nil:
		return m.setupEmptyDir(ps, v.Name, v.EmptyDir, now)
	case v.HostPath != nil:
		return m.setupHostPath(ps, v.Name, v.HostPath.Path, v.HostPath.Type, now)
	case v.PersistentVolumeClaim != nil:
		return m.setupClaim(ctx, ps, v.Name, v.PersistentVolumeClaim, now)
	}
	return false, fmt.Errorf("failed to get Plugin from volumeSpec for volume %q err=no volume plugin matched", v.Name)
}

// fail records a failed mount step of the volume v (volName in messages):
// a FailedMount event with upstream's message, and the back-off.
func (m *Manager) fail(ps *podState, v *podVolume, now time.Time, op, volName string, err error) (bool, error) {
	msg := fmt.Sprintf("%s for volume %q : %v", op, volName, err)
	v.retry.failed(now, errors.New(msg))
	m.log.Warn("mounting a volume failed", "pod", podName(ps), "volume", volName, "err", msg)
	if ps.pod != nil {
		m.cfg.Recorder(ps.pod, corev1.EventTypeWarning, ReasonFailedMount, msg)
	}
	return false, v.retry.err
}

func podName(ps *podState) string {
	if ps.pod == nil {
		return string(ps.uid)
	}
	return ps.pod.Namespace + "/" + ps.pod.Name
}

func (m *Manager) setupEmptyDir(ps *podState, name string, src *corev1.EmptyDirVolumeSource, now time.Time) (bool, error) {
	v := ps.volume("empty-dir/"+name, kindEmptyDir)
	v.known(name)
	v.path = volume.PodVolumeDir(m.cfg.RootDir, ps.uid, emptyDirPluginDir, name)
	if v.ready {
		return true, nil
	}
	if v.retry.waiting(now) {
		return false, v.retry.err
	}
	if err := m.makeEmptyDir(v, src); err != nil {
		return m.fail(ps, v, now, "MountVolume.SetUp failed", name, err)
	}
	v.ready = true
	v.retry.succeeded()
	return true, nil
}

// makeEmptyDir creates the directory of an emptyDir volume, world-writable
// as upstream's, and mounts a tmpfs on it for medium Memory.
func (m *Manager) makeEmptyDir(v *podVolume, src *corev1.EmptyDirVolumeSource) error {
	switch src.Medium {
	case corev1.StorageMediumDefault, corev1.StorageMediumMemory:
	default:
		return fmt.Errorf("emptyDir medium %q is not supported", src.Medium)
	}
	if err := os.MkdirAll(filepath.Dir(v.path), 0o750); err != nil {
		return err
	}
	if err := os.Mkdir(v.path, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if src.Medium != corev1.StorageMediumMemory {
		return os.Chmod(v.path, 0o777)
	}
	mounted, err := isMountPoint(v.path)
	if err != nil {
		return err
	}
	if !mounted {
		var size int64
		if src.SizeLimit != nil && src.SizeLimit.Sign() > 0 {
			size = src.SizeLimit.Value()
		}
		if err := mountTmpfs(v.path, size); err != nil {
			return fmt.Errorf("mounting a tmpfs at %s: %w", v.path, err)
		}
	}
	return nil
}

func (m *Manager) setupHostPath(ps *podState, name, path string, typ *corev1.HostPathType, now time.Time) (bool, error) {
	v := ps.volume("host-path/"+name, kindHostPath)
	v.known(name)
	v.path = path
	if v.ready {
		return true, nil
	}
	if v.retry.waiting(now) {
		return false, v.retry.err
	}
	if err := checkHostPath(path, typ); err != nil {
		return m.fail(ps, v, now, "MountVolume.SetUp failed", name, err)
	}
	v.ready = true
	v.retry.succeeded()
	return true, nil
}

// setupClaim sets up a volume that names a PVC: it reads the claim and its
// bound PV, then sets up the PV's source.
func (m *Manager) setupClaim(ctx context.Context, ps *podState, name string, src *corev1.PersistentVolumeClaimVolumeSource, now time.Time) (bool, error) {
	if v := ps.named(name); v != nil && v.ready {
		return true, nil
	}
	ns := ps.pod.Namespace
	pv, err := m.boundVolume(ctx, ns, src.ClaimName)
	if err != nil {
		return false, fmt.Errorf("error processing PVC %s/%s: %v", ns, src.ClaimName, err)
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return false, fmt.Errorf("error processing PVC %s/%s: volume %s has volumeMode %s, which the agent does not support", ns, src.ClaimName, name, corev1.PersistentVolumeBlock)
	}
	switch {
	case pv.Spec.CSI != nil:
		return m.setupCSI(ctx, ps, name, pv, src.ReadOnly, now)
	case pv.Spec.HostPath != nil:
		return m.setupHostPath(ps, name, pv.Spec.HostPath.Path, pv.Spec.HostPath.Type, now)
	case pv.Spec.Local != nil:
		return m.setupHostPath(ps, name, pv.Spec.Local.Path, nil, now)
	}
	return false, fmt.Errorf("failed to get Plugin from volumeSpec for volume %q err=no volume plugin matched", pv.Name)
}

// boundVolume reads the claim and the PV it is bound to, with upstream's
// checks and messages.
func (m *Manager) boundVolume(ctx context.Context, ns, claim string) (*corev1.PersistentVolume, error) {
	pvc, err := m.cfg.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PVC from API server: %v", err)
	}
	if pvc.DeletionTimestamp != nil {
		return nil, errors.New("PVC is being deleted")
	}
	if pvc.Status.Phase != corev1.ClaimBound {
		return nil, errors.New("PVC is not bound")
	}
	if pvc.Spec.VolumeName == "" {
		return nil, errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	pv, err := m.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PV %s from API server: %v", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.ClaimRef == nil {
		return nil, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name)
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", pv.Name, pv.Spec.ClaimRef.UID, pvc.UID)
	}
	return pv, nil
}

// driverPolicy is what a CSIDriver object says about the kubelet's side.
type driverPolicy struct {
	attachRequired bool
	podInfoOnMount bool
}

// policy reads the CSIDriver named driver; without one, attachment is
// required and no pod info is passed, as upstream.
func (m *Manager) policy(ctx context.Context, driver string) (driverPolicy, error) {
	p := driverPolicy{attachRequired: true}
	d, err := m.cfg.Client.StorageV1().CSIDrivers().Get(ctx, driver, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	if d.Spec.AttachRequired != nil {
		p.attachRequired = *d.Spec.AttachRequired
	}
	p.podInfoOnMount = d.Spec.PodInfoOnMount != nil && *d.Spec.PodInfoOnMount
	return p, nil
}

// attachment reads the VolumeAttachment of a CSI volume on this node. It
// returns its metadata (the publish context) once it is attached, false
// while it is missing (or not readable by the node, which is the same
// thing) or attaching, and an error when it failed or is being deleted.
func (m *Manager) attachment(ctx context.Context, driver, handle string) (map[string]string, bool, error) {
	name := volume.AttachmentName(handle, driver, m.cfg.NodeName)
	va, err := m.cfg.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		// The node authorizer lets a node read only the attachments that
		// exist and name it: until the attach/detach controller creates
		// this one, reading it is forbidden.
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("volume %v has GET error for volume attachment %v: %v", handle, name, err)
	}
	switch {
	case va.DeletionTimestamp != nil:
		return nil, false, errors.New("volume attachment is being deleted")
	case va.Status.Attached:
		return va.Status.AttachmentMetadata, true, nil
	case va.Status.AttachError != nil:
		return nil, false, errors.New(va.Status.AttachError.Message)
	}
	return nil, false, nil
}

// setupCSI stages (once per node) and publishes (for this pod) a CSI PV.
func (m *Manager) setupCSI(ctx context.Context, ps *podState, name string, pv *corev1.PersistentVolume, claimReadOnly bool, now time.Time) (bool, error) {
	src := pv.Spec.CSI
	v := ps.volume("csi/"+pv.Name, kindCSI)
	v.known(name)
	v.pv, v.driver, v.handle = pv.Name, src.Driver, src.VolumeHandle
	v.unique = volume.UniqueName(src.Driver, src.VolumeHandle)
	v.path = volume.PublishPath(m.cfg.RootDir, ps.uid, pv.Name)
	ps.devices[v.unique] = true
	if v.ready {
		return true, nil
	}
	if !m.isReported(v.unique) {
		// The next status post lists it (refresh runs when Setup
		// returns); mounting waits for that.
		return false, nil
	}
	if v.retry.waiting(now) {
		return false, v.retry.err
	}
	if onlyReadWriteOncePod(pv) && m.usedElsewhere(v.unique, ps.uid) {
		return m.fail(ps, v, now, "MountVolume.SetUp failed", pv.Name, errors.New("volume uses the ReadWriteOncePod access mode and is already in use by another pod"))
	}
	policy, err := m.policy(ctx, src.Driver)
	if err != nil {
		return m.fail(ps, v, now, "MountVolume.WaitForAttach failed", pv.Name, err)
	}
	var publishContext map[string]string
	if policy.attachRequired {
		meta, attached, err := m.attachment(ctx, src.Driver, src.VolumeHandle)
		if err != nil {
			return m.fail(ps, v, now, "MountVolume.WaitForAttach failed", pv.Name, err)
		}
		if !attached {
			return false, nil
		}
		publishContext = meta
	}
	node, err := m.node(src.Driver)
	if err != nil {
		return m.fail(ps, v, now, "MountVolume.MountDevice failed", pv.Name, fmt.Errorf("%sattacher.MountDevice failed to create newCsiDriverClient: %w", logPrefix, err))
	}
	caps, err := capabilities(ctx, node, m.cfg.CallTimeout)
	if err != nil {
		return m.fail(ps, v, now, "MountVolume.MountDevice failed", pv.Name, err)
	}
	if err := m.stage(ctx, node, caps, pv, publishContext); err != nil {
		return m.fail(ps, v, now, "MountVolume.MountDevice failed", pv.Name, err)
	}
	podInfo := map[string]string(nil)
	if policy.podInfoOnMount {
		podInfo = podInfoAttributes(ps.pod)
	}
	if err := m.publish(ctx, node, caps, v, pv, claimReadOnly, publishContext, podInfo); err != nil {
		return m.fail(ps, v, now, "MountVolume.SetUp failed", pv.Name, err)
	}
	v.ready = true
	v.retry.succeeded()
	m.log.Info("MountVolume.SetUp succeeded", "pod", podName(ps), "volume", pv.Name)
	return true, nil
}

// node returns the node client of a registered driver.
func (m *Manager) node(driver string) (nodeClient, error) {
	if m.cfg.Drivers == nil {
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", driver)
	}
	return m.cfg.Drivers.Node(driver)
}

// usedElsewhere reports whether another pod holds the CSI volume unique.
func (m *Manager) usedElsewhere(unique corev1.UniqueVolumeName, uid types.UID) bool {
	for other, ps := range m.pods {
		if other == uid {
			continue
		}
		for _, v := range ps.vols {
			if v.kind == kindCSI && v.unique == unique && (v.ready || v.recorded) {
				return true
			}
		}
	}
	return false
}

func onlyReadWriteOncePod(pv *corev1.PersistentVolume) bool {
	return len(pv.Spec.AccessModes) == 1 && pv.Spec.AccessModes[0] == corev1.ReadWriteOncePod
}
