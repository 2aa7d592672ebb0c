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
// stderr together to <n>.log there (n is its restart count; the previous
// run's log is kept, older ones removed) and records its pid in pid.
//
// Processes: each container is the leader of its own process group. Stop
// sends SIGTERM to the group, then SIGKILL to it when the grace period has
// passed on the injected clock. When a container's main process exits, the
// rest of its group is killed, as a PID namespace would. Every process
// started is reaped.
//
// Limits: when /sys/fs/cgroup is a writable cgroup2 tree with the cpu and
// memory controllers, each run gets a cgroup
// <cgroup root>/knode/pod<uid>/<c>-<n> with cpu.max (from limits.cpu),
// cpu.weight (from requests.cpu) and memory.max (from limits.memory), and a
// run killed by the OOM killer reports OOMKilled. Otherwise limits are off,
// which New logs.
//
// Agent restarts: pods are not adopted. New kills any container a previous
// agent left (found by its pid file, checked against the process's start
// time) and removes the old pod directories; the pod worker then starts the
// pods again, with restart counts from zero. When the agent exits, its
// containers keep running until the next agent starts (KillAll stops them
// at once).
//
// Not here: probes, lifecycle hooks, volumes, users and security contexts,
// images, networking (pods use the host network), resourceFieldRef.
package process
