package topology

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	knodemetrics "knode/internal/metrics"
)

// ErrMetricsRegistered is returned by New when the Registerer already holds
// one of the topology manager series.
var ErrMetricsRegistered = errors.New("topology: metrics already registered")

// metrics are upstream's kubelet_topology_manager_admission_* series.
type metrics struct {
	// requests counts Admit calls.
	requests prometheus.Counter
	// errors counts rejections by the container and pod scopes.
	errors prometheus.Counter
	// duration observes, in whole milliseconds, how long each Admit took.
	duration prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "topology_manager_admission_requests_total",
			Help:      "[ALPHA] The number of admission requests where resources have to be aligned.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet",
			Name:      "topology_manager_admission_errors_total",
			Help:      "[ALPHA] The number of admission request failures where resources could not be aligned.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet",
			Name:      "topology_manager_admission_duration_ms",
			Help:      "[ALPHA] Duration in milliseconds to serve a pod admission request.",
			Buckets:   prometheus.ExponentialBuckets(.05, 2, 15),
		}),
	}
}

// register adds the series to r (see metrics.Register).
func (m *metrics) register(r prometheus.Registerer) error {
	return knodemetrics.Register(r, ErrMetricsRegistered, m.requests, m.errors, m.duration)
}
