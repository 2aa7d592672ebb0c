package cri

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"knode/internal/agent/runtime"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string
	}{
		{name: "empty", cfg: Config{}, wantErr: []string{"Config.Endpoint: Required value", "Config.PodLogsDir: Required value"}},
		{
			name:    "not unix sockets, relative logs",
			cfg:     Config{Endpoint: "tcp://x", ImageEndpoint: "/run/x.sock", PodLogsDir: "logs"},
			wantErr: []string{`Config.Endpoint: Invalid value: "tcp://x": must be a unix:// URL`, "Config.ImageEndpoint", `Config.PodLogsDir: Invalid value: "logs": must be an absolute path`},
		},
		{
			name:    "negative durations",
			cfg:     Config{Endpoint: "unix:///x", PodLogsDir: "/l", SyncPeriod: -1, RequestTimeout: -1},
			wantErr: []string{"Config.SyncPeriod", "Config.RequestTimeout"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}

	cfg := Config{Endpoint: "unix:///run/c.sock", PodLogsDir: "/var/log/pods", Backoff: runtime.BackoffConfig{Initial: time.Minute}}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.ImageEndpoint != cfg.Endpoint || cfg.SyncPeriod != DefaultSyncPeriod || cfg.RequestTimeout != DefaultRequestTimeout ||
		cfg.Logger == nil || cfg.Backoff.Max != runtime.DefaultBackoffMax || cfg.Backoff.Initial != time.Minute {
		t.Errorf("defaults not filled: %+v", cfg)
	}
	if _, ok := cfg.Clock.(clock.RealClock); !ok {
		t.Errorf("clock %T, want the real clock", cfg.Clock)
	}
}
