package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"knode/internal/agent/backoff"
)

// Event reasons, upstream's.
const (
	// ReasonFailedMount: a mount step failed (waiting for the attachment,
	// staging, publishing, or setting up a local volume).
	ReasonFailedMount = "FailedMount"
)

// DefaultCallTimeout bounds each CSI call (upstream's csiTimeout).
const DefaultCallTimeout = 2 * time.Minute

// ErrNotSetUp: HostPath was asked for a volume that Setup has not made
// ready.
var ErrNotSetUp = errors.New("volume is not set up")

// Drivers finds the node service of a CSI driver registered on the node.
// plugins.Watcher is one.
type Drivers interface {
	// Node returns the node client of the driver named name, or an error
	// when no driver of that name is registered.
	Node(name string) (csi.NodeClient, error)
}

// Recorder records an event about a pod. It must not block for long; it
// is called while the manager works on the pod.
type Recorder func(pod *corev1.Pod, eventType, reason, message string)

// Config builds a Manager.
type Config struct {
	// Client acts as the node: it reads the PVCs and PVs of the node's
	// pods, CSIDrivers and VolumeAttachments. Required.
	Client kubernetes.Interface
	// NodeName names VolumeAttachments. Required.
	NodeName string
	// RootDir is the agent's root directory. Required.
	RootDir string
	// Drivers reaches the registered CSI drivers; nil means none is (a
	// CSI volume then fails to mount).
	Drivers Drivers
	// Clock times the retry back-off; nil means the real clock.
	Clock clock.PassiveClock
	// Recorder records FailedMount events; nil records none.
	Recorder Recorder
	// InUseChanged, when set, is called after InUse changed, so that the
	// node status poster can post soon (the agent's KickStatus). It must
	// not block; it is called with no lock of the manager held, from
	// Setup, Teardown and Cleanup.
	InUseChanged func()
	// CallTimeout bounds each CSI call; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("volumes: Config.Client is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("volumes: Config.NodeName is required"))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("volumes: Config.RootDir is required"))
	}
	if c.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("volumes: CallTimeout %v: must not be negative", c.CallTimeout))
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Recorder == nil {
		c.Recorder = func(*corev1.Pod, string, string, string) {}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Manager sets up and tears down the volumes of the pods on one node. Its
// methods are safe for concurrent use; Setup, Teardown and Cleanup run one
// at a time, while InUse, ReportedInUse and HostPath never wait for them.
type Manager struct {
	cfg Config
	log *slog.Logger

	// ops serialises Setup, Teardown and Cleanup; pods and devices belong
	// to it.
	ops  sync.Mutex
	pods map[types.UID]*podState
	// devices are the CSI volumes staged on the node (or possibly staged,
	// after a failure or a restart), by unique name.
	devices map[corev1.UniqueVolumeName]*device

	// mu guards the fields below, which the node status poster reads.
	mu sync.Mutex
	// inUse is what InUse reports: computed from pods and devices after
	// every change.
	inUse []corev1.UniqueVolumeName
	// reported is what the node last posted in volumesInUse.
	reported map[corev1.UniqueVolumeName]bool
	// paths are the host paths of ready volumes, by pod and volume name.
	paths map[types.UID]map[string]string
}

// kind is a volume's type, as the manager handles it.
type kind int

const (
	kindEmptyDir kind = iota
	kindHostPath
	kindCSI
	// kindStray is a directory under a pod's volumes found after a restart
	// with nothing to say what it was; Teardown removes it.
	kindStray
)

// podState is what the manager holds for one pod.
type podState struct {
	uid types.UID
	// pod is the latest copy Setup saw; nil for a pod restored from disk
	// and not set up since.
	pod *corev1.Pod
	// vols are the pod's volumes by key: "empty-dir/<name>",
	// "host-path/<name>", "csi/<pv>", or "stray/<plugin dir>/<dir>".
	vols map[string]*podVolume
	// devices are the CSI volumes this pod used; once the pod has no
	// volumes left, Teardown is done when none of them is staged and
	// unused.
	devices map[corev1.UniqueVolumeName]bool
}

// podVolume is one volume of one pod.
type podVolume struct {
	kind kind
	// names are the pod's names for the volume (two of a pod's volumes
	// may name one claim); none when restored and not set up since (a CSI
	// volume's directory is named after its PV).
	names []string
	// path is the host path that backs the volume.
	path string
	// ready: Setup finished it (for CSI: published).
	ready bool

	// CSI: the PV, the driver and handle, and the unique name.
	pv     string
	driver string
	handle string
	unique corev1.UniqueVolumeName
	// recorded: the publish target's directory and vol_data.json exist,
	// so Teardown must unpublish.
	recorded bool

	// retry is the back-off after a failed mount step.
	retry retry
}

// device is a CSI volume staged (or possibly staged) on the node.
type device struct {
	driver, handle string
	unique         corev1.UniqueVolumeName
	stagingPath    string
	// staged: NodeStageVolume succeeded (or the driver needs none).
	staged bool
}

// known adds name to the volume's names.
func (v *podVolume) known(name string) {
	if !slices.Contains(v.names, name) {
		v.names = append(v.names, name)
	}
}

// retry spaces the attempts of a failing step: after a failure nothing is
// tried before notBefore, and Setup returns err meanwhile.
type retry struct {
	wait      backoff.Exponential
	notBefore time.Time
	err       error
}

func newRetry() retry {
	return retry{wait: backoff.Exponential{Initial: 500 * time.Millisecond, Max: 2*time.Minute + 2*time.Second}}
}

// waiting reports whether now is still inside the back-off.
func (r *retry) waiting(now time.Time) bool { return r.err != nil && now.Before(r.notBefore) }

func (r *retry) failed(now time.Time, err error) {
	r.err = err
	r.notBefore = now.Add(r.wait.Next())
}

func (r *retry) succeeded() {
	r.err = nil
	r.wait.Reset()
}

// New checks cfg, reads back what an earlier agent left under RootDir, and
// builds a Manager.
func New(cfg Config) (*Manager, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "volumes"),
		pods:     map[types.UID]*podState{},
		devices:  map[corev1.UniqueVolumeName]*device{},
		reported: map[corev1.UniqueVolumeName]bool{},
		paths:    map[types.UID]map[string]string{},
	}
	if err := m.restore(); err != nil {
		m.log.Warn("reading back the volumes of an earlier agent failed in part", "err", err)
	}
	m.refresh()
	return m, nil
}

