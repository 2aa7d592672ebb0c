package sim_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knode/internal/sim"
	"knode/internal/sim/script"
	"knode/internal/sim/timeline"
)

var update = flag.Bool("update", false, "rewrite the golden timelines and summaries")

// replayed caches run's results: the golden test and the checks of the
// documented numbers read the same long examples.
var replayed = map[string]replay{}

// replay is what running a script gives: its timeline, as rows and as
// CSV, its summary, and the summary as printed.
type replay struct {
	rows    []timeline.Row
	csv     []byte
	zones   []sim.ZoneSummary
	sets    []sim.StatefulSetSummary
	summary string
}

// run replays a script file, or returns its cached replay.
func run(t *testing.T, path string, seed uint64) replay {
	t.Helper()
	key := fmt.Sprintf("%s@%d", path, seed)
	if r, ok := replayed[key]; ok {
		return r
	}
	r := replayOnce(t, path, seed)
	replayed[key] = r
	return r
}

func replayOnce(t *testing.T, path string, seed uint64) replay {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := script.Parse(filepath.Base(path), f)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sim.Run(context.Background(), sc, sim.Config{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var csv, summary bytes.Buffer
	rows := w.Samples()
	if err := timeline.WriteCSV(&csv, rows); err != nil {
		t.Fatal(err)
	}
	zones := w.Summary()
	if err := sim.WriteSummary(&summary, zones); err != nil {
		t.Fatal(err)
	}
	sets := w.StatefulSets()
	if err := sim.WriteStatefulSets(&summary, sets); err != nil {
		t.Fatal(err)
	}
	return replay{rows: rows, csv: csv.Bytes(), zones: zones, sets: sets, summary: summary.String()}
}

// golden compares got with the file, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/sim -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got; rerun with -update if the change is intended):\n%s", path, diff)
	}
}

// scenarios are the golden scripts: testdata's own and the shipped
// examples. The long examples are skipped under -short.
func scenarios(t *testing.T) []string {
	own, _ := filepath.Glob("testdata/*.txt")
	examples, _ := filepath.Glob("../../examples/sim/*.txt")
	if len(own) == 0 || len(examples) < 5 {
		t.Fatalf("found %d test scripts and %d examples", len(own), len(examples))
	}
	return append(own, examples...)
}

func TestGolden(t *testing.T) {
	for _, path := range scenarios(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			if testing.Short() && strings.Contains(path, "examples") {
				t.Skip("long example")
			}
			r := run(t, path, 1)
			golden(t, filepath.Join("testdata", "golden", name+".csv"), r.csv)
			golden(t, filepath.Join("testdata", "golden", name+".summary"), []byte(r.summary))
		})
	}
}

func TestSameSeedSameTimeline(t *testing.T) {
	path := "testdata/stop-start.txt"
	first, second := replayOnce(t, path, 7).csv, replayOnce(t, path, 7).csv
	if !bytes.Equal(first, second) {
		t.Fatalf("two runs with seed 7 differ:\n%s", cmp.Diff(string(first), string(second)))
	}
}

// zones reads the summary of each zone of an example.
func zones(t *testing.T, example string) map[string]sim.ZoneSummary {
	t.Helper()
	if testing.Short() {
		t.Skip("long example")
	}
	out := map[string]sim.ZoneSummary{}
	for _, z := range run(t, filepath.Join("../../examples/sim", example+".txt"), 1).zones {
		out[z.Zone] = z
	}
	return out
}

// The documented numbers, checked on the shipped examples.

func TestDeadZoneTaintedAtPrimaryRate(t *testing.T) {
	z := zones(t, "zone-outage")
	b := z["b"]
	if b.MaxTainted != 100 || b.TaintRate() < 0.095 || b.TaintRate() > 0.105 {
		t.Errorf("zone b: %d tainted at %.4f/s, want 100 at 0.1/s", b.MaxTainted, b.TaintRate())
	}
	if b.Evicted != 100 {
		t.Errorf("zone b: %d pods evicted, want all 100", b.Evicted)
	}
	for _, name := range []string{"a", "c"} {
		if z[name].MaxTainted != 0 || z[name].Evicted != 0 || z[name].Pods != 100 {
			t.Errorf("healthy zone %s: %+v", name, z[name])
		}
	}
}

