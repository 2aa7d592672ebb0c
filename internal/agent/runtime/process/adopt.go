//go:build linux

package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/runtime"
)

// ExitCodeUnknown is the exit code reported for a container whose process
// ended while it was not the agent's child: only a process's parent can
// read its exit status. It is SIGKILL's 137, as upstream reports a
// container whose status was lost (reason ContainerStatusUnknown).
const ExitCodeUnknown = 137

// Messages of the exits whose code is unknown.
const (
	msgAdoptedExit = "the container exited while adopted after an agent restart, so its exit code is unknown (only a process's parent can read it)"
	msgExitedAway  = "the container exited while no agent was running; its exit code is unknown"
)

// errGone: the process a pid file names no longer exists.
var errGone = errors.New("process is gone")

// restore adopts the pods a previous Runtime left under the pods directory
// and discards those it cannot adopt (see the package doc).
func (r *Runtime) restore() {
	entries, err := os.ReadDir(r.podsDir)
	if err != nil {
		r.log.Warn("reading the pods directory failed; adopting nothing", "dir", r.podsDir, "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(r.podsDir, e.Name())
		p, err := r.restorePod(types.UID(e.Name()), dir)
		if err != nil {
			r.log.Warn("not adopting a previous agent's pod: killing what is left of it and removing its directory", "pod", e.Name(), "reason", err)
			r.discard(e.Name(), dir)
			continue
		}
		r.pods[p.uid] = p
		r.log.Info("adopted a previous agent's pod", "pod", p.spec.Namespace+"/"+p.spec.Name, "uid", p.uid, "running", len(p.procs))
	}
	for _, p := range r.pods {
		if !p.plan.Stopping() {
			r.advance(p)
		}
	}
	if len(r.pods) > 0 {
		r.notify()
	}
}

// restorePod rebuilds the pod kept in dir. It checks every file before it
// adopts or kills anything, so that on an error the pod can be discarded
// whole. Called with r.mu held.
func (r *Runtime) restorePod(uid types.UID, dir string) (*pod, error) {
	data, err := os.ReadFile(filepath.Join(dir, podFile))
	if err != nil {
		return nil, err
	}
	spec := &corev1.Pod{}
	if err := json.Unmarshal(data, spec); err != nil {
		return nil, fmt.Errorf("%s: %w", podFile, err)
	}
	if spec.UID != uid {
		return nil, fmt.Errorf("%s: uid %q, want the directory's %q", podFile, spec.UID, uid)
	}
	var containers []corev1.Container
	containers = append(containers, spec.Spec.InitContainers...)
	containers = append(containers, spec.Spec.Containers...)
	states := make([]*containerState, len(containers))
	records := make([]runtime.ContainerRecord, len(containers))
	for i, c := range containers {
		if c.Name == "" || strings.ContainsAny(c.Name, "/.") {
			return nil, fmt.Errorf("%s: container name %q cannot name a directory", podFile, c.Name)
		}
		st, err := readState(filepath.Join(dir, c.Name, stateFile))
		if err != nil {
			return nil, err
		}
		if st != nil {
			states[i], records[i] = st, st.record()
		}
	}
	_, err = os.Stat(filepath.Join(dir, stoppingFile))
	stopping := err == nil
	now := r.cfg.Clock.Now()
	plan, err := runtime.RestorePlan(spec, records, stopping, now, r.cfg.Backoff)
	if err != nil {
		return nil, err
	}
	p := &pod{uid: uid, spec: spec, plan: plan, dir: dir, runs: make([]int, len(containers)), procs: map[int]*proc{}}
	for i, st := range states {
		if st != nil {
			p.runs[i] = st.Runs
		}
	}
	for i, st := range states {
		r.restoreContainer(p, i, st, now)
	}
	return p, nil
}

// restoreContainer adopts container i's process when its state says it
// runs and its pid file names that very process; otherwise a running
// container is recorded as exited (exit code unknown), and a process its
// pid file names that the state does not account for is killed. Called
// with r.mu held.
func (r *Runtime) restoreContainer(p *pod, i int, st *containerState, now time.Time) {
	c, _ := p.plan.Container(i)
	pidPath := filepath.Join(p.dir, c.Name, pidFile)
	pid, start, ok := readPidFile(pidPath)
	live := ok && sameProcess(pid, start)
	running := st != nil && st.running()
	message := msgExitedAway
	if running && live && pid == st.PID {
		err := r.adopt(p, i, pid, start, st.Cgroup)
		if err == nil {
			return
		}
		if errors.Is(err, errGone) || errors.Is(err, unix.ESRCH) {
			live = false
		} else {
			r.log.Warn("cannot watch a previous agent's container; killing it", "pod", p.uid, "container", c.Name, "pid", pid, "err", err)
			message = fmt.Sprintf("the container could not be adopted after an agent restart (%v) and was killed; its exit code is unknown", err)
		}
	} else if live {
		r.log.Info("killing a process a previous agent left that its container's state does not account for", "pod", p.uid, "container", c.Name, "pid", pid)
	}
	if live {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	_ = os.Remove(pidPath)
	if !running {
		return
	}
	reason := runtime.ReasonContainerStatusUnknown
	if cgroup := r.adoptedCgroup(p.spec, c, st.Cgroup); cgroup != "" {
		// What is left in the cgroup was the container's.
		if err := r.cg.Kill(cgroup); err != nil {
			r.log.Warn("killing a previous agent's container cgroup failed", "pod", p.uid, "cgroup", cgroup, "err", err)
		}
		if r.oomKilled(cgroup) {
			reason, message = runtime.ReasonOOMKilled, ""
		}
		_ = r.removeCgroups(p, cgroup) // fails while a killed process lingers; retried later
	}
	r.log.Info("a previous agent's container is no longer running", "pod", p.uid, "container", c.Name, "reason", reason)
	p.plan.Exited(i, ExitCodeUnknown, reason, message, now)
	r.save(p, i)
}

// adopt watches container i's running process pid, whose start time is
// start, as the container's current run. Called with r.mu held.
func (r *Runtime) adopt(p *pod, i int, pid int, start uint64, cgroup string) error {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.EINVAL) { // before Linux 5.10
		fd, err = unix.PidfdOpen(pid, 0)
	}
	if err != nil {
		return err
	}
	pidfd := os.NewFile(uintptr(fd), fmt.Sprintf("pidfd:%d", pid))
	// The pidfd holds the process that had pid when it was opened: check
	// that it is still the one the pid file names.
	if !sameProcess(pid, start) {
		pidfd.Close()
		return errGone
	}
	c, _ := p.plan.Container(i)
	pr := &proc{pid: pid, cgroup: r.adoptedCgroup(p.spec, c, cgroup)}
	p.procs[i] = pr
	r.log.Info("adopted a previous agent's container", "pod", p.uid, "container", c.Name, "pid", pid)
	go r.watch(p, i, pr, pidfd)
	return nil
}

// adoptedCgroup is the cgroup a previous agent recorded for container c of
// pod, if this runtime can use it: cgroups are on, and it is a cgroup
// directly under the pod's cgroup as Config.Resources names it now.
// Otherwise (an absolute directory recorded by an older agent included) the
// container is killed by process group alone.
func (r *Runtime) adoptedCgroup(pod *corev1.Pod, c *corev1.Container, recorded string) string {
	if recorded == "" {
		return ""
	}
	if r.cg == nil {
		r.log.Info("a previous agent's container has a cgroup, but cgroups are off; it is killed by process group", "pod", pod.UID, "container", c.Name, "cgroup", recorded)
		return ""
	}
	res, err := r.cfg.Resources(pod, c)
	if err != nil {
		r.log.Warn("ignoring a container's recorded cgroup: no resource decision for it", "pod", pod.UID, "container", c.Name, "cgroup", recorded, "err", err)
		return ""
	}
	parent := strings.TrimPrefix(res.CgroupParent, "/")
	if parent == "" || path.Clean(recorded) != recorded || path.IsAbs(recorded) || path.Dir(recorded) != parent {
		r.log.Warn("ignoring a container's recorded cgroup outside its pod's", "pod", pod.UID, "container", c.Name, "cgroup", recorded, "pod cgroup", res.CgroupParent)
		return ""
	}
	return recorded
}

// watch waits for an adopted container's process to exit, kills what is
// left of its process group and records the exit, whose code it cannot
// know.
func (r *Runtime) watch(p *pod, i int, pr *proc, pidfd *os.File) {
	err := waitReadable(pidfd)
	pidfd.Close()
	if r.superseded() {
		return
	}
	if err != nil {
		// Without the pidfd the process cannot be followed; rather than
		// leave it running untracked, it ends here.
		r.log.Warn("watching an adopted container failed; killing it", "pod", p.uid, "pid", pr.pid, "err", err)
	}
	r.killGroup(pr)
	reason, message := runtime.ReasonContainerStatusUnknown, msgAdoptedExit
	if r.oomKilled(pr.cgroup) {
		reason, message = runtime.ReasonOOMKilled, ""
	}
	r.exited(p, i, pr, ExitCodeUnknown, reason, message)
}

// waitReadable blocks until f (a pidfd) is readable: its process exited.
func waitReadable(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var pollErr error
	err = rc.Read(func(fd uintptr) bool {
		ready, err := pollReadable(int(fd), 0)
		if err != nil {
			pollErr = err
			return true
		}
		return ready
	})
	if err == nil {
		return pollErr
	}
	// The runtime's poller does not take this descriptor (a pidfd opened
	// without PIDFD_NONBLOCK): block in poll(2) on this goroutine's thread.
	err = rc.Control(func(fd uintptr) {
		for {
			var ready bool
			ready, pollErr = pollReadable(int(fd), -1)
			if ready || pollErr != nil {
				return
			}
		}
	})
	return errors.Join(err, pollErr)
}

// pollReadable polls fd for reading for timeoutMs (-1: no limit).
func pollReadable(fd, timeoutMs int) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, timeoutMs)
	if errors.Is(err, unix.EINTR) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return n > 0 && fds[0].Revents != 0, nil
}

// discard does for a pod that cannot be adopted what was done before
// adoption existed: kill its processes and remove its directory. Its
// cgroups are left to the container manager, which removes the cgroups of
// pods that are gone (the pod's files cannot say which are its own).
func (r *Runtime) discard(uid, dir string) {
	pidFiles, _ := filepath.Glob(filepath.Join(dir, "*", pidFile))
	for _, f := range pidFiles {
		pid, start, ok := readPidFile(f)
		if !ok || !sameProcess(pid, start) {
			continue
		}
		r.log.Info("killing a container left by a previous agent", "pod", uid, "pid", pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	if err := removePodDir(dir); err != nil {
		r.log.Warn("removing a previous agent's pod directory failed", "dir", dir, "err", err)
	}
}

// superseded reports whether a newer Runtime took over the pods directory.
// A superseded Runtime leaves its containers' exits and restarts to it.
func (r *Runtime) superseded() bool {
	data, err := os.ReadFile(filepath.Join(r.podsDir, ownerFile))
	return err == nil && string(data) != r.owner
}
