//go:build !linux

package linux

import (
	"errors"
	"fmt"

	"knode/internal/agent/host"
)

// statfs is only implemented on Linux.
func statfs(path string) (host.Filesystem, error) {
	return host.Filesystem{}, fmt.Errorf("statfs %s: %w", path, errors.ErrUnsupported)
}
