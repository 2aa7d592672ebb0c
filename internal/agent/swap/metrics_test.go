package swap

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"knode/internal/agent/host"
)

func TestUsageCollector(t *testing.T) {
	mem := host.Memory{SwapTotal: 3 << 30, SwapFree: 1 << 30}
	var readErr error
	reg := prometheus.NewRegistry()
	reg.MustRegister(UsageCollector{Memory: func() (host.Memory, error) { return mem, readErr }})
	gather := func() map[string]float64 {
		t.Helper()
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				out[f.GetName()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	if got := gather(); len(got) != 1 || got["node_swap_usage_bytes"] != 2<<30 {
		t.Errorf("series = %v, want node_swap_usage_bytes 2Gi", got)
	}
	readErr = errors.New("no meminfo")
	if got := gather(); len(got) != 0 {
		t.Errorf("after a failed reading: %v; want no series", got)
	}
}
