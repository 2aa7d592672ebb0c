package endpoints

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"knode/internal/registry/registrytest"
)

var fuzzNow = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// fuzzSeeds are Endpoints manifests that reach most branches: the
// apiserver's own endpoints, headless and multi-port subsets, every kind
// of special and malformed IP, bad names and protocols, and ports at and
// past their bounds.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{"name":"kubernetes","namespace":"default"},
	  "subsets":[{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],"ports":[{"name":"https","port":6443,"protocol":"TCP"}]}]}`,
	`{"subsets":[{"addresses":[{"ip":"fd00::1","hostname":"web-0","nodeName":"node-1",
	   "targetRef":{"kind":"Pod","namespace":"ns","name":"web-0","uid":"u"}}],
	  "notReadyAddresses":[{"ip":"010.0.0.1"}],"ports":[{"name":"a","port":1},{"name":"b","port":65535,"protocol":"UDP","appProtocol":"kubernetes.io/h2c"}]},
	 {"addresses":[{"ip":"10.0.0.3"}]}]}`,
	`{"subsets":[{},{"addresses":[{"ip":"127.0.0.1"},{"ip":"::"},{"ip":"169.254.169.254"},{"ip":"ff02::1"},{"ip":"not-an-ip"},{"ip":""}],
	  "notReadyAddresses":[{"ip":"fe80::1","hostname":"Bad_Host","nodeName":""}],
	  "ports":[{"port":0,"protocol":"ICMP"},{"name":"HTTPS","port":70000,"protocol":"","appProtocol":""},{"name":"x","port":-1,"appProtocol":"a b"}]}]}`,
	`{"subsets":[{"addresses":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"},{"ip":"10.0.0.3"},{"ip":"10.0.0.4"}],"ports":[{"name":"a","port":80},{"name":"a","port":81}]}]}`,
}

// FuzzValidate drives the Endpoints rules as the REST layer does (see
// registrytest.Fuzz). Beyond the harness's checks: after Default no port
// is left without a protocol, and every table cell is a string.
func FuzzValidate(f *testing.F) {
	registrytest.Fuzz(f, Kind(), fuzzSeeds, registrytest.FuzzOptions{
		Extra: func(t *testing.T, obj runtime.Object) {
			ep := obj.(*corev1.Endpoints)
			for i, ss := range ep.Subsets {
				for j, p := range ss.Ports {
					if p.Protocol == "" {
						t.Fatalf("subsets[%d].ports[%d] has no protocol after Default", i, j)
					}
				}
			}
			for i, cell := range row(ep, fuzzNow) {
				if _, ok := cell.(string); !ok {
					t.Fatalf("cell %d is %T, not a string", i, cell)
				}
			}
		},
	})
}
