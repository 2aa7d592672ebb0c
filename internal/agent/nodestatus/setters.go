package nodestatus

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	netutils "k8s.io/utils/net"

	"knode/internal/agent/host"
	"knode/internal/agent/swap"
)

// NodeAddress sets status.addresses and the provided-node-ip annotation.
//
// A specified --node-ip (not 0.0.0.0 or ::) must pass ValidateNodeIP. With
// --cloud-provider=external the annotation carries the specified IPs, and
// the addresses are left to the cloud provider once it has set any; before
// that, a node without --node-ip reports only its Hostname and one with
// --node-ip continues as below. Without a cloud provider:
//   - two specified IPs give [InternalIP ip1, InternalIP ip2, Hostname];
//   - otherwise one InternalIP is chosen, in order: the specified IP; the
//     hostname if it is an IP; the first valid DNS address of the node name
//     of the preferred family (else of the other); the default-route
//     address (see defaultAddress). The preferred family is IPv4 unless
//     --node-ip is an IPv6 address or ::.
func NodeAddress(cfg Config) Setter {
	cfg = cfg.withDefaults()
	var primary, secondary net.IP
	if len(cfg.NodeIPs) > 0 {
		primary = cfg.NodeIPs[0]
	}
	if len(cfg.NodeIPs) > 1 {
		secondary = cfg.NodeIPs[1]
	}
	preferIPv4 := primary == nil || primary.To4() != nil
	primarySpecified := primary != nil && !primary.IsUnspecified()
	secondarySpecified := secondary != nil && !secondary.IsUnspecified()
	external := cfg.CloudProvider == CloudProviderExternal

	return func(node *corev1.Node, facts Facts, _ time.Time) error {
		network, networkErr := facts.Host.Network, facts.Host.Err(host.FactNetwork)
		validate := func(ip net.IP) error {
			if networkErr != nil {
				return networkErr
			}
			return ValidateNodeIP(ip, network)
		}
		if primarySpecified {
			if err := validate(primary); err != nil {
				return fmt.Errorf("failed to validate nodeIP: %v", err)
			}
		}
		if secondarySpecified {
			if err := validate(secondary); err != nil {
				return fmt.Errorf("failed to validate secondaryNodeIP: %v", err)
			}
		}

		if external && primarySpecified {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			value := primary.String()
			if secondarySpecified {
				value += "," + secondary.String()
			}
			node.Annotations[AnnotationProvidedNodeIP] = value
		} else if node.Annotations != nil {
			delete(node.Annotations, AnnotationProvidedNodeIP)
		}

		if external {
			if len(node.Status.Addresses) > 0 {
				return nil
			}
			if primary == nil {
				node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: cfg.Hostname}}
				return nil
			}
		}

		if primarySpecified && secondarySpecified {
			node.Status.Addresses = []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: primary.String()},
				{Type: corev1.NodeInternalIP, Address: secondary.String()},
				{Type: corev1.NodeHostName, Address: cfg.Hostname},
			}
			return nil
		}

		var ip net.IP
		var err error
		switch {
		case primarySpecified:
			ip = primary
		case netutils.ParseIPSloppy(cfg.Hostname) != nil:
			ip = netutils.ParseIPSloppy(cfg.Hostname)
		default:
			if cfg.LookupIP != nil {
				addrs, _ := cfg.LookupIP(node.Name)
				for _, a := range addrs {
					if err = validate(a); err != nil {
						continue
					}
					if (a.To4() != nil) == preferIPv4 {
						ip = a
						break
					}
					if ip == nil {
						ip = a
					}
				}
			}
			if ip == nil {
				if networkErr != nil {
					err = networkErr
				} else {
					ip, err = defaultAddress(network, preferIPv4)
				}
			}
		}
		if ip == nil {
			return fmt.Errorf("can't get ip address of node %s. error: %v", node.Name, err)
		}
		node.Status.Addresses = []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip.String()},
			{Type: corev1.NodeHostName, Address: cfg.Hostname},
		}
		return nil
	}
}

