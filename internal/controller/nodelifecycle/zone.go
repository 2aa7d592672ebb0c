package nodelifecycle

import (
	corev1 "k8s.io/api/core/v1"
)

// ZoneState is a zone's disruption state.
type ZoneState string

// Zone states, with upstream's names.
const (
	// StateInitial is a zone seen for the first time in this pass.
	StateInitial ZoneState = "Initial"
	// StateNormal: tainting at --node-eviction-rate.
	StateNormal ZoneState = "Normal"
	// StatePartialDisruption: at least UnhealthyZoneThreshold of the zone
	// (and more than 2 nodes) is not Ready; tainting slows to
	// --secondary-node-eviction-rate, or stops in a small zone.
	StatePartialDisruption ZoneState = "PartialDisruption"
	// StateFullDisruption: no node of the zone is Ready. Tainting goes on at
	// the normal rate unless every zone is in this state.
	StateFullDisruption ZoneState = "FullDisruption"
)

// LabelExcludeDisruption marks a node left out of its zone's health counts.
// It is still tainted like any other node.
const LabelExcludeDisruption = "node.kubernetes.io/exclude-disruption"

// ZoneKey is the zone a node belongs to: "region:\x00:zone" from the
// failure-domain.beta labels, each falling back to its topology.kubernetes.io
// label when absent, or "" when both are empty. All unlabelled nodes share
// the "" zone.
func ZoneKey(node *corev1.Node) string {
	return zoneKeyOf(zoneLabelValues(node.Labels))
}

// zoneLabelValues returns the region and zone ZoneKey is made of.
func zoneLabelValues(labels map[string]string) (region, zone string) {
	zone, ok := labels[corev1.LabelFailureDomainBetaZone]
	if !ok {
		zone = labels[corev1.LabelTopologyZone]
	}
	region, ok = labels[corev1.LabelFailureDomainBetaRegion]
	if !ok {
		region = labels[corev1.LabelTopologyRegion]
	}
	return region, zone
}

// zoneKeyOf is the zone key of region and zone.
func zoneKeyOf(region, zone string) string {
	if region == "" && zone == "" {
		return ""
	}
	return region + zoneKeySep + zone
}

// isZoneKeyOf reports whether key == zoneKeyOf(region, zone), without
// building the latter.
func isZoneKeyOf(key, region, zone string) bool {
	if region == "" && zone == "" {
		return key == ""
	}
	r := len(region)
	return len(key) == r+len(zoneKeySep)+len(zone) && key[:r] == region && key[r:r+len(zoneKeySep)] == zoneKeySep && key[r+len(zoneKeySep):] == zone
}

const zoneKeySep = ":\x00:"

// excludedFromDisruption reports whether node carries the exclude label.
func excludedFromDisruption(node *corev1.Node) bool {
	_, ok := node.Labels[LabelExcludeDisruption]
	return ok
}

// ComputeZoneState classifies a zone from its counts of Ready and not-Ready
// nodes (a node without a Ready condition counts as not Ready):
// FullDisruption when none is Ready and some are not; PartialDisruption when
// more than 2 are not Ready and they are at least threshold of the zone;
// Normal otherwise, including an empty zone. The fraction is computed in
// float32, as upstream does.
func ComputeZoneState(ready, notReady int, threshold float64) ZoneState {
	switch {
	case ready == 0 && notReady > 0:
		return StateFullDisruption
	case notReady > 2 && float32(notReady)/float32(notReady+ready) >= float32(threshold):
		return StatePartialDisruption
	default:
		return StateNormal
	}
}

// ZoneRate is the NoExecute tainting rate, in nodes a second, for a zone of
// size counted nodes entering state.
func ZoneRate(state ZoneState, size int, p Params) float64 {
	switch state {
	case StatePartialDisruption:
		if size > p.LargeClusterSizeThreshold {
			return p.SecondaryNodeEvictionRate
		}
		return 0
	default: // Normal; FullDisruption (the zone is really gone) too.
		return p.NodeEvictionRate
	}
}

// zoneCount is one zone's tally in a pass.
type zoneCount struct{ ready, notReady int }

