package csiattacher

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"knode/internal/volume"
)

// Caps are the driver's controller capabilities the attacher acts on.
type Caps struct {
	// PublishUnpublish: the driver attaches (PUBLISH_UNPUBLISH_VOLUME).
	// Without it every VolumeAttachment is marked attached at once, with no
	// finalizer and no call to the driver.
	PublishUnpublish bool
	// PublishReadonly (PUBLISH_READONLY): without it readonly is always
	// false in ControllerPublishVolume, as the CSI spec demands.
	PublishReadonly bool
	// SingleNodeMultiWriter (SINGLE_NODE_MULTI_WRITER) changes how access
	// modes map to CSI access modes (see AccessMode).
	SingleNodeMultiWriter bool
}

// CapsOf reads Caps from a ControllerGetCapabilities response.
func CapsOf(resp *csi.ControllerGetCapabilitiesResponse) Caps {
	var c Caps
	for _, cp := range resp.GetCapabilities() {
		switch cp.GetRpc().GetType() {
		case csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
			c.PublishUnpublish = true
		case csi.ControllerServiceCapability_RPC_PUBLISH_READONLY:
			c.PublishReadonly = true
		case csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			c.SingleNodeMultiWriter = true
		}
	}
	return c
}

// AccessMode maps a PV's access modes to the one CSI access mode the CSI
// sidecars use (csi-lib-utils' mapping). ReadWriteOncePod must stand alone;
// ReadWriteMany wins over everything else; ReadOnlyMany with ReadWriteOnce
// is refused. A driver with SINGLE_NODE_MULTI_WRITER gets
// SINGLE_NODE_MULTI_WRITER for ReadWriteOnce and SINGLE_NODE_SINGLE_WRITER
// for ReadWriteOncePod; any other gets SINGLE_NODE_WRITER for both.
func AccessMode(modes []corev1.PersistentVolumeAccessMode, singleNodeMultiWriter bool) (csi.VolumeCapability_AccessMode_Mode, error) {
	has := map[corev1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	switch {
	case has[corev1.ReadWriteOncePod]:
		if len(has) > 1 {
			return csi.VolumeCapability_AccessMode_UNKNOWN, errors.New("Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume")
		}
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	case has[corev1.ReadWriteMany]:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, nil
	case has[corev1.ReadOnlyMany] && has[corev1.ReadWriteOnce]:
		return csi.VolumeCapability_AccessMode_UNKNOWN, errors.New("CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume")
	case has[corev1.ReadOnlyMany]:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, nil
	case has[corev1.ReadWriteOnce]:
		if singleNodeMultiWriter {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER, nil
		}
		return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, nil
	}
	return csi.VolumeCapability_AccessMode_UNKNOWN, fmt.Errorf("unsupported AccessMode combination: %+v", modes)
}

// Capability is the volume capability the attacher publishes a PV with: a
// block volume for volumeMode Block, otherwise a mount volume with the PV's
// csi.fsType (defaultFSType when empty) and its mount options; the access
// mode comes from AccessMode.
func Capability(spec *corev1.PersistentVolumeSpec, singleNodeMultiWriter bool, defaultFSType string) (*csi.VolumeCapability, error) {
	if spec.CSI == nil {
		return nil, errors.New("CSI volume source was nil")
	}
	c := &csi.VolumeCapability{}
	if spec.VolumeMode != nil && *spec.VolumeMode == corev1.PersistentVolumeBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		fsType := spec.CSI.FSType
		if fsType == "" {
			fsType = defaultFSType
		}
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: spec.MountOptions}}
	}
	mode, err := AccessMode(spec.AccessModes, singleNodeMultiWriter)
	if err != nil {
		return nil, err
	}
	c.AccessMode = &csi.VolumeCapability_AccessMode{Mode: mode}
	return c, nil
}

var (
	pvResource      = schema.GroupResource{Resource: "persistentvolume"}
	csiNodeResource = schema.GroupResource{Group: storagev1.GroupName, Resource: "csinode"}
)

// NodeID is driver's ID of node nodeName: CSINode.spec.drivers[].nodeID
// (csiNode nil means there is no CSINode). When the CSINode or its entry
// for driver is missing, a detach (va not nil) falls back to the node-id
// annotation the attach left on va; otherwise the error says what is
// missing.
func NodeID(driver, nodeName string, csiNode *storagev1.CSINode, va *storagev1.VolumeAttachment) (string, error) {
	var err error
	if csiNode == nil {
		err = apierrors.NewNotFound(csiNodeResource, nodeName)
	} else {
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == driver {
				return d.NodeID, nil
			}
		}
		err = fmt.Errorf("CSINode %s does not contain driver %s", nodeName, driver)
	}
	if va != nil {
		if id, ok := va.Annotations[volume.AnnAttacherNodeID]; ok {
			return id, nil
		}
	}
	return "", err
}

