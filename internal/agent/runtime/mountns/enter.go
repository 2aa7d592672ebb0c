//go:build linux

package mountns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// enter runs in the init, inside the new mount namespace: it makes the
// namespace's mounts slaves of the host's, moves into a shadow root and
// makes every mount. The init then changes to the working directory.
func enter(spec Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("making / a slave mount: %w", err)
	}
	// Resolve every source on the host's view first: after the chroot the
	// same paths resolve through bind mounts, but a source inside a
	// shadowed directory is better checked once, here.
	for _, m := range spec.Mounts {
		if _, err := os.Stat(m.Source); err != nil {
			return fmt.Errorf("volume source %s: %w", m.Source, err)
		}
	}
	l := &layout{scratch: spec.Scratch, shadowed: map[string]bool{}}
	if err := l.shadowRoot(); err != nil {
		return err
	}
	for _, m := range spec.Mounts {
		if err := l.mount(m); err != nil {
			return err
		}
	}
	return nil
}

// layout tracks the directories of the namespace that are its own tmpfs
// (where new entries may be made).
type layout struct {
	scratch  string
	shadowed map[string]bool
	n        int
}

// shadowRoot makes a tmpfs holding bind mounts of the host root's entries
// and chroots into it.
func (l *layout) shadowRoot() error {
	root := filepath.Join(l.scratch, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "mode=755"); err != nil {
		return fmt.Errorf("mounting the namespace's root: %w", err)
	}
	if err := fill(root, "/"); err != nil {
		return err
	}
	wd, _ := os.Getwd()
	if err := unix.Chdir(root); err != nil {
		return err
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if wd != "" {
		_ = unix.Chdir(wd)
	}
	l.shadowed["/"] = true
	return nil
}

// fill makes, in the empty directory dst, one entry for each entry of src:
// a symlink for a symlink, and for anything else an empty placeholder with a
// recursive bind mount of the original on it.
func fill(dst, src string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
			continue
		}
		if err := placeholder(to, e.IsDir()); err != nil {
			return err
		}
		if err := unix.Mount(from, to, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mounting %s: %w", from, err)
		}
	}
	return nil
}

func placeholder(path string, dir bool) error {
	if dir {
		return os.Mkdir(path, 0o755)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// mount bind-mounts m.Source at m.Target, making the target (and the
// directories on its way) in shadowed directories where they are missing.
func (l *layout) mount(m Mount) error {
	info, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("volume source %s: %w", m.Source, err)
	}
	if err := l.ensure(m.Target, info.IsDir()); err != nil {
		return fmt.Errorf("making mount point %s: %w", m.Target, err)
	}
	if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("making %s read-only: %w", m.Target, err)
		}
	}
	return nil
}

// ensure makes target exist (a directory, or a file when dir is false),
// shadowing the deepest existing directory on its way if something must be
// created there.
func (l *layout) ensure(target string, dir bool) error {
	if info, err := os.Lstat(target); err == nil {
		if info.Mode()&os.ModeSymlink != 0 {
			return errors.New("the mount point is a symbolic link")
		}
		if info.IsDir() != dir {
			return fmt.Errorf("the mount point exists and is not a %s", kind(dir))
		}
		return nil
	}
	parent := filepath.Dir(target)
	if err := l.ensure(parent, true); err != nil {
		return err
	}
	if !l.shadowed[parent] {
		if err := l.shadow(parent); err != nil {
			return err
		}
	}
	if err := placeholder(target, dir); err != nil {
		return err
	}
	if dir {
		// Directories made here are the namespace's own.
		l.shadowed[target] = true
	}
	return nil
}

// shadow mounts a tmpfs over dir holding bind mounts of its former entries.
func (l *layout) shadow(dir string) error {
	l.n++
	// The scratch directory is reachable inside the root through the bind
	// mount of its top-level ancestor.
	orig := filepath.Join(l.scratch, fmt.Sprintf("orig-%d", l.n))
	if err := os.MkdirAll(orig, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(dir, orig, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("keeping %s: %w", dir, err)
	}
	var st unix.Stat_t
	mode := uint32(0o755)
	if unix.Stat(dir, &st) == nil {
		mode = st.Mode & 0o7777
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("mode=%o", mode)); err != nil {
		return fmt.Errorf("shadowing %s: %w", dir, err)
	}
	if err := fill(dir, orig); err != nil {
		return err
	}
	// The entries are bound; the whole-directory bind is no longer needed.
	_ = unix.Unmount(orig, unix.MNT_DETACH)
	l.shadowed[dir] = true
	return nil
}

func kind(dir bool) string {
	if dir {
		return "directory"
	}
	return "file"
}
