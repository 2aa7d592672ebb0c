package options_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/cpumanager"
	"knode/internal/agent/memorymanager"
	"knode/internal/agent/nodestatus"
	"knode/internal/agent/options"
	"knode/internal/agent/shutdown"
)

var effects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

func TestParseTaints(t *testing.T) {
	cases := []struct {
		name string
		spec string
		want []corev1.Taint
		// wantErr are substrings the error must hold; none means no error.
		wantErr []string
	}{
		{name: "empty", spec: ""},
		{name: "key=value:effect", spec: "dedicated=infra:NoSchedule",
			want: []corev1.Taint{{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule}}},
		{name: "key:effect without a value", spec: "gpu:NoExecute",
			want: []corev1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoExecute}}},
		{name: "several, prefixed key, spaces and an empty item", spec: "a=1:NoSchedule, example.com/b=2:PreferNoSchedule,,c:NoExecute",
			want: []corev1.Taint{
				{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/b", Value: "2", Effect: corev1.TaintEffectPreferNoSchedule},
				{Key: "c", Effect: corev1.TaintEffectNoExecute},
			}},
		{name: "same key, different effects", spec: "k=v:NoSchedule,k=v:NoExecute",
			want: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}, {Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute}}},
		{name: "missing effect names the allowed effects", spec: "foo=bar", wantErr: append([]string{"foo=bar"}, effects...)},
		{name: "empty effect names the allowed effects", spec: "foo=bar:", wantErr: append([]string{`"foo"`, "effect is required"}, effects...)},
		{name: "unknown effect", spec: "foo=bar:Sometimes", wantErr: append([]string{`"Sometimes"`}, effects...)},
		{name: "two colons", spec: "a:b:NoSchedule", wantErr: []string{"a:b:NoSchedule"}},
		{name: "bad key", spec: "bad key=v:NoSchedule", wantErr: []string{`"bad key"`, "name part must consist of"}},
		{name: "empty key", spec: "=v:NoSchedule", wantErr: []string{`taint key ""`}},
		{name: "bad value", spec: "k=bad value:NoSchedule", wantErr: []string{`"bad value"`, "a valid label must be"}},
		{name: "duplicate key and effect", spec: "a=1:NoSchedule,a=2:NoSchedule", wantErr: []string{"duplicated taint a:NoSchedule"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := options.ParseTaints(tc.spec)
			checkErr(t, err, tc.wantErr)
			if len(tc.wantErr) == 0 {
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("ParseTaints(%q) (-want +got):\n%s", tc.spec, d)
				}
			}
		})
	}
}

