// Package fake is an in-memory runtime.Runtime for tests and the simulator:
// containers "run" on the injected clock, without processes, and the same
// inputs always give the same states.
//
// A container's behaviour comes from its image, read as a comma-separated
// list of directives; anything that is not a directive (a real image name,
// say) is ignored, so "busybox" runs until stopped:
//
//	exit:<code>@<duration>  exit with <code> <duration> after each start
//	                        ("exit:0@5s", "exit:1@0s")
//	term:<code>@<duration>  on stop, exit with <code> after <duration>
//	                        (default term:143@0s, like a process killed by
//	                        SIGTERM; "term:0@2s" is a clean 2 s shutdown)
//	term:ignore             ignore the stop request; killed (137) when the
//	                        grace period ends
//	start-error:<message>   every start fails (StartError, 128)
//
// For example "busybox,exit:1@2s" crashes 2 s after each start and is
// restarted with upstream's back-off.
//
// Time only moves when the clock does: the runtime works out, on every
// call, what happened up to the clock's now. NextChange tells a simulator
// when the next thing happens; Changes only fires for what a call found.
package fake

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"knode/internal/agent/runtime"
)

// Exit codes a stopped fake container reports.
const (
	ExitCodeTerm = 143 // 128 + SIGTERM
	ExitCodeKill = 137 // 128 + SIGKILL
)

// Config builds a Runtime.
type Config struct {
	// Clock is the only source of time; nil means the real clock.
	Clock clock.PassiveClock
	// Backoff is the restart back-off; zero means upstream's.
	Backoff runtime.BackoffConfig
}

// Runtime is the fake runtime. Use New.
type Runtime struct {
	cfg     Config
	changes chan struct{}

	mu     sync.Mutex
	pods   map[types.UID]*pod
	starts int64
}

var _ runtime.Runtime = (*Runtime)(nil)

type pod struct {
	plan      *runtime.Plan
	behaviour []behaviour
	exits     map[int]exit
	// killAt is when running containers are killed; zero when no stop is
	// pending.
	killAt time.Time
}

type exit struct {
	at   time.Time
	code int32
	// reason and message, when set, are what KillContainer gave.
	reason, message string
}

// behaviour is a container's parsed image.
type behaviour struct {
	exits      bool
	exitCode   int32
	exitAfter  time.Duration
	termCode   int32
	termAfter  time.Duration
	ignoreTerm bool
	startError string
}

// New returns an empty fake runtime.
func New(cfg Config) *Runtime {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Runtime{cfg: cfg, changes: make(chan struct{}, 1), pods: map[types.UID]*pod{}}
}

// parseImage reads the directives of image (see the package comment).
func parseImage(image string) (behaviour, error) {
	b := behaviour{termCode: ExitCodeTerm}
	for _, item := range strings.Split(image, ",") {
		item = strings.TrimSpace(item)
		switch {
		case strings.HasPrefix(item, "exit:"):
			code, after, err := codeAt(strings.TrimPrefix(item, "exit:"))
			if err != nil {
				return b, fmt.Errorf("image directive %q: %w", item, err)
			}
			b.exits, b.exitCode, b.exitAfter = true, code, after
		case item == "term:ignore":
			b.ignoreTerm = true
		case strings.HasPrefix(item, "term:"):
			code, after, err := codeAt(strings.TrimPrefix(item, "term:"))
			if err != nil {
				return b, fmt.Errorf("image directive %q: %w", item, err)
			}
			b.termCode, b.termAfter = code, after
		case strings.HasPrefix(item, "start-error:"):
			b.startError = strings.TrimPrefix(item, "start-error:")
		}
	}
	return b, nil
}

