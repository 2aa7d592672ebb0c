package sim

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"

	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/agent"
	"knode/internal/agent/cpumanager"
	"knode/internal/agent/lease"
	"knode/internal/agent/shutdown"
	"knode/internal/agent/topology"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/controller/podgc"
)

// Settings are what a scenario's `set` statements change, under the flag
// names of the upstream component that owns each one.
type Settings struct {
	// kube-controller-manager
	NodeMonitorPeriod         time.Duration
	NodeMonitorGracePeriod    time.Duration
	NodeStartupGracePeriod    time.Duration
	NodeEvictionRate          float64
	SecondaryNodeEvictionRate float64
	UnhealthyZoneThreshold    float64
	LargeClusterSizeThreshold int
	// DisableForceDetachOnTimeout is the attach/detach controller's
	// --disable-force-detach-on-timeout: a volume still mounted on a node
	// that is not Ready is never detached for the 6-minute timeout, only
	// for the out-of-service taint.
	DisableForceDetachOnTimeout bool
	// TerminatedPodGCThreshold is the pod garbage collector's
	// --terminated-pod-gc-threshold: how many finished pods may exist
	// before it deletes the oldest; 0 turns that path off.
	TerminatedPodGCThreshold int
	// kube-apiserver (DefaultTolerationSeconds admission)
	DefaultNotReadyTolerationSeconds    int64
	DefaultUnreachableTolerationSeconds int64
	// kubelet
	NodeLeaseDurationSeconds  int32
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	// Shutdown is the KubeletConfiguration's graceful shutdown fields,
	// set as shutdown-grace-period, shutdown-grace-period-critical-pods
	// and shutdown-grace-period-by-pod-priority. The zero value (the
	// default) turns graceful shutdown off.
	Shutdown shutdown.Settings
	// Resources are the kubelet's resource manager settings; with none set
	// (the default) the agents run no container manager.
	Resources ResourceSettings
}

// ResourceSettings are the kubelet's CPU and topology manager settings, set
// as cpu-manager-policy, reserved-cpus, topology-manager-policy and
// topology-manager-scope. "" means not set: the kubelet's default (none,
// no CPUs, none, container) once any of them is set.
type ResourceSettings struct {
	CPUManagerPolicy      string
	ReservedCPUs          string // a cpuset, such as 0,4 or 0-1
	TopologyManagerPolicy string
	TopologyManagerScope  string
}

// On reports whether any setting is set: then every agent runs the
// container manager.
func (r ResourceSettings) On() bool { return r != ResourceSettings{} }

// cpuManager is the CPU manager's configuration.
func (r ResourceSettings) cpuManager() cpumanager.Config {
	return cpumanager.Config{Policy: r.CPUManagerPolicy, ReservedSystemCPUs: r.ReservedCPUs}
}

// systemReserved is what the CPUs of reserved-cpus hold back from the
// node's allocatable, as the kubelet reserves them: their count as
// system-reserved cpu. Nil without reserved-cpus (or one that does not
// parse, which validateEach refuses).
func (r ResourceSettings) systemReserved() corev1.ResourceList {
	set, err := cpuset.Parse(r.ReservedCPUs)
	if err != nil || set.IsEmpty() {
		return nil
	}
	return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(set.Size()), resource.DecimalSI)}
}

// topologyManager is the topology manager's policy and scope, defaults
// applied.
func (r ResourceSettings) topologyManager() (policy, scope string) {
	return cmp.Or(r.TopologyManagerPolicy, topology.PolicyNone), cmp.Or(r.TopologyManagerScope, topology.ScopeContainer)
}

// DefaultSettings are the upstream defaults knode documents.
func DefaultSettings() Settings {
	return Settings{
		NodeMonitorPeriod:                   nodelifecycle.DefaultNodeMonitorPeriod,
		NodeMonitorGracePeriod:              nodelifecycle.DefaultNodeMonitorGracePeriod,
		NodeStartupGracePeriod:              nodelifecycle.DefaultNodeStartupGracePeriod,
		NodeEvictionRate:                    nodelifecycle.DefaultNodeEvictionRate,
		SecondaryNodeEvictionRate:           nodelifecycle.DefaultSecondaryNodeEvictionRate,
		UnhealthyZoneThreshold:              nodelifecycle.DefaultUnhealthyZoneThreshold,
		LargeClusterSizeThreshold:           nodelifecycle.DefaultLargeClusterSizeThreshold,
		TerminatedPodGCThreshold:            podgc.DefaultTerminatedPodThreshold,
		DefaultNotReadyTolerationSeconds:    defaulttolerationseconds.DefaultSeconds,
		DefaultUnreachableTolerationSeconds: defaulttolerationseconds.DefaultSeconds,
		NodeLeaseDurationSeconds:            lease.DefaultDurationSeconds,
		NodeStatusUpdateFrequency:           agent.DefaultNodeStatusUpdateFrequency,
		NodeStatusReportFrequency:           agent.DefaultNodeStatusReportFrequency,
	}
}

