// Package nodestatus computes the status the node agent reports for its
// Node, as the kubelet's status setters do: addresses, capacity and
// allocatable, nodeInfo, daemon endpoints, and the Ready, MemoryPressure,
// DiskPressure and PIDPressure conditions.
//
// Every setter is pure. It reads the Node it is given, a Facts snapshot and
// now, and changes only the fields it owns. It does no I/O and reads no
// clock, so the agent, the tests and the simulator get the same result from
// the same inputs.
//
// What callers must do: take a host.Snapshot once per sync, add what the
// agent knows of its own health (Facts.ReadyErrors), run Setters(cfg) in
// order on a copy of the current Node (Apply does this), and post the
// result when Changed says so or the report interval has passed. Events
// returns the node events upstream records for the same change.
//
// What it does not do: talk to the API server, register the Node, set
// labels or taints, or keep state between syncs. Two upstream behaviours
// that need such state are left out: the eviction manager's 5 m pressure
// transition period (a pressure condition clears on the first sync below
// every threshold) and images/volumes in status.
//
// Also here: ParseNodeIPs for --node-ip and ParseThresholds /
// ThresholdsFromMap for evictionHard.
package nodestatus

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"knode/internal/agent/host"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxPods     = 110
	DefaultKubeletPort = 10250
)

// CloudProviderExternal is the one --cloud-provider value besides "" the
// agent accepts: an external cloud-controller-manager owns the addresses.
const CloudProviderExternal = "external"

// AnnotationProvidedNodeIP carries the --node-ip value to an external cloud
// provider.
const AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

// Config is what the setters need to know about the agent. It is fixed for
// the agent's life; what changes between syncs is in Facts.
type Config struct {
	// NodeName is the Node's name. Required.
	NodeName string
	// Hostname is the name reported as the Hostname address: the
	// --hostname-override or the machine's hostname, lowercased. Required.
	Hostname string
	// NodeIPs is the parsed --node-ip (see ParseNodeIPs): nil, one IP, or a
	// dual-stack pair. 0.0.0.0 or :: means "detect, preferring this family".
	NodeIPs []net.IP
	// CloudProvider is "" or CloudProviderExternal.
	CloudProvider string
	// LookupIP resolves a name in DNS, for the third step of address
	// detection. Nil skips that step.
	LookupIP func(name string) ([]net.IP, error)

	// MaxPods is the pods capacity. Zero means DefaultMaxPods.
	MaxPods int32
	// KubeReserved and SystemReserved are subtracted from capacity to give
	// allocatable. Names absent from capacity (such as "pid") are ignored.
	KubeReserved   corev1.ResourceList
	SystemReserved corev1.ResourceList
	// EvictionHard are the hard eviction thresholds. Nil means
	// DefaultEvictionHard(); an empty non-nil slice means none.
	EvictionHard []Threshold

	// KubeletVersion is reported as nodeInfo.kubeletVersion ("v1.34.1").
	KubeletVersion string
	// RuntimeName and RuntimeVersion make nodeInfo.containerRuntimeVersion,
	// "<name>://<version>"; an empty version is reported as "Unknown", as
	// upstream does when the runtime does not answer.
	RuntimeName    string
	RuntimeVersion string
	// KubeletPort is status.daemonEndpoints.kubeletEndpoint.Port. Zero means
	// DefaultKubeletPort.
	KubeletPort int32
}

// withDefaults returns c with zero values replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.MaxPods == 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.KubeletPort == 0 {
		c.KubeletPort = DefaultKubeletPort
	}
	if c.EvictionHard == nil {
		c.EvictionHard = DefaultEvictionHard()
	}
	return c
}

// Validate checks the fields a caller could get wrong. Error messages name
// the field and the rule.
func (c Config) Validate() error {
	var errs field.ErrorList
	if c.NodeName == "" {
		errs = append(errs, field.Required(field.NewPath("nodeName"), ""))
	}
	if c.Hostname == "" {
		errs = append(errs, field.Required(field.NewPath("hostname"), ""))
	}
	if c.CloudProvider != "" && c.CloudProvider != CloudProviderExternal {
		errs = append(errs, field.NotSupported(field.NewPath("cloudProvider"), c.CloudProvider, []string{"", CloudProviderExternal}))
	}
	if err := checkNodeIPs(c.NodeIPs); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("nodeIPs"), fmt.Sprint(c.NodeIPs), err.Error()))
	}
	if c.MaxPods < 0 {
		errs = append(errs, field.Invalid(field.NewPath("maxPods"), c.MaxPods, "must be greater than or equal to 0"))
	}
	if c.KubeletPort < 0 || c.KubeletPort > 65535 {
		errs = append(errs, field.Invalid(field.NewPath("kubeletPort"), c.KubeletPort, "must be between 0 and 65535, inclusive"))
	}
	return errs.ToAggregate()
}

// Facts is everything one sync observed, gathered before the setters run.
type Facts struct {
	// Host is the machine snapshot (host.Snapshot).
	Host host.Facts
	// ReadyErrors are the problems that keep the node from running pods, in
	// upstream's order: runtime, network, storage, shutdown. Nil entries are
	// skipped; any other makes Ready False with reason KubeletNotReady.
	ReadyErrors []error
	// SoftRequirements, when set, is appended to the Ready message as
	// ". WARNING: <text>" whether Ready is True or False.
	SoftRequirements error
}

// Setter sets the part of node's status (and, for NodeAddress, the one
// annotation) it owns, from facts and now. It may change node even when it
// returns an error. It does no I/O and reads no clock.
type Setter func(node *corev1.Node, facts Facts, now time.Time) error

// Setters returns the setters for cfg in upstream's order: NodeAddress,
// MachineInfo, VersionInfo, DaemonEndpoints, GoRuntime, MemoryPressure,
// DiskPressure, PIDPressure, Ready. Ready must run after MachineInfo, since
// it checks the capacity MachineInfo sets.
func Setters(cfg Config) []Setter {
	return []Setter{
		NodeAddress(cfg),
		MachineInfo(cfg),
		VersionInfo(cfg),
		DaemonEndpoints(cfg),
		GoRuntime(),
		MemoryPressureCondition(cfg),
		DiskPressureCondition(cfg),
		PIDPressureCondition(cfg),
		ReadyCondition(),
	}
}

// Apply runs every setter on node, in order, even after one fails (as the
// kubelet does), and returns the failures joined.
func Apply(setters []Setter, node *corev1.Node, facts Facts, now time.Time) error {
	var errs []error
	for _, set := range setters {
		if err := set(node, facts, now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Changed reports whether after differs from before in anything but the
// conditions' lastHeartbeatTime: the kubelet's test for posting status
// before the report interval has passed. Condition order does not matter.
func Changed(before, after *corev1.NodeStatus) bool {
	if before == nil || after == nil {
		return before != after
	}
	if len(before.Conditions) != len(after.Conditions) {
		return true
	}
	b, a := before.DeepCopy(), after.DeepCopy()
	for _, conds := range [][]corev1.NodeCondition{b.Conditions, a.Conditions} {
		for i := range conds {
			conds[i].LastHeartbeatTime.Time = time.Time{}
		}
	}
	for _, conds := range [][]corev1.NodeCondition{b.Conditions, a.Conditions} {
		sort.SliceStable(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	}
	if !equality.Semantic.DeepEqual(b.Conditions, a.Conditions) {
		return true
	}
	b.Conditions, a.Conditions = nil, nil
	return !equality.Semantic.DeepEqual(b, a)
}

// findCondition returns the first condition of type t, or nil.
func findCondition(conds []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
