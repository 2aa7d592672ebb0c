package cm_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/agent/cm"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/host/fake"
)

// TestWorkerHooksSync: Sync reports a change of the shared pool once, and
// again when the reconcile period has passed; a pod the worker no longer
// holds is released.
func TestWorkerHooksSync(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newManager(t, cm.Config{Topology: fake.UniformTopology(2, 8<<30), CPUManager: cpumanager.Config{Policy: cpumanager.PolicyStatic, ReservedSystemCPUs: "0"}})
	hooks := &cm.WorkerHooks{Manager: m, Clock: clk, Reconcile: 10 * time.Second, Logger: quiet}
	if !hooks.Sync(nil) {
		t.Error("the first Sync reports no change")
	}
	if hooks.Sync(nil) {
		t.Error("a Sync with nothing new reports a change")
	}
	pod := guaranteed("g", "1")
	if _, _, ok := hooks.Admit(pod); !ok {
		t.Fatal("admission failed")
	}
	if !hooks.Sync([]types.UID{pod.UID}) {
		t.Error("Sync after an exclusive allocation reports no change")
	}
	if got := cpusOf(t, m, pod, 0); got != "1" {
		t.Errorf("cpuset = %q, want 1", got)
	}
	clk.Step(9 * time.Second)
	if hooks.Sync([]types.UID{pod.UID}) {
		t.Error("Sync before the reconcile period reports a change")
	}
	clk.Step(time.Second)
	if !hooks.Sync([]types.UID{pod.UID}) {
		t.Error("Sync after the reconcile period reports no change")
	}
	// The worker no longer holds the pod: its CPU goes back.
	if !hooks.Sync(nil) {
		t.Error("Sync that released a stale pod reports no change")
	}
	if got := cpusOf(t, m, bestEffort("b"), 0); got != "0-1" {
		t.Errorf("shared pool = %q after the release, want 0-1", got)
	}
}

// TestWorkerHooksSyncNonePolicy: without the static CPU manager there is
// nothing to reconcile: after the first Sync, time passing is no change.
func TestWorkerHooksSyncNonePolicy(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newManager(t, cm.Config{Topology: fake.UniformTopology(2, 8<<30)})
	hooks := &cm.WorkerHooks{Manager: m, Clock: clk, Reconcile: 10 * time.Second, Logger: quiet}
	if !hooks.Sync(nil) {
		t.Error("the first Sync reports no change")
	}
	clk.Step(time.Minute)
	if hooks.Sync(nil) {
		t.Error("a Sync a minute later reports a change with the none policy")
	}
}
