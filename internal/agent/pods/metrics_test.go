package pods_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
)

// The running pods and containers, as the runtime holds them.
func TestRunningMetrics(t *testing.T) {
	c := newCluster(t, roomy)
	c.create(pod("two", corev1.RestartPolicyAlways, "busybox", "busybox"))
	c.create(pod("done", corev1.RestartPolicyNever, "exit:0@1s"))
	c.sync()
	c.step(2 * time.Second)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.worker.Collector())
	want := `
# HELP kubelet_running_containers Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 0
kubelet_running_containers{container_state="exited"} 1
kubelet_running_containers{container_state="running"} 2
# HELP kubelet_running_pods Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
