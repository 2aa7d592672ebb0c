package prober

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Event reasons, upstream's.
const (
	// ReasonUnhealthy (Warning): a probe failed or errored.
	ReasonUnhealthy = "Unhealthy"
	// ReasonProbeWarning (Warning): an HTTP probe got a redirect to
	// another host; it counts as a success.
	ReasonProbeWarning = "ProbeWarning"
	// ReasonKilling (Normal): a liveness or startup probe failed
	// failureThreshold times in a row; the message is Kill.Message.
	ReasonKilling = "Killing"
)

// Recorder records an event about a pod. It must not block for long; it
// is called from the goroutines that run probes, with no lock held.
type Recorder func(pod *corev1.Pod, eventType, reason, message string)

// Config builds a Manager.
type Config struct {
	// Clock schedules probes; nil means the real clock. Probe timeouts
	// bound real I/O and so run on real time.
	Clock clock.Clock
	// Exec runs exec probes in containers; nil makes every exec probe
	// error (and so never count).
	Exec ExecRunner
	// Dial opens the TCP connections of tcpSocket and grpc probes, and of
	// httpGet probes when HTTPTransport is nil; nil means a net.Dialer
	// with upstream's one-second SO_LINGER.
	Dial DialFunc
	// HTTPTransport carries httpGet probes; nil means upstream's: no
	// proxy, no keep-alives, no compression, TLS without verification.
	// A transport given here is used as it is.
	HTTPTransport http.RoundTripper
	// Recorder records the Unhealthy, ProbeWarning and Killing events;
	// nil records none.
	Recorder Recorder
	// OnChange, when set, is called with a pod's UID after the Status of
	// one of its containers changed because of a probe, a new container
	// run or the pod's deletion. It must not block; it is called with no
	// lock held.
	OnChange func(uid types.UID)
	// Registerer, when set, gets prober_probe_total.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Dial == nil {
		c.Dial = probeDialer()
	}
	if c.HTTPTransport == nil {
		c.HTTPTransport = probeTransport(c.Dial)
	}
	if c.Recorder == nil {
		c.Recorder = func(*corev1.Pod, string, string, string) {}
	}
	if c.OnChange == nil {
		c.OnChange = func(types.UID) {}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Manager runs the probes of the pods it is given. Its methods are safe
// for concurrent use.
type Manager struct {
	cfg     Config
	runner  runner
	metrics *metrics
	// wake tells Run that the schedule may have changed.
	wake chan struct{}

	mu   sync.Mutex
	pods map[types.UID]*podEntry
}

type podEntry struct {
	pod   *corev1.Pod
	podIP string
	// containers are the pod's containers and sidecars, by name.
	containers map[string]*containerEntry
}

type containerEntry struct {
	spec *corev1.Container
	// sidecar: a restartable init container.
	sidecar bool
	run     containerRun
}

func (c *containerEntry) status(pod *corev1.Pod) Status {
	return statusOf(pod, c.spec, c.sidecar, &c.run)
}

// New builds a Manager from cfg.
func New(cfg Config) (*Manager, error) {
	cfg.setDefaults()
	m := &Manager{
		cfg:     cfg,
		runner:  runner{exec: cfg.Exec, dial: cfg.Dial, transport: cfg.HTTPTransport},
		metrics: newMetrics(),
		wake:    make(chan struct{}, 1),
		pods:    make(map[types.UID]*podEntry),
	}
	if err := m.metrics.register(cfg.Registerer); err != nil {
		return nil, err
	}
	return m, nil
}

// AddPod starts tracking pod, or takes a newer version of a tracked pod
// (probe specs are immutable, so only its metadata and deletion count).
// Its containers are not running until UpdateContainer says so. Once the
// pod has a deletionTimestamp, liveness and startup probes stop and
// report Success, so that nothing restarts while the pod terminates. pod
// is read-only from now on: pass a new object for a new version.
func (m *Manager) AddPod(pod *corev1.Pod) {
	m.mu.Lock()
	e := m.pods[pod.UID]
	existed := e != nil
	if !existed {
		e = &podEntry{containers: make(map[string]*containerEntry)}
		m.pods[pod.UID] = e
	}
	before := e.statuses()
	e.pod = pod
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			e.track(c, true)
		}
	}
	for i := range pod.Spec.Containers {
		e.track(&pod.Spec.Containers[i], false)
	}
	if pod.DeletionTimestamp != nil {
		for _, c := range e.containers {
			for _, s := range c.run.probes {
				if s != nil {
					s.settle()
				}
			}
		}
	}
	// A new pod has no running container: nothing to tell.
	changed := existed && !maps.Equal(before, e.statuses())
	m.mu.Unlock()
	m.changed(pod.UID, changed)
}

