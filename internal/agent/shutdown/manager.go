package shutdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"knode/internal/agent/pods"
	"knode/internal/agent/shutdown/logind"
)

// Strings the manager writes; they are upstream's.
const (
	// ReasonNodeShutdown is the reason of a pod rejected, and of the
	// events recorded, while the node shuts down.
	ReasonNodeShutdown = "NodeShutdown"
	// MessageRejected is the rejection message (the pod worker prefixes
	// "Pod was rejected: ").
	MessageRejected = "Pod was rejected as the node is shutting down."
	// ReasonTerminated and MessageTerminated are the status of a pod the
	// shutdown stopped.
	ReasonTerminated  = "Terminated"
	MessageTerminated = "Pod was terminated in response to imminent node shutdown."
	// ReasonTerminationByKubelet is the DisruptionTarget condition's reason.
	ReasonTerminationByKubelet = "TerminationByKubelet"
	// ShuttingDownMessage is the error the Ready condition carries.
	ShuttingDownMessage = "node is shutting down"

	reasonShutdown       = "Shutdown"
	messageShutdown      = "Shutdown manager detected shutdown event"
	messageCancelled     = "Shutdown manager detected shutdown cancellation"
	reasonTruncated      = "ShutdownGracePeriodTruncated"
	reasonReport         = "ShutdownReport"
	stateFileName        = "graceful_node_shutdown_state"
	reportFileName       = "shutdown-report.json"
	defaultStatusReserve = 2 * time.Second
	reconnectPeriod      = time.Second
	// pollPeriod is how often a running shutdown looks at its pods when
	// nothing else wakes it.
	pollPeriod = 100 * time.Millisecond
)

// ErrShuttingDown is what ShutdownStatus returns while the node shuts down.
var ErrShuttingDown = errors.New(ShuttingDownMessage)

// DisabledMessage is what the agent logs and records, as a Normal event
// with reason GracefulShutdownDisabled, when no groups are configured.
const DisabledMessage = "Graceful node shutdown is off: shutdownGracePeriod and shutdownGracePeriodCriticalPods are both 0s (the default), so a machine shutdown will not stop pods in priority order; set them in the KubeletConfiguration to turn it on"

// DisabledReason is the reason of that event.
const DisabledReason = "GracefulShutdownDisabled"

// Bus is what the manager needs from logind. Dial gives one over D-Bus.
type Bus interface {
	// InhibitDelayMax is logind's InhibitDelayMaxUSec.
	InhibitDelayMax() (time.Duration, error)
	// PreparingForShutdown is logind's property of that name.
	PreparingForShutdown() (bool, error)
	// InhibitShutdown takes a delay lock on shutdown; closing the result
	// releases it.
	InhibitShutdown(who, why string) (io.Closer, error)
	// ReloadLogind makes logind read its configuration again.
	ReloadLogind() error
	// Watch streams PrepareForShutdown (from logind only) and owner
	// changes; the channel closes when the bus is lost.
	Watch() (<-chan logind.Signal, error)
	Close() error
}

// Dial connects to the system bus at address ("" means
// DBUS_SYSTEM_BUS_ADDRESS, else the default system bus).
func Dial(address string, log *slog.Logger) (Bus, error) {
	c, err := logind.Dial(address, logind.WithLogger(log))
	if err != nil {
		return nil, err
	}
	return dbusBus{c}, nil
}

type dbusBus struct{ *logind.Conn }

func (b dbusBus) InhibitShutdown(who, why string) (io.Closer, error) {
	return b.Conn.InhibitShutdown(who, why)
}

// Pods is what the manager needs from the pod worker; *pods.Worker is one.
type Pods interface {
	ActivePods(ctx context.Context) ([]*corev1.Pod, error)
	Terminate(pod *corev1.Pod, grace time.Duration, final func(*corev1.PodStatus))
	Terminated(uid types.UID) (pods.Termination, bool)
	Kick()
}

