package hostpath

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/version"
)

// cluster is one data dir served by several processes' worth of drivers:
// controller-only drivers and node-only drivers, each on its own socket.
type cluster struct {
	t    *testing.T
	data string
}

func newCluster(t *testing.T) *cluster {
	return &cluster{t: t, data: filepath.Join(testDir(t), "data")}
}

func (c *cluster) controller(cfg Config) csi.ControllerClient {
	cfg.DataDir = c.data
	cl, _, _ := serveDriver(c.t, cfg, Controller)
	return cl
}

// node serves the node service of nodeID, which registers the node.
func (c *cluster) node(nodeID string, cfg Config) csi.NodeClient {
	cfg.DataDir, cfg.NodeID = c.data, nodeID
	_, n, _ := serveDriver(c.t, cfg, Node)
	return n
}

func publishReq(volID, node string, mode csi.VolumeCapability_AccessMode_Mode, ro bool) *csi.ControllerPublishVolumeRequest {
	return &csi.ControllerPublishVolumeRequest{VolumeId: volID, NodeId: node, VolumeCapability: mountCap(mode), Readonly: ro}
}

func TestCreateVolumeIdempotentByName(t *testing.T) {
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	c := newCluster(t)
	a := c.controller(Config{Clock: clock})
	b := c.controller(Config{Clock: clock})

	first, err := a.CreateVolume(ctx, createReq("pvc-1", 1<<20, snw))
	if err != nil {
		t.Fatal(err)
	}
	id := first.GetVolume().GetVolumeId()
	if fi, err := os.Stat(filepath.Join(c.data, volumesDir, id)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory: %v, %v", fi, err)
	}
	// The same request through another process: the same volume.
	again, err := b.CreateVolume(ctx, createReq("pvc-1", 1<<20, snw))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, again, protocmp.Transform()); d != "" {
		t.Errorf("second CreateVolume (-first +second):\n%s", d)
	}
	_, err = b.CreateVolume(ctx, createReq("pvc-1", 2<<20, snw))
	wantCode(t, "CreateVolume with another size", err, codes.AlreadyExists)

	// The file written into the volume survives the idempotent call.
	if err := os.WriteFile(filepath.Join(c.data, volumesDir, id, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateVolume(ctx, createReq("pvc-1", 1<<20, snw)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.data, volumesDir, id, "f")); err != nil {
		t.Errorf("repeated CreateVolume lost the volume's content: %v", err)
	}

	var rec Volume
	if err := readJSON(filepath.Join(c.data, metaDir, id+".json"), &rec); err != nil {
		t.Fatal(err)
	}
	if !rec.Created.Equal(clock.Now()) || rec.Name != "pvc-1" || rec.CapacityBytes != 1<<20 {
		t.Errorf("record %+v", rec)
	}

	if _, err := a.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.data, volumesDir, id)); !os.IsNotExist(err) {
		t.Errorf("volume directory after delete: %v", err)
	}
	for _, del := range []string{id, "fake-vol-id", VolumeID("never-created")} {
		if _, err := b.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: del}); err != nil {
			t.Errorf("DeleteVolume(%q) of a missing volume: %v", del, err)
		}
	}
	_, err = a.DeleteVolume(ctx, &csi.DeleteVolumeRequest{})
	wantCode(t, "DeleteVolume without ID", err, codes.InvalidArgument)

	// Re-created after deletion: an empty volume again.
	if _, err := a.CreateVolume(ctx, createReq("pvc-1", 1<<20, snw)); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(filepath.Join(c.data, volumesDir, id)); len(entries) != 0 {
		t.Errorf("re-created volume has %d entries, want 0", len(entries))
	}
}

// TestCreateVolumeRemovesLeftovers: a directory without a record (a create
// or delete cut short) does not leak into a new volume.
func TestCreateVolumeRemovesLeftovers(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{})
	id := VolumeID("pvc-left")
	if err := os.MkdirAll(filepath.Join(c.data, volumesDir, id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.data, volumesDir, id, "old"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateVolume(ctx, createReq("pvc-left", 1, snw)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.data, volumesDir, id, "old")); !os.IsNotExist(err) {
		t.Errorf("leftover file survived into the new volume: %v", err)
	}
}

