package runtime

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Plan is one pod's container lifecycle, without any I/O: which container
// is due to start when, what an exit means under the restart policy, and
// the back-off between restarts. A runtime starts what Due returns, reports
// each start and exit back, and wakes up at NextDue.
//
// Order: init containers one at a time in spec order (a sidecar, an init
// container with restartPolicy Always, counts as done once started and is
// always restarted); then every regular container at once.
//
// Restarts: regular containers follow the pod's restartPolicy (Always; or
// OnFailure for a non-zero exit; Never); a failed init container is retried
// unless the policy is Never. Back-off is Backoff's.
//
// Containers are numbered init containers first, then regular ones, in spec
// order. A Plan is not safe for concurrent use.
type Plan struct {
	uid       types.UID
	namespace string
	name      string
	policy    corev1.RestartPolicy
	slots     []*slot
	nInit     int
	stopping  bool
}

type slot struct {
	spec    corev1.Container
	init    bool
	sidecar bool
	status  ContainerStatus
	backoff Backoff
	// due is when the container is to be (re)started; zero when it is not.
	due         time.Time
	everStarted bool
	// succeeded: the last run exited 0.
	succeeded    bool
	lastFinished time.Time
}

// NewPlan builds the plan of pod at now: the first container(s) are due at
// once.
func NewPlan(pod *corev1.Pod, now time.Time, cfg BackoffConfig) *Plan {
	p := newPlan(pod, cfg)
	p.schedule(now)
	return p
}

