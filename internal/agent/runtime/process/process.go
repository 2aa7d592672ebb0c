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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

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
	// CgroupRoot is where the cgroup v2 tree is mounted; empty means
	// /sys/fs/cgroup. CgroupParent is the directory under it that holds
	// the pods' cgroups; empty means "knode". DisableCgroups turns limits
	// off.
	CgroupRoot     string
	CgroupParent   string
	DisableCgroups bool
	// Volumes returns the host path that backs the pod's volume name, for
	// the containers' volumeMounts. nil means volume mounts are ignored
	// (the container sees the host's files at every path). When set, a
	// container with volume mounts runs in its own mount namespace with
	// each volume bind-mounted at its mountPath (see mountns); the agent
	// must run as root.
	Volumes func(pod *corev1.Pod, volume string) (string, error)
	Logger  *slog.Logger

	// plainCgroups: CgroupRoot is an ordinary directory (tests only).
	plainCgroups bool
}

// Runtime runs containers as processes. Use New.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	podsDir string
	cg      *cgroups // nil: no limits
	changes chan struct{}
	// owner is this Runtime's token in <podsDir>/runtime.owner.
	owner string

	mu   sync.Mutex
	pods map[types.UID]*pod
}

var _ runtime.Runtime = (*Runtime)(nil)

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
}

type proc struct {
	pid    int // also its process group
	cgroup string
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
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.CgroupParent == "" {
		cfg.CgroupParent = "knode"
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
	if cfg.DisableCgroups {
		r.log.Info("cgroup limits are off by configuration")
	} else if cg, err := newCgroups(cfg.CgroupRoot, cfg.CgroupParent, !cfg.plainCgroups); err != nil {
		r.log.Info("cgroup v2 limits are off: no writable cgroup2 tree with cpu and memory", "root", cfg.CgroupRoot, "err", err)
	} else {
		r.cg = cg
		r.log.Info("cgroup v2 limits are on", "dir", filepath.Join(cfg.CgroupRoot, cfg.CgroupParent))
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
	ex := &exec.Cmd{
		Path:        path,
		Args:        cmd.argv,
		Env:         cmd.env,
		Dir:         workDir,
		Stdout:      logFile,
		Stderr:      logFile,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	var setup *mountns.Pipe
	if r.cfg.Volumes != nil && len(c.VolumeMounts) > 0 {
		mounts, err := r.mounts(p.spec, c)
		if err == nil {
			ex, setup, err = mountns.Command(mountns.Spec{Mounts: mounts, Scratch: filepath.Join(dir, "ns"), Dir: workDir, Path: path, Args: cmd.argv})
		}
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, "ns"), 0o750)
		}
		if err != nil {
			p.plan.StartFailed(i, err.Error(), now)
			return
		}
		ex.Env, ex.Stdout, ex.Stderr = cmd.env, logFile, logFile
		ex.SysProcAttr.Setpgid = true
	}
	var cgroupDir string
	if r.cg != nil {
		cgroupDir, err = r.cg.create(string(p.uid), c.Name, run, c.Resources)
		if err != nil {
			r.log.Warn("creating the container's cgroup failed; running it without limits", "pod", p.uid, "container", c.Name, "err", err)
			cgroupDir = ""
		}
	}
	if cgroupDir != "" {
		fd, err := os.Open(cgroupDir)
		if err == nil {
			defer fd.Close()
			ex.SysProcAttr.UseCgroupFD = true
			ex.SysProcAttr.CgroupFD = int(fd.Fd())
		}
	}
	err = ex.Start()
	if setup != nil {
		setup.CloseChild()
		if err == nil {
			if err = setup.Wait(); err != nil {
				// The init reported why and exits at once.
				_ = ex.Wait()
			}
		}
	}
	if err != nil {
		if cgroupDir != "" {
			_ = r.cg.remove(cgroupDir)
		}
		p.plan.StartFailed(i, err.Error(), now)
		return
	}
	started = true
	pid := ex.Process.Pid
	p.plan.Started(i, fmt.Sprintf("process://%s/%s/%d", p.uid, c.Name, run), now)
	p.procs[i] = &proc{pid: pid, cgroup: cgroupDir}
	// The pid file first, then the state: an agent that dies in between
	// leaves a process the next one finds and kills, not one it loses.
	if start, ok := processStart(pid); ok {
		_ = os.WriteFile(filepath.Join(dir, pidFile), []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o640)
	}
	r.save(p, i)
	go r.wait(p, i, ex, p.procs[i])
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
	case pr.cgroup != "" && oomKilled(pr.cgroup):
		reason = runtime.ReasonOOMKilled
	case code == 0:
		reason = runtime.ReasonCompleted
	}
	r.exited(p, i, pr, code, reason, "")
}

// killGroup kills what is left of a container whose main process ended,
// as a container's PID namespace would: its cgroup, or its process group.
func (r *Runtime) killGroup(pr *proc) {
	if pr.cgroup == "" || !r.cg.kill(pr.cgroup) {
		_ = syscall.Kill(-pr.pid, syscall.SIGKILL)
	}
}

// exited records the end of container i's run in pr and what follows it.
func (r *Runtime) exited(p *pod, i int, pr *proc, code int32, reason, message string) {
	if pr.cgroup != "" {
		_ = r.cg.remove(pr.cgroup)
	}
	r.mu.Lock()
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
		errs = append(errs, r.cg.removePod(string(uid)))
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

// mounts resolves container c's volume mounts to host paths. A subPath
// is made inside its volume when missing, as the kubelet does.
func (r *Runtime) mounts(pod *corev1.Pod, c *corev1.Container) ([]mountns.Mount, error) {
	out := make([]mountns.Mount, 0, len(c.VolumeMounts))
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
	return out, nil
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

// isCgroup2 reports whether dir is a cgroup2 mount.
func isCgroup2(dir string) (bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false, err
	}
	return st.Type == cgroup2SuperMagic, nil
}