// TestAttachTracking publishes one volume through two controller processes
// to two nodes registered by two node processes, all on one data dir.
func TestAttachTracking(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{})
	b := c.controller(Config{})

	vol, err := a.CreateVolume(ctx, createReq("pvc-rwo", 1<<20, snw))
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()

	_, err = a.ControllerPublishVolume(ctx, publishReq(id, "node-1", snw, false))
	wantCode(t, "publish to a node that never registered", err, codes.NotFound)

	c.node("node-1", Config{})
	c.node("node-2", Config{})

	resp, err := a.ControllerPublishVolume(ctx, publishReq(id, "node-1", snw, false))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"node": "node-1", "readonly": "false"}, resp.GetPublishContext()); d != "" {
		t.Errorf("publish context (-want +got):\n%s", d)
	}
	if _, err := b.ControllerPublishVolume(ctx, publishReq(id, "node-1", snw, false)); err != nil {
		t.Errorf("repeated publish through the other process: %v", err)
	}
	_, err = b.ControllerPublishVolume(ctx, publishReq(id, "node-1", snw, true))
	wantCode(t, "publish to the same node read-only", err, codes.AlreadyExists)

	_, err = b.ControllerPublishVolume(ctx, publishReq(id, "node-2", snw, false))
	wantCode(t, "publish to a second node", err, codes.FailedPrecondition)
	if !strings.Contains(status.Convert(err).Message(), "node-1") {
		t.Errorf("message %q does not name node-1", status.Convert(err).Message())
	}

	_, err = a.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
	wantCode(t, "delete while published", err, codes.FailedPrecondition)

	list, err := b.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 1 || !cmp.Equal(list.GetEntries()[0].GetStatus().GetPublishedNodeIds(), []string{"node-1"}) {
		t.Errorf("ListVolumes = %v", list)
	}

	// Detach from node-1 through the other process; node-2 may have it now.
	if _, err := b.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}); err != nil {
		t.Errorf("repeated unpublish: %v", err)
	}
	if _, err := a.ControllerPublishVolume(ctx, publishReq(id, "node-2", snw, false)); err != nil {
		t.Fatalf("publish to node-2 after unpublishing node-1: %v", err)
	}
	got, err := a.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"node-2"}, got.GetStatus().GetPublishedNodeIds()); d != "" {
		t.Errorf("published nodes (-want +got):\n%s", d)
	}

	// Unpublish with no node ID detaches everywhere; then delete works, and
	// unpublishing a deleted volume is fine.
	if _, err := a.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-2"}); err != nil {
		t.Errorf("unpublish of a deleted volume: %v", err)
	}
	_, err = a.ControllerPublishVolume(ctx, publishReq(id, "node-2", snw, false))
	wantCode(t, "publish of a deleted volume", err, codes.NotFound)
}

func TestMultiNodePublish(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{})
	c.node("node-1", Config{})
	c.node("node-2", Config{})
	vol, err := a.CreateVolume(ctx, createReq("pvc-rwx", 1, mnmw))
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	for _, n := range []string{"node-1", "node-2"} {
		if _, err := a.ControllerPublishVolume(ctx, publishReq(id, n, mnmw, false)); err != nil {
			t.Errorf("publish to %s: %v", n, err)
		}
	}
	got, err := a.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"node-1", "node-2"}, got.GetStatus().GetPublishedNodeIds()); d != "" {
		t.Errorf("published nodes (-want +got):\n%s", d)
	}
}

// TestConcurrentProcesses races CreateVolume of one name and
// ControllerPublishVolume of one single-node volume to two nodes through
// two controller processes: the flock on the data dir lets exactly one
// publish win each round.
func TestConcurrentProcesses(t *testing.T) {
	c := newCluster(t)
	ctrls := []csi.ControllerClient{c.controller(Config{}), c.controller(Config{})}
	c.node("node-1", Config{})
	c.node("node-2", Config{})

	for round := range 10 {
		name := fmt.Sprintf("pvc-race-%d", round)
		var wg sync.WaitGroup
		ids := make([]string, 8)
		errs := make([]error, 8)
		for i := range ids {
			wg.Go(func() {
				resp, err := ctrls[i%2].CreateVolume(ctx, createReq(name, 1, snw))
				ids[i], errs[i] = resp.GetVolume().GetVolumeId(), err
			})
		}
		wg.Wait()
		for i := range ids {
			if errs[i] != nil || ids[i] != VolumeID(name) {
				t.Fatalf("round %d: create %d: id %q, %v", round, i, ids[i], errs[i])
			}
		}

		var wins sync.Map
		for i := range 8 {
			node := fmt.Sprintf("node-%d", 1+i%2)
			wg.Go(func() {
				_, err := ctrls[i/2%2].ControllerPublishVolume(ctx, publishReq(VolumeID(name), node, snw, false))
				switch status.Code(err) {
				case codes.OK:
					wins.Store(node, true)
				case codes.FailedPrecondition:
				default:
					t.Errorf("round %d: publish to %s: %v", round, node, err)
				}
			})
		}
		wg.Wait()
		n := 0
		wins.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Errorf("round %d: %d nodes won the single-node volume, want 1", round, n)
		}
	}
	list, err := ctrls[0].ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetEntries()) != 10 {
		t.Errorf("%d volumes, want 10", len(list.GetEntries()))
	}
	for _, e := range list.GetEntries() {
		if len(e.GetStatus().GetPublishedNodeIds()) != 1 {
			t.Errorf("volume %s published to %v, want one node", e.GetVolume().GetVolumeId(), e.GetStatus().GetPublishedNodeIds())
		}
	}
}

