package sim

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/sim/script"
)

// TestLanesKeepTheOutcome runs scenarios one callback at a time and in
// batches on several goroutines: the timelines must match, and so must
// every Node, Lease, Pod, claim, volume, attachment and StatefulSet, apart
// from the revisions they were written at.
func TestLanesKeepTheOutcome(t *testing.T) {
	for _, path := range []string{"testdata/stop-start.txt", "../../examples/sim/zone-outage.txt", "../../examples/sim/rolling-reboot.txt", "../../examples/sim/zone-outage-volumes.txt", "../../examples/sim/statefulset-zone-outage-taint.txt", "../../examples/sim/cpu-manager-numa.txt"} {
		t.Run(path, func(t *testing.T) {
			serial := replayWorld(t, path, Config{Seed: 3, Batch: 1, Workers: 1})
			lanes := replayWorld(t, path, Config{Seed: 3, Workers: 4})
			if serial.batches != 0 {
				t.Fatalf("Batch 1 ran %d batches", serial.batches)
			}
			if lanes.batched < 2*lanes.batches || lanes.batches < 10 {
				t.Fatalf("only %d callbacks in %d batches: the scenario does not exercise lanes", lanes.batched, lanes.batches)
			}
			if diff := cmp.Diff(serial.Samples(), lanes.Samples()); diff != "" {
				t.Errorf("timeline (-serial +lanes):\n%s", diff)
			}
			if diff := cmp.Diff(objects(t, serial), objects(t, lanes)); diff != "" {
				t.Errorf("objects (-serial +lanes):\n%s", diff)
			}
		})
	}
}

func replayWorld(t *testing.T, path string, cfg Config) *World {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := script.Parse(path, f)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Run(context.Background(), sc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// objects is every object the mirror holds, by kind and key, as indented
// JSON without its revision, and with every UID (random on each run)
// replaced by "UID".
func objects(t *testing.T, w *World) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(key string, obj runtime.Object) {
		obj = obj.DeepCopyObject()
		accessor, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		accessor.SetResourceVersion("")
		data, err := json.MarshalIndent(obj, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		out[key] = uid.ReplaceAllString(string(data), "UID")
	}
	for name, n := range w.mirror.nodes {
		add("node/"+name, n)
	}
	for name, l := range w.mirror.leases {
		add("lease/"+name, l)
	}
	for k, p := range w.mirror.pods {
		add("pod/"+k.String(), p)
	}
	for k, c := range w.mirror.claims {
		add("claim/"+k.String(), c)
	}
	for name, v := range w.mirror.volumes {
		add("volume/"+name, v)
	}
	for k, set := range w.mirror.sets {
		add("statefulset/"+k.String(), set)
	}
	for name, va := range w.mirror.attachments {
		add("attachment/"+name, va)
	}
	return out
}

var uid = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// recorder is an observer that notes what it hears.
type recorder struct{ heard []string }

func (r *recorder) nodeChanged(old, cur *corev1.Node) {
	verb, n := "update", cur
	switch {
	case old == nil:
		verb = "add"
	case cur == nil:
		verb, n = "delete", old
	}
	r.heard = append(r.heard, verb+" node "+n.Name)
}

func (r *recorder) podChanged(old, cur *corev1.Pod) {
	p := cur
	if p == nil {
		p = old
	}
	r.heard = append(r.heard, "pod "+p.Name+" on "+p.Spec.NodeName)
}

func (r *recorder) claimChanged(_, _ *corev1.PersistentVolumeClaim) {}

func (r *recorder) volumeChanged(_, _ *corev1.PersistentVolume) {}

func (r *recorder) attachmentChanged(_, _ *storagev1.VolumeAttachment) {}

func (r *recorder) setChanged(_, _ *appsv1.StatefulSet) {}

func (r *recorder) revisionChanged() {}

// After a batch the mirror hands on changes ordered by the rank of their
// node, each node's own changes in revision order, whatever order the
// revisions came in.
func TestRefreshOrderedByNode(t *testing.T) {
	ctx := context.Background()
	w, err := New(ctx, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	if err := w.build(); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w.mirror.observer = rec
	nodes := w.admin.CoreV1().Nodes()
	for _, name := range []string{"n-b", "n-a"} {
		if _, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: metav1.NamespaceDefault},
		Spec:       corev1.PodSpec{NodeName: "n-a", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	if _, err := w.admin.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := nodes.Get(ctx, "n-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Labels = map[string]string{"x": "y"}
	if _, err := nodes.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{"n-a": 0, "n-b": 1}
	if err := w.mirror.refreshOrdered(func(node string) int { return rank[node] }); err != nil {
		t.Fatal(err)
	}
	want := []string{"add node n-a", "pod p on n-a", "add node n-b", "update node n-b"}
	if diff := cmp.Diff(want, rec.heard); diff != "" {
		t.Errorf("heard (-want +got):\n%s", diff)
	}
}

// TestDirectKeepsTheOutcome runs scenarios with the agents' renewals and
// status patches made in process (direct.go) and with every request on the
// wire: the timelines must match, and so must every object. The volumes
// example's status patches carry volumesInUse.
func TestDirectKeepsTheOutcome(t *testing.T) {
	for _, path := range []string{"testdata/stop-start.txt", "../../examples/sim/zone-outage-volumes.txt"} {
		t.Run(path, func(t *testing.T) {
			wire := replayWorld(t, path, Config{Seed: 5, WireOnly: true})
			inProcess := replayWorld(t, path, Config{Seed: 5})
			if n := wire.directCalls.Load(); n != 0 {
				t.Fatalf("WireOnly made %d requests in process", n)
			}
			// At least 6 nodes renew every 10 s for 6 minutes, most of
			// them all along.
			if n := inProcess.directCalls.Load(); n < 100 {
				t.Fatalf("only %d requests made in process: the direct path is not taken", n)
			}
			if diff := cmp.Diff(wire.Samples(), inProcess.Samples()); diff != "" {
				t.Errorf("timeline (-wire +in process):\n%s", diff)
			}
			if diff := cmp.Diff(objects(t, wire), objects(t, inProcess)); diff != "" {
				t.Errorf("objects (-wire +in process):\n%s", diff)
			}
		})
	}
}
