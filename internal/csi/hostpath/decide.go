package hostpath

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
)

// This file holds the driver's decisions. Each is a pure function of a
// request and a snapshot of the records; the handlers read the records
// (under the data dir's lock), call the decision and write what it returns.

// Volume is the record of one volume, kept in <data>/meta/<id>.json.
type Volume struct {
	// ID is the volume handle: VolumeID(Name).
	ID string `json:"id"`
	// Name is the name CreateVolume was called with.
	Name string `json:"name"`
	// CapacityBytes is the size the volume was created with. The driver
	// does not enforce it inside the directory.
	CapacityBytes int64 `json:"capacityBytes"`
	// Parameters are CreateVolume's parameters, kept to check that a
	// repeated call asks for the same volume.
	Parameters map[string]string `json:"parameters,omitempty"`
	// Topology lists the segments from which the volume is accessible;
	// empty means every node.
	Topology []map[string]string `json:"topology,omitempty"`
	// Created is when CreateVolume made the volume.
	Created time.Time `json:"created"`
	// Published maps the IDs of the nodes the volume is controller-published
	// to onto how it is published there.
	Published map[string]Publication `json:"published,omitempty"`
}

// Publication is how a volume is controller-published to one node.
type Publication struct {
	// Mode is the CSI access mode's name, e.g. "SINGLE_NODE_WRITER".
	Mode string `json:"mode"`
	// Readonly is ControllerPublishVolume's readonly flag.
	Readonly bool `json:"readonly,omitempty"`
}

// NodeRecord is what a node's side of the driver writes about itself into
// <data>/nodes/<id>/node.json, so that the controller side (perhaps on
// another machine) knows the node exists, its topology and its limit.
type NodeRecord struct {
	NodeID            string            `json:"nodeID"`
	Topology          map[string]string `json:"topology,omitempty"`
	MaxVolumesPerNode int64             `json:"maxVolumesPerNode,omitempty"`
}

// Clone returns a deep copy of v; decisions never change their input.
func (v Volume) Clone() Volume {
	out := v
	out.Parameters = maps.Clone(v.Parameters)
	out.Topology = cloneTopology(v.Topology)
	out.Published = maps.Clone(v.Published)
	return out
}

// PublishedNodes returns the IDs of the nodes v is published to, sorted.
func (v Volume) PublishedNodes() []string {
	return slices.Sorted(maps.Keys(v.Published))
}

func cloneTopology(t []map[string]string) []map[string]string {
	if t == nil {
		return nil
	}
	out := make([]map[string]string, len(t))
	for i, s := range t {
		out[i] = maps.Clone(s)
	}
	return out
}

var volumeIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// VolumeID is the handle of the volume named name: the first 16 bytes of
// the name's SHA-256 in hex. Deriving the handle from the name makes
// CreateVolume idempotent without an index of names.
func VolumeID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

// validVolumeID reports whether id has the shape VolumeID gives. Any other
// handle names no volume of this driver.
func validVolumeID(id string) bool { return volumeIDPattern.MatchString(id) }

// validNodeID reports whether id can name a node record: non-empty, at
// most 253 bytes, one path element.
func validNodeID(id string) bool {
	return id != "" && len(id) <= 253 && id != "." && id != ".." &&
		!strings.ContainsAny(id, "/\x00")
}

// singleNode reports whether mode lets the volume be published to at most
// one node at a time.
func singleNode(mode csi.VolumeCapability_AccessMode_Mode) bool {
	switch mode {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
		csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
		return true
	}
	return false
}

// singleTarget reports whether mode lets the volume be node-published at
// only one target path on a node: the single-node modes other than
// SINGLE_NODE_MULTI_WRITER (the spec's table for plugins that have the
// SINGLE_NODE_MULTI_WRITER capability).
func singleTarget(mode csi.VolumeCapability_AccessMode_Mode) bool {
	return singleNode(mode) && mode != csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
}

// readerOnly reports whether mode allows no writer at all.
func readerOnly(mode csi.VolumeCapability_AccessMode_Mode) bool {
	return mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
}

// parseMode reads a mode name written by Publication.Mode; unknown names
// give UNKNOWN.
func parseMode(name string) csi.VolumeCapability_AccessMode_Mode {
	return csi.VolumeCapability_AccessMode_Mode(csi.VolumeCapability_AccessMode_Mode_value[name])
}

