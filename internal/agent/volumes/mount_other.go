//go:build !linux

package volumes

import "errors"

var errNoMounts = errors.New("mounts are only supported on Linux")

func isMountPoint(string) (bool, error) { return false, nil }
func noMountsUnder(string) error        { return nil }
func mountTmpfs(string, int64) error    { return errNoMounts }
func unmount(string) error              { return errNoMounts }