// codeAt parses "<code>@<duration>".
func codeAt(s string) (int32, time.Duration, error) {
	codeText, afterText, ok := strings.Cut(s, "@")
	if !ok {
		return 0, 0, fmt.Errorf("want <code>@<duration>")
	}
	code, err := strconv.ParseInt(codeText, 10, 32)
	if err != nil || code < 0 || code > 255 {
		return 0, 0, fmt.Errorf("exit code %q: must be an integer from 0 to 255", codeText)
	}
	after, err := time.ParseDuration(afterText)
	if err != nil || after < 0 {
		return 0, 0, fmt.Errorf("duration %q: must be a non-negative duration such as 5s", afterText)
	}
	return int32(code), after, nil
}

// StartPod implements runtime.Runtime.
func (r *Runtime) StartPod(_ context.Context, in *corev1.Pod) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pods[in.UID]; ok {
		return nil
	}
	now := r.cfg.Clock.Now()
	p := &pod{plan: runtime.NewPlan(in, now, r.cfg.Backoff), exits: map[int]exit{}}
	for i := 0; i < p.plan.Len(); i++ {
		c, _ := p.plan.Container(i)
		b, err := parseImage(c.Image)
		if err != nil {
			p.plan.ConfigError(i, err.Error())
		}
		p.behaviour = append(p.behaviour, b)
	}
	r.pods[in.UID] = p
	r.advance(p, now)
	return nil
}

// StopPod implements runtime.Runtime.
func (r *Runtime) StopPod(_ context.Context, uid types.UID, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return fmt.Errorf("stopping pod %s: %w", uid, runtime.ErrPodNotFound)
	}
	now := r.cfg.Clock.Now()
	r.advance(p, now)
	if !p.plan.Stopping() {
		p.plan.Stop()
		for _, i := range p.plan.Running() {
			b := p.behaviour[i]
			if b.ignoreTerm {
				continue
			}
			at := now.Add(b.termAfter)
			if e, ok := p.exits[i]; !ok || at.Before(e.at) {
				p.exits[i] = exit{at: at, code: b.termCode}
			}
		}
	}
	deadline := now.Add(max(grace, 0))
	if p.killAt.IsZero() || deadline.Before(p.killAt) {
		p.killAt = deadline
	}
	r.advance(p, now)
	return nil
}

// RemovePod implements runtime.Runtime.
func (r *Runtime) RemovePod(_ context.Context, uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return nil
	}
	r.advance(p, r.cfg.Clock.Now())
	if len(p.plan.Running()) > 0 {
		return fmt.Errorf("removing pod %s: %w", uid, runtime.ErrPodRunning)
	}
	delete(r.pods, uid)
	return nil
}

// PodStatus implements runtime.Runtime.
func (r *Runtime) PodStatus(uid types.UID) (runtime.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return runtime.PodStatus{}, fmt.Errorf("pod %s: %w", uid, runtime.ErrPodNotFound)
	}
	r.advance(p, r.cfg.Clock.Now())
	return p.plan.Status(), nil
}

// ListPods implements runtime.Runtime; pods come sorted by uid.
func (r *Runtime) ListPods() []runtime.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Clock.Now()
	var out []runtime.PodStatus
	for _, uid := range r.uids() {
		p := r.pods[uid]
		r.advance(p, now)
		out = append(out, p.plan.Status())
	}
	return out
}

func (r *Runtime) uids() []types.UID {
	uids := make([]types.UID, 0, len(r.pods))
	for uid := range r.pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids
}

// Changes implements runtime.Runtime.
func (r *Runtime) Changes() <-chan struct{} { return r.changes }

// NextChange is the earliest time after the clock's now at which some
// container changes state on its own, if any will.
func (r *Runtime) NextChange() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.Clock.Now()
	var next time.Time
	for _, uid := range r.uids() {
		p := r.pods[uid]
		r.advance(p, now)
		if at, ok := p.nextEvent(); ok && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next, !next.IsZero()
}

// event kinds, in the order ties are applied.
const (
	eventExit = iota
	eventKill
	eventDue
)

