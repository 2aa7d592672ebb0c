package sim

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/sim/script"
)

// TestLanesKeepTheOutcome runs scenarios one callback at a time and in
// batches on several goroutines: the timelines must match, and so must
// every Node, Lease and Pod, apart from the revisions they were written at.
func TestLanesKeepTheOutcome(t *testing.T) {
	for _, path := range []string{"testdata/stop-start.txt", "../../examples/sim/zone-outage.txt"} {
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
	return out
}

var uid = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
