// Package atomicfile writes files that are never seen half written: the
// data goes to a temporary file beside the target, is synced, and is
// renamed over it. It does not lock: two writers of one path race, and the
// last rename wins.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data so that a reader, or a restart after a
// crash, sees either the old content or the new, never a part. The file
// has perm from its creation, so a secret is never readable by others.
// The data is synced before the rename and the directory after it.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		// Best effort: some filesystems refuse to sync a directory.
		_ = d.Sync()
		d.Close()
	}
	return nil
}
