//go:build linux

package process

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"knode/internal/agent/runtime"
)

// What the runtime keeps on disk so that the next agent can adopt its pods
// (see the package doc). Pod uids and container names contain no dot, so
// these names never clash with a pod's or a container's directory.
const (
	// ownerFile, in <root>/pods, names the Runtime that owns the pods.
	ownerFile = "runtime.owner"
	// podFile, in a pod's directory, is the pod StartPod was given (JSON).
	podFile = "pod.json"
	// stoppingFile, in a pod's directory, exists once StopPod was called.
	stoppingFile = "stopping.flag"
	// stateFile, in a container's directory, is its containerState.
	stateFile = "state.json"
	// pidFile, in a container's directory, is "<pid> <start>" of the
	// running process (start: clock ticks since boot).
	pidFile = "pid"
)

// stateVersion is the version of containerState this runtime writes and
// the only one it reads.
const stateVersion = 1

// containerState is one container's state.json: written, atomically, each
// time the container starts (or fails to start) and each time it exits.
type containerState struct {
	Version int `json:"version"`
	// Runs counts the container's processes started; the last one logs to
	// <Runs-1>.log and the next one will log to <Runs>.log.
	Runs int `json:"runs"`
	// PID and Cgroup are the running process's (its process group) and its
	// cgroup, a cgroups.Layout path relative to the Manager's bases; zero
	// when the last run ended or had no cgroup. Older agents recorded an
	// absolute cgroup2 directory, which is read but never adopted.
	PID    int    `json:"pid,omitempty"`
	Cgroup string `json:"cgroup,omitempty"`
	// ContainerID and RestartCount are the status's.
	ContainerID  string `json:"containerID"`
	RestartCount int32  `json:"restartCount"`
	// StartedAt is when the last run started.
	StartedAt time.Time `json:"startedAt"`
	// Exit is how the last run ended; absent while it runs.
	Exit *exitState `json:"exit,omitempty"`
	// LastTermination is the status's last termination state, if any.
	LastTermination *exitState `json:"lastTermination,omitempty"`
	// BackoffDelay (nanoseconds) and LastRestart are the restart back-off.
	BackoffDelay time.Duration `json:"backoffDelay"`
	LastRestart  time.Time     `json:"lastRestart,omitzero"`
}

// exitState is one run's end.
type exitState struct {
	ExitCode    int32     `json:"exitCode"`
	Reason      string    `json:"reason"`
	Message     string    `json:"message,omitempty"`
	StartedAt   time.Time `json:"startedAt"`
	FinishedAt  time.Time `json:"finishedAt"`
	ContainerID string    `json:"containerID"`
}

// running reports whether the state's last run had not ended when written.
func (s *containerState) running() bool { return s.Exit == nil }

func newContainerState(rec runtime.ContainerRecord, runs int, pr *proc) containerState {
	s := containerState{
		Version:         stateVersion,
		Runs:            runs,
		ContainerID:     rec.ID,
		RestartCount:    rec.RestartCount,
		StartedAt:       rec.StartedAt,
		Exit:            newExitState(rec.Exit),
		LastTermination: newExitState(rec.LastTermination),
		BackoffDelay:    rec.BackoffDelay,
		LastRestart:     rec.LastRestart,
	}
	if s.running() && pr != nil {
		s.PID, s.Cgroup = pr.pid, pr.cgroup
	}
	return s
}

func newExitState(t *corev1.ContainerStateTerminated) *exitState {
	if t == nil {
		return nil
	}
	return &exitState{
		ExitCode:    t.ExitCode,
		Reason:      t.Reason,
		Message:     t.Message,
		StartedAt:   t.StartedAt.Time,
		FinishedAt:  t.FinishedAt.Time,
		ContainerID: t.ContainerID,
	}
}

func (e *exitState) terminated() *corev1.ContainerStateTerminated {
	if e == nil {
		return nil
	}
	return &corev1.ContainerStateTerminated{
		ExitCode:    e.ExitCode,
		Reason:      e.Reason,
		Message:     e.Message,
		StartedAt:   metav1.NewTime(e.StartedAt),
		FinishedAt:  metav1.NewTime(e.FinishedAt),
		ContainerID: e.ContainerID,
	}
}

// record is the plan's view of the state.
func (s *containerState) record() runtime.ContainerRecord {
	return runtime.ContainerRecord{
		Started:         true,
		ID:              s.ContainerID,
		RestartCount:    s.RestartCount,
		StartedAt:       s.StartedAt,
		Exit:            s.Exit.terminated(),
		LastTermination: s.LastTermination.terminated(),
		BackoffDelay:    s.BackoffDelay,
		LastRestart:     s.LastRestart,
	}
}

// validate names what makes s unusable, if anything.
func (s *containerState) validate() error {
	switch {
	case s.Version != stateVersion:
		return fmt.Errorf("version %d, want %d", s.Version, stateVersion)
	case s.Runs < 0 || s.RestartCount < 0 || s.BackoffDelay < 0:
		return errors.New("negative runs, restartCount or backoffDelay")
	case s.StartedAt.IsZero():
		return errors.New("no startedAt")
	case s.running() && s.PID <= 1:
		return errors.New("a running container without a pid")
	}
	return nil
}

// readState reads a container's state file: nil when there is none (the
// container never started), an error when it cannot be used.
func readState(path string) (*containerState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s containerState
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

func writeState(path string, s containerState) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return writeAtomic(path, append(data, '\n'))
}

// writeAtomic replaces path with data: a reader (or the next agent) sees
// the old content or the new, never a part. It does not sync: it guards
// against the agent dying, not the machine (a reboot ends the containers
// anyway).
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o640)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}

// newOwnerToken is a value no other Runtime holds.
func newOwnerToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b)), nil
}