// checkCapability accepts a capability this driver can serve: a known
// access mode with the mount access type. fs_type and mount_flags are
// accepted and ignored, since a volume is a bind-mounted directory.
func checkCapability(c *csi.VolumeCapability) error {
	if c == nil {
		return fail(ErrInvalid, "volume capability is required")
	}
	mode := c.GetAccessMode().GetMode()
	if _, known := csi.VolumeCapability_AccessMode_Mode_name[int32(mode)]; !known || mode == csi.VolumeCapability_AccessMode_UNKNOWN {
		return fail(ErrInvalid, "volume capability: access mode %v is not supported", mode)
	}
	switch {
	case c.GetBlock() != nil:
		return fail(ErrInvalid, "volume capability: access type block is not supported, only mount")
	case c.GetMount() == nil:
		return fail(ErrInvalid, "volume capability: access type is required (mount)")
	}
	return nil
}

// checkCapabilities checks a CreateVolume's list: at least one, each
// acceptable.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return fail(ErrInvalid, "volume_capabilities are required")
	}
	for _, c := range caps {
		if err := checkCapability(c); err != nil {
			return err
		}
	}
	return nil
}

// DefaultVolumeSize is the capacity of a volume created without
// required_bytes, unless Config.DefaultVolumeSize says otherwise.
const DefaultVolumeSize = 1 << 30

// volumeSize decides a new volume's capacity from the requested range:
// required_bytes when set, else def; limited by limit_bytes when set.
func volumeSize(r *csi.CapacityRange, def int64) (int64, error) {
	req, lim := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case req < 0:
		return 0, fail(ErrInvalid, "capacity_range.required_bytes must not be negative, got %d", req)
	case lim < 0:
		return 0, fail(ErrInvalid, "capacity_range.limit_bytes must not be negative, got %d", lim)
	case lim > 0 && req > lim:
		return 0, fail(ErrOutOfRange, "capacity_range.required_bytes (%d) exceeds limit_bytes (%d)", req, lim)
	}
	size := req
	if size == 0 {
		size = def
		if lim > 0 && size > lim {
			size = lim
		}
	}
	return size, nil
}

// sizeFits reports whether an existing volume of size bytes satisfies r.
func sizeFits(size int64, r *csi.CapacityRange) bool {
	if size < r.GetRequiredBytes() {
		return false
	}
	return r.GetLimitBytes() == 0 || size <= r.GetLimitBytes()
}

// chooseTopology decides where a new volume is accessible from: the first
// preferred segment, else the first requisite one, else (no requirement)
// everywhere, which is nil.
func chooseTopology(req *csi.TopologyRequirement) []map[string]string {
	if p := req.GetPreferred(); len(p) > 0 {
		return []map[string]string{maps.Clone(p[0].GetSegments())}
	}
	if r := req.GetRequisite(); len(r) > 0 {
		return []map[string]string{maps.Clone(r[0].GetSegments())}
	}
	return nil
}

// topologySatisfies reports whether a volume accessible from have meets
// req: some segment of have is one of the requisite segments (or, with no
// requisite, one of the preferred). A volume accessible everywhere meets
// every requirement.
func topologySatisfies(have []map[string]string, req *csi.TopologyRequirement) bool {
	allowed := req.GetRequisite()
	if len(allowed) == 0 {
		allowed = req.GetPreferred()
	}
	if len(allowed) == 0 || len(have) == 0 {
		return true
	}
	for _, h := range have {
		for _, a := range allowed {
			if maps.Equal(h, a.GetSegments()) {
				return true
			}
		}
	}
	return false
}