func TestMaxVolumesPerNode(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{})
	c.node("node-1", Config{MaxVolumesPerNode: 2})
	var ids []string
	for i := range 3 {
		vol, err := a.CreateVolume(ctx, createReq(fmt.Sprintf("pvc-%d", i), 1, snw))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, vol.GetVolume().GetVolumeId())
	}
	for _, id := range ids[:2] {
		if _, err := a.ControllerPublishVolume(ctx, publishReq(id, "node-1", snw, false)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.ControllerPublishVolume(ctx, publishReq(ids[2], "node-1", snw, false))
	wantCode(t, "third volume on a node with a limit of 2", err, codes.ResourceExhausted)
	if _, err := a.ControllerPublishVolume(ctx, publishReq(ids[0], "node-1", snw, false)); err != nil {
		t.Errorf("repeated publish at the limit: %v", err)
	}
	if _, err := a.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: ids[0], NodeId: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ControllerPublishVolume(ctx, publishReq(ids[2], "node-1", snw, false)); err != nil {
		t.Errorf("publish after a detach: %v", err)
	}
}

func TestTopologyThroughDrivers(t *testing.T) {
	c := newCluster(t)
	zoneA := map[string]string{"topology.hostpath.csi.knode.io/zone": "a"}
	zoneB := map[string]string{"topology.hostpath.csi.knode.io/zone": "b"}
	a := c.controller(Config{Topology: zoneA})
	c.node("node-a", Config{Topology: zoneA})
	c.node("node-b", Config{Topology: zoneB})

	req := createReq("pvc-zoned", 1, snw)
	req.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: topo(zoneA, zoneB), Preferred: topo(zoneB)}
	vol, err := a.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(topo(zoneB), vol.GetVolume().GetAccessibleTopology(), protocmp.Transform()); d != "" {
		t.Errorf("accessible topology (-want +got):\n%s", d)
	}
	id := vol.GetVolume().GetVolumeId()
	_, err = a.ControllerPublishVolume(ctx, publishReq(id, "node-a", snw, false))
	wantCode(t, "publish outside the volume's topology", err, codes.FailedPrecondition)
	if _, err := a.ControllerPublishVolume(ctx, publishReq(id, "node-b", snw, false)); err != nil {
		t.Errorf("publish inside the volume's topology: %v", err)
	}
}

func TestListVolumesPages(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{})
	want := map[string]bool{}
	for i := range 7 {
		vol, err := a.CreateVolume(ctx, createReq(fmt.Sprintf("pvc-%d", i), 1, snw))
		if err != nil {
			t.Fatal(err)
		}
		want[vol.GetVolume().GetVolumeId()] = true
	}
	seen := map[string]bool{}
	token, pages := "", 0
	for {
		resp, err := a.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 3, StartingToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(resp.GetEntries()) > 3 {
			t.Errorf("page of %d entries, max 3", len(resp.GetEntries()))
		}
		for _, e := range resp.GetEntries() {
			id := e.GetVolume().GetVolumeId()
			if seen[id] {
				t.Errorf("volume %s listed twice", id)
			}
			seen[id] = true
		}
		if token = resp.GetNextToken(); token == "" {
			break
		}
	}
	if pages != 3 {
		t.Errorf("%d pages, want 3", pages)
	}
	if d := cmp.Diff(want, seen); d != "" {
		t.Errorf("listed volumes (-want +got):\n%s", d)
	}
	_, err := a.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: "invalid-token"})
	wantCode(t, "invalid starting token", err, codes.Aborted)
}

func TestGetCapacity(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{Capacity: 10 << 30})
	if _, err := a.CreateVolume(ctx, createReq("pvc-3g", 3<<30, snw)); err != nil {
		t.Fatal(err)
	}
	resp, err := a.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetAvailableCapacity(); got != 7<<30 {
		t.Errorf("available %d, want %d", got, int64(7<<30))
	}
	_, err = a.CreateVolume(ctx, createReq("pvc-8g", 8<<30, snw))
	wantCode(t, "volume beyond the remaining capacity", err, codes.ResourceExhausted)
	_, err = a.CreateVolume(ctx, createReq("pvc-11g", 11<<30, snw))
	wantCode(t, "volume beyond the whole capacity", err, codes.OutOfRange)

	free := newCluster(t)
	b := free.controller(Config{})
	resp, err = b.GetCapacity(ctx, &csi.GetCapacityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := statFS(free.data)
	if err != nil {
		t.Fatal(err)
	}
	// The filesystem is shared with the rest of the machine; allow drift.
	if got := resp.GetAvailableCapacity(); got <= 0 || got > st.TotalBytes {
		t.Errorf("available %d, want the filesystem's free bytes (total %d)", got, st.TotalBytes)
	}
}

