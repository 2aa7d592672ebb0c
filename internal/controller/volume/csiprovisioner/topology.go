package csiprovisioner

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Segment is one topology key and value. (Its field names show in error
// messages as upstream's do.)
type Segment struct {
	Key, Value string
}

// Term is a topology: segments ANDed, sorted by key.
type Term []Segment

func (t Term) sort() {
	slices.SortFunc(t, func(a, b Segment) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value))
	})
}

// compare orders terms: shorter first, then segment by segment.
func (t Term) compare(o Term) int {
	if len(t) != len(o) {
		return len(t) - len(o)
	}
	for i := range t {
		if c := cmp.Or(strings.Compare(t[i].Key, o[i].Key), strings.Compare(t[i].Value, o[i].Value)); c != 0 {
			return c
		}
	}
	return 0
}

// within reports whether every segment of t is in o.
func (t Term) within(o Term) bool {
	for _, s := range t {
		if !slices.Contains(o, s) {
			return false
		}
	}
	return true
}

var csiNodeResource = schema.GroupResource{Group: storagev1.GroupName, Resource: "csinode"}

// topologyKeys are driver's topology keys on csiNode; nil when it has
// none.
func topologyKeys(csiNode *storagev1.CSINode, driver string) []string {
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == driver {
			return d.TopologyKeys
		}
	}
	return nil
}

// termOf is the topology labels has for keys; ok is false when a key is
// missing.
func termOf(labels map[string]string, keys []string) (Term, bool) {
	t := Term{}
	for _, k := range keys {
		v, ok := labels[k]
		if !ok {
			return nil, false
		}
		t = append(t, Segment{k, v})
	}
	t.sort()
	return t, true
}

// flatten turns allowed topologies (an OR of ANDs of ORs of values) into
// an OR of terms, distributing each key's values over the others.
func flatten(allowed []corev1.TopologySelectorTerm) []Term {
	var out []Term
	for _, sel := range allowed {
		var terms []Term
		for _, req := range sel.MatchLabelExpressions {
			var next []Term
			for _, v := range req.Values {
				if len(terms) == 0 {
					next = append(next, Term{{req.Key, v}})
					continue
				}
				for _, t := range terms {
					next = append(next, append(slices.Clone(t), Segment{req.Key, v}))
				}
			}
			terms = next
		}
		out = append(out, terms...)
	}
	for _, t := range out {
		t.sort()
	}
	return out
}

// Accessibility is the TopologyRequirement of CreateVolume for a claim
// named claimName, as the external provisioner builds it with its
// defaults (immediate topology on):
//   - with a selected node, the driver's topology keys come from that
//     node's CSINode and the node's labels give its topology. Strict
//     topology requires that topology (and that the allowed topologies
//     admit it); otherwise the requisite terms are the class's allowed
//     topologies, or else the topologies of every node that has all the
//     keys, with the selected node's term first among the preferred;
//   - without one (immediate binding), the keys come from the first
//     CSINode (by name) that has any for the driver, the requisite terms
//     as above, and the preferred terms are the requisite rotated by a
//     hash of the claim name (StatefulSet claims "<claim>-<set>-<n>"
//     spread by n).
//
// Requisite terms are sorted and unique. The result is nil when there is
// nothing to require. reschedule is true when the selected node has no
// CSINode, so the scheduler should choose again.
func Accessibility(driver, claimName string, allowed []corev1.TopologySelectorTerm, selectedNode string, strict bool, csiNodes []storagev1.CSINode, nodes []corev1.Node) (req *csi.TopologyRequirement, reschedule bool, err error) {
	var keys []string
	var selected Term
	var requisite []Term
	if selectedNode != "" {
		var csiNode *storagev1.CSINode
		for i := range csiNodes {
			if csiNodes[i].Name == selectedNode {
				csiNode = &csiNodes[i]
			}
		}
		if csiNode == nil {
			return nil, true, fmt.Errorf("failed to get selected CSINode %s: %w", selectedNode, apierrors.NewNotFound(csiNodeResource, selectedNode))
		}
		keys = topologyKeys(csiNode, driver)
		if len(keys) == 0 {
			return nil, false, fmt.Errorf("no topology key found for node %s", selectedNode)
		}
		var labels map[string]string
		found := false
		for i := range nodes {
			if nodes[i].Name == selectedNode {
				labels, found = nodes[i].Labels, true
			}
		}
		t, ok := termOf(labels, keys)
		if !found || !ok {
			if labels == nil {
				labels = map[string]string{}
			}
			return nil, false, fmt.Errorf("topology labels from selected node %v does not match topology keys from CSINode %v", labels, keys)
		}
		selected = t
		if strict {
			if len(allowed) > 0 {
				flat := flatten(allowed)
				if !slices.ContainsFunc(flat, func(a Term) bool { return a.within(selected) }) {
					return nil, false, fmt.Errorf("selected node '%q' topology '%v' is not in allowed topologies: %v", selectedNode, selected, flat)
				}
			}
			requisite = []Term{selected}
		}
	}

	if len(requisite) == 0 {
		if len(allowed) > 0 {
			requisite = flatten(allowed)
		} else {
			requisite, err = aggregate(driver, selectedNode, keys, csiNodes, nodes)
			if err != nil {
				return nil, false, err
			}
			if len(requisite) == 0 {
				return nil, false, fmt.Errorf("no available topology found")
			}
		}
	}
	if len(requisite) == 0 {
		return nil, false, nil
	}
	slices.SortFunc(requisite, Term.compare)
	requisite = slices.CompactFunc(requisite, slices.Equal)

	var preferred []Term
	switch {
	case selectedNode == "":
		hash, index := nameHash(claimName)
		preferred = rotate(requisite, int((hash+index)%uint32(len(requisite))))
	case strict:
		preferred = requisite
	default:
		i := slices.IndexFunc(requisite, func(t Term) bool { return t.within(selected) })
		if i < 0 {
			return nil, false, fmt.Errorf("topology %v from selected node %q is not in requisite: %v", selected, selectedNode, requisite)
		}
		preferred = rotate(requisite, i)
	}
	return &csi.TopologyRequirement{Requisite: toCSI(requisite), Preferred: toCSI(preferred)}, false, nil
}

