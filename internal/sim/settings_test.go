package sim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"

	"knode/internal/sim"
	"knode/internal/sim/script"
)

func TestSettingsSet(t *testing.T) {
	for _, tc := range []struct {
		name, flag, value string
		wantErr           string
		check             func(sim.Settings) bool
	}{
		{name: "duration", flag: "node-monitor-grace-period", value: "50s", check: func(s sim.Settings) bool { return s.NodeMonitorGracePeriod == 50*time.Second }},
		{name: "rate", flag: "secondary-node-eviction-rate", value: "0", check: func(s sim.Settings) bool { return s.SecondaryNodeEvictionRate == 0 }},
		{name: "kubelet flag", flag: "node-lease-duration-seconds", value: "20", check: func(s sim.Settings) bool { return s.NodeLeaseDurationSeconds == 20 }},
		{name: "unknown flag", flag: "node-grace", value: "1s", wantErr: `unknown setting "node-grace"`},
		{name: "bad syntax", flag: "node-monitor-period", value: "five", wantErr: "node-monitor-period=five: "},
		{name: "not positive", flag: "node-monitor-period", value: "0s", wantErr: "node-monitor-period=0s: must be greater than 0"},
		{name: "negative rate", flag: "node-eviction-rate", value: "-1", wantErr: "node-eviction-rate=-1: must not be negative"},
		{name: "threshold above 1", flag: "unhealthy-zone-threshold", value: "1.5", wantErr: "unhealthy-zone-threshold=1.5: must be greater than 0 and at most 1"},
		{name: "attach/detach flag", flag: "disable-force-detach-on-timeout", value: "true", check: func(s sim.Settings) bool { return s.DisableForceDetachOnTimeout }},
		{name: "attach/detach flag not a bool", flag: "disable-force-detach-on-timeout", value: "sometimes", wantErr: "disable-force-detach-on-timeout=sometimes: "},
		{name: "pod GC threshold", flag: "terminated-pod-gc-threshold", value: "100", check: func(s sim.Settings) bool { return s.TerminatedPodGCThreshold == 100 }},
		{name: "pod GC threshold off", flag: "terminated-pod-gc-threshold", value: "0", check: func(s sim.Settings) bool { return s.TerminatedPodGCThreshold == 0 }},
		{name: "pod GC threshold negative", flag: "terminated-pod-gc-threshold", value: "-1", wantErr: "terminated-pod-gc-threshold=-1: must not be negative (0 turns the deletion of finished pods off)"},
		{name: "pod GC threshold not a number", flag: "terminated-pod-gc-threshold", value: "many", wantErr: "terminated-pod-gc-threshold=many: "},
		{name: "shutdown grace period", flag: "shutdown-grace-period", value: "30s", check: func(s sim.Settings) bool { return s.Shutdown.GracePeriod == 30*time.Second }},
		{name: "shutdown grace period for critical pods", flag: "shutdown-grace-period-critical-pods", value: "10s", check: func(s sim.Settings) bool { return s.Shutdown.CriticalPods == 10*time.Second }},
		{name: "shutdown grace period by pod priority", flag: "shutdown-grace-period-by-pod-priority", value: "0:20,100000:10,2000000000:10", check: func(s sim.Settings) bool {
			return cmp.Equal(s.Shutdown.ByPriority, []kubeletconfig.ShutdownGracePeriodByPodPriority{{Priority: 0, ShutdownGracePeriodSeconds: 20}, {Priority: 100000, ShutdownGracePeriodSeconds: 10}, {Priority: 2000000000, ShutdownGracePeriodSeconds: 10}})
		}},
		{name: "shutdown by priority not pairs", flag: "shutdown-grace-period-by-pod-priority", value: "0:20,100000", wantErr: `shutdown-grace-period-by-pod-priority=0:20,100000: invalid argument "0:20,100000" for "--shutdown-grace-period-by-pod-priority" flag: entry "100000": must be <priority>:<seconds>`},
		{name: "shutdown by priority beyond int32", flag: "shutdown-grace-period-by-pod-priority", value: "3000000000:10", wantErr: `entry "3000000000:10": must be <priority>:<seconds>, a 32-bit integer and a whole number of seconds`},
		{name: "shutdown grace period not a duration", flag: "shutdown-grace-period", value: "30", wantErr: "shutdown-grace-period=30: "},
		{name: "static CPU manager, alone", flag: "cpu-manager-policy", value: "static", check: func(s sim.Settings) bool { return s.Resources.CPUManagerPolicy == "static" && s.Resources.On() }},
		{name: "none CPU manager", flag: "cpu-manager-policy", value: "none", check: func(s sim.Settings) bool { return s.Resources.On() }},
		{name: "unknown CPU manager policy", flag: "cpu-manager-policy", value: "Static", wantErr: `cpu-manager-policy=Static: unknown policy: "Static" (want none or static)`},
		{name: "reserved CPUs", flag: "reserved-cpus", value: "0,4", check: func(s sim.Settings) bool { return s.Resources.ReservedCPUs == "0,4" }},
		{name: "reserved CPUs range", flag: "reserved-cpus", value: "0-1", check: func(s sim.Settings) bool { return s.Resources.ReservedCPUs == "0-1" }},
		{name: "reserved CPUs not a cpuset", flag: "reserved-cpus", value: "0;4", wantErr: `reserved-cpus=0;4: reservedSystemCPUs: unable to parse "0;4": `},
		{name: "reserved CPUs ending in a comma", flag: "reserved-cpus", value: "0,", wantErr: `reserved-cpus=0,: reservedSystemCPUs: unable to parse "0,": `},
		{name: "topology manager policy", flag: "topology-manager-policy", value: "single-numa-node", check: func(s sim.Settings) bool { return s.Resources.TopologyManagerPolicy == "single-numa-node" }},
		{name: "unknown topology manager policy", flag: "topology-manager-policy", value: "single-numa", wantErr: `topology-manager-policy=single-numa: invalid configuration: topologyManagerPolicy (--topology-manager-policy) "single-numa" must be one of: ["none" "best-effort" "restricted" "single-numa-node"]`},
		{name: "topology manager scope", flag: "topology-manager-scope", value: "pod", check: func(s sim.Settings) bool { return s.Resources.TopologyManagerScope == "pod" }},
		{name: "unknown topology manager scope", flag: "topology-manager-scope", value: "node", wantErr: `topology-manager-scope=node: invalid configuration: topologyManagerScope (--topology-manager-scope) "node" must be one of: "container", or "pod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sim.DefaultSettings()
			err := s.Set(tc.flag, tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Set(%s, %s) = %v, want an error containing %q", tc.flag, tc.value, err, tc.wantErr)
				}
				return
			}
			if err != nil || !tc.check(s) {
				t.Fatalf("Set(%s, %s) = %v; settings %+v", tc.flag, tc.value, err, s)
			}
		})
	}
}

// No resource setting is set by default, so no container manager runs.
func TestDefaultResourceSettingsOff(t *testing.T) {
	if r := sim.DefaultSettings().Resources; r.On() {
		t.Errorf("default resource settings %+v are on", r)
	}
}

// The static CPU policy needs reserved-cpus, whatever their order; what
// depends on the machine (its CPUs, its NUMA nodes) is checked by each
// node's container manager, and the error names the node.
func TestResourceSettingsCheckedTogether(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings [][2]string
		nodes    script.Nodes
		wantErr  string
	}{
		{name: "reserved CPUs set after the policy", settings: [][2]string{{"cpu-manager-policy", "static"}, {"reserved-cpus", "0"}}},
		{name: "static without reserved CPUs", settings: [][2]string{{"cpu-manager-policy", "static"}, {"topology-manager-policy", "restricted"}},
			wantErr: "settings: cpu-manager-policy=static: [cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero: set reserved-cpus (such as reserved-cpus=0), the CPUs kept for the system"},
		{name: "reserved CPUs the machine lacks", settings: [][2]string{{"cpu-manager-policy", "static"}, {"reserved-cpus", "4"}},
			wantErr: `node a-1: cpuManagerPolicy "static": reservedSystemCPUs "4": CPUs "4" are not on this machine`},
		{name: "more NUMA nodes than the policy allows", settings: [][2]string{{"topology-manager-policy", "best-effort"}}, nodes: script.Nodes{CPUs: 9, NUMANodes: 9},
			wantErr: `node a-1: invalid configuration: topologyManagerPolicy "best-effort": unsupported on machines with more than 8 NUMA Nodes`},
		{name: "many NUMA nodes with the none policy", settings: [][2]string{{"topology-manager-scope", "pod"}}, nodes: script.Nodes{CPUs: 9, NUMANodes: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := sim.New(context.Background(), sim.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for _, kv := range tc.settings {
				if err := w.Set(kv[0], kv[1]); err != nil {
					t.Fatalf("Set(%s, %s) = %v", kv[0], kv[1], err)
				}
			}
			n := tc.nodes
			n.Zone, n.Count = "a", 1
			err = w.AddMachines(n)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("AddMachines = %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("AddMachines = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// The pod garbage collector's threshold defaults to upstream's.
func TestDefaultTerminatedPodGCThreshold(t *testing.T) {
	if got := sim.DefaultSettings().TerminatedPodGCThreshold; got != 12500 {
		t.Errorf("terminated-pod-gc-threshold defaults to %d, want 12500", got)
	}
}

func TestSettingsFixedOnceStarted(t *testing.T) {
	w, err := sim.New(context.Background(), sim.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Set("node-eviction-rate", "0.5"); err != nil {
		t.Fatal(err)
	}
	if err := w.AddNodes("a", 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Set("node-eviction-rate", "0.2"); err == nil || !strings.Contains(err.Error(), "settings must come before") {
		t.Fatalf("Set after the first node = %v, want a refusal", err)
	}
	if got := w.Settings().NodeEvictionRate; got != 0.5 {
		t.Fatalf("node-eviction-rate = %v, want 0.5", got)
	}
}

// The shutdown settings depend on one another: each is checked alone when
// set, and together (with the kubelet's rules, naming the settings) once
// the World starts, so their order does not matter.
func TestShutdownSettingsCheckedTogether(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings [][2]string
		wantErr  string
	}{
		{name: "critical set before the whole period", settings: [][2]string{{"shutdown-grace-period-critical-pods", "10s"}, {"shutdown-grace-period", "30s"}}},
		{name: "off by default"},
		{name: "critical longer than the whole period", settings: [][2]string{{"shutdown-grace-period", "10s"}, {"shutdown-grace-period-critical-pods", "20s"}},
			wantErr: "settings: shutdown settings shutdown-grace-period=10s shutdown-grace-period-critical-pods=20s: invalid configuration: shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s"},
		{name: "below a second", settings: [][2]string{{"shutdown-grace-period", "500ms"}},
			wantErr: "settings: shutdown settings shutdown-grace-period=500ms: invalid configuration: shutdownGracePeriod 500ms must be either zero or otherwise >= 1 sec"},
		{name: "priorities and durations", settings: [][2]string{{"shutdown-grace-period", "30s"}, {"shutdown-grace-period-by-pod-priority", "0:10"}},
			wantErr: "settings: shutdown settings shutdown-grace-period=30s shutdown-grace-period-by-pod-priority=0:10: invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"},
		{name: "a priority twice", settings: [][2]string{{"shutdown-grace-period-by-pod-priority", "0:10,0:20"}},
			wantErr: "settings: shutdown settings shutdown-grace-period-by-pod-priority=0:10,0:20: invalid configuration: shutdownGracePeriodByPodPriority[1].priority 0 repeats shutdownGracePeriodByPodPriority[0]: each priority may appear once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := sim.New(context.Background(), sim.Config{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for _, kv := range tc.settings {
				if err := w.Set(kv[0], kv[1]); err != nil {
					t.Fatalf("Set(%s, %s) = %v", kv[0], kv[1], err)
				}
			}
			err = w.AddNodes("a", 1)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("AddNodes = %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("AddNodes = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