func TestLargeZonePartialDisruptionAtSecondaryRate(t *testing.T) {
	a := zones(t, "partial-large-zone")["a"]
	if a.MaxTainted != 60 || a.TaintRate() < 0.0095 || a.TaintRate() > 0.0105 {
		t.Errorf("zone a: %d tainted at %.5f/s, want 60 at 0.01/s", a.MaxTainted, a.TaintRate())
	}
}

func TestSmallZonePartialDisruptionNotTainted(t *testing.T) {
	a := zones(t, "partial-small-zone")["a"]
	if a.MaxSilent != 12 || a.MaxTainted != 0 || a.Evicted != 0 {
		t.Errorf("zone a: %d silent, %d tainted, %d evicted; want 12, 0, 0", a.MaxSilent, a.MaxTainted, a.Evicted)
	}
}

func TestEveryNodeSilentNothingTainted(t *testing.T) {
	for name, z := range zones(t, "control-plane-partition") {
		if z.MaxSilent != 20 || z.MaxTainted != 0 || z.Evicted != 0 || z.Pods != 40 {
			t.Errorf("zone %s: %+v; want 20 silent, nothing tainted or evicted, 40 pods", name, z)
		}
	}
}

func TestPodsLeave300sAfterTaint(t *testing.T) {
	a := zones(t, "one-node-dies")["a"]
	if a.MaxTainted != 1 || a.Evicted != 10 {
		t.Fatalf("zone a: %d tainted, %d evicted; want 1 and its 10 pods", a.MaxTainted, a.Evicted)
	}
	// The summary's times are the taint's and the eviction's own.
	if got := a.FirstEvicted - a.FirstTainted; got != 300*time.Second {
		t.Errorf("pods evicted %v after the taint, want 300s", got)
	}
}

func TestRollingRebootEndsZoneBPods(t *testing.T) {
	z := zones(t, "rolling-reboot")
	b := z["b"]
	if b.MaxShuttingDown != 5 || b.MaxSilent != 5 || b.PodsShutDown != 100 || b.Evicted != 0 || b.Pods != 0 {
		t.Errorf("zone b: %+v; want at most 5 shutting down and 5 not Ready, its 100 pods ended by the shutdowns, none evicted, none left", b)
	}
	for _, name := range []string{"a", "c"} {
		if zs := z[name]; zs.MaxShuttingDown != 0 || zs.PodsShutDown != 0 || zs.MaxSilent != 0 || zs.Pods != 100 {
			t.Errorf("zone %s: %+v; want untouched, 100 pods", name, zs)
		}
	}
}

// The rolling reboot's pods take time to stop, so its 10 s samples show
// each wave's groups at work: the regular pods that exit after 5 s, then
// those that exit after 15 s, then the critical pods killed 10 s later,
// while the five nodes shut down.
func TestRollingRebootStopsGroupByGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("long example")
	}
	b := map[int64]timeline.Row{}
	for _, r := range run(t, "../../examples/sim/rolling-reboot.txt", 1).rows {
		if r.Zone == "b" {
			b[r.TimeS] = r
		}
	}
	type sample struct{ shuttingDown, podsShutDown, pods int }
	want := map[int64]sample{
		290: {0, 0, 100}, 300: {5, 0, 100}, 310: {5, 23, 77}, 320: {5, 45, 55}, 330: {5, 50, 50}, 410: {5, 50, 50}, 420: {0, 50, 50},
		590: {0, 50, 50}, 600: {5, 50, 50}, 610: {5, 72, 28}, 620: {5, 95, 5}, 630: {5, 100, 0}, 710: {5, 100, 0}, 720: {0, 100, 0},
	}
	got := map[int64]sample{}
	for at := range want {
		r, ok := b[at]
		if !ok {
			t.Fatalf("no sample of zone b at %d s", at)
		}
		got[at] = sample{r.ShuttingDown, r.PodsShutDown, r.Pods}
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(sample{})); diff != "" {
		t.Errorf("zone b's {shutting_down pods_shut_down pods} by time_s (-want +got):\n%s", diff)
	}
}

// volumesOf reads zone's {volumes_attached volumes_force_detached} by
// time_s from an example's timeline.
func volumesOf(t *testing.T, example, zone string) map[int64][2]int {
	t.Helper()
	if testing.Short() {
		t.Skip("long example")
	}
	out := map[int64][2]int{}
	for _, r := range run(t, filepath.Join("../../examples/sim", example+".txt"), 1).rows {
		if r.Zone == zone {
			out[r.TimeS] = [2]int{r.VolumesAttached, r.VolumesForceDetached}
		}
	}
	return out
}