// nodeAccessible reports whether a volume accessible from volTopology can
// be used on a node that reports nodeTopology: the volume is accessible
// everywhere, or one of its segments is contained in the node's.
func nodeAccessible(volTopology []map[string]string, nodeTopology map[string]string) bool {
	if len(volTopology) == 0 {
		return true
	}
	for _, seg := range volTopology {
		ok := true
		for k, v := range seg {
			if nv, has := nodeTopology[k]; !has || nv != v {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// createLimits are what planCreate needs to know of the driver and of the
// other volumes.
type createLimits struct {
	// Capacity is the configured total capacity in bytes; 0 means none.
	Capacity int64
	// Allocated is the sum of the other volumes' capacities.
	Allocated int64
	// DefaultSize is the size of a volume asked for without required_bytes.
	DefaultSize int64
}

// planCreate decides a CreateVolume. existing is the record with the
// request's ID, nil when there is none. It returns the volume to report
// and whether it is new (and so must be made and recorded).
func planCreate(req *csi.CreateVolumeRequest, existing *Volume, lim createLimits, now time.Time) (Volume, bool, error) {
	if req.GetName() == "" {
		return Volume{}, false, fail(ErrInvalid, "name is required")
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return Volume{}, false, err
	}
	if req.GetVolumeContentSource() != nil {
		return Volume{}, false, fail(ErrInvalid, "volume_content_source is not supported: this driver neither clones volumes nor restores snapshots")
	}
	if len(req.GetMutableParameters()) > 0 {
		return Volume{}, false, fail(ErrInvalid, "mutable_parameters are not supported")
	}
	size, err := volumeSize(req.GetCapacityRange(), lim.DefaultSize)
	if err != nil {
		return Volume{}, false, err
	}
	if existing != nil {
		switch {
		case existing.Name != req.GetName():
			return Volume{}, false, fail(ErrExists, "volume ID %s of name %q is taken by the volume named %q", existing.ID, req.GetName(), existing.Name)
		case !sizeFits(existing.CapacityBytes, req.GetCapacityRange()):
			return Volume{}, false, fail(ErrExists, "volume %q exists with capacity %d bytes, outside the requested range [%d, %d]",
				existing.Name, existing.CapacityBytes, req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes())
		case !maps.Equal(existing.Parameters, req.GetParameters()):
			return Volume{}, false, fail(ErrExists, "volume %q exists with other parameters", existing.Name)
		case !topologySatisfies(existing.Topology, req.GetAccessibilityRequirements()):
			return Volume{}, false, fail(ErrExists, "volume %q exists with an accessible topology outside the requirements", existing.Name)
		}
		return existing.Clone(), false, nil
	}
	if lim.Capacity > 0 {
		if size > lim.Capacity {
			return Volume{}, false, fail(ErrOutOfRange, "volume of %d bytes is larger than the driver's capacity of %d bytes", size, lim.Capacity)
		}
		if lim.Allocated+size > lim.Capacity {
			return Volume{}, false, fail(ErrExhausted, "not enough capacity: %d of %d bytes are allocated, %d more requested", lim.Allocated, lim.Capacity, size)
		}
	}
	return Volume{
		ID:            VolumeID(req.GetName()),
		Name:          req.GetName(),
		CapacityBytes: size,
		Parameters:    maps.Clone(req.GetParameters()),
		Topology:      chooseTopology(req.GetAccessibilityRequirements()),
		Created:       now.UTC(),
	}, true, nil
}

// planDelete decides whether a volume may be deleted: not while it is
// published to a node.
func planDelete(v Volume) error {
	if len(v.Published) > 0 {
		return fail(ErrPrecondition, "volume %s is still published to node(s) %s", v.ID, strings.Join(v.PublishedNodes(), ", "))
	}
	return nil
}

// publishRequest is a ControllerPublishVolume after validation.
type publishRequest struct {
	NodeID   string
	Mode     csi.VolumeCapability_AccessMode_Mode
	Readonly bool
}

// nodeView is what planPublish knows of the target node.
type nodeView struct {
	// Record is the node's record; nil when the node never registered.
	Record *NodeRecord
	// Attached counts the volumes other than this one published to it.
	Attached int64
}

// planPublish decides a ControllerPublishVolume and returns the volume
// with the publication added; changed is false when it was there already.
// The rules, in order:
//   - the node must have registered (NOT_FOUND);
//   - publishing again to the same node with the same mode and readonly
//     flag is a no-op, with others it is ALREADY_EXISTS;
//   - a single-node mode, on either side, excludes publications to other
//     nodes, and MULTI_NODE_SINGLE_WRITER allows one writing node
//     (FAILED_PRECONDITION, naming the node that holds the volume);
//   - the node must be in the volume's topology (FAILED_PRECONDITION);
//   - the node's MaxVolumesPerNode must not be reached
//     (RESOURCE_EXHAUSTED).
func planPublish(v Volume, req publishRequest, node nodeView) (Volume, bool, error) {
	if node.Record == nil {
		return v, false, fail(ErrNotFound, "node %q is not known to driver: it has not served this driver's node service", req.NodeID)
	}
	if p, ok := v.Published[req.NodeID]; ok {
		if parseMode(p.Mode) == req.Mode && p.Readonly == req.Readonly {
			return v, false, nil
		}
		return v, false, fail(ErrExists, "volume %s is already published to node %q with access mode %s and readonly=%t", v.ID, req.NodeID, p.Mode, p.Readonly)
	}
	writer := func(mode csi.VolumeCapability_AccessMode_Mode, ro bool) bool { return !ro && !readerOnly(mode) }
	for _, other := range v.PublishedNodes() {
		p := v.Published[other]
		mode := parseMode(p.Mode)
		switch {
		case singleNode(req.Mode) || singleNode(mode):
			return v, false, fail(ErrPrecondition, "volume %s is published to node %q with access mode %s; access mode %s allows one node at a time", v.ID, other, p.Mode, modeOf(req.Mode, mode))
		case (req.Mode == csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER || mode == csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER) &&
			writer(req.Mode, req.Readonly) && writer(mode, p.Readonly):
			return v, false, fail(ErrPrecondition, "volume %s is published for writing to node %q; MULTI_NODE_SINGLE_WRITER allows one writer", v.ID, other)
		}
	}
	if !nodeAccessible(v.Topology, node.Record.Topology) {
		return v, false, fail(ErrPrecondition, "volume %s is accessible from %v, which node %q (topology %v) is not in", v.ID, v.Topology, req.NodeID, node.Record.Topology)
	}
	if limit := node.Record.MaxVolumesPerNode; limit > 0 && node.Attached >= limit {
		return v, false, fail(ErrExhausted, "node %q has %d volumes published, its maximum", req.NodeID, node.Attached)
	}
	out := v.Clone()
	if out.Published == nil {
		out.Published = map[string]Publication{}
	}
	out.Published[req.NodeID] = Publication{Mode: req.Mode.String(), Readonly: req.Readonly}
	return out, true, nil
}

// modeOf names the single-node mode of the two, for a message.
func modeOf(a, b csi.VolumeCapability_AccessMode_Mode) csi.VolumeCapability_AccessMode_Mode {
	if singleNode(a) {
		return a
	}
	return b
}

// publishContext is what ControllerPublishVolume returns for the node
// side; the node side does not need it, it is informational.
func publishContext(nodeID string, p Publication) map[string]string {
	ro := p.Readonly || readerOnly(parseMode(p.Mode))
	return map[string]string{"node": nodeID, "readonly": boolString(ro)}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// planUnpublish removes the publication to nodeID, or all of them when
// nodeID is empty. changed is false when there was nothing to remove.
func planUnpublish(v Volume, nodeID string) (Volume, bool) {
	if len(v.Published) == 0 {
		return v, false
	}
	if nodeID == "" {
		out := v.Clone()
		out.Published = nil
		return out, true
	}
	if _, ok := v.Published[nodeID]; !ok {
		return v, false
	}
	out := v.Clone()
	delete(out.Published, nodeID)
	if len(out.Published) == 0 {
		out.Published = nil
	}
	return out, true
}

// attachedTo counts the volumes in vols, other than skipID, published to
// nodeID.
func attachedTo(vols []Volume, nodeID, skipID string) int64 {
	var n int64
	for _, v := range vols {
		if _, ok := v.Published[nodeID]; ok && v.ID != skipID {
			n++
		}
	}
	return n
}

// allocated sums the capacities of vols other than skipID.
func allocated(vols []Volume, skipID string) int64 {
	var n int64
	for _, v := range vols {
		if v.ID != skipID {
			n += v.CapacityBytes
		}
	}
	return n
}

// pageIDs returns one page of the sorted ids for ListVolumes. The token is
// the first ID of the page; a page starts at the first ID not below it, so
// a token stays good when its volume is deleted. max 0 means no limit.
// next is empty on the last page.
func pageIDs(ids []string, token string, maxEntries int32) (page []string, next string, err error) {
	if maxEntries < 0 {
		return nil, "", fail(ErrInvalid, "max_entries must not be negative, got %d", maxEntries)
	}
	if token != "" && !validVolumeID(token) {
		return nil, "", fail(ErrBadToken, "starting_token %q was not issued by this driver", token)
	}
	start := sort.SearchStrings(ids, token)
	rest := ids[start:]
	if maxEntries == 0 || len(rest) <= int(maxEntries) {
		return rest, "", nil
	}
	return rest[:maxEntries], rest[maxEntries], nil
}

// capacityLeft is GetCapacity's answer: with a configured capacity, what
// the volumes leave of it; without, the filesystem's free bytes.
func capacityLeft(capacity, allocated, fsFree int64) int64 {
	if capacity == 0 {
		return fsFree
	}
	return max(capacity-allocated, 0)
}

// validationProblem is ValidateVolumeCapabilities' check: "" when the
// driver can serve the capabilities and parameters for v, else why not.
func validationProblem(v Volume, req *csi.ValidateVolumeCapabilitiesRequest) string {
	for _, c := range req.GetVolumeCapabilities() {
		if err := checkCapability(c); err != nil {
			return err.Error()
		}
	}
	if len(req.GetParameters()) > 0 && !maps.Equal(req.GetParameters(), v.Parameters) {
		return "parameters differ from those the volume was created with"
	}
	if len(req.GetMutableParameters()) > 0 {
		return "mutable_parameters are not supported"
	}
	return ""
}

// mountState says what is mounted at a path.
type mountState int

const (
	// pathFree: nothing is mounted there (or the path does not exist).
	pathFree mountState = iota
	// pathThisVolume: the volume's directory is mounted there.
	pathThisVolume
	// pathOther: something else is mounted there.
	pathOther
)

// stageRecord is a node's record of a staged volume.
type stageRecord struct {
	VolumeID string `json:"volumeID"`
	Path     string `json:"path"`
	Mode     string `json:"mode"`
}

// publishRecord is a node's record of a node-published volume.
type publishRecord struct {
	VolumeID string `json:"volumeID"`
	Target   string `json:"target"`
	Staging  string `json:"staging"`
	Mode     string `json:"mode"`
	Readonly bool   `json:"readonly,omitempty"`
}

// planStage decides a NodeStageVolume at a path in state at; rec is the
// record of what is staged there, nil when none. mount is true when the
// volume must be mounted.
func planStage(at mountState, rec *stageRecord, volumeID string, mode csi.VolumeCapability_AccessMode_Mode) (mount bool, err error) {
	switch at {
	case pathOther:
		return false, fail(ErrExists, "another volume or filesystem is mounted at the staging path")
	case pathThisVolume:
		if rec != nil && rec.VolumeID == volumeID && parseMode(rec.Mode) != mode {
			return false, fail(ErrExists, "volume %s is staged with access mode %s, not %s", volumeID, rec.Mode, mode)
		}
		return false, nil
	}
	return true, nil
}

// nodePublish is a NodePublishVolume after validation; Readonly is the
// effective flag (the request's, or a reader-only mode).
type nodePublish struct {
	VolumeID string
	Target   string
	Mode     csi.VolumeCapability_AccessMode_Mode
	Readonly bool
}

// planNodePublish decides a NodePublishVolume following the spec's table
// for plugins with the SINGLE_NODE_MULTI_WRITER capability. at is the
// state of the target path; atTarget the record of what is published
// there (nil when unknown); others the live records of the volume's other
// targets on this node.
func planNodePublish(req nodePublish, at mountState, atTarget *publishRecord, others []publishRecord) (mount bool, err error) {
	switch at {
	case pathOther:
		return false, fail(ErrExists, "another volume or filesystem is mounted at target path %s", req.Target)
	case pathThisVolume:
		if atTarget != nil && ((atTarget.Mode != "" && parseMode(atTarget.Mode) != req.Mode) || atTarget.Readonly != req.Readonly) {
			return false, fail(ErrExists, "volume %s is published at %s with access mode %s and readonly=%t", req.VolumeID, req.Target, atTarget.Mode, atTarget.Readonly)
		}
		return false, nil
	}
	for _, o := range others {
		if o.Target == req.Target {
			continue
		}
		if singleTarget(req.Mode) || singleTarget(parseMode(o.Mode)) {
			return false, fail(ErrPrecondition, "volume %s is already published at %s on this node; access mode %s allows one target path", req.VolumeID, o.Target, modeOfTarget(req.Mode, parseMode(o.Mode)))
		}
	}
	return true, nil
}

func modeOfTarget(a, b csi.VolumeCapability_AccessMode_Mode) csi.VolumeCapability_AccessMode_Mode {
	if singleTarget(a) {
		return a
	}
	return b
}
