//go:build linux

package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	"knode/internal/agent/cgroups"
	"knode/internal/agent/runtime"
	"knode/internal/agent/runtime/mountns"
)

// Config builds a Runtime.
type Config struct {
	// RootDir is the agent's root directory; pods live under
	// <RootDir>/pods. Required.
	RootDir string
	// Clock times restarts and kills; nil means the real clock. Processes
	// exit in real time whatever the clock.
	Clock clock.WithTicker
	// Backoff is the restart back-off; zero means upstream's.
	Backoff runtime.BackoffConfig
	// Path is the PATH of containers that set none; empty means the
	// agent's own PATH, or DefaultPath.
	Path string
	// Cgroups writes the containers' cgroups; nil means none. It is used
	// only with Resources: each run's cgroup is made under the pod's
	// cgroup that Resources names (ContainerResources.CgroupParent), which
	// the caller creates before the pod's first container starts and
	// removes after its last one ended.
	Cgroups *cgroups.Manager
	// Resources decides a container's resources each time it starts, in
	// UpdateResources, and when a previous agent's container is adopted
	// (for its pod's cgroup). nil means no per-container decisions: no
	// cgroups, and no device plugin variables, mounts or devices. Its error
	// is the container's CreateContainerConfigError. It is called with the
	// Runtime's lock held: it must not call the Runtime, and nobody may
	// call the Runtime while holding a lock it takes.
	Resources runtime.ResourceDecider
	// Volumes returns the host path that backs the pod's volume name, for
	// the containers' volumeMounts. nil means volume mounts are ignored
	// (the container sees the host's files at every path). When set, a
	// container with volume mounts runs in its own mount namespace with
	// each volume bind-mounted at its mountPath (see mountns); the agent
	// must run as root.
	Volumes func(pod *corev1.Pod, volume string) (string, error)
	Logger  *slog.Logger
}

// Runtime runs containers as processes. Use New.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	podsDir string
	// cg is Config.Cgroups when Config.Resources is set too; nil: no
	// cgroups.
	cg      *cgroups.Manager
	changes chan struct{}
	// owner is this Runtime's token in <podsDir>/runtime.owner.
	owner string

	mu   sync.Mutex
	pods map[types.UID]*pod
}

var (
	_ runtime.Runtime         = (*Runtime)(nil)
	_ runtime.ResourceUpdater = (*Runtime)(nil)
)

type pod struct {
	uid  types.UID
	spec *corev1.Pod
	plan *runtime.Plan
	dir  string
	// runs counts each container's starts; run n logs to <n>.log.
	runs  []int
	procs map[int]*proc
	// cancelRestart stops the pending restart timer; nil when none.
	cancelRestart chan struct{}
	// killAt is the pending kill deadline; cancelKill stops its timer.
	killAt     time.Time
	cancelKill chan struct{}
	// staleCgroups are cgroups of ended runs that still held a dying
	// process when they were removed; retried at the pod's next exit and
	// at RemovePod.
	staleCgroups []string
}

type proc struct {
	pid int // also its process group
	// cgroup is the run's cgroup, a Layout path; "" for none.
	cgroup string
	// killReason and killMessage, once KillContainer asked for this run's
	// end, are what its exit reports; killReason "" keeps the exit's own
	// reason. Guarded by Runtime.mu.
	killReason, killMessage string
}