// MachineInfo sets capacity, allocatable, the machine, system and boot
// IDs, and nodeInfo.swap (the machine's SwapTotal, 0 without swap).
//
// Capacity: cpu (online CPUs), memory (MemTotal), hugepages-<size> for every
// size the machine has (sizes it no longer has are removed),
// ephemeral-storage (the capacity of the root dir's filesystem), and pods =
// MaxPods. A cpu or memory reading that failed reports 0, as upstream does
// when machine info is unavailable; a failed filesystem or hugepages
// reading leaves those entries as they were.
//
// Allocatable: for each capacity entry, capacity − systemReserved −
// kubeReserved − the hard eviction reservation (memory.available for
// memory, nodefs.available for ephemeral-storage, percentages of capacity),
// clamped at 0; memory is further reduced by the hugepage total.
func MachineInfo(cfg Config) Setter {
	cfg = cfg.withDefaults()
	return func(node *corev1.Node, facts Facts, _ time.Time) error {
		f := facts.Host
		st := &node.Status
		if st.Capacity == nil {
			st.Capacity = corev1.ResourceList{}
		}
		cpus := 0
		if f.Err(host.FactCPUs) == nil {
			cpus = f.CPUs
		}
		st.Capacity[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(cpus)*1000, resource.DecimalSI)
		var memory int64
		if f.Err(host.FactMemory) == nil {
			memory = clampInt64(f.Memory.Capacity)
			st.NodeInfo.Swap = swap.NodeSwapStatus(clampInt64(f.Memory.SwapTotal), f.Memory.SwapTotal > 0)
		}
		st.Capacity[corev1.ResourceMemory] = *resource.NewQuantity(memory, resource.BinarySI)
		st.Capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(cfg.MaxPods), resource.DecimalSI)

		if f.Err(host.FactHugepages) == nil {
			current := map[corev1.ResourceName]bool{}
			for _, hp := range f.Hugepages {
				size := clampInt64(hp.PageSize)
				name := corev1.ResourceName(corev1.ResourceHugePagesPrefix + resource.NewQuantity(size, resource.BinarySI).String())
				st.Capacity[name] = *resource.NewQuantity(size*clampInt64(hp.Pages), resource.BinarySI)
				current[name] = true
			}
			for name := range st.Capacity {
				if isHugePages(name) && !current[name] {
					delete(st.Capacity, name)
				}
			}
		}
		if f.Err(host.FactRootFS) == nil {
			st.Capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(clampInt64(f.RootFS.Capacity), resource.BinarySI)
		}
		if f.Err(host.FactIDs) == nil {
			st.NodeInfo.MachineID = f.IDs.MachineID
			st.NodeInfo.SystemUUID = f.IDs.SystemUUID
			st.NodeInfo.BootID = f.IDs.BootID
		}

		if st.Allocatable == nil {
			st.Allocatable = corev1.ResourceList{}
		}
		for name := range st.Allocatable {
			if _, ok := st.Capacity[name]; !ok && isHugePages(name) {
				delete(st.Allocatable, name)
			}
		}
		reserved := reservation(cfg, st.Capacity)
		for name, c := range st.Capacity {
			v := c.DeepCopy()
			if r, ok := reserved[name]; ok {
				v.Sub(r)
			}
			if v.Sign() < 0 {
				v.Set(0)
			}
			st.Allocatable[name] = v
		}
		for name, c := range st.Capacity {
			if !isHugePages(name) {
				continue
			}
			m := st.Allocatable[corev1.ResourceMemory]
			m.Sub(c)
			if m.Sign() < 0 {
				m.Set(0)
			}
			st.Allocatable[corev1.ResourceMemory] = m
		}
		return nil
	}
}

// reservation is what allocatable holds back from each capacity entry.
func reservation(cfg Config, capacity corev1.ResourceList) corev1.ResourceList {
	eviction := evictionReservation(cfg.EvictionHard, capacity)
	out := corev1.ResourceList{}
	for name := range capacity {
		total := resource.NewQuantity(0, resource.DecimalSI)
		for _, list := range []corev1.ResourceList{cfg.SystemReserved, cfg.KubeReserved, eviction} {
			if q, ok := list[name]; ok {
				total.Add(q)
			}
		}
		if !total.IsZero() {
			out[name] = *total
		}
	}
	return out
}