// Config builds a Manager.
type Config struct {
	// Groups are the priority groups (Settings.Groups); required.
	Groups []Group
	// Dial connects to logind; required for Run, unused by the steps.
	Dial func() (Bus, error)
	// DropInDir is where a logind drop-in raising InhibitDelayMaxSec is
	// written; empty means logind.DefaultDropInDir.
	DropInDir string
	// StatusReserve is the part of the delay kept, after the last group,
	// for the pods' final statuses to reach the server before the lock
	// is released. It is asked of logind on top of the groups. Zero means
	// 2 s.
	StatusReserve time.Duration
	// Pods stops the pods and writes their final statuses; required.
	Pods Pods
	// Event records an event about the Node; nil records none.
	Event func(eventType, reason, message string)
	// SyncStatus asks for the Node's status to be posted now (so Ready
	// turns False at once); it must not block. Nil: the next status pass.
	SyncStatus func()
	// RootDir holds the state file and the report; required.
	RootDir string
	// Registerer gets the two shutdown gauges; nil registers nowhere.
	Registerer prometheus.Registerer
	// Clock drives every wait and stamps every time; nil is the real one.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	var errs []error
	if len(c.Groups) == 0 {
		errs = append(errs, errors.New("shutdown: Config.Groups is empty (graceful shutdown is off)"))
	}
	if c.Pods == nil {
		errs = append(errs, errors.New("shutdown: Config.Pods is required"))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("shutdown: Config.RootDir is required"))
	}
	if c.StatusReserve < 0 {
		errs = append(errs, fmt.Errorf("shutdown: status reserve %v: must not be negative", c.StatusReserve))
	}
	if c.StatusReserve == 0 {
		c.StatusReserve = defaultStatusReserve
	}
	if c.DropInDir == "" {
		c.DropInDir = logind.DefaultDropInDir
	}
	if c.Event == nil {
		c.Event = func(string, string, string) {}
	}
	if c.SyncStatus == nil {
		c.SyncStatus = func() {}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Manager runs graceful node shutdown for one node: it holds a delay
// inhibitor lock, and when logind announces a shutdown it marks the node
// shutting down, stops the pods group by group, lowest priority first,
// waits for their final statuses, and releases the lock. Use New.
type Manager struct {
	cfg Config
	log *slog.Logger

	startGauge, endGauge prometheus.Gauge

	mu sync.Mutex
	// shuttingDown is set from a shutdown's start until it is cancelled.
	shuttingDown bool
	lock         io.Closer
	// granted is logind's InhibitDelayMax as last read; groups are
	// cfg.Groups fitted into it, and cuts what fitting took.
	granted time.Duration
	groups  []Group
	cuts    []Cut
	// run is the shutdown in progress, or the last one.
	run *run
}

// run is one shutdown.
type run struct {
	started time.Time
	granted time.Duration
	groups  []Group
	cuts    []Cut
	plan    Plan
	// group is the index in plan.Groups of the group being stopped;
	// len(plan.Groups) once every group has been.
	group        int
	groupStarted time.Time
	// waited is how long each group of the plan was waited for.
	waited []time.Duration
	ended  time.Time
	// cancelled: ended by PrepareForShutdown(false).
	cancelled bool
}

func (r *run) active() bool { return r != nil && r.ended.IsZero() }

// New checks cfg, registers the gauges and restores them from the state
// file a previous agent left in RootDir.
func New(cfg Config) (*Manager, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg: cfg,
		log: cfg.Logger.With("component", "shutdown"),
		startGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubelet_graceful_shutdown_start_time_seconds",
			Help: "Unix time at which the last graceful node shutdown started.",
		}),
		endGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubelet_graceful_shutdown_end_time_seconds",
			Help: "Unix time at which the last graceful node shutdown ended.",
		}),
		groups: cfg.Groups,
	}
	if cfg.Registerer != nil {
		for _, g := range []prometheus.Collector{m.startGauge, m.endGauge} {
			if err := cfg.Registerer.Register(g); err != nil {
				return nil, fmt.Errorf("shutdown: registering metrics: %w", err)
			}
		}
	}
	st, err := ReadState(filepath.Join(cfg.RootDir, stateFileName))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		m.log.Warn("ignoring the shutdown state file", "err", err)
	default:
		setGauge(m.startGauge, st.StartTime)
		setGauge(m.endGauge, st.EndTime)
	}
	return m, nil
}

func setGauge(g prometheus.Gauge, t time.Time) {
	if !t.IsZero() {
		g.Set(float64(t.UnixNano()) / 1e9)
	}
}

// ShutdownStatus is ErrShuttingDown while the node shuts down, else nil.
// The Ready condition reports it.
func (m *Manager) ShutdownStatus() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shuttingDown {
		return ErrShuttingDown
	}
	return nil
}

// Admit rejects every new pod while the node shuts down.
func (m *Manager) Admit(*corev1.Pod) *pods.Rejection {
	if m.ShutdownStatus() != nil {
		return &pods.Rejection{Reason: ReasonNodeShutdown, Message: MessageRejected}
	}
	return nil
}

// Requested is the delay the manager asks logind for: every group's period
// plus the status reserve.
func (m *Manager) Requested() time.Duration {
	return Total(m.cfg.Groups) + m.cfg.StatusReserve
}

