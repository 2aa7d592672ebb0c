package csiprovisioner

import (
	"hash/fnv"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func topo(kv ...string) *csi.Topology {
	segs := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		segs[kv[i]] = kv[i+1]
	}
	return &csi.Topology{Segments: segs}
}

func TestAccessibility(t *testing.T) {
	csiNodes := []storagev1.CSINode{topoCSINode("n3", "zone"), topoCSINode("n1", "zone"), topoCSINode("n2", "zone"), topoCSINode("bare")}
	nodes := []corev1.Node{topoNode("n1", "a"), topoNode("n2", "b"), topoNode("n3", "a"), {}}
	allowed := []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"b", "c"}}}}}
	tests := []struct {
		name       string
		claim      string
		allowed    []corev1.TopologySelectorTerm
		node       string
		strict     bool
		csiNodes   []storagev1.CSINode
		nodes      []corev1.Node
		want       *csi.TopologyRequirement
		reschedule bool
		wantErr    string
	}{
		{
			name: "selected node: every zone, its own first",
			node: "n2", csiNodes: csiNodes, nodes: nodes,
			want: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("zone", "a"), topo("zone", "b")}, Preferred: []*csi.Topology{topo("zone", "b"), topo("zone", "a")}},
		},
		{
			name: "selected node, strict: only its zone",
			node: "n2", strict: true, csiNodes: csiNodes, nodes: nodes,
			want: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("zone", "b")}, Preferred: []*csi.Topology{topo("zone", "b")}},
		},
		{
			name: "selected node, allowed topologies",
			node: "n2", allowed: allowed, csiNodes: csiNodes, nodes: nodes,
			want: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo("zone", "b"), topo("zone", "c")}, Preferred: []*csi.Topology{topo("zone", "b"), topo("zone", "c")}},
		},
		{
			name: "selected node, strict, outside the allowed topologies",
			node: "n1", strict: true, allowed: allowed, csiNodes: csiNodes, nodes: nodes,
			wantErr: `selected node '"n1"' topology '[{zone a}]' is not in allowed topologies: [[{zone b}] [{zone c}]]`,
		},
		{
			name: "selected node, not strict, outside the allowed topologies",
			node: "n1", allowed: allowed, csiNodes: csiNodes, nodes: nodes,
			wantErr: `topology [{zone a}] from selected node "n1" is not in requisite: [[{zone b}] [{zone c}]]`,
		},
		{
			name: "selected node without CSINode",
			node: "n9", csiNodes: csiNodes, nodes: nodes,
			reschedule: true, wantErr: `failed to get selected CSINode n9: csinode.storage.k8s.io "n9" not found`,
		},
		{
			name: "selected node without keys",
			node: "bare", csiNodes: csiNodes, nodes: nodes,
			wantErr: "no topology key found for node bare",
		},
		{
			name: "selected node without the label",
			node: "n1", csiNodes: []storagev1.CSINode{topoCSINode("n1", "rack")}, nodes: nodes,
			wantErr: "topology labels from selected node map[topology.hostpath.csi.knode.io/node:n1 zone:a] does not match topology keys from CSINode [rack]",
		},
		{
			name: "selected node without a Node",
			node: "n1", csiNodes: csiNodes, nodes: nil,
			wantErr: "topology labels from selected node map[] does not match topology keys from CSINode [zone]",
		},
		{
			name:  "immediate: keys of the first CSINode by name that has any",
			claim: "data-web-0", csiNodes: []storagev1.CSINode{topoCSINode("n2", "zone"), topoCSINode("n1", nodeKey), topoCSINode("bare")}, nodes: nodes,
			want: &csi.TopologyRequirement{
				Requisite: []*csi.Topology{topo(nodeKey, "n1"), topo(nodeKey, "n2"), topo(nodeKey, "n3")},
				Preferred: rotated([]*csi.Topology{topo(nodeKey, "n1"), topo(nodeKey, "n2"), topo(nodeKey, "n3")}, "web", 0),
			},
		},
		{
			name:  "immediate: the claim's ordinal shifts the preferred order",
			claim: "data-web-1", csiNodes: csiNodes, nodes: nodes,
			want: &csi.TopologyRequirement{
				Requisite: []*csi.Topology{topo("zone", "a"), topo("zone", "b")},
				Preferred: rotated([]*csi.Topology{topo("zone", "a"), topo("zone", "b")}, "web", 1),
			},
		},
		{
			name:  "immediate: no keys anywhere",
			claim: "data", csiNodes: []storagev1.CSINode{topoCSINode("bare")}, nodes: nodes,
			wantErr: "no available topology found",
		},
		{
			name:  "immediate: keys on no node",
			claim: "data", csiNodes: []storagev1.CSINode{topoCSINode("n1", "rack")}, nodes: nodes,
			wantErr: "topologyKeys [rack] were not found on any nodes",
		},
		{
			name:  "allowed topologies of empty terms: nothing required",
			claim: "data", allowed: []corev1.TopologySelectorTerm{{}}, csiNodes: csiNodes, nodes: nodes,
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reschedule, err := Accessibility(driver, tt.claim, tt.allowed, tt.node, tt.strict, tt.csiNodes, tt.nodes)
			if errString(err) != tt.wantErr || reschedule != tt.reschedule {
				t.Fatalf("error %q, reschedule %v; want %q, %v", errString(err), reschedule, tt.wantErr, tt.reschedule)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("requirement (-want +got):\n%s", diff)
			}
		})
	}
}

