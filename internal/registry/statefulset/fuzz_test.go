package statefulset

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"knode/internal/registry/persistentvolume"
)

// fuzzSeeds are StatefulSet manifests that reach most branches: update
// strategies with odd maxUnavailable values, retention policies, selectors
// that do not parse, claim templates that clash with template volumes, and
// a busy status.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{"name":"web","namespace":"ns"},"spec":{"serviceName":"web","selector":{"matchLabels":{"app":"web"}},
	  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx",
	    "volumeMounts":[{"name":"data","mountPath":"/data"}]}]}},
	  "volumeClaimTemplates":[{"metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}`,
	`{"metadata":{"name":"a.b","generateName":"x.y-"},"spec":{"replicas":-1,"minReadySeconds":-2,"ordinals":{"start":-3},
	  "revisionHistoryLimit":-4,"serviceName":"Bad_Name","podManagementPolicy":"Random",
	  "updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":-1,"maxUnavailable":"101%"}},
	  "persistentVolumeClaimRetentionPolicy":{"whenDeleted":"Keep","whenScaled":""},
	  "selector":{"matchExpressions":[{"key":"k","operator":"Near","values":["v"]}]},
	  "template":{"spec":{"restartPolicy":"Never","activeDeadlineSeconds":5,"containers":[{"name":"c","image":"x","resources":{"limits":{"cpu":"1e99999999"}}}],
	    "volumes":[{"name":"data"},{"name":"data"}]}},
	  "volumeClaimTemplates":[{"metadata":{"name":""}},{"metadata":{"name":"data"},"spec":{"resources":{"requests":{"storage":"1e99999999"},"limits":{"storage":"0e99999999"}},
	    "volumeMode":"Odd","dataSource":{"kind":"Secret","name":""}}},{"metadata":{"name":"data"}}]},
	 "status":{"replicas":1,"readyReplicas":2,"currentReplicas":-1,"updatedReplicas":3,"availableReplicas":4,
	  "observedGeneration":-1,"collisionCount":-1}}`,
	`{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":{"maxUnavailable":0}},"selector":{}}}`,
	`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"x%"}},"selector":{"matchLabels":{"a":"b"}}},
	 "status":{"collisionCount":3}}`,
}

// longExponent finds quantities like "1e-99999999", which take minutes to
// decode inside apimachinery before any code of this package runs.
var longExponent = regexp.MustCompile(`[eE]-[0-9]{5,}`)

func decodeFuzzSTS(data []byte) (*appsv1.StatefulSet, bool) {
	if longExponent.Match(data) {
		return nil, false
	}
	ss := &appsv1.StatefulSet{}
	if err := json.Unmarshal(data, ss); err != nil {
		return nil, false
	}
	return ss, true
}

// FuzzValidate feeds arbitrary JSON through every Kind function in the
// order the REST layer calls them, as a new object and as an update (of
// the main resource and of /status) of a second decoded object. Nothing
// may panic, the stored object is never changed, a no-op update of a valid
// object is accepted, and a table row has one cell per column.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), []byte(fuzzSeeds[1]))
	}
	k := Kind()
	now := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data, oldData []byte) {
		ss, ok := decodeFuzzSTS(data)
		if !ok {
			return
		}
		stored, ok := decodeFuzzSTS(oldData)
		if !ok {
			return
		}
		raw := ss.DeepCopy()

		k.Default(ss)
		k.PrepareForCreate(ss)
		createErrs := k.Validate(ss)

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
		if !persistentvolume.Semantic.DeepEqual(stored, before) {
			t.Fatal("an update changed the stored object")
		}

		same := ss.DeepCopy()
		k.Default(same)
		k.PrepareForUpdate(same, ss)
		if errs := k.ValidateUpdate(same, ss); len(createErrs) == 0 && len(errs) != 0 {
			t.Fatalf("a no-op update of a valid object was refused: %v", errs)
		}

		if cells := k.Row(ss, now); len(cells) != len(k.Columns) {
			t.Fatalf("row has %d cells for %d columns", len(cells), len(k.Columns))
		}
		_ = k.Fields(ss)
		_, _, _ = k.Scale.Get(ss)
		k.Scale.Set(ss, 3)
	})
}