// source is the CSI source and spec of the volume va attaches: its PV's
// (pv nil means the PV does not exist) or its inline spec.
func source(va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume) (*corev1.PersistentVolumeSpec, error) {
	src := va.Spec.Source
	switch {
	case src.PersistentVolumeName != nil && src.InlineVolumeSpec != nil:
		return nil, errors.New("both InlineCSIVolumeSource and PersistentVolumeName specified in VA source")
	case src.PersistentVolumeName != nil:
		if pv == nil {
			return nil, apierrors.NewNotFound(pvResource, *src.PersistentVolumeName)
		}
		if pv.Spec.CSI == nil {
			return nil, errors.New("pv spec contained non-csi source that was not migrated")
		}
		return &pv.Spec, nil
	case src.InlineVolumeSpec != nil:
		if src.InlineVolumeSpec.CSI == nil {
			return nil, errors.New("inline volume spec contains nil CSI source")
		}
		return src.InlineVolumeSpec, nil
	}
	return nil, errors.New("neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source")
}

// Attach is what one pass does for a VolumeAttachment that is not being
// deleted, in this order: add the attacher finalizer to the PV, record
// Err as status.attachError and stop, or else write Meta, call the driver
// with Request and mark the attachment attached.
type Attach struct {
	// Done: already attached; nothing to do.
	Done bool
	// Trivial: the driver does not attach; mark attached with no metadata
	// and no call.
	Trivial bool
	// PVFinalizer: the PV lacks the attacher finalizer and gets it first.
	PVFinalizer bool
	// Err is why the attach cannot go on.
	Err error
	// Meta is va with the attacher finalizer and the node-id annotation,
	// nil when it has both already.
	Meta *storagev1.VolumeAttachment
	// Request is the ControllerPublishVolume call (secrets are never
	// sent).
	Request *csi.ControllerPublishVolumeRequest
}

// PlanAttach decides the attach of va by driver, given its PV (nil: not
// found), the CSINode of va's node (nil: not found) and the driver's
// capabilities. It follows the external attacher: a PV being deleted is
// refused; the PV finalizer comes before everything that can fail later,
// and the VolumeAttachment's finalizer only once the node ID is known, so
// an attachment that never reached the driver can be deleted freely.
func PlanAttach(driver string, va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume, csiNode *storagev1.CSINode, caps Caps, defaultFSType string) Attach {
	if va.Status.Attached {
		return Attach{Done: true}
	}
	if !caps.PublishUnpublish {
		return Attach{Trivial: true}
	}
	var plan Attach
	finalizer := volume.AttacherFinalizer(driver)
	if va.Spec.Source.PersistentVolumeName != nil && va.Spec.Source.InlineVolumeSpec == nil && pv != nil {
		if pv.DeletionTimestamp != nil {
			plan.Err = fmt.Errorf("PersistentVolume %q is marked for deletion", pv.Name)
			return plan
		}
		plan.PVFinalizer = !slices.Contains(pv.Finalizers, finalizer)
	}
	spec, err := source(va, pv)
	if err != nil {
		plan.Err = err
		return plan
	}
	readOnly := spec.CSI.ReadOnly && caps.PublishReadonly
	capability, err := Capability(spec, caps.SingleNodeMultiWriter, defaultFSType)
	if err != nil {
		plan.Err = err
		return plan
	}
	nodeID, err := NodeID(driver, va.Spec.NodeName, csiNode, nil)
	if err != nil {
		plan.Err = err
		return plan
	}
	if !slices.Contains(va.Finalizers, finalizer) || va.Annotations[volume.AnnAttacherNodeID] != nodeID {
		meta := va.DeepCopy()
		if !slices.Contains(meta.Finalizers, finalizer) {
			meta.Finalizers = append(meta.Finalizers, finalizer)
		}
		if meta.Annotations == nil {
			meta.Annotations = map[string]string{}
		}
		meta.Annotations[volume.AnnAttacherNodeID] = nodeID
		plan.Meta = meta
	}
	plan.Request = &csi.ControllerPublishVolumeRequest{
		VolumeId:         spec.CSI.VolumeHandle,
		NodeId:           nodeID,
		VolumeCapability: capability,
		Readonly:         readOnly,
		VolumeContext:    spec.CSI.VolumeAttributes,
	}
	return plan
}

