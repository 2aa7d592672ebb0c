// Package runtime defines how the node agent runs a pod's containers: the
// Runtime interface, the status a runtime reports, and Plan, the pure
// container lifecycle (start order, restart policy, back-off) that every
// runtime drives.
//
// Two runtimes implement it: process (each container a real process on this
// machine) and fake (containers simulated in memory on the injected clock).
//
// The caller (the pod worker in internal/agent/pods) decides which pods run
// here (admission), turns a runtime's PodStatus into the API's PodStatus
// (phase, conditions, IPs), and finishes deletions. A runtime does not talk
// to the API server, does not run probes or lifecycle hooks, pulls no images
// and sets up no network: every pod shares the host's network.
package runtime

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sentinel errors a Runtime returns.
var (
	// ErrPodNotFound: the runtime holds no pod with that uid.
	ErrPodNotFound = errors.New("pod not found in the runtime")
	// ErrPodRunning: the pod still has running containers; stop it first.
	ErrPodRunning = errors.New("pod still has running containers")
)

// Runtime runs pods' containers on one node.
//
// Every method is safe for concurrent use and returns without waiting for a
// container to start or stop: state changes are observed through PodStatus,
// and Changes says when to look.
type Runtime interface {
	// StartPod takes the pod into the runtime and starts its containers as
	// its restart policy and init containers allow. It reads metadata and
	// spec, and status.hostIP(s)/podIP(s) for the downward API. A pod the
	// runtime already holds (same uid) is left as it is. A container that
	// cannot be started is reported in its status, not as an error; the
	// error is for the pod as a whole (for example its directory cannot be
	// made).
	StartPod(ctx context.Context, pod *corev1.Pod) error
	// StopPod stops the pod: no container is started or restarted again,
	// every running container is asked to stop (SIGTERM for processes), and
	// those still running when grace has passed are killed. grace <= 0 kills
	// at once. Calling it again can shorten the deadline, never extend it.
	StopPod(ctx context.Context, uid types.UID, grace time.Duration) error
	// RemovePod forgets a pod and deletes what it kept (logs, working
	// directories). It returns ErrPodRunning while a container runs.
	RemovePod(ctx context.Context, uid types.UID) error
	// PodStatus reports one pod, or ErrPodNotFound.
	PodStatus(uid types.UID) (PodStatus, error)
	// ListPods reports every pod the runtime holds, in no set order. A
	// caller uses it to find pods that no longer exist in the API.
	ListPods() []PodStatus
	// Changes receives a value after a container's state changed on its own
	// (a process exited, a restart or a kill came due). Values coalesce:
	// one value may stand for many changes. It has one reader, the pod
	// worker.
	Changes() <-chan struct{}
}

// ContainerKiller is implemented by runtimes that can end one container's
// current run (a liveness probe failure): the run ends as if it exited
// (reason and message given), and the Plan restarts it per restart policy
// and back-off.
//
// KillContainer asks the container to stop at once and kills it when grace
// has passed (grace <= 0 kills at once); it returns without waiting. The
// run is reported Terminated with the given reason and message (and the
// exit code the runtime saw). A container that does not run is left as it
// is. It returns ErrPodNotFound for an unknown pod, and an error for a
// container name the pod does not have.
type ContainerKiller interface {
	KillContainer(ctx context.Context, uid types.UID, container string, grace time.Duration, reason, message string) error
}

// PodStatus is what a runtime knows of one pod.
type PodStatus struct {
	UID       types.UID
	Namespace string
	Name      string
	// InitContainers and Containers follow the spec's order.
	InitContainers []ContainerStatus
	Containers     []ContainerStatus
	// Stopping is true once StopPod was called.
	Stopping bool
	// IPs are the pod's addresses as its sandbox reports them, primary
	// first; empty for a runtime whose pods share the host's network (and
	// for a host-network pod), and before the sandbox exists.
	IPs []string
}

