package csiprovisioner

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/volume"
)

// Parameter keys and annotations, upstream's strings.
const (
	// ParameterPrefix marks StorageClass parameters meant for the
	// provisioner, never passed to the driver.
	ParameterPrefix = "csi.storage.k8s.io/"
	// ParamFSType is the fsType parameter; the deprecated "fstype" (any
	// case) works too, but not both.
	ParamFSType = ParameterPrefix + "fstype"
	// Parameters ExtraCreateMetadata adds to CreateVolume.
	ParamPVCName      = ParameterPrefix + "pvc/name"
	ParamPVCNamespace = ParameterPrefix + "pvc/namespace"
	ParamPVName       = ParameterPrefix + "pv/name"
	// AttrProvisionerIdentity is the volume attribute that names the
	// provisioner instance that made a volume.
	AttrProvisionerIdentity = "storage.kubernetes.io/csiProvisionerIdentity"
	// AnnDeletionSecretName and AnnDeletionSecretNamespace on a PV name the
	// secret DeleteVolume needs; "" for none.
	AnnDeletionSecretName      = "volume.kubernetes.io/provisioner-deletion-secret-name"
	AnnDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
	// VolumePrefix begins the name of every volume and PV: "pvc-<claim uid>".
	VolumePrefix = "pvc"
)

// knownReserved are the parameters under ParameterPrefix that the
// provisioner understands and strips; any other key under the prefix is
// an error.
var knownReserved = map[string]bool{}

func init() {
	for _, k := range []string{
		"fstype", "secret-name", "secret-namespace",
		"provisioner-secret-name", "provisioner-secret-namespace",
		"controller-publish-secret-name", "controller-publish-secret-namespace",
		"node-stage-secret-name", "node-stage-secret-namespace",
		"node-publish-secret-name", "node-publish-secret-namespace",
		"controller-expand-secret-name", "controller-expand-secret-namespace",
		"node-expand-secret-name", "node-expand-secret-namespace",
		"controller-modify-secret-name", "controller-modify-secret-namespace",
	} {
		knownReserved[ParameterPrefix+k] = true
	}
}

// Caps are the driver's capabilities the provisioner acts on.
type Caps struct {
	// ControllerService (plugin CONTROLLER_SERVICE) and CreateDelete
	// (CREATE_DELETE_VOLUME) are both needed to provision or delete.
	ControllerService, CreateDelete bool
	// Topology (plugin VOLUME_ACCESSIBILITY_CONSTRAINTS): CreateVolume gets
	// accessibility requirements and PVs get node affinity.
	Topology bool
	// PublishUnpublish: a PV is not deleted while a VolumeAttachment names it.
	PublishUnpublish bool
	// SingleNodeMultiWriter changes the access mode mapping.
	SingleNodeMultiWriter bool
	// Snapshot, Clone and ModifyVolume only choose the error a claim that
	// needs them gets.
	Snapshot, Clone, ModifyVolume bool
}

// CapsOf reads Caps from the driver's answers.
func CapsOf(plugin *csi.GetPluginCapabilitiesResponse, ctrl *csi.ControllerGetCapabilitiesResponse) Caps {
	var c Caps
	for _, pc := range plugin.GetCapabilities() {
		switch pc.GetService().GetType() {
		case csi.PluginCapability_Service_CONTROLLER_SERVICE:
			c.ControllerService = true
		case csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
			c.Topology = true
		}
	}
	for _, cc := range ctrl.GetCapabilities() {
		switch cc.GetRpc().GetType() {
		case csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
			c.CreateDelete = true
		case csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
			c.PublishUnpublish = true
		case csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			c.SingleNodeMultiWriter = true
		case csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT:
			c.Snapshot = true
		case csi.ControllerServiceCapability_RPC_CLONE_VOLUME:
			c.Clone = true
		case csi.ControllerServiceCapability_RPC_MODIFY_VOLUME:
			c.ModifyVolume = true
		}
	}
	return c
}

// VolumeName is the name of the volume and PV provisioned for claim.
func VolumeName(claim *corev1.PersistentVolumeClaim) string {
	return VolumePrefix + "-" + string(claim.UID)
}

// claimProvisioner is the provisioner a claim asks for.
func claimProvisioner(claim *corev1.PersistentVolumeClaim) string {
	if p, ok := claim.Annotations[volume.AnnStorageProvisioner]; ok {
		return p
	}
	return claim.Annotations[volume.AnnBetaStorageProvisioner]
}

