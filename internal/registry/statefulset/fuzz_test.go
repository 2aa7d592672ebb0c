package statefulset

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/registry/persistentvolume"
	"knode/internal/registry/registrytest"
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

// FuzzValidate drives the StatefulSet rules as the REST layer does (see
// registrytest.Fuzz), and the scale rules on what was created.
func FuzzValidate(f *testing.F) {
	registrytest.Fuzz(f, Kind(), fuzzSeeds, registrytest.FuzzOptions{
		Equal: persistentvolume.Semantic.DeepEqual,
		Extra: func(t *testing.T, obj runtime.Object) {
			k := Kind()
			_, _, _ = k.Scale.Get(obj)
			k.Scale.Set(obj, 3)
		},
	})
}
