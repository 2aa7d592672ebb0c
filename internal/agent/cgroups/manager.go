//go:build linux

package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Config builds a Manager.
type Config struct {
	// Mode is the host's hierarchy (Detect). Hybrid is handled as V1.
	Mode Mode
	// Root is the mount root ("" means DefaultRoot). On V2 it is the
	// base directory of every path; on V1 controller c's base is Root/c.
	Root string
	// Dirs overrides a V1 controller's base directory (absolute), e.g. the
	// agent's own cgroup in that hierarchy. Ignored on V2.
	Dirs map[string]string
}

func (c Config) validate() error {
	switch c.Mode {
	case V1, Hybrid, V2:
	default:
		return fmt.Errorf("cgroups: Config.Mode must be V1, Hybrid or V2, not %s", c.Mode)
	}
	for k := range c.Dirs {
		if !slices.Contains(v1Controllers, k) {
			return fmt.Errorf("cgroups: Config.Dirs: unknown controller %q (want one of %v)", k, v1Controllers)
		}
	}
	return nil
}

// Manager creates, writes and removes cgroups under fixed base
// directories. Paths are Layout paths (relative, slash-separated). Its
// methods do file I/O and do not block otherwise; it is safe for
// concurrent use on different paths.
type Manager struct {
	mode Mode
	// base: controller -> base directory, for the usable controllers (V1),
	// or "" -> Root (V2).
	base map[string]string
	// enforced and missing: limit controllers, sorted.
	enforced, missing []string
	// v2 controllers to enable in subtree_control, in order.
	v2ctl []string
	// plain: the bases are ordinary directories (fixture trees), where a
	// control file the kernel would create is created on first write.
	plain bool
}

// limitControllers are the controllers limits are written to.
var limitControllers = []string{"cpu", "cpuset", "memory", "pids"}

// New checks which controllers can be used: on V1 a controller's base
// directory must exist and be writable; on V2 it must be listed in
// Root/cgroup.controllers and Root/cgroup.subtree_control writable.
// Unusable controllers are reported by Missing; their writes are skipped.
func New(cfg Config) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	root := cfg.Root
	if root == "" {
		root = DefaultRoot
	}
	m := &Manager{mode: cfg.Mode, base: map[string]string{}}
	if cfg.Mode == V2 {
		if !writable(root) {
			return nil, fmt.Errorf("cgroups: %s is not a writable directory", root)
		}
		m.base[""] = root
		m.plain = !isCgroupFS(root)
		avail, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err != nil {
			return nil, fmt.Errorf("cgroups: %w", err)
		}
		have := strings.Fields(string(avail))
		for _, c := range limitControllers {
			if slices.Contains(have, c) {
				m.enforced = append(m.enforced, c)
				m.v2ctl = append(m.v2ctl, c)
			} else {
				m.missing = append(m.missing, c)
			}
		}
		return m, nil
	}
	for _, c := range v1Controllers {
		dir := cfg.Dirs[c]
		if dir == "" {
			dir = filepath.Join(root, c)
		}
		ok := writable(dir)
		if ok {
			m.base[c] = dir
		}
		if c == "cpuacct" {
			continue
		}
		if ok {
			m.enforced = append(m.enforced, c)
		} else {
			m.missing = append(m.missing, c)
		}
	}
	m.plain = true
	for _, b := range m.base {
		if isCgroupFS(b) {
			m.plain = false
		}
	}
	// cpu and cpuacct often share one hierarchy (cpu,cpuacct with symlinks).
	if a, ok := m.base["cpuacct"]; ok && sameDir(a, m.base["cpu"]) {
		delete(m.base, "cpuacct")
	}
	return m, nil
}

// Mode is the hierarchy the Manager writes (Hybrid writes as V1).
func (m *Manager) Mode() Mode { return m.mode }

// Enforced lists the controllers limits are written to ("cpu", "cpuset",
// "memory", "pids"), sorted. The caller must not change it.
func (m *Manager) Enforced() []string { return m.enforced }

// Missing lists the controllers that cannot be written, sorted: their
// limits are not enforced. The caller must not change it.
func (m *Manager) Missing() []string { return m.missing }

// MissingWarning is a sentence for the agent's log about Missing, e.g.
// "not enforced: memory limits, pids limits"; "" when nothing is missing.
func (m *Manager) MissingWarning() string {
	if len(m.missing) == 0 {
		return ""
	}
	parts := make([]string, len(m.missing))
	for i, c := range m.missing {
		parts[i] = c + " limits"
	}
	return "not enforced: " + strings.Join(parts, ", ")
}

