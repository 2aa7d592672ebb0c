package podgc

import (
	"github.com/prometheus/client_golang/prometheus"

	knodemetrics "knode/internal/metrics"
)

// metrics are upstream's pod_gc_collector series, both labelled by the
// pod's namespace and the Reason.
type metrics struct {
	// deletions counts force deletions attempted, failed or not.
	deletions *prometheus.CounterVec
	// errors counts force deletions that failed.
	errors *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "pod_gc_collector",
			Name:      "force_delete_pods_total",
			Help:      "[ALPHA] Number of pods that are being forcefully deleted since the Pod GC Controller started.",
		}, []string{"namespace", "reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "pod_gc_collector",
			Name:      "force_delete_pod_errors_total",
			Help:      "[ALPHA] Number of errors encountered when forcefully deleting the pods since the Pod GC Controller started.",
		}, []string{"namespace", "reason"}),
	}
}

// register adds the series to r (see metrics.Register).
func (m *metrics) register(r prometheus.Registerer) error {
	return knodemetrics.Register(r, ErrMetricsRegistered, m.deletions, m.errors)
}
