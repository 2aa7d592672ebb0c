// Package process is the default runtime.Runtime: every container is a real
// process on this machine (Linux only).
//
// What runs: the container's command plus args, with $(VAR) references
// expanded. The image is never pulled or run: a container without a command
// waits with CreateContainerConfigError and is not retried. A command that
// cannot be found or executed ends the run at once with StartError (exit
// code 128) and is restarted like any failed run. The command is looked up
// in the container's PATH, and a relative path in its working directory.
//
// Environment: PATH (the agent's, unless the container sets it), HOSTNAME
// (the pod's hostname or name), then env in order. valueFrom.fieldRef
// supports metadata.name, metadata.namespace, metadata.uid,
// metadata.labels['k'], metadata.annotations['k'], spec.nodeName,
// spec.serviceAccountName, status.hostIP(s) and status.podIP(s) (the pod
// worker puts the node's address in both: pods share the host network).
// envFrom, configMapKeyRef, secretKeyRef and resourceFieldRef are config
// errors (an optional configMap or secret key is skipped).
//
// Files: a pod lives in <root>/pods/<uid>/; container c runs in
// <root>/pods/<uid>/<c>/ unless it sets workingDir, writes stdout and
// stderr together to <n>.log there (n counts the processes it started,
// from 0; the previous run's log is kept, older ones removed), and the
// runtime records its pid and start time in pid and its state in
// state.json there (see Agent restarts).
//
// Processes: each container is the leader of its own process group. Stop
// sends SIGTERM to the group, then SIGKILL to it (and to everything in its
// cgroup) when the grace period has passed on the injected clock. When a
// container's main process exits, the rest of its group and cgroup is
// killed, as a PID namespace would. Every process started is reaped (an
// adopted one by whoever is its parent now).
//
// Resources: with Config.Resources, the runtime asks it for each run's
// resources (runtime.ContainerResources, decided by the agent's container
// manager) as the run starts; its error leaves the container waiting with
// CreateContainerConfigError. Its device plugin answer is applied as
// upstream's runtimes do: Env is added after the container's own variables
// (a name the container sets keeps the container's value); Mounts are
// bound at their container paths like volumes (read-only when asked), and
// a device whose ContainerPath differs from its HostPath is bound at
// ContainerPath, both in the container's own mount namespace (see
// Volumes; the agent must run as root). A device at its host path needs
// nothing: containers see the host's /dev.
//
// Limits: with Config.Cgroups too, each run gets a cgroup
// <CgroupParent>/<c>-<n> under the pod's cgroup that the decision names
// (none when it names none; the pod's cgroup is created and removed by the
// container manager, not here), with the
// decision's Linux values written by cgroups.Manager: cpu shares and
// quota, memory and swap limits, cpuset and pids, on cgroup v1, hybrid or
// v2. The process is in its cgroup before the container's command runs:
// it starts as the mountns init, held until the runtime has moved it into
// the cgroup (cgroup v1 cannot start a process in a cgroup), and then execs
// the command in place. A run whose cgroup cannot be made or joined fails
// to start (StartError naming the cgroup); it never runs unlimited. A run
// whose cgroup saw the OOM killer (oom_kill in memory.oom_control on v1,
// in memory.events on v2) ends with reason OOMKilled and the exit code its
// process reported (137 for SIGKILL). The run's cgroup is removed when it
// ends; while a killed process lingers there, the removal is retried at
// the pod's next exit and at RemovePod (the container manager's removal of
// the pod's cgroup takes what is left). UpdateResources
// (runtime.ResourceUpdater) asks the decider again for every running
// container and rewrites its cgroup, as the CPU manager's shared pool
// changes. Without Config.Cgroups or Config.Resources nothing is limited,
// which New logs. The devices cgroup is not managed: a container may open
// every device node it can see, as any process of the host.
//
// Agent restarts: containers outlive the agent, and the next agent adopts
// them, as a restarted kubelet finds its containers in the CRI. Nothing in
// the runtime stops a container when the agent exits: only StopPod (a
// deleted pod, a node shutdown) does; KillAll is for tests. To that end the
// runtime keeps, beside the logs and pid files:
//
//   - <root>/pods/runtime.owner: a token naming the newest Runtime over the
//     directory. A Runtime that finds another's token there (an older one
//     in the same process, in tests) leaves its containers' exits and
//     restarts to the newer one.
//   - <root>/pods/<uid>/pod.json: the pod StartPod was given, as JSON.
//   - <root>/pods/<uid>/stopping.flag: present once StopPod was called, so
//     that nothing restarts after the agent restarts.
//   - <root>/pods/<uid>/<c>/state.json (in the container's default working
//     directory: it must not write pid or state.json there), written
//     atomically (a temporary file renamed over it) each time the container
//     starts, fails to start or exits. It is one JSON object: version (1, the
//     only one read), runs (processes started: the next one logs to
//     <runs>.log), pid and cgroup (a cgroups.Layout path, relative to the
//     Manager's bases) of the running process, containerID,
//     restartCount, startedAt (the last run's start), exit (the last run's
//     end: exitCode, reason, message, startedAt, finishedAt, containerID;
//     absent while it runs), lastTermination (the same shape), backoffDelay
//     (nanoseconds) and lastRestart. Times are RFC 3339 with nanoseconds.
//
// The pid file is written before the state file when a run starts, and
// removed after it when the run ends, so that an agent killed in between
// leaves a process its successor can find.
//
// New reads every pod directory. A pod whose pod.json is missing or
// malformed, or one of whose state.json files is malformed (or of another
// version), is handled as before adoption existed, and New logs why: the
// processes its pid files name (checked against the process's start time)
// are killed, its directory removed (its cgroups are the container
// manager's to remove), and the pod worker starts the pod afresh. Every other pod is held again at once, under the same uid,
// with its container IDs, restart counts, start times, last termination
// states, back-off and log numbering, so PodStatus and ListPods report it
// and StartPod of it is a no-op. A container without a state.json never
// started. For each container whose state says it runs:
//
//   - if its pid file names the process the state names, with the start
//     time recorded, the process is adopted: it keeps running and writing
//     to its log, and StopPod, RemovePod, KillAll and Changes treat it as
//     any other. It keeps its cgroup (for UpdateResources, the OOM check,
//     the kills and the removal) when this runtime has cgroups and the
//     recorded cgroup lies directly under the pod's cgroup as the decider
//     names it now; otherwise (an absolute cgroup2 directory recorded by
//     an older agent included) it is killed by process group alone. As it
//     is not the agent's child, it is watched through a pidfd (Linux 5.3+;
//     where none can be opened, the process is killed and reported as
//     below). When it exits, the rest of its process group and cgroup is
//     killed, and the run is reported Terminated with
//     reason ContainerStatusUnknown and exit code 137 (ExitCodeUnknown),
//     since only a process's parent can read its exit status; OOMKilled
//     when its cgroup saw the OOM killer. The restart policy counts it a
//     failure. This holds for an adopted container stopped by StopPod too.
//   - otherwise (no such process, or a pid reused by a later process) the
//     run is reported the same way, at New, with a message saying it ended
//     while no agent ran; a process the state does not account for but the
//     pid file names is killed, and so is whatever is left in its cgroup
//     (when it would be adopted as above), which is then removed.
//
// Runs that ended are replayed into the plan (runtime.RestorePlan), which
// then restarts them as the restart policy and back-off say.
//
// Volumes: when Config.Volumes resolves a pod's volumes to host paths, a
// container with volumeMounts (or device plugin mounts) runs in its own
// mount namespace (package mountns), with each volume (or its subPath, made when missing) bind-mounted
// at its mountPath, read-only when asked; the host's mount table and files
// are left as they were. The runtime never removes <pod>/volumes: the volume
// manager unmounts and removes it. Without Config.Volumes, volumeMounts are
// ignored.
//
// Not here: probes, lifecycle hooks, users and security contexts,
// images, networking (pods use the host network), resourceFieldRef.
package process
