package cni

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The runtime's NetworkReady condition while no network config is written,
// as the kubelet reported it for its CNI network plugin (the reason is the
// CRI's; containerd's own message is "Network plugin returns error: cni
// plugin not initialized").
const (
	ReasonNotReady  = "NetworkPluginNotReady"
	MessageNotReady = "network plugin is not ready: cni config uninitialized"
)

// Config configures a Writer.
type Config struct {
	// Dir is the runtime's CNI config directory (DefaultDir for containerd
	// and the kubelet); required, absolute. It is created (0755) if missing.
	Dir string
	// FileName is the file written in Dir; empty means DefaultFileName. It
	// must end in ".conflist" (libcni reads other endings as a single
	// plugin's config) and must not contain '/' or start with '.'.
	FileName string
	// Network is the template of the network: everything but PodCIDRs,
	// which come from the node. Its PodCIDRs are ignored.
	Network Network
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs field.ErrorList
	switch {
	case c.Dir == "":
		errs = append(errs, field.Required(field.NewPath("dir"), "the runtime's CNI config directory, e.g. "+DefaultDir))
	case !filepath.IsAbs(c.Dir):
		errs = append(errs, field.Invalid(field.NewPath("dir"), c.Dir, "must be an absolute path"))
	}
	if c.FileName == "" {
		c.FileName = DefaultFileName
	}
	if !strings.HasSuffix(c.FileName, ".conflist") || strings.ContainsRune(c.FileName, '/') || strings.HasPrefix(c.FileName, ".") {
		errs = append(errs, field.Invalid(field.NewPath("fileName"), c.FileName, "must be a file name ending in .conflist, not starting with '.'"))
	}
	c.Network.PodCIDRs = nil
	c.Network.setDefaults()
	errs = append(errs, c.Network.validateTemplate(field.NewPath("network"))...)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errs.ToAggregate()
}

// Writer keeps the node's network config list on disk. Its methods may be
// called from several goroutines; each does its I/O before it returns.
type Writer struct {
	cfg  Config
	path string
	log  *slog.Logger
	mu   sync.Mutex // serialises writes and removals of path
}

// New checks cfg and returns its Writer. It touches no file.
func New(cfg Config) (*Writer, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	return &Writer{
		cfg:  cfg,
		path: filepath.Join(cfg.Dir, cfg.FileName),
		log:  cfg.Logger.With("component", "cni"),
	}, nil
}

// Path is the file the Writer writes.
func (w *Writer) Path() string { return w.path }

// Sync makes the file the network of node's pod CIDRs (spec.podCIDRs, or
// spec.podCIDR when only that is set). It reports whether it wrote the
// file: not when its bytes are already on disk, and not while the node has
// no pod CIDR yet (then it does nothing and returns no error). Pod CIDRs
// that Render refuses are an error and leave the file as it was.
func (w *Writer) Sync(node *corev1.Node) (changed bool, err error) {
	if node == nil {
		return false, errors.New("cni: no node to sync")
	}
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	if len(cidrs) == 0 {
		return false, nil
	}
	n := w.cfg.Network
	n.PodCIDRs = cidrs
	want, err := Render(n)
	if err != nil {
		return false, fmt.Errorf("cni: node %q: %w", node.Name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	have, err := os.ReadFile(w.path)
	switch {
	case err == nil && bytes.Equal(have, want):
		return false, nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("cni: reading %s: %w", w.path, err)
	}
	if err := writeFile(w.cfg.Dir, w.cfg.FileName, want); err != nil {
		return false, fmt.Errorf("cni: %w", err)
	}
	w.log.Info("Wrote the CNI network config", "path", w.path, "podCIDRs", cidrs)
	return true, nil
}

// Remove deletes the file; a missing file is not an error.
func (w *Writer) Remove() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := os.Remove(w.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cni: %w", err)
	}
	return nil
}

// Ready reports whether a network config is on disk at Path (a non-empty
// regular file, written by this Writer or left by an earlier agent). While
// it is false, the runtime's network is not ready: see ReasonNotReady and
// MessageNotReady.
func (w *Writer) Ready() bool {
	fi, err := os.Stat(w.path)
	return err == nil && fi.Mode().IsRegular() && fi.Size() > 0
}

// writeFile replaces dir/name with data (mode 0644) so that a reader sees
// the old file or the new one, never a part: it writes a temporary file in
// dir, whose name libcni does not read, syncs it and renames it over name.
func writeFile(dir, name string, data []byte) (err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