// checkErr fails unless err holds every one of want, or is nil when want
// is empty.
func checkErr(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error; want one mentioning %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

// complete parses args with the agent's real flag set and completes them.
func complete(t *testing.T, args ...string) (options.Settings, error) {
	t.Helper()
	var o options.Options
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return o.Complete(fs)
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// fullConfig sets every field the agent reads.
const fullConfig = header + `registerNode: false
registerWithTaints:
- key: dedicated
  value: infra
  effect: NoSchedule
- key: gpu
  effect: NoExecute
nodeLeaseDurationSeconds: 20
nodeStatusUpdateFrequency: 20s
nodeStatusReportFrequency: 2m
maxPods: 50
kubeReserved:
  cpu: 100m
  memory: 256Mi
systemReserved:
  memory: 512Mi
  ephemeral-storage: 1Gi
  pid: "1000"
evictionHard:
  memory.available: 200Mi
  nodefs.available: 15%
  nodefs.inodesFree: 0%
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
address: 127.0.0.2
port: 11250
tlsCertFile: /etc/knode/agent.crt
tlsPrivateKeyFile: /etc/knode/agent.key
authentication:
  x509:
    clientCAFile: /etc/knode/ca.crt
`

func q(s string) resource.Quantity { return resource.MustParse(s) }
func qp(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

var settingsCmp = []cmp.Option{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmp.Comparer(func(a, b net.IP) bool { return a.Equal(b) }),
	cmpopts.EquateEmpty(),
}

// defaults is what Complete gives with no file and no flags.
func defaults() options.Settings {
	return options.Settings{
		RootDir:                   options.DefaultRootDir,
		RegisterNode:              true,
		NodeLabels:                map[string]string{},
		NodeStatusUpdateFrequency: 10 * time.Second,
		NodeStatusReportFrequency: 5 * time.Minute,
		Address:                   "0.0.0.0",
		Port:                      10250,
		LogindDropInDir:           "/etc/systemd/logind.conf.d",
		ShutdownStatusReserve:     2 * time.Second,
		StorageDir:                options.DefaultStorageDir,
		Resources: options.ResourceSettings{
			FailSwapOn:                true,
			CgroupsPerQOS:             true,
			EnforceNodeAllocatable:    []string{"pods"},
			CPUCFSQuota:               true,
			CPUCFSQuotaPeriod:         100 * time.Millisecond,
			PodPidsLimit:              -1,
			CPUManager:                cpumanager.Config{Policy: "none"},
			CPUManagerReconcilePeriod: 10 * time.Second,
			MemoryManager:             memorymanager.Config{Policy: "None"},
			TopologyManagerPolicy:     "none",
			TopologyManagerScope:      "container",
		},
		Runtime: options.RuntimeSettings{
			PodLogsDir:                     options.DefaultRootDir + "/pod-logs",
			CNIConfDir:                     "/etc/cni/net.d",
			CNIBridge:                      "cni0",
			CNIIsGateway:                   true,
			StreamingConnectionIdleTimeout: 4 * time.Hour,
			RuntimeRequestTimeout:          2 * time.Minute,
		},
	}
}

// fromFullConfig is what fullConfig gives with no flags.
func fromFullConfig(path string) options.Settings {
	s := defaults()
	s.RegisterNode = false
	s.RegisterWithTaints = []corev1.Taint{
		{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Effect: corev1.TaintEffectNoExecute},
	}
	s.NodeLeaseDurationSeconds = 20
	s.NodeStatusUpdateFrequency = 20 * time.Second
	s.NodeStatusReportFrequency = 2 * time.Minute
	s.MaxPods = 50
	s.KubeReserved = corev1.ResourceList{"cpu": q("100m"), "memory": q("256Mi")}
	s.SystemReserved = corev1.ResourceList{"memory": q("512Mi"), "ephemeral-storage": q("1Gi"), "pid": q("1000")}
	// Sorted by signal; 0% disables a signal.
	s.EvictionHard = []nodestatus.Threshold{
		{Signal: nodestatus.SignalMemoryAvailable, Quantity: qp("200Mi")},
		{Signal: nodestatus.SignalNodeFsAvailable, Percentage: 0.15},
	}
	s.Shutdown = shutdown.Settings{GracePeriod: 30 * time.Second, CriticalPods: 10 * time.Second}
	s.Resources.CPUManager.ReservedCPU = q("100m")
	s.Resources.MemoryManager.NodeAllocatableReservation = corev1.ResourceList{"memory": q("768Mi")}
	s.Address, s.Port = "127.0.0.2", 11250
	s.TLSCertFile, s.TLSPrivateKeyFile, s.ClientCAFile = "/etc/knode/agent.crt", "/etc/knode/agent.key", "/etc/knode/ca.crt"
	return s
}

func TestCompleteConfigFileAndFlags(t *testing.T) {
	full := writeConfig(t, fullConfig)
	cases := []struct {
		name string
		args []string
		want options.Settings
	}{
		{name: "no file, no flags", want: defaults()},
		{name: "every field from the file", args: []string{"--config", full}, want: fromFullConfig(full)},
		{
			name: "flags override the file",
			args: []string{
				"--config", full,
				"--register-node=true",
				"--register-with-taints", "only=flag:PreferNoSchedule",
				"--node-status-update-frequency", "7s",
				"--root-dir", "/tmp/agent-2",
				"--hostname-override", "Node-2",
				"--node-labels", "team=blue,node.kubernetes.io/pool=p1",
				"--node-ip", "192.168.1.20",
				"--cloud-provider", "external",
				"--provider-id", "cloud://x",
				"--port", "0",
				"--address", "127.0.0.1",
				"--client-ca-file", "/flag/ca.crt",
				"--logind-drop-in-dir", "/tmp/logind.conf.d",
				"--shutdown-status-reserve", "5s",
			},
			want: func() options.Settings {
				s := fromFullConfig(full)
				s.RegisterNode = true
				s.RegisterWithTaints = []corev1.Taint{{Key: "only", Value: "flag", Effect: corev1.TaintEffectPreferNoSchedule}}
				s.NodeStatusUpdateFrequency = 7 * time.Second
				s.RootDir = "/tmp/agent-2"
				s.Runtime.PodLogsDir = "/tmp/agent-2/pod-logs"
				s.HostnameOverride = "Node-2"
				s.Port, s.Address, s.ClientCAFile = 0, "127.0.0.1", "/flag/ca.crt"
				s.LogindDropInDir, s.ShutdownStatusReserve = "/tmp/logind.conf.d", 5*time.Second
				s.NodeLabels = map[string]string{"team": "blue", "node.kubernetes.io/pool": "p1"}
				s.NodeIPs = []net.IP{net.ParseIP("192.168.1.20")}
				s.CloudProvider = "external"
				s.ProviderID = "cloud://x"
				return s
			}(),
		},
		{
			name: "an empty --register-with-taints clears the file's taints",
			args: []string{"--config", full, "--register-with-taints="},
			want: func() options.Settings {
				s := fromFullConfig(full)
				s.RegisterWithTaints = nil
				return s
			}(),
		},
		{
			name: "register-node=false from the flag alone",
			args: []string{"--register-node=false"},
			want: func() options.Settings {
				s := defaults()
				s.RegisterNode = false
				return s
			}(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := complete(t, tc.args...)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if d := cmp.Diff(tc.want, got, settingsCmp...); d != "" {
				t.Errorf("Settings (-want +got):\n%s", d)
			}
		})
	}
}

// TestReportFrequencyDefaulting: the kubelet defaults
// nodeStatusReportFrequency to nodeStatusUpdateFrequency only when the
// *file* sets the update frequency and not the report frequency; the
// --node-status-update-frequency flag is applied after that defaulting
// (NewKubeletConfiguration defaults an empty config, then the flags are
// parsed onto it; with --config, the file is decoded with defaults and the
// flags re-parsed on top), so the flag never moves the report frequency.
func TestReportFrequencyDefaulting(t *testing.T) {
	updateOnly := writeConfig(t, header+"nodeStatusUpdateFrequency: 20s\n")
	both := writeConfig(t, header+"nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 1m\n")
	neither := writeConfig(t, header+"maxPods: 30\n")
	cases := []struct {
		name       string
		args       []string
		wantUpdate time.Duration
		wantReport time.Duration
	}{
		{name: "nothing set", wantUpdate: 10 * time.Second, wantReport: 5 * time.Minute},
		{name: "file sets update only", args: []string{"--config", updateOnly}, wantUpdate: 20 * time.Second, wantReport: 20 * time.Second},
		{name: "file sets both", args: []string{"--config", both}, wantUpdate: 20 * time.Second, wantReport: time.Minute},
		{name: "file sets both, flag sets update", args: []string{"--config", both, "--node-status-update-frequency", "30s"}, wantUpdate: 30 * time.Second, wantReport: time.Minute},
		{name: "flag only", args: []string{"--node-status-update-frequency", "30s"}, wantUpdate: 30 * time.Second, wantReport: 5 * time.Minute},
		{name: "file sets neither, flag sets update", args: []string{"--config", neither, "--node-status-update-frequency", "30s"}, wantUpdate: 30 * time.Second, wantReport: 5 * time.Minute},
		{name: "file sets update only, flag overrides it", args: []string{"--config", updateOnly, "--node-status-update-frequency", "30s"}, wantUpdate: 30 * time.Second, wantReport: 20 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := complete(t, tc.args...)
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if got.NodeStatusUpdateFrequency != tc.wantUpdate || got.NodeStatusReportFrequency != tc.wantReport {
				t.Errorf("update %v, report %v; want update %v, report %v (as the kubelet)",
					got.NodeStatusUpdateFrequency, got.NodeStatusReportFrequency, tc.wantUpdate, tc.wantReport)
			}
		})
	}
}

func TestCompleteRefusesBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	cases := []struct {
		name    string
		file    string // config file body; "" means no --config
		args    []string
		wantErr []string
	}{
		{name: "unknown field", file: header + "registerNodes: true\n", wantErr: []string{"--config", "unknown field", "registerNodes"}},
		{name: "wrong kind", file: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
			wantErr: []string{"--config", `kind "KubeProxyConfiguration"`, "KubeletConfiguration"}},
		{name: "wrong apiVersion", file: "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
			wantErr: []string{"--config", `"kubelet.config.k8s.io/v1alpha1"`, `"kubelet.config.k8s.io/v1beta1"`}},
		{name: "no apiVersion or kind", file: "maxPods: 10\n", wantErr: []string{"--config", "KubeletConfiguration"}},
		{name: "not YAML", file: header + "maxPods: [\n", wantErr: []string{"--config"}},
		{name: "wrong type", file: header + "maxPods: lots\n", wantErr: []string{"--config", "maxPods"}},
		{name: "missing file", args: []string{"--config", missing}, wantErr: []string{"--config", "nope.yaml"}},
		{name: "negative maxPods", file: header + "maxPods: -1\n", wantErr: []string{"maxPods", "-1"}},
		{name: "negative lease duration", file: header + "nodeLeaseDurationSeconds: -5\n", wantErr: []string{"nodeLeaseDurationSeconds", "-5"}},
		{name: "bad kubeReserved quantity", file: header + "kubeReserved:\n  memory: lots\n", wantErr: []string{"kubeReserved[memory]", "lots"}},
		{name: "unsupported systemReserved resource", file: header + "systemReserved:\n  nvidia.com/gpu: \"1\"\n", wantErr: []string{"systemReserved[nvidia.com/gpu]", "unsupported"}},
		{name: "negative kubeReserved", file: header + "kubeReserved:\n  cpu: -1\n", wantErr: []string{"kubeReserved[cpu]", "negative"}},
		{name: "bad evictionHard signal", file: header + "evictionHard:\n  memory.free: 1Gi\n", wantErr: []string{"evictionHard", "memory.free"}},
		{name: "bad evictionHard value", file: header + "evictionHard:\n  memory.available: lots\n", wantErr: []string{"evictionHard", "lots"}},
		{name: "file taint without effect", file: header + "registerWithTaints:\n- key: a\n  value: b\n", wantErr: append([]string{"registerWithTaints", `"a"`}, effects...)},
		{name: "flag taint without effect", args: []string{"--register-with-taints", "foo=bar"}, wantErr: append([]string{"--register-with-taints", "foo=bar"}, effects...)},
		{name: "zero update frequency flag", args: []string{"--node-status-update-frequency", "0s"}, wantErr: []string{"--node-status-update-frequency", "greater than 0"}},
		{name: "in-tree cloud provider", args: []string{"--cloud-provider", "aws"}, wantErr: []string{"--cloud-provider", `"aws"`, "external"}},
		{name: "shutdown list and durations", file: header + "shutdownGracePeriod: 30s\nshutdownGracePeriodByPodPriority:\n- priority: 0\n  shutdownGracePeriodSeconds: 10\n",
			wantErr: []string{"Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod"}},
		{name: "critical above the shutdown grace", file: header + "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n",
			wantErr: []string{"shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s"}},
		{name: "sub-second shutdown grace", file: header + "shutdownGracePeriod: 500ms\n", wantErr: []string{"shutdownGracePeriod 500ms", ">= 1 sec"}},
		{name: "port out of range", args: []string{"--port", "70000"}, wantErr: []string{"--port 70000", "between 0 and 65535"}},
		{name: "address not an IP", args: []string{"--address", "localhost"}, wantErr: []string{"--address", "must be an IP address"}},
		{name: "cert without key", args: []string{"--tls-cert-file", "/a.crt"}, wantErr: []string{"--tls-cert-file and --tls-private-key-file"}},
		{name: "zero status reserve", args: []string{"--shutdown-status-reserve", "0s"}, wantErr: []string{"--shutdown-status-reserve", "greater than 0"}},
		{name: "empty root dir", args: []string{"--root-dir", ""}, wantErr: []string{"--root-dir"}},
		{name: "node-role label", args: []string{"--node-labels", "node-role.kubernetes.io/worker="},
			wantErr: []string{"--node-labels", "node-role.kubernetes.io/worker", "kubelet.kubernetes.io", "node.kubernetes.io", "kubernetes.io/hostname"}},
		{name: "node-restriction label", args: []string{"--node-labels", "node-restriction.kubernetes.io/team=a"},
			wantErr: []string{"--node-labels", "node-restriction.kubernetes.io/team"}},
		{name: "k8s.io label", args: []string{"--node-labels", "team=a,example.k8s.io/x=y"},
			wantErr: []string{"--node-labels", "example.k8s.io/x"}},
		{name: "invalid label value", args: []string{"--node-labels", "team=not a value"}, wantErr: []string{"invalid node labels", "not a value"}},
		{name: "invalid label key", args: []string{"--node-labels", "-team=a"}, wantErr: []string{"invalid node labels", "-team"}},
		{name: "removed swap behavior", file: header + "memorySwap:\n  swapBehavior: UnlimitedSwap\n", wantErr: []string{"memorySwap.swapBehavior", "UnlimitedSwap"}},
		{name: "systemd cgroup driver", file: header + "cgroupDriver: systemd\n", wantErr: []string{"cgroupDriver (--cgroup-driver)", `"systemd"`, `"cgroupfs"`}},
		{name: "none with pods", args: []string{"--enforce-node-allocatable", "none,pods"}, wantErr: []string{"enforceNodeAllocatable", `"none" cannot be combined`}},
		{name: "kube-reserved enforcement", args: []string{"--enforce-node-allocatable", "pods,kube-reserved"}, wantErr: []string{"enforceNodeAllocatable", `"kube-reserved"`, `only "pods"`}},
		{name: "pods without per-QoS cgroups", args: []string{"--cgroups-per-qos=false"}, wantErr: []string{"enforceNodeAllocatable", "cgroupsPerQOS"}},
		{name: "unknown cpu manager policy", args: []string{"--cpu-manager-policy", "dynamic"}, wantErr: []string{"cpuManagerPolicy (--cpu-manager-policy)", `unknown policy: "dynamic"`}},
		{name: "static without reserved cpu", args: []string{"--cpu-manager-policy", "static"}, wantErr: []string{"cpuManagerPolicy", "greater than zero"}},
		{name: "bad reserved cpus", args: []string{"--cpu-manager-policy", "static", "--reserved-cpus", "a-b"}, wantErr: []string{"reservedSystemCPUs", `"a-b"`}},
		{name: "unknown cpu manager option", args: []string{"--cpu-manager-policy", "static", "--reserved-cpus", "0", "--cpu-manager-policy-options", "spread=true"}, wantErr: []string{"cpuManagerPolicy", `"spread"`}},
		{name: "unknown memory manager policy", args: []string{"--memory-manager-policy", "static"}, wantErr: []string{"memoryManagerPolicy (--memory-manager-policy)", `"static"`}},
		{name: "Static memory without reservation", args: []string{"--memory-manager-policy", "Static"}, wantErr: []string{"reservedMemory (--reserved-memory)", "at least one NUMA node"}},
		{name: "reserved memory without node", args: []string{"--reserved-memory", "memory=1Gi"}, wantErr: []string{"--reserved-memory", "<numa node>:"}},
		{name: "reserved memory bad quantity", args: []string{"--reserved-memory", "0:memory=lots"}, wantErr: []string{"--reserved-memory", "memory", `"lots"`}},
		{name: "reserved memory unsupported resource", args: []string{"--reserved-memory", "0:cpu=1"}, wantErr: []string{"memoryManagerPolicy", `limit type "cpu"`}},
		{name: "unknown topology policy", args: []string{"--topology-manager-policy", "strict"}, wantErr: []string{"topologyManagerPolicy (--topology-manager-policy)", `"strict"`}},
		{name: "unknown topology scope", args: []string{"--topology-manager-scope", "node"}, wantErr: []string{"topologyManagerScope (--topology-manager-scope)", `"node"`}},
		{name: "bad cfs period", args: []string{"--cpu-cfs-quota-period", "2s"}, wantErr: []string{"cpuCFSQuotaPeriod (--cpu-cfs-quota-period)", "between 1ms and 1s"}},
		{name: "bad pod pids limit", args: []string{"--pod-max-pids", "-2"}, wantErr: []string{"podPidsLimit (--pod-max-pids) -2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--config", writeConfig(t, tc.file)}, args...)
			}
			_, err := complete(t, args...)
			checkErr(t, err, tc.wantErr)
		})
	}
}