// Setup prepares the manager on a fresh connection to logind: it reads the
// delay logind grants, raises it through a drop-in when it is short (and
// reads it again, backing off on the clock, while logind reloads), fits
// the groups into what it got, takes the delay lock, and acts at once on a
// shutdown already under way. A lock held before is released first.
func (m *Manager) Setup(ctx context.Context, bus Bus) error {
	granted, err := bus.InhibitDelayMax()
	if err != nil {
		return err
	}
	want := m.Requested()
	if granted < want {
		granted, err = m.raiseDelay(ctx, bus, granted, want)
		if err != nil {
			return err
		}
	}
	fitted, cuts := Fit(m.cfg.Groups, granted-m.cfg.StatusReserve)
	if len(cuts) > 0 {
		msg := truncatedMessage(granted, want, cuts)
		m.log.Warn(msg)
		m.cfg.Event(corev1.EventTypeWarning, reasonTruncated, msg)
	}
	lock, err := bus.InhibitShutdown(logind.Who, logind.Why)
	if err != nil {
		return fmt.Errorf("taking the shutdown inhibitor lock: %w", err)
	}
	m.mu.Lock()
	old := m.lock
	m.lock, m.granted, m.groups, m.cuts = lock, granted, fitted, cuts
	m.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	m.log.Info("holding a shutdown delay lock", "delay", granted, "groups", fmt.Sprint(fitted))
	preparing, err := bus.PreparingForShutdown()
	if err != nil {
		return err
	}
	if preparing {
		m.log.Info("a shutdown is already under way")
		m.Begin(ctx)
	}
	return nil
}

// reloadReads is how many times the delay is read after a reload.
const reloadReads = 6

// raiseDelay writes the drop-in asking for want, reloads logind and reads
// the delay again: at once, then up to five more times after 100 ms,
// doubling (3.1 s in all), since logind rereads its files some time after
// the signal. It returns the last delay read.
func (m *Manager) raiseDelay(ctx context.Context, bus Bus, granted, want time.Duration) (time.Duration, error) {
	// Whole seconds, rounded up, so the file never asks for less.
	secs := time.Duration(math.Ceil(want.Seconds())) * time.Second
	path, err := logind.WriteDropIn(m.cfg.DropInDir, secs)
	if err != nil {
		return granted, fmt.Errorf("raising logind's InhibitDelayMaxSec: %w", err)
	}
	m.log.Info("logind's InhibitDelayMaxSec is shorter than the shutdown needs; wrote a drop-in and reloading logind", "current", granted, "wanted", secs, "file", path)
	if err := bus.ReloadLogind(); err != nil {
		return granted, fmt.Errorf("reloading logind: %w", err)
	}
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		if granted, err = bus.InhibitDelayMax(); err != nil || granted >= want || try == reloadReads-1 {
			return granted, err
		}
		if err := m.sleep(ctx, wait); err != nil {
			return granted, err
		}
		wait *= 2
	}
}

func (m *Manager) sleep(ctx context.Context, d time.Duration) error {
	t := m.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

func truncatedMessage(granted, want time.Duration, cuts []Cut) string {
	msg := fmt.Sprintf("logind grants a shutdown delay of %v, less than the %v requested; the shutdown plan is cut to fit:", granted, want)
	for i, c := range cuts {
		if i > 0 {
			msg += ","
		}
		msg += fmt.Sprintf(" priority %d from %v to %v", c.Priority, c.Requested, c.Granted)
	}
	return msg
}

// Handle acts on one signal from the bus.
func (m *Manager) Handle(ctx context.Context, bus Bus, sig logind.Signal) error {
	switch sig.Kind {
	case logind.PrepareForShutdown:
		if sig.Active {
			m.Begin(ctx)
		} else {
			return m.Cancel(ctx, bus)
		}
	case logind.OwnerChanged:
		if sig.Owner == "" {
			// logind is gone, and its locks with it.
			m.dropLock()
			return nil
		}
		m.log.Info("logind restarted; taking the lock again", "owner", sig.Owner)
		return m.Setup(ctx, bus)
	}
	return nil
}

func (m *Manager) dropLock() {
	m.mu.Lock()
	lock := m.lock
	m.lock = nil
	m.mu.Unlock()
	if lock != nil {
		_ = lock.Close()
	}
}

// Begin starts a shutdown now, unless one is under way: it records the
// Shutdown event, marks the node shutting down (new pods are rejected and
// Ready turns False), asks for a status post, writes the start to the
// state file, and stops the first group's pods. Step carries it on.
func (m *Manager) Begin(ctx context.Context) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	if m.shuttingDown {
		m.mu.Unlock()
		return
	}
	m.shuttingDown = true
	r := &run{started: now, granted: m.granted, groups: m.groups, cuts: m.cuts}
	m.run = r
	m.mu.Unlock()
	m.log.Info(messageShutdown)
	m.cfg.SyncStatus()
	m.cfg.Event(corev1.EventTypeNormal, reasonShutdown, messageShutdown)
	m.writeState(State{StartTime: now})
	setGauge(m.startGauge, now)
	active, err := m.cfg.Pods.ActivePods(ctx)
	if err != nil {
		m.log.Error("listing the pods to stop failed; stopping none", "err", err)
	}
	m.mu.Lock()
	r.plan = NewPlan(r.groups, active)
	r.waited = make([]time.Duration, len(r.plan.Groups))
	m.mu.Unlock()
	m.Step(ctx)
}

