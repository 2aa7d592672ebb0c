//go:build linux

package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent/runtime"
)

var _ runtime.Streamer = (*Runtime)(nil)

// execTarget is what an exec needs of a running container.
type execTarget struct {
	pid     int
	cgroup  string
	workDir string
	env     []string
	// ownMounts: the container runs in a mount namespace of its own, which
	// the exec joins.
	ownMounts bool
}

// target finds container's running process in pod uid.
func (r *Runtime) target(uid types.UID, container string) (execTarget, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return execTarget{}, runtime.ErrPodNotFound
	}
	for i := 0; i < p.plan.Len(); i++ {
		c, _ := p.plan.Container(i)
		if c.Name != container {
			continue
		}
		pr := p.procs[i]
		if pr == nil {
			return execTarget{}, runtime.ErrContainerNotRunning{Container: container}
		}
		t := execTarget{pid: pr.pid, cgroup: pr.cgroup, workDir: c.WorkingDir}
		if t.workDir == "" {
			t.workDir = filepath.Join(p.dir, c.Name)
		}
		return t, nil
	}
	return execTarget{}, fmt.Errorf("container %q of pod %s: %w", container, uid, runtime.ErrContainerNotFound)
}

// Exec implements runtime.Streamer: argv runs as a new process with the
// environment the container's process started with (read from
// /proc/<pid>/environ), in its working directory, in its mount namespace
// when it has its own (entered with nsenter, so the command is looked up
// in the container's PATH there), and in its cgroup once started (a moment
// unconfined: cgroup v1 cannot start a process in a cgroup). With TTY it
// gets a new pseudo-terminal as its controlling terminal, sized by
// s.Resize. It is killed, with its process group, when ctx ends.
func (r *Runtime) Exec(ctx context.Context, uid types.UID, container string, argv []string, s runtime.ExecStreams) (int, error) {
	if len(argv) == 0 {
		return 0, errors.New("exec: no command")
	}
	t, err := r.target(uid, container)
	if err != nil {
		return 0, err
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", t.pid))
	if err != nil {
		return 0, runtime.ErrContainerNotRunning{Container: container}
	}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if len(kv) > 0 {
			t.env = append(t.env, string(kv))
		}
	}
	t.ownMounts = ownMountNamespace(t.pid)
	cmd, err := t.command(argv)
	if err != nil {
		return 0, err
	}
	var term *pty
	if s.TTY {
		if term, err = openPTY(); err != nil {
			return 0, fmt.Errorf("exec: allocating a terminal: %w", err)
		}
		defer term.close()
		cmd.Stdin, cmd.Stdout, cmd.Stderr = term.slave, term.slave, term.slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	} else {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	if t.cgroup != "" && r.cg != nil {
		if err := r.cg.AddProcess(t.cgroup, cmd.Process.Pid); err != nil {
			r.log.Warn("an exec'd process could not join its container's cgroup", "pod", uid, "container", container, "err", err)
		}
	}
	var copies sync.WaitGroup
	if term != nil {
		term.slave.Close()
		term.slave = nil
		if s.Stdin != nil {
			go func() { _, _ = io.Copy(term.master, s.Stdin) }()
		}
		if s.Stdout != nil {
			copies.Add(1)
			go func() {
				defer copies.Done()
				// EIO once the last process on the terminal has gone.
				_, _ = io.Copy(s.Stdout, term.master)
			}()
		}
		if s.Resize != nil {
			go func() {
				for size := range s.Resize {
					_ = unix.IoctlSetWinsize(int(term.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Height, Col: size.Width})
				}
			}()
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	copies.Wait()
	if cmd.ProcessState == nil {
		return 0, err
	}
	return int(exitCode(cmd.ProcessState)), nil
}

// command is the exec.Cmd that runs argv for t.
func (t execTarget) command(argv []string) (*exec.Cmd, error) {
	if t.ownMounts {
		nsenter, err := exec.LookPath("nsenter")
		if err != nil {
			return nil, fmt.Errorf("exec: the container has its own mount namespace, and entering it needs nsenter (util-linux): %w", err)
		}
		args := append([]string{nsenter, "--target", strconv.Itoa(t.pid), "--mount", "--wd=" + t.workDir, "--"}, argv...)
		return &exec.Cmd{Path: nsenter, Args: args, Env: t.env}, nil
	}
	path, err := lookPath(argv[0], envValue(t.env, "PATH"), t.workDir)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	return &exec.Cmd{Path: path, Args: argv, Env: t.env, Dir: t.workDir}, nil
}

// envValue is name's value in env ("" when unset).
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > len(name) && env[i][len(name)] == '=' && env[i][:len(name)] == name {
			return env[i][len(name)+1:]
		}
	}
	return ""
}

// ownMountNamespace reports whether pid's mount namespace differs from
// this process's.
func ownMountNamespace(pid int) bool {
	theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid))
	if err != nil {
		return false
	}
	ours, err := os.Readlink("/proc/self/ns/mnt")
	return err == nil && theirs != ours
}

// PortForward implements runtime.Streamer: pods of the process runtime
// share the host's network, so the pod's port is the host's port on
// 127.0.0.1 (or ::1 when only that answers).
func (r *Runtime) PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error {
	r.mu.Lock()
	_, ok := r.pods[uid]
	r.mu.Unlock()
	if !ok {
		return runtime.ErrPodNotFound
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		var err6 error
		if conn, err6 = d.DialContext(ctx, "tcp", net.JoinHostPort("::1", strconv.Itoa(int(port)))); err6 != nil {
			return err
		}
	}
	defer conn.Close()
	errs := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, stream)
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		errs <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		errs <- err
	}()
	// The first copy to end ends the session: the port closed, or the
	// client finished sending. The other copy ends as the connection
	// closes here and the caller closes stream.
	select {
	case err = <-errs:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return err
}

// pty is a pseudo-terminal pair.
type pty struct {
	master, slave *os.File
}

// openPTY opens a new pseudo-terminal from /dev/ptmx.
func openPTY() (*pty, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, fmt.Errorf("unlocking the terminal: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("numbering the terminal: %w", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, err
	}
	return &pty{master: master, slave: slave}, nil
}

func (p *pty) close() {
	p.master.Close()
	if p.slave != nil {
		p.slave.Close()
	}
}

var _ runtime.ContainerKiller = (*Runtime)(nil)

// KillContainer implements runtime.ContainerKiller: SIGTERM to the
// container's process group now, SIGKILL to it (and its cgroup) when grace
// has passed on the injected clock; the Plan then restarts it as after any
// exit.
func (r *Runtime) KillContainer(_ context.Context, uid types.UID, container string, grace time.Duration, reason, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return fmt.Errorf("killing container %s of pod %s: %w", container, uid, runtime.ErrPodNotFound)
	}
	for i := 0; i < p.plan.Len(); i++ {
		c, _ := p.plan.Container(i)
		if c.Name != container {
			continue
		}
		pr := p.procs[i]
		if pr == nil {
			return nil
		}
		pr.killReason, pr.killMessage = reason, message
		if grace <= 0 {
			r.killGroup(pr)
			return nil
		}
		_ = syscall.Kill(-pr.pid, syscall.SIGTERM)
		timer := r.cfg.Clock.NewTimer(grace)
		go func() {
			defer timer.Stop()
			<-timer.C()
			r.mu.Lock()
			defer r.mu.Unlock()
			if p.procs[i] == pr {
				r.killGroup(pr)
			}
		}()
		return nil
	}
	return fmt.Errorf("killing container %s of pod %s: %w", container, uid, runtime.ErrContainerNotFound)
}
