package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/types"
)

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint16
}

// ExecStreams are the streams of one exec or attach session; a nil field
// was not asked for.
type ExecStreams struct {
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr is nil with TTY: a terminal merges it into Stdout.
	Stderr io.Writer
	TTY    bool
	// Resize receives the client's terminal size changes; nil without TTY.
	Resize <-chan TerminalSize
}

// Streamer is implemented by runtimes that serve kubectl exec and
// port-forward themselves (the process runtime); a CRI runtime hands out
// its runtime's streaming URLs instead.
type Streamer interface {
	// Exec runs argv in container of pod uid with s, blocking until it
	// exits, and returns its exit code. The error is for a session that
	// could not run (no such container, not running, argv not found).
	Exec(ctx context.Context, uid types.UID, container string, argv []string, s ExecStreams) (int, error)
	// PortForward connects stream to port in the pod's network, blocking
	// until either side closes.
	PortForward(ctx context.Context, uid types.UID, port int32, stream io.ReadWriteCloser) error
}

// ErrContainerNotFound: the pod has no container of that name (exec,
// port-forward and KillContainer of either runtime wrap it).
var ErrContainerNotFound = errors.New("container not found in the pod")

// ErrContainerNotRunning is returned for a session on a container that
// has no running process, by either runtime.
type ErrContainerNotRunning struct{ Container string }

func (e ErrContainerNotRunning) Error() string {
	return fmt.Sprintf("container %s is not running", e.Container)
}
