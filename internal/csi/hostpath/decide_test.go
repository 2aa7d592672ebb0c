package hostpath

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	snw  = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	snro = csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY
	snsw = csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	snmw = csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
	mnro = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	mnsw = csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER
	mnmw = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
)

// wantKind checks err against the kind a case expects (nil: no error).
func wantKind(t *testing.T, err, kind error) {
	t.Helper()
	switch {
	case kind == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case kind != nil && !errors.Is(err, kind):
		t.Fatalf("error %v, want kind %v", err, kind)
	}
}

func TestVolumeID(t *testing.T) {
	a, b := VolumeID("pvc-1"), VolumeID("pvc-2")
	if a != VolumeID("pvc-1") {
		t.Error("VolumeID is not deterministic")
	}
	if a == b {
		t.Error("two names gave one ID")
	}
	for _, id := range []string{a, b} {
		if !validVolumeID(id) {
			t.Errorf("VolumeID gave %q, which validVolumeID refuses", id)
		}
	}
	for _, id := range []string{"", "fake-vol-id", strings.ToUpper(a), a + "0", "../" + a[3:]} {
		if validVolumeID(id) {
			t.Errorf("validVolumeID(%q) = true", id)
		}
	}
}

func TestValidNodeID(t *testing.T) {
	for id, want := range map[string]bool{
		"node-1": true, "a.b.c": true, "": false, ".": false, "..": false,
		"a/b": false, "a\x00": false, strings.Repeat("n", 253): true, strings.Repeat("n", 254): false,
	} {
		if got := validNodeID(id); got != want {
			t.Errorf("validNodeID(%q) = %t, want %t", id, got, want)
		}
	}
}

func TestCheckCapability(t *testing.T) {
	block := &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
	for _, tc := range []struct {
		name string
		cap  *csi.VolumeCapability
		kind error
	}{
		{"mount", mountCap(snw), nil},
		{"every mode", mountCap(mnmw), nil},
		{"nil", nil, ErrInvalid},
		{"unknown mode", mountCap(csi.VolumeCapability_AccessMode_UNKNOWN), ErrInvalid},
		{"mode out of enum", mountCap(99), ErrInvalid},
		{"no access mode", &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}, ErrInvalid},
		{"block", block, ErrInvalid},
		{"no access type", &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw}}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) { wantKind(t, checkCapability(tc.cap), tc.kind) })
	}
}

func TestVolumeSize(t *testing.T) {
	const def = 100
	for _, tc := range []struct {
		name     string
		r        *csi.CapacityRange
		want     int64
		wantKind error
	}{
		{"no range", nil, def, nil},
		{"required", &csi.CapacityRange{RequiredBytes: 7}, 7, nil},
		{"required equals limit", &csi.CapacityRange{RequiredBytes: 7, LimitBytes: 7}, 7, nil},
		{"limit below default", &csi.CapacityRange{LimitBytes: 50}, 50, nil},
		{"limit above default", &csi.CapacityRange{LimitBytes: 500}, def, nil},
		{"required above limit", &csi.CapacityRange{RequiredBytes: 8, LimitBytes: 7}, 0, ErrOutOfRange},
		{"negative required", &csi.CapacityRange{RequiredBytes: -1}, 0, ErrInvalid},
		{"negative limit", &csi.CapacityRange{LimitBytes: -1}, 0, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := volumeSize(tc.r, def)
			wantKind(t, err, tc.wantKind)
			if got != tc.want {
				t.Errorf("size %d, want %d", got, tc.want)
			}
		})
	}
}

