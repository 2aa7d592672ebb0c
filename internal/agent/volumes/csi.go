package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"knode/internal/atomicfile"
	"knode/internal/volume"
)

type nodeClient = csi.NodeClient

// logPrefix starts the CSI plugin's own messages, as upstream's do.
const logPrefix = volume.CSIPluginName + ": "

// volDataFile is the file beside a publish target or staging path that
// says what is mounted there, upstream's name and keys.
const volDataFile = "vol_data.json"

// Keys of vol_data.json.
const (
	keySpecVolID     = "specVolID"
	keyVolumeHandle  = "volumeHandle"
	keyDriverName    = "driverName"
	keyNodeName      = "nodeName"
	keyAttachmentID  = "attachmentID"
	keyLifecycleMode = "volumeLifecycleMode"
)

// nodeCaps are the node service capabilities the manager acts on.
type nodeCaps struct {
	stage                 bool
	singleNodeMultiWriter bool
}

func capabilities(ctx context.Context, node nodeClient, timeout time.Duration) (nodeCaps, error) {
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := node.NodeGetCapabilities(callCtx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nodeCaps{}, err
	}
	var caps nodeCaps
	for _, c := range resp.GetCapabilities() {
		switch c.GetRpc().GetType() {
		case csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			caps.stage = true
		case csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			caps.singleNodeMultiWriter = true
		}
	}
	return caps, nil
}

// accessMode maps a PV's access modes to the CSI mode the kubelet asks
// for: the first mode counts, ReadWriteOnce when there is none.
func accessMode(modes []corev1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) csi.VolumeCapability_AccessMode_Mode {
	mode := corev1.ReadWriteOnce
	if len(modes) > 0 {
		mode = modes[0]
	}
	switch mode {
	case corev1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case corev1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case corev1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case corev1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	}
	return csi.VolumeCapability_AccessMode_UNKNOWN
}

// capability is the mount capability of a CSI PV: its fsType and mount
// options, and its access mode.
func capability(pv *corev1.PersistentVolume, caps nodeCaps) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
			FsType:     pv.Spec.CSI.FSType,
			MountFlags: pv.Spec.MountOptions,
		}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: accessMode(pv.Spec.AccessModes, caps.singleNodeMultiWriter)},
	}
}

// stageRequest is the NodeStageVolume request for a CSI PV.
func stageRequest(pv *corev1.PersistentVolume, stagingPath string, publishContext map[string]string, caps nodeCaps) *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{
		VolumeId:          pv.Spec.CSI.VolumeHandle,
		PublishContext:    publishContext,
		StagingTargetPath: stagingPath,
		VolumeCapability:  capability(pv, caps),
		VolumeContext:     pv.Spec.CSI.VolumeAttributes,
	}
}

// publishRequest is the NodePublishVolume request for a CSI PV: read-only
// when the pod's claim or the PV says so, the staging path only for a
// driver that stages, and the PV's attributes with the pod's info (when
// the CSIDriver asks for it) as volume context.
func publishRequest(pv *corev1.PersistentVolume, target, stagingPath string, claimReadOnly bool, publishContext, podInfo map[string]string, caps nodeCaps) *csi.NodePublishVolumeRequest {
	req := &csi.NodePublishVolumeRequest{
		VolumeId:         pv.Spec.CSI.VolumeHandle,
		PublishContext:   publishContext,
		TargetPath:       target,
		VolumeCapability: capability(pv, caps),
		Readonly:         claimReadOnly || pv.Spec.CSI.ReadOnly,
		VolumeContext:    pv.Spec.CSI.VolumeAttributes,
	}
	if caps.stage {
		req.StagingTargetPath = stagingPath
	}
	if len(podInfo) > 0 {
		ctx := make(map[string]string, len(pv.Spec.CSI.VolumeAttributes)+len(podInfo))
		for k, v := range pv.Spec.CSI.VolumeAttributes {
			ctx[k] = v
		}
		for k, v := range podInfo {
			ctx[k] = v
		}
		req.VolumeContext = ctx
	}
	return req
}

// podInfoAttributes are the volume context keys a CSIDriver with
// podInfoOnMount receives for a persistent volume.
func podInfoAttributes(pod *corev1.Pod) map[string]string {
	return map[string]string{
		"csi.storage.k8s.io/pod.name":            pod.Name,
		"csi.storage.k8s.io/pod.namespace":       pod.Namespace,
		"csi.storage.k8s.io/pod.uid":             string(pod.UID),
		"csi.storage.k8s.io/serviceAccount.name": pod.Spec.ServiceAccountName,
		"csi.storage.k8s.io/ephemeral":           "false",
	}
}

