package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"knode/internal/sim/timeline"
)

// ZoneSummary is what happened to one zone over a timeline.
type ZoneSummary struct {
	Zone  string
	Nodes int
	// MaxSilent is the most nodes not Ready (Unknown or False) at once.
	MaxSilent int
	// MaxTainted is the most nodes with a NoExecute taint at once;
	// FirstTainted and AllTainted are when the first of them was seen and
	// when MaxTainted was first reached (zero when none was).
	MaxTainted               int
	FirstTainted, AllTainted time.Duration
	// Evicted is the number of pods deleted by taint eviction, the first
	// of them seen at FirstEvicted.
	Evicted      int
	FirstEvicted time.Duration
	// MaxShuttingDown is the most nodes shutting down or off at once;
	// PodsShutDown the pods a node shutdown ended.
	MaxShuttingDown, PodsShutDown int
	// MaxVolumesAttached is the most volumes attached at once,
	// VolumesAttached those attached at the end; VolumesForceDetached is
	// the volumes detached without a verified unmount, the first of them
	// seen at FirstForceDetached.
	MaxVolumesAttached, VolumesAttached int
	VolumesForceDetached                int
	FirstForceDetached                  time.Duration
	// Pods is the pods bound in the zone, and not ended, at the end.
	Pods int
	// PodsRejected is the pods the zone's agents rejected at admission;
	// Rejections counts them by reason (such as TopologyAffinityError)
	// when the World observed them, nil otherwise.
	PodsRejected int
	Rejections   map[string]int
}

// TaintRate is the observed rate of NoExecute tainting in nodes a second,
// from the first tainted node to the last; 0 with fewer than two.
func (z ZoneSummary) TaintRate() float64 {
	if z.MaxTainted < 2 || z.AllTainted <= z.FirstTainted {
		return 0
	}
	return float64(z.MaxTainted-1) / (z.AllTainted - z.FirstTainted).Seconds()
}

// Summarize reduces a timeline to one summary per zone, in zone order.
func Summarize(rows []timeline.Row) []ZoneSummary {
	byZone := map[string]*ZoneSummary{}
	sorted := append([]timeline.Row(nil), rows...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].TimeS < sorted[j].TimeS })
	for _, r := range sorted {
		z := byZone[r.Zone]
		if z == nil {
			z = &ZoneSummary{Zone: r.Zone}
			byZone[r.Zone] = z
		}
		at := time.Duration(r.TimeS) * time.Second
		z.Nodes, z.Pods, z.Evicted, z.PodsShutDown, z.PodsRejected = r.Nodes, r.Pods, r.PodsEvicted, r.PodsShutDown, r.PodsRejected
		z.VolumesAttached, z.VolumesForceDetached = r.VolumesAttached, r.VolumesForceDetached
		z.MaxSilent = max(z.MaxSilent, r.NotReady+r.Unknown)
		z.MaxShuttingDown = max(z.MaxShuttingDown, r.ShuttingDown)
		z.MaxVolumesAttached = max(z.MaxVolumesAttached, r.VolumesAttached)
		if r.NoExecuteTainted > 0 && z.MaxTainted == 0 {
			z.FirstTainted = at
		}
		if r.NoExecuteTainted > z.MaxTainted {
			z.MaxTainted, z.AllTainted = r.NoExecuteTainted, at
		}
		if r.PodsEvicted > 0 && z.FirstEvicted == 0 {
			z.FirstEvicted = at
		}
		if r.VolumesForceDetached > 0 && z.FirstForceDetached == 0 {
			z.FirstForceDetached = at
		}
	}
	out := make([]ZoneSummary, 0, len(byZone))
	for _, zone := range sortedKeys(byZone) {
		out = append(out, *byZone[zone])
	}
	return out
}

// WriteSummary prints the summaries, one line per zone. Shutdowns,
// volumes and rejected pods are only mentioned for a zone that had some.
func WriteSummary(w io.Writer, zones []ZoneSummary) error {
	for _, z := range zones {
		line := fmt.Sprintf("zone %s: %d nodes, at most %d not Ready", z.Zone, z.Nodes, z.MaxSilent)
		switch {
		case z.MaxTainted == 0:
			line += ", none tainted NoExecute"
		case z.TaintRate() == 0:
			line += fmt.Sprintf(", %d tainted NoExecute at %v", z.MaxTainted, z.FirstTainted)
		default:
			line += fmt.Sprintf(", %d tainted NoExecute from %v to %v (%.3g nodes/s)", z.MaxTainted, z.FirstTainted, z.AllTainted, z.TaintRate())
		}
		if z.Evicted == 0 {
			line += ", no pod evicted"
		} else {
			line += fmt.Sprintf(", %d pods evicted from %v", z.Evicted, z.FirstEvicted)
		}
		if z.MaxShuttingDown > 0 || z.PodsShutDown > 0 {
			line += fmt.Sprintf(", at most %d shutting down or off, %d pods ended by the shutdowns", z.MaxShuttingDown, z.PodsShutDown)
		}
		if z.MaxVolumesAttached > 0 || z.VolumesForceDetached > 0 {
			line += fmt.Sprintf(", at most %d volumes attached", z.MaxVolumesAttached)
			if z.VolumesForceDetached == 0 {
				line += ", none force-detached"
			} else {
				line += fmt.Sprintf(", %d force-detached from %v", z.VolumesForceDetached, z.FirstForceDetached)
			}
			line += fmt.Sprintf(", %d attached at the end", z.VolumesAttached)
		}
		if z.PodsRejected > 0 {
			line += fmt.Sprintf(", %d pods rejected at admission%s", z.PodsRejected, reasons(z.Rejections))
		}
		line += fmt.Sprintf(", %d pods running at the end\n", z.Pods)
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
	return nil
}

// reasons prints counts by reason, " (A 2, B 1)" in reason order; "" for
// none.
func reasons(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	var parts []string
	for _, r := range sortedKeys(by) {
		parts = append(parts, fmt.Sprintf("%s %d", r, by[r]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// WriteStatefulSets prints one line per StatefulSet (see
// StatefulSetSummary.String); nothing for none.
func WriteStatefulSets(w io.Writer, sets []StatefulSetSummary) error {
	for _, s := range sets {
		if _, err := io.WriteString(w, s.String()+"\n"); err != nil {
			return err
		}
	}
	return nil
}