// aggregate is the topology of every node that has all the topology keys:
// the selected node's keys, or for immediate binding those of the first
// CSINode (by name) with keys for driver. No keys anywhere gives no terms.
func aggregate(driver, selectedNode string, keys []string, csiNodes []storagev1.CSINode, nodes []corev1.Node) ([]Term, error) {
	if selectedNode == "" {
		sorted := slices.Clone(csiNodes)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
		for i := range sorted {
			if k := topologyKeys(&sorted[i], driver); len(k) > 0 {
				keys = k
				break
			}
		}
		if len(keys) == 0 {
			return nil, nil
		}
	}
	var terms []Term
	for i := range nodes {
		if t, ok := termOf(nodes[i].Labels, keys); ok && len(t) > 0 {
			terms = append(terms, t)
		}
	}
	if len(terms) == 0 {
		return nil, fmt.Errorf("topologyKeys %v were not found on any nodes", keys)
	}
	return terms, nil
}

// rotate is terms starting at i and wrapping round, in a new slice.
func rotate(terms []Term, i int) []Term {
	return append(slices.Clone(terms[i:]), terms[:i]...)
}

// nameHash spreads claims over topologies as the in-tree provisioners do:
// a claim "<prefix>-<n>" hashes its prefix and is offset by n, and a
// "<claim>-<set>-<n>" hashes only <set>, so the claims of one StatefulSet
// member land together and the members spread.
func nameHash(name string) (hash, index uint32) {
	base := name
	if dash := strings.LastIndexByte(name, '-'); dash >= 0 {
		if n, err := strconv.ParseUint(name[dash+1:], 10, 32); err == nil {
			index = uint32(n)
			base = name[:dash]
			if d := strings.LastIndexByte(base, '-'); d >= 0 {
				base = base[d+1:]
			}
		}
	}
	h := fnv.New32()
	h.Write([]byte(base))
	return h.Sum32(), index
}

// toCSI converts terms, skipping empty ones.
func toCSI(terms []Term) []*csi.Topology {
	out := []*csi.Topology{}
	for _, t := range terms {
		if len(t) == 0 {
			continue
		}
		segs := make(map[string]string, len(t))
		for _, s := range t {
			segs[s.Key] = s.Value
		}
		out = append(out, &csi.Topology{Segments: segs})
	}
	return out
}

// NodeAffinity is the PV node affinity for a volume's accessible
// topology: one node selector term per topology (ORed), one In
// requirement per segment, keys sorted. nil when there is no topology.
func NodeAffinity(topology []*csi.Topology) *corev1.VolumeNodeAffinity {
	var terms []corev1.NodeSelectorTerm
	for _, t := range topology {
		if len(t.GetSegments()) == 0 {
			continue
		}
		keys := make([]string, 0, len(t.Segments))
		for k := range t.Segments {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var exprs []corev1.NodeSelectorRequirement
		for _, k := range keys {
			exprs = append(exprs, corev1.NodeSelectorRequirement{Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{t.Segments[k]}})
		}
		terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
	if len(terms) == 0 {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}
