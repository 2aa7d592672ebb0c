// Package options turns the agent's command line and KubeletConfiguration
// file into an agent.Config, with the kubelet's flag names and precedence:
// a flag given on the command line overrides the file, the file overrides
// the defaults.
//
// Every bad value is an error that names the flag or field and the rule.
// It does not talk to the API server; cmd/knode builds the client.
package options

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"knode/internal/admission/noderestriction"
	"knode/internal/agent"
	"knode/internal/agent/nodestatus"
	agentserver "knode/internal/agent/server"
	"knode/internal/agent/shutdown"
	"knode/internal/agent/shutdown/logind"
)

// Options are the agent's command-line flags.
type Options struct {
	Kubeconfig                string
	RootDir                   string
	ConfigFile                string
	RegisterNode              bool
	RegisterWithTaints        string
	NodeIP                    string
	NodeLabels                map[string]string
	NodeStatusUpdateFrequency time.Duration
	HostnameOverride          string
	CloudProvider             string
	ProviderID                string
	// The agent's own HTTPS server.
	Address           string
	Port              int32
	ClientCAFile      string
	TLSCertFile       string
	TLSPrivateKeyFile string
	// Graceful shutdown, beyond the KubeletConfiguration's fields.
	LogindDropInDir       string
	ShutdownStatusReserve time.Duration
	// The built-in CSI driver's node side.
	BuiltinStorage bool
	StorageDir     string
	// Resources are the flags of swap, cgroups and the resource managers.
	Resources ResourceOptions
	// Runtime are the flags of the container runtime and pod network.
	Runtime RuntimeOptions
}

// DefaultRootDir is where the agent keeps its state by default.
const DefaultRootDir = "/var/lib/knode/agent"

// DefaultStorageDir is the built-in CSI driver's data directory by default,
// the server's default too.
const DefaultStorageDir = "/var/lib/knode/storage"

// AddFlags registers the kubelet's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig with the node's identity (system:node:<name>)")
	fs.StringVar(&o.RootDir, "root-dir", DefaultRootDir, "directory for the agent's state; two agents on one machine need two")
	fs.StringVar(&o.ConfigFile, "config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); flags override it")
	fs.BoolVar(&o.RegisterNode, "register-node", true, "create the Node, or adopt one that exists")
	fs.StringVar(&o.RegisterWithTaints, "register-with-taints", "", "taints for a newly created Node: <key>=<value>:<effect>, comma-separated")
	fs.StringVar(&o.NodeIP, "node-ip", "", "the node's IP, or a dual-stack pair; 0.0.0.0 or :: prefer that family when detecting")
	fs.StringToStringVar(&o.NodeLabels, "node-labels", nil, "labels for a newly created Node: key=value, comma-separated")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", agent.DefaultNodeStatusUpdateFrequency, "how often the node's status is computed")
	fs.StringVar(&o.HostnameOverride, "hostname-override", "", "use this name instead of the hostname")
	fs.StringVar(&o.CloudProvider, "cloud-provider", "", `"" for none, or "external"`)
	fs.StringVar(&o.ProviderID, "provider-id", "", "spec.providerID of the Node")
	fs.StringVar(&o.Address, "address", agentserver.DefaultAddress, "IP address the agent's HTTPS server listens on")
	fs.Int32Var(&o.Port, "port", agentserver.DefaultPort, "port of the agent's HTTPS server (0 picks a free one; the Node reports it)")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "CA bundle whose client certificates the agent's server accepts; default: the kubeconfig's CA")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate of the agent's server; default: a self-signed one in <root-dir>/pki")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.StringVar(&o.LogindDropInDir, "logind-drop-in-dir", logind.DefaultDropInDir, "where graceful shutdown writes the logind drop-in that raises InhibitDelayMaxSec")
	fs.BoolVar(&o.BuiltinStorage, "builtin-storage", true, "run the node side of the built-in CSI driver when --storage-dir exists")
	fs.StringVar(&o.StorageDir, "storage-dir", DefaultStorageDir, "data directory of the built-in CSI driver, the same the server uses (this machine, or a shared mount); the node side runs only when it exists")
	o.Resources.addFlags(fs)
	o.Runtime.addFlags(fs)
	fs.DurationVar(&o.ShutdownStatusReserve, "shutdown-status-reserve", 2*time.Second, "time kept, after the last priority group, for the pods' final statuses to reach the API server before the shutdown lock is released; asked of logind on top of the groups")
}

