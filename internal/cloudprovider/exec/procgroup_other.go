//go:build !unix

package exec

import osexec "os/exec"

// ownProcessGroup keeps os/exec's default: cancellation kills the command
// process only.
func ownProcessGroup(cmd *osexec.Cmd) {}
