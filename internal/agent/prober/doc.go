// Package prober runs the liveness, readiness and startup probes of a
// node's containers, in the kubelet's role, and says what they found:
// whether each container has started, whether it is ready, and whether it
// must be killed.
//
// # What it owns
//
// For every probe of every running container (regular containers and
// restartable init containers) it keeps upstream's state machine: the
// first probe comes initialDelaySeconds after the container started, the
// next ones every periodSeconds on that grid; successThreshold
// consecutive successes (always 1 for liveness and startup) or
// failureThreshold consecutive failures flip the result. Readiness starts
// as failure, liveness as success, startup as unknown. While the startup
// probe has not succeeded, liveness and readiness do not run; once it has,
// it stops. A liveness or startup failure verdict stops that probe until
// the container has a new ID. A new container ID starts everything
// afresh.
//
// Probes are exec (through the runtime's ExecRunner, with the probe's
// timeout and $(VAR) expanded from the container's literal env), httpGet
// (success for 200 ≤ code < 400; redirects followed to the same host only,
// a redirect elsewhere is a success with a ProbeWarning event; TLS is not
// verified; User-Agent kube-probe/<major>.<minor>; 10 KiB of body read),
// tcpSocket (the connection opens) and grpc (grpc.health.v1 Check answers
// SERVING). The host is the pod's IP unless httpGet or tcpSocket names
// one; a port is a number or the name of a container port.
//
// It records upstream's events through Config.Recorder: Warning Unhealthy
// "<Kind> probe failed: <output>" for every failed probe, "<Kind> probe
// errored and resulted in unknown state: <error>" for one that could not
// be run (such a probe does not count toward a threshold), Warning
// ProbeWarning "<Kind> probe warning: ..." and, when a liveness or startup
// probe reaches its failure threshold, Normal Killing "Container <name>
// failed liveness probe, will be restarted" (startup likewise; sidecars
// say "Init container <name> ..."; no ", will be restarted" under
// restartPolicy Never). It counts prober_probe_total.
//
// # What the caller must do
//
// The pod worker calls AddPod for each pod it runs (again for a newer
// version: a deletionTimestamp stops liveness and startup probes),
// UpdateContainer whenever a container's run changes (its ID, or none
// when it stopped) and RemovePod when the pod is gone. It reads Status to
// fill a container's started and ready (and the pod's Ready condition
// from them), and kills a container whose Status has Kill set — with the
// probe's terminationGracePeriodSeconds when Kill carries one — then
// restarts it per the pod's restartPolicy and reports the new ID.
// OnChange tells it when to look again. The agent calls Run; tests and
// the simulator call Step with their own time and NextDue to know when.
//
// # What it does not do
//
// It kills and restarts nothing. The Killing event it records is the one
// the kubelet records when it kills a container for a failed probe, so
// the pod worker must not record another for that kill. It does not read
// pod status from the API, run lifecycle hooks, or track non-restartable
// init containers (they have no probes). Unlike the kubelet after a
// restart, it does not spread the first probes of many containers over
// their period, and it has no probe duration histogram. Probe timeouts
// bound real network and exec I/O, so they run on real time; only the
// schedule follows Config.Clock.
package prober
