package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"knode/internal/agent/devicemanager/checkpoint"
	"knode/internal/agent/topology"
)

// nodeWithoutTopology is the DevicesPerNUMA key of devices without NUMA
// information, as upstream.
const nodeWithoutTopology = -1

// RunOptions is what the plugins asked for a container, merged over its
// resources (in resource-name order; on a conflict the first wins).
type RunOptions struct {
	Envs        map[string]string
	Mounts      []Mount
	Devices     []DeviceSpec
	Annotations map[string]string
	// CDIDevices are fully-qualified CDI device names.
	CDIDevices []string
}

// Mount is a host path to bind into the container.
type Mount struct {
	ContainerPath, HostPath string
	ReadOnly                bool
}

// DeviceSpec is a host device node to expose in the container.
type DeviceSpec struct {
	ContainerPath, HostPath string
	// Permissions are cgroup permissions: any of "r", "w", "m".
	Permissions string
}

// isPluginResourceLocked: a plugin registered the resource (or the
// checkpoint named it). Call with mu held.
func (m *Manager) isPluginResourceLocked(resource string) bool {
	_, ok := m.devices[resource]
	return ok
}

// Allocate allocates devices for every device-plugin resource in the
// container's limits, calls each plugin's Allocate, and records the
// responses (read them with RunOptions) in the checkpoint. A container that
// already holds the same number of devices keeps them. It blocks for the
// plugins' RPCs; calls are serialised.
func (m *Manager) Allocate(pod *corev1.Pod, container *corev1.Container) error {
	m.allocating.Lock()
	defer m.allocating.Unlock()
	for _, rn := range slices.Sorted(maps.Keys(container.Resources.Limits)) {
		resource := string(rn)
		q := container.Resources.Limits[rn]
		needed := int(q.Value())
		m.mu.Lock()
		plugin := m.isPluginResourceLocked(resource)
		m.mu.Unlock()
		if !plugin || needed == 0 {
			continue
		}
		if err := m.allocateResource(pod, container, resource, needed); err != nil {
			return err
		}
	}
	return nil
}

// SetAffinity replaces Config.Affinity, for a caller that builds the
// topology manager after the device manager (the agent's container manager
// does). It waits for an Allocate in progress; the next Allocate uses f.
func (m *Manager) SetAffinity(f func(podUID, container string) topology.Hint) {
	m.allocating.Lock()
	defer m.allocating.Unlock()
	m.cfg.Affinity = f
}

// choice is what allocateResource picked, read under mu.
type choice struct {
	e         *endpoint
	available sets.Set[string]
	// aligned, unaligned and noTopology split available by the hint.
	aligned, unaligned, noTopology sets.Set[string]
	hint                           topology.Hint
}