// next is the earliest pending event of p and its kind; index is the
// exiting container for eventExit. Ties go to exits (lowest container
// first), then the kill, then due starts.
func (p *pod) next() (at time.Time, kind, index int, ok bool) {
	consider := func(t time.Time, k, i int) {
		if !ok || t.Before(at) || (t.Equal(at) && (k < kind || (k == kind && i < index))) {
			at, kind, index, ok = t, k, i, true
		}
	}
	for i, e := range p.exits {
		consider(e.at, eventExit, i)
	}
	if !p.killAt.IsZero() && len(p.plan.Running()) > 0 {
		consider(p.killAt, eventKill, 0)
	}
	if due, has := p.plan.NextDue(); has {
		consider(due, eventDue, 0)
	}
	return at, kind, index, ok
}

func (p *pod) nextEvent() (time.Time, bool) {
	at, _, _, ok := p.next()
	return at, ok
}

// advance applies, in time order, every event of p up to now.
func (r *Runtime) advance(p *pod, now time.Time) {
	changed := false
	for {
		at, kind, index, ok := p.next()
		if !ok || at.After(now) {
			break
		}
		changed = true
		switch kind {
		case eventExit:
			e := p.exits[index]
			delete(p.exits, index)
			reason := exitReason(e.code)
			if e.reason != "" {
				reason = e.reason
			}
			p.plan.Exited(index, e.code, reason, e.message, at)
		case eventKill:
			for _, i := range p.plan.Running() {
				delete(p.exits, i)
				p.plan.Exited(i, ExitCodeKill, runtime.ReasonError, "", at)
			}
			p.killAt = time.Time{}
		case eventDue:
			for _, i := range p.plan.Due(at) {
				r.start(p, i, at)
			}
		}
	}
	if changed {
		select {
		case r.changes <- struct{}{}:
		default:
		}
	}
}

func (r *Runtime) start(p *pod, i int, now time.Time) {
	b := p.behaviour[i]
	if b.startError != "" {
		p.plan.StartFailed(i, b.startError, now)
		return
	}
	r.starts++
	c, _ := p.plan.Container(i)
	p.plan.Started(i, fmt.Sprintf("fake://%s/%s/%d", p.plan.UID(), c.Name, r.starts), now)
	if b.exits {
		p.exits[i] = exit{at: now.Add(b.exitAfter), code: b.exitCode}
	}
}

func exitReason(code int32) string {
	if code == 0 {
		return runtime.ReasonCompleted
	}
	return runtime.ReasonError
}

var _ runtime.ContainerKiller = (*Runtime)(nil)

// KillContainer implements runtime.ContainerKiller: the container's
// current run stops as its term directive says (143 at once by default),
// or is killed (137) when grace ends first or it ignores the request; the
// restart policy then applies. reason, when set, replaces the exit's.
func (r *Runtime) KillContainer(_ context.Context, uid types.UID, container string, grace time.Duration, reason, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return fmt.Errorf("killing container %s of pod %s: %w", container, uid, runtime.ErrPodNotFound)
	}
	now := r.cfg.Clock.Now()
	r.advance(p, now)
	for _, i := range p.plan.Running() {
		c, _ := p.plan.Container(i)
		if c.Name != container {
			continue
		}
		b := p.behaviour[i]
		grace = max(grace, 0)
		e := exit{at: now.Add(grace), code: ExitCodeKill, reason: reason, message: message}
		if !b.ignoreTerm && b.termAfter <= grace {
			e.at, e.code = now.Add(b.termAfter), b.termCode
		}
		if old, ok := p.exits[i]; !ok || e.at.Before(old.at) {
			p.exits[i] = e
		}
		r.advance(p, now)
		return nil
	}
	for i := 0; i < p.plan.Len(); i++ {
		if c, _ := p.plan.Container(i); c.Name == container {
			return nil // not running
		}
	}
	return fmt.Errorf("killing container %s of pod %s: the pod has no such container", container, uid)
}
