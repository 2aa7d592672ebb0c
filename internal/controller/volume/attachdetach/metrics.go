package attachdetach

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	knodemetrics "knode/internal/metrics"
)

// ForcedDetachesMetric is the full name of the forced-detach counter, as
// kube-controller-manager exposes it since the reason label was added
// (1.28): upstream declares it with subsystem "attach_detach_controller"
// and name "attachdetach_controller_forced_detaches".
const ForcedDetachesMetric = "attach_detach_controller_attachdetach_controller_forced_detaches"

// ErrMetricsRegistered is wrapped by New when Config.Metrics already holds
// the controller's series (for example a second controller on one
// registry).
var ErrMetricsRegistered = errors.New("attachdetach: metrics already registered")

// metrics are upstream's attach/detach controller series.
type metrics struct {
	// forced counts detaches started without verifying the unmount, by
	// reason ("timeout" or "out-of-service").
	forced *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		forced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "attach_detach_controller",
			Name:      "attachdetach_controller_forced_detaches",
			Help:      "[ALPHA] Number of times the A/D Controller performed a forced detach",
		}, []string{"reason"}),
	}
}

// register adds the series to r (see metrics.Register).
func (m *metrics) register(r prometheus.Registerer) error {
	return knodemetrics.Register(r, ErrMetricsRegistered, m.forced)
}
