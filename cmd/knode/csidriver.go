package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"knode/internal/csi/hostpath"
	"knode/internal/server"
	"knode/internal/volume"
)

// csiServices are the values of `knode csi-driver --services`.
var csiServices = map[string]hostpath.Services{
	"controller": hostpath.Controller,
	"node":       hostpath.Node,
	"all":        hostpath.All,
}

// csiDriverFlags are the flags of `knode csi-driver`.
type csiDriverFlags struct {
	endpoint   string
	storageDir string
	services   string
	nodeID     string
	topology   map[string]string
	verbose    bool
}

// config turns the flags into the driver's Config and the services to
// serve; it names the flag at fault.
func (f *csiDriverFlags) config() (hostpath.Config, hostpath.Services, error) {
	services, ok := csiServices[f.services]
	if !ok {
		names := make([]string, 0, len(csiServices))
		for name := range csiServices {
			names = append(names, name)
		}
		slices.Sort(names)
		return hostpath.Config{}, 0, fmt.Errorf("--services %q: must be one of %q", f.services, names)
	}
	if f.endpoint == "" {
		return hostpath.Config{}, 0, fmt.Errorf("--endpoint is required: the unix socket to serve CSI on, a path or a unix:// URL")
	}
	if services&hostpath.Node != 0 && f.nodeID == "" {
		return hostpath.Config{}, 0, fmt.Errorf("--node-id is required with --services %s", f.services)
	}
	if services&hostpath.Node == 0 && f.nodeID != "" {
		return hostpath.Config{}, 0, fmt.Errorf("--node-id is only used with --services node or all")
	}
	if f.storageDir == "" {
		return hostpath.Config{}, 0, fmt.Errorf("--storage-dir must not be empty")
	}
	dataDir, err := filepath.Abs(f.storageDir)
	if err != nil {
		return hostpath.Config{}, 0, fmt.Errorf("--storage-dir %q: %w", f.storageDir, err)
	}
	cfg := hostpath.Config{
		DataDir:  dataDir,
		NodeID:   f.nodeID,
		Topology: f.topology,
		Logger:   logger(f.verbose),
	}
	return cfg, services, nil
}

// newCSIDriverCommand runs the built-in CSI driver on its own, for the
// upstream sidecars (csi-attacher, csi-provisioner) or csi-sanity.
func newCSIDriverCommand() *cobra.Command {
	var f csiDriverFlags
	cmd := &cobra.Command{
		Use:   "csi-driver",
		Short: "Run the built-in CSI driver (" + volume.BuiltinDriver + ") on its own, for the upstream CSI sidecars",
		Long: `Serve the built-in CSI driver, ` + volume.BuiltinDriver + `, over gRPC on a unix
socket until SIGINT or SIGTERM. The Identity service is always served;
--services adds the Controller service, the Node service or both.

Run it with --services controller beside the upstream csi-attacher and
csi-provisioner, against a server started with --builtin-storage=false (the
server then neither attaches nor provisions for this driver). Every process
serving the driver, this one and every agent, must see the same
--storage-dir. This command does not register the node side with an agent:
knode agent serves and registers its own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, services, err := f.config()
			if err != nil {
				return err
			}
			return hostpath.Serve(cmd.Context(), f.endpoint, cfg, services)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.endpoint, "endpoint", "", "unix socket to serve CSI on: a path or a unix:// URL (required)")
	fs.StringVar(&f.storageDir, "storage-dir", server.DefaultStorageDir, "data directory of the driver's volumes, the same one the agents use")
	fs.StringVar(&f.services, "services", "controller", "CSI services to serve besides Identity: controller, node or all")
	fs.StringVar(&f.nodeID, "node-id", "", "this node's CSI node ID, its node name (required for --services node or all)")
	fs.StringToStringVar(&f.topology, "topology", nil, "topology segments as key=value,...; with the node service they are this node's, and they turn on VOLUME_ACCESSIBILITY_CONSTRAINTS")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "log every CSI call")
	return cmd
}