// wantVolumes checks got at the times want names.
func wantVolumes(t *testing.T, zone string, got, want map[int64][2]int) {
	t.Helper()
	picked := map[int64][2]int{}
	for at := range want {
		v, ok := got[at]
		if !ok {
			t.Fatalf("no sample of zone %s at %d s", zone, at)
		}
		picked[at] = v
	}
	if diff := cmp.Diff(want, picked); diff != "" {
		t.Errorf("zone %s's [volumes_attached volumes_force_detached] by time_s (-want +got):\n%s", zone, diff)
	}
}

// In the dead zone the evicted pods keep their volumes; at 15m the
// out-of-service half is force-detached at once and the force-deleted half
// 6 minutes later, just after 21m (so in the 1270 s sample, not the 1260 s
// one). The other zones keep theirs.
func TestZoneOutageVolumesForceDetached(t *testing.T) {
	wantVolumes(t, "b", volumesOf(t, "zone-outage-volumes", "b"), map[int64][2]int{
		0: {20, 0}, 890: {20, 0}, 900: {10, 10}, 1260: {10, 10}, 1270: {0, 20}, 1500: {0, 20},
	})
	for _, zone := range []string{"a", "c"} {
		wantVolumes(t, zone, volumesOf(t, "zone-outage-volumes", zone), map[int64][2]int{0: {20, 0}, 1500: {20, 0}})
	}
	b := zones(t, "zone-outage-volumes")["b"]
	if b.Evicted != 20 || b.FirstForceDetached != 15*time.Minute {
		t.Errorf("zone b: %+v; want its 20 pods evicted, the first volume force-detached at 15m", b)
	}
}

// With --disable-force-detach-on-timeout the force-deleted half stays
// attached past 21m, until the out-of-service taint at 25m.
func TestZoneOutageVolumesNoTimeout(t *testing.T) {
	wantVolumes(t, "b", volumesOf(t, "zone-outage-volumes-no-timeout", "b"), map[int64][2]int{
		890: {20, 0}, 900: {10, 10}, 1270: {10, 10}, 1490: {10, 10}, 1500: {0, 20}, 1800: {0, 20},
	})
}

// answerLine is an example's stated answer about a StatefulSet, in its
// header: "# answer: statefulset <name> ready again at <duration>" or
// "# answer: statefulset <name> never ready again".
var answerLine = regexp.MustCompile(`^# answer: statefulset (\S+) (?:ready again at (\S+)|never ready again)$`)

// rejectionLine is an example's stated answer about the pods a zone's
// agents rejected, as the summary prints it: "# answer: zone <z>: <n> pods
// rejected at admission (<reason> <n>, ...)".
var rejectionLine = regexp.MustCompile(`^# answer: zone (\S+): (\d+ pods rejected at admission \(.+\))$`)

// answers reads the answers an example states: about StatefulSets, by
// name, and about rejections, by zone.
func answers(t *testing.T, path string) (sets, rejections map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sets, rejections = map[string]string{}, map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "# answer:") {
			continue
		}
		if m := rejectionLine.FindStringSubmatch(line); m != nil {
			rejections[m[1]] = m[2]
			continue
		}
		m := answerLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: %q is not an answer this test reads (%s or %s)", path, line, answerLine, rejectionLine)
		}
		sets[m[1]] = m[2]
	}
	return sets, rejections
}

// Each example that states an answer about a StatefulSet gets it: ready
// again (after losing readiness) at exactly the stated time, or never
// ready again by the end of the run.
func TestStatefulSetAnswers(t *testing.T) {
	examples, _ := filepath.Glob("../../examples/sim/*.txt")
	checked := 0
	for _, path := range examples {
		want, _ := answers(t, path)
		if len(want) == 0 {
			continue
		}
		checked++
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			if testing.Short() {
				t.Skip("long example")
			}
			got := map[string]sim.StatefulSetSummary{}
			for _, s := range run(t, path, 1).sets {
				got[s.Name] = s
			}
			for name, again := range want {
				s, ok := got[name]
				switch {
				case !ok:
					t.Errorf("statefulset %s: not in the summary", name)
				case !s.EverReady || !s.Lost:
					t.Errorf("%v; the answer needs it to have been ready and to have lost readiness", s)
				case again == "" && s.ReadyAgain:
					t.Errorf("%v; answer: never ready again", s)
				case again != "" && (!s.ReadyAgain || s.ReadyAgainAt.String() != again):
					t.Errorf("%v; answer: ready again at %s", s, again)
				}
			}
		})
	}
	if checked < 3 {
		t.Errorf("%d examples state an answer, want at least the 3 statefulset-zone-outage examples", checked)
	}
}