// New builds the runtime. It adopts the pods a previous Runtime left under
// RootDir, with their running containers, and discards those whose files
// cannot be read (see the package doc). From then on the previous Runtime,
// if it is still alive in this process, leaves those pods alone.
func New(cfg Config) (*Runtime, error) {
	if cfg.RootDir == "" {
		return nil, errors.New("process runtime: Config.RootDir is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Path == "" {
		cfg.Path = os.Getenv("PATH")
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	r := &Runtime{
		cfg:     cfg,
		log:     cfg.Logger.With("runtime", "process"),
		podsDir: filepath.Join(cfg.RootDir, "pods"),
		changes: make(chan struct{}, 1),
		pods:    map[types.UID]*pod{},
	}
	if err := os.MkdirAll(r.podsDir, 0o750); err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	owner, err := newOwnerToken()
	if err == nil {
		err = writeAtomic(filepath.Join(r.podsDir, ownerFile), []byte(owner))
	}
	if err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	r.owner = owner
	switch {
	case cfg.Cgroups == nil:
		r.log.Info("container cgroups are off: no cgroup manager")
	case cfg.Resources == nil:
		r.log.Info("container cgroups are off: no resource decider")
	default:
		r.cg = cfg.Cgroups
		r.log.Info("container cgroups are on", "mode", r.cg.Mode(), "enforced", r.cg.Enforced())
	}
	r.restore()
	return r, nil
}

// StartPod implements runtime.Runtime.
func (r *Runtime) StartPod(_ context.Context, in *corev1.Pod) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pods[in.UID]; ok {
		return nil
	}
	if in.UID == "" || strings.ContainsAny(string(in.UID), "/.") {
		return fmt.Errorf("process runtime: pod uid %q cannot name a directory", in.UID)
	}
	dir := filepath.Join(r.podsDir, string(in.UID))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("process runtime: %w", err)
	}
	data, err := json.Marshal(in)
	if err == nil {
		err = writeAtomic(filepath.Join(dir, podFile), data)
	}
	if err != nil {
		return fmt.Errorf("process runtime: keeping pod %s: %w", in.UID, err)
	}
	now := r.cfg.Clock.Now()
	p := &pod{
		uid:   in.UID,
		spec:  in.DeepCopy(),
		plan:  runtime.NewPlan(in, now, r.cfg.Backoff),
		dir:   dir,
		procs: map[int]*proc{},
	}
	p.runs = make([]int, p.plan.Len())
	r.pods[in.UID] = p
	r.advance(p)
	return nil
}

// advance starts every container that is due and arms the timer for the
// next one. Called with r.mu held.
func (r *Runtime) advance(p *pod) {
	for {
		now := r.cfg.Clock.Now()
		due := p.plan.Due(now)
		if len(due) == 0 {
			break
		}
		for _, i := range due {
			r.start(p, i, now)
		}
	}
	if p.cancelRestart != nil {
		close(p.cancelRestart)
		p.cancelRestart = nil
	}
	next, ok := p.plan.NextDue()
	if !ok {
		return
	}
	cancel := make(chan struct{})
	p.cancelRestart = cancel
	timer := r.cfg.Clock.NewTimer(next.Sub(r.cfg.Clock.Now()))
	go func() {
		defer timer.Stop()
		select {
		case <-cancel:
			return
		case <-timer.C():
		}
		if r.superseded() {
			return
		}
		r.mu.Lock()
		if p.cancelRestart == cancel {
			p.cancelRestart = nil
			r.advance(p)
		}
		r.mu.Unlock()
		r.notify()
	}()
}

// containerPath is container i's path in the pod spec, for messages.
func containerPath(p *pod, i int) *field.Path {
	n := len(p.spec.Spec.InitContainers)
	if i < n {
		return field.NewPath("spec", "initContainers").Index(i)
	}
	return field.NewPath("spec", "containers").Index(i - n)
}

