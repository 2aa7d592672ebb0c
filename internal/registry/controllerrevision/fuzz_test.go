package controllerrevision

import (
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// fuzzSeeds are ControllerRevision manifests: data of every JSON shape,
// negative revisions and owners with odd apiVersions.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{"name":"web-1","namespace":"ns","ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"web","uid":"u","controller":true}]},
	  "data":{"spec":{"template":{"$patch":"replace"}}},"revision":1}`,
	`{"data":null,"revision":-1}`,
	`{"data":[1,"x",null],"revision":9223372036854775807}`,
	`{"data":"text","metadata":{"ownerReferences":[{"apiVersion":"a/b/c","kind":"","name":"n","controller":true}]}}`,
	`{"data":{ "a" : 1 ,"b":[ ]}}`,
}

func decodeFuzzCR(data []byte) (*appsv1.ControllerRevision, bool) {
	cr := &appsv1.ControllerRevision{}
	if err := json.Unmarshal(data, cr); err != nil {
		return nil, false
	}
	return cr, true
}

// FuzzValidate feeds arbitrary JSON through every Kind function, as a new
// revision and as an update of a second decoded one. Nothing may panic,
// the stored object is never changed, an update that keeps the data is
// never refused as a data change, and a table row has one cell per column.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(fuzzSeeds[1]))
	}
	k := Kind()
	now := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data, oldData []byte) {
		cr, ok := decodeFuzzCR(data)
		if !ok {
			return
		}
		stored, ok := decodeFuzzCR(oldData)
		if !ok {
			return
		}
		_ = k.Validate(cr)

		before := stored.DeepCopy()
		_ = k.ValidateUpdate(cr, stored)
		if !apiequality.Semantic.DeepEqual(stored, before) {
			t.Fatal("an update changed the stored object")
		}

		same := stored.DeepCopy()
		same.Revision = cr.Revision
		for _, e := range k.ValidateUpdate(same, stored) {
			if e.Field == "data" {
				t.Fatalf("an update keeping the data was refused: %v", e)
			}
		}

		if cells := k.Row(cr, now); len(cells) != len(k.Columns) {
			t.Fatalf("row has %d cells for %d columns", len(cells), len(k.Columns))
		}
		_ = k.Fields(cr)
	})
}
