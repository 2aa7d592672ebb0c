package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"knode/internal/volume"
)

// This file holds the decisions of a registration: which CSI versions a
// driver may speak, and what the Node and the CSINode look like with a
// driver added or removed. Each is a pure function of its arguments; the
// Watcher reads the objects and writes the results.

// logPrefix starts the CSI plugin's messages, as upstream's do.
const logPrefix = volume.CSIPluginName + ": "

// highestVersion picks the version the agent speaks with a driver that
// supports versions: the highest 1.x among them. Versions that do not
// parse and majors above 1 are skipped; no 1.x at all is an error.
func highestVersion(versions []string) (*utilversion.Version, error) {
	if len(versions) == 0 {
		return nil, errors.New(logPrefix + "CSI driver reporting empty array for supported versions")
	}
	var best *utilversion.Version
	var parseErr error
	for _, s := range versions {
		v, err := utilversion.ParseGeneric(s)
		if err != nil {
			parseErr = err
			continue
		}
		if v.Major() > 1 {
			continue
		}
		if best == nil || best.LessThan(v) {
			best = v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("could not find a highest supported version from versions (%v) reported by this driver: %v", versions, parseErr)
	}
	if best.Major() != 1 {
		return nil, fmt.Errorf("highest supported version reported by driver is %v, must be v1.x", best)
	}
	return best, nil
}

// withNodeID returns the csi.volume.kubernetes.io/nodeid annotation value
// (a JSON map from driver to node ID) with driver mapped to id, keeping
// every other driver's entry. changed is false when it already said so.
func withNodeID(current, driver, id string) (value string, changed bool, err error) {
	ids, err := parseNodeIDs(current)
	if err != nil {
		return "", false, err
	}
	if have, ok := ids[driver]; ok && have == id {
		return current, false, nil
	}
	ids[driver] = id
	out, err := json.Marshal(ids)
	if err != nil {
		return "", false, fmt.Errorf("error while marshalling node ID map updated with driverName=%q, nodeID=%q: %v", driver, id, err)
	}
	return string(out), true, nil
}

// withoutNodeID returns the annotation value without driver's entry; keep
// is false when no entry is left (the annotation goes), changed is false
// when there was no entry to remove.
func withoutNodeID(current, driver string) (value string, keep, changed bool, err error) {
	if current == "" {
		return "", false, false, nil
	}
	ids, err := parseNodeIDs(current)
	if err != nil {
		return "", false, false, err
	}
	if _, ok := ids[driver]; !ok {
		return current, true, false, nil
	}
	delete(ids, driver)
	if len(ids) == 0 {
		return "", false, true, nil
	}
	out, err := json.Marshal(ids)
	if err != nil {
		return "", false, false, err
	}
	return string(out), true, true, nil
}

func parseNodeIDs(value string) (map[string]string, error) {
	ids := map[string]string{}
	if value == "" {
		return ids, nil
	}
	if err := json.Unmarshal([]byte(value), &ids); err != nil {
		return nil, fmt.Errorf("failed to parse node's %q annotation value (%q) err=%v", volume.AnnCSINodeID, value, err)
	}
	if ids == nil {
		ids = map[string]string{}
	}
	return ids, nil
}

// withTopology returns labels with the driver's topology segments added.
// A segment whose key the Node already carries with another value is a
// collision, an error, and nothing is added. The result is a new map when
// changed, labels itself otherwise.
func withTopology(labels, topology map[string]string) (map[string]string, bool, error) {
	changed := false
	for _, k := range slices.Sorted(maps.Keys(topology)) {
		v := topology[k]
		have, ok := labels[k]
		if ok && have != v {
			return nil, false, fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, have)
		}
		if !ok {
			changed = true
		}
	}
	if !changed {
		return labels, false, nil
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, topology)
	return out, true, nil
}

// driverEntry is the CSINode entry of a driver: its node ID, the keys of
// its topology (sorted), and its volume limit when maxVolumes > 0 (capped
// at the largest int32).
func driverEntry(name, nodeID string, maxVolumes int64, topology map[string]string) storagev1.CSINodeDriver {
	d := storagev1.CSINodeDriver{Name: name, NodeID: nodeID, TopologyKeys: slices.Sorted(maps.Keys(topology))}
	if maxVolumes > 0 {
		count := int32(min(maxVolumes, math.MaxInt32))
		d.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
	}
	return d
}

// withDriver returns drivers with entry in place of any entry of the same
// name (the others keep their order; a new or changed entry goes last),
// and whether anything changed.
func withDriver(drivers []storagev1.CSINodeDriver, entry storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
	out := make([]storagev1.CSINodeDriver, 0, len(drivers)+1)
	same := false
	for _, d := range drivers {
		if d.Name != entry.Name {
			out = append(out, d)
			continue
		}
		same = d.NodeID == entry.NodeID && slices.Equal(slices.Sorted(slices.Values(d.TopologyKeys)), entry.TopologyKeys) && sameCount(d.Allocatable, entry.Allocatable)
	}
	if same {
		return drivers, false
	}
	return append(out, entry), true
}

func sameCount(a, b *storagev1.VolumeNodeResources) bool {
	ac, bc := a != nil && a.Count != nil, b != nil && b.Count != nil
	if ac != bc {
		return false
	}
	return !ac || *a.Count == *b.Count
}

// withoutDriver returns drivers without the entry named name, and whether
// there was one.
func withoutDriver(drivers []storagev1.CSINodeDriver, name string) ([]storagev1.CSINodeDriver, bool) {
	out := make([]storagev1.CSINodeDriver, 0, len(drivers))
	for _, d := range drivers {
		if d.Name != name {
			out = append(out, d)
		}
	}
	if len(out) == len(drivers) {
		return drivers, false
	}
	return out, true
}