// InUse lists the CSI volumes the node uses or is about to mount, sorted,
// for status.volumesInUse. The slice is the caller's.
func (m *Manager) InUse() []corev1.UniqueVolumeName {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.inUse)
}

// ReportedInUse tells the manager what the Node's status.volumesInUse
// holds: call it after every status pass with the list as posted, or as
// read when the pass posted nothing (as the kubelet does). A CSI volume is
// mounted only once it was reported.
func (m *Manager) ReportedInUse(names []corev1.UniqueVolumeName) {
	reported := make(map[corev1.UniqueVolumeName]bool, len(names))
	for _, n := range names {
		reported[n] = true
	}
	m.mu.Lock()
	m.reported = reported
	m.mu.Unlock()
}

func (m *Manager) isReported(name corev1.UniqueVolumeName) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reported[name]
}

// HostPath returns the host path that backs the pod's volume named name,
// for the runtime to bind-mount at a container's mountPath: the emptyDir
// directory, the hostPath itself, or the CSI publish target. It is an
// error (wrapping ErrNotSetUp) before Setup made the volume ready.
func (m *Manager) HostPath(pod *corev1.Pod, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.paths[pod.UID][name]; ok {
		return p, nil
	}
	return "", fmt.Errorf("volume %q of pod %s/%s: %w", name, pod.Namespace, pod.Name, ErrNotSetUp)
}

// refresh recomputes what InUse and HostPath report from the pods and
// devices. Called with ops held (or before the Manager is shared).
func (m *Manager) refresh() {
	inUse := map[corev1.UniqueVolumeName]bool{}
	paths := map[types.UID]map[string]string{}
	for uid, ps := range m.pods {
		for _, v := range ps.vols {
			if v.kind == kindCSI {
				inUse[v.unique] = true
			}
			for _, name := range v.names {
				if !v.ready {
					break
				}
				if paths[uid] == nil {
					paths[uid] = map[string]string{}
				}
				paths[uid][name] = v.path
			}
		}
	}
	for name := range m.devices {
		inUse[name] = true
	}
	sorted := slices.Sorted(maps.Keys(inUse))
	m.mu.Lock()
	changed := !slices.Equal(m.inUse, sorted)
	m.inUse = sorted
	m.paths = paths
	m.mu.Unlock()
	if changed && m.cfg.InUseChanged != nil {
		m.cfg.InUseChanged()
	}
}

// callContext bounds one CSI call.
func (m *Manager) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.CallTimeout)
}

// Pods lists the pods the manager holds volumes for (set up here, or found
// on disk after a restart), in no set order.
func (m *Manager) Pods() []types.UID {
	m.ops.Lock()
	defer m.ops.Unlock()
	return slices.Collect(maps.Keys(m.pods))
}
