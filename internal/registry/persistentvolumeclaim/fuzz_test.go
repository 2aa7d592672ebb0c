package persistentvolumeclaim

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// fuzzSeeds are claim manifests that reach most branches: selectors, data
// sources of every shape, the beta class annotation, huge and negative
// quantities, and a status with resize bookkeeping.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{"name":"data","namespace":"default"},"spec":{"accessModes":["ReadWriteOnce"],
	  "resources":{"requests":{"storage":"1Gi"}},"storageClassName":"standard"}}`,
	`{"metadata":{"annotations":{"volume.beta.kubernetes.io/storage-class":"gold"}},
	  "spec":{"accessModes":["ReadWriteOncePod","ReadOnlyMany","X"],"resources":{"requests":{"storage":"1e9999999","cpu":"-1"}},
	  "selector":{"matchLabels":{"a":"bad value!"},"matchExpressions":[{"key":"k","operator":"In","values":["bad value!"]},{"key":"","operator":"Near"}]},
	  "volumeMode":"Raw","volumeAttributesClassName":"","storageClassName":"Bad_Class"}}`,
	`{"spec":{"accessModes":["ReadWriteMany"],"resources":{"requests":{"storage":"-1"}},
	  "dataSource":{"kind":"Secret","name":""},"dataSourceRef":{"apiGroup":"Bad_Group","kind":"","name":"x","namespace":"Other_NS"}}}`,
	`{"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"0"}},
	  "dataSource":{"apiGroup":"snapshot.storage.k8s.io","kind":"VolumeSnapshot","name":"s"},"volumeName":"pv-1"},
	 "status":{"phase":"Bound","accessModes":["ReadWriteOnce"],"capacity":{"storage":"-1Gi"},
	  "allocatedResources":{"storage":"2Gi","bad key!":"1","cpu":"1"},
	  "allocatedResourceStatuses":{"storage":"Resizing","kubernetes.io/x":"NodeResizePending"},
	  "currentVolumeAttributesClassName":"gold","modifyVolumeStatus":{"status":"Pending"}}}`,
}

// longExponent finds quantities like "1e-99999999", which take minutes
// to decode inside apimachinery before any code of this package runs.
var longExponent = regexp.MustCompile(`[eE]-[0-9]{5,}`)

func decodeFuzzPVC(data []byte) (*corev1.PersistentVolumeClaim, bool) {
	if longExponent.Match(data) {
		return nil, false
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal(data, pvc); err != nil {
		return nil, false
	}
	return pvc, true
}

// FuzzValidate feeds arbitrary JSON through every Kind function in the
// order the REST layer calls them, both as a new claim and as an update of
// the first claim the fuzzer decodes into a stored one. Nothing may panic,
// old objects are never changed, a no-op update never breaks an update
// rule, and a table row always has one cell per column.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(fuzzSeeds[1]))
	}
	k := Kind()
	now := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data, oldData []byte) {
		pvc, ok := decodeFuzzPVC(data)
		if !ok {
			return
		}
		stored, ok := decodeFuzzPVC(oldData)
		if !ok {
			return
		}
		raw := pvc.DeepCopy()

		k.Default(pvc)
		k.PrepareForCreate(pvc)
		createErrs := k.Validate(pvc)

		// Any update of any stored claim.
		k.Default(stored)
		before := stored.DeepCopy()
		upd := raw.DeepCopy()
		k.Default(upd)
		k.PrepareForUpdate(upd, stored)
		_ = k.ValidateUpdate(upd, stored)
		st := raw.DeepCopy()
		k.Default(st)
		k.Status.PrepareForUpdate(st, stored)
		_ = k.Status.ValidateUpdate(st, stored)
		if !apiequality.Semantic.DeepEqual(stored, before) {
			t.Fatalf("an update changed the stored object")
		}

		// A no-op update of the created claim.
		old := pvc.DeepCopy()
		same := old.DeepCopy()
		k.Default(same)
		k.PrepareForUpdate(same, old)
		errs := k.ValidateUpdate(same, old)
		for _, e := range errs {
			if strings.Contains(e.Detail, "immutable") || strings.Contains(e.Detail, "update") || strings.Contains(e.Detail, "less than") {
				t.Fatalf("a no-op update broke an update rule: %v", e)
			}
		}
		if len(createErrs) == 0 && len(errs) != 0 {
			t.Fatalf("a no-op update of a valid claim was refused: %v", errs)
		}

		if cells := k.Row(pvc, now); len(cells) != len(k.Columns) {
			t.Fatalf("row has %d cells for %d columns", len(cells), len(k.Columns))
		}
		_ = k.Fields(pvc)
	})
}
