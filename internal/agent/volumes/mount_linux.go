//go:build linux

package volumes

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountPoints lists the mount points of the agent's mount namespace, from
// /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, unescapeMountPath(fields[4]))
	}
	return out, sc.Err()
}

// unescapeMountPath undoes the octal escapes (\040 for a space, ...) of a
// path in mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
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

// resolve is path with symlinks resolved, as mountinfo names it; a
// missing path is "" with no error.
func resolve(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return real, err
}

// isMountPoint reports whether something is mounted at path. A missing
// path is not a mount point.
func isMountPoint(path string) (bool, error) {
	real, err := resolve(path)
	if err != nil || real == "" {
		return false, err
	}
	points, err := mountPoints()
	if err != nil {
		return false, err
	}
	for _, p := range points {
		if p == real {
			return true, nil
		}
	}
	return false, nil
}

// noMountsUnder fails when anything is mounted at or below path, so that
// removing path cannot reach into a mounted filesystem.
func noMountsUnder(path string) error {
	real, err := resolve(path)
	if err != nil || real == "" {
		return err
	}
	points, err := mountPoints()
	if err != nil {
		return err
	}
	for _, p := range points {
		if p == real || strings.HasPrefix(p, real+"/") {
			return fmt.Errorf("%s is mounted under %s", p, path)
		}
	}
	return nil
}

// mountTmpfs mounts a tmpfs at dir, of size bytes when size > 0.
func mountTmpfs(dir string, size int64) error {
	opts := ""
	if size > 0 {
		opts = fmt.Sprintf("size=%d", size)
	}
	return unix.Mount("tmpfs", dir, "tmpfs", 0, opts)
}

func unmount(dir string) error {
	return unix.Unmount(dir, 0)
}