// rotated is terms rotated as upstream spreads immediate claims: by the
// FNV-32 hash of base plus index.
func rotated(terms []*csi.Topology, base string, index uint32) []*csi.Topology {
	h := fnv.New32()
	h.Write([]byte(base))
	i := int((h.Sum32() + index) % uint32(len(terms)))
	return append(append([]*csi.Topology{}, terms[i:]...), terms[:i]...)
}

func TestAccessibilitySpreadsAStatefulSet(t *testing.T) {
	csiNodes := []storagev1.CSINode{topoCSINode("n1", nodeKey)}
	nodes := []corev1.Node{topoNode("n1", "a"), topoNode("n2", "a"), topoNode("n3", "a")}
	first := map[string]bool{}
	for _, claim := range []string{"data-web-0", "data-web-1", "data-web-2"} {
		req, _, err := Accessibility(driver, claim, nil, "", false, csiNodes, nodes)
		if err != nil {
			t.Fatal(err)
		}
		first[req.Preferred[0].Segments[nodeKey]] = true
	}
	if len(first) != 3 {
		t.Errorf("three StatefulSet claims prefer %v; want three different nodes", first)
	}
}

func TestNameHash(t *testing.T) {
	hash := func(s string) uint32 {
		h := fnv.New32()
		h.Write([]byte(s))
		return h.Sum32()
	}
	tests := []struct {
		name  string
		base  string
		index uint32
	}{
		{"data", "data", 0},
		{"data-7", "data", 7},
		{"data-web-3", "web", 3},
		{"my-data-my-web-12", "web", 12},
		{"data-web", "data-web", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, i := nameHash(tt.name)
			if h != hash(tt.base) || i != tt.index {
				t.Errorf("nameHash(%q) = %d, %d; want hash of %q, %d", tt.name, h, i, tt.base, tt.index)
			}
		})
	}
}

func TestFlatten(t *testing.T) {
	allowed := []corev1.TopologySelectorTerm{
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: "zone", Values: []string{"z1", "z2"}},
			{Key: "rack", Values: []string{"ra", "rb"}},
		}},
		{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "zone", Values: []string{"z3"}}}},
	}
	want := []Term{
		{{"rack", "ra"}, {"zone", "z1"}},
		{{"rack", "ra"}, {"zone", "z2"}},
		{{"rack", "rb"}, {"zone", "z1"}},
		{{"rack", "rb"}, {"zone", "z2"}},
		{{"zone", "z3"}},
	}
	if diff := cmp.Diff(want, flatten(allowed)); diff != "" {
		t.Errorf("flatten (-want +got):\n%s", diff)
	}
}

func TestNodeAffinity(t *testing.T) {
	if got := NodeAffinity(nil); got != nil {
		t.Errorf("no topology: %v, want nil", got)
	}
	if got := NodeAffinity([]*csi.Topology{{}}); got != nil {
		t.Errorf("empty segments: %v, want nil", got)
	}
	got := NodeAffinity([]*csi.Topology{topo("zone", "a", "rack", "r1"), {}, topo("zone", "b")})
	want := &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}},
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
		}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
}