// Running reports whether any container is running.
func (s PodStatus) Running() bool {
	for _, list := range [][]ContainerStatus{s.InitContainers, s.Containers} {
		for _, c := range list {
			if c.State.Running != nil {
				return true
			}
		}
	}
	return false
}

// Stopped reports whether StopPod was called and no container runs any more.
func (s PodStatus) Stopped() bool { return s.Stopping && !s.Running() }

// ContainerStatus is one container's state, in the API's terms.
type ContainerStatus struct {
	Name string
	// ID is "<runtime>://<id>" once the container was started; empty before.
	ID string
	// State is exactly one of Waiting, Running or Terminated.
	State corev1.ContainerState
	// LastTerminationState is the previous run's end, once it restarted or
	// while it waits to.
	LastTerminationState corev1.ContainerState
	// RestartCount counts restarts that happened (not ones that are due).
	RestartCount int32
	// LogPath is the file holding the current run's output; empty when the
	// runtime keeps none. PreviousLogPath is the run before's, empty when
	// there was none or it is gone.
	LogPath, PreviousLogPath string
	// LogFormat is how LogPath and PreviousLogPath are written: LogFormatRaw
	// or LogFormatCRI.
	LogFormat string
}

// Log file formats (ContainerStatus.LogFormat).
const (
	// LogFormatRaw: the output as the container wrote it, stdout and stderr
	// together (the process runtime's files).
	LogFormatRaw = ""
	// LogFormatCRI: the CRI's log lines, "<RFC3339Nano time> <stdout|stderr>
	// <F|P> <text>", where P marks a partial line continued by the next one
	// and F a full one (what the kubelet reads from a CRI runtime).
	LogFormatCRI = "cri"
)

// Container state reasons runtimes report; the strings are upstream's.
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCompleted                  = "Completed"
	ReasonError                      = "Error"
	ReasonOOMKilled                  = "OOMKilled"
	ReasonStartError                 = "StartError"
	ReasonContainerStatusUnknown     = "ContainerStatusUnknown"
)

// ExitCodeStartError is the exit code of a container whose process could not
// be started, as runc reports it.
const ExitCodeStartError = 128

// Upstream's container restart back-off: 10 s, doubling, capped at 5 min.
const (
	DefaultBackoffInitial = 10 * time.Second
	DefaultBackoffMax     = 5 * time.Minute
)

// BackoffConfig sets the restart back-off; zero fields take the defaults.
type BackoffConfig struct {
	Initial time.Duration
	Max     time.Duration
}

func (c BackoffConfig) withDefaults() BackoffConfig {
	if c.Initial <= 0 {
		c.Initial = DefaultBackoffInitial
	}
	if c.Max <= 0 {
		c.Max = DefaultBackoffMax
	}
	if c.Max < c.Initial {
		c.Max = c.Initial
	}
	return c
}

// Backoff is one container's restart back-off, as the kubelet keeps it: the
// first restart after a crash is immediate; each later one waits, counted
// from the crash, 10 s, then twice the previous wait, up to 5 min. A crash
// more than twice the maximum after the last restart starts over.
//
// The zero value (with a config from BackoffConfig) means "never restarted".
type Backoff struct {
	cfg         BackoffConfig
	delay       time.Duration
	lastRestart time.Time
}

// NewBackoff returns a back-off that has never restarted.
func NewBackoff(cfg BackoffConfig) Backoff { return Backoff{cfg: cfg.withDefaults()} }

func (b Backoff) expired(finished time.Time) bool {
	return b.lastRestart.IsZero() || finished.Sub(b.lastRestart) > 2*b.cfg.Max
}

// Wait is how long after finishing at finished the container must wait
// before its restart.
func (b Backoff) Wait(finished time.Time) time.Duration {
	if b.expired(finished) {
		return 0
	}
	return b.delay
}

// Restarted records a restart at now of a run that finished at finished.
func (b *Backoff) Restarted(finished, now time.Time) {
	if b.expired(finished) {
		b.delay = b.cfg.Initial
	} else {
		b.delay = min(2*b.delay, b.cfg.Max)
	}
	b.lastRestart = now
}
