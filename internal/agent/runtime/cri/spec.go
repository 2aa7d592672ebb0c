package cri

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/runtime"
	"knode/internal/agent/swap"
)

// Labels and annotations on sandboxes and containers. The io.kubernetes.*
// ones are upstream's (pkg/kubelet/types and kuberuntime), so that crictl
// and log collectors read knode's pods as they read the kubelet's.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash            = "io.kubernetes.container.hash"
	AnnotationRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationTerminationGracePeriod   = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerPorts           = "io.kubernetes.container.ports"

	// LabelManaged ("true") marks the sandboxes and containers this runtime
	// made: New adopts those and leaves every other alone.
	LabelManaged = "knode.io/managed"
	// AnnotationPod, on a sandbox, is the pod StartPod was given, as JSON
	// (without managedFields): what New rebuilds the pod from.
	AnnotationPod = "knode.io/pod"
	// AnnotationStartedAt, on a container, is when the runtime started it
	// (RFC 3339 with nanoseconds, on Config.Clock): its status's startedAt.
	AnnotationStartedAt = "knode.io/started-at"
	// AnnotationBackoffDelay and AnnotationLastRestart, on a container, are
	// its restart back-off as it stood once this run started: the delay
	// (a Go duration) and when it last restarted (RFC 3339; absent for a
	// first run).
	AnnotationBackoffDelay = "knode.io/backoff-delay"
	AnnotationLastRestart  = "knode.io/last-restart"
)

// podLogDir is a pod's log directory, as upstream names it:
// <dir>/<namespace>_<name>_<uid>.
func podLogDir(dir string, pod *corev1.Pod) string {
	return filepath.Join(dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// logPath is a container run's log file, relative to its pod's log
// directory: <container>/<restartCount>.log.
func logPath(container string, restartCount int32) string {
	return filepath.Join(container, strconv.Itoa(int(restartCount))+".log")
}

// namespaces is the pod's Linux namespaces in CRI terms: the node's
// network, PID and IPC namespaces when the pod asks for them; otherwise
// the pod's own network and IPC, and a PID namespace per container unless
// the pod shares one.
func namespaces(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// sandboxInput is what sandboxConfig needs besides the pod.
type sandboxInput struct {
	attempt uint32
	logDir  string
	// cgroupParent is the pod's cgroup (a cgroups.Layout path); "" for none.
	cgroupParent string
}

// sandboxConfig is pod's sandbox as the CRI takes it.
func sandboxConfig(pod *corev1.Pod, in sandboxInput) (*runtimeapi.PodSandboxConfig, error) {
	data, err := json.Marshal(podToKeep(pod))
	if err != nil {
		return nil, fmt.Errorf("encoding the pod: %w", err)
	}
	labels := map[string]string{}
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	labels[LabelManaged] = "true"
	annotations := map[string]string{}
	for k, v := range pod.Annotations {
		annotations[k] = v
	}
	annotations[AnnotationPod] = string(data)

	// A host-network pod has the node's UTS namespace, hence its hostname.
	hostname := podHostname(pod)
	if pod.Spec.HostNetwork {
		hostname = ""
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaces(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = supplementalGroups(psc)
	}
	for _, c := range allContainers(pod) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			sc.Privileged = true
		}
	}
	linux := &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc}
	if in.cgroupParent != "" {
		linux.CgroupParent = "/" + strings.TrimPrefix(in.cgroupParent, "/")
	}
	if psc := pod.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		linux.Sysctls = map[string]string{}
		for _, s := range psc.Sysctls {
			linux.Sysctls[s.Name] = s.Value
		}
	}
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   in.attempt,
		},
		Hostname:     hostname,
		LogDirectory: in.logDir,
		DnsConfig:    dnsConfig(pod),
		PortMappings: portMappings(pod),
		Labels:       labels,
		Annotations:  annotations,
		Linux:        linux,
	}, nil
}

// podToKeep is the part of pod kept on its sandbox: everything but
// managedFields.
func podToKeep(pod *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	out.ManagedFields = nil
	return out
}

// podHostname is the pod's hostname: spec.hostname, or its name.
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

func supplementalGroups(psc *corev1.PodSecurityContext) []int64 {
	var out []int64
	if psc.FSGroup != nil {
		out = append(out, *psc.FSGroup)
	}
	return append(out, psc.SupplementalGroups...)
}