func seg(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func topo(segs ...map[string]string) []*csi.Topology {
	var out []*csi.Topology
	for _, s := range segs {
		out = append(out, &csi.Topology{Segments: s})
	}
	return out
}

func TestPlanCreate(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := func() *csi.CreateVolumeRequest { return createReq("pvc-a", 10, snw) }
	with := func(f func(r *csi.CreateVolumeRequest)) *csi.CreateVolumeRequest {
		r := base()
		f(r)
		return r
	}
	existing := &Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Created: now.Add(-time.Hour)}
	zoneA, zoneB := seg("zone", "a"), seg("zone", "b")
	lim := createLimits{DefaultSize: 100}
	for _, tc := range []struct {
		name       string
		req        *csi.CreateVolumeRequest
		existing   *Volume
		lim        createLimits
		want       Volume
		wantCreate bool
		wantKind   error
	}{
		{name: "new", req: base(), lim: lim,
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Created: now}, wantCreate: true},
		{name: "default size", req: with(func(r *csi.CreateVolumeRequest) { r.CapacityRange = nil }), lim: lim,
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 100, Created: now}, wantCreate: true},
		{name: "again with the same arguments", req: base(), existing: existing, lim: lim, want: *existing},
		{name: "again with a range the volume fits", req: with(func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 5, LimitBytes: 10}
		}),
			existing: existing, lim: lim, want: *existing},
		{name: "again, larger", req: with(func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes = 20 }), existing: existing, lim: lim, wantKind: ErrExists},
		{name: "again, limit below size", req: with(func(r *csi.CreateVolumeRequest) {
			r.CapacityRange = &csi.CapacityRange{RequiredBytes: 5, LimitBytes: 9}
		}),
			existing: existing, lim: lim, wantKind: ErrExists},
		{name: "again, other parameters", req: with(func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"k": "v"} }), existing: existing, lim: lim, wantKind: ErrExists},
		{name: "ID taken by another name", req: base(), existing: &Volume{ID: VolumeID("pvc-a"), Name: "other", CapacityBytes: 10}, lim: lim, wantKind: ErrExists},
		{name: "again, topology outside requisite",
			req: with(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: topo(zoneB)}
			}),
			existing: &Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Topology: []map[string]string{zoneA}}, lim: lim, wantKind: ErrExists},
		{name: "again, topology inside requisite",
			req: with(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: topo(zoneB, zoneA)}
			}),
			existing: &Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Topology: []map[string]string{zoneA}}, lim: lim,
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Topology: []map[string]string{zoneA}}},
		{name: "preferred topology first",
			req: with(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: topo(zoneA, zoneB), Preferred: topo(zoneB, zoneA)}
			}), lim: lim,
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Topology: []map[string]string{zoneB}, Created: now}, wantCreate: true},
		{name: "requisite topology without preferred",
			req: with(func(r *csi.CreateVolumeRequest) {
				r.AccessibilityRequirements = &csi.TopologyRequirement{Requisite: topo(zoneA, zoneB)}
			}), lim: lim,
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Topology: []map[string]string{zoneA}, Created: now}, wantCreate: true},
		{name: "parameters kept", req: with(func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"k": "v"} }), lim: lim,
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Parameters: map[string]string{"k": "v"}, Created: now}, wantCreate: true},
		{name: "fills the capacity exactly", req: base(), lim: createLimits{Capacity: 100, Allocated: 90},
			want: Volume{ID: VolumeID("pvc-a"), Name: "pvc-a", CapacityBytes: 10, Created: now}, wantCreate: true},
		{name: "one byte over the capacity", req: base(), lim: createLimits{Capacity: 100, Allocated: 91}, wantKind: ErrExhausted},
		{name: "larger than the capacity", req: base(), lim: createLimits{Capacity: 9}, wantKind: ErrOutOfRange},
		{name: "existing ignores capacity", req: base(), existing: existing, lim: createLimits{Capacity: 10, Allocated: 10}, want: *existing},
		{name: "no name", req: with(func(r *csi.CreateVolumeRequest) { r.Name = "" }), lim: lim, wantKind: ErrInvalid},
		{name: "no capabilities", req: with(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil }), lim: lim, wantKind: ErrInvalid},
		{name: "no capabilities, existing", req: with(func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = nil }), existing: existing, lim: lim, wantKind: ErrInvalid},
		{name: "content source", req: with(func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "x"}}}
		}), lim: lim, wantKind: ErrInvalid},
		{name: "mutable parameters", req: with(func(r *csi.CreateVolumeRequest) { r.MutableParameters = map[string]string{"a": "b"} }), lim: lim, wantKind: ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, create, err := planCreate(tc.req, tc.existing, tc.lim, now)
			wantKind(t, err, tc.wantKind)
			if err != nil {
				return
			}
			if create != tc.wantCreate {
				t.Errorf("create = %t, want %t", create, tc.wantCreate)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("volume (-want +got):\n%s", d)
			}
		})
	}
}