// flags binds s to a flag set with the upstream names.
func (s *Settings) flags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("set", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.DurationVar(&s.NodeMonitorPeriod, "node-monitor-period", s.NodeMonitorPeriod, "")
	fs.DurationVar(&s.NodeMonitorGracePeriod, "node-monitor-grace-period", s.NodeMonitorGracePeriod, "")
	fs.DurationVar(&s.NodeStartupGracePeriod, "node-startup-grace-period", s.NodeStartupGracePeriod, "")
	fs.Float64Var(&s.NodeEvictionRate, "node-eviction-rate", s.NodeEvictionRate, "")
	fs.Float64Var(&s.SecondaryNodeEvictionRate, "secondary-node-eviction-rate", s.SecondaryNodeEvictionRate, "")
	fs.Float64Var(&s.UnhealthyZoneThreshold, "unhealthy-zone-threshold", s.UnhealthyZoneThreshold, "")
	fs.IntVar(&s.LargeClusterSizeThreshold, "large-cluster-size-threshold", s.LargeClusterSizeThreshold, "")
	fs.BoolVar(&s.DisableForceDetachOnTimeout, "disable-force-detach-on-timeout", s.DisableForceDetachOnTimeout, "")
	fs.IntVar(&s.TerminatedPodGCThreshold, "terminated-pod-gc-threshold", s.TerminatedPodGCThreshold, "")
	fs.Int64Var(&s.DefaultNotReadyTolerationSeconds, "default-not-ready-toleration-seconds", s.DefaultNotReadyTolerationSeconds, "")
	fs.Int64Var(&s.DefaultUnreachableTolerationSeconds, "default-unreachable-toleration-seconds", s.DefaultUnreachableTolerationSeconds, "")
	fs.Int32Var(&s.NodeLeaseDurationSeconds, "node-lease-duration-seconds", s.NodeLeaseDurationSeconds, "")
	fs.DurationVar(&s.NodeStatusUpdateFrequency, "node-status-update-frequency", s.NodeStatusUpdateFrequency, "")
	fs.DurationVar(&s.NodeStatusReportFrequency, "node-status-report-frequency", s.NodeStatusReportFrequency, "")
	fs.DurationVar(&s.Shutdown.GracePeriod, "shutdown-grace-period", s.Shutdown.GracePeriod, "")
	fs.DurationVar(&s.Shutdown.CriticalPods, "shutdown-grace-period-critical-pods", s.Shutdown.CriticalPods, "")
	fs.Var((*byPriority)(&s.Shutdown.ByPriority), "shutdown-grace-period-by-pod-priority", "")
	fs.StringVar(&s.Resources.CPUManagerPolicy, "cpu-manager-policy", s.Resources.CPUManagerPolicy, "")
	fs.StringVar(&s.Resources.ReservedCPUs, "reserved-cpus", s.Resources.ReservedCPUs, "")
	fs.StringVar(&s.Resources.TopologyManagerPolicy, "topology-manager-policy", s.Resources.TopologyManagerPolicy, "")
	fs.StringVar(&s.Resources.TopologyManagerScope, "topology-manager-scope", s.Resources.TopologyManagerScope, "")
	return fs
}

// byPriority is shutdownGracePeriodByPodPriority written as a flag value:
// <priority>:<seconds> pairs separated by commas, such as
// 0:20,100000:10,2000000000:10.
type byPriority []kubeletconfig.ShutdownGracePeriodByPodPriority

func (b *byPriority) String() string {
	parts := make([]string, len(*b))
	for i, p := range *b {
		parts[i] = fmt.Sprintf("%d:%d", p.Priority, p.ShutdownGracePeriodSeconds)
	}
	return strings.Join(parts, ",")
}

func (b *byPriority) Set(v string) error {
	var out byPriority
	for _, part := range strings.Split(v, ",") {
		prio, secs, ok := strings.Cut(part, ":")
		p, perr := strconv.ParseInt(prio, 10, 32)
		s, serr := strconv.ParseInt(secs, 10, 64)
		if !ok || perr != nil || serr != nil {
			return fmt.Errorf("entry %q: must be <priority>:<seconds>, a 32-bit integer and a whole number of seconds (as in 0:20,2000000000:10)", part)
		}
		out = append(out, kubeletconfig.ShutdownGracePeriodByPodPriority{Priority: int32(p), ShutdownGracePeriodSeconds: s})
	}
	*b = out
	return nil
}

func (b *byPriority) Type() string { return "priority:seconds,..." }

// Set changes one setting by its flag name, with the flag's syntax, and
// checks the rules that concern that setting alone. The shutdown settings
// depend on one another, and so do cpu-manager-policy=static and
// reserved-cpus, so those rules are checked only by Validate, once all are
// set.
func (s *Settings) Set(name, value string) error {
	fs := s.flags()
	f := fs.Lookup(name)
	if f == nil {
		var names []string
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
		return fmt.Errorf("unknown setting %q (known: %v)", name, names)
	}
	if err := fs.Set(name, value); err != nil {
		return fmt.Errorf("%s=%s: %w", name, value, err)
	}
	return s.validateEach()
}