// newPlan is pod's plan with nothing scheduled yet.
func newPlan(pod *corev1.Pod, cfg BackoffConfig) *Plan {
	cfg = cfg.withDefaults()
	p := &Plan{
		uid:       pod.UID,
		namespace: pod.Namespace,
		name:      pod.Name,
		policy:    pod.Spec.RestartPolicy,
		nInit:     len(pod.Spec.InitContainers),
	}
	if p.policy == "" {
		p.policy = corev1.RestartPolicyAlways
	}
	firstReason := ReasonContainerCreating
	if p.nInit > 0 {
		firstReason = ReasonPodInitializing
	}
	for _, c := range pod.Spec.InitContainers {
		s := &slot{spec: *c.DeepCopy(), init: true, backoff: NewBackoff(cfg)}
		s.sidecar = c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		s.status = ContainerStatus{Name: c.Name, State: waiting(ReasonPodInitializing, "")}
		p.slots = append(p.slots, s)
	}
	for _, c := range pod.Spec.Containers {
		s := &slot{spec: *c.DeepCopy(), backoff: NewBackoff(cfg)}
		s.status = ContainerStatus{Name: c.Name, State: waiting(firstReason, "")}
		p.slots = append(p.slots, s)
	}
	return p
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

// UID is the pod's uid.
func (p *Plan) UID() types.UID { return p.uid }

// Len is the number of containers, init containers included.
func (p *Plan) Len() int { return len(p.slots) }

// Container returns container i's spec (not to be changed) and whether it
// is an init container.
func (p *Plan) Container(i int) (*corev1.Container, bool) {
	return &p.slots[i].spec, p.slots[i].init
}

// RestartCount is container i's restart count.
func (p *Plan) RestartCount(i int) int32 { return p.slots[i].status.RestartCount }

// Stopping reports whether Stop was called.
func (p *Plan) Stopping() bool { return p.stopping }

// schedule makes due whatever may start now: the first init container not
// yet done, or, once every init container is done, the regular containers
// that never started.
func (p *Plan) schedule(now time.Time) {
	if p.stopping {
		return
	}
	for _, s := range p.slots[:p.nInit] {
		if s.everStarted && (s.sidecar || s.succeeded) {
			continue
		}
		if !s.everStarted && s.due.IsZero() && !s.configError() {
			s.due = now
		}
		return
	}
	for _, s := range p.slots[p.nInit:] {
		if s.everStarted || !s.due.IsZero() {
			continue
		}
		if s.configError() {
			continue
		}
		s.due = now
		s.status.State = waiting(ReasonContainerCreating, "")
	}
}

func (s *slot) configError() bool {
	w := s.status.State.Waiting
	return w != nil && w.Reason == ReasonCreateContainerConfigError
}

// Due lists the containers to start at now, in order. Nothing is due once
// the pod is stopping.
func (p *Plan) Due(now time.Time) []int {
	if p.stopping {
		return nil
	}
	var due []int
	for i, s := range p.slots {
		if !s.due.IsZero() && !s.due.After(now) {
			due = append(due, i)
		}
	}
	return due
}

// NextDue is the earliest time a container is due, if any is.
func (p *Plan) NextDue() (time.Time, bool) {
	var next time.Time
	if p.stopping {
		return next, false
	}
	for _, s := range p.slots {
		if !s.due.IsZero() && (next.IsZero() || s.due.Before(next)) {
			next = s.due
		}
	}
	return next, !next.IsZero()
}

// Started records that container i runs since now, under id.
func (p *Plan) Started(i int, id string, now time.Time) {
	s := p.slots[i]
	if s.everStarted {
		s.status.RestartCount++
		s.backoff.Restarted(s.lastFinished, now)
		if s.status.State.Terminated != nil {
			s.status.LastTerminationState = s.status.State
		}
	}
	s.everStarted = true
	s.succeeded = false
	s.due = time.Time{}
	s.status.ID = id
	s.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
	p.schedule(now)
}

// ConfigError records that container i cannot be started as specified
// (message says why); it stays waiting and is not retried.
func (p *Plan) ConfigError(i int, message string) {
	s := p.slots[i]
	s.due = time.Time{}
	s.status.State = waiting(ReasonCreateContainerConfigError, message)
}

// StartFailed records that container i's process could not be started at
// now: a run that ended at once with StartError (exit code 128), restarted
// like any other failed run.
func (p *Plan) StartFailed(i int, message string, now time.Time) {
	p.Started(i, "", now)
	p.Exited(i, ExitCodeStartError, ReasonStartError, message, now)
}

// Exited records that container i's run ended at now with exitCode, and
// schedules its restart or what follows it. An exit of a container that
// does not run is ignored.
func (p *Plan) Exited(i int, exitCode int32, reason, message string, now time.Time) {
	s := p.slots[i]
	r := s.status.State.Running
	if r == nil {
		return
	}
	term := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode:    exitCode,
		Reason:      reason,
		Message:     message,
		StartedAt:   r.StartedAt,
		FinishedAt:  metav1.NewTime(now),
		ContainerID: s.status.ID,
	}}
	s.lastFinished = now
	s.succeeded = exitCode == 0
	s.due = time.Time{}
	s.status.State = term
	if !p.stopping && p.restarts(s, exitCode) {
		wait := s.backoff.Wait(now)
		s.due = now.Add(wait)
		if wait > 0 {
			s.status.LastTerminationState = term
			s.status.State = waiting(ReasonCrashLoopBackOff, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", wait, s.spec.Name, p.name, p.namespace, p.uid))
		}
	}
	p.schedule(now)
}