func TestPlanDelete(t *testing.T) {
	wantKind(t, planDelete(Volume{ID: "v"}), nil)
	err := planDelete(Volume{ID: "v", Published: map[string]Publication{"n2": {}, "n1": {}}})
	wantKind(t, err, ErrPrecondition)
	if !strings.Contains(err.Error(), "n1, n2") {
		t.Errorf("message %q does not name the nodes", err)
	}
}

func TestPlanPublish(t *testing.T) {
	vol := func(pubs map[string]Publication) Volume { return Volume{ID: "v", Published: pubs} }
	pub := func(mode csi.VolumeCapability_AccessMode_Mode, ro bool) Publication {
		return Publication{Mode: mode.String(), Readonly: ro}
	}
	known := nodeView{Record: &NodeRecord{NodeID: "n2"}}
	limited := func(max, attached int64) nodeView {
		return nodeView{Record: &NodeRecord{NodeID: "n2", MaxVolumesPerNode: max}, Attached: attached}
	}
	inZone := func(z string) nodeView { return nodeView{Record: &NodeRecord{NodeID: "n2", Topology: seg("zone", z)}} }
	for _, tc := range []struct {
		name        string
		vol         Volume
		req         publishRequest
		node        nodeView
		want        map[string]Publication
		wantChanged bool
		wantKind    error
	}{
		{name: "first", vol: vol(nil), req: publishRequest{"n2", snw, false}, node: known,
			want: map[string]Publication{"n2": pub(snw, false)}, wantChanged: true},
		{name: "unknown node", vol: vol(nil), req: publishRequest{"n2", snw, false}, node: nodeView{}, wantKind: ErrNotFound},
		{name: "again, same", vol: vol(map[string]Publication{"n2": pub(snw, false)}), req: publishRequest{"n2", snw, false}, node: known,
			want: map[string]Publication{"n2": pub(snw, false)}},
		{name: "again, other readonly", vol: vol(map[string]Publication{"n2": pub(snw, false)}), req: publishRequest{"n2", snw, true}, node: known, wantKind: ErrExists},
		{name: "again, other mode", vol: vol(map[string]Publication{"n2": pub(snw, false)}), req: publishRequest{"n2", snmw, false}, node: known, wantKind: ErrExists},
		{name: "SINGLE_NODE_WRITER held by another node", vol: vol(map[string]Publication{"n1": pub(snw, false)}), req: publishRequest{"n2", snw, false}, node: known, wantKind: ErrPrecondition},
		{name: "SINGLE_NODE_READER_ONLY held by another node", vol: vol(map[string]Publication{"n1": pub(snro, true)}), req: publishRequest{"n2", snro, true}, node: known, wantKind: ErrPrecondition},
		{name: "SINGLE_NODE_SINGLE_WRITER held by another node", vol: vol(map[string]Publication{"n1": pub(snsw, false)}), req: publishRequest{"n2", snsw, false}, node: known, wantKind: ErrPrecondition},
		{name: "SINGLE_NODE_MULTI_WRITER held by another node", vol: vol(map[string]Publication{"n1": pub(snmw, false)}), req: publishRequest{"n2", snmw, false}, node: known, wantKind: ErrPrecondition},
		{name: "multi-node request, single-node holder", vol: vol(map[string]Publication{"n1": pub(snw, false)}), req: publishRequest{"n2", mnmw, false}, node: known, wantKind: ErrPrecondition},
		{name: "single-node request, multi-node holder", vol: vol(map[string]Publication{"n1": pub(mnmw, false)}), req: publishRequest{"n2", snw, false}, node: known, wantKind: ErrPrecondition},
		{name: "MULTI_NODE_MULTI_WRITER on two nodes", vol: vol(map[string]Publication{"n1": pub(mnmw, false)}), req: publishRequest{"n2", mnmw, false}, node: known,
			want: map[string]Publication{"n1": pub(mnmw, false), "n2": pub(mnmw, false)}, wantChanged: true},
		{name: "MULTI_NODE_READER_ONLY on two nodes", vol: vol(map[string]Publication{"n1": pub(mnro, false)}), req: publishRequest{"n2", mnro, false}, node: known,
			want: map[string]Publication{"n1": pub(mnro, false), "n2": pub(mnro, false)}, wantChanged: true},
		{name: "MULTI_NODE_SINGLE_WRITER, two writers", vol: vol(map[string]Publication{"n1": pub(mnsw, false)}), req: publishRequest{"n2", mnsw, false}, node: known, wantKind: ErrPrecondition},
		{name: "MULTI_NODE_SINGLE_WRITER, writer and reader", vol: vol(map[string]Publication{"n1": pub(mnsw, false)}), req: publishRequest{"n2", mnsw, true}, node: known,
			want: map[string]Publication{"n1": pub(mnsw, false), "n2": pub(mnsw, true)}, wantChanged: true},
		{name: "node in the volume's topology", vol: Volume{ID: "v", Topology: []map[string]string{seg("zone", "a")}}, req: publishRequest{"n2", snw, false}, node: inZone("a"),
			want: map[string]Publication{"n2": pub(snw, false)}, wantChanged: true},
		{name: "node outside the volume's topology", vol: Volume{ID: "v", Topology: []map[string]string{seg("zone", "a")}}, req: publishRequest{"n2", snw, false}, node: inZone("b"), wantKind: ErrPrecondition},
		{name: "one below the node's limit", vol: vol(nil), req: publishRequest{"n2", snw, false}, node: limited(3, 2),
			want: map[string]Publication{"n2": pub(snw, false)}, wantChanged: true},
		{name: "at the node's limit", vol: vol(nil), req: publishRequest{"n2", snw, false}, node: limited(3, 3), wantKind: ErrExhausted},
		{name: "again at the node's limit", vol: vol(map[string]Publication{"n2": pub(snw, false)}), req: publishRequest{"n2", snw, false}, node: limited(3, 3),
			want: map[string]Publication{"n2": pub(snw, false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.vol.Clone()
			got, changed, err := planPublish(tc.vol, tc.req, tc.node)
			if d := cmp.Diff(before, tc.vol); d != "" {
				t.Errorf("planPublish changed its input:\n%s", d)
			}
			wantKind(t, err, tc.wantKind)
			if err != nil {
				return
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %t, want %t", changed, tc.wantChanged)
			}
			if d := cmp.Diff(tc.want, got.Published); d != "" {
				t.Errorf("publications (-want +got):\n%s", d)
			}
		})
	}
}

func TestPlanPublishNamesHolder(t *testing.T) {
	_, _, err := planPublish(Volume{ID: "v", Published: map[string]Publication{"node-a": {Mode: snw.String()}}},
		publishRequest{"node-b", snw, false}, nodeView{Record: &NodeRecord{NodeID: "node-b"}})
	if err == nil || !strings.Contains(err.Error(), `"node-a"`) {
		t.Errorf("error %v does not name the node holding the volume", err)
	}
}

func TestPlanUnpublish(t *testing.T) {
	two := Volume{ID: "v", Published: map[string]Publication{"n1": {Mode: "MULTI_NODE_MULTI_WRITER"}, "n2": {Mode: "MULTI_NODE_MULTI_WRITER"}}}
	for _, tc := range []struct {
		name        string
		vol         Volume
		node        string
		want        []string
		wantChanged bool
	}{
		{"one node", two, "n1", []string{"n2"}, true},
		{"node it is not on", two, "n3", []string{"n1", "n2"}, false},
		{"all nodes", two, "", nil, true},
		{"unpublished", Volume{ID: "v"}, "n1", nil, false},
		{"last node", Volume{ID: "v", Published: map[string]Publication{"n1": {}}}, "n1", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := planUnpublish(tc.vol, tc.node)
			if changed != tc.wantChanged {
				t.Errorf("changed = %t, want %t", changed, tc.wantChanged)
			}
			if d := cmp.Diff(tc.want, got.PublishedNodes()); d != "" {
				t.Errorf("nodes (-want +got):\n%s", d)
			}
			if len(two.Published) != 2 {
				t.Fatal("planUnpublish changed its input")
			}
		})
	}
}

