package cri

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"knode/internal/agent/runtime"
)

// Defaults of Config's zero fields.
const (
	DefaultSyncPeriod     = time.Second
	DefaultRequestTimeout = 2 * time.Minute
)

// Upstream's image pull back-off: 10 s, doubling, capped at 5 min.
const (
	ImageBackoffInitial = 10 * time.Second
	ImageBackoffMax     = 300 * time.Second
)

// Config builds a Runtime.
type Config struct {
	// Endpoint is the CRI runtime service, "unix:///path/to/socket" (for
	// example unix:///run/containerd/containerd.sock). Required.
	Endpoint string
	// ImageEndpoint is the CRI image service; "" means Endpoint.
	ImageEndpoint string
	// Clock times restarts, back-offs, kill deadlines and the status
	// polls; nil means the real clock. Containers run and exit in real
	// time whatever the clock, and the exit times New reads back from the
	// runtime are real: outside tests it must be the real clock.
	Clock clock.WithTicker
	// SyncPeriod is how often every pod's containers are polled for exits
	// and due restarts are started; 0 means DefaultSyncPeriod.
	SyncPeriod time.Duration
	// RequestTimeout bounds each CRI call but image pulls (twice it for
	// RunPodSandbox), as the kubelet's runtimeRequestTimeout; 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Backoff is the container restart back-off; zero fields mean
	// upstream's.
	Backoff runtime.BackoffConfig
	// PodLogsDir is the kubelet's /var/log/pods: each pod's containers log
	// to <PodLogsDir>/<namespace>_<name>_<uid>/<container>/<n>.log.
	// Required, absolute.
	PodLogsDir string
	// Resources decides a container's resources each time it starts and
	// in UpdateResources; the pod's sandbox takes its cgroup parent from
	// the decision for the pod's first container. nil means no decisions:
	// no cgroup parent, no limits (the runtime's defaults) and no device
	// plugin variables, mounts or devices. Its error is the container's
	// CreateContainerConfigError. It is called without the Runtime's lock.
	Resources runtime.ResourceDecider
	// Volumes returns the host path that backs the pod's volume name, for
	// the containers' volumeMounts (bind mounts). nil means volume mounts
	// are ignored; its error is the container's CreateContainerConfigError.
	Volumes func(pod *corev1.Pod, volume string) (string, error)
	// PullCredentials returns the credentials to pull image for pod with,
	// tried in order until one works (Credentials builds them from the
	// pod's imagePullSecrets); none means an anonymous pull. nil means
	// anonymous pulls only. Its error fails the pull (ErrImagePull).
	PullCredentials func(ctx context.Context, pod *corev1.Pod, image string) ([]*runtimeapi.AuthConfig, error)
	// Events receives the pods' container events, with upstream's types,
	// reasons and messages (Pulling, Pulled, Failed, BackOff, Created,
	// Started, Killing, ...). nil means none. It is called without the
	// Runtime's lock and must not block for long.
	Events func(pod *corev1.Pod, eventtype, reason, message string)
	// RuntimeHandler is the CRI runtime handler sandboxes run with; ""
	// means the runtime's default.
	RuntimeHandler string
	Logger         *slog.Logger
}

// validate checks c and fills its defaults.
func (c *Config) validate() error {
	var errs field.ErrorList
	root := field.NewPath("Config")
	if c.Endpoint == "" {
		errs = append(errs, field.Required(root.Child("Endpoint"), "the CRI runtime's socket, unix:///path"))
	} else if !strings.HasPrefix(c.Endpoint, "unix://") {
		errs = append(errs, field.Invalid(root.Child("Endpoint"), c.Endpoint, "must be a unix:// URL"))
	}
	if c.ImageEndpoint == "" {
		c.ImageEndpoint = c.Endpoint
	} else if !strings.HasPrefix(c.ImageEndpoint, "unix://") {
		errs = append(errs, field.Invalid(root.Child("ImageEndpoint"), c.ImageEndpoint, "must be a unix:// URL"))
	}
	if c.PodLogsDir == "" {
		errs = append(errs, field.Required(root.Child("PodLogsDir"), "the directory pods' logs go to"))
	} else if !filepath.IsAbs(c.PodLogsDir) {
		errs = append(errs, field.Invalid(root.Child("PodLogsDir"), c.PodLogsDir, "must be an absolute path"))
	}
	if c.SyncPeriod < 0 {
		errs = append(errs, field.Invalid(root.Child("SyncPeriod"), c.SyncPeriod.String(), "must not be negative"))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, field.Invalid(root.Child("RequestTimeout"), c.RequestTimeout.String(), "must not be negative"))
	}
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.SyncPeriod == 0 {
		c.SyncPeriod = DefaultSyncPeriod
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Backoff.Initial <= 0 {
		c.Backoff.Initial = runtime.DefaultBackoffInitial
	}
	if c.Backoff.Max <= 0 {
		c.Backoff.Max = runtime.DefaultBackoffMax
	}
	c.Backoff.Max = max(c.Backoff.Max, c.Backoff.Initial)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}
