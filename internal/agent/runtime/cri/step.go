package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"knode/internal/agent/runtime"
)

// Messages of exits the runtime could not read.
const (
	msgContainerGone = "the container is gone from the runtime; its exit code is unknown"
	// ExitCodeUnknown is the exit code of a run whose end the runtime could
	// not report (SIGKILL's, as upstream reports ContainerStatusUnknown).
	ExitCodeUnknown = 137
)

// step does one pass over p (see Sync) and returns the CRI failures it
// met. Steps of one pod never overlap.
func (r *Runtime) step(ctx context.Context, p *pod) error {
	p.op.Lock()
	defer p.op.Unlock()
	pullCtx, cancelPull := context.WithCancel(ctx)
	defer cancelPull()
	r.mu.Lock()
	if p.removing || r.closed {
		r.mu.Unlock()
		return nil
	}
	p.cancelStep = cancelPull
	needSandbox := p.sandboxID == "" && !p.plan.Stopping()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		p.cancelStep = nil
		r.mu.Unlock()
	}()

	var errs []error
	changed := false
	add := func(ch bool, err error) {
		changed = changed || ch
		if err != nil {
			errs = append(errs, err)
		}
	}
	defer func() {
		if changed {
			r.notify()
		}
	}()
	if needSandbox {
		ok, err := r.runSandbox(ctx, p)
		add(ok, err)
		if !ok {
			return errors.Join(errs...)
		}
	}
	add(r.poll(ctx, p))
	r.mu.Lock()
	stopping := p.plan.Stopping()
	r.mu.Unlock()
	if stopping {
		add(r.finishStop(ctx, p))
	} else {
		add(r.startDue(ctx, pullCtx, p))
	}
	return errors.Join(errs...)
}

// runSandbox makes p's sandbox, unless the last attempt failed less than
// its back-off ago; it reports whether the sandbox runs.
func (r *Runtime) runSandbox(ctx context.Context, p *pod) (bool, error) {
	r.mu.Lock()
	now := r.cfg.Clock.Now()
	if r.sandboxes.inBackoff(string(p.uid), now) {
		r.mu.Unlock()
		return false, nil
	}
	attempt := p.attempt
	r.mu.Unlock()
	cfg, err := sandboxConfig(p.spec, sandboxInput{
		attempt:      attempt,
		logDir:       p.logDir,
		cgroupParent: r.podCgroup(p.spec),
	})
	var id string
	if err == nil {
		id, err = r.rt.RunPodSandbox(r.callCtx(ctx), cfg, r.cfg.RuntimeHandler)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		r.mu.Lock()
		r.sandboxes.failed(string(p.uid), now)
		r.mu.Unlock()
		r.event(p, corev1.EventTypeWarning, EventFailedCreatePodSandBox, "Failed to create pod sandbox: "+grpcMessage(err))
		return false, fmt.Errorf("pod %s: creating its sandbox: %w", p.uid, err)
	}
	ips, err := r.sandboxIPs(ctx, id)
	if err != nil {
		r.log.Warn("reading a new sandbox's addresses failed", "pod", p.uid, "err", err)
	}
	r.mu.Lock()
	p.sandboxID, p.sandbox, p.ips = id, cfg, ips
	r.mu.Unlock()
	return true, nil
}

// podCgroup is the pod's cgroup as Config.Resources decides it for its
// first container; "" without a decider or a decision.
func (r *Runtime) podCgroup(pod *corev1.Pod) string {
	if r.cfg.Resources == nil {
		return ""
	}
	cs := allContainers(pod)
	if len(cs) == 0 {
		return ""
	}
	res, err := r.cfg.Resources(pod, &cs[0])
	if err != nil {
		r.log.Debug("no resource decision for a pod's sandbox; it gets no cgroup parent", "pod", pod.UID, "err", err)
		return ""
	}
	return res.CgroupParent
}

// sandboxIPs are a sandbox's addresses, primary first.
func (r *Runtime) sandboxIPs(ctx context.Context, id string) ([]string, error) {
	resp, err := r.rt.PodSandboxStatus(r.callCtx(ctx), id, false)
	if err != nil {
		return nil, err
	}
	netw := resp.GetStatus().GetNetwork()
	var ips []string
	if ip := netw.GetIp(); ip != "" {
		ips = append(ips, ip)
	}
	for _, extra := range netw.GetAdditionalIps() {
		if extra.GetIp() != "" {
			ips = append(ips, extra.GetIp())
		}
	}
	return ips, nil
}