func (p *Plan) restarts(s *slot, exitCode int32) bool {
	switch {
	case s.sidecar:
		return true
	case s.init:
		return exitCode != 0 && p.policy != corev1.RestartPolicyNever
	case p.policy == corev1.RestartPolicyAlways:
		return true
	case p.policy == corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return false
}

// Stop marks the pod stopping: nothing starts or restarts from now on.
// The runtime still reports each running container's exit.
func (p *Plan) Stop() {
	p.stopping = true
	for _, s := range p.slots {
		s.due = time.Time{}
	}
}

// Running lists the containers that run.
func (p *Plan) Running() []int {
	var running []int
	for i, s := range p.slots {
		if s.status.State.Running != nil {
			running = append(running, i)
		}
	}
	return running
}

// Status is a snapshot of the pod; the caller owns it.
func (p *Plan) Status() PodStatus {
	st := PodStatus{UID: p.uid, Namespace: p.namespace, Name: p.name, Stopping: p.stopping}
	for _, s := range p.slots {
		c := s.status
		c.State = *s.status.State.DeepCopy()
		c.LastTerminationState = *s.status.LastTerminationState.DeepCopy()
		if s.init {
			st.InitContainers = append(st.InitContainers, c)
		} else {
			st.Containers = append(st.Containers, c)
		}
	}
	return st
}

// ContainerRecord is what a runtime keeps of one container's lifecycle so
// that a later agent can rebuild the plan (RestorePlan). The zero value is a
// container that never started. A config error is not recorded: the runtime
// finds it again when it tries to start the container.
type ContainerRecord struct {
	// Started: the container ran, or failed to start, at least once.
	Started bool
	// ID and RestartCount are the status's.
	ID           string
	RestartCount int32
	// StartedAt is when the last run started.
	StartedAt time.Time
	// Exit is how the last run ended; nil while it runs.
	Exit *corev1.ContainerStateTerminated
	// LastTermination is the status's LastTerminationState while the last
	// run runs or has just ended; nil when there is none or while the
	// container waits in back-off (Exit is then the one to show).
	LastTermination *corev1.ContainerStateTerminated
	// BackoffDelay and LastRestart are the restart back-off's state: the
	// current delay and when the container last restarted (zero: never).
	BackoffDelay time.Duration
	LastRestart  time.Time
}

// Record is container i's record; the caller owns it.
func (p *Plan) Record(i int) ContainerRecord {
	s := p.slots[i]
	if !s.everStarted {
		return ContainerRecord{}
	}
	rec := ContainerRecord{
		Started:      true,
		ID:           s.status.ID,
		RestartCount: s.status.RestartCount,
		BackoffDelay: s.backoff.delay,
		LastRestart:  s.backoff.lastRestart,
	}
	last := s.status.LastTerminationState.Terminated.DeepCopy()
	switch st := s.status.State; {
	case st.Running != nil:
		rec.StartedAt = st.Running.StartedAt.Time
		rec.LastTermination = last
	case st.Terminated != nil:
		rec.StartedAt = st.Terminated.StartedAt.Time
		rec.Exit = st.Terminated.DeepCopy()
		rec.LastTermination = last
	case last != nil: // waiting in back-off: the run that ended is last
		rec.StartedAt = last.StartedAt.Time
		rec.Exit = last
	default:
		// Started once but now waits with a config error, which is not
		// recorded: restored, it is tried again.
		return ContainerRecord{}
	}
	return rec
}

// RestorePlan rebuilds, at now, the plan of pod from records: one per
// container in Plan order, as Record returned them before an agent
// restart. A container recorded running runs in the new plan, and the
// runtime reports its exit as usual. A container whose last run ended is
// replayed as having exited when it finished, so its restart is due as the
// restart policy and back-off say (often at once). Containers that never
// started are scheduled as NewPlan does. stopping restores a stopping pod:
// nothing starts or restarts. It fails when records do not fit the pod.
func RestorePlan(pod *corev1.Pod, records []ContainerRecord, stopping bool, now time.Time, cfg BackoffConfig) (*Plan, error) {
	p := newPlan(pod, cfg)
	if len(records) != len(p.slots) {
		return nil, fmt.Errorf("restoring pod %s: %d container records for %d containers", pod.UID, len(records), len(p.slots))
	}
	p.stopping = stopping
	var ended []int
	for i, rec := range records {
		if !rec.Started {
			continue
		}
		s := p.slots[i]
		if rec.StartedAt.IsZero() {
			return nil, fmt.Errorf("restoring pod %s: container %s: a started container's record needs StartedAt", pod.UID, s.spec.Name)
		}
		s.everStarted = true
		s.status.ID = rec.ID
		s.status.RestartCount = rec.RestartCount
		s.backoff.delay = rec.BackoffDelay
		s.backoff.lastRestart = rec.LastRestart
		s.status.LastTerminationState = corev1.ContainerState{}
		if rec.LastTermination != nil {
			s.status.LastTerminationState.Terminated = rec.LastTermination.DeepCopy()
		}
		s.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(rec.StartedAt)}}
		if rec.Exit != nil {
			ended = append(ended, i)
		}
	}
	for _, i := range ended {
		e := records[i].Exit
		finished := e.FinishedAt.Time
		if finished.IsZero() {
			finished = now
		}
		p.Exited(i, e.ExitCode, e.Reason, e.Message, finished)
	}
	p.schedule(now)
	return p, nil
}