// start starts container i and records its state. Called with r.mu held.
func (r *Runtime) start(p *pod, i int, now time.Time) {
	c, _ := p.plan.Container(i)
	cmd, err := buildCommand(p.spec, c, containerPath(p, i), r.cfg.Path)
	var res runtime.ContainerResources
	if err == nil && r.cfg.Resources != nil {
		res, err = r.cfg.Resources(p.spec, c)
		cmd.env = appendEnv(cmd.env, res.Env)
	}
	if err != nil {
		p.plan.ConfigError(i, err.Error())
		return
	}
	dir := filepath.Join(p.dir, c.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		p.plan.StartFailed(i, err.Error(), now)
		return
	}
	started := false
	defer func() {
		if !started {
			r.save(p, i)
		}
	}()
	workDir := c.WorkingDir
	if workDir == "" {
		workDir = dir
	}
	path, err := lookPath(cmd.argv[0], cmd.path, workDir)
	if err != nil {
		p.plan.StartFailed(i, err.Error(), now)
		return
	}
	run := p.runs[i]
	p.runs[i]++
	logPath := filepath.Join(dir, fmt.Sprintf("%d.log", run))
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		p.plan.StartFailed(i, err.Error(), now)
		return
	}
	defer logFile.Close()
	// Keep the previous run's log (kubectl logs --previous) but no older.
	if run >= 2 {
		_ = os.Remove(filepath.Join(dir, fmt.Sprintf("%d.log", run-2)))
	}
	mounts, err := r.mounts(p.spec, c, res)
	if err != nil {
		p.plan.StartFailed(i, err.Error(), now)
		return
	}
	var cgroup string
	if r.cg != nil && res.CgroupParent != "" {
		cgroup = cgroups.Layout{}.Container(res.CgroupParent, fmt.Sprintf("%s-%d", c.Name, run))
		if err := r.cg.Create(cgroup, res.Linux); err != nil {
			_ = r.removeCgroups(p, cgroup)
			p.plan.StartFailed(i, fmt.Sprintf("creating the container's cgroup %s: %v", cgroup, err), now)
			return
		}
	}
	ex, err := r.launch(cmd, path, workDir, filepath.Join(dir, "ns"), mounts, cgroup, logFile)
	if err != nil {
		if cgroup != "" {
			_ = r.removeCgroups(p, cgroup)
		}
		p.plan.StartFailed(i, err.Error(), now)
		return
	}
	started = true
	pid := ex.Process.Pid
	p.plan.Started(i, fmt.Sprintf("process://%s/%s/%d", p.uid, c.Name, run), now)
	p.procs[i] = &proc{pid: pid, cgroup: cgroup}
	// The pid file first, then the state: an agent that dies in between
	// leaves a process the next one finds and kills, not one it loses.
	if start, ok := processStart(pid); ok {
		_ = os.WriteFile(filepath.Join(dir, pidFile), []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o640)
	}
	r.save(p, i)
	go r.wait(p, i, ex, p.procs[i])
}