// dnsConfig is the sandbox's resolv.conf: the pod's dnsConfig under
// dnsPolicy None; otherwise nil, which makes the runtime copy the node's
// (upstream's "Default", and what ClusterFirst falls back to on a node
// without cluster DNS).
func dnsConfig(pod *corev1.Pod) *runtimeapi.DNSConfig {
	if pod.Spec.DNSPolicy != corev1.DNSNone || pod.Spec.DNSConfig == nil {
		return nil
	}
	dc := pod.Spec.DNSConfig
	out := &runtimeapi.DNSConfig{Servers: dc.Nameservers, Searches: dc.Searches}
	for _, o := range dc.Options {
		if o.Value != nil {
			out.Options = append(out.Options, o.Name+":"+*o.Value)
		} else {
			out.Options = append(out.Options, o.Name)
		}
	}
	return out
}

// portMappings are the containers' ports that name a host port.
func portMappings(pod *corev1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range allContainers(pod) {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case corev1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case corev1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			out = append(out, &runtimeapi.PortMapping{Protocol: proto, ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	return out
}

// allContainers is the pod's init containers, then its regular ones: the
// Plan's order.
func allContainers(pod *corev1.Pod) []corev1.Container {
	out := make([]corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	out = append(out, pod.Spec.InitContainers...)
	return append(out, pod.Spec.Containers...)
}

// containerInput is what containerConfig needs besides the pod and the
// container.
type containerInput struct {
	restartCount int32
	// imageRef is the image's ID in the runtime.
	imageRef string
	env      *runtime.Env
	mounts   []*runtimeapi.Mount
	res      runtime.ContainerResources
	// resources: whether res is a decision (Config.Resources is set).
	resources bool
	// startedAt, backoffDelay and lastRestart are annotated (see
	// AnnotationStartedAt).
	startedAt    time.Time
	backoffDelay time.Duration
	lastRestart  time.Time
}

// containerConfig is container c of pod as the CRI takes it. Command and
// args are the container's, $(VAR)-expanded against its environment: the
// runtime runs the image's entrypoint and cmd where they are empty, as
// upstream does.
func containerConfig(pod *corev1.Pod, c *corev1.Container, in containerInput) *runtimeapi.ContainerConfig {
	expand := func(list []string) []string {
		if list == nil {
			return nil
		}
		out := make([]string, len(list))
		for i, s := range list {
			out[i] = in.env.Expand(s)
		}
		return out
	}
	var envs []*runtimeapi.KeyValue
	in.env.Each(func(name, value string) { envs = append(envs, &runtimeapi.KeyValue{Key: name, Value: []byte(value)}) })
	for _, e := range in.res.Env {
		if _, set := in.env.Lookup(e.Name); e.Name != "" && !set {
			envs = append(envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
		}
	}
	var devices []*runtimeapi.Device
	for _, d := range in.res.Devices {
		devices = append(devices, &runtimeapi.Device{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	mounts := append([]*runtimeapi.Mount(nil), in.mounts...)
	for _, m := range in.res.Mounts {
		mounts = append(mounts, &runtimeapi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Readonly: m.ReadOnly})
	}
	linux := &runtimeapi.LinuxContainerConfig{SecurityContext: containerSecurity(pod, c)}
	if in.resources {
		linux.Resources = linuxResources(in.res.Linux)
	}
	return &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(in.restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: in.imageRef, UserSpecifiedImage: c.Image},
		Command:     expand(c.Command),
		Args:        expand(c.Args),
		WorkingDir:  c.WorkingDir,
		Envs:        envs,
		Mounts:      mounts,
		Devices:     devices,
		Labels:      containerLabels(pod, c),
		Annotations: containerAnnotations(pod, c, in),
		LogPath:     logPath(c.Name, in.restartCount),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux:       linux,
	}
}

func containerLabels(pod *corev1.Pod, c *corev1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
		LabelManaged:       "true",
	}
}

func containerAnnotations(pod *corev1.Pod, c *corev1.Container, in containerInput) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(containerHash(c), 16),
		AnnotationRestartCount:             strconv.Itoa(int(in.restartCount)),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		AnnotationStartedAt:                in.startedAt.Format(time.RFC3339Nano),
		AnnotationBackoffDelay:             in.backoffDelay.String(),
	}
	if !in.lastRestart.IsZero() {
		a[AnnotationLastRestart] = in.lastRestart.Format(time.RFC3339Nano)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		a[AnnotationTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	if len(c.Ports) > 0 {
		if data, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(data)
		}
	}
	return a
}

// containerHash identifies the container's spec, for the hash annotation.
func containerHash(c *corev1.Container) uint64 {
	data, _ := json.Marshal(c)
	h := fnv.New32a()
	_, _ = h.Write(data)
	return uint64(h.Sum32())
}

// containerSecurity is the container's Linux security context: its
// namespaces (the pod's), privileges, capabilities, user and group (the
// container's, else the pod's), read-only root and no_new_privs.
func containerSecurity(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaces(pod)}
	var runAsUser, runAsGroup *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		runAsUser, runAsGroup = psc.RunAsUser, psc.RunAsGroup
		sc.SupplementalGroups = supplementalGroups(psc)
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
		if csc.RunAsGroup != nil {
			runAsGroup = csc.RunAsGroup
		}
		sc.Privileged = csc.Privileged != nil && *csc.Privileged
		sc.ReadonlyRootfs = csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem
		sc.NoNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
		if caps := csc.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{}
			for _, a := range caps.Add {
				sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
			}
			for _, d := range caps.Drop {
				sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
			}
		}
	}
	if runAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *runAsUser}
	}
	if runAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *runAsGroup}
	}
	return sc
}