func (e *podEntry) track(spec *corev1.Container, sidecar bool) {
	if c := e.containers[spec.Name]; c != nil {
		c.spec = spec
		return
	}
	e.containers[spec.Name] = &containerEntry{spec: spec, sidecar: sidecar}
}

// statuses is a digest of the Status of every container.
func (e *podEntry) statuses() map[string]statusKey {
	out := make(map[string]statusKey, len(e.containers))
	for name, c := range e.containers {
		out[name] = keyOf(c.status(e.pod))
	}
	return out
}

// statusKey is a Status reduced to what callers act on.
type statusKey struct {
	started, ready, kill bool
	probe                Kind
}

func keyOf(s Status) statusKey {
	k := statusKey{started: s.Started, ready: s.Ready, kill: s.Kill != nil}
	if s.Kill != nil {
		k.probe = s.Kill.Probe
	}
	return k
}

// RemovePod stops probing the pod and forgets it; probes still running
// are ignored when they end.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	e := m.pods[uid]
	delete(m.pods, uid)
	if e != nil {
		m.metrics.forget(e.pod)
	}
	m.mu.Unlock()
	m.kick()
}

// UpdateContainer tells the manager about the current run of a container
// of a tracked pod: its container ID, when it started, and the pod's IP
// (ignored when empty). An empty containerID means the container is not
// running: no probes, not started, not ready. A new ID starts the
// container's probes afresh (initial delay from started, initial
// results); the same ID again changes nothing. Unknown pods and
// container names are ignored.
func (m *Manager) UpdateContainer(uid types.UID, container, containerID string, started time.Time, podIP string) {
	m.mu.Lock()
	e := m.pods[uid]
	var c *containerEntry
	if e != nil {
		if podIP != "" {
			e.podIP = podIP
		}
		c = e.containers[container]
	}
	if c == nil || c.run.id == containerID {
		m.mu.Unlock()
		return
	}
	before := keyOf(c.status(e.pod))
	c.run = newContainerRun(c.spec, containerID, started, e.pod.DeletionTimestamp != nil)
	changed := before != keyOf(c.status(e.pod))
	m.mu.Unlock()
	m.changed(uid, changed)
}

// Status is what the probes say about the container's current run; the
// zero Status for a pod or container the manager does not track.
func (m *Manager) Status(uid types.UID, container string) Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.pods[uid]; e != nil {
		if c := e.containers[container]; c != nil {
			return c.status(e.pod)
		}
	}
	return Status{}
}

// NextDue is when the next probe is due, and false when none is (no
// running container has a probe left to run). A due time may be in the
// past: Step runs it.
func (m *Manager) NextDue() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	found := false
	for _, e := range m.pods {
		for _, c := range e.containers {
			started := c.run.hasStarted()
			for _, s := range c.run.probes {
				if s == nil || !s.active(started) {
					continue
				}
				if !found || s.next.Before(next) {
					next, found = s.next, true
				}
			}
		}
	}
	return next, found
}

// Step runs every probe due at now and waits for them (each is bounded by
// its timeout), then applies their outcomes in pod, container and probe
// order: results, events, metrics and OnChange.
func (m *Manager) Step(ctx context.Context, now time.Time) {
	jobs := m.launch(now)
	attempts := make([]attempt, len(jobs))
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() { attempts[i] = m.runner.probe(ctx, jobs[i].target) })
	}
	wg.Wait()
	for i := range jobs {
		m.finish(ctx, jobs[i], attempts[i])
	}
}