// launch starts one run's process in its own process group, writing to
// log. A run without mounts or a cgroup is the command itself. Otherwise
// it starts as the mountns init, held until this process has put it in
// cgroup (so that no limit can be escaped at start), which then lays out
// the mounts (in a mount namespace of its own) and execs the command in
// place. When launch returns without an error the command runs; with one,
// nothing runs any more.
func (r *Runtime) launch(cmd command, path, workDir, scratch string, mounts []mountns.Mount, cgroup string, log *os.File) (*exec.Cmd, error) {
	if len(mounts) == 0 && cgroup == "" {
		ex := &exec.Cmd{Path: path, Args: cmd.argv, Env: cmd.env, Dir: workDir, Stdout: log, Stderr: log,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
		return ex, ex.Start()
	}
	spec := mountns.Spec{Mounts: mounts, Dir: workDir, Path: path, Args: cmd.argv, Hold: cgroup != ""}
	if len(mounts) > 0 {
		if err := os.MkdirAll(scratch, 0o750); err != nil {
			return nil, err
		}
		spec.Scratch = scratch
	}
	ex, setup, err := mountns.Command(spec)
	if err != nil {
		return nil, err
	}
	ex.Env, ex.Stdout, ex.Stderr = cmd.env, log, log
	ex.SysProcAttr.Setpgid = true
	err = ex.Start()
	setup.CloseChild()
	if err == nil && cgroup != "" {
		if perr := r.cg.AddProcess(cgroup, ex.Process.Pid); perr != nil {
			_ = ex.Process.Kill()
			err = fmt.Errorf("placing the container's process in its cgroup %s: %w", cgroup, perr)
		}
	}
	if err == nil {
		setup.Release()
	}
	// Without the release (or once killed) the init exits and Wait
	// returns; after it, the command runs or the init reported why not.
	if werr := setup.Wait(); err == nil {
		err = werr
	}
	if err != nil && ex.Process != nil {
		_ = ex.Wait()
	}
	return ex, err
}

// save writes container i's state file. Called with r.mu held.
func (r *Runtime) save(p *pod, i int) {
	c, _ := p.plan.Container(i)
	st := newContainerState(p.plan.Record(i), p.runs[i], p.procs[i])
	if err := writeState(filepath.Join(p.dir, c.Name, stateFile), st); err != nil {
		r.log.Warn("writing a container's state failed; a restarted agent will not adopt its pod", "pod", p.uid, "container", c.Name, "err", err)
	}
}

// wait reaps one container process, kills what is left of its process
// group, and records the exit.
func (r *Runtime) wait(p *pod, i int, ex *exec.Cmd, pr *proc) {
	_ = ex.Wait()
	if r.superseded() {
		return
	}
	code := exitCode(ex.ProcessState)
	r.killGroup(pr)
	reason := runtime.ReasonError
	switch {
	case r.oomKilled(pr.cgroup):
		reason = runtime.ReasonOOMKilled
	case code == 0:
		reason = runtime.ReasonCompleted
	}
	r.mu.Lock()
	message := pr.killMessage
	if pr.killReason != "" {
		reason = pr.killReason
	}
	r.mu.Unlock()
	r.exited(p, i, pr, code, reason, message)
}

// killGroup kills a container's processes (what is left of them once its
// main process ended, as a container's PID namespace would): its process
// group, and everything in its cgroup.
func (r *Runtime) killGroup(pr *proc) {
	_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
	if pr.cgroup != "" {
		if err := r.cg.Kill(pr.cgroup); err != nil {
			r.log.Warn("killing a container's cgroup failed", "cgroup", pr.cgroup, "err", err)
		}
	}
}

// oomKilled reports whether the OOM killer struck in cgroup ("" for none).
func (r *Runtime) oomKilled(cgroup string) bool {
	if cgroup == "" {
		return false
	}
	killed, err := r.cg.OOMKilled(cgroup)
	if err != nil {
		r.log.Debug("cannot tell whether a container was OOM-killed", "cgroup", cgroup, "err", err)
	}
	return killed
}

// removeCgroups removes the cgroups of ended runs, and retries the pod's
// stale ones. One that still holds a dying process stays stale. Called
// with r.mu held.
func (r *Runtime) removeCgroups(p *pod, paths ...string) error {
	var left []string
	var errs []error
	for _, cg := range slices.Concat(p.staleCgroups, paths) {
		if err := r.cg.Remove(cg); err != nil {
			left = append(left, cg)
			errs = append(errs, err)
		}
	}
	p.staleCgroups = left
	return errors.Join(errs...)
}

// exited records the end of container i's run in pr and what follows it.
func (r *Runtime) exited(p *pod, i int, pr *proc, code int32, reason, message string) {
	r.mu.Lock()
	if pr.cgroup != "" {
		if err := r.removeCgroups(p, pr.cgroup); err != nil {
			r.log.Debug("a container's cgroup is not removed yet; retried later", "pod", p.uid, "err", err)
		}
	}
	if p.procs[i] == pr {
		delete(p.procs, i)
	}
	p.plan.Exited(i, code, reason, message, r.cfg.Clock.Now())
	// The state first, then the pid file: an agent that dies in between
	// leaves the exit recorded and a pid file naming a reaped process.
	r.save(p, i)
	c, _ := p.plan.Container(i)
	_ = os.Remove(filepath.Join(p.dir, c.Name, pidFile))
	if !p.plan.Stopping() {
		r.advance(p)
	}
	r.mu.Unlock()
	r.notify()
}

// exitCode is the container exit code of a finished process: its status,
// or 128 plus the signal that killed it.
func exitCode(st *os.ProcessState) int32 {
	if st == nil {
		return runtime.ExitCodeStartError
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(st.ExitCode())
}

func (r *Runtime) notify() {
	select {
	case r.changes <- struct{}{}:
	default:
	}
}

// StopPod implements runtime.Runtime: SIGTERM to each running container's
// process group now, SIGKILL when grace has passed.
func (r *Runtime) StopPod(_ context.Context, uid types.UID, grace time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return fmt.Errorf("stopping pod %s: %w", uid, runtime.ErrPodNotFound)
	}
	now := r.cfg.Clock.Now()
	if !p.plan.Stopping() {
		p.plan.Stop()
		if err := writeAtomic(filepath.Join(p.dir, stoppingFile), nil); err != nil {
			r.log.Warn("recording that a pod stops failed", "pod", uid, "err", err)
		}
		if p.cancelRestart != nil {
			close(p.cancelRestart)
			p.cancelRestart = nil
		}
		for _, pr := range p.procs {
			_ = syscall.Kill(-pr.pid, syscall.SIGTERM)
		}
	}
	if grace <= 0 {
		r.killAll(p)
		return nil
	}
	deadline := now.Add(grace)
	if !p.killAt.IsZero() && !deadline.Before(p.killAt) {
		return nil
	}
	if p.cancelKill != nil {
		close(p.cancelKill)
	}
	p.killAt = deadline
	cancel := make(chan struct{})
	p.cancelKill = cancel
	timer := r.cfg.Clock.NewTimer(grace)
	go func() {
		defer timer.Stop()
		select {
		case <-cancel:
			return
		case <-timer.C():
		}
		r.mu.Lock()
		if p.cancelKill == cancel {
			p.cancelKill = nil
			r.killAll(p)
		}
		r.mu.Unlock()
	}()
	return nil
}

// killAll sends SIGKILL to every running container. Called with r.mu held.
func (r *Runtime) killAll(p *pod) {
	for _, pr := range p.procs {
		r.log.Debug("killing a container", "pod", p.uid, "pid", pr.pid)
		r.killGroup(pr)
	}
}

// RemovePod implements runtime.Runtime.
func (r *Runtime) RemovePod(_ context.Context, uid types.UID) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return nil
	}
	if len(p.procs) > 0 {
		return fmt.Errorf("removing pod %s: %w", uid, runtime.ErrPodRunning)
	}
	for _, ch := range []chan struct{}{p.cancelRestart, p.cancelKill} {
		if ch != nil {
			close(ch)
		}
	}
	p.cancelRestart, p.cancelKill = nil, nil
	delete(r.pods, uid)
	var errs []error
	if r.cg != nil {
		errs = append(errs, r.removeCgroups(p))
	}
	errs = append(errs, removePodDir(p.dir))
	return errors.Join(errs...)
}