// Validate checks what the components would refuse, naming the settings.
func (s *Settings) Validate() error {
	if err := s.validateEach(); err != nil {
		return err
	}
	if err := s.Shutdown.Validate(); err != nil {
		return fmt.Errorf("%s: %w", s.shutdownKeys(), err)
	}
	// validateEach has checked each alone: what is left is the static
	// policy without a reservation.
	if err := s.Resources.cpuManager().Validate(); err != nil {
		return fmt.Errorf("cpu-manager-policy=%s: %w: set reserved-cpus (such as reserved-cpus=0), the CPUs kept for the system", s.Resources.CPUManagerPolicy, err)
	}
	return nil
}

// shutdownKeys names the shutdown settings in effect as key=value pairs,
// for errors.
func (s *Settings) shutdownKeys() string {
	fs := s.flags()
	var out []string
	for _, name := range []string{"shutdown-grace-period", "shutdown-grace-period-critical-pods", "shutdown-grace-period-by-pod-priority"} {
		f := fs.Lookup(name)
		if v := f.Value.String(); v != "" && v != "0s" {
			out = append(out, name+"="+v)
		}
	}
	return "shutdown settings " + strings.Join(out, " ")
}

// validateEach checks the rules of each setting alone, naming the flag.
func (s *Settings) validateEach() error {
	positive := []struct {
		name string
		v    time.Duration
	}{
		{"node-monitor-period", s.NodeMonitorPeriod},
		{"node-monitor-grace-period", s.NodeMonitorGracePeriod},
		{"node-startup-grace-period", s.NodeStartupGracePeriod},
		{"node-status-update-frequency", s.NodeStatusUpdateFrequency},
		{"node-status-report-frequency", s.NodeStatusReportFrequency},
	}
	for _, p := range positive {
		if p.v <= 0 {
			return fmt.Errorf("%s=%v: must be greater than 0", p.name, p.v)
		}
	}
	switch {
	case s.NodeEvictionRate < 0:
		return fmt.Errorf("node-eviction-rate=%v: must not be negative", s.NodeEvictionRate)
	case s.SecondaryNodeEvictionRate < 0:
		return fmt.Errorf("secondary-node-eviction-rate=%v: must not be negative", s.SecondaryNodeEvictionRate)
	case s.UnhealthyZoneThreshold <= 0 || s.UnhealthyZoneThreshold > 1:
		return fmt.Errorf("unhealthy-zone-threshold=%v: must be greater than 0 and at most 1", s.UnhealthyZoneThreshold)
	case s.LargeClusterSizeThreshold < 0:
		return fmt.Errorf("large-cluster-size-threshold=%v: must not be negative", s.LargeClusterSizeThreshold)
	case s.TerminatedPodGCThreshold < 0:
		return fmt.Errorf("terminated-pod-gc-threshold=%v: must not be negative (0 turns the deletion of finished pods off)", s.TerminatedPodGCThreshold)
	case s.DefaultNotReadyTolerationSeconds < 0:
		return fmt.Errorf("default-not-ready-toleration-seconds=%v: must not be negative", s.DefaultNotReadyTolerationSeconds)
	case s.DefaultUnreachableTolerationSeconds < 0:
		return fmt.Errorf("default-unreachable-toleration-seconds=%v: must not be negative", s.DefaultUnreachableTolerationSeconds)
	case s.NodeLeaseDurationSeconds <= 0:
		return fmt.Errorf("node-lease-duration-seconds=%v: must be greater than 0", s.NodeLeaseDurationSeconds)
	}
	return s.Resources.validateEach()
}

// validateEach checks each resource setting alone with the managers' own
// rules, the others at their defaults. The static policy's need of a
// reservation is the one rule across them; Settings.Validate checks it.
func (r ResourceSettings) validateEach() error {
	if p := r.CPUManagerPolicy; p != "" && p != cpumanager.PolicyStatic {
		if err := (cpumanager.Config{Policy: p}).Validate(); err != nil {
			return fmt.Errorf("cpu-manager-policy=%s: %w (want %s or %s)", p, err, cpumanager.PolicyNone, cpumanager.PolicyStatic)
		}
	}
	if c := r.ReservedCPUs; c != "" {
		if err := (cpumanager.Config{ReservedSystemCPUs: c}).Validate(); err != nil {
			return fmt.Errorf("reserved-cpus=%s: %w (want a cpuset such as 0,4 or 0-1)", c, err)
		}
	}
	// The machines' NUMA node count is checked against the policy by each
	// agent's container manager, which knows its machine.
	if p := r.TopologyManagerPolicy; p != "" {
		if err := topology.ValidateConfig(p, topology.ScopeContainer, nil, 0); err != nil {
			return fmt.Errorf("topology-manager-policy=%s: %w", p, err)
		}
	}
	if sc := r.TopologyManagerScope; sc != "" {
		if err := topology.ValidateConfig(topology.PolicyNone, sc, nil, 0); err != nil {
			return fmt.Errorf("topology-manager-scope=%s: %w", sc, err)
		}
	}
	return nil
}