// Run probes until ctx ends, sleeping on the clock until the next probe
// is due. Unlike Step, it does not wait for a slow probe before starting
// the next: each probe applies its outcome when it ends. Run returns
// after the probes it started ended.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		now := m.cfg.Clock.Now()
		for _, j := range m.launch(now) {
			wg.Go(func() { m.finish(ctx, j, m.runner.probe(ctx, j.target)) })
		}
		var timer clock.Timer
		var tick <-chan time.Time
		if next, ok := m.NextDue(); ok {
			timer = m.cfg.Clock.NewTimer(next.Sub(now))
			tick = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-tick:
		case <-m.wake:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// job is one launched probe.
type job struct {
	uid       types.UID
	container *containerEntry
	state     *probeState
	target    target
}

// launch marks every probe due at now as in flight and returns them in
// pod, container and kind order.
func (m *Manager) launch(now time.Time) []job {
	m.mu.Lock()
	defer m.mu.Unlock()
	var jobs []job
	for uid, e := range m.pods {
		for _, c := range e.containers {
			started := c.run.hasStarted()
			for _, s := range c.run.probes {
				if s == nil || !s.due(now, started) {
					continue
				}
				s.launch(now)
				jobs = append(jobs, job{uid: uid, container: c, state: s, target: target{
					pod: e.pod, container: c.spec, containerID: c.run.id, podIP: e.podIP,
					kind: s.kind, probe: s.kind.spec(c.spec), timeout: s.timing.Timeout,
				}})
			}
		}
	}
	slices.SortFunc(jobs, func(a, b job) int {
		return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.target.container.Name, b.target.container.Name), cmp.Compare(a.target.kind, b.target.kind))
	})
	return jobs
}

// finish applies the attempt of j: it is dropped when ctx ended (the
// agent is stopping) or when the container has a new run or the pod is
// gone since j was launched.
func (m *Manager) finish(ctx context.Context, j job, a attempt) {
	m.mu.Lock()
	e := m.pods[j.uid]
	if e == nil || e.containers[j.target.container.Name] != j.container || j.container.run.probes[j.target.kind] != j.state {
		m.mu.Unlock()
		return
	}
	if ctx.Err() != nil {
		j.state.abandon()
		m.mu.Unlock()
		return
	}
	pod := e.pod
	k, name := j.target.kind, j.target.container.Name
	before := j.container.status(pod)
	if a.err != nil {
		// As upstream, an attempt that errored does not count.
		j.state.abandon()
	} else {
		r := resultFailure
		if a.verdict == verdictSuccess || a.verdict == verdictWarning {
			r = resultSuccess
		}
		j.state.observe(r)
		// Counted under the lock, so that RemovePod's forget comes after.
		m.metrics.count(pod, name, k, a.verdict)
	}
	after := j.container.status(pod)
	m.mu.Unlock()

	log := m.cfg.Logger.With("pod", pod.Namespace+"/"+pod.Name, "container", name, "probe", k.String())
	if ev, ok := attemptEvent(k, a); ok {
		log.Debug("probe did not succeed", "verdict", a.verdict.String(), "message", ev.message)
		m.cfg.Recorder(pod, ev.eventType, ev.reason, ev.message)
	}
	if after.Kill != nil && before.Kill == nil {
		log.Info("container failed its probe and is to be killed", "message", after.Kill.Message)
		m.cfg.Recorder(pod, corev1.EventTypeNormal, ReasonKilling, after.Kill.Message)
	}
	m.changed(j.uid, keyOf(before) != keyOf(after))
}

// changed wakes Run, and tells OnChange when a status changed.
func (m *Manager) changed(uid types.UID, statusChanged bool) {
	m.kick()
	if statusChanged {
		m.cfg.OnChange(uid)
	}
}

func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// event is one event to record about a pod.
type event struct {
	eventType, reason, message string
}

// attemptEvent is upstream's event for an attempt of probe k, if any:
// an error or a failure is Unhealthy, a warning is ProbeWarning, a
// success none.
func attemptEvent(k Kind, a attempt) (event, bool) {
	switch {
	case a.err != nil:
		return event{corev1.EventTypeWarning, ReasonUnhealthy, fmt.Sprintf("%s probe errored and resulted in %s state: %s", k, a.verdict, a.err)}, true
	case a.verdict == verdictFailure:
		return event{corev1.EventTypeWarning, ReasonUnhealthy, fmt.Sprintf("%s probe failed: %s", k, a.output)}, true
	case a.verdict == verdictWarning:
		return event{corev1.EventTypeWarning, ReasonProbeWarning, fmt.Sprintf("%s probe warning: %s", k, a.output)}, true
	}
	return event{}, false
}
