// Package volumes is the agent's volume manager, in the kubelet's role for
// a pod's volumes: it makes each volume of a pod exist on the host before
// the pod's containers start, names the host directory that backs it, and
// takes it down again after they stopped. It supports:
//   - emptyDir: a directory <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>
//     (mode 0777), or a tmpfs mounted there for medium Memory (size from
//     sizeLimit when set);
//   - hostPath: the host path itself, after upstream's type checks
//     (DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice,
//     BlockDevice, or none);
//   - persistentVolumeClaim, for PVs of a CSI driver: the agent stages the
//     volume once per node (NodeStageVolume at volume.StagingPath, when the
//     driver has STAGE_UNSTAGE_VOLUME) and publishes it for each pod
//     (NodePublishVolume at volume.PublishPath). PVs with a hostPath or local
//     source are also accepted, as their path.
//
// # How the caller drives it
//
// The pod worker calls Setup for a pod on every pass until it reports
// ready, and only then starts the containers, bind-mounting HostPath of
// each volume at the container's mountPath. Setup never waits: a step that
// has to wait (the volume to be reported in use, the VolumeAttachment to be
// attached) leaves the pod not ready, and a later call goes on. After the
// pod's containers stopped, the worker calls Teardown until it reports
// done, and only then forgets the pod. Cleanup, on every pass, tears down
// the volumes of pods the worker no longer knows (after an agent restart)
// and unstages volumes no pod uses.
//
// The node status poster lists InUse in status.volumesInUse and tells the
// manager what it posted with ReportedInUse. As upstream, a CSI volume is
// mounted only once the node has reported it in use, and it leaves the list
// only after it was unstaged, so that the attach/detach controller never
// detaches a mounted volume.
//
// For a CSI volume whose driver requires attachment (its CSIDriver says
// attachRequired, or there is no CSIDriver), Setup waits until the
// VolumeAttachment volume.AttachmentName(handle, driver, node) is
// attached; its attachmentMetadata is the publish context. The agent never
// creates or deletes VolumeAttachments: the attach/detach controller does.
//
// Failures of a mount step are recorded as FailedMount events with
// upstream's messages ("MountVolume.WaitForAttach failed for volume ...",
// "MountVolume.MountDevice failed ...", "MountVolume.SetUp failed ...") and
// retried after upstream's back-off (500 ms doubling to 2 min 2 s) on the
// injected clock. Errors that keep a pod from being processed at all (an
// unbound claim, an unsupported volume type) are returned, not recorded.
//
// # Restarts
//
// Everything the manager needs to take a volume down is on disk: the
// directories under <root>/pods/<uid>/volumes, and the vol_data.json files
// it writes, as upstream does, beside each publish target and staging
// path. New reads them back, so Teardown of a pod set up by an earlier
// agent works, and Setup of it again is idempotent.
//
// # Not here
//
// Block volumes, inline (ephemeral) CSI volumes, CSI secrets, fsGroup
// ownership changes, volume expansion and metrics; configMap, secret,
// projected and downwardAPI volumes (knode serves none of their sources).
// The manager mounts nothing into containers: the runtime does.
package volumes
