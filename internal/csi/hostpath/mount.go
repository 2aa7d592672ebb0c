package hostpath

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	// Root is the path, within its filesystem, of the mount's root.
	Root string
	// MountPoint is where it is mounted.
	MountPoint string
	// ReadOnly: the mount (not the filesystem) is read-only.
	ReadOnly bool
}

// parseMountInfo reads the format of /proc/<pid>/mountinfo (proc(5)):
// "id parent major:minor root mountpoint options [optional...] - type
// source superoptions", with space, tab, newline and backslash in paths
// written as octal escapes.
func parseMountInfo(data []byte) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 10 {
			return nil, fmt.Errorf("mountinfo: short line %q", line)
		}
		opts := strings.Split(f[5], ",")
		out = append(out, mountEntry{
			Root:       unescapeMountPath(f[3]),
			MountPoint: unescapeMountPath(f[4]),
			ReadOnly:   len(opts) > 0 && opts[0] == "ro",
		})
	}
	return out, sc.Err()
}

// unescapeMountPath undoes the kernel's \ooo escapes.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mounts is the mount table of this process's mount namespace.
type mounts []mountEntry

func readMounts() (mounts, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parseMountInfo(data)
}

// at returns the topmost mount at path (its last entry, since later mounts
// cover earlier ones), or nil.
func (m mounts) at(path string) *mountEntry {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].MountPoint == path {
			return &m[i]
		}
	}
	return nil
}

// canonical returns path cleaned and, when it exists, with its symlinks
// resolved, the form the mount table uses.
func canonical(path string) string {
	path = filepath.Clean(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}

// sameFile reports whether a and b are the same directory (device and
// inode). A bind mount's root is the directory it was made from, so a path
// where a volume is bind-mounted is the same file as the volume's
// directory.
func sameFile(a, b string) (bool, error) {
	var sa, sb unix.Stat_t
	if err := unix.Stat(a, &sa); err != nil {
		return false, err
	}
	if err := unix.Stat(b, &sb); err != nil {
		return false, err
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// stateAt says what is mounted at path, with volDir the directory of the
// volume asked about, and returns the mount entry when something is.
func stateAt(m mounts, path, volDir string) (mountState, *mountEntry, error) {
	e := m.at(canonical(path))
	if e == nil {
		return pathFree, nil, nil
	}
	same, err := sameFile(path, volDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return pathOther, e, nil
		}
		return pathOther, e, err
	}
	if same {
		return pathThisVolume, e, nil
	}
	return pathOther, e, nil
}

// bindMount mounts source at target, then makes that mount read-only when
// asked, keeping its nosuid, nodev, noexec and atime flags. A failed
// read-only remount undoes the mount.
func bindMount(source, target string, readonly bool) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s at %s: %w", source, target, err)
	}
	if !readonly {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		_ = unix.Unmount(target, 0)
		return fmt.Errorf("statfs %s: %w", target, err)
	}
	// The ST_* flags statfs reports share their values with the MS_* ones.
	keep := uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|keep, ""); err != nil {
		_ = unix.Unmount(target, 0)
		return fmt.Errorf("remount %s read-only: %w", target, err)
	}
	return nil
}

// unmountAll unmounts whatever is mounted at path, stacked mounts
// included. A path that is not a mount point, or does not exist, is fine.
func unmountAll(path string) error {
	path = canonical(path)
	for range 16 {
		m, err := readMounts()
		if err != nil {
			return err
		}
		if m.at(path) == nil {
			return nil
		}
		if err := unix.Unmount(path, 0); err != nil {
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 16 unmounts", path)
}

// fsStats is what statfs says of the filesystem holding a path.
type fsStats struct {
	TotalBytes, AvailableBytes, UsedBytes    int64
	TotalInodes, AvailableInodes, UsedInodes int64
}

func statFS(path string) (fsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsStats{}, err
	}
	bs := int64(st.Bsize)
	return fsStats{
		TotalBytes:      int64(st.Blocks) * bs,
		AvailableBytes:  int64(st.Bavail) * bs,
		UsedBytes:       int64(st.Blocks-st.Bfree) * bs,
		TotalInodes:     int64(st.Files),
		AvailableInodes: int64(st.Ffree),
		UsedInodes:      int64(st.Files - st.Ffree),
	}, nil
}