// volumesDir is the part of a pod's directory the volume manager owns.
const volumesDir = "volumes"

// removePodDir removes what the runtime keeps in a pod's directory, and
// the directory once it is empty. It never descends into the volumes
// directory, where volumes may still be mounted: the volume manager tears
// those down and removes what is left.
func removePodDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == volumesDir {
			continue
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// mounts is what container c's mount namespace holds: its volume mounts
// resolved to host paths (with Config.Volumes), then the device plugins'
// mounts, then their device nodes the container sees at another path than
// the host's (at the same path, the host's /dev already shows them). A
// subPath is made inside its volume when missing, as the kubelet does.
func (r *Runtime) mounts(pod *corev1.Pod, c *corev1.Container, res runtime.ContainerResources) ([]mountns.Mount, error) {
	var out []mountns.Mount
	if r.cfg.Volumes != nil {
		for _, vm := range c.VolumeMounts {
			src, err := r.cfg.Volumes(pod, vm.Name)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
			}
			if vm.SubPath != "" {
				src = filepath.Join(src, vm.SubPath)
				if _, err := os.Lstat(src); os.IsNotExist(err) {
					if err := os.MkdirAll(src, 0o750); err != nil {
						return nil, fmt.Errorf("volume %q subPath %q: %w", vm.Name, vm.SubPath, err)
					}
				}
			}
			out = append(out, mountns.Mount{Source: src, Target: filepath.Clean(vm.MountPath), ReadOnly: vm.ReadOnly})
		}
	}
	for i, m := range res.Mounts {
		if err := checkPaths(fmt.Sprintf("device plugin mounts[%d]", i), m.HostPath, m.ContainerPath); err != nil {
			return nil, err
		}
		out = append(out, mountns.Mount{Source: m.HostPath, Target: filepath.Clean(m.ContainerPath), ReadOnly: m.ReadOnly})
	}
	for i, d := range res.Devices {
		if err := checkPaths(fmt.Sprintf("device plugin devices[%d]", i), d.HostPath, d.ContainerPath); err != nil {
			return nil, err
		}
		if filepath.Clean(d.ContainerPath) != filepath.Clean(d.HostPath) {
			out = append(out, mountns.Mount{Source: d.HostPath, Target: filepath.Clean(d.ContainerPath)})
		}
	}
	return out, nil
}

