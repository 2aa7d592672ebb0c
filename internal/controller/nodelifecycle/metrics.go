package nodelifecycle

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, as upstream's node_collector subsystem has them.
const (
	MetricZoneHealth         = "node_collector_zone_health"
	MetricZoneSize           = "node_collector_zone_size"
	MetricUnhealthyNodes     = "node_collector_unhealthy_nodes_in_zone"
	MetricEvictionsTotal     = "node_collector_evictions_total"
	MetricAllNodesHealthTime = "node_collector_update_all_nodes_health_duration_seconds"
)

type metrics struct {
	zoneHealth *prometheus.GaugeVec
	zoneSize   *prometheus.GaugeVec
	unhealthy  *prometheus.GaugeVec
	evictions  *prometheus.CounterVec
	passTime   prometheus.Histogram
}

// newMetrics builds the controller's metrics and registers them on reg
// (nil: not registered anywhere).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		zoneHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricZoneHealth,
			Help: "Percentage of the zone's nodes that are Ready (100 for an empty zone).",
		}, []string{"zone"}),
		zoneSize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricZoneSize,
			Help: "Nodes counted in the zone.",
		}, []string{"zone"}),
		unhealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricUnhealthyNodes,
			Help: "Nodes in the zone whose Ready condition is not True.",
		}, []string{"zone"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricEvictionsTotal,
			Help: "NoExecute taints applied through the zone's rate-limited queue since this controller started.",
		}, []string{"zone"}),
		passTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricAllNodesHealthTime,
			Help:    "Time one monitor pass over every node took, in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.zoneHealth, m.zoneSize, m.unhealthy, m.evictions, m.passTime} {
		if err := reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if errors.As(err, &dup) {
				return nil, fmt.Errorf("nodelifecycle: metrics already registered (one controller per registry): %w", err)
			}
			return nil, fmt.Errorf("nodelifecycle: registering metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) reportZones(zones []ZoneReport) {
	for _, z := range zones {
		m.zoneSize.WithLabelValues(z.Zone).Set(float64(z.Size))
		m.zoneHealth.WithLabelValues(z.Zone).Set(z.Health)
		m.unhealthy.WithLabelValues(z.Zone).Set(float64(z.Unhealthy))
	}
}
