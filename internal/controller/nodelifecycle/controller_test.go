package nodelifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{SecondaryNodeEvictionRate: -1}
	c.SetDefaults()
	want := Params{
		NodeMonitorGracePeriod:    40 * time.Second,
		NodeStartupGracePeriod:    60 * time.Second,
		NodeEvictionRate:          0.1,
		SecondaryNodeEvictionRate: 0, // negative means an explicit 0
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
	}
	if diff := cmp.Diff(want, c.Params()); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if c.NodeMonitorPeriod != 5*time.Second || c.Workers != 8 || c.Clock == nil || c.Logger == nil {
		t.Errorf("defaults not filled: period=%v workers=%d clock=%v logger=%v", c.NodeMonitorPeriod, c.Workers, c.Clock, c.Logger)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{"valid", Config{Client: fake.NewSimpleClientset()}, ""},
		{"no client", Config{}, "client: Required value"},
		{"negative grace", Config{Client: fake.NewSimpleClientset(), NodeMonitorGracePeriod: -time.Second}, `nodeMonitorGracePeriod: Invalid value: "-1s": must be greater than 0`},
		{"threshold above 1", Config{Client: fake.NewSimpleClientset(), UnhealthyZoneThreshold: 1.5}, "unhealthyZoneThreshold: Invalid value: 1.5: must be greater than 0 and at most 1"},
		{"negative threshold size", Config{Client: fake.NewSimpleClientset(), LargeClusterSizeThreshold: -1}, "largeClusterSizeThreshold: Invalid value: -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New error = %v, want ErrInvalidConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestMetricsRegisteredOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{Client: fake.NewSimpleClientset(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Client: fake.NewSimpleClientset(), Registerer: reg}); err == nil {
		t.Error("second controller on one registry: no error")
	}
}
