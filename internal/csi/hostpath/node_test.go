package hostpath

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// nodeSetup serves all three services for node-1 on a data dir in a new
// temporary directory, creates a volume with mode and publishes it to
// node-1. It returns the clients, the volume's ID and directory, and the
// temporary directory for staging and target paths.
func nodeSetup(t *testing.T, mode csi.VolumeCapability_AccessMode_Mode) (csi.NodeClient, string, string, string) {
	t.Helper()
	requireMounts(t)
	dir := testDir(t)
	data := filepath.Join(dir, "data")
	cl, n, _ := serveDriver(t, Config{DataDir: data, NodeID: "node-1"}, All)
	vol, err := cl.CreateVolume(ctx, createReq("pvc-"+mode.String(), 1<<20, mode))
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	if _, err := cl.ControllerPublishVolume(ctx, publishReq(id, "node-1", mode, false)); err != nil {
		t.Fatal(err)
	}
	return n, id, filepath.Join(data, volumesDir, id), dir
}

func stageReq(id, path string, mode csi.VolumeCapability_AccessMode_Mode) *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: path, VolumeCapability: mountCap(mode)}
}

func nodePublishReq(id, staging, target string, mode csi.VolumeCapability_AccessMode_Mode, ro bool) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap(mode), Readonly: ro}
}

func TestNodeLifecycle(t *testing.T) {
	n, id, volDir, dir := nodeSetup(t, snmw)
	staging := filepath.Join(dir, "plugins", "globalmount")
	t1 := filepath.Join(dir, "pods", "p1", "mount")
	t2 := filepath.Join(dir, "pods", "p2", "mount")

	_, err := n.NodePublishVolume(ctx, nodePublishReq(id, staging, t1, snmw, false))
	wantCode(t, "publish before staging", err, codes.FailedPrecondition)

	for range 2 {
		if _, err := n.NodeStageVolume(ctx, stageReq(id, staging, snmw)); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(mountsUnder(t, staging)); got != 1 {
		t.Errorf("%d mounts at the staging path after two stages, want 1", got)
	}
	_, err = n.NodeStageVolume(ctx, stageReq(id, staging, snw))
	wantCode(t, "stage again with another mode", err, codes.AlreadyExists)

	for range 2 {
		if _, err := n.NodePublishVolume(ctx, nodePublishReq(id, staging, t1, snmw, false)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.NodePublishVolume(ctx, nodePublishReq(id, staging, t2, snmw, true)); err != nil {
		t.Fatalf("second target, read-only, SINGLE_NODE_MULTI_WRITER: %v", err)
	}
	_, err = n.NodePublishVolume(ctx, nodePublishReq(id, staging, t1, snmw, true))
	wantCode(t, "publish at t1 again read-only", err, codes.AlreadyExists)

	// What a pod writes at its target lands in the volume's directory.
	if err := os.WriteFile(filepath.Join(t1, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(volDir, "hello")); err != nil || string(data) != "hi" {
		t.Errorf("volume directory has %q, %v", data, err)
	}
	if data, err := os.ReadFile(filepath.Join(t2, "hello")); err != nil || string(data) != "hi" {
		t.Errorf("read-only target has %q, %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(t2, "nope"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write through the read-only target: %v, want EROFS", err)
	}

	stats, err := n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: t1})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.GetUsage()) != 2 || stats.GetUsage()[0].GetTotal() <= 0 || stats.GetUsage()[0].GetUnit() != csi.VolumeUsage_BYTES {
		t.Errorf("stats %v", stats)
	}
	_, err = n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: dir})
	wantCode(t, "stats of a path the volume is not at", err, codes.NotFound)
	_, err = n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: VolumeID("nope"), VolumePath: t1})
	wantCode(t, "stats of a missing volume", err, codes.NotFound)

	for _, target := range []string{t1, t2, t1} {
		if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("unpublish %s: %v", target, err)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Errorf("target %s after unpublish: %v", target, err)
		}
	}
	for range 2 {
		if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
	}
	if left := mountsUnder(t, dir); len(left) > 0 {
		t.Errorf("mounts left: %v", left)
	}
	if data, err := os.ReadFile(filepath.Join(volDir, "hello")); err != nil || string(data) != "hi" {
		t.Errorf("volume content after unstage: %q, %v", data, err)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "data", nodesDir, "node-1", publishedDir)); err != nil || len(entries) != 0 {
		t.Errorf("publish records left: %v, %v", entries, err)
	}
}

