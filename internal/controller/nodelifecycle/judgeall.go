package nodelifecycle

import (
	"runtime"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
)

// Judging a node reads only that node, its Lease and its remembered Health,
// and writes only that node's slot, so a pass judges fixed chunks of the
// node list on several goroutines when the list is long. Each chunk keeps
// its own zone tallies, in the order it first saw each zone; merging them
// in chunk order gives exactly the tallies, and the first-seen order, of
// judging every node in turn. Nothing a pass decides depends on how the
// chunks were shared out.

const (
	// parallelMinNodes is the fleet size from which a pass judges in
	// parallel; below it, starting goroutines costs more than it saves.
	parallelMinNodes = 1000
	// chunkNodes is the number of nodes in one unit of parallel judging.
	chunkNodes = 256
)

// split is how a pass cuts its judging: chunks of chunk nodes (the last
// may be shorter), shared out over up to workers goroutines.
type split struct {
	chunk, workers int
}

// splitFor is the split PlanPass uses for n nodes: one chunk judged on
// the calling goroutine below parallelMinNodes, otherwise chunkNodes-node
// chunks over GOMAXPROCS goroutines.
func splitFor(n int) split {
	if n < parallelMinNodes {
		return split{chunk: max(n, 1), workers: 1}
	}
	return split{chunk: chunkNodes, workers: runtime.GOMAXPROCS(0)}
}

func (sp split) chunks(n int) int { return (n + sp.chunk - 1) / sp.chunk }

// bounds is the node range [lo, hi) of chunk c.
func (sp split) bounds(c, n int) (lo, hi int) {
	return c * sp.chunk, min((c+1)*sp.chunk, n)
}

// chunkTally is what one chunk found besides its nodes' verdicts.
type chunkTally struct {
	// zones in the order the chunk first saw them; first backs it while
	// there are few.
	zones []zoneTally
	first [scanZones]zoneTally
	// byLabels indexes zones by label values once there are more than a
	// few of them; before that a scan is cheaper than hashing.
	byLabels map[[2]string]int
	// added counts the chunk's nodes not seen at the last pass.
	added int
}

// zoneTally counts one zone's nodes.
type zoneTally struct {
	// region and zone are the label values key was made from.
	region, zone string
	key          string
	// counted: some node of the zone is not excluded from disruption.
	counted bool
	zoneCount
}

// scanZones is how many zones a chunk scans before indexing them.
const scanZones = 8

// zoneFor returns the tally of the zone with label values region and zone,
// for a node remembered as old (nil if not seen before). A new tally's key
// is old's Zone when that is still right, so a steady fleet builds no key
// strings.
func (t *chunkTally) zoneFor(region, zone string, old *Health) *zoneTally {
	if t.byLabels == nil {
		for i := range t.zones {
			if z := &t.zones[i]; z.zone == zone && z.region == region {
				return z
			}
		}
	} else if i, ok := t.byLabels[[2]string{region, zone}]; ok {
		return &t.zones[i]
	}
	var key string
	if old != nil && isZoneKeyOf(old.Zone, region, zone) {
		key = old.Zone
	} else {
		key = zoneKeyOf(region, zone)
	}
	if t.zones == nil {
		t.zones = t.first[:0]
	}
	t.zones = append(t.zones, zoneTally{region: region, zone: zone, key: key})
	switch n := len(t.zones); {
	case n > scanZones && t.byLabels == nil:
		t.byLabels = make(map[[2]string]int, 2*n)
		for i := range t.zones {
			t.byLabels[[2]string{t.zones[i].region, t.zones[i].zone}] = i
		}
	case t.byLabels != nil:
		t.byLabels[[2]string{region, zone}] = n - 1
	}
	return &t.zones[len(t.zones)-1]
}

// judgeAll judges every node of in into slab and recs (indexed like
// in.Nodes) and returns each chunk's tallies. side runs on the calling
// goroutine while the chunks are judged; it must not touch slab's or
// recs' contents.
func judgeAll(in Input, sp split, slab []Health, recs []judged, side func()) []chunkTally {
	n := len(in.Nodes)
	tallies := make([]chunkTally, sp.chunks(n))
	judgeChunk := func(c int) {
		t := &tallies[c]
		lo, hi := sp.bounds(c, n)
		for i := lo; i < hi; i++ {
			node := in.Nodes[i]
			old := in.State.Health[node.Name]
			region, zone := zoneLabelValues(node.Labels)
			z := t.zoneFor(region, zone, old)
			r, _ := judge(&slab[i], node, in.Leases[node.Name], old, in.Now, in.Params, z.key)
			r.hasNR = hasTaint(node.Spec.Taints, NotReadyTaint.Key, NotReadyTaint.Effect)
			r.hasUR = hasTaint(node.Spec.Taints, UnreachableTaint.Key, UnreachableTaint.Effect)
			if old == nil {
				r.added = true
				t.added++
			}
			recs[i] = r
			if excludedFromDisruption(node) {
				continue
			}
			z.counted = true
			if r.current == corev1.ConditionTrue {
				z.ready++
			} else {
				z.notReady++
			}
		}
	}

	workers := min(sp.workers, len(tallies))
	if workers <= 1 {
		side()
		for c := range tallies {
			judgeChunk(c)
		}
		return tallies
	}
	var next atomic.Int64
	work := func() {
		for c := int(next.Add(1) - 1); c < len(tallies); c = int(next.Add(1) - 1) {
			judgeChunk(c)
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	side()
	work()
	wg.Wait()
	return tallies
}

// mergeZones adds up the chunks' zone tallies: seen lists every zone in
// the order the node list first names it; counts holds the tallies of the
// zones with counted nodes, which countedZones lists (unsorted).
func mergeZones(tallies []chunkTally) (seen []string, counts map[string]*zoneCount, countedZones []string) {
	byKey := map[string]*zoneCount{}
	counts = map[string]*zoneCount{}
	for c := range tallies {
		for i := range tallies[c].zones {
			z := &tallies[c].zones[i]
			total, ok := byKey[z.key]
			if !ok {
				total = &zoneCount{}
				byKey[z.key] = total
				seen = append(seen, z.key)
			}
			if !z.counted {
				continue
			}
			if _, ok := counts[z.key]; !ok {
				counts[z.key] = total
				countedZones = append(countedZones, z.key)
			}
			total.ready += z.ready
			total.notReady += z.notReady
		}
	}
	return seen, counts, countedZones
}