func (m *Manager) allocateResource(pod *corev1.Pod, container *corev1.Container, resource string, needed int) error {
	podUID := string(pod.UID)
	var hint topology.Hint
	if m.cfg.Affinity != nil {
		hint = m.cfg.Affinity(podUID, container.Name)
	}
	m.mu.Lock()
	if a := m.pods[podUID][container.Name][resource]; a != nil {
		have := len(allocatedIDs(a.devices))
		m.mu.Unlock()
		if have != needed {
			return fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", podUID, container.Name, resource, have, needed)
		}
		return nil
	}
	e := m.endpoints[resource]
	if e == nil {
		m.mu.Unlock()
		return fmt.Errorf("cannot allocate unregistered device %s", resource)
	}
	available := m.availableLocked(resource)
	if available.Len() < needed {
		m.mu.Unlock()
		return fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", resource, needed, available.Len())
	}
	if !e.stopped.IsZero() || e.client == nil {
		m.mu.Unlock()
		return fmt.Errorf("endpoint %s is not running", resource)
	}
	c := choice{e: e, available: available, hint: hint}
	c.aligned, c.unaligned, c.noTopology = m.splitByAffinityLocked(resource, available, hint)
	m.mu.Unlock()

	picked := m.pick(podUID, container.Name, resource, needed, c)
	ids := sets.List(picked)
	ctx, cancel := context.WithTimeout(m.runContext(), m.cfg.CallTimeout)
	resp, err := e.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	cancel()
	if err != nil {
		return fmt.Errorf("allocating %s for pod %q container %q: %w", resource, podUID, container.Name, err)
	}
	if len(resp.ContainerResponses) == 0 {
		return fmt.Errorf("no containers return in allocation response %v", resp)
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	perNUMA := checkpoint.DevicesPerNUMA{}
	for _, id := range ids {
		d := m.devices[resource][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			perNUMA[nodeWithoutTopology] = append(perNUMA[nodeWithoutTopology], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			perNUMA[n.ID] = append(perNUMA[n.ID], id)
		}
	}
	m.setAllocationLocked(podUID, container.Name, resource, &allocation{devices: perNUMA, resp: resp.ContainerResponses[0]})
	m.writeCheckpointLocked()
	return nil
}

// pick chooses needed devices from c: the plugin's preferred allocation
// when it offers one (among the hint-aligned devices when they suffice),
// then aligned devices, devices without topology, and the rest, each in ID
// order.
func (m *Manager) pick(podUID, container, resource string, needed int, c choice) sets.Set[string] {
	picked := sets.New[string]()
	takeFrom := func(from sets.Set[string]) bool {
		for _, id := range sets.List(from) {
			if picked.Len() == needed {
				break
			}
			picked.Insert(id)
		}
		return picked.Len() == needed
	}
	if c.e.opts.GetGetPreferredAllocationAvailable() {
		pool := c.available
		if c.hint.Affinity != nil && c.aligned.Len() >= needed {
			pool = c.aligned
		}
		preferred, err := m.preferred(c.e, pool, needed)
		if err != nil {
			m.log.Warn("GetPreferredAllocation failed; choosing devices without it", "resourceName", resource, "podUID", podUID, "containerName", container, "err", err)
		} else if takeFrom(preferred.Intersection(pool)) {
			return picked
		}
	}
	if c.hint.Affinity == nil {
		takeFrom(c.available)
		return picked
	}
	for _, from := range []sets.Set[string]{c.aligned, c.noTopology, c.unaligned} {
		if takeFrom(from) {
			break
		}
	}
	return picked
}

// preferred calls the plugin's GetPreferredAllocation.
func (m *Manager) preferred(e *endpoint, available sets.Set[string], size int) (sets.Set[string], error) {
	ctx, cancel := context.WithTimeout(m.runContext(), m.cfg.CallTimeout)
	defer cancel()
	resp, err := e.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: sets.List(available),
			AllocationSize:     int32(size),
		}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, fmt.Errorf("no containers return in preferred allocation response %v", resp)
	}
	return sets.New(resp.ContainerResponses[0].DeviceIDs...), nil
}

// runContext is the context of the running manager (background before
// Start).
func (m *Manager) runContext() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx == nil {
		return context.Background()
	}
	return m.ctx
}

// availableLocked is the resource's healthy devices no container holds.
// Call with mu held.
func (m *Manager) availableLocked(resource string) sets.Set[string] {
	taken := m.allocatedLocked(resource)
	free := sets.New[string]()
	for id, d := range m.devices[resource] {
		if d.Health == pluginapi.Healthy && !taken.Has(id) {
			free.Insert(id)
		}
	}
	return free
}

// allocatedLocked is the resource's devices held by containers. Call with
// mu held.
func (m *Manager) allocatedLocked(resource string) sets.Set[string] {
	taken := sets.New[string]()
	for _, cs := range m.pods {
		for _, rs := range cs {
			if a := rs[resource]; a != nil {
				taken.Insert(allocatedIDs(a.devices)...)
			}
		}
	}
	return taken
}

func allocatedIDs(d checkpoint.DevicesPerNUMA) []string {
	ids := sets.New[string]()
	for _, l := range d {
		ids.Insert(l...)
	}
	return sets.List(ids)
}

