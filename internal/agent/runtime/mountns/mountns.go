//go:build linux

// Package mountns starts a container's process through a small init that
// prepares it before the container's command runs: it waits until the
// caller has placed it (in a cgroup), lays out the pod's volumes in a mount
// namespace of its own, and then execs the command in place, so the process
// keeps its pid and start time. Nothing the host sees is changed.
//
// The caller (the process runtime) builds an exec.Cmd with Command: the
// command is this same binary (/proc/self/exe) with Init as argv[0]. The
// package's init function notices that argv[0] and becomes the container's
// init. With Spec.Hold it first blocks until the caller's go-ahead
// (Pipe.Release), so that a memory limit or cpuset written before the
// release holds from the command's first instruction (cgroup v1 has no
// CLONE_INTO_CGROUP). With mounts it runs in a new mount namespace
// (CLONE_NEWNS) and lays them out; without mounts it shares the host's. It
// reports failure (or nothing) on a pipe and execs the command. Every
// binary that starts containers this way must therefore import this
// package (the process runtime does).
//
// How a mountPath that does not exist on the host is made without writing to
// the host: the namespace's root becomes a tmpfs holding one bind mount per
// entry of the host's root (symlinks copied), and the process chroots into
// it. A directory on the way to a mountPath that lacks the next component is
// "shadowed" the same way: a tmpfs is mounted over it, holding bind mounts of
// its entries, and the missing component is made in the tmpfs. The host's
// files stay visible and writable through the bind mounts; only the new
// mount points are the namespace's own.
//
// Not here: pivot_root (the host's mounts stay reachable, as with a process
// that shares the host's filesystem), mount propagation settings (all of the
// namespace's mounts are made slaves of the host's), and recursive read-only
// mounts (a read-only volume is read-only at its top mount only).
package mountns

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Init is the argv[0] that makes a binary importing this package act as a
// container's init.
const Init = "knode-container-init"

// Mount is one volume mount of a container.
type Mount struct {
	// Source is the host path that backs the volume (a directory or file).
	Source string `json:"source"`
	// Target is the absolute path the container sees it at.
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Spec is everything the init needs.
type Spec struct {
	// Mounts, in any order: Plan sorts them so that a parent is mounted
	// before a mount inside it. Without mounts the process stays in the
	// host's mount namespace.
	Mounts []Mount `json:"mounts"`
	// Scratch is a directory of the caller's (on the host) that the init may
	// use for temporary mount points. It must exist when there are mounts;
	// when given, it must be absolute.
	Scratch string `json:"scratch"`
	// Dir is the working directory of the command, as the container sees it.
	Dir string `json:"dir"`
	// Path is the executable, and Args its argv (Args[0] included).
	Path string   `json:"path"`
	Args []string `json:"args"`
	// Hold makes the init wait, before anything else, until the caller
	// calls Pipe.Release; an init the caller lets go without the release
	// (Pipe.Wait first, or the caller exiting) exits without running the
	// command.
	Hold bool `json:"hold,omitempty"`
}

// Validate checks what Plan and the init rely on: absolute, clean targets,
// absolute sources, an absolute scratch directory (required when there
// are mounts), and a command.
func (s *Spec) Validate() error {
	if s.Path == "" || len(s.Args) == 0 {
		return errors.New("mountns: no command")
	}
	if (len(s.Mounts) > 0 || s.Scratch != "") && !filepath.IsAbs(s.Scratch) {
		return fmt.Errorf("mountns: scratch %q: must be an absolute path", s.Scratch)
	}
	for i, m := range s.Mounts {
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) != m.Target || m.Target == "/" {
			return fmt.Errorf("mountns: mounts[%d].target %q: must be a clean absolute path other than /", i, m.Target)
		}
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("mountns: mounts[%d].source %q: must be an absolute path", i, m.Source)
		}
	}
	return nil
}

// Plan orders the mounts: shorter targets first, so that a volume mounted
// inside another volume's mountPath lands on top of it. Ties keep the
// caller's order.
func Plan(mounts []Mount) []Mount {
	out := append([]Mount(nil), mounts...)
	sort.SliceStable(out, func(i, j int) bool {
		return depth(out[i].Target) < depth(out[j].Target)
	})
	return out
}

