//go:build linux

// Package mountns starts a container's process in its own mount namespace,
// with the pod's volumes bind-mounted at the container's mountPaths, without
// changing anything the host sees.
//
// The caller (the process runtime) builds an exec.Cmd with Command: the
// command is this same binary (/proc/self/exe) with Init as argv[0], run with
// CLONE_NEWNS. The package's init function notices that argv[0] and becomes
// the container's init: it lays out the mounts, reports failure (or nothing)
// on a pipe, and execs the container's command in place, so the process keeps
// its pid and start time. Every binary that starts containers this way must
// therefore import this package (the process runtime does).
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
	// before a mount inside it.
	Mounts []Mount `json:"mounts"`
	// Scratch is a directory of the caller's (on the host) that the init may
	// use for temporary mount points. It must exist.
	Scratch string `json:"scratch"`
	// Dir is the working directory of the command, as the container sees it.
	Dir string `json:"dir"`
	// Path is the executable, and Args its argv (Args[0] included).
	Path string   `json:"path"`
	Args []string `json:"args"`
}

// Validate checks what Plan and the init rely on: absolute, clean targets,
// absolute sources, a scratch directory, and a command.
func (s *Spec) Validate() error {
	if s.Path == "" || len(s.Args) == 0 {
		return errors.New("mountns: no command")
	}
	if !filepath.IsAbs(s.Scratch) {
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

// Command returns the exec.Cmd that runs spec's command in a new mount
// namespace, and the read end of the pipe on which the init reports a setup
// failure. The caller sets Env, Stdout, Stderr and SysProcAttr fields it
// needs (Cloneflags is set here), starts the command, closes the command's
// copy of the pipe with CloseChild, and then calls Wait on the pipe.
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
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{Init, string(data)},
		ExtraFiles: []*os.File{w},
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNS,
		},
	}
	return cmd, &Pipe{r: r, w: w}, nil
}

// Pipe carries the init's report.
type Pipe struct{ r, w *os.File }

// CloseChild closes the write end after the command started (or failed to).
func (p *Pipe) CloseChild() { p.w.Close() }

// Wait blocks until the init either execs the command (nil) or reports why
// it could not (the error). It returns once the init is done with its
// setup, which takes a few mount calls; it closes the pipe.
func (p *Pipe) Wait() error {
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

// reportFD is the init's end of the pipe (ExtraFiles[0]).
const reportFD = 3

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
	if err == nil {
		err = enter(spec)
	}
	if err == nil {
		// On success exec never returns and the pipe closes on exec.
		err = syscall.Exec(spec.Path, spec.Args, os.Environ())
		err = fmt.Errorf("exec %s: %w", spec.Path, err)
	}
	fmt.Fprint(report, err.Error())
	os.Exit(128)
}