func TestCounts(t *testing.T) {
	vols := []Volume{
		{ID: "a", CapacityBytes: 1, Published: map[string]Publication{"n1": {}}},
		{ID: "b", CapacityBytes: 2, Published: map[string]Publication{"n1": {}, "n2": {}}},
		{ID: "c", CapacityBytes: 4},
	}
	if got := attachedTo(vols, "n1", ""); got != 2 {
		t.Errorf("attachedTo n1 = %d, want 2", got)
	}
	if got := attachedTo(vols, "n1", "a"); got != 1 {
		t.Errorf("attachedTo n1 skipping a = %d, want 1", got)
	}
	if got := allocated(vols, "c"); got != 3 {
		t.Errorf("allocated skipping c = %d, want 3", got)
	}
}

func TestPageIDs(t *testing.T) {
	ids := []string{VolumeID("a"), VolumeID("b"), VolumeID("c"), VolumeID("d"), VolumeID("e")}
	sorted := append([]string(nil), ids...)
	slices.Sort(sorted)
	missing := VolumeID("zz")
	for _, tc := range []struct {
		name     string
		token    string
		max      int32
		want     []string
		wantNext string
		wantKind error
	}{
		{name: "all", want: sorted},
		{name: "max above count", max: 9, want: sorted},
		{name: "max equals count", max: 5, want: sorted},
		{name: "first page", max: 2, want: sorted[:2], wantNext: sorted[2]},
		{name: "middle page", token: sorted[2], max: 2, want: sorted[2:4], wantNext: sorted[4]},
		{name: "last page", token: sorted[4], max: 2, want: sorted[4:]},
		{name: "token of a deleted volume", token: missing, want: afterToken(sorted, missing)},
		{name: "invalid token", token: "invalid-token", wantKind: ErrBadToken},
		{name: "negative max", max: -1, wantKind: ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, next, err := pageIDs(sorted, tc.token, tc.max)
			wantKind(t, err, tc.wantKind)
			if err != nil {
				return
			}
			if d := cmp.Diff(tc.want, got, cmpEmpty); d != "" {
				t.Errorf("page (-want +got):\n%s", d)
			}
			if next != tc.wantNext {
				t.Errorf("next %q, want %q", next, tc.wantNext)
			}
		})
	}
}