// dirs is each usable hierarchy's directory for path, keyed by controller
// ("" on V2), in a fixed order.
func (m *Manager) dirs(path string) []ctlDir {
	rel := filepath.FromSlash(strings.TrimPrefix(path, "/"))
	if m.mode == V2 {
		return []ctlDir{{"", m.base[""], filepath.Join(m.base[""], rel)}}
	}
	var out []ctlDir
	for _, c := range v1Controllers {
		if b, ok := m.base[c]; ok {
			out = append(out, ctlDir{c, b, filepath.Join(b, rel)})
		}
	}
	return out
}

type ctlDir struct{ ctl, base, dir string }

// Create makes path (and its missing parents) in every usable hierarchy
// and writes r into it. On V1, a new cpuset cgroup gets its parent's
// cpuset.cpus and cpuset.mems before anything else; on V2 the controllers
// are enabled in cgroup.subtree_control of the base and every parent.
// Creating an existing cgroup just writes r.
func (m *Manager) Create(path string, r Resources) error {
	if err := cleanRel(path); err != nil {
		return err
	}
	for _, d := range m.dirs(path) {
		if err := m.mkdirs(d, path); err != nil {
			return err
		}
	}
	return m.Update(path, r)
}

func cleanRel(path string) error {
	p := strings.TrimPrefix(path, "/")
	if p == "" || filepath.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("cgroups: path %q must be a clean relative cgroup path", path)
	}
	return nil
}