// linuxResources is a resource decision's cgroup values as CRI fields:
// cpu shares, quota and period (the period only with a quota), memory
// limit, cpuset cpus and mems, and swap (cgroup v1's memsw limit as
// memory_swap_limit_in_bytes, v2's memory.swap.max in unified). No
// hugepage limits are set.
func linuxResources(l cgroups.Resources) *runtimeapi.LinuxContainerResources {
	out := &runtimeapi.LinuxContainerResources{
		CpuShares:  int64(l.CPUShares),
		CpusetCpus: l.CPUSetCPUs,
		CpusetMems: l.CPUSetMems,
	}
	if l.CPUQuota > 0 {
		out.CpuQuota = l.CPUQuota
		out.CpuPeriod = int64(l.CPUPeriod)
		if out.CpuPeriod == 0 {
			out.CpuPeriod = cgroups.QuotaPeriod
		}
	}
	if l.MemoryLimit > 0 {
		out.MemoryLimitInBytes = l.MemoryLimit
	}
	if v, ok := l.Swap[swap.MemswLimitFile]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out.MemorySwapLimitInBytes = n
		}
	}
	if v, ok := l.Swap[swap.SwapMaxFile]; ok {
		out.Unified = map[string]string{swap.SwapMaxFile: v}
	}
	return out
}

// mountPropagation is a volume mount's propagation in CRI terms.
func mountPropagation(p *corev1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case corev1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case corev1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// pullPolicy is the container's image pull policy, defaulted as the API
// server does: Always for an image tagged latest or not tagged (and not
// pinned by digest), IfNotPresent otherwise.
func pullPolicy(c *corev1.Container) corev1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	name := c.Image
	if strings.Contains(name, "@") {
		return corev1.PullIfNotPresent
	}
	last := name[strings.LastIndexByte(name, '/')+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok && tag != "latest" {
		return corev1.PullIfNotPresent
	}
	return corev1.PullAlways
}

// nextBackoff is the restart back-off a container has once it restarts at
// now after a run that finished at finished, given its record before the
// restart: runtime.Backoff's rule (a first restart, or one more than twice
// the maximum after the last, starts over at the initial delay; each other
// doubles it up to the maximum). cfg must have its defaults filled. It
// lets the runtime annotate the new container with what the Plan will
// hold once it records the start.
func nextBackoff(rec runtime.ContainerRecord, finished, now time.Time, cfg runtime.BackoffConfig) (time.Duration, time.Time) {
	if rec.LastRestart.IsZero() || finished.Sub(rec.LastRestart) > 2*cfg.Max {
		return cfg.Initial, now
	}
	return min(2*rec.BackoffDelay, cfg.Max), now
}

// podRef names a pod in messages as upstream's format.Pod does:
// name_namespace(uid).
func podRef(name, namespace string, uid types.UID) string {
	return fmt.Sprintf("%s_%s(%s)", name, namespace, uid)
}
