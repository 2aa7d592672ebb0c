package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"knode/internal/agent"
	"knode/internal/agent/prober"
	podruntime "knode/internal/agent/runtime"
	agentserver "knode/internal/agent/server"
	"knode/internal/agent/streaming"
)

// processStreams serves exec and port-forward with the process runtime.
func processStreams(rt podruntime.Streamer, idle time.Duration, log *slog.Logger) (*agentserver.Streams, error) {
	srv, err := streaming.New(streaming.Config{StreamIdleTimeout: idle, Logger: log})
	if err != nil {
		return nil, err
	}
	return &agentserver.Streams{Server: srv, Executor: agentserver.StreamerExecutor(rt), PortForwarder: agentserver.StreamerPortForwarder(rt)}, nil
}

// streamerProbes runs exec probes through a runtime.Streamer: the command
// runs beside the container, its stdout and stderr together are the
// output, and it is killed at timeout.
type streamerProbes struct{ rt podruntime.Streamer }

func (e streamerProbes) ExecSync(ctx context.Context, pod *corev1.Pod, container, _ string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	// The timeout bounds a real process, on real time.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out bytes.Buffer
	code, err := e.rt.Exec(ctx, pod.UID, container, cmd, podruntime.ExecStreams{Stdout: &out, Stderr: &out})
	if ctx.Err() != nil {
		return out.Bytes(), 0, fmt.Errorf("%w: %v", prober.ErrExecTimedOut, ctx.Err())
	}
	return out.Bytes(), code, err
}

// newProbes builds the prober the agent's pod worker drives: its events go
// through the worker, and a changed result asks the worker for a pass.
func newProbes(exec prober.ExecRunner, a **agent.Agent, metrics prometheus.Registerer, log *slog.Logger) (*prober.Manager, error) {
	worker := func() interface {
		RecordEvent(context.Context, *corev1.Pod, string, string, string)
		Kick()
	} {
		if *a == nil || (*a).Pods() == nil {
			return nil
		}
		return (*a).Pods()
	}
	return prober.New(prober.Config{
		Exec: exec,
		Recorder: func(pod *corev1.Pod, eventType, reason, message string) {
			if w := worker(); w != nil {
				w.RecordEvent(context.Background(), pod, eventType, reason, message)
			}
		},
		OnChange: func(types.UID) {
			if w := worker(); w != nil {
				w.Kick()
			}
		},
		Registerer: metrics,
		Logger:     log,
	})
}