// Settings are the parts of agent.Config the flags and file decide.
type Settings struct {
	RootDir                   string
	RegisterNode              bool
	RegisterWithTaints        []corev1.Taint
	NodeLabels                map[string]string
	NodeIPs                   []net.IP
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	NodeLeaseDurationSeconds  int32
	HostnameOverride          string
	CloudProvider             string
	ProviderID                string
	MaxPods                   int32
	KubeReserved              corev1.ResourceList
	SystemReserved            corev1.ResourceList
	EvictionHard              []nodestatus.Threshold
	// The agent's own HTTPS server.
	Address           string
	Port              int32
	ClientCAFile      string
	TLSCertFile       string
	TLSPrivateKeyFile string
	// Shutdown is the graceful shutdown configuration; LogindDropInDir and
	// ShutdownStatusReserve go with it.
	Shutdown              shutdown.Settings
	LogindDropInDir       string
	ShutdownStatusReserve time.Duration
	// StorageDir is the built-in CSI driver's data directory; empty turns
	// its node side off.
	StorageDir string
	// Resources are swap, cgroups and the CPU, memory and topology
	// managers.
	Resources ResourceSettings
	// Runtime is the container runtime, its pod network and streaming.
	Runtime RuntimeSettings
}

// Complete reads the config file, applies the flags that fs says were set,
// and checks everything.
func (o *Options) Complete(fs *pflag.FlagSet) (Settings, error) {
	file := kubeletconfig.KubeletConfiguration{}
	if o.ConfigFile != "" {
		var err error
		if file, err = LoadConfigFile(o.ConfigFile); err != nil {
			return Settings{}, err
		}
	}
	s := Settings{
		RootDir:                   o.RootDir,
		RegisterNode:              true,
		NodeStatusUpdateFrequency: agent.DefaultNodeStatusUpdateFrequency,
		NodeStatusReportFrequency: agent.DefaultNodeStatusReportFrequency,
		HostnameOverride:          o.HostnameOverride,
		CloudProvider:             o.CloudProvider,
		ProviderID:                o.ProviderID,
		NodeLabels:                map[string]string{},
	}
	if o.BuiltinStorage {
		s.StorageDir = o.StorageDir
	}
	var errs []error
	// The file.
	if file.RegisterNode != nil {
		s.RegisterNode = *file.RegisterNode
	}
	s.RegisterWithTaints = file.RegisterWithTaints
	updateSet := file.NodeStatusUpdateFrequency.Duration != 0
	if updateSet {
		s.NodeStatusUpdateFrequency = file.NodeStatusUpdateFrequency.Duration
	}
	if file.NodeStatusReportFrequency.Duration != 0 {
		s.NodeStatusReportFrequency = file.NodeStatusReportFrequency.Duration
	} else if updateSet {
		// Upstream: with only the update frequency set, reports follow it.
		s.NodeStatusReportFrequency = s.NodeStatusUpdateFrequency
	}
	s.NodeLeaseDurationSeconds = file.NodeLeaseDurationSeconds
	s.MaxPods = file.MaxPods
	s.Shutdown = shutdown.Settings{
		GracePeriod:  file.ShutdownGracePeriod.Duration,
		CriticalPods: file.ShutdownGracePeriodCriticalPods.Duration,
		ByPriority:   file.ShutdownGracePeriodByPodPriority,
	}
	if err := s.Shutdown.Validate(); err != nil {
		errs = append(errs, err)
	}
	s.Address, s.Port = o.Address, o.Port
	if file.Address != "" && !fs.Changed("address") {
		s.Address = file.Address
	}
	if file.Port != 0 && !fs.Changed("port") {
		s.Port = file.Port
	}
	s.ClientCAFile, s.TLSCertFile, s.TLSPrivateKeyFile = o.ClientCAFile, o.TLSCertFile, o.TLSPrivateKeyFile
	if file.Authentication.X509.ClientCAFile != "" && !fs.Changed("client-ca-file") {
		s.ClientCAFile = file.Authentication.X509.ClientCAFile
	}
	if file.TLSCertFile != "" && !fs.Changed("tls-cert-file") {
		s.TLSCertFile = file.TLSCertFile
	}
	if file.TLSPrivateKeyFile != "" && !fs.Changed("tls-private-key-file") {
		s.TLSPrivateKeyFile = file.TLSPrivateKeyFile
	}
	if s.Port < 0 || s.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: must be between 0 and 65535", s.Port))
	}
	if s.Address != "" && net.ParseIP(s.Address) == nil {
		errs = append(errs, fmt.Errorf("--address %q: must be an IP address", s.Address))
	}
	if (s.TLSCertFile == "") != (s.TLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-private-key-file: give both or neither"))
	}
	s.LogindDropInDir, s.ShutdownStatusReserve = o.LogindDropInDir, o.ShutdownStatusReserve
	if s.LogindDropInDir == "" {
		s.LogindDropInDir = logind.DefaultDropInDir
	}
	if s.ShutdownStatusReserve <= 0 {
		errs = append(errs, fmt.Errorf("--shutdown-status-reserve %v: must be greater than 0", s.ShutdownStatusReserve))
	}
	if file.ProviderID != "" && !fs.Changed("provider-id") {
		s.ProviderID = file.ProviderID
	}
	var err error
	if s.KubeReserved, err = resourceList("kubeReserved", file.KubeReserved); err != nil {
		errs = append(errs, err)
	}
	if s.SystemReserved, err = resourceList("systemReserved", file.SystemReserved); err != nil {
		errs = append(errs, err)
	}
	var resErrs []error
	s.Resources, resErrs = o.Resources.completeResources(fs, file, s.KubeReserved, s.SystemReserved)
	errs = append(errs, resErrs...)
	var rtErrs []error
	s.Runtime, rtErrs = o.Runtime.completeRuntime(fs, file, s.RootDir)
	errs = append(errs, rtErrs...)
	s.KubeReserved, s.SystemReserved = reserveCPUs(s.Resources.CPUManager.ReservedSystemCPUs, s.KubeReserved, s.SystemReserved)
	if file.EvictionHard != nil {
		if s.EvictionHard, err = nodestatus.ThresholdsFromMap(file.EvictionHard); err != nil {
			errs = append(errs, fmt.Errorf("evictionHard: %w", err))
		}
	}
	// Flags set on the command line win.
	if fs.Changed("register-node") {
		s.RegisterNode = o.RegisterNode
	}
	if fs.Changed("register-with-taints") {
		if s.RegisterWithTaints, err = ParseTaints(o.RegisterWithTaints); err != nil {
			errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
		}
	} else if err := checkTaints(s.RegisterWithTaints); err != nil {
		errs = append(errs, fmt.Errorf("registerWithTaints: %w", err))
	}
	if fs.Changed("node-status-update-frequency") {
		// As the kubelet: flags apply after the file's defaulting, so the
		// flag never moves the report frequency.
		s.NodeStatusUpdateFrequency = o.NodeStatusUpdateFrequency
	}
	if s.NodeStatusUpdateFrequency <= 0 {
		errs = append(errs, fmt.Errorf("--node-status-update-frequency %v: must be greater than 0", s.NodeStatusUpdateFrequency))
	}
	if s.NodeLeaseDurationSeconds < 0 {
		errs = append(errs, fmt.Errorf("nodeLeaseDurationSeconds %d: must be greater than 0", s.NodeLeaseDurationSeconds))
	}
	if s.MaxPods < 0 {
		errs = append(errs, fmt.Errorf("maxPods %d: must not be negative", s.MaxPods))
	}
	if o.NodeIP != "" {
		if s.NodeIPs, err = nodestatus.ParseNodeIPs(o.NodeIP); err != nil {
			errs = append(errs, err)
		}
	}
	for k, v := range o.NodeLabels {
		s.NodeLabels[k] = v
	}
	if err := noderestriction.ValidateNodeLabelsFlag(s.NodeLabels); err != nil {
		errs = append(errs, err)
	}
	switch s.CloudProvider {
	case "", nodestatus.CloudProviderExternal:
	default:
		errs = append(errs, fmt.Errorf("--cloud-provider %q: must be empty or %q (in-tree cloud providers are gone)", s.CloudProvider, nodestatus.CloudProviderExternal))
	}
	if len(s.NodeIPs) > 1 && s.CloudProvider != "" && s.CloudProvider != nodestatus.CloudProviderExternal {
		errs = append(errs, errors.New("--node-ip: a dual-stack pair needs no cloud provider or --cloud-provider=external"))
	}
	if s.RootDir == "" {
		errs = append(errs, errors.New("--root-dir: must not be empty"))
	}
	return s, errors.Join(errs...)
}

