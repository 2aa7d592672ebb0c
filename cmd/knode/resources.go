package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/cm"
	"knode/internal/agent/devicemanager"
	"knode/internal/agent/host/linux"
	"knode/internal/agent/nodestatus"
	"knode/internal/agent/options"
	"knode/internal/agent/swap"
	"knode/internal/agent/topology"
)

// ReasonCgroupLimitsNotEnforced is the Warning event an agent records on its
// Node when it cannot write some cgroup controllers.
const ReasonCgroupLimitsNotEnforced = "CgroupLimitsNotEnforced"

// nodeResources is the agent's resource management: the cgroups it
// writes, the device plugins and the container manager that decides with
// them.
type nodeResources struct {
	cgroups *cgroups.Manager // nil: no cgroups are written
	devices *devicemanager.Manager
	manager *cm.Manager
	// events are recorded on the Node at start (what is not enforced).
	events []nodestatus.Event
}

// checkSwap refuses to go on when swap is on and failSwapOn holds, and
// returns the machine's swap in bytes.
func checkSwap(s options.Settings, log *slog.Logger) (int64, error) {
	on, bytes, err := swap.ReadProcSwaps("")
	if err != nil {
		log.Warn("reading /proc/swaps failed; taking the machine to have no swap", "err", err)
		return 0, nil
	}
	if err := swap.CheckFailSwapOn(s.Resources.FailSwapOn, on); err != nil {
		return 0, err
	}
	if !on {
		return 0, nil
	}
	return bytes, nil
}

// newNodeResources reads the machine's topology (under TopologyRoot when
// set, for tests), sets up cgroups,
// starts the device manager on <root-dir>/device-plugins and builds the
// container manager. The device manager runs until ctx ends.
func newNodeResources(ctx context.Context, s options.Settings, h *linux.Host, swapBytes int64, metrics prometheus.Registerer, log *slog.Logger) (*nodeResources, error) {
	r := s.Resources
	topoHost := h
	if r.TopologyRoot != "" {
		topoHost = linux.New(linux.Config{Root: r.TopologyRoot})
	}
	topo, err := topoHost.Topology()
	if err != nil {
		return nil, fmt.Errorf("reading the machine's CPU and NUMA topology: %w", err)
	}
	mem, err := h.Memory()
	if err != nil {
		return nil, fmt.Errorf("reading the machine's memory: %w", err)
	}
	res := &nodeResources{}
	var openErr error
	res.cgroups, openErr = openCgroups()
	if ev := cgroupsWarning(res.cgroups, openErr); ev != nil {
		log.Warn(ev.Message)
		res.events = append(res.events, *ev)
	}
	res.devices, err = devicemanager.New(devicemanager.Config{RootDir: s.RootDir, NUMANodes: topology.NodeIDsOf(topo), Logger: log})
	if err != nil {
		return nil, err
	}
	if err := res.devices.Start(ctx); err != nil {
		return nil, fmt.Errorf("device plugins: %w", err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(len(topo.CPUs)), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(mem.Capacity), resource.BinarySI),
	}
	memCfg := r.MemoryManager
	memCfg.NodeAllocatableReservation = withEvictionMemory(memCfg.NodeAllocatableReservation, s.EvictionHard, int64(mem.Capacity))
	res.manager, err = cm.New(cm.Config{
		RootDir:                      s.RootDir,
		Topology:                     topo,
		Capacity:                     capacity,
		KubeReserved:                 s.KubeReserved,
		SystemReserved:               s.SystemReserved,
		EnforceNodeAllocatable:       r.EnforceNodeAllocatable,
		CgroupsPerQOS:                r.CgroupsPerQOS,
		CgroupRoot:                   r.CgroupRoot,
		Cgroups:                      res.cgroups,
		CPUCFSQuota:                  r.CPUCFSQuota,
		CPUCFSQuotaPeriod:            r.CPUCFSQuotaPeriod,
		PodPidsLimit:                 r.PodPidsLimit,
		CPUManager:                   r.CPUManager,
		MemoryManager:                memCfg,
		TopologyManagerPolicy:        r.TopologyManagerPolicy,
		TopologyManagerScope:         r.TopologyManagerScope,
		TopologyManagerPolicyOptions: r.TopologyManagerPolicyOptions,
		Devices:                      res.devices,
		SwapBehavior:                 r.SwapBehavior,
		NodeSwapBytes:                swapBytes,
		Metrics:                      metrics,
		Logger:                       log,
	})
	if err != nil {
		res.devices.Stop()
		return nil, err
	}
	metrics.MustRegister(swap.UsageCollector{Memory: h.Memory})
	log.Info("node resources", "cgroups", cgroupsMode(res.cgroups), "cpuManagerPolicy", r.CPUManager.Policy,
		"memoryManagerPolicy", r.MemoryManager.Policy, "topologyManagerPolicy", r.TopologyManagerPolicy, "swapBytes", swapBytes)
	return res, nil
}

// cgroupsWarning is the Warning event that says which limits the agent
// cannot enforce: none when m could not be opened (err), the missing
// controllers' otherwise; nil when every limit is enforced.
func cgroupsWarning(m *cgroups.Manager, err error) *nodestatus.Event {
	var msg string
	switch {
	case err != nil:
		msg = fmt.Sprintf("cgroups cannot be written (%v): no cpu, cpuset, memory or pids limit of any pod is enforced", err)
	case m.MissingWarning() != "":
		msg = fmt.Sprintf("cgroup controllers %v cannot be written; %s", m.Missing(), m.MissingWarning())
	default:
		return nil
	}
	return &nodestatus.Event{Type: corev1.EventTypeWarning, Reason: ReasonCgroupLimitsNotEnforced, Message: msg}
}

// openCgroups detects the machine's cgroup hierarchy and opens it.
func openCgroups() (*cgroups.Manager, error) {
	mode, err := cgroups.Detect(cgroups.DefaultRoot)
	if err != nil {
		return nil, err
	}
	return cgroups.New(cgroups.Config{Mode: mode})
}

func cgroupsMode(m *cgroups.Manager) string {
	if m == nil {
		return "off"
	}
	return m.Mode().String()
}

// withEvictionMemory adds the hard memory.available threshold to the
// memory manager's reservation, as the kubelet's node allocatable
// reservation holds it.
func withEvictionMemory(reserved corev1.ResourceList, hard []nodestatus.Threshold, memory int64) corev1.ResourceList {
	if hard == nil {
		hard = nodestatus.DefaultEvictionHard()
	}
	out := reserved.DeepCopy()
	for _, th := range hard {
		if th.Signal != nodestatus.SignalMemoryAvailable {
			continue
		}
		if out == nil {
			out = corev1.ResourceList{}
		}
		sum := out[corev1.ResourceMemory]
		sum.Add(th.Value(memory))
		out[corev1.ResourceMemory] = sum
	}
	return out
}
