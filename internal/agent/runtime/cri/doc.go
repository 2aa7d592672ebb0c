// Package cri is the runtime.Runtime that runs pods through the Container
// Runtime Interface (containerd, over k8s.io/cri-client): each pod is a CRI
// pod sandbox and each of its containers' runs a CRI container in it, as
// the kubelet's kuberuntime does. The container lifecycle (order, restart
// policy, back-off) is runtime.Plan's, exactly as in the process runtime.
//
// What runs: the container's image (pulled as imagePullPolicy says) with
// the container's command overriding the image's entrypoint and its args
// the image's cmd, both $(VAR)-expanded; its env (runtime.ContainerEnv:
// literal values and the downward API's fieldRefs, with status.podIP(s)
// the sandbox's), then the device plugins' variables it does not set; its
// working directory, stdin and tty; its volumeMounts as bind mounts of the
// host paths Config.Volumes gives (a missing subPath is made); and a
// minimal Linux security context (privileged, capabilities, user, group,
// supplemental groups, read-only root, no_new_privs, and the pod's
// namespaces). envFrom, configMap and secret keys and resourceFieldRef are
// config errors (CreateContainerConfigError, not retried, as in the
// process runtime). The sandbox gets the pod's name, namespace, uid and
// hostname, its log directory, the node's network (NamespaceMode_NODE) for
// hostNetwork (and no hostname: it has the node's), hostPID and hostIPC
// likewise, the pod's dnsConfig under dnsPolicy None (otherwise the node's
// resolv.conf), port mappings for hostPorts, sysctls, and its cgroup
// parent from Config.Resources; Config.RuntimeHandler picks the runtime
// handler. Sandboxes and containers carry upstream's labels
// (io.kubernetes.pod.{name,namespace,uid}, io.kubernetes.container.name)
// and annotations (io.kubernetes.container.{hash,restartCount,...}), plus
// knode.io/managed=true and knode's own annotations (see Agent restarts).
//
// Resources: Config.Resources is asked for each run's decision as it is
// created; its Linux values become LinuxContainerResources (cpu shares,
// quota and period, memory limit, cpuset cpus and mems, cgroup v1 swap as
// memory_swap_limit_in_bytes, v2 swap as unified memory.swap.max; no
// hugepage limits), its device plugin mounts and devices CRI mounts and
// devices. UpdateResources (runtime.ResourceUpdater) asks again for every
// running container and calls UpdateContainerResources.
//
// Images: a pull failure leaves the container waiting with ErrImagePull
// and the runtime's message, until the clock moves; then, for upstream's
// image back-off (10 s doubling to 300 s per pod and image, on
// Config.Clock), with ImagePullBackOff and `Back-off pulling image "<image>"`,
// after which the pull is tried again. imagePullPolicy Never with a
// missing image waits with ErrImageNeverPull (checked again each sync). A
// CreateContainer failure waits with CreateContainerError, retried with
// the same back-off. Credentials come from Config.PullCredentials
// (Credentials reads them from docker config secrets).
//
// Runs: a run that could not start (StartContainer failed) ends at once
// with StartError and exit code 128. An ended run is reported with the
// runtime's exit code and reason (Completed, Error, OOMKilled), or the
// reason and message KillContainer was given; one the runtime lost is
// ContainerStatusUnknown with exit code 137. The runtime keeps a
// container's current and previous runs (the previous one for its log)
// and removes older ones with their logs.
//
// Files: container c's run n logs, in the CRI format (runtime.LogFormatCRI),
// to <PodLogsDir>/<namespace>_<name>_<uid>/<c>/<n>.log, where n is the
// run's restart count: the runtime (containerd) writes it. LogPath and
// PreviousLogPath name the current and previous runs' files. RemovePod
// removes the pod's log directory.
//
// Events: Config.Events gets upstream's container events: Pulling
// `Pulling image "x"`, Pulled (`Successfully pulled image "x" in …` or
// `Container image "x" already present on machine`), Failed (`Failed to
// pull image "x": …`, `Error: ErrImagePull`, `Error: ImagePullBackOff`,
// `Error: <reason>` for other failures), BackOff (`Back-off pulling image
// "x"`, `Back-off restarting failed container c in pod name_ns(uid)`),
// ErrImageNeverPull, InspectFailed, Created `Created container: c`,
// Started `Started container c`, Killing (`Stopping container c`, or the
// kill's message) and FailedCreatePodSandBox. A wait that repeats (the
// same back-off, the same missing image) is not reported again.
//
// Polling: the runtime learns of exits by polling: every SyncPeriod (on
// Config.Clock) each pod's worker asks ContainerStatus of each of its
// running containers (one call per running container per period), starts
// what is due (pulling images; a slow pull holds up only its pod), and
// stops the sandbox of a stopped pod. Sync does the same for every pod at
// once and returns when done; tests call it to step the runtime on a fake
// clock. StopPod and KillContainer call StopContainer with the grace (the
// runtime sends the stop signal and kills at the end of the grace, in real
// time), and again without grace when the grace has passed on
// Config.Clock.
//
// Agent restarts: pods outlive the agent (Close leaves them running) and
// New adopts them, as a restarted kubelet finds its pods in the CRI. All
// state is kept in the CRI runtime itself, nothing on disk:
//
//   - the pod StartPod was given is the sandbox's knode.io/pod annotation
//     (JSON, without managedFields). Sandbox annotations cannot change, so
//     this is the pod as first started, which is all the runtime ever
//     uses.
//   - each container's run carries upstream's restart count annotation,
//     knode.io/started-at (its start on Config.Clock), and its restart
//     back-off as it stood once the run started (knode.io/backoff-delay,
//     knode.io/last-restart).
//   - a sandbox that is not ready marks a pod that was stopping.
//
// New lists the sandboxes and containers labelled knode.io/managed=true
// and, for each pod uid, takes the newest sandbox whose annotation reads
// back: its containers' last and previous runs (by restart count) rebuild
// the Plan (runtime.RestorePlan) with the same container IDs, restart
// counts, start times, last terminations and back-off, so that nothing is
// restarted or stopped, and PodStatus and ListPods report the pod at
// once. A run that ended is replayed as having ended when the runtime
// says it finished (the runtime's time, which the status then shows), so
// its restart is due as the policy and back-off say. Older sandboxes of
// the same uid, sandboxes whose annotation is missing or unreadable (with
// their log directories), containers of sandboxes that are gone, runs
// older than the previous one and runs created but never started (an
// agent that died between create and start) are removed. New fails,
// removing nothing, when the runtime cannot be listed or a container's
// status cannot be read. What is not kept: image pull and create
// back-offs (a waiting container is tried again at once), a kill's reason
// (the run then shows the runtime's), and StopPod's deadline (the pod
// worker calls StopPod again).
//
// Not here: probes and lifecycle hooks (the agent's), termination
// messages, ephemeral containers, in-place resize, OOM score adjustment,
// seccomp, AppArmor and SELinux, user namespaces, image garbage collection,
// container log rotation, the runtime's readiness conditions, and a
// replacement sandbox when one dies on its own (its pod is then reported
// stopping after an agent restart, and its containers cannot restart).
// Clock: exit times read back at adoption are the runtime's, so outside
// tests Config.Clock must be the real clock.
package cri
