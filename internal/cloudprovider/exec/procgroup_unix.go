//go:build unix

package exec

import (
	osexec "os/exec"
	"syscall"
)

// ownProcessGroup runs the command in a new process group and makes
// cancellation kill the whole group, so a shell script's children (sleep,
// ipmitool) die with it and release its output.
func ownProcessGroup(cmd *osexec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
