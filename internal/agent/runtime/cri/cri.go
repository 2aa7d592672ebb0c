package cri

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"

	"knode/internal/agent/runtime"
)

// ErrClosed is returned by a Runtime after Close.
var ErrClosed = errors.New("cri runtime: closed")

// Runtime runs pods as CRI pod sandboxes and containers. Use New; Close
// when done (which leaves every pod running).
type Runtime struct {
	cfg Config
	log *slog.Logger
	rt  criapi.RuntimeService
	img criapi.ImageManagerService
	// runtimeName is the runtime's name (Version's RuntimeName, e.g.
	// "containerd"), the scheme of container IDs.
	runtimeName string
	changes     chan struct{}
	// ctx is the context of the workers, the loop and the stops; Close
	// cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	pods map[types.UID]*pod
	// pulls is the image pull back-off per "<uid>_<image>" (upstream's
	// key); creates the CreateContainer back-off per "<uid>/<container>";
	// sandboxes the RunPodSandbox back-off per uid.
	pulls, creates, sandboxes *backoffs
	closed                    bool
}

var (
	_ runtime.Runtime         = (*Runtime)(nil)
	_ runtime.ResourceUpdater = (*Runtime)(nil)
	_ runtime.ContainerKiller = (*Runtime)(nil)
)

// pod is one pod the runtime holds.
type pod struct {
	uid types.UID
	// spec is the pod as StartPod got it (or New restored it); read-only.
	spec   *corev1.Pod
	logDir string
	// op is held by a step and by RemovePod: one sequence of CRI calls
	// for the pod at a time.
	op   sync.Mutex
	kick chan struct{}
	done chan struct{}

	// The rest is guarded by Runtime.mu.
	plan *runtime.Plan
	ctrs []*ctr
	// sandboxID is "" until the sandbox runs; sandbox is its config.
	sandboxID      string
	sandbox        *runtimeapi.PodSandboxConfig
	attempt        uint32
	sandboxStopped bool
	ips            []string
	// killAt is the StopPod deadline (zero: none); killTimer cancels the
	// timer that fires at it.
	killAt    time.Time
	killTimer func()
	// cancelStep cancels the step under way, if any.
	cancelStep context.CancelFunc
	removing   bool
}

// ctr is what the runtime knows of one container beyond the Plan: its CRI
// instances (one per run), why it waits, a kill under way.
type ctr struct {
	name string
	// started: a run of it started once (the Plan counts its restarts).
	started bool
	// id and restartCount are the last run's instance; id is "" before.
	id           string
	restartCount int32
	// prevID and prevRestartCount are the run before's instance, kept for
	// its log; prevID is "" when there is none.
	prevID           string
	prevRestartCount int32
	// wait is why the container, due to start, cannot yet (an image pull,
	// a failed create); nil otherwise.
	wait *waiting
	// kill is a KillContainer under way for the run in kill.id.
	kill *kill
	// stopSent is the instance StopPod asked to stop.
	stopSent string
}

type waiting struct{ reason, message string }

type kill struct {
	id, reason, message string
	// timer cancels the kill without grace when the grace has passed.
	timer func()
}