// ShouldProvision reports whether driver should provision claim now, given
// its StorageClass (nil: not found): the claim is unbound, not being
// deleted, annotated for driver, and, for a WaitForFirstConsumer class,
// has a selected node. A claim for driver whose class is missing is an
// error, so it is retried.
func ShouldProvision(driver string, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (bool, error) {
	if claim.Spec.VolumeName != "" || claim.DeletionTimestamp != nil || claimProvisioner(claim) != driver {
		return false, nil
	}
	if class == nil {
		return false, fmt.Errorf("storageClass %q not found", volume.ClaimClass(claim))
	}
	if class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer {
		return claim.Annotations[volume.AnnSelectedNode] != "", nil
	}
	return true, nil
}

// Populated reports whether claim's data source is one an external
// populator fills (neither a VolumeSnapshot nor a PersistentVolumeClaim);
// the provisioner leaves such claims alone.
func Populated(claim *corev1.PersistentVolumeClaim) bool {
	kind, _, ok := dataSource(claim)
	return ok && kind != "VolumeSnapshot" && kind != "PersistentVolumeClaim"
}

// dataSource is the kind and API group of claim's data source
// (dataSource, else dataSourceRef); ok is false when it has none.
func dataSource(claim *corev1.PersistentVolumeClaim) (kind, group string, ok bool) {
	switch {
	case claim.Spec.DataSource != nil:
		if g := claim.Spec.DataSource.APIGroup; g != nil {
			group = *g
		}
		return claim.Spec.DataSource.Kind, group, true
	case claim.Spec.DataSourceRef != nil:
		if g := claim.Spec.DataSourceRef.APIGroup; g != nil {
			group = *g
		}
		return claim.Spec.DataSourceRef.Kind, group, true
	}
	return "", "", false
}

// Input is what Prepare decides from.
type Input struct {
	Driver string
	Claim  *corev1.PersistentVolumeClaim
	Class  *storagev1.StorageClass
	Caps   Caps
	// DefaultFSType is used when the class names no fsType.
	DefaultFSType string
	// ExtraCreateMetadata adds the claim's and PV's names to the
	// parameters.
	ExtraCreateMetadata bool
	// StrictTopology: see Accessibility.
	StrictTopology bool
	// CSINodes and Nodes are the cluster's, read only when Caps.Topology.
	CSINodes []storagev1.CSINode
	Nodes    []corev1.Node
}

// Prepared is a CreateVolume call and what the PV needs from its making.
type Prepared struct {
	Request *csi.CreateVolumeRequest
	// FSType goes into the PV's csi.fsType unless the claim is a block
	// volume.
	FSType string
}

// Prepare builds the CreateVolume call for in.Claim, checking what
// upstream checks, in its order, with its messages: the data source and
// VolumeAttributesClass against the driver's capabilities (knode supports
// neither snapshots, clones nor attribute classes beyond that), no label
// selector, the fsType, the access modes, the accessibility requirements
// (when the driver has topology) and the reserved parameters.
// reschedule is true when the selected node's CSINode is missing, so the
// scheduler should pick another node.
func Prepare(in Input) (p Prepared, reschedule bool, err error) {
	claim, class := in.Claim, in.Class
	var needSnapshot, needClone, needModify bool
	if kind, group, ok := dataSource(claim); ok {
		switch kind {
		case "VolumeSnapshot":
			if group != "snapshot.storage.k8s.io" {
				return p, false, fmt.Errorf("the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got %s", group)
			}
			needSnapshot = true
		case "PersistentVolumeClaim":
			needClone = true
		}
	}
	if n := claim.Spec.VolumeAttributesClassName; n != nil && *n != "" {
		needModify = true
	}
	switch {
	case !in.Caps.ControllerService:
		return p, false, errors.New("CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported")
	case !in.Caps.CreateDelete:
		return p, false, errors.New("CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported")
	case needSnapshot && !in.Caps.Snapshot:
		return p, false, errors.New("CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is not reported")
	case needClone && !in.Caps.Clone:
		return p, false, errors.New("CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported")
	case needModify && !in.Caps.ModifyVolume:
		return p, false, errors.New("CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported")
	case needSnapshot, needClone, needModify:
		return p, false, errors.New("knode's provisioner does not support data sources or VolumeAttributesClasses")
	}
	if claim.Spec.Selector != nil {
		return p, false, errors.New("claim Selector is not supported")
	}
	if claim.UID == "" {
		return p, false, errors.New("corrupted PVC object, it is missing UID")
	}
	name := VolumeName(claim)
	fsType, err := FSType(class.Parameters, in.DefaultFSType)
	if err != nil {
		return p, false, err
	}
	caps, err := capabilities(claim, class, fsType, in.Caps.SingleNodeMultiWriter)
	if err != nil {
		return p, false, err
	}
	size := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	req := &csi.CreateVolumeRequest{
		Name:               name,
		VolumeCapabilities: caps,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size.Value()},
	}
	if in.Caps.Topology {
		top, resched, err := Accessibility(in.Driver, claim.Name, class.AllowedTopologies, claim.Annotations[volume.AnnSelectedNode], in.StrictTopology, in.CSINodes, in.Nodes)
		if resched {
			return p, true, err
		}
		if err != nil {
			return p, false, fmt.Errorf("error generating accessibility requirements: %v", err)
		}
		req.AccessibilityRequirements = top
	}
	params, err := Parameters(class.Parameters)
	if err != nil {
		return p, false, fmt.Errorf("failed to strip CSI Parameters of prefixed keys: %v", err)
	}
	if in.ExtraCreateMetadata {
		params[ParamPVCName] = claim.Name
		params[ParamPVCNamespace] = claim.Namespace
		params[ParamPVName] = name
	}
	req.Parameters = params
	return Prepared{Request: req, FSType: fsType}, false, nil
}