// isHugePages reports whether name is a hugepages-<size> resource.
func isHugePages(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// VersionInfo sets nodeInfo's kernelVersion, osImage,
// containerRuntimeVersion ("<name>://<version>", version "Unknown" when
// empty) and kubeletVersion, and clears kubeProxyVersion, as upstream does
// with DisableNodeKubeProxyVersion on. A failed OS reading returns
// "error getting version info: <err>" and changes nothing.
func VersionInfo(cfg Config) Setter {
	cfg = cfg.withDefaults()
	runtimeVersion := cfg.RuntimeVersion
	if runtimeVersion == "" {
		runtimeVersion = "Unknown"
	}
	return func(node *corev1.Node, facts Facts, _ time.Time) error {
		if err := facts.Host.Err(host.FactOS); err != nil {
			return fmt.Errorf("error getting version info: %v", err)
		}
		info := &node.Status.NodeInfo
		info.KernelVersion = facts.Host.OS.KernelVersion
		info.OSImage = facts.Host.OS.OSImage
		info.ContainerRuntimeVersion = fmt.Sprintf("%s://%s", cfg.RuntimeName, runtimeVersion)
		info.KubeletVersion = cfg.KubeletVersion
		info.KubeProxyVersion = ""
		return nil
	}
}

// DaemonEndpoints sets status.daemonEndpoints.kubeletEndpoint.Port.
func DaemonEndpoints(cfg Config) Setter {
	cfg = cfg.withDefaults()
	return func(node *corev1.Node, _ Facts, _ time.Time) error {
		node.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{
			KubeletEndpoint: corev1.DaemonEndpoint{Port: cfg.KubeletPort},
		}
		return nil
	}
}

// GoRuntime sets nodeInfo.operatingSystem and architecture from the host's
// OS facts, falling back to the agent's own GOOS and GOARCH (the values the
// Linux host reports) when the OS reading failed or left them empty.
func GoRuntime() Setter {
	return func(node *corev1.Node, facts Facts, _ time.Time) error {
		goos, goarch := runtime.GOOS, runtime.GOARCH
		if facts.Host.Err(host.FactOS) == nil {
			if facts.Host.OS.OperatingSystem != "" {
				goos = facts.Host.OS.OperatingSystem
			}
			if facts.Host.OS.Architecture != "" {
				goarch = facts.Host.OS.Architecture
			}
		}
		node.Status.NodeInfo.OperatingSystem = goos
		node.Status.NodeInfo.Architecture = goarch
		return nil
	}
}

// pressureStrings are the reasons and messages of one pressure condition.
type pressureStrings struct {
	condition               corev1.NodeConditionType
	trueReason, trueMessage string
	falseReason, falseMsg   string
}

var (
	memoryPressure = pressureStrings{
		condition:   corev1.NodeMemoryPressure,
		trueReason:  "KubeletHasInsufficientMemory",
		trueMessage: "kubelet has insufficient memory available",
		falseReason: "KubeletHasSufficientMemory",
		falseMsg:    "kubelet has sufficient memory available",
	}
	diskPressure = pressureStrings{
		condition:   corev1.NodeDiskPressure,
		trueReason:  "KubeletHasDiskPressure",
		trueMessage: "kubelet has disk pressure",
		falseReason: "KubeletHasNoDiskPressure",
		falseMsg:    "kubelet has no disk pressure",
	}
	pidPressure = pressureStrings{
		condition:   corev1.NodePIDPressure,
		trueReason:  "KubeletHasInsufficientPID",
		trueMessage: "kubelet has insufficient PID available",
		falseReason: "KubeletHasSufficientPID",
		falseMsg:    "kubelet has sufficient PID available",
	}
)

// MemoryPressureCondition sets MemoryPressure from the memory.available
// thresholds of cfg.EvictionHard.
func MemoryPressureCondition(cfg Config) Setter { return pressureCondition(cfg, memoryPressure) }

// DiskPressureCondition sets DiskPressure from the nodefs, imagefs and
// containerfs thresholds, all measured on the root dir's filesystem.
func DiskPressureCondition(cfg Config) Setter { return pressureCondition(cfg, diskPressure) }

// PIDPressureCondition sets PIDPressure from the pid.available thresholds.
func PIDPressureCondition(cfg Config) Setter { return pressureCondition(cfg, pidPressure) }

// pressureCondition is the shared rule of the three pressure conditions:
// lastHeartbeatTime is now on every sync; a missing condition starts as
// Unknown, so the first verdict is a transition; status, reason, message
// and lastTransitionTime change only when the verdict changes. When the
// reading behind the condition failed, the previous verdict stands (False
// for a condition that had none).
func pressureCondition(cfg Config, s pressureStrings) Setter {
	cfg = cfg.withDefaults()
	return func(node *corev1.Node, facts Facts, now time.Time) error {
		t := metav1.NewTime(now)
		cond := findCondition(node.Status.Conditions, s.condition)
		if cond == nil {
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
				Type:   s.condition,
				Status: corev1.ConditionUnknown,
			})
			cond = &node.Status.Conditions[len(node.Status.Conditions)-1]
		}
		cond.LastHeartbeatTime = t
		under, known := pressure(s.condition, cfg.EvictionHard, facts.Host)
		if !known {
			under = cond.Status == corev1.ConditionTrue
		}
		switch {
		case under && cond.Status != corev1.ConditionTrue:
			cond.Status, cond.Reason, cond.Message = corev1.ConditionTrue, s.trueReason, s.trueMessage
			cond.LastTransitionTime = t
		case !under && cond.Status != corev1.ConditionFalse:
			cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, s.falseReason, s.falseMsg
			cond.LastTransitionTime = t
		}
		return nil
	}
}

