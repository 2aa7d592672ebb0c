package podgc

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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

// register adds the series to r; nil r registers nothing. A series r
// already holds is an error wrapping ErrMetricsRegistered. On an error
// nothing stays registered.
func (m *metrics) register(r prometheus.Registerer) error {
	if r == nil {
		return nil
	}
	collectors := []prometheus.Collector{m.deletions, m.errors}
	for i, c := range collectors {
		if err := r.Register(c); err != nil {
			for _, done := range collectors[:i] {
				r.Unregister(done)
			}
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				return errors.Join(ErrMetricsRegistered, err)
			}
			return err
		}
	}
	return nil
}
