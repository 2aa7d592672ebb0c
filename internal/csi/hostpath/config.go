package hostpath

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/utils/clock"

	"knode/internal/volume"
)

// Config builds a Driver.
type Config struct {
	// DriverName is the CSI driver name GetPluginInfo reports; "" means
	// volume.BuiltinDriver. Another name runs the same driver under that
	// name, e.g. one that knode does not attach or provision itself.
	DriverName string
	// DataDir holds the volumes and the state that must agree across
	// processes (see the package doc). It may be a shared (e.g. NFS) mount
	// used by several machines; then every process serving this driver must
	// see it at a path of its own, and flock must work on it. Required,
	// absolute.
	DataDir string
	// NodeID is this node's ID in CSI, its node name. Required to serve the
	// node service; unused by the controller service.
	NodeID string
	// NodeStateDir holds this node's records of what it staged and
	// published; "" means <DataDir>/nodes/<NodeID>.
	NodeStateDir string
	// Topology is the segments this node reports in NodeGetInfo, e.g.
	// {"topology.hostpath.csi.knode.io/zone": "a"}. When it is not empty,
	// GetPluginCapabilities reports VOLUME_ACCESSIBILITY_CONSTRAINTS, so a
	// controller-only process that should honour topology sets it too (to
	// any segments with the cluster's keys). Empty means volumes are
	// accessible from every node.
	Topology map[string]string
	// MaxVolumesPerNode is the number of volumes that may be published to
	// this node, reported by NodeGetInfo and enforced by
	// ControllerPublishVolume; 0 means no limit.
	MaxVolumesPerNode int64
	// Capacity is the total size, in bytes, the volumes may add up to;
	// GetCapacity reports what they leave of it. 0 means no such limit, and
	// GetCapacity reports the free bytes of the data dir's filesystem.
	Capacity int64
	// DefaultVolumeSize is the size, in bytes, of a volume created without
	// required_bytes; 0 means DefaultVolumeSize.
	DefaultVolumeSize int64
	// Clock stamps volumes' creation times; nil means the real clock.
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// driverNamePattern is CSI's rule for a plugin name.
var driverNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,61}[a-zA-Z0-9]$`)

func (c *Config) setDefaults() error {
	var errs []error
	if c.DriverName == "" {
		c.DriverName = volume.BuiltinDriver
	}
	if !driverNamePattern.MatchString(c.DriverName) {
		errs = append(errs, fmt.Errorf("hostpath: Config.DriverName %q must be 2 to 63 letters, digits, '.', '-' or '_', beginning and ending with a letter or digit", c.DriverName))
	}
	if c.DataDir == "" || !filepath.IsAbs(c.DataDir) {
		errs = append(errs, fmt.Errorf("hostpath: Config.DataDir must be an absolute path, got %q", c.DataDir))
	}
	c.DataDir = filepath.Clean(c.DataDir)
	if c.NodeID != "" && !validNodeID(c.NodeID) {
		errs = append(errs, fmt.Errorf("hostpath: Config.NodeID %q must be at most 253 bytes with no '/'", c.NodeID))
	}
	if c.NodeStateDir != "" && !filepath.IsAbs(c.NodeStateDir) {
		errs = append(errs, fmt.Errorf("hostpath: Config.NodeStateDir must be an absolute path, got %q", c.NodeStateDir))
	}
	if c.NodeStateDir == "" && c.NodeID != "" && c.DataDir != "" {
		c.NodeStateDir = filepath.Join(c.DataDir, nodesDir, c.NodeID)
	}
	for k, v := range c.Topology {
		if k == "" || v == "" || strings.ContainsAny(k+v, "\x00") {
			errs = append(errs, fmt.Errorf("hostpath: Config.Topology: key %q and value %q must not be empty", k, v))
		}
	}
	if c.MaxVolumesPerNode < 0 {
		errs = append(errs, fmt.Errorf("hostpath: Config.MaxVolumesPerNode must not be negative, got %d", c.MaxVolumesPerNode))
	}
	if c.Capacity < 0 {
		errs = append(errs, fmt.Errorf("hostpath: Config.Capacity must not be negative, got %d", c.Capacity))
	}
	if c.DefaultVolumeSize < 0 {
		errs = append(errs, fmt.Errorf("hostpath: Config.DefaultVolumeSize must not be negative, got %d", c.DefaultVolumeSize))
	}
	if c.DefaultVolumeSize == 0 {
		c.DefaultVolumeSize = DefaultVolumeSize
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Services selects the CSI services a socket serves. The Identity service
// is always served.
type Services uint8

const (
	// Controller is the controller service: volumes' lifecycle and attach
	// tracking. knode server runs it.
	Controller Services = 1 << iota
	// Node is the node service: staging and publishing on this machine.
	// Every knode agent runs it; it needs Config.NodeID.
	Node

	// All is both, for knode up and for csi-sanity.
	All = Controller | Node
)

func (s Services) String() string {
	switch s {
	case 0:
		return "identity"
	case Controller:
		return "identity+controller"
	case Node:
		return "identity+node"
	case All:
		return "identity+controller+node"
	}
	return fmt.Sprintf("Services(%d)", uint8(s))
}
