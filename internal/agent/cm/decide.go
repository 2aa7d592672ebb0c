package cm

import (
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/devicemanager"
	"knode/internal/agent/runtime"
	podreg "knode/internal/registry/pod"
)

// kubepodsResources is the kubepods cgroup's limits
// (cgroups.NodeAllocatableResources). A non-empty reservedSystemCPUs stands
// in for the cpu of kubeReserved and systemReserved, as upstream's kubelet
// overrides them with it.
func kubepodsResources(capacity, kubeReserved, systemReserved corev1.ResourceList, reservedSystemCPUs string, enforcePods bool) cgroups.Resources {
	if set, err := cpuset.Parse(reservedSystemCPUs); err == nil && set.Size() > 0 {
		kubeReserved = maps.Clone(kubeReserved)
		delete(kubeReserved, corev1.ResourceCPU)
		systemReserved = maps.Clone(systemReserved)
		if systemReserved == nil {
			systemReserved = corev1.ResourceList{}
		}
		systemReserved[corev1.ResourceCPU] = *resource.NewQuantity(int64(set.Size()), resource.DecimalSI)
	}
	return cgroups.NodeAllocatableResources(capacity, systemReserved, kubeReserved, enforcePods)
}

// quotaPeriod is a cpuCFSQuotaPeriod in µs; 0 stays 0 (cgroups'
// default period).
func quotaPeriod(d time.Duration) uint64 {
	return uint64(d / time.Microsecond)
}

// deviceOptions turns what the device plugins asked for a container into
// the runtime's fields; the environment is sorted by name. Annotations and
// CDI device names are dropped. A nil ro gives nothing.
func deviceOptions(ro *devicemanager.RunOptions) (env []corev1.EnvVar, mounts []runtime.Mount, devices []runtime.Device) {
	if ro == nil {
		return nil, nil, nil
	}
	for _, k := range slices.Sorted(maps.Keys(ro.Envs)) {
		env = append(env, corev1.EnvVar{Name: k, Value: ro.Envs[k]})
	}
	for _, m := range ro.Mounts {
		mounts = append(mounts, runtime.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	for _, d := range ro.Devices {
		devices = append(devices, runtime.Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	return env, mounts, devices
}

// podCgroups lists the cgroups a pod being removed may have: its own
// class's when the pod is known, else one per QoS class (a pod of an
// earlier run of the agent). Nil without per-QoS cgroups, where pods have
// no cgroup of their own.
func podCgroups(l cgroups.Layout, pod *corev1.Pod, uid string) []string {
	if !l.PerQOS {
		return nil
	}
	if pod != nil {
		return []string{l.Pod(podreg.PodQOS(pod), uid)}
	}
	return []string{
		l.Pod(corev1.PodQOSGuaranteed, uid),
		l.Pod(corev1.PodQOSBurstable, uid),
		l.Pod(corev1.PodQOSBestEffort, uid),
	}
}
