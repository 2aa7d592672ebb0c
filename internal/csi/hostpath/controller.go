package hostpath

import (
	"context"
	"errors"
	"fmt"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
)

// controller is the Controller service. Every call that changes a record
// holds the data dir's lock from the read to the write, so the decisions
// see the state of every process that serves the data dir.
type controller struct {
	csi.UnimplementedControllerServer
	d *Driver
}

var controllerCapabilities = []csi.ControllerServiceCapability_RPC_Type{
	csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	csi.ControllerServiceCapability_RPC_PUBLISH_READONLY,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
	csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
	csi.ControllerServiceCapability_RPC_GET_VOLUME,
	csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

func (c *controller) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	resp := &csi.ControllerGetCapabilitiesResponse{}
	for _, t := range controllerCapabilities {
		resp.Capabilities = append(resp.Capabilities, &csi.ControllerServiceCapability{
			Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
		})
	}
	return resp, nil
}

// csiVolume is a record as CSI reports it.
func csiVolume(v Volume) *csi.Volume {
	out := &csi.Volume{VolumeId: v.ID, CapacityBytes: v.CapacityBytes}
	for _, seg := range v.Topology {
		out.AccessibleTopology = append(out.AccessibleTopology, &csi.Topology{Segments: seg})
	}
	return out
}