// LoadConfigFile reads a KubeletConfiguration, refusing unknown fields and
// other kinds.
func LoadConfigFile(path string) (kubeletconfig.KubeletConfiguration, error) {
	var cfg kubeletconfig.KubeletConfiguration
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("--config: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("--config %s: %w", path, err)
	}
	want := kubeletconfig.SchemeGroupVersion.String()
	if cfg.APIVersion != want || cfg.Kind != "KubeletConfiguration" {
		return cfg, fmt.Errorf("--config %s: apiVersion %q kind %q: must be apiVersion %q, kind \"KubeletConfiguration\"", path, cfg.APIVersion, cfg.Kind, want)
	}
	return cfg, nil
}

func resourceList(field string, m map[string]string) (corev1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := corev1.ResourceList{}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%s] %q: %w", field, k, m[k], err))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s[%s] %q: must not be negative", field, k, m[k]))
			continue
		}
		switch corev1.ResourceName(k) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid":
		default:
			errs = append(errs, fmt.Errorf("%s[%s]: unsupported resource; supported: cpu, memory, ephemeral-storage, pid", field, k))
			continue
		}
		out[corev1.ResourceName(k)] = q
	}
	return out, errors.Join(errs...)
}

// ParseTaints parses --register-with-taints: comma-separated
// <key>=<value>:<effect> or <key>:<effect>.
func ParseTaints(spec string) ([]corev1.Taint, error) {
	var taints []corev1.Taint
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		t, err := parseTaint(item)
		if err != nil {
			return nil, err
		}
		taints = append(taints, t)
	}
	return taints, checkTaints(taints)
}

var taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

func parseTaint(item string) (corev1.Taint, error) {
	var t corev1.Taint
	keyValue, effect, found := strings.Cut(item, ":")
	if !found || strings.Contains(effect, ":") {
		return t, fmt.Errorf("invalid taint spec: %s: want <key>=<value>:<effect> or <key>:<effect>, with effect one of %s", item, strings.Join(taintEffects, ", "))
	}
	t.Effect = corev1.TaintEffect(effect)
	key, value, _ := strings.Cut(keyValue, "=")
	t.Key, t.Value = key, value
	return t, nil
}

// checkTaints applies the API's taint rules, so a bad taint is refused at
// start rather than at registration.
func checkTaints(taints []corev1.Taint) error {
	seen := map[string]bool{}
	var errs []error
	for _, t := range taints {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, fmt.Errorf("taint key %q: %s", t.Key, msg))
		}
		for _, msg := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, fmt.Errorf("taint %q value %q: %s", t.Key, t.Value, msg))
		}
		switch string(t.Effect) {
		case taintEffects[0], taintEffects[1], taintEffects[2]:
		case "":
			errs = append(errs, fmt.Errorf("taint %q: effect is required; supported values: %s", t.Key, strings.Join(taintEffects, ", ")))
		default:
			errs = append(errs, fmt.Errorf("taint %q: invalid effect %q; supported values: %s", t.Key, t.Effect, strings.Join(taintEffects, ", ")))
		}
		id := t.Key + ":" + string(t.Effect)
		if seen[id] {
			errs = append(errs, fmt.Errorf("duplicated taint %s: taints must be unique by key and effect pair", id))
		}
		seen[id] = true
	}
	return errors.Join(errs...)
}

// StatusConfig turns Settings into the status setters' configuration.
func (s Settings) StatusConfig(nodeName, hostname, kubeletVersion string) nodestatus.Config {
	return nodestatus.Config{
		NodeName:       nodeName,
		Hostname:       hostname,
		NodeIPs:        s.NodeIPs,
		CloudProvider:  s.CloudProvider,
		LookupIP:       net.LookupIP,
		MaxPods:        s.MaxPods,
		KubeReserved:   s.KubeReserved,
		SystemReserved: s.SystemReserved,
		EvictionHard:   s.EvictionHard,
		KubeletVersion: kubeletVersion,
		RuntimeName:    "knode",
		RuntimeVersion: kubeletVersion,
	}
}
