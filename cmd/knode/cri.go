package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"knode/internal/agent"
	"knode/internal/agent/cni"
	"knode/internal/agent/options"
	"knode/internal/agent/prober"
	"knode/internal/agent/runtime/cri"
	agentserver "knode/internal/agent/server"
	"knode/internal/agent/streaming"
	"knode/internal/agent/volumes"
)

// imagesRefresh is how often the node's image list is read from the CRI
// for status.images (the kubelet's image cache refreshes every 30 s).
const imagesRefresh = 30 * time.Second

// criParts are the CRI runtime and what the agent serves and reports
// through it.
type criParts struct {
	rt      *cri.Runtime
	streams *agentserver.Streams
	probes  prober.ExecRunner
	network *cni.Writer
	// name and version make nodeInfo.containerRuntimeVersion.
	name, version string
	images        *imageCache
}

// newCRI connects to the CRI runtime at s.Runtime's endpoint and builds
// its streaming, probes, pod network config and image list. a is the agent
// once built, for the runtime's events.
func newCRI(ctx context.Context, s options.Settings, vols *volumes.Manager, res *nodeResources, a **agent.Agent, log *slog.Logger) (*criParts, error) {
	images := &imageCache{clock: clock.RealClock{}, log: log}
	cfg := cri.Config{
		Endpoint:       s.Runtime.ContainerRuntimeEndpoint,
		ImageEndpoint:  s.Runtime.ImageServiceEndpoint,
		RequestTimeout: s.Runtime.RuntimeRequestTimeout,
		PodLogsDir:     s.Runtime.PodLogsDir,
		Volumes:        vols.HostPath,
		Events: func(pod *corev1.Pod, eventType, reason, message string) {
			if *a == nil || (*a).Pods() == nil {
				return
			}
			(*a).Pods().RecordEvent(context.Background(), pod, eventType, reason, message)
			if reason == "Pulled" {
				// A new image: status.images is read again at once.
				images.invalidate()
				(*a).KickStatus()
			}
		},
		Logger: log,
	}
	if res != nil {
		cfg.Resources = res.manager.ContainerResources
	}
	rt, err := cri.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--container-runtime-endpoint %s: %w", s.Runtime.ContainerRuntimeEndpoint, err)
	}
	p := &criParts{rt: rt, probes: criProbes{rt}}
	full, err := rt.Version(ctx)
	if err != nil {
		rt.Close()
		return nil, err
	}
	p.name, p.version, _ = strings.Cut(full, "://")
	srv, err := streaming.New(streaming.Config{StreamIdleTimeout: s.Runtime.StreamingConnectionIdleTimeout, Logger: log})
	if err != nil {
		rt.Close()
		return nil, err
	}
	p.streams = &agentserver.Streams{
		Server: srv,
		Executor: streaming.RemoteExecutor{
			ExecURL: func(ctx context.Context, t streaming.Target, cmd []string, st streaming.Streams) (*url.URL, error) {
				return rt.ExecURL(ctx, t.UID, t.Container, cmd, st.TTY, st.Stdin != nil, st.Stdout != nil, st.Stderr != nil)
			},
			AttachURL: func(ctx context.Context, t streaming.Target, st streaming.Streams) (*url.URL, error) {
				return rt.AttachURL(ctx, t.UID, t.Container, st.TTY, st.Stdin != nil, st.Stdout != nil, st.Stderr != nil)
			},
		},
		PortForwarder: criPortForwarder{rt},
	}
	gateway := s.Runtime.CNIIsGateway
	if p.network, err = cni.New(cni.Config{
		Dir: s.Runtime.CNIConfDir,
		// host-local's allocations stay with the agent's state, not in
		// the machine-wide /var/lib/cni/networks.
		Network: cni.Network{Bridge: s.Runtime.CNIBridge, IsGateway: &gateway, IPAMDataDir: filepath.Join(s.RootDir, "cni", "networks")},
		Logger:  log,
	}); err != nil {
		rt.Close()
		return nil, err
	}
	images.read = rt.Images
	p.images = images
	log.Info("container runtime", "endpoint", s.Runtime.ContainerRuntimeEndpoint, "version", full, "cniConfDir", s.Runtime.CNIConfDir)
	return p, nil
}

// runtimeStatus is what keeps the node from running pods: the pod network
// until the CNI config for the node's pod CIDR is written.
func (p *criParts) runtimeStatus() []error {
	if p.network.Ready() {
		return nil
	}
	return []error{errors.New("container runtime network not ready: NetworkReady=false reason:" + cni.ReasonNotReady + " message:" + cni.MessageNotReady)}
}

// syncNetwork writes the CNI config once the Node has its pod CIDR, and
// again when it changes, as kubenet did; kick says the node status should
// be posted.
func (p *criParts) syncNetwork(node *corev1.Node, log *slog.Logger, kick func()) {
	changed, err := p.network.Sync(node)
	switch {
	case err != nil:
		log.Warn("writing the pod network's CNI config failed", "err", err)
	case changed:
		log.Info("wrote the pod network's CNI config", "file", p.network.Path(), "podCIDRs", node.Spec.PodCIDRs)
		kick()
	}
}

// criProbes runs exec probes with the CRI's ExecSync: stdout then stderr
// is the output.
type criProbes struct{ rt *cri.Runtime }

func (e criProbes) ExecSync(ctx context.Context, pod *corev1.Pod, container, _ string, cmd []string, timeout time.Duration) ([]byte, int, error) {
	stdout, stderr, code, err := e.rt.ExecSync(ctx, pod.UID, container, cmd, timeout)
	if err != nil && (errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "DeadlineExceeded")) {
		return append(stdout, stderr...), 0, fmt.Errorf("%w: %v", prober.ErrExecTimedOut, err)
	}
	return append(stdout, stderr...), code, err
}

// criPortForwarder forwards through the CRI runtime's streaming server,
// asking it for a URL for each forwarded connection.
type criPortForwarder struct{ rt *cri.Runtime }

func (f criPortForwarder) PortForward(ctx context.Context, t streaming.Target, port int32, stream io.ReadWriteCloser) error {
	remote := streaming.RemotePortForwarder{URL: func(ctx context.Context, t streaming.Target) (*url.URL, error) {
		return f.rt.PortForwardURL(ctx, t.UID, port)
	}}
	return remote.PortForward(ctx, t, port, stream)
}

// imageCache holds the node's images, read from the CRI at most every
// imagesRefresh.
type imageCache struct {
	read  func(context.Context) ([]corev1.ContainerImage, error)
	clock clock.PassiveClock
	log   *slog.Logger

	mu     sync.Mutex
	at     time.Time
	images []corev1.ContainerImage
}

// invalidate makes the next get read the list again.
func (c *imageCache) invalidate() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

// get is the cached list, read again when it is older than imagesRefresh
// or refresh is set.
func (c *imageCache) get(refresh bool) []corev1.ContainerImage {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if !refresh && !c.at.IsZero() && now.Sub(c.at) < imagesRefresh {
		return c.images
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	images, err := c.read(ctx)
	if err != nil {
		c.log.Warn("listing the runtime's images failed; status.images keeps the last list", "err", err)
		return c.images
	}
	c.at, c.images = now, images
	return images
}
