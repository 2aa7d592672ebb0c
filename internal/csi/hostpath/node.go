package hostpath

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
)

// node is the Node service. What is mounted where is read from the mount
// table; the node state dir only adds how (access mode, readonly), so a
// record whose mount is gone (after a reboot, say) is ignored and removed.
// Calls hold the node state dir's lock.
type node struct {
	csi.UnimplementedNodeServer
	d *Driver
}

const (
	stagedDir    = "staged"
	publishedDir = "published"
)

var nodeCapabilities = []csi.NodeServiceCapability_RPC_Type{
	csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
	csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	resp := &csi.NodeGetCapabilitiesResponse{}
	for _, t := range nodeCapabilities {
		resp.Capabilities = append(resp.Capabilities, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: n.d.cfg.NodeID, MaxVolumesPerNode: n.d.cfg.MaxVolumesPerNode}
	if len(n.d.cfg.Topology) > 0 {
		resp.AccessibleTopology = &csi.Topology{Segments: n.d.cfg.Topology}
	}
	return resp, nil
}

// recordPath is where the record of a mount at path lives.
func (n *node) recordPath(kind, path string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(path)))
	return filepath.Join(n.d.cfg.NodeStateDir, kind, hex.EncodeToString(sum[:])+".json")
}

func (n *node) putRecord(kind, path string, rec any) error {
	p := n.recordPath(kind, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return writeJSON(p, rec)
}

func (n *node) dropRecord(kind, path string) error {
	err := os.Remove(n.recordPath(kind, path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// record reads the record of a mount at path into rec; false when none.
func (n *node) record(kind, path string, rec any) (bool, error) {
	err := readJSON(n.recordPath(kind, path), rec)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// livePublications returns the records of the volume's node-published
// targets that are still mounted, and removes the others.
func (n *node) livePublications(m mounts, volumeID, volDir string) ([]publishRecord, error) {
	dir := filepath.Join(n.d.cfg.NodeStateDir, publishedDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []publishRecord
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		var rec publishRecord
		if err := readJSON(filepath.Join(dir, e.Name()), &rec); err != nil {
			if errors.Is(err, ErrNotFound) {
				continue
			}
			return nil, err
		}
		if rec.VolumeID != volumeID {
			continue
		}
		at, _, err := stateAt(m, rec.Target, volDir)
		if err != nil {
			return nil, err
		}
		if at != pathThisVolume {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		out = append(out, rec)
	}
	return out, nil
}

// lockNode takes the node state dir's lock.
func (n *node) lockNode() (func(), error) {
	if err := os.MkdirAll(n.d.cfg.NodeStateDir, 0o700); err != nil {
		return nil, err
	}
	return lockDir(n.d.cfg.NodeStateDir, true)
}

// existingVolume returns the record and the directory of a volume that
// exists and may be used on this node.
func (n *node) existingVolume(id string) (*Volume, string, error) {
	v, err := n.d.store.volume(id)
	if err != nil {
		return nil, "", err
	}
	dir := n.d.store.volumeDir(id)
	if _, err := os.Stat(dir); err != nil {
		return nil, "", fail(ErrNotFound, "volume %s has no directory in the data dir: %v", id, err)
	}
	if !nodeAccessible(v.Topology, n.d.cfg.Topology) {
		return nil, "", fail(ErrPrecondition, "volume %s is accessible from %v, which this node (topology %v) is not in", id, v.Topology, n.d.cfg.Topology)
	}
	return v, dir, nil
}

func (n *node) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (_ *csi.NodeStageVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case req.GetStagingTargetPath() == "":
		return nil, fail(ErrInvalid, "staging_target_path is required")
	case !filepath.IsAbs(req.GetStagingTargetPath()):
		return nil, fail(ErrInvalid, "staging_target_path %q must be absolute", req.GetStagingTargetPath())
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	_, volDir, err := n.existingVolume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	unlock, err := n.lockNode()
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := filepath.Clean(req.GetStagingTargetPath())
	m, err := readMounts()
	if err != nil {
		return nil, err
	}
	at, _, err := stateAt(m, path, volDir)
	if err != nil {
		return nil, err
	}
	var rec stageRecord
	has, err := n.record(stagedDir, path, &rec)
	if err != nil {
		return nil, err
	}
	var recp *stageRecord
	if has {
		recp = &rec
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	mount, err := planStage(at, recp, req.GetVolumeId(), mode)
	if err != nil || !mount {
		return &csi.NodeStageVolumeResponse{}, err
	}
	if err := os.MkdirAll(path, 0o750); err != nil {
		return nil, err
	}
	if err := bindMount(volDir, path, false); err != nil {
		return nil, err
	}
	if err := n.putRecord(stagedDir, path, stageRecord{VolumeID: req.GetVolumeId(), Path: path, Mode: mode.String()}); err != nil {
		return nil, errors.Join(err, unmountAll(path))
	}
	n.d.log.Info("staged volume", "volumeID", req.GetVolumeId(), "path", path)
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *node) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (_ *csi.NodeUnstageVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case req.GetStagingTargetPath() == "":
		return nil, fail(ErrInvalid, "staging_target_path is required")
	}
	unlock, err := n.lockNode()
	if err != nil {
		return nil, err
	}
	defer unlock()
	path := filepath.Clean(req.GetStagingTargetPath())
	if err := unmountAll(path); err != nil {
		return nil, err
	}
	if err := n.dropRecord(stagedDir, path); err != nil {
		return nil, err
	}
	n.d.log.Info("unstaged volume", "volumeID", req.GetVolumeId(), "path", path)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (_ *csi.NodePublishVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case req.GetTargetPath() == "":
		return nil, fail(ErrInvalid, "target_path is required")
	case !filepath.IsAbs(req.GetTargetPath()):
		return nil, fail(ErrInvalid, "target_path %q must be absolute", req.GetTargetPath())
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if req.GetStagingTargetPath() == "" {
		return nil, fail(ErrPrecondition, "staging_target_path is required: the driver stages volumes (STAGE_UNSTAGE_VOLUME)")
	}
	_, volDir, err := n.existingVolume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	unlock, err := n.lockNode()
	if err != nil {
		return nil, err
	}
	defer unlock()
	m, err := readMounts()
	if err != nil {
		return nil, err
	}
	staging := filepath.Clean(req.GetStagingTargetPath())
	if at, _, err := stateAt(m, staging, volDir); err != nil {
		return nil, err
	} else if at != pathThisVolume {
		return nil, fail(ErrPrecondition, "volume %s is not staged at %s", req.GetVolumeId(), staging)
	}
	target := filepath.Clean(req.GetTargetPath())
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	preq := nodePublish{VolumeID: req.GetVolumeId(), Target: target, Mode: mode, Readonly: req.GetReadonly() || readerOnly(mode)}
	at, entry, err := stateAt(m, target, volDir)
	if err != nil {
		return nil, err
	}
	var atTarget *publishRecord
	if at == pathThisVolume {
		var rec publishRecord
		has, err := n.record(publishedDir, target, &rec)
		if err != nil {
			return nil, err
		}
		if has && rec.VolumeID == preq.VolumeID {
			atTarget = &rec
		} else {
			// Mounted, but unrecorded: all that is known is whether it is
			// read-only.
			atTarget = &publishRecord{VolumeID: preq.VolumeID, Target: target, Readonly: entry.ReadOnly}
		}
	}
	others, err := n.livePublications(m, preq.VolumeID, volDir)
	if err != nil {
		return nil, err
	}
	mount, err := planNodePublish(preq, at, atTarget, others)
	if err != nil || !mount {
		return &csi.NodePublishVolumeResponse{}, err
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, err
	}
	if err := bindMount(staging, target, preq.Readonly); err != nil {
		return nil, err
	}
	rec := publishRecord{VolumeID: preq.VolumeID, Target: target, Staging: staging, Mode: mode.String(), Readonly: preq.Readonly}
	if err := n.putRecord(publishedDir, target, rec); err != nil {
		return nil, errors.Join(err, unmountAll(target))
	}
	n.d.log.Info("published volume", "volumeID", preq.VolumeID, "target", target, "readonly", preq.Readonly)
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target and removes the directory
// NodePublishVolume made there. It succeeds for a target that is not
// mounted or does not exist; it never removes a target that is still
// mounted or not empty.
func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (_ *csi.NodeUnpublishVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case req.GetTargetPath() == "":
		return nil, fail(ErrInvalid, "target_path is required")
	}
	unlock, err := n.lockNode()
	if err != nil {
		return nil, err
	}
	defer unlock()
	target := filepath.Clean(req.GetTargetPath())
	if err := unmountAll(target); err != nil {
		return nil, err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove target %s: %w", target, err)
	}
	if err := n.dropRecord(publishedDir, target); err != nil {
		return nil, err
	}
	n.d.log.Info("unpublished volume", "volumeID", req.GetVolumeId(), "target", target)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats reports the statfs of the filesystem holding the
// volume, at a path where the volume is staged or published.
func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (_ *csi.NodeGetVolumeStatsResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case req.GetVolumePath() == "":
		return nil, fail(ErrInvalid, "volume_path is required")
	}
	if _, err := n.d.store.volume(req.GetVolumeId()); err != nil {
		return nil, err
	}
	volDir := n.d.store.volumeDir(req.GetVolumeId())
	same, err := sameFile(req.GetVolumePath(), volDir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !same) {
		return nil, fail(ErrNotFound, "volume %s is not at %s", req.GetVolumeId(), req.GetVolumePath())
	}
	if err != nil {
		return nil, err
	}
	st, err := statFS(req.GetVolumePath())
	if err != nil {
		return nil, fmt.Errorf("statfs %s: %w", req.GetVolumePath(), err)
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: st.TotalBytes, Available: st.AvailableBytes, Used: st.UsedBytes},
		{Unit: csi.VolumeUsage_INODES, Total: st.TotalInodes, Available: st.AvailableInodes, Used: st.UsedInodes},
	}}, nil
}