// New connects to the CRI runtime at cfg.Endpoint (and cfg.ImageEndpoint),
// checks it answers Version, and adopts the pods a previous Runtime left
// there (see the package doc): each is held again with its containers
// running as they are, their IDs and restart counts. It then polls every
// SyncPeriod until Close. ctx bounds the connection and the adoption.
func New(ctx context.Context, cfg Config) (*Runtime, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cri runtime: %w", err)
	}
	log := cfg.Logger.With("runtime", "cri")
	lctx := logr.NewContext(ctx, quietLogger(log))
	rt, err := remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(cfg.Endpoint).
		WithConnectionTimeout(cfg.RequestTimeout).WithTracerProvider(nil).Build(lctx)
	if err != nil {
		return nil, fmt.Errorf("cri runtime: connecting to %s: %w", cfg.Endpoint, err)
	}
	img, err := remote.NewRemoteImageServiceBuilder().WithEndpoint(cfg.ImageEndpoint).
		WithConnectionTimeout(cfg.RequestTimeout).WithTracerProvider(nil).Build(lctx)
	if err != nil {
		_ = rt.Close(lctx)
		return nil, fmt.Errorf("cri runtime: connecting to the image service at %s: %w", cfg.ImageEndpoint, err)
	}
	r := &Runtime{
		cfg:       cfg,
		log:       log,
		rt:        rt,
		img:       img,
		changes:   make(chan struct{}, 1),
		pods:      map[types.UID]*pod{},
		pulls:     newBackoffs(ImageBackoffInitial, ImageBackoffMax),
		creates:   newBackoffs(ImageBackoffInitial, ImageBackoffMax),
		sandboxes: newBackoffs(ImageBackoffInitial, ImageBackoffMax),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	v, err := rt.Version(lctx, "")
	if err != nil {
		r.closeClients()
		return nil, fmt.Errorf("cri runtime: version of %s: %w", cfg.Endpoint, err)
	}
	r.runtimeName = v.RuntimeName
	r.log.Info("connected to the CRI runtime", "endpoint", cfg.Endpoint, "runtime", v.RuntimeName, "version", v.RuntimeVersion, "api", v.RuntimeApiVersion)
	if err := r.adopt(ctx); err != nil {
		r.closeClients()
		return nil, fmt.Errorf("cri runtime: adopting the pods left in %s: %w", cfg.Endpoint, err)
	}
	r.mu.Lock()
	for _, p := range r.pods {
		r.startWorker(p)
	}
	r.spawn(r.loop)
	r.mu.Unlock()
	if len(r.pods) > 0 {
		r.notify()
	}
	return r, nil
}

// quietLogger is the cri-client's logger: its errors (every failed call,
// which this runtime handles itself) at debug level.
func quietLogger(log *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(debugHandler{log.Handler()})
}

type debugHandler struct{ slog.Handler }

func (h debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h debugHandler) Handle(ctx context.Context, rec slog.Record) error {
	rec.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, rec)
}

func (h debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{h.Handler.WithAttrs(attrs)}
}

func (h debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{h.Handler.WithGroup(name)}
}

// callCtx is ctx with the cri-client's logger.
func (r *Runtime) callCtx(ctx context.Context) context.Context {
	return logr.NewContext(ctx, quietLogger(r.log))
}

func (r *Runtime) closeClients() {
	r.cancel()
	ctx := r.callCtx(context.Background())
	_ = r.rt.Close(ctx)
	_ = r.img.Close(ctx)
}

// Close stops polling and every goroutine of the runtime and closes the
// connections. Pods keep running: a later Runtime adopts them. Calls after
// Close fail with ErrClosed, except PodStatus, ListPods and Changes.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for _, p := range r.pods {
		r.stopTimers(p)
	}
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	r.closeClients()
	return nil
}

// stopTimers stops a pod's kill timers. Called with r.mu held.
func (r *Runtime) stopTimers(p *pod) {
	if p.killTimer != nil {
		p.killTimer()
		p.killTimer = nil
	}
	for _, c := range p.ctrs {
		if c.kill != nil && c.kill.timer != nil {
			c.kill.timer()
			c.kill.timer = nil
		}
	}
}

// loop kicks every pod's worker each SyncPeriod.
func (r *Runtime) loop() {
	tick := r.cfg.Clock.NewTicker(r.cfg.SyncPeriod)
	defer tick.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C():
		}
		r.mu.Lock()
		for _, p := range r.pods {
			kickPod(p)
		}
		r.mu.Unlock()
	}
}

// startWorker starts p's worker: it steps the pod each time it is kicked.
// Called with r.mu held.
func (r *Runtime) startWorker(p *pod) {
	r.spawn(func() {
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-p.done:
				return
			case <-p.kick:
			}
			if err := r.step(r.ctx, p); err != nil && r.ctx.Err() == nil {
				r.log.Debug("a pod's step failed; retried at the next sync", "pod", p.uid, "err", err)
			}
		}
	})
	kickPod(p)
}