func TestCompleteNodeLabelsAllowed(t *testing.T) {
	labels := "team=blue,example.com/tier=gold,node.kubernetes.io/pool=p1,kubelet.kubernetes.io/x=y,topology.kubernetes.io/zone=z1,sub.node.kubernetes.io/a=b"
	got, err := complete(t, "--node-labels", labels)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := map[string]string{
		"team": "blue", "example.com/tier": "gold", "node.kubernetes.io/pool": "p1",
		"kubelet.kubernetes.io/x": "y", "topology.kubernetes.io/zone": "z1", "sub.node.kubernetes.io/a": "b",
	}
	if d := cmp.Diff(want, got.NodeLabels); d != "" {
		t.Errorf("NodeLabels (-want +got):\n%s", d)
	}
}

func TestCompleteNodeIP(t *testing.T) {
	ip := net.ParseIP
	cases := []struct {
		name    string
		value   string
		want    []net.IP
		wantErr []string
	}{
		{name: "IPv4", value: "10.0.0.5", want: []net.IP{ip("10.0.0.5")}},
		{name: "IPv6", value: "fd00::5", want: []net.IP{ip("fd00::5")}},
		{name: "dual-stack, IPv4 first", value: "10.0.0.5,fd00::5", want: []net.IP{ip("10.0.0.5"), ip("fd00::5")}},
		{name: "dual-stack, IPv6 first, spaces", value: "fd00::5, 10.0.0.5", want: []net.IP{ip("fd00::5"), ip("10.0.0.5")}},
		{name: "0.0.0.0 prefers IPv4", value: "0.0.0.0", want: []net.IP{ip("0.0.0.0")}},
		{name: ":: prefers IPv6", value: "::", want: []net.IP{ip("::")}},
		{name: "leading zeros, as upstream's sloppy parse", value: "010.000.000.005", want: []net.IP{ip("10.0.0.5")}},
		{name: "not an IP", value: "node-1", wantErr: []string{"--node-ip", `"node-1"`, "could not parse"}},
		{name: "two IPv4", value: "10.0.0.5,10.0.0.6", wantErr: []string{"--node-ip", "single IP or a dual-stack pair"}},
		{name: "three", value: "10.0.0.5,fd00::5,10.0.0.6", wantErr: []string{"--node-ip", "single IP or a dual-stack pair"}},
		{name: "unspecified in a pair", value: "0.0.0.0,fd00::5", wantErr: []string{"--node-ip", "cannot include '0.0.0.0' or '::'"}},
		{name: "empty entry", value: "10.0.0.5,", wantErr: []string{"--node-ip"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := complete(t, "--node-ip", tc.value)
			checkErr(t, err, tc.wantErr)
			if len(tc.wantErr) == 0 {
				if d := cmp.Diff(tc.want, got.NodeIPs, settingsCmp...); d != "" {
					t.Errorf("NodeIPs (-want +got):\n%s", d)
				}
			}
		})
	}
}

// TestStatusConfig: Settings become the status setters' configuration.
func TestStatusConfig(t *testing.T) {
	s, err := complete(t, "--config", writeConfig(t, fullConfig), "--node-ip", "10.0.0.5")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.StatusConfig("node-2", "node-2", "v1.34.0")
	if err := cfg.Validate(); err != nil {
		t.Fatalf("StatusConfig does not validate: %v", err)
	}
	cfg.LookupIP = nil
	want := nodestatus.Config{
		NodeName: "node-2", Hostname: "node-2",
		NodeIPs:        []net.IP{net.ParseIP("10.0.0.5")},
		MaxPods:        50,
		KubeReserved:   s.KubeReserved,
		SystemReserved: s.SystemReserved,
		EvictionHard:   s.EvictionHard,
		KubeletVersion: "v1.34.0",
		RuntimeName:    "knode",
		RuntimeVersion: "v1.34.0",
	}
	if d := cmp.Diff(want, cfg, settingsCmp...); d != "" {
		t.Errorf("StatusConfig (-want +got):\n%s", d)
	}
}