// Detach is what one pass does for a VolumeAttachment being deleted: call
// the driver with Request, then drop the attacher finalizer and mark the
// attachment detached; or record Err as status.detachError.
type Detach struct {
	// Done: va carries no attacher finalizer, so it is detached already
	// (or was never attached through the driver).
	Done bool
	Err  error
	// Request is the ControllerUnpublishVolume call.
	Request *csi.ControllerUnpublishVolumeRequest
}

// PlanDetach decides the detach of va, being deleted, given its PV (nil:
// not found) and the CSINode of its node (nil: not found). The node ID
// falls back to the node-id annotation, so a node whose driver is gone can
// still be detached.
func PlanDetach(driver string, va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume, csiNode *storagev1.CSINode) Detach {
	if !slices.Contains(va.Finalizers, volume.AttacherFinalizer(driver)) {
		return Detach{Done: true}
	}
	spec, err := source(va, pv)
	if err != nil {
		return Detach{Err: err}
	}
	nodeID, err := NodeID(driver, va.Spec.NodeName, csiNode, va)
	if err != nil {
		return Detach{Err: err}
	}
	return Detach{Request: &csi.ControllerUnpublishVolumeRequest{VolumeId: spec.CSI.VolumeHandle, NodeId: nodeID}}
}

// WithoutFinalizer returns a copy of va without driver's attacher
// finalizer (nil finalizers when none remain), and whether it had it.
func WithoutFinalizer(driver string, va *storagev1.VolumeAttachment) (*storagev1.VolumeAttachment, bool) {
	f := volume.AttacherFinalizer(driver)
	if !slices.Contains(va.Finalizers, f) {
		return va, false
	}
	out := va.DeepCopy()
	out.Finalizers = slices.DeleteFunc(out.Finalizers, func(s string) bool { return s == f })
	if len(out.Finalizers) == 0 {
		out.Finalizers = nil
	}
	return out, true
}

// ReleasePV reports whether the attacher finalizer of driver should come
// off pv: pv has it, is being deleted, and no VolumeAttachment (of any
// attacher) names it as its source.
func ReleasePV(driver string, pv *corev1.PersistentVolume, vas []storagev1.VolumeAttachment) bool {
	if pv.DeletionTimestamp == nil || !slices.Contains(pv.Finalizers, volume.AttacherFinalizer(driver)) {
		return false
	}
	for i := range vas {
		if n := vas[i].Spec.Source.PersistentVolumeName; n != nil && *n == pv.Name {
			return false
		}
	}
	return true
}

// MergePatch is the JSON merge patch (RFC 7386) that turns from into to.
func MergePatch(from, to any) ([]byte, error) {
	a, err := json.Marshal(from)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(to)
	if err != nil {
		return nil, err
	}
	return jsonpatch.CreateMergePatch(a, b)
}

type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// AddFinalizerPatch is the JSON patch (RFC 6902) that adds finalizer to an
// object whose finalizers are existing, guarded by a test of the list when
// it is nil or empty, so a concurrent change fails the patch instead of
// being overwritten.
func AddFinalizerPatch(existing []string, finalizer string) []byte {
	var ops []patchOp
	switch {
	case existing == nil:
		ops = []patchOp{{Op: "test", Path: "/metadata/finalizers", Value: nil}, {Op: "add", Path: "/metadata/finalizers", Value: []string{finalizer}}}
	case len(existing) == 0:
		ops = []patchOp{{Op: "test", Path: "/metadata/finalizers", Value: []string{}}, {Op: "replace", Path: "/metadata/finalizers", Value: []string{finalizer}}}
	default:
		ops = []patchOp{{Op: "add", Path: "/metadata/finalizers/-", Value: finalizer}}
	}
	b, _ := json.Marshal(ops)
	return b
}

// RemoveFinalizerPatch is the JSON patch that removes finalizer from an
// object whose finalizers are existing, by index, after testing that the
// index still holds it; ok is false when existing lacks it.
func RemoveFinalizerPatch(existing []string, finalizer string) (patch []byte, ok bool) {
	i := slices.Index(existing, finalizer)
	if i < 0 {
		return nil, false
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	b, _ := json.Marshal([]any{
		patchOp{Op: "test", Path: path, Value: finalizer},
		struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{"remove", path},
	})
	return b, true
}