func (m *Manager) mkdirs(d ctlDir, path string) error {
	dir := d.base
	for _, part := range strings.Split(strings.TrimPrefix(path, "/"), "/") {
		if m.mode == V2 && len(m.v2ctl) > 0 {
			if err := m.enableV2(dir); err != nil {
				return err
			}
		}
		parent := dir
		dir = filepath.Join(dir, part)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("cgroups: creating %s: %w", dir, unwrapPath(err))
		}
		if d.ctl == "cpuset" {
			if err := m.inheritCpuset(parent, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// enableV2 enables the controllers in dir's cgroup.subtree_control,
// skipping those already enabled.
func (m *Manager) enableV2(dir string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	cur, _ := os.ReadFile(file)
	have := strings.Fields(string(cur))
	var add []string
	for _, c := range m.v2ctl {
		if !slices.Contains(have, c) {
			add = append(add, "+"+c)
		}
	}
	if len(add) == 0 {
		return nil
	}
	return m.writeFile(file, strings.Join(add, " "))
}

// inheritCpuset copies the parent's cpuset.cpus and cpuset.mems into a new
// v1 cpuset cgroup whose own are empty: v1 refuses tasks otherwise.
func (m *Manager) inheritCpuset(parent, dir string) error {
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		own, err := os.ReadFile(filepath.Join(dir, f))
		if err == nil && strings.TrimSpace(string(own)) != "" {
			continue
		}
		v, err := os.ReadFile(filepath.Join(parent, f))
		if err != nil {
			return fmt.Errorf("cgroups: reading %s: %w", filepath.Join(parent, f), unwrapPath(err))
		}
		if err := m.writeFile(filepath.Join(dir, f), strings.TrimSpace(string(v))); err != nil {
			return err
		}
	}
	return nil
}

// Update writes r into the existing cgroup path (see V1Files, V2Files).
// The kernel checks limits against the hierarchy (a v1 cpu quota above
// the parent's, a cpuset outside the parent's are refused): when shrinking
// a pod, the caller updates its containers first.
func (m *Manager) Update(path string, r Resources) error {
	if err := cleanRel(path); err != nil {
		return err
	}
	if m.mode == V2 {
		dir := m.dirs(path)[0].dir
		if err := mustDir(dir); err != nil {
			return err
		}
		for _, f := range V2Files(r) {
			if !slices.Contains(m.v2ctl, strings.SplitN(f.Name, ".", 2)[0]) {
				continue
			}
			if err := m.writeFile(filepath.Join(dir, f.Name), f.Value); err != nil {
				return err
			}
		}
		return nil
	}
	files := V1Files(r)
	for _, d := range m.dirs(path) {
		if err := mustDir(d.dir); err != nil {
			return err
		}
		if d.ctl == "memory" {
			if err := m.writeV1Memory(d.dir, files["memory"]); err != nil {
				return err
			}
			continue
		}
		for _, f := range files[d.ctl] {
			if err := m.writeFile(filepath.Join(d.dir, f.Name), f.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeV1Memory writes memory.limit_in_bytes then memsw; when the kernel
// refuses the limit (it must not exceed the current memsw limit), memsw
// goes first.
func (m *Manager) writeV1Memory(dir string, files []File) error {
	err := m.writeFiles(dir, files)
	if err == nil || len(files) < 2 {
		return err
	}
	rev := slices.Clone(files)
	slices.Reverse(rev)
	if err2 := m.writeFiles(dir, rev); err2 != nil {
		return err
	}
	return nil
}

func (m *Manager) writeFiles(dir string, files []File) error {
	for _, f := range files {
		if err := m.writeFile(filepath.Join(dir, f.Name), f.Value); err != nil {
			return err
		}
	}
	return nil
}

func mustDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("cgroups: %s: %w", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("cgroups: %s is not a directory", dir)
	}
	return nil
}

// AddProcess moves pid into path in every usable hierarchy.
func (m *Manager) AddProcess(path string, pid int) error {
	if err := cleanRel(path); err != nil {
		return err
	}
	for _, d := range m.dirs(path) {
		if err := m.writeFile(filepath.Join(d.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// Pids lists the processes in path and its descendants, from the memory
// hierarchy on V1 (the first usable one without memory).
func (m *Manager) Pids(path string) ([]int, error) {
	ds := m.dirs(path)
	if len(ds) == 0 {
		return nil, nil
	}
	d := ds[0]
	for _, x := range ds {
		if x.ctl == "memory" {
			d = x
		}
	}
	var pids []int
	err := filepath.WalkDir(d.dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || e.Name() != "cgroup.procs" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("cgroups: reading %s: %w", p, unwrapPath(err))
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
		return nil
	})
	return pids, err
}

// Kill sends SIGKILL to every process Pids lists. A process forking at the
// same moment may escape; the caller calls it again before Remove.
func (m *Manager) Kill(path string) error {
	pids, err := m.Pids(path)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("cgroups: killing %d in %s: %w", pid, path, err)
		}
	}
	return nil
}

// Remove removes path and every cgroup below it, deepest first, in every
// usable hierarchy; a missing one is no error. A cgroup that still holds
// a process cannot be removed (EBUSY): the error names it. Directories on
// a non-cgroup filesystem (fixture trees) are removed with their files.
func (m *Manager) Remove(path string) error {
	if err := cleanRel(path); err != nil {
		return err
	}
	var errs []error
	for _, d := range m.dirs(path) {
		if err := removeTree(d.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cgroups: reading %s: %w", dir, unwrapPath(err))
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if isCgroupFS(dir) {
		err = os.Remove(dir)
	} else {
		err = os.RemoveAll(dir)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cgroups: removing %s: %w", dir, unwrapPath(err))
	}
	return nil
}

// OOMKilled reports whether the kernel's OOM killer killed a process of
// path: "oom_kill N" with N > 0 in memory.oom_control (V1; the count of the
// victim's own cgroup) or memory.events (V2; includes descendants).
func (m *Manager) OOMKilled(path string) (bool, error) {
	if err := cleanRel(path); err != nil {
		return false, err
	}
	var file string
	for _, d := range m.dirs(path) {
		switch d.ctl {
		case "":
			file = filepath.Join(d.dir, "memory.events")
		case "memory":
			file = filepath.Join(d.dir, "memory.oom_control")
		}
	}
	if file == "" {
		return false, fmt.Errorf("cgroups: the memory controller is not usable")
	}
	n, err := readKey(file, "oom_kill")
	return n > 0, err
}

// readKey reads the value of key in a flat-keyed file ("key value" lines).
func readKey(file, key string) (int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, fmt.Errorf("cgroups: reading %s: %w", file, unwrapPath(err))
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("cgroups: %s: bad %s value %q", file, key, v)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cgroups: reading %s: %w", file, err)
	}
	return 0, fmt.Errorf("cgroups: %s has no %s line", file, key)
}

// writeFile writes value to an existing control file (never creating one
// on a cgroup filesystem: a missing file means an unsupported controller or
// kernel).
func (m *Manager) writeFile(file, value string) error {
	flag := os.O_WRONLY | os.O_TRUNC
	if m.plain {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(file, flag, 0o644)
	if err != nil {
		return fmt.Errorf("cgroups: writing %q to %s: %w", value, file, unwrapPath(err))
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cgroups: writing %q to %s: %w", value, file, unwrapPath(err))
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func writable(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir() && unix.Access(dir, unix.W_OK) == nil
}

func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	x, err1 := os.Stat(a)
	y, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(x, y)
}

const (
	cgroupSuperMagic  = 0x27e0eb
	cgroup2SuperMagic = 0x63677270
)

func isCgroupFS(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	return st.Type == cgroupSuperMagic || st.Type == cgroup2SuperMagic
}
