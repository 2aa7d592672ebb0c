package logind

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// DefaultDropInDir is where logind reads configuration drop-ins.
const DefaultDropInDir = "/etc/systemd/logind.conf.d"

// DropInName is the file WriteDropIn writes in its directory. The 99- prefix
// makes it sort, and so apply, after the drop-ins of other packages.
const DropInName = "99-kubelet.conf"

// DropIn returns the drop-in that sets logind's InhibitDelayMaxSec to delay,
// in whole seconds rounded to nearest (%.0f: 1.4s is 1, 1.6s is 2, an exact
// half goes to the even neighbour).
func DropIn(delay time.Duration) []byte {
	return fmt.Appendf(nil, "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=%.0f\n", delay.Seconds())
}

// WriteDropIn writes DropIn(delay) to dir/DropInName, creating dir (0755) if
// needed, and returns the file's path. The file (0644) is replaced
// atomically, so logind never reads half of it. logind only sees it after a
// reload; see Conn.ReloadLogind. A negative delay is refused.
func WriteDropIn(dir string, delay time.Duration) (path string, err error) {
	if delay < 0 {
		return "", fmt.Errorf("writing logind drop-in: delay %v is negative", delay)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing logind drop-in: %w", err)
	}
	path = filepath.Join(dir, DropInName)
	// The temporary name does not end in .conf, so logind ignores it.
	tmp, err := os.CreateTemp(dir, "."+DropInName+".tmp*")
	if err != nil {
		return "", fmt.Errorf("writing logind drop-in: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(DropIn(delay)); err != nil {
		return "", fmt.Errorf("writing logind drop-in %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return "", fmt.Errorf("writing logind drop-in %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return "", fmt.Errorf("writing logind drop-in %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("writing logind drop-in %s: %w", path, err)
	}
	return path, nil
}