func TestNodeSingleWriterOneTarget(t *testing.T) {
	n, id, _, dir := nodeSetup(t, snsw)
	staging := filepath.Join(dir, "staging")
	t1, t2 := filepath.Join(dir, "t1"), filepath.Join(dir, "t2")
	if _, err := n.NodeStageVolume(ctx, stageReq(id, staging, snsw)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NodePublishVolume(ctx, nodePublishReq(id, staging, t1, snsw, false)); err != nil {
		t.Fatal(err)
	}
	_, err := n.NodePublishVolume(ctx, nodePublishReq(id, staging, t2, snsw, false))
	wantCode(t, "second target of a SINGLE_NODE_SINGLE_WRITER volume", err, codes.FailedPrecondition)
	if _, err := os.Stat(t2); !os.IsNotExist(err) {
		t.Errorf("refused target was created: %v", err)
	}

	// The mount at t1 disappears behind the driver's back (a reboot, say):
	// its record no longer counts, and t2 may be published.
	if err := unix.Unmount(t1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NodePublishVolume(ctx, nodePublishReq(id, staging, t2, snsw, false)); err != nil {
		t.Errorf("publish after the first target's mount vanished: %v", err)
	}
}

func TestNodeStageConflicts(t *testing.T) {
	n, id, _, dir := nodeSetup(t, snw)
	staging := filepath.Join(dir, "staging")

	_, err := n.NodeStageVolume(ctx, stageReq(VolumeID("missing"), staging, snw))
	wantCode(t, "stage a missing volume", err, codes.NotFound)
	_, err = n.NodeStageVolume(ctx, stageReq(id, "relative/path", snw))
	wantCode(t, "stage at a relative path", err, codes.InvalidArgument)
	block := stageReq(id, staging, snw)
	block.VolumeCapability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	_, err = n.NodeStageVolume(ctx, block)
	wantCode(t, "stage as a block volume", err, codes.InvalidArgument)

	// Something else mounted at the staging path.
	other := filepath.Join(dir, "other")
	for _, d := range []string{other, staging} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(other, staging, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	_, err = n.NodeStageVolume(ctx, stageReq(id, staging, snw))
	wantCode(t, "stage where another directory is mounted", err, codes.AlreadyExists)
	if err := unix.Unmount(staging, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := n.NodeStageVolume(ctx, stageReq(id, staging, snw)); err != nil {
		t.Errorf("stage once the path is free: %v", err)
	}
}

// TestNodeTopology: a node outside a volume's topology refuses to stage it.
func TestNodeTopology(t *testing.T) {
	requireMounts(t)
	dir := testDir(t)
	data := filepath.Join(dir, "data")
	zoneA := map[string]string{"zone": "a"}
	cl, _, _ := serveDriver(t, Config{DataDir: data, NodeID: "node-a", Topology: zoneA}, All)
	_, nb, _ := serveDriver(t, Config{DataDir: data, NodeID: "node-b", Topology: map[string]string{"zone": "b"}}, Node)
	req := createReq("pvc-a", 1, snw)
	req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: topo(zoneA)}
	vol, err := cl.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = nb.NodeStageVolume(ctx, stageReq(vol.GetVolume().GetVolumeId(), filepath.Join(dir, "staging"), snw))
	wantCode(t, "stage outside the volume's topology", err, codes.FailedPrecondition)
}