// ZoneReport is one zone's health for the metrics.
type ZoneReport struct {
	Zone string
	// Size counts the zone's nodes, less those labelled
	// node.kubernetes.io/exclude-disruption.
	Size      int
	Unhealthy int
	// Health is the percentage of Ready nodes; 100 for a zone that has
	// just lost its last counted node.
	Health float64
}

// Disruption says whether a pass entered or left the all-zones-down mode.
type Disruption int

const (
	// DisruptionUnchanged: the pass neither entered nor left the mode.
	DisruptionUnchanged Disruption = iota
	// DisruptionEntered: every zone is now fully disrupted, not all were:
	// every NoExecute taint comes off and all tainting stops, on the view
	// that the control plane, not the whole fleet, is cut off.
	DisruptionEntered
	// DisruptionLeft: some zone is back; every node gets a fresh grace
	// period and each zone the rate for its state.
	DisruptionLeft
)

// zoneDecision is the outcome of the zone step of a pass.
type zoneDecision struct {
	zones      map[string]ZoneState
	rates      map[string]float64
	changes    []QueueChange
	reports    []ZoneReport
	disruption Disruption
	// halted: after this pass every zone is fully disrupted (the mode was
	// entered now or before); nothing is queued for tainting.
	halted bool
}

// decideZones is upstream's handleDisruption over sorted zone keys.
// seen lists every node's zone (new zones get a queue and state Initial);
// counts holds the counted nodes' tallies. prevZones and prevRates are not
// modified.
func decideZones(prevZones map[string]ZoneState, prevRates map[string]float64, seen []string, counts map[string]*zoneCount, keys []string, p Params) zoneDecision {
	d := zoneDecision{
		zones: make(map[string]ZoneState, len(prevZones)+1),
		rates: make(map[string]float64, len(prevRates)+1),
	}
	for k, v := range prevZones {
		d.zones[k] = v
	}
	for k, v := range prevRates {
		d.rates[k] = v
	}
	for _, z := range seen {
		if _, ok := d.zones[z]; !ok {
			d.zones[z] = StateInitial
		}
		if _, ok := d.rates[z]; !ok {
			d.rates[z] = p.NodeEvictionRate
			d.changes = append(d.changes, QueueChange{Zone: z, Create: true, QPS: p.NodeEvictionRate})
		}
	}

	newStates := make(map[string]ZoneState, len(counts))
	allAre := true
	for _, z := range keys {
		c := counts[z]
		size := c.ready + c.notReady
		st := ComputeZoneState(c.ready, c.notReady, p.UnhealthyZoneThreshold)
		newStates[z] = st
		if st != StateFullDisruption {
			allAre = false
		}
		d.reports = append(d.reports, ZoneReport{Zone: z, Size: size, Unhealthy: c.notReady, Health: float64(100*c.ready) / float64(size)})
	}

	known := sortedKeys(d.zones)
	allWas := true
	live := known[:0]
	for _, z := range known {
		if _, ok := counts[z]; !ok {
			delete(d.zones, z)
			d.reports = append(d.reports, ZoneReport{Zone: z, Health: 100})
			continue
		}
		live = append(live, z)
		if d.zones[z] != StateFullDisruption {
			allWas = false
		}
	}
	sortReports(d.reports)

	setRate := func(z string, qps float64) {
		if d.rates[z] != qps {
			d.rates[z] = qps
			d.changes = append(d.changes, QueueChange{Zone: z, QPS: qps})
		}
	}
	sizeOf := func(z string) int { return counts[z].ready + counts[z].notReady }
	switch {
	case allAre && allWas:
		// Still all down (or no zones at all): nothing changes.
		d.halted = len(live) > 0
	case allAre:
		d.disruption = DisruptionEntered
		d.halted = true
		for _, z := range live {
			setRate(z, 0)
			d.zones[z] = StateFullDisruption
		}
	case allWas:
		d.disruption = DisruptionLeft
		for _, z := range live {
			setRate(z, ZoneRate(newStates[z], sizeOf(z), p))
			d.zones[z] = newStates[z]
		}
	default:
		for _, z := range live {
			if d.zones[z] == newStates[z] {
				continue
			}
			setRate(z, ZoneRate(newStates[z], sizeOf(z), p))
			d.zones[z] = newStates[z]
		}
	}
	return d
}