var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func afterToken(sorted []string, token string) []string {
	for i, id := range sorted {
		if id >= token {
			return sorted[i:]
		}
	}
	return nil
}

func TestTopology(t *testing.T) {
	a, b := seg("zone", "a"), seg("zone", "b")
	ab := seg("zone", "a", "rack", "1")
	for _, tc := range []struct {
		name string
		vol  []map[string]string
		node map[string]string
		want bool
	}{
		{"everywhere", nil, nil, true},
		{"everywhere, node with topology", nil, a, true},
		{"same segment", []map[string]string{a}, a, true},
		{"node has more keys", []map[string]string{a}, ab, true},
		{"node has fewer keys", []map[string]string{ab}, a, false},
		{"other segment", []map[string]string{a}, b, false},
		{"one of two", []map[string]string{b, a}, a, true},
		{"node without topology", []map[string]string{a}, nil, false},
	} {
		t.Run("nodeAccessible/"+tc.name, func(t *testing.T) {
			if got := nodeAccessible(tc.vol, tc.node); got != tc.want {
				t.Errorf("nodeAccessible = %t, want %t", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		have []map[string]string
		req  *csi.TopologyRequirement
		want bool
	}{
		{"no requirement", []map[string]string{a}, nil, true},
		{"volume everywhere", nil, &csi.TopologyRequirement{Requisite: topo(b)}, true},
		{"in requisite", []map[string]string{a}, &csi.TopologyRequirement{Requisite: topo(b, a)}, true},
		{"not in requisite", []map[string]string{a}, &csi.TopologyRequirement{Requisite: topo(b)}, false},
		{"preferred only", []map[string]string{a}, &csi.TopologyRequirement{Preferred: topo(a)}, true},
		{"requisite wins over preferred", []map[string]string{a}, &csi.TopologyRequirement{Requisite: topo(b), Preferred: topo(a)}, false},
	} {
		t.Run("topologySatisfies/"+tc.name, func(t *testing.T) {
			if got := topologySatisfies(tc.have, tc.req); got != tc.want {
				t.Errorf("topologySatisfies = %t, want %t", got, tc.want)
			}
		})
	}
	if got := chooseTopology(nil); got != nil {
		t.Errorf("chooseTopology(nil) = %v, want nil", got)
	}
}

func TestCapacityLeft(t *testing.T) {
	for _, tc := range []struct {
		capacity, allocated, free, want int64
	}{
		{0, 5, 77, 77},
		{100, 30, 77, 70},
		{100, 100, 77, 0},
		{100, 130, 77, 0},
	} {
		if got := capacityLeft(tc.capacity, tc.allocated, tc.free); got != tc.want {
			t.Errorf("capacityLeft(%d, %d, %d) = %d, want %d", tc.capacity, tc.allocated, tc.free, got, tc.want)
		}
	}
}

func TestValidationProblem(t *testing.T) {
	v := Volume{ID: "v", Parameters: map[string]string{"k": "v"}}
	req := func(f func(r *csi.ValidateVolumeCapabilitiesRequest)) *csi.ValidateVolumeCapabilitiesRequest {
		r := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw), mountCap(mnmw)}}
		f(r)
		return r
	}
	for _, tc := range []struct {
		name string
		req  *csi.ValidateVolumeCapabilitiesRequest
		ok   bool
	}{
		{"supported", req(func(*csi.ValidateVolumeCapabilitiesRequest) {}), true},
		{"same parameters", req(func(r *csi.ValidateVolumeCapabilitiesRequest) { r.Parameters = map[string]string{"k": "v"} }), true},
		{"other parameters", req(func(r *csi.ValidateVolumeCapabilitiesRequest) { r.Parameters = map[string]string{"k": "w"} }), false},
		{"block", req(func(r *csi.ValidateVolumeCapabilitiesRequest) {
			r.VolumeCapabilities = append(r.VolumeCapabilities, &csi.VolumeCapability{
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw},
				AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			})
		}), false},
		{"mutable parameters", req(func(r *csi.ValidateVolumeCapabilitiesRequest) { r.MutableParameters = map[string]string{"a": "b"} }), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := validationProblem(v, tc.req); (got == "") != tc.ok {
				t.Errorf("validationProblem = %q, want ok=%t", got, tc.ok)
			}
		})
	}
}