func kickPod(p *pod) {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Sync steps every pod once, now, and returns when all are done: it polls
// their running containers for exits, makes missing sandboxes, starts the
// containers that are due (pulling their images), and stops the sandbox
// of a stopped pod. The runtime does the same every SyncPeriod; tests call
// Sync to step it on their own clock. The error joins the pods' CRI
// failures (each also shows in the pods' status or is retried).
func (r *Runtime) Sync(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	pods := make([]*pod, 0, len(r.pods))
	for _, p := range r.pods {
		pods = append(pods, p)
	}
	r.mu.Unlock()
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { errs[i] = r.step(ctx, p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Runtime) notify() {
	select {
	case r.changes <- struct{}{}:
	default:
	}
}

// event records an event about p (or one of its containers, which the
// message names). Called without r.mu.
func (r *Runtime) event(p *pod, eventtype, reason, message string) {
	if r.cfg.Events != nil {
		r.cfg.Events(p.spec, eventtype, reason, message)
	}
}

// StartPod implements runtime.Runtime: it makes the pod's log directory and
// returns; the pod's worker makes its sandbox and starts its containers.
func (r *Runtime) StartPod(_ context.Context, in *corev1.Pod) error {
	if in.UID == "" || strings.Contains(string(in.UID), "/") || in.Name == "" || in.Namespace == "" {
		return fmt.Errorf("cri runtime: pod %s/%s (uid %q) needs a name, a namespace and a uid without /", in.Namespace, in.Name, in.UID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if _, ok := r.pods[in.UID]; ok {
		return nil
	}
	spec := in.DeepCopy()
	p := newPod(spec, podLogDir(r.cfg.PodLogsDir, spec), runtime.NewPlan(spec, r.cfg.Clock.Now(), r.cfg.Backoff))
	if err := os.MkdirAll(p.logDir, 0o755); err != nil {
		return fmt.Errorf("cri runtime: pod %s log directory: %w", in.UID, err)
	}
	r.pods[p.uid] = p
	r.startWorker(p)
	return nil
}

func newPod(spec *corev1.Pod, logDir string, plan *runtime.Plan) *pod {
	p := &pod{
		uid:    spec.UID,
		spec:   spec,
		logDir: logDir,
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		plan:   plan,
	}
	for _, c := range allContainers(spec) {
		p.ctrs = append(p.ctrs, &ctr{name: c.Name})
	}
	return p
}

// graceSeconds is a grace period as the CRI's whole seconds, rounded up.
func graceSeconds(grace time.Duration) int64 {
	if grace <= 0 {
		return 0
	}
	return int64(math.Ceil(grace.Seconds()))
}

// StopPod implements runtime.Runtime: each running container gets
// StopContainer with the grace period (its stop signal now, SIGKILL when
// the grace has passed), and those still running when the grace has
// passed on Config.Clock are stopped again with none. Once no container
// runs, the sandbox is stopped.
func (r *Runtime) StopPod(_ context.Context, uid types.UID, grace time.Duration) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	p, ok := r.pods[uid]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("stopping pod %s: %w", uid, runtime.ErrPodNotFound)
	}
	grace = max(grace, 0)
	first := !p.plan.Stopping()
	if first {
		p.plan.Stop()
		if p.cancelStep != nil {
			p.cancelStep()
		}
	}
	deadline := r.cfg.Clock.Now().Add(grace)
	shorter := p.killAt.IsZero() || deadline.Before(p.killAt)
	if shorter {
		p.killAt = deadline
		if p.killTimer != nil {
			p.killTimer()
			p.killTimer = nil
		}
		if grace > 0 {
			p.killTimer = r.after(grace, func() { r.killPod(p) })
		}
	}
	running := r.runningIDs(p)
	for _, rc := range running {
		p.ctrs[rc.index].stopSent = rc.id
	}
	r.mu.Unlock()
	if first || shorter {
		for _, rc := range running {
			if first {
				r.event(p, corev1.EventTypeNormal, EventKilling, "Stopping container "+rc.spec.Name)
			}
			r.stopContainer(p, rc.id, grace)
		}
	}
	kickPod(p)
	return nil
}

// runningContainer is a running container's spec and CRI ID.
type runningContainer struct {
	index int
	spec  *corev1.Container
	id    string
}

// runningIDs lists p's running containers. Called with r.mu held.
func (r *Runtime) runningIDs(p *pod) []runningContainer {
	var out []runningContainer
	for _, i := range p.plan.Running() {
		c, _ := p.plan.Container(i)
		if id := p.ctrs[i].id; id != "" {
			out = append(out, runningContainer{index: i, spec: c, id: id})
		}
	}
	return out
}

// stopContainer stops a container in the background with grace (see
// StopPod) and steps its pod when it is done. Called without r.mu.
func (r *Runtime) stopContainer(p *pod, id string, grace time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spawn(func() {
		if err := r.rt.StopContainer(r.callCtx(r.ctx), id, graceSeconds(grace)); err != nil && r.ctx.Err() == nil {
			r.log.Warn("stopping a container failed; it is stopped again when due", "pod", p.uid, "container", id, "err", err)
		}
		kickPod(p)
	})
}

// spawn runs f in a goroutine Close waits for, unless the runtime is
// closed. Called with r.mu held.
func (r *Runtime) spawn(f func()) {
	if r.closed {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// after runs f once d has passed on Config.Clock, unless the returned
// func is called first or the runtime is closed. Called with r.mu held.
func (r *Runtime) after(d time.Duration, f func()) func() {
	stop := make(chan struct{})
	timer := r.cfg.Clock.NewTimer(d)
	r.spawn(func() {
		defer timer.Stop()
		select {
		case <-timer.C():
			f()
		case <-stop:
		case <-r.ctx.Done():
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(stop) }) }
}

// killPod stops every container of p still running, without grace: the
// StopPod deadline passed.
func (r *Runtime) killPod(p *pod) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	p.killTimer = nil
	running := r.runningIDs(p)
	r.mu.Unlock()
	for _, rc := range running {
		r.stopContainer(p, rc.id, 0)
	}
}

// KillContainer implements runtime.ContainerKiller: StopContainer with the
// grace period now, again without grace when it has passed on
// Config.Clock; the run is reported with reason and message.
func (r *Runtime) KillContainer(_ context.Context, uid types.UID, container string, grace time.Duration, reason, message string) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	p, ok := r.pods[uid]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("killing container %s of pod %s: %w", container, uid, runtime.ErrPodNotFound)
	}
	i := slices.IndexFunc(p.ctrs, func(c *ctr) bool { return c.name == container })
	if i < 0 {
		r.mu.Unlock()
		return fmt.Errorf("killing container %s of pod %s: %w", container, uid, runtime.ErrContainerNotFound)
	}
	if !slices.Contains(p.plan.Running(), i) || p.ctrs[i].id == "" {
		r.mu.Unlock()
		return nil
	}
	c, _ := p.plan.Container(i)
	ct := p.ctrs[i]
	id := ct.id
	if ct.kill != nil && ct.kill.timer != nil {
		ct.kill.timer()
	}
	k := &kill{id: id, reason: reason, message: message}
	if grace > 0 {
		k.timer = r.after(grace, func() { r.stopContainer(p, id, 0) })
	}
	ct.kill = k
	r.mu.Unlock()
	msg := message
	if msg == "" {
		msg = "Stopping container " + c.Name
	}
	r.event(p, corev1.EventTypeNormal, EventKilling, msg)
	r.stopContainer(p, id, max(grace, 0))
	return nil
}

// RemovePod implements runtime.Runtime: it stops and removes the pod's
// sandbox (and with it its containers) and removes its log directory.
// Nothing starts once it was called, even when it fails.
func (r *Runtime) RemovePod(ctx context.Context, uid types.UID) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	p, ok := r.pods[uid]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	if len(p.plan.Running()) > 0 {
		r.mu.Unlock()
		return fmt.Errorf("removing pod %s: %w", uid, runtime.ErrPodRunning)
	}
	p.plan.Stop()
	p.removing = true
	if p.cancelStep != nil {
		p.cancelStep()
	}
	r.mu.Unlock()

	p.op.Lock()
	defer p.op.Unlock()
	r.mu.Lock()
	running := len(p.plan.Running()) > 0
	sandboxID := p.sandboxID
	var ids []string
	for _, c := range p.ctrs {
		for _, id := range []string{c.id, c.prevID} {
			if id != "" {
				ids = append(ids, id)
			}
		}
	}
	r.mu.Unlock()
	fail := func(err error) error {
		r.mu.Lock()
		p.removing = false
		r.mu.Unlock()
		return err
	}
	if running {
		// A start that was under way when RemovePod was called.
		return fail(fmt.Errorf("removing pod %s: %w", uid, runtime.ErrPodRunning))
	}
	cctx := r.callCtx(ctx)
	if sandboxID != "" {
		if err := r.rt.StopPodSandbox(cctx, sandboxID); err != nil && !isNotFound(err) {
			return fail(fmt.Errorf("removing pod %s: stopping its sandbox: %w", uid, err))
		}
		if err := r.rt.RemovePodSandbox(cctx, sandboxID); err != nil && !isNotFound(err) {
			return fail(fmt.Errorf("removing pod %s: removing its sandbox: %w", uid, err))
		}
	}
	for _, id := range ids {
		if err := r.rt.RemoveContainer(cctx, id); err != nil && !isNotFound(err) {
			return fail(fmt.Errorf("removing pod %s: removing container %s: %w", uid, id, err))
		}
	}
	if err := os.RemoveAll(p.logDir); err != nil {
		return fail(fmt.Errorf("removing pod %s: its logs: %w", uid, err))
	}
	r.mu.Lock()
	r.stopTimers(p)
	delete(r.pods, uid)
	close(p.done)
	r.pulls.forget(string(uid) + "_")
	r.creates.forget(string(uid) + "/")
	r.sandboxes.forget(string(uid))
	r.mu.Unlock()
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
	return r.status(p), nil
}

// status is p's status: the Plan's, with the runtime's waiting reasons,
// log paths and the sandbox's addresses. Called with r.mu held.
func (r *Runtime) status(p *pod) runtime.PodStatus {
	st := p.plan.Status()
	st.IPs = slices.Clone(p.ips)
	nInit := len(st.InitContainers)
	for i, c := range p.ctrs {
		var cs *runtime.ContainerStatus
		if i < nInit {
			cs = &st.InitContainers[i]
		} else {
			cs = &st.Containers[i-nInit]
		}
		cs.LogFormat = runtime.LogFormatCRI
		if c.started {
			cs.LogPath = p.logDir + "/" + logPath(c.name, c.restartCount)
			if c.prevID != "" {
				cs.PreviousLogPath = p.logDir + "/" + logPath(c.name, c.prevRestartCount)
			}
		}
		if w := cs.State.Waiting; w != nil && c.wait != nil {
			w.Reason, w.Message = c.wait.reason, c.wait.message
		}
	}
	return st
}

// ListPods implements runtime.Runtime.
func (r *Runtime) ListPods() []runtime.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]runtime.PodStatus, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, r.status(p))
	}
	return out
}