// Each example that states how many pods a zone's agents rejected, and
// why, gets it: the zone's summary says exactly that.
func TestRejectionAnswers(t *testing.T) {
	examples, _ := filepath.Glob("../../examples/sim/*.txt")
	checked := 0
	for _, path := range examples {
		_, want := answers(t, path)
		if len(want) == 0 {
			continue
		}
		checked++
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			r := run(t, path, 1)
			for zone, answer := range want {
				line := "zone " + zone + ": "
				for _, l := range strings.Split(r.summary, "\n") {
					if strings.HasPrefix(l, line) {
						line = l
					}
				}
				if !strings.Contains(line, ", "+answer+", ") {
					t.Errorf("zone %s's summary %q does not say %q", zone, line, answer)
				}
			}
		})
	}
	if checked < 1 {
		t.Errorf("%d examples state an answer about rejected pods, want at least cpu-manager-numa.txt", checked)
	}
}

// The pods single-numa-node rejects in cpu-manager-numa.txt are the ones
// best-effort would run: replayed with that policy, nothing is rejected
// and all 12 pods run.
func TestCPUManagerNUMAExampleWithBestEffort(t *testing.T) {
	f, err := os.Open("../../examples/sim/cpu-manager-numa.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := script.Parse("cpu-manager-numa.txt", f)
	if err != nil {
		t.Fatal(err)
	}
	swapped := 0
	for _, st := range sc.Statements {
		set, ok := st.(script.Set)
		if !ok {
			continue
		}
		for i, kv := range set.Settings {
			if kv.Name == "topology-manager-policy" {
				set.Settings[i].Value = "best-effort"
				swapped++
			}
		}
	}
	if swapped != 1 {
		t.Fatalf("the example sets topology-manager-policy %d times, want once", swapped)
	}
	w, err := sim.Run(context.Background(), sc, sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	zones := w.Summary()
	if len(zones) != 1 || zones[0].PodsRejected != 0 || zones[0].Pods != 12 {
		t.Errorf("with best-effort: %+v; want no pod rejected and 12 running in zone a", zones)
	}
}

// Telling the cluster that zone b is off is what brings the StatefulSet
// back, whatever the 6-minute timeout says: both taint examples give the
// same timeline, and without the taint zone b keeps its evicted pods
// Terminating and its volumes attached to the end.
func TestStatefulSetZoneOutageTimelines(t *testing.T) {
	if testing.Short() {
		t.Skip("long example")
	}
	const dir = "../../examples/sim/"
	taint, noTimeout := run(t, dir+"statefulset-zone-outage-taint.txt", 1), run(t, dir+"statefulset-zone-outage-taint-no-timeout.txt", 1)
	if !bytes.Equal(taint.csv, noTimeout.csv) {
		t.Errorf("the taint examples' timelines differ:\n%s", cmp.Diff(string(taint.csv), string(noTimeout.csv)))
	}
	last := map[string]timeline.Row{}
	for _, r := range run(t, dir+"statefulset-zone-outage.txt", 1).rows {
		last[r.Zone] = r
	}
	if b := last["b"]; b.PodsTerminating != 2 || b.VolumesAttached != 2 || b.VolumesForceDetached != 0 || b.StatefulSetReady != 4 {
		t.Errorf("zone b at the end without the taint: %+v; want 2 pods terminating, 2 volumes attached, none force-detached, 4 replicas ready", b)
	}
	last = map[string]timeline.Row{}
	for _, r := range taint.rows {
		last[r.Zone] = r
	}
	if a, b := last["a"], last["b"]; b.PodsTerminating != 0 || b.VolumesAttached != 0 || b.VolumesForceDetached != 2 || a.Pods != 4 || a.StatefulSetReady != 6 {
		t.Errorf("at the end with the taint: zone a %+v, zone b %+v; want zone b emptied, its 2 volumes force-detached, 4 pods in zone a, 6 replicas ready", a, b)
	}
}
