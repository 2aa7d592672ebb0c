package tainteviction

import (
	"github.com/prometheus/client_golang/prometheus"

	knodemetrics "knode/internal/metrics"
)

// metrics are upstream's taint_eviction_controller series.
type metrics struct {
	// deletions counts pods this controller deleted.
	deletions prometheus.Counter
	// latency observes, in seconds, how long after its FireAt each
	// deletion completed.
	latency prometheus.Histogram
}

func newMetrics() *metrics {
	return &metrics{
		deletions: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "taint_eviction_controller",
			Name:      "pod_deletions_total",
			Help:      "[ALPHA] Total number of Pods deleted by TaintEvictionController since its start.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "taint_eviction_controller",
			Name:      "pod_deletion_duration_seconds",
			Help:      "[ALPHA] Latency, in seconds, between the time when a taint effect has been activated for the Pod and its deletion via TaintEvictionController.",
			Buckets:   []float64{0.005, 0.025, 0.1, 0.5, 1, 2.5, 10, 30, 60, 120, 180, 240},
		}),
	}
}

// register adds the series to r (see metrics.Register).
func (m *metrics) register(r prometheus.Registerer) error {
	return knodemetrics.Register(r, ErrMetricsRegistered, m.deletions, m.latency)
}