// Changes implements runtime.Runtime.
func (r *Runtime) Changes() <-chan struct{} { return r.changes }

// UpdateResources implements runtime.ResourceUpdater: it asks
// Config.Resources again for every running container and hands the
// answer's Linux values to UpdateContainerResources. Errors name the pod
// and container; one container's error does not stop the others.
func (r *Runtime) UpdateResources(ctx context.Context) error {
	if r.cfg.Resources == nil {
		return nil
	}
	type target struct {
		p  *pod
		rc runningContainer
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	var targets []target
	for _, p := range r.pods {
		for _, rc := range r.runningIDs(p) {
			targets = append(targets, target{p, rc})
		}
	}
	r.mu.Unlock()
	var errs []error
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		res, err := r.cfg.Resources(t.p.spec, t.rc.spec)
		if err == nil {
			err = r.rt.UpdateContainerResources(r.callCtx(ctx), t.rc.id, &runtimeapi.ContainerResources{Linux: linuxResources(res.Linux)})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("updating pod %s/%s (%s) container %s: %w", t.p.spec.Namespace, t.p.spec.Name, t.p.uid, t.rc.spec.Name, err))
		}
	}
	return errors.Join(errs...)
}

// containerPath is container i's path in the pod spec, for messages.
func containerPath(pod *corev1.Pod, i int) *field.Path {
	n := len(pod.Spec.InitContainers)
	if i < n {
		return field.NewPath("spec", "initContainers").Index(i)
	}
	return field.NewPath("spec", "containers").Index(i - n)
}
