package persistentvolumeclaim

import (
	"testing"

	"knode/internal/registry/registrytest"
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

// FuzzValidate drives the claim rules as the REST layer does (see
// registrytest.Fuzz); a no-op update never breaks an update rule.
func FuzzValidate(f *testing.F) {
	registrytest.Fuzz(f, Kind(), fuzzSeeds, registrytest.FuzzOptions{NoOpForbidden: []string{"immutable", "update", "less than"}})
}
