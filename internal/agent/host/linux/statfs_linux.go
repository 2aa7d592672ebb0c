//go:build linux

package linux

import (
	"fmt"
	"syscall"

	"knode/internal/agent/host"
)

// statfs describes the filesystem holding path. Sizes use the fragment size
// (f_frsize), the unit the block counts are in, falling back to f_bsize.
func statfs(path string) (host.Filesystem, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return host.Filesystem{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	unit := uint64(st.Frsize)
	if unit == 0 {
		unit = uint64(st.Bsize)
	}
	return host.Filesystem{
		Capacity:   st.Blocks * unit,
		Available:  st.Bavail * unit,
		Inodes:     st.Files,
		InodesFree: st.Ffree,
	}, nil
}