func depth(p string) int { return strings.Count(p, "/") }

// Command returns the exec.Cmd that runs spec's command through the init
// (in a new mount namespace when spec has mounts), and the Pipe that holds
// and releases the init and carries its report. The caller sets Env,
// Stdout, Stderr and SysProcAttr fields it needs (Cloneflags is set here),
// starts the command, calls CloseChild, then Release (with Spec.Hold, once
// the process is placed), and then Wait. Wait must be called even when the
// start failed: it closes the pipes.
func Command(spec Spec) (*exec.Cmd, *Pipe, error) {
	if err := spec.Validate(); err != nil {
		return nil, nil, err
	}
	spec.Mounts = Plan(spec.Mounts)
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	p := &Pipe{r: r, w: w}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{Init, string(data)},
		ExtraFiles:  []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{},
	}
	if spec.Hold {
		if p.holdChild, p.hold, err = os.Pipe(); err != nil {
			r.Close()
			w.Close()
			return nil, nil, err
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, p.holdChild)
	}
	if len(spec.Mounts) > 0 {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWNS
	}
	return cmd, p, nil
}

// Pipe carries the init's report and, with Spec.Hold, the caller's
// go-ahead.
type Pipe struct {
	r, w *os.File
	// hold is the caller's end of the hold pipe, holdChild the init's; nil
	// without Spec.Hold, and hold nil again once released or abandoned.
	hold, holdChild *os.File
}

// CloseChild closes the init's ends after the command started (or failed
// to).
func (p *Pipe) CloseChild() {
	p.w.Close()
	if p.holdChild != nil {
		p.holdChild.Close()
	}
}

// Release lets a held init go on with its setup and the command. It does
// not block, and does nothing without Spec.Hold or when called again. An
// init that can no longer hear it (it died) is reported by Wait.
func (p *Pipe) Release() {
	if p.hold == nil {
		return
	}
	_, _ = p.hold.Write([]byte{1})
	p.hold.Close()
	p.hold = nil
}

// Wait blocks until the init either execs the command (nil) or reports why
// it could not (the error). It returns once the init is done with its
// setup, which takes a few mount calls. A held init that was not released
// is let go without the go-ahead: it exits, and Wait returns its report.
// Wait closes the pipes.
func (p *Pipe) Wait() error {
	if p.hold != nil {
		p.hold.Close()
		p.hold = nil
	}
	defer p.r.Close()
	msg, err := io.ReadAll(p.r)
	if err != nil {
		return err
	}
	if len(msg) > 0 {
		return errors.New(string(msg))
	}
	return nil
}

// The init's ends of the pipes: reportFD (ExtraFiles[0]) and, with
// Spec.Hold, holdFD (ExtraFiles[1]).
const (
	reportFD = 3
	holdFD   = 4
)

func init() {
	if len(os.Args) != 2 || os.Args[0] != Init {
		return
	}
	report := os.NewFile(reportFD, "report")
	unix.CloseOnExec(reportFD)
	var spec Spec
	err := json.Unmarshal([]byte(os.Args[1]), &spec)
	if err == nil {
		err = spec.Validate()
	}
	if err == nil && spec.Hold {
		err = awaitRelease()
	}
	if err == nil && len(spec.Mounts) > 0 {
		err = enter(spec)
	}
	if err == nil && spec.Dir != "" {
		if err = os.Chdir(spec.Dir); err != nil {
			err = fmt.Errorf("working directory %s: %w", spec.Dir, err)
		}
	}
	if err == nil {
		// On success exec never returns and the pipe closes on exec.
		err = syscall.Exec(spec.Path, spec.Args, os.Environ())
		err = fmt.Errorf("exec %s: %w", spec.Path, err)
	}
	fmt.Fprint(report, err.Error())
	os.Exit(128)
}

// awaitRelease blocks until the caller's Release: one byte on holdFD. End
// of file first means the caller let the init go without it.
func awaitRelease() error {
	hold := os.NewFile(holdFD, "hold")
	defer hold.Close()
	var b [1]byte
	if n, _ := hold.Read(b[:]); n != 1 {
		return errors.New("mountns: the caller did not release the container's process")
	}
	return nil
}
