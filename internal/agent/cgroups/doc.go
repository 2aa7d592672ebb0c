// Package cgroups lays out and writes the kubelet's cgroups as upstream's
// cgroupfs driver does, on cgroup v1 (including hybrid hosts, where a
// cgroup2 tree without controllers is mounted at <root>/unified) and on
// cgroup v2.
//
// It owns three things:
//   - Detect: which hierarchy the host has (V1, Hybrid, V2).
//   - Layout and the pure value functions (PodResources, ContainerResources,
//     QOSResources, NodeAllocatableResources): which cgroup a pod or
//     container lives in and which limits it gets, by upstream's rules
//     (pkg/kubelet/cm helpers_linux.go, qos_container_manager_linux.go,
//     node_container_manager_linux.go, kuberuntime's container resources).
//   - Manager: creates cgroups, writes a Resources value into the
//     controller files (V1Files, V2Files say which), moves processes in,
//     reads OOM kills and removes cgroups.
//
// The caller decides when: it creates the kubepods and QoS cgroups at
// start, a pod's cgroup before its first container, and removes them once
// no process is left. It warns about Manager.Missing controllers; the
// Manager skips writes to a controller it cannot use instead of failing.
//
// Deliberately not done: the systemd driver; memory QoS (memory.min/high);
// hugepages; upstream's QOSReserved memory reservation on the QoS cgroups
// (alpha); kube-reserved/system-reserved enforcement; cgroup v1
// notification through eventfd. Nothing here sleeps or retries: a cgroup
// that still holds a process cannot be removed, and the caller retries.
package cgroups