// FSType is the fsType a class's parameters ask for: "fstype" (any case)
// or csi.storage.k8s.io/fstype, not both; def when neither is set.
func FSType(params map[string]string, def string) (string, error) {
	fsType, found := "", 0
	for k, v := range params {
		if strings.ToLower(k) == "fstype" || k == ParamFSType {
			fsType = v
			found++
		}
	}
	if found > 1 {
		return "", fmt.Errorf("fstype specified in parameters with both \"fstype\" and \"%s\" keys", ParamFSType)
	}
	if fsType == "" {
		fsType = def
	}
	return fsType, nil
}

// Parameters are a class's parameters without the known reserved keys;
// an unknown key under ParameterPrefix is an error. Never nil.
func Parameters(params map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range params {
		if !strings.HasPrefix(k, ParameterPrefix) {
			out[k] = v
			continue
		}
		if !knownReserved[k] {
			return map[string]string{}, fmt.Errorf("found unknown parameter key \"%s\" with reserved namespace %s", k, ParameterPrefix)
		}
	}
	return out, nil
}

// block reports whether claim asks for a raw block volume.
func block(claim *corev1.PersistentVolumeClaim) bool {
	return claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == corev1.PersistentVolumeBlock
}

// capabilities are the CreateVolume capabilities of claim: one per access
// mode, a block volume or a mount volume with fsType and the class's mount
// options.
func capabilities(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, fsType string, singleNodeMultiWriter bool) ([]*csi.VolumeCapability, error) {
	out := []*csi.VolumeCapability{}
	for _, m := range claim.Spec.AccessModes {
		mode, err := accessMode(m, singleNodeMultiWriter)
		if err != nil {
			return []*csi.VolumeCapability{}, err
		}
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
		if block(claim) {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: class.MountOptions}}
		}
		out = append(out, c)
	}
	return out, nil
}

// accessMode maps one Kubernetes access mode to CSI's, as csi-lib-utils
// does for a single mode.
func accessMode(m corev1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) (csi.VolumeCapability_AccessMode_Mode, error) {
	switch m {
	case corev1.ReadWriteOncePod:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case corev1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	case corev1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case corev1.ReadWriteOnce:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	}
	return csi.VolumeCapability_AccessMode_UNKNOWN, fmt.Errorf("unsupported AccessMode combination: %+v", []corev1.PersistentVolumeAccessMode{m})
}

// Capacity is the size the PV records: what the driver returned, or what
// was asked for when the driver says 0 (unknown). A volume smaller than
// asked for is an error; the caller deletes it.
func Capacity(requested, returned int64) (int64, error) {
	switch {
	case returned == 0:
		return requested, nil
	case returned < requested:
		return 0, fmt.Errorf("created volume capacity %v less than requested capacity %v", returned, requested)
	}
	return returned, nil
}

