package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Mode is the cgroup hierarchy a host has.
type Mode int

const (
	// Unknown: no cgroup hierarchy was found.
	Unknown Mode = iota
	// V1: per-controller hierarchies under <root>/<controller>.
	V1
	// Hybrid: V1 controllers, plus a cgroup2 tree at <root>/unified that
	// holds no controllers. Limits are written as on V1.
	Hybrid
	// V2: one unified hierarchy at <root>, with cgroup.controllers.
	V2
)

func (m Mode) String() string {
	switch m {
	case V1:
		return "v1"
	case Hybrid:
		return "hybrid"
	case V2:
		return "v2"
	}
	return "unknown"
}

// Legacy reports whether limits are written to per-controller v1
// hierarchies (V1 and Hybrid).
func (m Mode) Legacy() bool { return m == V1 || m == Hybrid }

// DefaultRoot is where hosts mount their cgroup hierarchies.
const DefaultRoot = "/sys/fs/cgroup"

// ErrNoCgroups: neither a v1 controller nor a v2 tree was found.
var ErrNoCgroups = errors.New("no cgroup hierarchy found")

// v1Controllers are the v1 hierarchies the Manager uses; cpuacct only
// receives directories and processes.
var v1Controllers = []string{"cpu", "cpuacct", "cpuset", "memory", "pids"}

// Detect tells the hierarchy under root ("" means DefaultRoot) from its
// files: V2 when root/cgroup.controllers exists; otherwise V1 when a v1
// controller directory (cpu, cpuacct, cpuset, memory or pids) exists, and
// Hybrid when root/unified/cgroup.controllers exists too (whatever it
// lists: limits go to v1 either way). It does not check filesystem types,
// so a fixture tree in a temporary directory is detected like a host.
func Detect(root string) (Mode, error) {
	if root == "" {
		root = DefaultRoot
	}
	if exists(filepath.Join(root, "cgroup.controllers")) {
		return V2, nil
	}
	v1 := false
	for _, c := range v1Controllers {
		if fi, err := os.Stat(filepath.Join(root, c)); err == nil && fi.IsDir() {
			v1 = true
			break
		}
	}
	if !v1 {
		return Unknown, fmt.Errorf("%s: %w", root, ErrNoCgroups)
	}
	if exists(filepath.Join(root, "unified", "cgroup.controllers")) {
		return Hybrid, nil
	}
	return V1, nil
}

// DetectMountinfo tells the hierarchy from /proc/self/mountinfo-formatted
// input: V2 when a cgroup2 filesystem is mounted at root ("" means
// DefaultRoot); V1 when a cgroup (v1) filesystem is mounted, Hybrid when a
// cgroup2 one is mounted elsewhere too. It also returns the mount point of
// each v1 controller ("cpu", "memory", "name=systemd", ...).
func DetectMountinfo(r io.Reader, root string) (Mode, map[string]string, error) {
	if root == "" {
		root = DefaultRoot
	}
	root = filepath.Clean(root)
	mounts := map[string]string{}
	v2Root, v2Other := false, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		mp := unescapeMount(f[4])
		switch g[0] {
		case "cgroup2":
			if filepath.Clean(mp) == root {
				v2Root = true
			} else {
				v2Other = true
			}
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				switch o {
				case "rw", "ro", "relatime", "noatime", "nosuid", "nodev", "noexec", "clone_children", "xattr", "noprefix":
					continue
				}
				if strings.HasPrefix(o, "release_agent=") {
					continue
				}
				mounts[o] = mp
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Unknown, nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	switch {
	case v2Root:
		return V2, nil, nil
	case len(mounts) > 0 && v2Other:
		return Hybrid, mounts, nil
	case len(mounts) > 0:
		return V1, mounts, nil
	}
	return Unknown, nil, ErrNoCgroups
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(n)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	v := 0
	for i := 0; i < 3; i++ {
		if s[i] < '0' || s[i] > '7' {
			return 0, false
		}
		v = v*8 + int(s[i]-'0')
	}
	return byte(v), v < 256
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