// Step carries a shutdown on at the clock's now: it moves to the next
// group once every pod of the current one is done (stopped and its final
// status written, or gone) or the group's period has passed, and it ends
// the shutdown once every group is through and every final status is
// written, or the status reserve has run out too. It returns when it wants
// to be called again (zero when no shutdown is running); calling it
// earlier is harmless.
func (m *Manager) Step(ctx context.Context) time.Time {
	m.mu.Lock()
	r := m.run
	if !r.active() {
		m.mu.Unlock()
		return time.Time{}
	}
	now := m.cfg.Clock.Now()
	var start []PodPlan
	for r.group < len(r.plan.Groups) {
		g := r.plan.Groups[r.group]
		if r.groupStarted.IsZero() {
			r.groupStarted = now
			start = g.Pods
			m.log.Info("stopping a priority group", "priority", g.Priority, "period", g.Period, "pods", len(g.Pods))
			break
		}
		if !m.allDone(g.Pods) && now.Before(r.groupStarted.Add(g.Period)) {
			break
		}
		r.waited[r.group] = now.Sub(r.groupStarted)
		r.group++
		r.groupStarted = time.Time{}
	}
	var next time.Time
	if r.group < len(r.plan.Groups) {
		next = r.groupStarted.Add(r.plan.Groups[r.group].Period)
	} else {
		var planned time.Duration
		for _, g := range r.plan.Groups {
			planned += g.Period
		}
		deadline := r.started.Add(min(planned+m.cfg.StatusReserve, r.granted))
		if r.granted == 0 {
			deadline = now
		}
		if m.allPlanned(r) || !now.Before(deadline) {
			m.mu.Unlock()
			m.finish(ctx, now)
			return time.Time{}
		}
		next = deadline
	}
	m.mu.Unlock()
	for _, p := range start {
		m.cfg.Pods.Terminate(p.Pod, p.Grace, finalStatus(m.cfg.Clock.Now()))
	}
	if poll := now.Add(pollPeriod); poll.Before(next) {
		next = poll
	}
	return next
}

// allDone reports whether every pod of a group is done. Called with m.mu
// held.
func (m *Manager) allDone(ps []PodPlan) bool {
	for _, p := range ps {
		t, ok := m.cfg.Pods.Terminated(p.Pod.UID)
		if !ok || !t.Done() {
			return false
		}
	}
	return true
}

func (m *Manager) allPlanned(r *run) bool {
	for _, g := range r.plan.Groups {
		if !m.allDone(g.Pods) {
			return false
		}
	}
	return true
}

// finalStatus is the change the shutdown makes to a stopped pod's final
// status, as upstream makes it.
func finalStatus(now time.Time) func(*corev1.PodStatus) {
	return func(st *corev1.PodStatus) {
		if st.Phase != corev1.PodSucceeded {
			st.Phase = corev1.PodFailed
		}
		st.Reason = ReasonTerminated
		st.Message = MessageTerminated
		cond := corev1.PodCondition{
			Type:               corev1.DisruptionTarget,
			Status:             corev1.ConditionTrue,
			Reason:             ReasonTerminationByKubelet,
			Message:            MessageTerminated,
			LastTransitionTime: metav1.NewTime(now).Rfc3339Copy(),
		}
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.DisruptionTarget {
				if st.Conditions[i].Status == corev1.ConditionTrue {
					cond.LastTransitionTime = st.Conditions[i].LastTransitionTime
				}
				st.Conditions[i] = cond
				return
			}
		}
		st.Conditions = append(st.Conditions, cond)
	}
}