func TestValidateVolumeCapabilities(t *testing.T) {
	c := newCluster(t)
	a := c.controller(Config{})
	vol, err := a.CreateVolume(ctx, createReq("pvc-v", 1, snw))
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	resp, err := a.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{mountCap(mnmw)}})
	if err != nil || resp.GetConfirmed() == nil {
		t.Errorf("mount capability not confirmed: %v, %v", resp, err)
	}
	block := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw}, AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}
	resp, err = a.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: id, VolumeCapabilities: []*csi.VolumeCapability{block}})
	if err != nil || resp.GetConfirmed() != nil || resp.GetMessage() == "" {
		t.Errorf("block capability: %v, %v; want unconfirmed with a message", resp, err)
	}
	_, err = a.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: VolumeID("nope"), VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)}})
	wantCode(t, "validate a missing volume", err, codes.NotFound)
}

func TestIdentity(t *testing.T) {
	c := newCluster(t)
	services := func(cfg Config, s Services) []string {
		cfg.DataDir, cfg.NodeID = c.data, "node-1"
		_, _, id := serveDriver(t, cfg, s)
		resp, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cp := range resp.GetCapabilities() {
			out = append(out, cp.GetService().GetType().String())
		}
		return out
	}
	zone := map[string]string{"zone": "a"}
	for _, tc := range []struct {
		name     string
		cfg      Config
		services Services
		want     []string
	}{
		{"controller", Config{}, Controller, []string{"CONTROLLER_SERVICE"}},
		{"node", Config{}, Node, nil},
		{"all with topology", Config{Topology: zone}, All, []string{"CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS"}},
		{"node with topology", Config{Topology: zone}, Node, []string{"VOLUME_ACCESSIBILITY_CONSTRAINTS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, services(tc.cfg, tc.services)); d != "" {
				t.Errorf("capabilities (-want +got):\n%s", d)
			}
		})
	}

	_, _, id := serveDriver(t, Config{DataDir: c.data, DriverName: "other.csi.example.com"}, Controller)
	info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &csi.GetPluginInfoResponse{Name: "other.csi.example.com", VendorVersion: version.Knode}
	if d := cmp.Diff(want, info, protocmp.Transform()); d != "" {
		t.Errorf("plugin info (-want +got):\n%s", d)
	}
	probe, err := id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		t.Errorf("Probe = %v, %v", probe, err)
	}
	if err := os.RemoveAll(c.data); err != nil {
		t.Fatal(err)
	}
	_, err = id.Probe(ctx, &csi.ProbeRequest{})
	wantCode(t, "Probe without a data dir", err, codes.FailedPrecondition)
}

func TestNodeOnlySocketHasNoController(t *testing.T) {
	c := newCluster(t)
	cl, n, _ := serveDriver(t, Config{DataDir: c.data, NodeID: "node-1", MaxVolumesPerNode: 5, Topology: map[string]string{"zone": "a"}}, Node)
	_, err := cl.CreateVolume(ctx, createReq("pvc", 1, snw))
	wantCode(t, "CreateVolume on a node-only socket", err, codes.Unimplemented)
	info, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &csi.NodeGetInfoResponse{NodeId: "node-1", MaxVolumesPerNode: 5, AccessibleTopology: &csi.Topology{Segments: map[string]string{"zone": "a"}}}
	if d := cmp.Diff(want, info, protocmp.Transform()); d != "" {
		t.Errorf("NodeGetInfo (-want +got):\n%s", d)
	}
	var rec NodeRecord
	if err := readJSON(filepath.Join(c.data, nodesDir, "node-1", nodeFile), &rec); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(NodeRecord{NodeID: "node-1", MaxVolumesPerNode: 5, Topology: map[string]string{"zone": "a"}}, rec); d != "" {
		t.Errorf("node record (-want +got):\n%s", d)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no data dir", Config{}},
		{"relative data dir", Config{DataDir: "data"}},
		{"bad driver name", Config{DataDir: "/x", DriverName: "-bad"}},
		{"bad node ID", Config{DataDir: "/x", NodeID: "a/b"}},
		{"negative max volumes", Config{DataDir: "/x", MaxVolumesPerNode: -1}},
		{"negative capacity", Config{DataDir: "/x", Capacity: -1}},
		{"empty topology value", Config{DataDir: "/x", Topology: map[string]string{"zone": ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Error("New accepted the config")
			}
		})
	}
	d, err := New(Config{DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Start(filepath.Join(t.TempDir(), "csi.sock"), Node); err == nil {
		t.Error("serving the node service without a NodeID succeeded")
	}
}
