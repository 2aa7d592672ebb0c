package agent_test

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent"
)

// inUseVolumes is a volume manager whose in-use list the test sets; it
// records what the status passes tell it the server holds.
type inUseVolumes struct {
	inUse    []corev1.UniqueVolumeName
	reported [][]corev1.UniqueVolumeName
}

func (v *inUseVolumes) Setup(context.Context, *corev1.Pod) (bool, error)    { return true, nil }
func (v *inUseVolumes) Teardown(context.Context, types.UID) (bool, error)   { return true, nil }
func (v *inUseVolumes) Cleanup(context.Context, func(types.UID) bool) error { return nil }
func (v *inUseVolumes) InUse() []corev1.UniqueVolumeName                    { return slices.Clone(v.inUse) }
func (v *inUseVolumes) ReportedInUse(names []corev1.UniqueVolumeName) {
	v.reported = append(v.reported, slices.Clone(names))
}

// TestVolumesInUseArePosted: a change of the volume manager's in-use list
// is posted by the next pass, sorted, even when that pass would otherwise
// be quiet, and every pass tells the manager what the server holds.
func TestVolumesInUseArePosted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	clk := testingclock.NewFakeClock(t0)
	vols := &inUseVolumes{}
	a := newAgent(t, c, node1Token, "node-1", machine("node-1", node1IP), clk, func(cfg *agent.Config) { cfg.Volumes = vols })
	if done, err := a.TryRegister(ctx); !done || err != nil {
		t.Fatalf("TryRegister = %v, %v", done, err)
	}
	pass := func(what string) {
		t.Helper()
		clk.Step(10 * time.Second)
		if err := a.SyncStatus(ctx); err != nil {
			t.Fatalf("%s: SyncStatus: %v", what, err)
		}
	}
	pass("first pass")
	before := a.Stats()
	pass("nothing changed")
	if a.Stats().QuietPasses != before.QuietPasses+1 {
		t.Fatalf("the pass with nothing changed was not quiet: %+v", a.Stats())
	}

	vols.inUse = []corev1.UniqueVolumeName{"kubernetes.io/csi/d^b", "kubernetes.io/csi/d^a"}
	before = a.Stats()
	pass("two volumes in use")
	if a.Stats().StatusPosts != before.StatusPosts+1 {
		t.Errorf("a new in-use list was not posted: %+v", a.Stats())
	}
	want := []corev1.UniqueVolumeName{"kubernetes.io/csi/d^a", "kubernetes.io/csi/d^b"}
	if got := getNode(t, c, "node-1").Status.VolumesInUse; !slices.Equal(got, want) {
		t.Errorf("volumesInUse = %v, want %v (sorted)", got, want)
	}
	if last := vols.reported[len(vols.reported)-1]; !slices.Equal(last, want) {
		t.Errorf("last ReportedInUse = %v, want what was posted, %v", last, want)
	}

	vols.inUse = nil
	pass("none in use")
	if got := getNode(t, c, "node-1").Status.VolumesInUse; len(got) != 0 {
		t.Errorf("volumesInUse = %v after the volumes left", got)
	}
	if last := vols.reported[len(vols.reported)-1]; len(last) != 0 {
		t.Errorf("last ReportedInUse = %v, want empty", last)
	}
}