// finish ends the running shutdown: it releases the lock so the machine may
// go on, writes the end to the state file, and writes and announces the
// report. The node stays shutting down until a cancellation.
func (m *Manager) finish(ctx context.Context, now time.Time) {
	m.mu.Lock()
	r := m.run
	if !r.active() {
		m.mu.Unlock()
		return
	}
	r.ended = now
	lock := m.lock
	if !r.cancelled {
		m.lock = nil
	}
	m.mu.Unlock()
	if lock != nil && !r.cancelled {
		if err := lock.Close(); err != nil {
			m.log.Warn("releasing the shutdown inhibitor lock failed", "err", err)
		}
		m.log.Info("released the shutdown inhibitor lock", "after", now.Sub(r.started))
	}
	m.writeState(State{StartTime: r.started, EndTime: now})
	setGauge(m.endGauge, now)
	rep := m.report(r)
	path := filepath.Join(m.cfg.RootDir, reportFileName)
	if err := writeJSON(path, rep); err != nil {
		m.log.Warn("writing the shutdown report failed", "err", err)
	}
	m.cfg.Event(corev1.EventTypeNormal, reasonReport, rep.Summary(path))
}

// Cancel ends a shutdown that logind cancelled: the node is no longer
// shutting down (Ready comes back with the next status pass), pods
// already stopped stay stopped, no further group is stopped, and a lock is
// taken again if the last one was released.
func (m *Manager) Cancel(ctx context.Context, bus Bus) error {
	m.mu.Lock()
	if !m.shuttingDown {
		m.mu.Unlock()
		return nil
	}
	m.shuttingDown = false
	r := m.run
	running := r.active()
	if running {
		r.cancelled = true
	}
	held := m.lock != nil
	m.mu.Unlock()
	m.log.Info(messageCancelled)
	m.cfg.Event(corev1.EventTypeNormal, reasonShutdown, messageCancelled)
	if running {
		m.finish(ctx, m.cfg.Clock.Now())
	}
	m.cfg.SyncStatus()
	if held || bus == nil {
		return nil
	}
	lock, err := bus.InhibitShutdown(logind.Who, logind.Why)
	if err != nil {
		return fmt.Errorf("taking the shutdown inhibitor lock again: %w", err)
	}
	m.mu.Lock()
	m.lock = lock
	m.mu.Unlock()
	return nil
}

// HoldsLock reports whether the manager holds an inhibitor lock.
func (m *Manager) HoldsLock() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lock != nil
}

// Run connects to logind and handles its signals until ctx ends, driving
// Step on the clock while a shutdown runs. A lost bus, or a failed setup,
// is tried again every second. When ctx ends the lock is released.
func (m *Manager) Run(ctx context.Context) error {
	if m.cfg.Dial == nil {
		return errors.New("shutdown: Config.Dial is required to Run")
	}
	defer m.dropLock()
	var last string
	for ctx.Err() == nil {
		if err := m.serve(ctx); err != nil && ctx.Err() == nil {
			// Said once at Warn; the same failure again every second
			// only at Debug.
			level := slog.LevelWarn
			if err.Error() == last {
				level = slog.LevelDebug
			}
			last = err.Error()
			m.log.Log(ctx, level, "graceful shutdown manager has no logind; retrying every 1s", "err", err)
		}
		m.dropLock()
		if m.sleep(ctx, reconnectPeriod) != nil {
			break
		}
	}
	return nil
}

// serve handles one connection until it is lost or ctx ends.
func (m *Manager) serve(ctx context.Context) error {
	bus, err := m.cfg.Dial()
	if err != nil {
		return fmt.Errorf("connecting to the system bus: %w", err)
	}
	defer bus.Close()
	signals, err := bus.Watch()
	if err != nil {
		return fmt.Errorf("watching logind: %w", err)
	}
	if err := m.Setup(ctx, bus); err != nil {
		return err
	}
	for {
		if err := m.wait(ctx, bus, signals); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// wait steps a running shutdown, then waits for its next step, a signal or
// the end of ctx, and handles what came.
func (m *Manager) wait(ctx context.Context, bus Bus, signals <-chan logind.Signal) error {
	var wake <-chan time.Time
	if next := m.Step(ctx); !next.IsZero() {
		t := m.cfg.Clock.NewTimer(next.Sub(m.cfg.Clock.Now()))
		defer t.Stop()
		wake = t.C()
	}
	select {
	case <-ctx.Done():
	case sig, ok := <-signals:
		if !ok {
			return errors.New("the bus connection closed")
		}
		return m.Handle(ctx, bus, sig)
	case <-wake:
	}
	return nil
}