// splitByAffinityLocked splits devs into those on a NUMA node of the
// hint's affinity, those only on other nodes, and those without topology.
// Without an affinity, all are unaligned. Call with mu held.
func (m *Manager) splitByAffinityLocked(resource string, devs sets.Set[string], hint topology.Hint) (aligned, unaligned, noTopology sets.Set[string]) {
	aligned, unaligned, noTopology = sets.New[string](), sets.New[string](), sets.New[string]()
	for id := range devs {
		nodes := numaNodes(m.devices[resource][id])
		switch {
		case len(nodes) == 0:
			noTopology.Insert(id)
		case hint.Affinity != nil && slices.ContainsFunc(nodes, hint.Affinity.IsSet):
			aligned.Insert(id)
		default:
			unaligned.Insert(id)
		}
	}
	return aligned, unaligned, noTopology
}

// numaNodes is d's NUMA node IDs; nil without topology.
func numaNodes(d *pluginapi.Device) []int {
	if d == nil || d.Topology == nil {
		return nil
	}
	var ids []int
	for _, n := range d.Topology.Nodes {
		ids = append(ids, int(n.ID))
	}
	return ids
}

// setAllocationLocked records a. Call with mu held.
func (m *Manager) setAllocationLocked(podUID, container, resource string, a *allocation) {
	if m.pods[podUID] == nil {
		m.pods[podUID] = map[string]map[string]*allocation{}
	}
	if m.pods[podUID][container] == nil {
		m.pods[podUID][container] = map[string]*allocation{}
	}
	m.pods[podUID][container][resource] = a
}

// RunOptions returns what the plugins answered for the container's
// devices, merged; nil when it holds none. The value is the caller's.
func (m *Manager) RunOptions(podUID, container string) *RunOptions {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.pods[podUID][container]
	if len(rs) == 0 {
		return nil
	}
	opts := &RunOptions{Envs: map[string]string{}, Annotations: map[string]string{}}
	mounts, devices, cdi := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, resource := range slices.Sorted(maps.Keys(rs)) {
		resp := rs[resource].resp
		if resp == nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(resp.Envs)) {
			if _, ok := opts.Envs[k]; !ok {
				opts.Envs[k] = resp.Envs[k]
			}
		}
		for _, k := range slices.Sorted(maps.Keys(resp.Annotations)) {
			if _, ok := opts.Annotations[k]; !ok {
				opts.Annotations[k] = resp.Annotations[k]
			}
		}
		for _, mt := range resp.Mounts {
			if mounts.Has(mt.ContainerPath) {
				continue
			}
			mounts.Insert(mt.ContainerPath)
			opts.Mounts = append(opts.Mounts, Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, ReadOnly: mt.ReadOnly})
		}
		for _, d := range resp.Devices {
			if devices.Has(d.HostPath) {
				continue
			}
			devices.Insert(d.HostPath)
			opts.Devices = append(opts.Devices, DeviceSpec{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
		}
		for _, d := range resp.CdiDevices {
			if !cdi.Has(d.Name) {
				cdi.Insert(d.Name)
				opts.CDIDevices = append(opts.CDIDevices, d.Name)
			}
		}
	}
	return opts
}

// Allocated returns the device IDs of resource held by the container,
// sorted.
func (m *Manager) Allocated(podUID, container, resource string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.pods[podUID][container][resource]; a != nil {
		return allocatedIDs(a.devices)
	}
	return nil
}

// RemovePod frees the devices of the pod and writes the checkpoint.
func (m *Manager) RemovePod(podUID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[podUID]; !ok {
		return
	}
	delete(m.pods, podUID)
	m.writeCheckpointLocked()
}

// UpdateAllocated frees the devices of every pod not in active, as
// upstream's UpdateAllocatedDevices does.
func (m *Manager) UpdateAllocated(active []*corev1.Pod) {
	keep := sets.New[string]()
	for _, p := range active {
		keep.Insert(string(p.UID))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for uid := range m.pods {
		if !keep.Has(uid) {
			delete(m.pods, uid)
			changed = true
		}
	}
	if changed {
		m.writeCheckpointLocked()
	}
}