// stage stages a CSI PV on the node unless it already is. The staging
// directory and its vol_data.json are written first, so that the device
// is known (and will be unstaged) even if the call fails or the agent
// stops halfway; a driver without STAGE_UNSTAGE_VOLUME is not called.
func (m *Manager) stage(ctx context.Context, node nodeClient, caps nodeCaps, pv *corev1.PersistentVolume, publishContext map[string]string) error {
	src := pv.Spec.CSI
	unique := volume.UniqueName(src.Driver, src.VolumeHandle)
	d := m.devices[unique]
	if d != nil && d.staged {
		return nil
	}
	path := volume.StagingPath(m.cfg.RootDir, src.Driver, src.VolumeHandle)
	if d == nil {
		if err := os.MkdirAll(path, 0o750); err != nil {
			return fmt.Errorf("%sattacher.MountDevice failed to create dir %q: %v", logPrefix, path, err)
		}
		data := map[string]string{keyVolumeHandle: src.VolumeHandle, keyDriverName: src.Driver}
		if err := writeVolData(filepath.Dir(path), data); err != nil {
			return fmt.Errorf("%sfailed to save volume info data: %v", logPrefix, err)
		}
		d = &device{driver: src.Driver, handle: src.VolumeHandle, unique: unique, stagingPath: path}
		m.devices[unique] = d
	}
	if !caps.stage {
		d.staged = true
		return nil
	}
	callCtx, cancel := m.callContext(ctx)
	defer cancel()
	if _, err := node.NodeStageVolume(callCtx, stageRequest(pv, path, publishContext, caps)); err != nil {
		return err
	}
	d.staged = true
	m.log.Info("MountVolume.MountDevice succeeded", "volume", pv.Name, "stagingPath", path)
	return nil
}

// publish publishes a CSI PV at the pod's target. The target's parent and
// vol_data.json are written first (the driver creates the target).
func (m *Manager) publish(ctx context.Context, node nodeClient, caps nodeCaps, v *podVolume, pv *corev1.PersistentVolume, claimReadOnly bool, publishContext, podInfo map[string]string) error {
	parent := filepath.Dir(v.path)
	if err := os.MkdirAll(parent, 0o750); err != nil {
		return fmt.Errorf("%smounter.SetUpAt failed to create dir %q: %v", logPrefix, parent, err)
	}
	data := map[string]string{
		keySpecVolID:     pv.Name,
		keyVolumeHandle:  v.handle,
		keyDriverName:    v.driver,
		keyNodeName:      m.cfg.NodeName,
		keyAttachmentID:  volume.AttachmentName(v.handle, v.driver, m.cfg.NodeName),
		keyLifecycleMode: string(storagev1.VolumeLifecyclePersistent),
	}
	if err := writeVolData(parent, data); err != nil {
		return fmt.Errorf("%smounter.SetUpAt failed to save volume info data: %v", logPrefix, err)
	}
	v.recorded = true
	stagingPath := volume.StagingPath(m.cfg.RootDir, v.driver, v.handle)
	callCtx, cancel := m.callContext(ctx)
	defer cancel()
	_, err := node.NodePublishVolume(callCtx, publishRequest(pv, v.path, stagingPath, claimReadOnly, publishContext, podInfo, caps))
	return err
}

// unpublish unpublishes a pod's CSI volume and removes the target's
// directory and vol_data.json (the target itself only when the driver
// left it unmounted).
func (m *Manager) unpublish(ctx context.Context, v *podVolume) error {
	node, err := m.node(v.driver)
	if err != nil {
		return fmt.Errorf("%sUnmounter.TearDownAt failed to get CSI client: %w", logPrefix, err)
	}
	callCtx, cancel := m.callContext(ctx)
	defer cancel()
	if _, err := node.NodeUnpublishVolume(callCtx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.handle, TargetPath: v.path}); err != nil {
		return fmt.Errorf("%sUnmounter.TearDownAt failed: %w", logPrefix, err)
	}
	if err := removeMountDir(v.path); err != nil {
		return fmt.Errorf("%sUnmounter.TearDownAt failed to clean mount dir [%s]: %w", logPrefix, v.path, err)
	}
	return nil
}

// unstage unstages a device (when its driver stages) and removes the
// staging directory and its vol_data.json.
func (m *Manager) unstage(ctx context.Context, d *device) error {
	node, err := m.node(d.driver)
	if err != nil {
		return fmt.Errorf("%sattacher.UnmountDevice failed to get CSI client: %w", logPrefix, err)
	}
	caps, err := capabilities(ctx, node, m.cfg.CallTimeout)
	if err != nil {
		return err
	}
	if caps.stage {
		callCtx, cancel := m.callContext(ctx)
		defer cancel()
		if _, err := node.NodeUnstageVolume(callCtx, &csi.NodeUnstageVolumeRequest{VolumeId: d.handle, StagingTargetPath: d.stagingPath}); err != nil {
			return err
		}
	}
	if err := removeMountDir(d.stagingPath); err != nil {
		return fmt.Errorf("%sattacher.UnmountDevice failed to clean up staging dir [%s]: %w", logPrefix, d.stagingPath, err)
	}
	return nil
}

// removeMountDir removes a publish target or staging path, the
// vol_data.json beside it and their parent directory, refusing to remove
// anything still mounted. Missing pieces are fine.
func removeMountDir(path string) error {
	mounted, err := isMountPoint(path)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s is still mounted", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(path)
	if err := os.Remove(filepath.Join(parent, volDataFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(parent); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func writeVolData(dir string, data map[string]string) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, volDataFile), b, 0o640)
}

func readVolData(dir string) (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, volDataFile))
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	if err := json.Unmarshal(b, &data); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, volDataFile), err)
	}
	return data, nil
}
