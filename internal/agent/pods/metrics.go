package pods

import (
	"github.com/prometheus/client_golang/prometheus"

	"knode/internal/agent/runtime"
)

// Upstream's kubelet metrics of what runs, read from the runtime at each
// scrape.
var (
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods",
		"Number of pods that have a running pod sandbox", nil, nil)
	runningContainersDesc = prometheus.NewDesc("kubelet_running_containers",
		"Number of containers currently running", []string{"container_state"}, nil)
)

// Collector reports kubelet_running_pods (pods with a running container;
// knode's process runtime has no sandbox to count) and
// kubelet_running_containers by container_state: running, exited, and
// created (a container the runtime made that waits to run again).
func (w *Worker) Collector() prometheus.Collector { return runningCollector{w.cfg.Runtime} }

type runningCollector struct{ rt runtime.Runtime }

func (c runningCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningContainersDesc
}

func (c runningCollector) Collect(ch chan<- prometheus.Metric) {
	pods := 0
	states := map[string]int{"running": 0, "exited": 0, "created": 0}
	for _, ps := range c.rt.ListPods() {
		if ps.Running() {
			pods++
		}
		for _, list := range [][]runtime.ContainerStatus{ps.InitContainers, ps.Containers} {
			for _, cs := range list {
				switch {
				case cs.State.Running != nil:
					states["running"]++
				case cs.State.Terminated != nil:
					states["exited"]++
				case cs.ID != "":
					states["created"]++
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(pods))
	for state, n := range states {
		ch <- prometheus.MustNewConstMetric(runningContainersDesc, prometheus.GaugeValue, float64(n), state)
	}
}
