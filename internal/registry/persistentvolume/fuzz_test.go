package persistentvolume

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// fuzzSeeds are volume manifests that reach most branches: every source
// this package checks, two sources at once, inline-only fields, node
// affinity of every shape, odd quantities and a full status.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{"name":"pv1"},"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
	  "csi":{"driver":"hostpath.csi.knode.io","volumeHandle":"h","nodePublishSecretRef":{"name":"s","namespace":"n"}},
	  "storageClassName":"standard","claimRef":{"namespace":"default","name":"data"}}}`,
	`{"spec":{"capacity":{"storage":"-1","cpu":"1e9999999"},"accessModes":["ReadWriteOncePod","ReadOnlyMany","X"],
	  "persistentVolumeReclaimPolicy":"Recycle","hostPath":{"path":"/","type":"Pipe"},"nfs":{"server":"","path":"a/../b"},
	  "local":{"path":".."},"flexVolume":{"driver":"f"},"volumeMode":"Raw","volumeAttributesClassName":""}}`,
	`{"metadata":{"annotations":{"volume.beta.kubernetes.io/mount-options":"ro","volume.beta.kubernetes.io/storage-class":"x"}},
	  "spec":{"capacity":{"storage":"0"},"accessModes":["ReadWriteMany"],"local":{"path":"/mnt"},
	  "nodeAffinity":{"required":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Gt","values":["1","2"]},
	    {"key":"","operator":"Near"},{"key":"z","operator":"In","values":["bad value!"]}],
	    "matchFields":[{"key":"metadata.name","operator":"NotIn","values":["Bad_Node"]},{"key":"x","operator":"Exists"}]}]}}}}`,
	`{"spec":{"nodeAffinity":{},"iscsi":{},"rbd":{},"csi":{"driver":"UPPER.case"}},
	  "status":{"phase":"Bound","reason":"r","message":"m","lastPhaseTransitionTime":"2024-01-01T00:00:00Z"}}`,
	`{"spec":{"nodeAffinity":{"required":{"nodeSelectorTerms":[]}},"cephfs":{"monitors":["m"]},"glusterfs":{},"azureDisk":{}}}`,
}

// longExponent finds quantities like "1e-99999999", which take minutes
// to decode inside apimachinery before any code of this package runs.
var longExponent = regexp.MustCompile(`[eE]-[0-9]{5,}`)

func decodeFuzzPV(data []byte) (*corev1.PersistentVolume, bool) {
	if longExponent.Match(data) {
		return nil, false
	}
	pv := &corev1.PersistentVolume{}
	if err := json.Unmarshal(data, pv); err != nil {
		return nil, false
	}
	return pv, true
}

// FuzzValidate feeds arbitrary JSON through every Kind function in the
// order the REST layer calls them. Nothing may panic, old objects are
// never changed, an update that changes nothing is accepted when the
// object is valid, and a table row always has one cell per column.
func FuzzValidate(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	k := Kind()
	now := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		pv, ok := decodeFuzzPV(data)
		if !ok {
			return
		}
		raw := pv.DeepCopy()

		k.Default(pv)
		k.PrepareForCreate(pv)
		createErrs := k.Validate(pv)
		_ = ValidateSpec(&raw.Spec, SpecOptions{Inline: true}, nil)

		old := pv.DeepCopy()
		before := old.DeepCopy()
		upd := raw.DeepCopy()
		k.Default(upd)
		k.PrepareForUpdate(upd, old)
		_ = k.ValidateUpdate(upd, old)
		st := raw.DeepCopy()
		k.Default(st)
		k.Status.PrepareForUpdate(st, old)
		_ = k.Status.ValidateUpdate(st, old)
		if !apiequality.Semantic.DeepEqual(old, before) {
			t.Fatalf("an update changed the stored object")
		}

		// A no-op update never breaks an update rule, and is accepted
		// when the object was valid on create.
		same := old.DeepCopy()
		k.Default(same)
		k.PrepareForUpdate(same, old)
		errs := k.ValidateUpdate(same, old)
		for _, e := range errs {
			if strings.Contains(e.Detail, "immutable") || strings.Contains(e.Detail, "update") {
				t.Fatalf("a no-op update broke an update rule: %v", e)
			}
		}
		if len(createErrs) == 0 && len(errs) != 0 {
			t.Fatalf("a no-op update of a valid volume was refused: %v", errs)
		}

		if cells := k.Row(pv, now); len(cells) != len(k.Columns) {
			t.Fatalf("row has %d cells for %d columns", len(cells), len(k.Columns))
		}
		_ = k.Fields(pv)
	})
}
