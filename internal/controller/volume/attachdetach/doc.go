// Package attachdetach is the attach/detach controller for CSI volumes
// ("attachdetach-controller"): it attaches the persistent volumes that pods
// use to the nodes the pods run on, by creating VolumeAttachments, detaches
// them by deleting the VolumeAttachments when no pod there needs them, and
// keeps each node's status.volumesAttached in step.
//
// What it owns:
//   - Nodes that carry the annotation
//     volumes.kubernetes.io/controller-managed-attach-detach (its presence
//     counts, as upstream) and the VolumeAttachments on them, and the
//     VolumeAttachments on nodes that no longer exist.
//   - The desired state (Desire): for each such node, the CSI PVs bound to
//     the PVCs of the pods scheduled there, leaving out terminated pods (a
//     pod stuck Terminating keeps its volumes until PodGC or a user
//     force-deletes it), and leaving out drivers whose CSIDriver says attachRequired: false (a
//     driver without a CSIDriver object needs attaching).
//   - The reconciler (Decide), exactly as section 10 of the node facts: a
//     volume no pod needs waits while its node reports it in
//     status.volumesInUse, unless the node carries the out-of-service taint
//     or is not Ready and MaxWaitForUnmountDuration (6 min) has passed
//     since the detach was first wanted (unless DisableForceDetachOnTimeout);
//     then it is removed from status.volumesAttached first, and detached
//     only if that write succeeded. Forced detaches count in
//     attach_detach_controller_attachdetach_controller_forced_detaches
//     {reason="timeout"|"out-of-service"} when the delete is issued.
//   - Attaching: the VolumeAttachment is named volume.AttachmentName(handle,
//     driver, node) with spec {attacher: driver, nodeName,
//     source.persistentVolumeName}, as upstream's CSI attacher makes it; an
//     exclusive (ReadWriteOnce/ReadWriteOncePod) volume waits while it is
//     attached to another node (a Multi-Attach FailedAttachVolume event,
//     once). When status.attached becomes true the volume goes into
//     status.volumesAttached as {name: kubernetes.io/csi/<driver>^<handle>,
//     devicePath: ""} and the pods get a SuccessfulAttachVolume event.
//
// The detach-request times live in memory only, like upstream's: a new
// controller starts every unmount wait again.
//
// What the caller must do: give it a client allowed to list nodes, pods,
// PVCs, PVs, CSIDrivers and VolumeAttachments, create and delete
// VolumeAttachments, patch nodes/status and create events. Then call Step
// for one deterministic pass on the injected clock (tests, the simulator)
// or Run, which passes every ReconcilerSyncLoopPeriod (100 ms) and on
// informer changes. Run and Step share memory. One controller per cluster.
//
// What it does not do: it does not talk CSI. The external-attacher sidecar,
// or knode's built-in attacher, acts on the VolumeAttachments: it calls
// ControllerPublish and sets status.attached, and on deletion calls
// ControllerUnpublish and drops its finalizer; the volume counts as
// detaching until the VolumeAttachment is gone. It handles no in-tree
// plugins, no CSI migration and no inline CSI volumes, and it leaves
// VolumeAttachments on existing nodes that it does not manage alone.
package attachdetach
