package prober

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Kind names one of a container's three probes.
type Kind int

const (
	Liveness Kind = iota
	Readiness
	Startup
	numKinds
)

// String is upstream's name of the probe type, as events and the
// probe_type metric label spell it.
func (k Kind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "UNKNOWN"
}

// spec is the container's probe of this kind, or nil.
func (k Kind) spec(c *corev1.Container) *corev1.Probe {
	switch k {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	}
	return nil
}

// result is a probe's verdict after its thresholds.
type result int

const (
	// resultUnknown: the startup probe has not reached a threshold yet.
	resultUnknown result = iota
	resultSuccess
	resultFailure
)

func (r result) String() string {
	switch r {
	case resultSuccess:
		return "Success"
	case resultFailure:
		return "Failure"
	}
	return "Unknown"
}

// initialResult is what a probe reports before its first verdict:
// readiness starts not ready, liveness starts alive, startup undecided.
func initialResult(k Kind) result {
	switch k {
	case Readiness:
		return resultFailure
	case Liveness:
		return resultSuccess
	}
	return resultUnknown
}

// timing is a probe's schedule and thresholds with upstream's defaults in
// place of zero values.
type timing struct {
	// InitialDelay after the container started before the first probe.
	InitialDelay time.Duration
	// Period between probes (default 10 s).
	Period time.Duration
	// Timeout bounds one probe (default 1 s).
	Timeout time.Duration
	// SuccessThreshold consecutive successes flip the result to Success
	// (default 1; always 1 for liveness and startup).
	SuccessThreshold int
	// FailureThreshold consecutive failures flip it to Failure (default 3).
	FailureThreshold int
}

// timingOf reads p's timing. The API server defaults and validates these
// fields; a pod that skipped both (a static pod) still gets sane values:
// zero or negative fields take the default, and successThreshold is 1
// for liveness and startup as validation demands.
func timingOf(k Kind, p *corev1.Probe) timing {
	seconds := func(v, def int32) time.Duration {
		if v <= 0 {
			v = def
		}
		return time.Duration(v) * time.Second
	}
	count := func(v, def int32) int {
		if v <= 0 {
			return int(def)
		}
		return int(v)
	}
	t := timing{
		Period:           seconds(p.PeriodSeconds, 10),
		Timeout:          seconds(p.TimeoutSeconds, 1),
		SuccessThreshold: count(p.SuccessThreshold, 1),
		FailureThreshold: count(p.FailureThreshold, 3),
	}
	if p.InitialDelaySeconds > 0 {
		t.InitialDelay = time.Duration(p.InitialDelaySeconds) * time.Second
	}
	if k != Readiness {
		t.SuccessThreshold = 1
	}
	return t
}

// probeState is the state machine of one probe over one run of a
// container (one container ID). A new run gets a new probeState.
//
// Invariant: result is initialResult(kind) until a run of equal outcomes
// reached its threshold, and from then on the outcome of the latest such
// run.
type probeState struct {
	kind   Kind
	timing timing
	result result
	// last is the latest outcome (Success or Failure) and run how many
	// times in a row it came; run is 0 before the first outcome and
	// after a liveness or startup failure.
	last result
	run  int
	// next is when the next probe is due.
	next time.Time
	// stopped: no more probes in this run. Liveness and startup stop
	// after a failure verdict (the container is to be killed), and when
	// the pod is being deleted.
	stopped bool
	// inFlight: a probe has been launched and its outcome not observed.
	inFlight bool
}

func newProbeState(k Kind, t timing, started time.Time) *probeState {
	return &probeState{kind: k, timing: t, result: initialResult(k), next: started.Add(t.InitialDelay)}
}

// active reports whether the probe runs at all now. started says
// whether the container has started (its startup probe succeeded, or it
// has none): the startup probe runs only before that, the others only
// after.
func (s *probeState) active(started bool) bool {
	return !s.stopped && !s.inFlight && (s.kind == Startup) != started
}

// due reports whether the probe is to run at now.
func (s *probeState) due(now time.Time, started bool) bool {
	return s.active(started) && !now.Before(s.next)
}

// launch marks a probe launched at now and moves next to the following
// slot of the period grid that started at the initial delay.
func (s *probeState) launch(now time.Time) {
	s.inFlight = true
	s.next = nextSlot(s.next, now, s.timing.Period)
}