func TestPlanStage(t *testing.T) {
	rec := &stageRecord{VolumeID: "v", Path: "/s", Mode: snw.String()}
	for _, tc := range []struct {
		name      string
		at        mountState
		rec       *stageRecord
		mode      csi.VolumeCapability_AccessMode_Mode
		wantMount bool
		wantKind  error
	}{
		{"free", pathFree, nil, snw, true, nil},
		{"free with a stale record", pathFree, rec, snmw, true, nil},
		{"staged, same mode", pathThisVolume, rec, snw, false, nil},
		{"staged, unrecorded", pathThisVolume, nil, snmw, false, nil},
		{"staged, other mode", pathThisVolume, rec, snmw, false, ErrExists},
		{"another volume there", pathOther, nil, snw, false, ErrExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mount, err := planStage(tc.at, tc.rec, "v", tc.mode)
			wantKind(t, err, tc.wantKind)
			if mount != tc.wantMount {
				t.Errorf("mount = %t, want %t", mount, tc.wantMount)
			}
		})
	}
}

func TestPlanNodePublish(t *testing.T) {
	req := func(mode csi.VolumeCapability_AccessMode_Mode, ro bool) nodePublish {
		return nodePublish{VolumeID: "v", Target: "/t1", Mode: mode, Readonly: ro}
	}
	at := func(mode csi.VolumeCapability_AccessMode_Mode, ro bool) *publishRecord {
		return &publishRecord{VolumeID: "v", Target: "/t1", Mode: mode.String(), Readonly: ro}
	}
	other := func(mode csi.VolumeCapability_AccessMode_Mode) []publishRecord {
		return []publishRecord{{VolumeID: "v", Target: "/t2", Mode: mode.String()}}
	}
	for _, tc := range []struct {
		name      string
		req       nodePublish
		at        mountState
		atTarget  *publishRecord
		others    []publishRecord
		wantMount bool
		wantKind  error
	}{
		// T1=T2, P1=P2: OK without a second mount.
		{name: "same target, same arguments", req: req(snw, false), at: pathThisVolume, atTarget: at(snw, false)},
		{name: "same target, unrecorded mount", req: req(snw, true), at: pathThisVolume, atTarget: &publishRecord{VolumeID: "v", Target: "/t1", Readonly: true}},
		// T1=T2, P1!=P2: ALREADY_EXISTS for every mode.
		{name: "same target, other readonly", req: req(mnmw, true), at: pathThisVolume, atTarget: at(mnmw, false), wantKind: ErrExists},
		{name: "same target, other mode", req: req(snmw, false), at: pathThisVolume, atTarget: at(snw, false), wantKind: ErrExists},
		{name: "same target, unrecorded, other readonly", req: req(snw, false), at: pathThisVolume, atTarget: &publishRecord{VolumeID: "v", Target: "/t1", Readonly: true}, wantKind: ErrExists},
		{name: "another volume at the target", req: req(snw, false), at: pathOther, wantKind: ErrExists},
		// T1!=T2: by mode.
		{name: "SINGLE_NODE_SINGLE_WRITER, second target", req: req(snsw, false), others: other(snsw), wantKind: ErrPrecondition},
		{name: "SINGLE_NODE_WRITER, second target", req: req(snw, false), others: other(snw), wantKind: ErrPrecondition},
		{name: "SINGLE_NODE_READER_ONLY, second target", req: req(snro, true), others: other(snro), wantKind: ErrPrecondition},
		{name: "SINGLE_NODE_MULTI_WRITER, second target", req: req(snmw, false), others: other(snmw), wantMount: true},
		{name: "MULTI_NODE_MULTI_WRITER, second target", req: req(mnmw, false), others: other(mnmw), wantMount: true},
		{name: "MULTI_NODE_READER_ONLY, second target, other arguments", req: req(mnro, true), others: other(mnro), wantMount: true},
		{name: "multi-writer after a single writer", req: req(snmw, false), others: other(snsw), wantKind: ErrPrecondition},
		{name: "first target", req: req(snsw, false), wantMount: true},
		{name: "stale record of the same target", req: req(snsw, false), others: []publishRecord{{VolumeID: "v", Target: "/t1", Mode: snsw.String()}}, wantMount: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mount, err := planNodePublish(tc.req, tc.at, tc.atTarget, tc.others)
			wantKind(t, err, tc.wantKind)
			if mount != tc.wantMount {
				t.Errorf("mount = %t, want %t", mount, tc.wantMount)
			}
		})
	}
}

