package runtime

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"knode/internal/agent/cgroups"
)

// ContainerResources is what the node's resource managers decided for one
// container: its cgroup limits (cpu shares and quota, memory and swap, the
// cpuset and memory nodes) and what device plugins asked for. The agent's
// container manager (internal/agent/cm) computes it once; the process
// runtime writes it to cgroups itself, and a CRI runtime gets the same
// values as LinuxContainerResources.
type ContainerResources struct {
	// CgroupParent is the pod's cgroup, a cgroups.Layout path; the
	// container's cgroup is made under it. "" when cgroups are off.
	CgroupParent string
	// Linux is the container cgroup's limits, written whole.
	Linux cgroups.Resources
	// Env, Mounts and Devices are the device plugins' answer to Allocate;
	// Env is added after the container's own variables.
	Env     []corev1.EnvVar
	Mounts  []Mount
	Devices []Device
}

// Mount is a host path bound into a container.
type Mount struct {
	HostPath, ContainerPath string
	ReadOnly                bool
}

// Device is a host device node exposed to a container.
type Device struct {
	HostPath, ContainerPath string
	// Permissions are cgroup device permissions: any of "r", "w", "m".
	Permissions string
}

// ResourceDecider gives a container's resources. The error is the
// container's CreateContainerConfigError.
type ResourceDecider func(pod *corev1.Pod, c *corev1.Container) (ContainerResources, error)

// ResourceUpdater is a Runtime that can apply new decisions to containers
// that already run: the CPU manager's shared pool shrinks and grows as
// exclusive CPUs are handed out and returned.
type ResourceUpdater interface {
	// UpdateResources asks the ResourceDecider again for every running
	// container and writes the answer to its cgroup.
	UpdateResources(ctx context.Context) error
}