// poll asks the runtime about each container the Plan has running and
// records the exits.
func (r *Runtime) poll(ctx context.Context, p *pod) (bool, error) {
	r.mu.Lock()
	running := r.runningIDs(p)
	r.mu.Unlock()
	changed := false
	var errs []error
	for _, rc := range running {
		resp, err := r.rt.ContainerStatus(r.callCtx(ctx), rc.id, false)
		var st *runtimeapi.ContainerStatus
		switch {
		case err == nil:
			st = resp.GetStatus()
		case isNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("pod %s container %s: status: %w", p.uid, rc.spec.Name, err))
			continue
		}
		if st != nil && (st.State == runtimeapi.ContainerState_CONTAINER_RUNNING || st.State == runtimeapi.ContainerState_CONTAINER_CREATED) {
			continue
		}
		code, reason, message := exitOf(st)
		r.mu.Lock()
		ct := p.ctrs[rc.index]
		if ct.id != rc.id || !slices.Contains(p.plan.Running(), rc.index) {
			r.mu.Unlock()
			continue
		}
		if k := ct.kill; k != nil && k.id == rc.id {
			reason, message = k.reason, k.message
			if k.timer != nil {
				k.timer()
			}
			ct.kill = nil
		}
		p.plan.Exited(rc.index, code, reason, message, r.cfg.Clock.Now())
		crashLoop := r.crashLooping(p, rc.index)
		r.mu.Unlock()
		changed = true
		if crashLoop {
			r.event(p, corev1.EventTypeWarning, EventBackOff,
				fmt.Sprintf("Back-off restarting failed container %s in pod %s", rc.spec.Name, podRef(p.spec.Name, p.spec.Namespace, p.uid)))
		}
	}
	return changed, errors.Join(errs...)
}

// crashLooping reports whether container i waits in restart back-off.
// Called with r.mu held.
func (r *Runtime) crashLooping(p *pod, i int) bool {
	st := p.plan.Status()
	cs := st.Containers
	idx := i - len(st.InitContainers)
	if i < len(st.InitContainers) {
		cs, idx = st.InitContainers, i
	}
	w := cs[idx].State.Waiting
	return w != nil && w.Reason == runtime.ReasonCrashLoopBackOff
}

// exitOf is how a run ended, from its CRI status (nil: the container is
// gone): exit code, reason (the runtime's, else Completed or Error) and
// message.
func exitOf(st *runtimeapi.ContainerStatus) (int32, string, string) {
	if st == nil {
		return ExitCodeUnknown, runtime.ReasonContainerStatusUnknown, msgContainerGone
	}
	if st.State == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		msg := st.Message
		if msg == "" {
			msg = "the runtime reports the container's state as unknown"
		}
		return ExitCodeUnknown, runtime.ReasonContainerStatusUnknown, msg
	}
	reason := st.Reason
	if reason == "" {
		reason = runtime.ReasonError
		if st.ExitCode == 0 {
			reason = runtime.ReasonCompleted
		}
	}
	return st.ExitCode, reason, st.Message
}

// finishStop, for a stopping pod, asks the containers started while
// StopPod was called to stop too (with what is left of the grace), and
// stops the sandbox once no container runs.
func (r *Runtime) finishStop(ctx context.Context, p *pod) (bool, error) {
	r.mu.Lock()
	running := r.runningIDs(p)
	var late []runningContainer
	for _, rc := range running {
		if ct := p.ctrs[rc.index]; ct.stopSent != rc.id && !p.killAt.IsZero() {
			ct.stopSent = rc.id
			late = append(late, rc)
		}
	}
	grace := max(p.killAt.Sub(r.cfg.Clock.Now()), 0)
	sandboxID := p.sandboxID
	stopSandbox := len(running) == 0 && sandboxID != "" && !p.sandboxStopped
	r.mu.Unlock()
	for _, rc := range late {
		r.event(p, corev1.EventTypeNormal, EventKilling, "Stopping container "+rc.spec.Name)
		r.stopContainer(p, rc.id, grace)
	}
	if !stopSandbox {
		return false, nil
	}
	if err := r.rt.StopPodSandbox(r.callCtx(ctx), sandboxID); err != nil && !isNotFound(err) {
		return false, fmt.Errorf("pod %s: stopping its sandbox: %w", p.uid, err)
	}
	r.mu.Lock()
	p.sandboxStopped = true
	r.mu.Unlock()
	return true, nil
}