// NewPV is the PV for a volume the driver created for in.Claim: named
// VolumeName, annotated provisioned-by the class's provisioner (and with
// empty deletion-secret annotations), carrying the provisioner's deletion
// finalizer, bound by claimRef to the claim, with the class's reclaim
// policy, mount options and name, the claim's access and volume modes, the
// CSI source (driver, handle, attributes with identity, fsType) and the
// node affinity of the volume's accessible topology when the driver has
// topology.
func NewPV(in Input, p Prepared, vol *csi.Volume, capacity int64, identity string) *corev1.PersistentVolume {
	claim, class := in.Claim, in.Class
	attrs := map[string]string{AttrProvisionerIdentity: identity}
	maps.Copy(attrs, vol.GetVolumeContext())
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name: VolumeName(claim),
			Annotations: map[string]string{
				volume.AnnDynamicallyProvisioned: class.Provisioner,
				AnnDeletionSecretName:            "",
				AnnDeletionSecretNamespace:       "",
			},
			Finalizers: []string{volume.ProvisionerDeletionFinalizer},
		},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:  claim.Spec.AccessModes,
			MountOptions: class.MountOptions,
			Capacity:     corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(capacity, resource.BinarySI)},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver:           in.Driver,
				VolumeHandle:     vol.GetVolumeId(),
				VolumeAttributes: attrs,
			}},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
			},
			StorageClassName: volume.ClaimClass(claim),
			VolumeMode:       claim.Spec.VolumeMode,
		},
	}
	if class.ReclaimPolicy != nil {
		pv.Spec.PersistentVolumeReclaimPolicy = *class.ReclaimPolicy
	}
	if in.Caps.Topology {
		pv.Spec.NodeAffinity = NodeAffinity(vol.GetAccessibleTopology())
	}
	if !block(claim) {
		pv.Spec.CSI.FSType = p.FSType
	}
	return pv
}

// Responsible reports whether driver's provisioner looks after pv: it was
// provisioned by driver, or it is a static CSI volume of driver.
func Responsible(driver string, pv *corev1.PersistentVolume) bool {
	if by, ok := pv.Annotations[volume.AnnDynamicallyProvisioned]; ok {
		return by == driver
	}
	return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == driver
}

// Finalizers are pv's finalizers as the provisioner wants them: with the
// deletion finalizer on a Bound PV of reclaim policy Delete that is not
// being deleted, without it under Retain or Recycle. changed is false when
// they stay as they are.
func Finalizers(pv *corev1.PersistentVolume) (out []string, changed bool) {
	f := volume.ProvisionerDeletionFinalizer
	has := slices.Contains(pv.Finalizers, f)
	switch policy := pv.Spec.PersistentVolumeReclaimPolicy; {
	case !has && policy == corev1.PersistentVolumeReclaimDelete && pv.DeletionTimestamp == nil && pv.Status.Phase == corev1.VolumeBound:
		return append(slices.Clone(pv.Finalizers), f), true
	case has && (policy == corev1.PersistentVolumeReclaimRetain || policy == corev1.PersistentVolumeReclaimRecycle):
		out = slices.DeleteFunc(slices.Clone(pv.Finalizers), func(s string) bool { return s == f })
		if len(out) == 0 {
			out = nil
		}
		return out, true
	}
	return pv.Finalizers, false
}

// ShouldDelete reports whether pv's volume should be deleted: it is
// Released with reclaim policy Delete and, when being deleted already,
// still carries the deletion finalizer (without it the volume is gone).
func ShouldDelete(pv *corev1.PersistentVolume) bool {
	if pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, volume.ProvisionerDeletionFinalizer) {
		return false
	}
	return pv.Status.Phase == corev1.VolumeReleased && pv.Spec.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimDelete
}

// DeleteRequest is the DeleteVolume call for pv, or why it may not be
// made: pv is not a CSI volume, the driver cannot delete, or (for a driver
// that attaches) a VolumeAttachment still names pv.
func DeleteRequest(pv *corev1.PersistentVolume, caps Caps, vas []storagev1.VolumeAttachment) (*csi.DeleteVolumeRequest, error) {
	if pv.Spec.CSI == nil {
		return nil, errors.New("invalid CSI PV")
	}
	if !caps.ControllerService {
		return nil, errors.New("CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported")
	}
	if !caps.CreateDelete {
		return nil, errors.New("CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported")
	}
	if caps.PublishUnpublish {
		for i := range vas {
			if n := vas[i].Spec.Source.PersistentVolumeName; n != nil && *n == pv.Name {
				return nil, fmt.Errorf("persistentvolume %s is still attached to node %s", pv.Name, vas[i].Spec.NodeName)
			}
		}
	}
	return &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}, nil
}
