package swap

import (
	"github.com/prometheus/client_golang/prometheus"

	"knode/internal/agent/host"
)

// usageDesc is the node's swap usage series, named as upstream's resource
// metrics name it.
var usageDesc = prometheus.NewDesc("node_swap_usage_bytes", "Swap in use on the node (SwapTotal minus SwapFree), in bytes.", nil, nil)

// UsageCollector reports node_swap_usage_bytes, read from memory on every
// scrape. A failed reading reports nothing.
type UsageCollector struct {
	Memory func() (host.Memory, error)
}

// Describe implements prometheus.Collector.
func (c UsageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- usageDesc }

// Collect implements prometheus.Collector.
func (c UsageCollector) Collect(ch chan<- prometheus.Metric) {
	m, err := c.Memory()
	if err != nil {
		return
	}
	used := uint64(0)
	if m.SwapTotal > m.SwapFree {
		used = m.SwapTotal - m.SwapFree
	}
	ch <- prometheus.MustNewConstMetric(usageDesc, prometheus.GaugeValue, float64(used))
}