// checkPaths checks a device plugin's host and container paths.
func checkPaths(what, host, container string) error {
	if !filepath.IsAbs(host) {
		return fmt.Errorf("%s.hostPath %q: must be an absolute path", what, host)
	}
	if !filepath.IsAbs(container) || filepath.Clean(container) == "/" {
		return fmt.Errorf("%s.containerPath %q: must be an absolute path other than /", what, container)
	}
	return nil
}

// appendEnv adds the device plugins' variables after the container's own.
// A name already set keeps its value: upstream hands the runtime the device
// plugins' variables first and the container's after them, so the
// container's win.
func appendEnv(env []string, extra []corev1.EnvVar) []string {
	have := map[string]bool{}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		have[name] = true
	}
	for _, e := range extra {
		if e.Name == "" || have[e.Name] {
			continue
		}
		have[e.Name] = true
		env = append(env, e.Name+"="+e.Value)
	}
	return env
}

// UpdateResources implements runtime.ResourceUpdater: it asks
// Config.Resources again for every running container that has a cgroup and
// writes the answer's Linux values to it. Errors name the pod and
// container; one container's error does not stop the others.
func (r *Runtime) UpdateResources(ctx context.Context) error {
	if r.cg == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, p := range r.pods {
		for i, pr := range p.procs {
			if pr.cgroup == "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return errors.Join(append(errs, err)...)
			}
			c, _ := p.plan.Container(i)
			res, err := r.cfg.Resources(p.spec, c)
			if err == nil {
				err = r.cg.Update(pr.cgroup, res.Linux)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("updating pod %s/%s (%s) container %s: %w", p.spec.Namespace, p.spec.Name, p.uid, c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
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

func (r *Runtime) status(p *pod) runtime.PodStatus {
	st := p.plan.Status()
	for i := 0; i < p.plan.Len(); i++ {
		c, init := p.plan.Container(i)
		if p.runs[i] == 0 {
			continue
		}
		path := filepath.Join(p.dir, c.Name, fmt.Sprintf("%d.log", p.runs[i]-1))
		list := st.Containers
		idx := i - len(st.InitContainers)
		if init {
			list, idx = st.InitContainers, i
		}
		list[idx].LogPath = path
		if p.runs[i] >= 2 {
			list[idx].PreviousLogPath = filepath.Join(p.dir, c.Name, fmt.Sprintf("%d.log", p.runs[i]-2))
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

// KillAll kills every container at once, without grace, and stops
// restarts. The agent does not call it when it exits (pods outlive the
// agent, as with the kubelet); tests and `knode up` may.
func (r *Runtime) KillAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pods {
		p.plan.Stop()
		if p.cancelRestart != nil {
			close(p.cancelRestart)
			p.cancelRestart = nil
		}
		r.killAll(p)
	}
}

// processStart is the start time of pid in clock ticks since boot (field
// 22 of /proc/<pid>/stat), which tells a live process from a later one
// that reused its pid.
func processStart(pid int) (uint64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, false
	}
	fields := strings.Fields(s[end+1:])
	const startField = 22 - 3 // fields after the command start at field 3
	if len(fields) <= startField {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[startField], 10, 64)
	return v, err == nil
}

func readPidFile(path string) (int, uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &start); err != nil || pid <= 1 {
		return 0, 0, false
	}
	return pid, start, true
}

func sameProcess(pid int, start uint64) bool {
	now, ok := processStart(pid)
	return ok && now == start
}