// startDue starts the containers the Plan has due, until none is due that
// this pass has not tried.
func (r *Runtime) startDue(ctx, pullCtx context.Context, p *pod) (bool, error) {
	tried := map[int]bool{}
	changed := false
	var errs []error
	for {
		r.mu.Lock()
		var next []int
		if !p.plan.Stopping() && !p.removing {
			for _, i := range p.plan.Due(r.cfg.Clock.Now()) {
				if !tried[i] {
					next = append(next, i)
				}
			}
		}
		r.mu.Unlock()
		if len(next) == 0 {
			return changed, errors.Join(errs...)
		}
		for _, i := range next {
			tried[i] = true
			ch, err := r.startContainer(ctx, pullCtx, p, i)
			changed = changed || ch
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
}

// startContainer starts container i: its configuration (a config error
// ends here), its image (a pull failure or back-off makes it wait), then
// CreateContainer and StartContainer. It reports whether the status
// changed.
func (r *Runtime) startContainer(ctx, pullCtx context.Context, p *pod, i int) (bool, error) {
	r.mu.Lock()
	c, _ := p.plan.Container(i)
	ct := p.ctrs[i]
	started := ct.started
	var restartCount int32
	if started {
		restartCount = p.plan.RestartCount(i) + 1
	}
	rec := p.plan.Record(i)
	prevWait := ct.wait
	sandboxID, sandbox := p.sandboxID, p.sandbox
	ips := slices.Clone(p.ips)
	createKey := string(p.uid) + "/" + c.Name
	inCreateBackoff := r.creates.inBackoff(createKey, r.cfg.Clock.Now())
	r.mu.Unlock()
	if inCreateBackoff {
		return false, nil
	}

	env, res, mounts, err := r.containerSetup(p, i, c, ips)
	if err != nil {
		r.mu.Lock()
		p.plan.ConfigError(i, err.Error())
		ct.wait = nil
		r.mu.Unlock()
		r.event(p, corev1.EventTypeWarning, EventFailed, "Error: "+err.Error())
		return true, nil
	}
	img := r.ensureImage(pullCtx, p, c, sandbox, prevWait)
	if img.ref == "" {
		if img.wait == nil { // canceled
			return false, nil
		}
		r.mu.Lock()
		changed := ct.wait == nil || *ct.wait != *img.wait
		ct.wait = img.wait
		r.mu.Unlock()
		return changed, nil
	}

	now := r.cfg.Clock.Now()
	var delay time.Duration
	var lastRestart time.Time
	if started && rec.Exit != nil {
		delay, lastRestart = nextBackoff(rec, rec.Exit.FinishedAt.Time, now, r.cfg.Backoff)
	}
	config := containerConfig(p.spec, c, containerInput{
		restartCount: restartCount,
		imageRef:     img.ref,
		env:          env,
		mounts:       mounts,
		res:          res,
		resources:    r.cfg.Resources != nil,
		startedAt:    now,
		backoffDelay: delay,
		lastRestart:  lastRestart,
	})
	cctx := r.callCtx(ctx)
	id, err := r.rt.CreateContainer(cctx, sandboxID, config, sandbox)
	if err != nil {
		msg := grpcMessage(err)
		r.mu.Lock()
		r.creates.failed(createKey, now)
		ct.wait = &waiting{reason: ReasonCreateContainerError, message: msg}
		r.mu.Unlock()
		r.event(p, corev1.EventTypeWarning, EventFailed, "Error: "+msg)
		return true, fmt.Errorf("pod %s container %s: creating it: %w", p.uid, c.Name, err)
	}
	r.event(p, corev1.EventTypeNormal, EventCreated, "Created container: "+c.Name)
	startErr := r.rt.StartContainer(cctx, id)

	r.mu.Lock()
	r.creates.reset(createKey)
	dropID, dropRestartCount := ct.prevID, ct.prevRestartCount
	if ct.id != "" {
		ct.prevID, ct.prevRestartCount = ct.id, ct.restartCount
	}
	ct.id, ct.restartCount, ct.started, ct.wait = id, restartCount, true, nil
	p.plan.Started(i, r.runtimeName+"://"+id, now)
	if after := p.plan.Record(i); after.BackoffDelay != delay || !after.LastRestart.Equal(lastRestart) {
		r.log.Warn("a container's back-off annotation differs from its plan's; an agent restart may restart it early or late",
			"pod", p.uid, "container", c.Name, "annotated", delay, "plan", after.BackoffDelay)
	}
	crashLoop := false
	if startErr != nil {
		p.plan.Exited(i, runtime.ExitCodeStartError, runtime.ReasonStartError, grpcMessage(startErr), now)
		crashLoop = r.crashLooping(p, i)
	}
	r.mu.Unlock()

	if startErr != nil {
		r.event(p, corev1.EventTypeWarning, EventFailed, "Error: "+grpcMessage(startErr))
		if crashLoop {
			r.event(p, corev1.EventTypeWarning, EventBackOff,
				fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podRef(p.spec.Name, p.spec.Namespace, p.uid)))
		}
	} else {
		r.event(p, corev1.EventTypeNormal, EventStarted, "Started container "+c.Name)
	}
	if dropID != "" {
		r.dropInstance(ctx, p, c.Name, dropID, dropRestartCount)
	}
	if startErr != nil {
		return true, fmt.Errorf("pod %s container %s: starting it: %w", p.uid, c.Name, startErr)
	}
	return true, nil
}

// dropInstance removes a container's run older than the previous one, and
// its log.
func (r *Runtime) dropInstance(ctx context.Context, p *pod, name, id string, restartCount int32) {
	if err := r.rt.RemoveContainer(r.callCtx(ctx), id); err != nil && !isNotFound(err) {
		r.log.Warn("removing an old run of a container failed; RemovePod retries", "pod", p.uid, "container", name, "id", id, "err", err)
		return
	}
	_ = os.Remove(filepath.Join(p.logDir, logPath(name, restartCount)))
}

// containerSetup is what container i needs besides its image: its
// environment, its resource decision and its volume mounts. Its error is a
// config error.
func (r *Runtime) containerSetup(p *pod, i int, c *corev1.Container, ips []string) (*runtime.Env, runtime.ContainerResources, []*runtimeapi.Mount, error) {
	var res runtime.ContainerResources
	fld := containerPath(p.spec, i)
	if len(c.EnvFrom) > 0 {
		return nil, res, nil, field.Forbidden(fld.Child("envFrom"), "not supported by the CRI runtime")
	}
	envPod := p.spec
	if len(ips) > 0 {
		// The downward API's pod IPs are the sandbox's.
		cp := *p.spec
		cp.Status.PodIP = ips[0]
		cp.Status.PodIPs = nil
		for _, ip := range ips {
			cp.Status.PodIPs = append(cp.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		envPod = &cp
	}
	env, err := runtime.ContainerEnv(envPod, c, fld, "CRI")
	if err != nil {
		return nil, res, nil, err
	}
	if r.cfg.Resources != nil {
		if res, err = r.cfg.Resources(p.spec, c); err != nil {
			return nil, res, nil, err
		}
	}
	var mounts []*runtimeapi.Mount
	if r.cfg.Volumes != nil {
		for j, vm := range c.VolumeMounts {
			src, err := r.cfg.Volumes(p.spec, vm.Name)
			if err != nil {
				return nil, res, nil, field.Invalid(fld.Child("volumeMounts").Index(j).Child("name"), vm.Name, err.Error())
			}
			if vm.SubPath != "" {
				src = filepath.Join(src, vm.SubPath)
				if _, err := os.Lstat(src); os.IsNotExist(err) {
					if err := os.MkdirAll(src, 0o750); err != nil {
						return nil, res, nil, field.Invalid(fld.Child("volumeMounts").Index(j).Child("subPath"), vm.SubPath, err.Error())
					}
				}
			}
			mounts = append(mounts, &runtimeapi.Mount{
				ContainerPath: vm.MountPath,
				HostPath:      src,
				Readonly:      vm.ReadOnly,
				Propagation:   mountPropagation(vm.MountPropagation),
			})
		}
	}
	return env, res, mounts, nil
}

// grpcMessage is a CRI error's message without the gRPC wrapping, as
// upstream shows it in events and statuses.
func grpcMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }
