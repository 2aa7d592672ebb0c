package options_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"knode/internal/agent/options"
)

// The runtime's settings: the file's KubeletConfiguration fields, the
// kubelet's flags over them, and a refusal naming the setting for each bad
// value.
func TestCompleteRuntime(t *testing.T) {
	file := writeConfig(t, header+`containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
podLogsDir: /var/log/pods
serverTLSBootstrap: true
streamingConnectionIdleTimeout: 30m
runtimeRequestTimeout: 1m
`)
	for _, tc := range []struct {
		name string
		args []string
		want options.RuntimeSettings
	}{
		{name: "the file", args: []string{"--config", file}, want: options.RuntimeSettings{
			ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock", ImageServiceEndpoint: "unix:///run/containerd/containerd.sock",
			PodLogsDir: "/var/log/pods", CNIConfDir: "/etc/cni/net.d", CNIBridge: "cni0", CNIIsGateway: true, ServerTLSBootstrap: true,
			StreamingConnectionIdleTimeout: 30 * time.Minute, RuntimeRequestTimeout: time.Minute}},
		{name: "flags over the file", args: []string{"--config", file, "--container-runtime-endpoint", "unix:///tmp/c.sock",
			"--image-service-endpoint", "unix:///tmp/i.sock", "--pod-logs-dir", "/tmp/logs", "--cni-conf-dir", "/tmp/net.d",
			"--cni-bridge", "knbr0", "--cni-is-gateway=false", "--rotate-server-certificates=false", "--streaming-connection-idle-timeout", "1m", "--runtime-request-timeout", "5s"},
			want: options.RuntimeSettings{
				ContainerRuntimeEndpoint: "unix:///tmp/c.sock", ImageServiceEndpoint: "unix:///tmp/i.sock",
				PodLogsDir: "/tmp/logs", CNIConfDir: "/tmp/net.d", CNIBridge: "knbr0",
				StreamingConnectionIdleTimeout: time.Minute, RuntimeRequestTimeout: 5 * time.Second}},
	} {
		got, err := complete(t, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d := cmp.Diff(tc.want, got.Runtime); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--container-runtime-endpoint", "/run/containerd/containerd.sock"}, `--container-runtime-endpoint "/run/containerd/containerd.sock": must be a unix:// URL`},
		{[]string{"--container-runtime-endpoint", "unix://relative.sock"}, "must name an absolute socket path"},
		{[]string{"--image-service-endpoint", "unix:///tmp/i.sock"}, `--image-service-endpoint "unix:///tmp/i.sock": needs --container-runtime-endpoint`},
		{[]string{"--pod-logs-dir", "logs"}, `podLogsDir "logs": must be an absolute path`},
		{[]string{"--cni-conf-dir", "net.d"}, `--cni-conf-dir "net.d": must be an absolute path`},
		{[]string{"--cni-bridge", "a-very-long-bridge-name"}, `--cni-bridge "a-very-long-bridge-name": must be a Linux interface name`},
		{[]string{"--streaming-connection-idle-timeout", "0s"}, "streamingConnectionIdleTimeout 0s: must be greater than 0"},
		{[]string{"--runtime-request-timeout", "-1s"}, "runtimeRequestTimeout -1s: must be greater than 0"},
	} {
		_, err := complete(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}
