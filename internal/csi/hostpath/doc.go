// Package hostpath is knode's built-in CSI driver, "hostpath.csi.knode.io"
// (volume.BuiltinDriver): volumes are directories in a data dir, served
// over real CSI (gRPC on unix sockets) with the Identity, Controller and
// Node services, and registered with the agent the way upstream's
// node-driver-registrar does it.
//
// # What it owns
//
//   - The data dir (Config.DataDir): volumes in <data>/volumes/<id>, their
//     records in <data>/meta/<id>.json, each node's record in
//     <data>/nodes/<node>/node.json. Records are written atomically
//     (internal/atomicfile), and every read-modify-write holds an flock on
//     <data>/lock, so several processes, on several machines when the data
//     dir is a shared (e.g. NFS) mount, agree on the volumes and on where
//     they are published. Nothing that must agree is kept in memory.
//   - Attach tracking: ControllerPublishVolume records the node in the
//     volume's record; a volume in a single-node access mode is published
//     to one node at a time (FAILED_PRECONDITION otherwise), and a node's
//     MaxVolumesPerNode is enforced (RESOURCE_EXHAUSTED).
//   - Mounts on this machine: NodeStageVolume bind-mounts the volume's
//     directory at the staging path, NodePublishVolume bind-mounts the
//     staging path at the target (read-only when asked). The mount table
//     (/proc/self/mountinfo) says what is mounted; the node state dir
//     (Config.NodeStateDir) only remembers each mount's access mode.
//   - The registration socket <root-dir>/plugins_registry/<driver>-reg.sock
//     (Registrar).
//
// Volume handles are derived from the CreateVolume name (VolumeID), which
// makes CreateVolume idempotent by name across processes.
//
// # What the caller does
//
// The controller side (knode server), the node side (every knode agent) or
// both (knode up) run from one Config; the caller picks which services each
// socket serves:
//
//	d, err := hostpath.New(cfg)              // cfg.NodeID needed for Node
//	srv, err := d.Start(endpoint, hostpath.Controller) // or Node, or All
//	defer srv.Stop()
//	// node side only, after the CSI socket is up:
//	r, err := hostpath.NewRegistrar(hostpath.RegistrarConfig{Endpoint: endpoint, RootDir: rootDir})
//	rs, err := r.Start()
//	defer rs.Stop()
//
// Serve (and Driver.Serve, Registrar.Serve) do the same until a context is
// done. Serving the node service writes the node's record, which the
// controller side needs before it publishes a volume to that node (until
// then: NOT_FOUND). The data dir must be the same storage for every process
// of one cluster.
//
// A CO should map Kubernetes access modes as the kubelet does for a driver
// with SINGLE_NODE_MULTI_WRITER: ReadWriteOnce to SINGLE_NODE_MULTI_WRITER,
// ReadWriteOncePod to SINGLE_NODE_SINGLE_WRITER, ReadOnlyMany to
// MULTI_NODE_READER_ONLY, ReadWriteMany to MULTI_NODE_MULTI_WRITER. The
// driver follows the CSI table for a second NodePublishVolume on one node:
// SINGLE_NODE_WRITER, SINGLE_NODE_SINGLE_WRITER and SINGLE_NODE_READER_ONLY
// allow one target path.
//
// # What it does not do
//
// It does not enforce capacity inside a volume (a volume may grow past its
// size; Config.Capacity only bounds the sum of the sizes asked for), does
// not serve block volumes, snapshots, clones or expansion, and ignores
// fs_type and mount_flags. NodeStageVolume does not check that the volume
// was controller-published to this node: that is the CO's order to keep.
// It does not run the provisioner or attacher: knode's server does that for
// this driver, and the upstream sidecars can do it against the controller
// socket.
package hostpath
