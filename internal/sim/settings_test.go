package sim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"knode/internal/sim"
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
