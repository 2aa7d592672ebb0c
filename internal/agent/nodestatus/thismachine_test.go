package nodestatus

import (
	"encoding/json"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/agent/host"
	"knode/internal/agent/host/linux"
)

// TestThisMachine runs the real Linux host through every setter, as the
// agent will, and checks the result for sanity.
func TestThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	h := linux.New(linux.Config{})
	name, err := h.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	facts, err := host.Snapshot(h, t.TempDir())
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	cfg := baseConfig()
	cfg.Hostname = name
	node := newNode()
	if err := Apply(Setters(cfg), node, Facts{Host: facts}, t0); err != nil {
		// A sandbox without a default route cannot pick an address; the
		// rest must still be right.
		t.Logf("Apply: %v", err)
	}
	if c := node.Status.Capacity[corev1.ResourceCPU]; c.Sign() <= 0 {
		t.Errorf("cpu capacity %v", &c)
	}
	if m := node.Status.Allocatable[corev1.ResourceMemory]; m.Sign() <= 0 {
		t.Errorf("allocatable memory %v", &m)
	}
	if ready := findCondition(node.Status.Conditions, corev1.NodeReady); ready == nil || ready.Status != corev1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", ready)
	}
	if node.Status.NodeInfo.BootID == "" || node.Status.NodeInfo.KernelVersion == "" {
		t.Errorf("nodeInfo = %+v", node.Status.NodeInfo)
	}
	b, _ := json.MarshalIndent(node.Status, "", "  ")
	t.Logf("status on this machine:\n%s", b)
}