// ReadyCondition sets Ready. It is False with reason KubeletNotReady when
// facts.ReadyErrors has an error or capacity lacks cpu, memory, pods or
// ephemeral-storage (message: one error bare, several as "[e1, e2]");
// otherwise True, KubeletReady, "kubelet is posting ready status".
// Facts.SoftRequirements appends ". WARNING: <text>". lastHeartbeatTime is
// now; lastTransitionTime is now for a new condition or a status change
// and kept otherwise. Reason and message always reflect this sync.
func ReadyCondition() Setter {
	return func(node *corev1.Node, facts Facts, now time.Time) error {
		t := metav1.NewTime(now)
		errs := append([]error(nil), facts.ReadyErrors...)
		var missing []string
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
			if _, ok := node.Status.Capacity[name]; !ok {
				missing = append(missing, string(name))
			}
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("missing node capacity for resources: %s", strings.Join(missing, ", ")))
		}
		next := corev1.NodeCondition{
			Type:              corev1.NodeReady,
			Status:            corev1.ConditionTrue,
			Reason:            "KubeletReady",
			Message:           "kubelet is posting ready status",
			LastHeartbeatTime: t,
		}
		if agg := utilerrors.NewAggregate(errs); agg != nil {
			next.Status, next.Reason, next.Message = corev1.ConditionFalse, "KubeletNotReady", agg.Error()
		}
		if facts.SoftRequirements != nil {
			next.Message = fmt.Sprintf("%s. WARNING: %s", next.Message, facts.SoftRequirements.Error())
		}
		if cond := findCondition(node.Status.Conditions, corev1.NodeReady); cond != nil {
			next.LastTransitionTime = t
			if cond.Status == next.Status {
				next.LastTransitionTime = cond.LastTransitionTime
			}
			*cond = next
			return nil
		}
		next.LastTransitionTime = t
		node.Status.Conditions = append(node.Status.Conditions, next)
		return nil
	}
}

// DeviceResources puts the device plugins' resources into capacity and
// allocatable (devicemanager.Manager.Capacity): capacity counts every
// device, allocatable the healthy ones, and a resource whose plugin is gone
// for good is reported as 0 in both, as upstream does, so that pods asking
// for it stop being scheduled here. It runs after MachineInfo, which would
// otherwise make a device resource wholly allocatable.
func DeviceResources(node *corev1.Node, capacity, allocatable map[corev1.ResourceName]int64, removed []string) {
	st := &node.Status
	if st.Capacity == nil {
		st.Capacity = corev1.ResourceList{}
	}
	if st.Allocatable == nil {
		st.Allocatable = corev1.ResourceList{}
	}
	for name, n := range capacity {
		st.Capacity[name] = *resource.NewQuantity(n, resource.DecimalSI)
		st.Allocatable[name] = *resource.NewQuantity(allocatable[name], resource.DecimalSI)
	}
	for _, name := range removed {
		st.Capacity[corev1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
		st.Allocatable[corev1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
}
