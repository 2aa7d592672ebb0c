package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"knode/internal/agent/devicemanager/checkpoint"
	"knode/internal/agent/topology"
	"knode/internal/atomicfile"
)

// SocketName is the registration socket's name in the socket directory.
const SocketName = "kubelet.sock"

// DirName is the socket directory's name under the agent's root directory.
const DirName = "device-plugins"

// Defaults for Config.
const (
	// DefaultGracePeriod is how long a resource whose plugin went away
	// stays in Capacity (upstream's endpointStopGracePeriod).
	DefaultGracePeriod = 5 * time.Minute
	// DefaultCallTimeout bounds each gRPC call to a plugin.
	DefaultCallTimeout = 30 * time.Second
)

// Upstream's error texts.
const (
	errFailedToDialDevicePlugin = "failed to dial device plugin:"
	errUnsupportedVersion       = "requested API version %q is not supported by kubelet. Supported version is %q"
	errInvalidResourceName      = "the ResourceName %q is invalid"
	errListAndWatch             = "listAndWatch ended unexpectedly for device plugin %s with error %v"
)

// Config builds a Manager.
type Config struct {
	// RootDir is the agent's root directory; SocketDir defaults to
	// <RootDir>/device-plugins. One of the two is required.
	RootDir string
	// SocketDir holds kubelet.sock and the plugins' sockets. Absolute.
	SocketDir string
	// CheckpointDir holds kubelet_internal_checkpoint; "" means SocketDir.
	CheckpointDir string
	// NUMANodes are the machine's NUMA node IDs, the nodes hints are built
	// from; nil means the nodes the devices report.
	NUMANodes []int
	// Affinity returns the topology manager's chosen hint for a container
	// (topology.Manager.Affinity); nil means no hint.
	Affinity func(podUID, container string) topology.Hint
	// GracePeriod is how long a resource whose plugin went away stays in
	// Capacity; zero means DefaultGracePeriod.
	GracePeriod time.Duration
	// CallTimeout bounds each gRPC call to a plugin; zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Clock stamps when plugins go away; nil means the real clock.
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.SocketDir == "" && c.RootDir != "" {
		c.SocketDir = filepath.Join(c.RootDir, DirName)
	}
	if c.SocketDir == "" || !filepath.IsAbs(c.SocketDir) {
		errs = append(errs, fmt.Errorf("devicemanager: Config.SocketDir (or RootDir) must be an absolute path, got %q", c.SocketDir))
	}
	if c.CheckpointDir == "" {
		c.CheckpointDir = c.SocketDir
	}
	if c.GracePeriod < 0 || c.CallTimeout < 0 {
		errs = append(errs, errors.New("devicemanager: GracePeriod and CallTimeout must not be negative"))
	}
	if c.GracePeriod == 0 {
		c.GracePeriod = DefaultGracePeriod
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// endpoint is one registered plugin.
type endpoint struct {
	resource string
	conn     *grpc.ClientConn // nil for a resource restored from the checkpoint
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	cancel   context.CancelFunc
	// stopped is when the plugin went away; zero while it runs.
	stopped time.Time
}

// allocation is one resource's devices of one container.
type allocation struct {
	devices checkpoint.DevicesPerNUMA
	resp    *pluginapi.ContainerAllocateResponse
}

// Manager is the device manager. Use New, then Start.
type Manager struct {
	pluginapi.UnimplementedRegistrationServer

	cfg Config
	log *slog.Logger

	// allocating serialises Allocate, so chosen devices are not handed out
	// twice while the plugin's RPCs run without mu.
	allocating sync.Mutex

	mu        sync.Mutex
	ctx       context.Context
	cancel    context.CancelFunc
	server    *grpc.Server
	wg        sync.WaitGroup
	endpoints map[string]*endpoint
	// devices are each resource's devices by ID, as the plugin last listed
	// them (marked unhealthy once the plugin went away).
	devices map[string]map[string]*pluginapi.Device
	// pods holds the allocations: pod UID, container, resource.
	pods map[string]map[string]map[string]*allocation
	// changed is closed and replaced at every change of devices.
	changed chan struct{}
}

// New checks cfg and builds a Manager.
func New(cfg Config) (*Manager, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Manager{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "devicemanager"),
		endpoints: map[string]*endpoint{},
		devices:   map[string]map[string]*pluginapi.Device{},
		pods:      map[string]map[string]map[string]*allocation{},
		changed:   make(chan struct{}),
	}, nil
}

// SocketPath is the registration socket plugins call.
func (m *Manager) SocketPath() string { return filepath.Join(m.cfg.SocketDir, SocketName) }

// CheckpointPath is the checkpoint file.
func (m *Manager) CheckpointPath() string {
	return filepath.Join(m.cfg.CheckpointDir, checkpoint.FileName)
}

// Start reads the checkpoint and serves the Registration service on
// SocketPath until ctx ends or Stop is called. It returns once the socket
// listens. A corrupt checkpoint is logged and ignored, as upstream does.
func (m *Manager) Start(ctx context.Context) error {
	if err := os.MkdirAll(m.cfg.SocketDir, 0o750); err != nil {
		return fmt.Errorf("creating the device plugin socket directory: %w", err)
	}
	if err := m.readCheckpoint(); err != nil {
		m.log.Error("Continue after failing to read checkpoint file. Device allocation info may NOT be up-to-date", "err", err)
	}
	if err := os.Remove(m.SocketPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove existing socket: %w", err)
	}
	ln, err := net.Listen("unix", m.SocketPath())
	if err != nil {
		return fmt.Errorf("failed to listen to socket while starting device plugin registry: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, m)
	m.mu.Lock()
	m.ctx, m.cancel = context.WithCancel(ctx)
	m.server = srv
	runCtx := m.ctx
	m.mu.Unlock()
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		if err := srv.Serve(ln); err != nil {
			m.log.Error("device plugin registration server stopped", "err", err)
		}
	}()
	go func() {
		defer m.wg.Done()
		<-runCtx.Done()
		srv.Stop()
	}()
	m.log.Info("device plugin registration server started", "socket", m.SocketPath())
	return nil
}

// Stop stops the registration server and the plugins' streams and waits
// for them. The checkpoint stays.
func (m *Manager) Stop() {
	m.mu.Lock()
	cancel := m.cancel
	if cancel != nil {
		// Cancelled under mu, so connect adds no stream after this.
		cancel()
	}
	m.mu.Unlock()
	if cancel == nil {
		return
	}
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.endpoints {
		if e.conn != nil {
			_ = e.conn.Close()
		}
	}
}

// Changed returns a channel that is closed at the next change of the
// device lists (a ListAndWatch update, a plugin going away). Take it before
// reading the state that it should wake a wait for.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// notifyLocked wakes the waiters of Changed. Call with mu held.
func (m *Manager) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Register is the Registration service: it validates r as upstream does,
// dials the plugin and opens its ListAndWatch stream before answering.
func (m *Manager) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m.log.Info("Got registration request from device plugin with resource", "resourceName", r.ResourceName)
	if err := validateRegistration(r); err != nil {
		m.log.Info("Bad registration request from device plugin", "resourceName", r.ResourceName, "err", err)
		return &pluginapi.Empty{}, err
	}
	if err := m.connect(r.ResourceName, filepath.Join(m.cfg.SocketDir, r.Endpoint)); err != nil {
		m.log.Info("Error connecting to device plugin client", "resourceName", r.ResourceName, "err", err)
		return &pluginapi.Empty{}, err
	}
	return &pluginapi.Empty{}, nil
}

// validateRegistration is upstream's check of a RegisterRequest: a
// supported version and an extended resource name.
func validateRegistration(r *pluginapi.RegisterRequest) error {
	if !slices.Contains(pluginapi.SupportedVersions[:], r.Version) {
		return fmt.Errorf(errUnsupportedVersion, r.Version, pluginapi.SupportedVersions)
	}
	if !IsExtendedResourceName(corev1.ResourceName(r.ResourceName)) {
		return fmt.Errorf(errInvalidResourceName, r.ResourceName)
	}
	return nil
}

// IsExtendedResourceName is upstream's v1helper.IsExtendedResourceName: a
// fully-qualified name outside the kubernetes.io domain, not starting with
// "requests.", that is valid as a quota resource name ("requests." +
// name is a qualified name).
func IsExtendedResourceName(name corev1.ResourceName) bool {
	s := string(name)
	if isNativeResource(s) || len(s) >= len(corev1.DefaultResourceRequestsPrefix) && s[:len(corev1.DefaultResourceRequestsPrefix)] == corev1.DefaultResourceRequestsPrefix {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

// isNativeResource: no domain, or a kubernetes.io domain.
func isNativeResource(s string) bool {
	i := -1
	for j := range len(s) {
		if s[j] == '/' {
			i = j
			break
		}
	}
	if i < 0 {
		return true
	}
	domain := s[:i]
	return domain == "kubernetes.io" || len(domain) > len(".kubernetes.io") && domain[len(domain)-len(".kubernetes.io"):] == ".kubernetes.io"
}

// connect dials the plugin, asks for its options (upstream uses these, not
// the RegisterRequest's), replaces the resource's endpoint and runs its
// ListAndWatch stream until it ends.
func (m *Manager) connect(resource, socket string) error {
	m.mu.Lock()
	parent := m.ctx
	m.mu.Unlock()
	if parent == nil || parent.Err() != nil {
		return errors.New("device manager is not running")
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf(errFailedToDialDevicePlugin+" %v", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	callCtx, cancelCall := context.WithTimeout(parent, m.cfg.CallTimeout)
	opts, err := client.GetDevicePluginOptions(callCtx, &pluginapi.Empty{})
	cancelCall()
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("failed to get device plugin options: %v", err)
	}
	ctx, cancel := context.WithCancel(parent)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		_ = conn.Close()
		return fmt.Errorf(errListAndWatch, resource, err)
	}
	e := &endpoint{resource: resource, conn: conn, client: client, opts: opts, cancel: cancel}
	m.mu.Lock()
	if parent.Err() != nil {
		m.mu.Unlock()
		cancel()
		_ = conn.Close()
		return errors.New("device manager is not running")
	}
	old := m.endpoints[resource]
	m.endpoints[resource] = e
	if _, ok := m.devices[resource]; !ok {
		m.devices[resource] = map[string]*pluginapi.Device{}
	}
	m.wg.Add(1)
	m.mu.Unlock()
	if old != nil && old.cancel != nil {
		old.cancel()
	}
	m.log.Info("Device plugin connected", "resourceName", resource, "socket", socket)
	go m.watch(e, stream)
	return nil
}

// watch keeps e's devices from its stream until the stream ends; then the
// plugin counts as gone.
func (m *Manager) watch(e *endpoint, stream grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse]) {
	defer m.wg.Done()
	for {
		resp, err := stream.Recv()
		if err != nil {
			m.log.Info("listAndWatch ended for device plugin", "resourceName", e.resource, "err", err)
			break
		}
		m.mu.Lock()
		if m.endpoints[e.resource] == e {
			m.updateDevicesLocked(e.resource, resp.Devices)
		}
		m.mu.Unlock()
	}
	e.cancel()
	_ = e.conn.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.endpoints[e.resource] != e {
		return // replaced by a new registration
	}
	e.stopped = m.cfg.Clock.Now()
	for id, d := range m.devices[e.resource] {
		if d.Health != pluginapi.Unhealthy {
			d = proto.CloneOf(d)
			d.Health = pluginapi.Unhealthy
			m.devices[e.resource][id] = d
		}
	}
	m.writeCheckpointLocked()
	m.notifyLocked()
}

// updateDevicesLocked replaces resource's device list. Call with mu held.
func (m *Manager) updateDevicesLocked(resource string, devs []*pluginapi.Device) {
	list := make(map[string]*pluginapi.Device, len(devs))
	for _, d := range devs {
		if d != nil {
			list[d.ID] = d
		}
	}
	m.devices[resource] = list
	m.writeCheckpointLocked()
	m.notifyLocked()
}

// Capacity returns each resource's device count (capacity) and healthy
// device count (allocatable), and the resources removed since the last call
// because their plugins have been gone for GracePeriod. The maps are the
// caller's.
func (m *Manager) Capacity() (capacity, allocatable map[corev1.ResourceName]int64, removed []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = map[corev1.ResourceName]int64{}, map[corev1.ResourceName]int64{}
	now := m.cfg.Clock.Now()
	for _, resource := range slices.Sorted(maps.Keys(m.devices)) {
		e := m.endpoints[resource]
		if e == nil || !e.stopped.IsZero() && now.Sub(e.stopped) > m.cfg.GracePeriod {
			delete(m.devices, resource)
			delete(m.endpoints, resource)
			removed = append(removed, resource)
			continue
		}
		var healthy int64
		for _, d := range m.devices[resource] {
			if d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		capacity[corev1.ResourceName(resource)] = int64(len(m.devices[resource]))
		allocatable[corev1.ResourceName(resource)] = healthy
	}
	if len(removed) > 0 {
		m.writeCheckpointLocked()
	}
	return capacity, allocatable, removed
}

// Devices returns a copy of resource's devices, sorted by ID.
func (m *Manager) Devices(resource string) []*pluginapi.Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*pluginapi.Device
	for _, id := range slices.Sorted(maps.Keys(m.devices[resource])) {
		out = append(out, proto.CloneOf(m.devices[resource][id]))
	}
	return out
}

// readCheckpoint restores the allocations and registers the checkpoint's
// resources with no devices and a plugin gone since now, as upstream does.
// A missing file is written.
func (m *Manager) readCheckpoint() error {
	b, err := os.ReadFile(m.CheckpointPath())
	m.mu.Lock()
	defer m.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		m.writeCheckpointLocked()
		return nil
	}
	if err != nil {
		return err
	}
	entries, registered, err := checkpoint.Decode(b)
	if err != nil {
		return err
	}
	for _, en := range entries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(en.AllocResp, resp); err != nil {
			m.log.Error("Can't unmarshal allocResp", "podUID", en.PodUID, "containerName", en.ContainerName, "resourceName", en.ResourceName, "err", err)
			continue
		}
		m.setAllocationLocked(en.PodUID, en.ContainerName, en.ResourceName, &allocation{devices: en.DeviceIDs, resp: resp})
	}
	now := m.cfg.Clock.Now()
	for resource := range registered {
		m.devices[resource] = map[string]*pluginapi.Device{}
		m.endpoints[resource] = &endpoint{resource: resource, stopped: now}
	}
	return nil
}