func (c *controller) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (_ *csi.CreateVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	s := c.d.store
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var existing *Volume
	if req.GetName() != "" {
		existing, err = s.volume(VolumeID(req.GetName()))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	lim := createLimits{Capacity: c.d.cfg.Capacity, DefaultSize: c.d.cfg.DefaultVolumeSize}
	if lim.Capacity > 0 && existing == nil {
		all, err := s.volumes()
		if err != nil {
			return nil, err
		}
		lim.Allocated = allocated(all, "")
	}
	v, create, err := planCreate(req, existing, lim, c.d.cfg.Clock.Now())
	if err != nil {
		return nil, err
	}
	if create {
		// The directory first, then the record: a volume exists once its
		// record does, and a directory without one is a leftover.
		if err := s.makeVolumeDir(v.ID, true); err != nil {
			return nil, fmt.Errorf("make volume %s: %w", v.ID, err)
		}
		if err := s.putVolume(v); err != nil {
			_ = s.removeVolumeDir(v.ID)
			return nil, fmt.Errorf("record volume %s: %w", v.ID, err)
		}
		c.d.log.Info("created volume", "name", v.Name, "volumeID", v.ID, "capacityBytes", v.CapacityBytes, "topology", v.Topology)
	} else if err := s.makeVolumeDir(v.ID, false); err != nil {
		// A delete cut short may have removed the directory of a volume
		// whose record remained.
		return nil, fmt.Errorf("make volume %s: %w", v.ID, err)
	}
	return &csi.CreateVolumeResponse{Volume: csiVolume(v)}, nil
}

func (c *controller) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (_ *csi.DeleteVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	id := req.GetVolumeId()
	if id == "" {
		return nil, fail(ErrInvalid, "volume_id is required")
	}
	if !validVolumeID(id) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	s := c.d.store
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v, err := s.volume(id)
	switch {
	case errors.Is(err, ErrNotFound):
		// Gone already; remove a leftover directory, if any.
		return &csi.DeleteVolumeResponse{}, s.removeVolumeDir(id)
	case err != nil:
		return nil, err
	}
	if err := planDelete(*v); err != nil {
		return nil, err
	}
	// The content first: if that fails, the record stays and a retry
	// finishes the job.
	if err := s.removeVolumeDir(id); err != nil {
		return nil, fmt.Errorf("delete volume %s: %w", id, err)
	}
	if err := s.removeVolumeRecord(id); err != nil {
		return nil, fmt.Errorf("delete volume %s: %w", id, err)
	}
	c.d.log.Info("deleted volume", "name", v.Name, "volumeID", id)
	return &csi.DeleteVolumeResponse{}, nil
}

func (c *controller) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (_ *csi.ControllerPublishVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case req.GetNodeId() == "":
		return nil, fail(ErrInvalid, "node_id is required")
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	s := c.d.store
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v, err := s.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	rec, err := s.node(req.GetNodeId())
	if err != nil {
		return nil, err
	}
	view := nodeView{Record: rec}
	if rec != nil && rec.MaxVolumesPerNode > 0 {
		all, err := s.volumes()
		if err != nil {
			return nil, err
		}
		view.Attached = attachedTo(all, req.GetNodeId(), v.ID)
	}
	preq := publishRequest{NodeID: req.GetNodeId(), Mode: req.GetVolumeCapability().GetAccessMode().GetMode(), Readonly: req.GetReadonly()}
	out, changed, err := planPublish(*v, preq, view)
	if err != nil {
		return nil, err
	}
	if changed {
		if err := s.putVolume(out); err != nil {
			return nil, fmt.Errorf("record publication of %s: %w", v.ID, err)
		}
		c.d.log.Info("published volume", "volumeID", v.ID, "node", preq.NodeID, "mode", preq.Mode.String(), "readonly", preq.Readonly)
	}
	return &csi.ControllerPublishVolumeResponse{PublishContext: publishContext(preq.NodeID, out.Published[preq.NodeID])}, nil
}

func (c *controller) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (_ *csi.ControllerUnpublishVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	if req.GetVolumeId() == "" {
		return nil, fail(ErrInvalid, "volume_id is required")
	}
	s := c.d.store
	unlock, err := s.lock(true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	v, err := s.volume(req.GetVolumeId())
	if errors.Is(err, ErrNotFound) {
		// A volume that does not exist is published nowhere.
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	out, changed := planUnpublish(*v, req.GetNodeId())
	if changed {
		if err := s.putVolume(out); err != nil {
			return nil, fmt.Errorf("record unpublication of %s: %w", v.ID, err)
		}
		c.d.log.Info("unpublished volume", "volumeID", v.ID, "node", req.GetNodeId())
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (c *controller) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (_ *csi.ValidateVolumeCapabilitiesResponse, err error) {
	defer func() { err = toStatus(err) }()
	switch {
	case req.GetVolumeId() == "":
		return nil, fail(ErrInvalid, "volume_id is required")
	case len(req.GetVolumeCapabilities()) == 0:
		return nil, fail(ErrInvalid, "volume_capabilities are required")
	}
	v, err := c.d.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if msg := validationProblem(*v, req); msg != "" {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: msg}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (c *controller) ListVolumes(_ context.Context, req *csi.ListVolumesRequest) (_ *csi.ListVolumesResponse, err error) {
	defer func() { err = toStatus(err) }()
	s := c.d.store
	unlock, err := s.lock(false)
	if err != nil {
		return nil, err
	}
	all, err := s.volumes()
	unlock()
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(all))
	byID := make(map[string]Volume, len(all))
	for i, v := range all {
		ids[i] = v.ID
		byID[v.ID] = v
	}
	page, next, err := pageIDs(ids, req.GetStartingToken(), req.GetMaxEntries())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListVolumesResponse{NextToken: next}
	for _, id := range page {
		v := byID[id]
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: csiVolume(v),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: v.PublishedNodes()},
		})
	}
	return resp, nil
}

func (c *controller) ControllerGetVolume(_ context.Context, req *csi.ControllerGetVolumeRequest) (_ *csi.ControllerGetVolumeResponse, err error) {
	defer func() { err = toStatus(err) }()
	if req.GetVolumeId() == "" {
		return nil, fail(ErrInvalid, "volume_id is required")
	}
	v, err := c.d.store.volume(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeResponse{
		Volume: csiVolume(*v),
		Status: &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: v.PublishedNodes()},
	}, nil
}

// GetCapacity reports the same capacity for every topology segment: the
// data dir is one pool.
func (c *controller) GetCapacity(_ context.Context, req *csi.GetCapacityRequest) (_ *csi.GetCapacityResponse, err error) {
	defer func() { err = toStatus(err) }()
	for _, vc := range req.GetVolumeCapabilities() {
		if err := checkCapability(vc); err != nil {
			return &csi.GetCapacityResponse{AvailableCapacity: 0}, nil
		}
	}
	var alloc, free int64
	if c.d.cfg.Capacity > 0 {
		s := c.d.store
		unlock, err := s.lock(false)
		if err != nil {
			return nil, err
		}
		all, err := s.volumes()
		unlock()
		if err != nil {
			return nil, err
		}
		alloc = allocated(all, "")
	} else {
		st, err := statFS(c.d.cfg.DataDir)
		if err != nil {
			return nil, fmt.Errorf("statfs %s: %w", c.d.cfg.DataDir, err)
		}
		free = st.AvailableBytes
	}
	return &csi.GetCapacityResponse{AvailableCapacity: capacityLeft(c.d.cfg.Capacity, alloc, free)}, nil
}
