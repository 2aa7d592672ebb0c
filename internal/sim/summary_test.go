package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"knode/internal/sim/timeline"
)

// The summary reports a zone's taint and eviction times as they happened,
// not rounded up to the next 10 s sample: the first taint is the very
// time the NoExecute taint carries as timeAdded, and the pods, which
// tolerate it for the default 300 s, leave exactly 300 s later.
func TestSummaryTimesAreExact(t *testing.T) {
	w := silenceOne(t, 10, 7*time.Minute)
	var added time.Duration
	for _, taint := range w.mirror.nodes["a-1"].Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoExecute && taint.TimeAdded != nil {
			added = taint.TimeAdded.Sub(Epoch)
		}
	}
	if added == 0 {
		t.Fatalf("silent a-1 has taints %v, want a NoExecute one", w.mirror.nodes["a-1"].Spec.Taints)
	}
	if added%(10*time.Second) == 0 {
		t.Fatalf("the taint came at %v, on a sample; the test needs one between samples", added)
	}
	zones := w.Summary()
	if len(zones) != 1 {
		t.Fatalf("Summary = %+v, want zone a alone", zones)
	}
	a := zones[0]
	if a.MaxTainted != 1 || a.FirstTainted != added || a.AllTainted != added {
		t.Errorf("zone a: %d tainted, first at %v, all at %v; want 1 at %v", a.MaxTainted, a.FirstTainted, a.AllTainted, added)
	}
	if a.Evicted == 0 || a.FirstEvicted != added+300*time.Second {
		t.Errorf("zone a: %d evicted, first at %v; want the pods of a-1 at %v", a.Evicted, a.FirstEvicted, added+300*time.Second)
	}
}

// Shutdowns appear in a zone's line only when the zone had some: the most
// nodes shutting down or off at once, and the pods the shutdowns ended.
func TestWriteSummaryShutdowns(t *testing.T) {
	rows := []timeline.Row{
		{TimeS: 0, Zone: "a", Nodes: 2, Ready: 2, Pods: 4},
		{TimeS: 0, Zone: "b", Nodes: 2, Ready: 2, Pods: 4},
		{TimeS: 10, Zone: "a", Nodes: 2, Ready: 2, Pods: 4},
		{TimeS: 10, Zone: "b", Nodes: 2, Ready: 1, NotReady: 1, Pods: 2, ShuttingDown: 1, PodsShutDown: 2},
		{TimeS: 20, Zone: "a", Nodes: 2, Ready: 2, Pods: 4},
		{TimeS: 20, Zone: "b", Nodes: 2, Ready: 1, Unknown: 1, Pods: 0, ShuttingDown: 2, PodsShutDown: 4},
		{TimeS: 30, Zone: "b", Nodes: 2, Ready: 2, Pods: 0, PodsShutDown: 4},
	}
	var b strings.Builder
	if err := WriteSummary(&b, Summarize(rows)); err != nil {
		t.Fatal(err)
	}
	want := "zone a: 2 nodes, at most 0 not Ready, none tainted NoExecute, no pod evicted, 4 pods running at the end\n" +
		"zone b: 2 nodes, at most 1 not Ready, none tainted NoExecute, no pod evicted, at most 2 shutting down or off, 4 pods ended by the shutdowns, 0 pods running at the end\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// Rejected pods appear in a zone's line only when the zone had some, with
// their reasons in reason order when the World observed them.
func TestWriteSummaryRejections(t *testing.T) {
	rows := []timeline.Row{
		{TimeS: 0, Zone: "a", Nodes: 2, Ready: 2, Pods: 4},
		{TimeS: 0, Zone: "b", Nodes: 2, Ready: 2, Pods: 3, PodsRejected: 1},
		{TimeS: 0, Zone: "c", Nodes: 1, Ready: 1, Pods: 1, PodsRejected: 2},
		{TimeS: 10, Zone: "b", Nodes: 2, Ready: 2, Pods: 3, PodsRejected: 3},
	}
	zones := Summarize(rows)
	zones[1].Rejections = map[string]int{"TopologyAffinityError": 2, "OutOfcpu": 1}
	var b strings.Builder
	if err := WriteSummary(&b, zones); err != nil {
		t.Fatal(err)
	}
	want := "zone a: 2 nodes, at most 0 not Ready, none tainted NoExecute, no pod evicted, 4 pods running at the end\n" +
		"zone b: 2 nodes, at most 0 not Ready, none tainted NoExecute, no pod evicted, 3 pods rejected at admission (OutOfcpu 1, TopologyAffinityError 2), 3 pods running at the end\n" +
		"zone c: 1 nodes, at most 0 not Ready, none tainted NoExecute, no pod evicted, 2 pods rejected at admission, 1 pods running at the end\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}
