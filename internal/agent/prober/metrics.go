package prober

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	knodemetrics "knode/internal/metrics"
)

// ErrMetricsRegistered is returned by New when the Registerer already
// holds prober_probe_total.
var ErrMetricsRegistered = errors.New("prober: metrics already registered")

// metrics is upstream's prober_probe_total.
type metrics struct {
	probes *prometheus.CounterVec
}

func newMetrics() *metrics {
	return &metrics{probes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober",
		Name:      "probe_total",
		Help:      "[ALPHA] Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})}
}

// register adds the series to r (see metrics.Register).
func (m *metrics) register(r prometheus.Registerer) error {
	return knodemetrics.Register(r, ErrMetricsRegistered, m.probes)
}

// count adds one probe of kind k on container of pod that ended in v (an
// attempt that errored is not counted, as upstream).
func (m *metrics) count(pod *corev1.Pod, container string, k Kind, v verdict) {
	result := "unknown"
	switch v {
	case verdictSuccess, verdictWarning:
		result = "successful"
	case verdictFailure:
		result = "failed"
	}
	m.probes.WithLabelValues(k.String(), result, container, pod.Name, pod.Namespace, string(pod.UID)).Inc()
}

// forget drops the series of a pod.
func (m *metrics) forget(pod *corev1.Pod) {
	m.probes.DeletePartialMatch(prometheus.Labels{"pod_uid": string(pod.UID)})
}
