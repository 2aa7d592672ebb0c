package cri

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"

	"knode/internal/agent/runtime"
)

// Errors of the calls into a pod's containers.
var (
	// ErrNoSandbox: the pod's sandbox is not running.
	ErrNoSandbox = errors.New("pod has no running sandbox")
)

// Version is the runtime's "<name>://<version>" (for example
// "containerd://1.6.20"), as the kubelet reports
// nodeInfo.containerRuntimeVersion.
func (r *Runtime) Version(ctx context.Context) (string, error) {
	v, err := r.rt.Version(r.callCtx(ctx), "")
	if err != nil {
		return "", fmt.Errorf("cri runtime version: %w", err)
	}
	return v.RuntimeName + "://" + v.RuntimeVersion, nil
}

// runningContainer is the CRI ID of container name of pod uid, which must
// run.
func (r *Runtime) runningContainerID(uid types.UID, name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return "", fmt.Errorf("pod %s: %w", uid, runtime.ErrPodNotFound)
	}
	i := slices.IndexFunc(p.ctrs, func(c *ctr) bool { return c.name == name })
	if i < 0 {
		return "", fmt.Errorf("pod %s container %q: %w", uid, name, runtime.ErrContainerNotFound)
	}
	if !slices.Contains(p.plan.Running(), i) || p.ctrs[i].id == "" {
		return "", fmt.Errorf("pod %s: %w", uid, runtime.ErrContainerNotRunning{Container: name})
	}
	return p.ctrs[i].id, nil
}

// ExecSync runs cmd in a running container and waits for it (timeout 0:
// no limit): its output and exit code. err is for a command that could not
// be run or timed out, not for a non-zero exit.
func (r *Runtime) ExecSync(ctx context.Context, uid types.UID, container string, cmd []string, timeout time.Duration) (stdout, stderr []byte, exitCode int, err error) {
	id, err := r.runningContainerID(uid, container)
	if err != nil {
		return nil, nil, 0, err
	}
	stdout, stderr, err = r.rt.ExecSync(r.callCtx(ctx), id, cmd, timeout)
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return stdout, stderr, exit.ExitStatus(), nil
	}
	if err != nil {
		return stdout, stderr, 0, fmt.Errorf("exec in pod %s container %q: %w", uid, container, err)
	}
	return stdout, stderr, 0, nil
}

// ExecURL is the runtime's streaming URL for running cmd in a running
// container (the CRI's Exec): whoever serves kubectl exec connects to it.
func (r *Runtime) ExecURL(ctx context.Context, uid types.UID, container string, cmd []string, tty, stdin, stdout, stderr bool) (*url.URL, error) {
	id, err := r.runningContainerID(uid, container)
	if err != nil {
		return nil, err
	}
	resp, err := r.rt.Exec(r.callCtx(ctx), &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("exec in pod %s container %q: %w", uid, container, err)
	}
	return url.Parse(resp.Url)
}

// AttachURL is the runtime's streaming URL for attaching to a running
// container's streams (the CRI's Attach).
func (r *Runtime) AttachURL(ctx context.Context, uid types.UID, container string, tty, stdin, stdout, stderr bool) (*url.URL, error) {
	id, err := r.runningContainerID(uid, container)
	if err != nil {
		return nil, err
	}
	resp, err := r.rt.Attach(r.callCtx(ctx), &runtimeapi.AttachRequest{
		ContainerId: id, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("attach to pod %s container %q: %w", uid, container, err)
	}
	return url.Parse(resp.Url)
}

// PortForwardURL is the runtime's streaming URL for forwarding to port in
// the pod's network namespace (the CRI's PortForward).
func (r *Runtime) PortForwardURL(ctx context.Context, uid types.UID, port int32) (*url.URL, error) {
	r.mu.Lock()
	p, ok := r.pods[uid]
	var sandboxID string
	if ok && !p.sandboxStopped {
		sandboxID = p.sandboxID
	}
	r.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("pod %s: %w", uid, runtime.ErrPodNotFound)
	}
	if sandboxID == "" {
		return nil, fmt.Errorf("pod %s: %w", uid, ErrNoSandbox)
	}
	resp, err := r.rt.PortForward(r.callCtx(ctx), &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: []int32{port}})
	if err != nil {
		return nil, fmt.Errorf("port-forward to pod %s port %d: %w", uid, port, err)
	}
	return url.Parse(resp.Url)
}
