package sim

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
