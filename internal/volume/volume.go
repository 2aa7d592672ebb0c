// Package volume holds the names that the storage components agree on: the
// annotations, finalizers and taint keys that upstream's controllers, the
// CSI sidecars and the kubelet read and write, the names they give
// VolumeAttachments and volumes in node status, and the paths under the
// agent's root directory where volumes are staged and published.
//
// Everything here is a constant or a pure function of its arguments. The
// controllers that act on these names live in internal/controller/volume/...,
// the agent's side in internal/agent/volumes, and the built-in driver in
// internal/csi/hostpath.
package volume

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// BuiltinDriver is the name of knode's built-in CSI driver.
const BuiltinDriver = "hostpath.csi.knode.io"

// CSIPluginName is the kubelet's name for its CSI volume plugin; it prefixes
// unique volume names and names the plugin directory.
const CSIPluginName = "kubernetes.io/csi"

// Annotations, upstream's strings.
const (
	// AnnStorageProvisioner on a PVC names the provisioner that should act
	// on it; the PV controller sets it, external provisioners read it.
	AnnStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnSelectedNode on a PVC is the node the scheduler chose for a
	// WaitForFirstConsumer claim.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnBindCompleted on a PVC: the PV controller finished binding it.
	AnnBindCompleted = "pv.kubernetes.io/bind-completed"
	// AnnBoundByController on a PV or PVC: the PV controller, not the
	// user, made the binding.
	AnnBoundByController = "pv.kubernetes.io/bound-by-controller"
	// AnnDynamicallyProvisioned on a PV names the provisioner that made it.
	AnnDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by"
	// AnnDefaultStorageClass marks the default StorageClass ("true").
	AnnDefaultStorageClass     = "storageclass.kubernetes.io/is-default-class"
	AnnBetaDefaultStorageClass = "storageclass.beta.kubernetes.io/is-default-class"
	// AnnBetaStorageClass is the old way to name a claim's or volume's class.
	AnnBetaStorageClass = "volume.beta.kubernetes.io/storage-class"
	// AnnControllerManagedAttachDetach on a Node ("true"): the attach/detach
	// controller attaches and detaches that node's volumes.
	AnnControllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"
	// AnnCSINodeID on a Node is a JSON map from CSI driver name to the
	// node's ID in that driver.
	AnnCSINodeID = "csi.volume.kubernetes.io/nodeid"
	// AnnAttacherNodeID on a VolumeAttachment is the node ID the attacher
	// used.
	AnnAttacherNodeID = "csi.alpha.kubernetes.io/node-id"
)

// Finalizers, upstream's strings.
const (
	PVProtectionFinalizer  = "kubernetes.io/pv-protection"
	PVCProtectionFinalizer = "kubernetes.io/pvc-protection"
	// ProvisionerDeletionFinalizer is what the external provisioner puts on
	// the PVs it provisions, so that it can delete the backing volume.
	ProvisionerDeletionFinalizer = "external-provisioner.volume.kubernetes.io/finalizer"
)

// TaintOutOfService is the key of the taint an operator puts on a node that
// is known to be off. Only the key counts, whatever the effect and value.
const TaintOutOfService = "node.kubernetes.io/out-of-service"

var notFinalizerChar = regexp.MustCompile(`[^a-zA-Z0-9-]`)

// AttacherFinalizer is the finalizer the external attacher of driver puts on
// VolumeAttachments and PVs: "external-attacher/" and the driver name with
// every character other than letters, digits and '-' replaced by '-' (and an
// "X" appended when that leaves a trailing '-').
func AttacherFinalizer(driver string) string {
	name := notFinalizerChar.ReplaceAllString(driver, "-")
	if strings.HasSuffix(name, "-") {
		name += "X"
	}
	return "external-attacher/" + name
}

// AttachmentName is the name of the VolumeAttachment that attaches the CSI
// volume handle of driver to node: "csi-" and the hex SHA-256 of the three
// strings joined with nothing between them.
func AttachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// UniqueName is the name a CSI volume has in a Node's volumesInUse and
// volumesAttached: "kubernetes.io/csi/<driver>^<handle>".
func UniqueName(driver, handle string) corev1.UniqueVolumeName {
	return corev1.UniqueVolumeName(CSIPluginName + "/" + driver + "^" + handle)
}

// ParseUniqueName splits a name made by UniqueName; ok is false for any other
// name.
func ParseUniqueName(name corev1.UniqueVolumeName) (driver, handle string, ok bool) {
	rest, found := strings.CutPrefix(string(name), CSIPluginName+"/")
	if !found {
		return "", "", false
	}
	driver, handle, ok = strings.Cut(rest, "^")
	return driver, handle, ok && driver != "" && handle != ""
}

// StagingPath is where the agent asks driver to stage a volume handle:
// <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount.
func StagingPath(rootDir, driver, handle string) string {
	return filepath.Join(rootDir, "plugins", CSIPluginName, driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
}

// PublishPath is where the agent asks a driver to publish the PV pvName for
// the pod podUID: <root>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount.
func PublishPath(rootDir string, podUID types.UID, pvName string) string {
	return filepath.Join(PodVolumeDir(rootDir, podUID, "kubernetes.io~csi", pvName), "mount")
}

// PodVolumeDir is the directory of one of a pod's volumes:
// <root>/pods/<uid>/volumes/<plugin dir>/<name>, where the plugin dir is
// upstream's escaped plugin name ("kubernetes.io~empty-dir",
// "kubernetes.io~csi").
func PodVolumeDir(rootDir string, podUID types.UID, pluginDir, name string) string {
	return filepath.Join(rootDir, "pods", string(podUID), "volumes", pluginDir, name)
}

// ClaimClass is the StorageClass a claim asks for: spec.storageClassName, or
// the beta annotation when the field is unset. "" means no class.
func ClaimClass(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.StorageClassName != nil {
		return *pvc.Spec.StorageClassName
	}
	return pvc.Annotations[AnnBetaStorageClass]
}

// VolumeClass is the StorageClass of a PV, read the same way as ClaimClass.
func VolumeClass(pv *corev1.PersistentVolume) string {
	if pv.Spec.StorageClassName != "" {
		return pv.Spec.StorageClassName
	}
	return pv.Annotations[AnnBetaStorageClass]
}

// IsDefaultClass reports whether sc carries the default-class annotation.
func IsDefaultClass(sc *storagev1.StorageClass) bool {
	return sc.Annotations[AnnDefaultStorageClass] == "true" || sc.Annotations[AnnBetaDefaultStorageClass] == "true"
}

// PodClaims returns the names of the PVCs the pod's volumes use, in the
// pod's volume order, each once.
func PodClaims(pod *corev1.Pod) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim == nil || seen[v.PersistentVolumeClaim.ClaimName] {
			continue
		}
		seen[v.PersistentVolumeClaim.ClaimName] = true
		out = append(out, v.PersistentVolumeClaim.ClaimName)
	}
	return out
}

// OutOfService reports whether node carries the out-of-service taint key.
func OutOfService(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == TaintOutOfService {
			return true
		}
	}
	return false
}
