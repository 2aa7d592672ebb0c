// Package metrics holds what knode's components share about their
// Prometheus series: registering a component's collectors all at once.
package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register adds every collector to r, or none: on a failure it takes back
// the ones it added. nil r registers nothing. A collector r already holds
// (a second component on one registry) is an error wrapping both already
// and prometheus' AlreadyRegisteredError; any other failure is returned
// as it is.
func Register(r prometheus.Registerer, already error, collectors ...prometheus.Collector) error {
	if r == nil {
		return nil
	}
	for i, c := range collectors {
		if err := r.Register(c); err != nil {
			for _, done := range collectors[:i] {
				r.Unregister(done)
			}
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return errors.Join(already, err)
			}
			return err
		}
	}
	return nil
}