// nextSlot is the first time after now of the form due + k·period, k ≥ 1.
// Probes that fell behind (a long probe, a stopped clock) skip the slots
// they missed, as a ticker drops ticks.
func nextSlot(due, now time.Time, period time.Duration) time.Time {
	if now.Before(due) {
		return due.Add(period)
	}
	return due.Add((now.Sub(due)/period + 1) * period)
}

// observe folds one outcome, Success or Failure, into s and reports
// whether s.result changed. A liveness or startup failure verdict stops
// the probe for this run.
func (s *probeState) observe(r result) (changed bool) {
	s.inFlight = false
	if r == s.last && s.run > 0 {
		s.run++
	} else {
		s.last, s.run = r, 1
	}
	threshold := s.timing.FailureThreshold
	if r == resultSuccess {
		threshold = s.timing.SuccessThreshold
	}
	if s.run < threshold {
		return false
	}
	changed = s.result != r
	s.result = r
	if r == resultFailure && s.kind != Readiness {
		s.stopped = true
		s.run = 0
	}
	return changed
}

// abandon clears a launch whose outcome is thrown away (the probe
// errored): the probe runs again at its next slot.
func (s *probeState) abandon() { s.inFlight = false }

// settle ends liveness and startup probing of a pod being deleted: both
// report Success, so that the container is not restarted while it
// terminates.
func (s *probeState) settle() {
	if s.kind != Readiness {
		s.result = resultSuccess
		s.stopped = true
	}
}

// containerRun is one run of a container: its ID, when it started and
// its probes (nil for a kind it does not have). The zero value is a
// container that is not running.
type containerRun struct {
	id      string
	started time.Time
	probes  [numKinds]*probeState
}

func newContainerRun(spec *corev1.Container, id string, started time.Time, deleting bool) containerRun {
	run := containerRun{id: id, started: started}
	if id == "" {
		return run
	}
	for k := range numKinds {
		if p := k.spec(spec); p != nil {
			run.probes[k] = newProbeState(k, timingOf(k, p), started)
			if deleting {
				run.probes[k].settle()
			}
		}
	}
	return run
}

// hasStarted is upstream's containerStatus.started: running, and its
// startup probe (if any) has succeeded.
func (r *containerRun) hasStarted() bool {
	if r.id == "" {
		return false
	}
	s := r.probes[Startup]
	return s == nil || s.result == resultSuccess
}

// Status is what the probes say about a container's current run.
type Status struct {
	// Started is the container status' started: the container runs and
	// its startup probe, if any, has succeeded.
	Started bool
	// Ready is the container status' ready: started, and its readiness
	// probe, if any, has succeeded (successThreshold times in a row)
	// more recently than it failed failureThreshold times in a row.
	Ready bool
	// Kill is set when a liveness or startup probe failed
	// failureThreshold times in a row: the container must be killed. It
	// stays set until the container gets a new ID.
	Kill *Kill
}

// Kill says why a container must be killed.
type Kill struct {
	// Probe is Liveness or Startup.
	Probe Kind
	// Message is upstream's Killing event message, e.g. "Container app
	// failed liveness probe, will be restarted".
	Message string
	// GracePeriodSeconds is the probe's terminationGracePeriodSeconds:
	// when set, it overrides the pod's for this kill.
	GracePeriodSeconds *int64
}

// statusOf is the Status of run of the container spec in pod. sidecar
// says spec is a restartable init container.
func statusOf(pod *corev1.Pod, spec *corev1.Container, sidecar bool, run *containerRun) Status {
	st := Status{Started: run.hasStarted()}
	if st.Started {
		r := run.probes[Readiness]
		st.Ready = r == nil || r.result == resultSuccess
	}
	for _, k := range []Kind{Liveness, Startup} {
		if s := run.probes[k]; s != nil && s.result == resultFailure {
			st.Kill = &Kill{
				Probe:              k,
				Message:            killMessage(pod, spec.Name, sidecar, k),
				GracePeriodSeconds: k.spec(spec).TerminationGracePeriodSeconds,
			}
			break
		}
	}
	return st
}

// killMessage is the kubelet's message for a kill after a failed probe
// k: a sidecar is always restarted and says nothing about it; a regular
// container says it will be restarted unless the pod's restartPolicy is
// Never.
func killMessage(pod *corev1.Pod, container string, sidecar bool, k Kind) string {
	probe := "liveness"
	if k == Startup {
		probe = "startup"
	}
	if sidecar {
		return fmt.Sprintf("Init container %s failed %s probe", container, probe)
	}
	msg := fmt.Sprintf("Container %s failed %s probe", container, probe)
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		msg += ", will be restarted"
	}
	return msg
}