// writeCheckpointLocked writes the allocations and the healthy devices.
// Failures are logged: the next change writes again. Call with mu held.
func (m *Manager) writeCheckpointLocked() {
	var entries []checkpoint.PodDevicesEntry
	for _, uid := range slices.Sorted(maps.Keys(m.pods)) {
		for _, c := range slices.Sorted(maps.Keys(m.pods[uid])) {
			for _, resource := range slices.Sorted(maps.Keys(m.pods[uid][c])) {
				a := m.pods[uid][c][resource]
				resp, err := proto.Marshal(a.resp)
				if err != nil {
					m.log.Error("Can't marshal allocResp", "podUID", uid, "containerName", c, "resourceName", resource, "err", err)
					continue
				}
				entries = append(entries, checkpoint.PodDevicesEntry{PodUID: uid, ContainerName: c, ResourceName: resource, DeviceIDs: a.devices, AllocResp: resp})
			}
		}
	}
	registered := map[string][]string{}
	for resource, devs := range m.devices {
		ids := []string{}
		for id, d := range devs {
			if d.Health == pluginapi.Healthy {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		registered[resource] = ids
	}
	b, err := checkpoint.Encode(entries, registered)
	if err == nil {
		err = atomicfile.Write(m.CheckpointPath(), b, 0o644)
	}
	if err != nil {
		m.log.Error("writing the device manager checkpoint failed", "err", err)
	}
}