func TestParseMountInfo(t *testing.T) {
	data := []byte(`22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 8:1 /data/volumes/abc /var/lib/knode/plugins/x\040y/globalmount rw,relatime shared:1 - ext4 /dev/sda1 rw
41 40 8:1 /data/volumes/abc /pods/p/mount ro,relatime shared:1 - ext4 /dev/sda1 rw
42 22 0:5 / /odd\134path\011tab rw - tmpfs tmpfs rw
`)
	got, err := parseMountInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []mountEntry{
		{Root: "/", MountPoint: "/"},
		{Root: "/data/volumes/abc", MountPoint: "/var/lib/knode/plugins/x y/globalmount"},
		{Root: "/data/volumes/abc", MountPoint: "/pods/p/mount", ReadOnly: true},
		{Root: "/", MountPoint: "/odd\\path\ttab"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if e := mounts(got).at("/pods/p/mount"); e == nil || !e.ReadOnly {
		t.Errorf("at(/pods/p/mount) = %+v", e)
	}
	if e := mounts(got).at("/pods"); e != nil {
		t.Errorf("at(/pods) = %+v, want nil", e)
	}
	if _, err := parseMountInfo([]byte("1 2 3\n")); err == nil {
		t.Error("a short line parsed")
	}
	if got := unescapeMountPath(`a\04`); got != `a\04` {
		t.Errorf("a truncated escape became %q", got)
	}
}

func TestToStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{nil, codes.OK},
		{fail(ErrInvalid, "x"), codes.InvalidArgument},
		{fail(ErrNotFound, "x"), codes.NotFound},
		{fail(ErrExists, "x"), codes.AlreadyExists},
		{fail(ErrPrecondition, "x"), codes.FailedPrecondition},
		{fail(ErrExhausted, "x"), codes.ResourceExhausted},
		{fail(ErrOutOfRange, "x"), codes.OutOfRange},
		{fail(ErrBadToken, "x"), codes.Aborted},
		{errors.New("disk on fire"), codes.Internal},
		{status.Error(codes.Unavailable, "x"), codes.Unavailable},
	} {
		if got := status.Code(toStatus(tc.err)); got != tc.want {
			t.Errorf("toStatus(%v) code %v, want %v", tc.err, got, tc.want)
		}
	}
	if msg := status.Convert(toStatus(fail(ErrNotFound, "volume %q does not exist", "v"))).Message(); msg != `volume "v" does not exist` {
		t.Errorf("message %q", msg)
	}
}
