// Package plugins registers the CSI drivers that run on the agent's node,
// in the role of the kubelet's plugin manager and CSI registration handler.
//
// A driver (or its node-driver-registrar) puts a unix socket under
// <root-dir>/plugins_registry that serves the k8s.io/kubelet
// pluginregistration/v1 API. Each Sync lists that directory; for a new
// socket it:
//  1. calls GetInfo, and accepts type "CSIPlugin" with a supported version
//     1.x (a socket of another type is left alone);
//  2. dials the endpoint GetInfo names (the socket itself when empty) and
//     calls CSI NodeGetInfo;
//  3. writes the driver's node ID into the Node's
//     csi.volume.kubernetes.io/nodeid annotation (a JSON map, merged with
//     the other drivers' entries) and its topology segments into the Node's
//     labels, then creates or updates the CSINode named after the node
//     (owned by the Node) with the driver's entry: node ID, topology keys,
//     and allocatable.count when max_volumes_per_node > 0;
//  4. answers NotifyRegistrationStatus: registered, or not with the error.
//
// A socket that fails is tried again on later passes, after upstream's
// operation back-off (500 ms doubling to 2 min 2 s) on the injected clock.
// When a registered socket disappears, the driver leaves the CSINode and
// the annotation (its topology labels stay, as upstream's do). A socket
// that is re-created registers again.
//
// Sync also makes sure the CSINode exists, with no drivers, as the kubelet
// does at start. Run calls Sync every PollPeriod; upstream watches the
// directory with inotify instead.
//
// The Watcher is the volume manager's way to reach a driver: Node returns
// the node service of a registered driver. It does not start drivers, and
// it does not remove entries of drivers whose sockets vanished while no
// agent ran.
package plugins

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"

	"knode/internal/agent/backoff"
	"knode/internal/agent/statusreport"
	"knode/internal/volume"
)

// RegistryDir is the directory under the root dir that holds registration
// sockets.
const RegistryDir = "plugins_registry"

// Defaults for Config.
const (
	DefaultPollPeriod  = time.Second
	DefaultCallTimeout = 30 * time.Second
)

// ErrNotRegistered: no driver of that name is registered on the node.
var ErrNotRegistered = errors.New("not found in the list of registered CSI drivers")

// Config builds a Watcher.
type Config struct {
	// Client acts as the node. Required.
	Client kubernetes.Interface
	// NodeName names the Node and the CSINode. Required.
	NodeName string
	// RootDir is the agent's root directory; sockets are looked for under
	// <RootDir>/plugins_registry. Required.
	RootDir string
	// PollPeriod is how often Run lists the directory; zero means
	// DefaultPollPeriod.
	PollPeriod time.Duration
	// CallTimeout bounds each gRPC call to a plugin; zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Clock drives Run and the retry back-off; nil means the real clock.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("plugins: Config.Client is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("plugins: Config.NodeName is required"))
	}
	if c.RootDir == "" {
		errs = append(errs, errors.New("plugins: Config.RootDir is required"))
	}
	if c.PollPeriod < 0 || c.CallTimeout < 0 {
		errs = append(errs, errors.New("plugins: PollPeriod and CallTimeout must not be negative"))
	}
	if c.PollPeriod == 0 {
		c.PollPeriod = DefaultPollPeriod
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

// Driver is a registered CSI driver.
type Driver struct {
	Name string
	// Endpoint is the driver's CSI socket.
	Endpoint string
	// Version is the CSI version spoken with it.
	Version *utilversion.Version
	// Socket is the registration socket it came from.
	Socket string
	conn   *grpc.ClientConn
	node   csi.NodeClient
}

// Watcher registers the drivers whose sockets appear in the registry
// directory. Use New.
type Watcher struct {
	cfg Config
	dir string
	log *slog.Logger

	// syncing serialises passes; the fields below it belong to the pass.
	syncing sync.Mutex
	sockets map[string]*socketState
	// uninstall are drivers whose sockets went away and whose entries
	// still have to leave the Node and the CSINode.
	uninstall map[string]bool
	// csiNode is true once the CSINode was seen to exist.
	csiNode bool

	mu      sync.Mutex
	drivers map[string]*Driver
}

// socketState is what the Watcher knows of one socket.
type socketState struct {
	id fileID
	// driver is the name registered from it; "" while not registered.
	driver string
	// After a failure the socket is tried again from notBefore on.
	wait      backoff.Exponential
	notBefore time.Time
	lastErr   error
}

// fileID tells a re-created socket from the old one.
type fileID struct {
	ino     uint64
	modTime time.Time
}

// New checks cfg and builds a Watcher.
func New(cfg Config) (*Watcher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Watcher{
		cfg:       cfg,
		dir:       filepath.Join(cfg.RootDir, RegistryDir),
		log:       cfg.Logger.With("component", "plugins"),
		sockets:   map[string]*socketState{},
		uninstall: map[string]bool{},
		drivers:   map[string]*Driver{},
	}, nil
}

// Dir is the directory the Watcher looks for sockets in.
func (w *Watcher) Dir() string { return w.dir }

// Node returns the node service of the registered driver name. The error
// wraps ErrNotRegistered when there is none.
func (w *Watcher) Node(name string) (csi.NodeClient, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.drivers[name]
	if !ok {
		return nil, fmt.Errorf("driver name %s %w", name, ErrNotRegistered)
	}
	return d.node, nil
}

// Drivers returns the registered drivers, by name. The values are the
// Watcher's: read-only.
func (w *Watcher) Drivers() map[string]*Driver {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.drivers)
}

// Err returns the last registration error of the socket at path, nil when
// it registered or was never tried.
func (w *Watcher) Err(path string) error {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	if s, ok := w.sockets[path]; ok {
		return s.lastErr
	}
	return nil
}

// Run syncs every PollPeriod until ctx ends, then closes the connections
// to the drivers.
func (w *Watcher) Run(ctx context.Context) error {
	ticker := w.cfg.Clock.NewTicker(w.cfg.PollPeriod)
	defer ticker.Stop()
	defer w.Close()
	for {
		if err := w.Sync(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("plugin registration pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// Close closes the connections to the registered drivers and forgets them.
func (w *Watcher) Close() {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, d := range w.drivers {
		_ = d.conn.Close()
		delete(w.drivers, name)
	}
	w.sockets = map[string]*socketState{}
}

// Sync makes one pass: it ensures the CSINode, deregisters the drivers
// whose sockets are gone, and registers new sockets (see the package
// comment). Errors of single sockets are joined; later passes retry them.
func (w *Watcher) Sync(ctx context.Context) error {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	var errs []error
	if !w.csiNode {
		if _, err := w.ensureCSINode(ctx); err != nil {
			errs = append(errs, fmt.Errorf("failed to initialize CSINode: %w", err))
		} else {
			w.csiNode = true
		}
	}
	found, err := w.scan()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for path, s := range w.sockets {
		if id, ok := found[path]; ok && id == s.id {
			continue
		}
		w.forget(path, s)
	}
	now := w.cfg.Clock.Now()
	for _, path := range slices.Sorted(maps.Keys(found)) {
		s := w.sockets[path]
		if s == nil {
			s = &socketState{id: found[path], wait: backoff.Exponential{Initial: 500 * time.Millisecond, Max: 2*time.Minute + 2*time.Second}}
			w.sockets[path] = s
		}
		if s.driver != "" || now.Before(s.notBefore) {
			continue
		}
		name, err := w.register(ctx, path)
		if err != nil {
			s.lastErr = err
			s.notBefore = now.Add(s.wait.Next())
			errs = append(errs, err)
			w.log.Warn("plugin registration failed", "socket", path, "err", err)
			continue
		}
		s.driver, s.lastErr = name, nil
		s.wait.Reset()
		delete(w.uninstall, name)
	}
	for _, name := range slices.Sorted(maps.Keys(w.uninstall)) {
		if err := w.uninstallDriver(ctx, name); err != nil {
			errs = append(errs, fmt.Errorf("error uninstalling CSI driver %s: %w", name, err))
			continue
		}
		delete(w.uninstall, name)
		w.log.Info("deregistered CSI driver", "driver", name)
	}
	return errors.Join(errs...)
}

// forget drops a socket that is gone or was re-created; the driver it
// registered is deregistered at once and uninstalled later in the pass
// unless it registers again.
func (w *Watcher) forget(path string, s *socketState) {
	delete(w.sockets, path)
	if s.driver == "" {
		return
	}
	w.mu.Lock()
	d, ok := w.drivers[s.driver]
	if ok && d.Socket == path {
		delete(w.drivers, s.driver)
		_ = d.conn.Close()
	}
	w.mu.Unlock()
	if ok && d.Socket == path {
		w.uninstall[s.driver] = true
	}
}

// scan lists the sockets under the registry directory (walking
// subdirectories, skipping names that start with a dot), creating the
// directory when missing.
func (w *Watcher) scan() (map[string]fileID, error) {
	if err := os.MkdirAll(w.dir, 0o750); err != nil {
		return nil, fmt.Errorf("creating the plugin registry directory: %w", err)
	}
	found := map[string]fileID{}
	err := filepath.WalkDir(w.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if path == w.dir {
				return err
			}
			return nil
		}
		if path != w.dir && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if e.Type()&fs.ModeSocket == 0 {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		id := fileID{modTime: info.ModTime()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			id.ino = st.Ino
		}
		found[path] = id
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", w.dir, err)
	}
	return found, nil
}

// dial connects to a unix socket; endpoint is a path or a unix:// URL.
func dial(endpoint string) (*grpc.ClientConn, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(endpoint, "unix://"), "unix:")
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("endpoint %q: want an absolute unix socket path", endpoint)
	}
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// register registers the plugin behind the socket at path and returns the
// driver's name.
func (w *Watcher) register(ctx context.Context, path string) (string, error) {
	conn, err := dial(path)
	if err != nil {
		return "", fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %w", path, err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	info, err := reg.GetInfo(callCtx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return "", fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %w", path, err)
	}
	if info.Type != registerapi.CSIPlugin {
		return "", fmt.Errorf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, path)
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = path
	}
	notify := func(registered bool, msg string) error {
		callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
		defer cancel()
		_, err := reg.NotifyRegistrationStatus(callCtx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: msg})
		return err
	}
	ver, err := w.validate(info.Name, info.SupportedVersions, path)
	if err != nil {
		err = fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: %w", info.Name, endpoint, err)
		msg := fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err)
		if nerr := notify(false, msg); nerr != nil {
			return "", fmt.Errorf("RegisterPlugin error -- failed to send error at socket %s, err: %w", path, nerr)
		}
		return "", errors.New(msg)
	}
	d, err := w.install(ctx, info.Name, endpoint, ver, path)
	if err != nil {
		msg := fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err)
		if nerr := notify(false, msg); nerr != nil {
			w.log.Warn("notifying a plugin of its failed registration failed", "socket", path, "err", nerr)
		}
		return "", errors.New(msg)
	}
	if err := notify(true, ""); err != nil {
		w.dropDriver(d)
		return "", fmt.Errorf("RegisterPlugin error -- failed to send registration status at socket %s, err: %w", path, err)
	}
	w.log.Info("registered CSI driver", "driver", d.Name, "endpoint", endpoint, "version", ver.String())
	return d.Name, nil
}

// validate checks a driver's name and versions, as upstream's CSI
// registration handler does: a name, a 1.x version, and no driver of the
// same name registered from another socket with an equal or higher one.
func (w *Watcher) validate(name string, versions []string, socket string) (*utilversion.Version, error) {
	if name == "" {
		return nil, errors.New(logPrefix + "driver name is empty")
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("%sValidatePlugin for CSI driver %q failed. Plugin returned an empty list for supported versions", logPrefix, name)
	}
	ver, err := highestVersion(versions)
	if err != nil {
		return nil, fmt.Errorf("%sValidatePlugin for CSI driver %q failed. None of the versions specified %q are supported. err=%v", logPrefix, name, versions, err)
	}
	w.mu.Lock()
	existing, ok := w.drivers[name]
	w.mu.Unlock()
	if ok && existing.Socket != socket && !existing.Version.LessThan(ver) {
		return nil, fmt.Errorf("%sValidatePlugin for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q", logPrefix, name, existing.Version)
	}
	return ver, nil
}

// install dials the driver, asks it for its node info, records it in the
// Node and the CSINode, and adds it to the registered drivers.
func (w *Watcher) install(ctx context.Context, name, endpoint string, ver *utilversion.Version, socket string) (*Driver, error) {
	conn, err := dial(endpoint)
	if err != nil {
		return nil, err
	}
	d := &Driver{Name: name, Endpoint: endpoint, Version: ver, Socket: socket, conn: conn, node: csi.NewNodeClient(conn)}
	callCtx, cancel := context.WithTimeout(ctx, w.cfg.CallTimeout)
	info, err := d.node.NodeGetInfo(callCtx, &csi.NodeGetInfoRequest{})
	cancel()
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	var topology map[string]string
	if info.GetAccessibleTopology() != nil {
		topology = info.GetAccessibleTopology().GetSegments()
	}
	if err := w.installDriver(ctx, name, info.GetNodeId(), info.GetMaxVolumesPerNode(), topology); err != nil {
		_ = conn.Close()
		return nil, err
	}
	w.mu.Lock()
	if old, ok := w.drivers[name]; ok && old.conn != conn {
		_ = old.conn.Close()
	}
	w.drivers[name] = d
	w.mu.Unlock()
	return d, nil
}

// dropDriver forgets d if it is still the registered driver of its name.
func (w *Watcher) dropDriver(d *Driver) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.drivers[d.Name] == d {
		delete(w.drivers, d.Name)
	}
	_ = d.conn.Close()
}

// installDriver writes a driver's node info: the annotation and labels of
// the Node, then its entry in the CSINode.
func (w *Watcher) installDriver(ctx context.Context, name, nodeID string, maxVolumes int64, topology map[string]string) error {
	if nodeID == "" {
		return errors.New("error adding CSI driver node info: driverNodeID must not be empty")
	}
	err := w.updateNode(ctx, func(node *corev1.Node) (bool, error) {
		value, idChanged, err := withNodeID(node.Annotations[volume.AnnCSINodeID], name, nodeID)
		if err != nil {
			return false, err
		}
		labels, labelsChanged, err := withTopology(node.Labels, topology)
		if err != nil {
			return false, err
		}
		if idChanged {
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[volume.AnnCSINodeID] = value
		}
		node.Labels = labels
		return idChanged || labelsChanged, nil
	})
	if err != nil {
		return fmt.Errorf("error updating Node object with CSI driver node info: %w", err)
	}
	entry := driverEntry(name, nodeID, maxVolumes, topology)
	// A driver's entry may not change in place (the API holds it
	// immutable): a different one is removed first, then added.
	err = w.updateCSINode(ctx, func(drivers []storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
		if _, changed := withDriver(drivers, entry); !changed {
			return drivers, false
		}
		return withoutDriver(drivers, name)
	})
	if err == nil {
		err = w.updateCSINode(ctx, func(drivers []storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
			return withDriver(drivers, entry)
		})
	}
	if err != nil {
		return fmt.Errorf("error updating CSINode object with CSI driver node info: %w", err)
	}
	return nil
}

// uninstallDriver removes a driver's entry from the CSINode, then its node
// ID from the Node's annotation.
func (w *Watcher) uninstallDriver(ctx context.Context, name string) error {
	err := w.updateCSINode(ctx, func(drivers []storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
		return withoutDriver(drivers, name)
	})
	if err != nil {
		return fmt.Errorf("error uninstalling CSI driver from CSINode object %w", err)
	}
	err = w.updateNode(ctx, func(node *corev1.Node) (bool, error) {
		value, keep, changed, err := withoutNodeID(node.Annotations[volume.AnnCSINodeID], name)
		if err != nil || !changed {
			return false, err
		}
		if keep {
			node.Annotations[volume.AnnCSINodeID] = value
		} else {
			delete(node.Annotations, volume.AnnCSINodeID)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("error removing CSI driver node info from Node object %w", err)
	}
	return nil
}

// updateNode reads the Node, lets change edit a copy of its metadata, and
// patches what changed.
func (w *Watcher) updateNode(ctx context.Context, change func(*corev1.Node) (bool, error)) error {
	node, err := w.cfg.Client.CoreV1().Nodes().Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	updated := node.DeepCopy()
	changed, err := change(updated)
	if err != nil || !changed {
		return err
	}
	_, err = statusreport.PatchStatus(ctx, w.cfg.Client, node, updated)
	return err
}

// csiNodeUpdateTries is how many times a CSINode update is tried when
// another writer changed it in between.
const csiNodeUpdateTries = 4

// updateCSINode reads the CSINode (creating it when missing), lets change
// compute its drivers, and updates it when they changed; a conflict reads
// it again.
func (w *Watcher) updateCSINode(ctx context.Context, change func([]storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool)) error {
	var err error
	for range csiNodeUpdateTries {
		var cn *storagev1.CSINode
		if cn, err = w.ensureCSINode(ctx); err != nil {
			return err
		}
		drivers, changed := change(cn.Spec.Drivers)
		if !changed {
			return nil
		}
		cn = cn.DeepCopy()
		cn.Spec.Drivers = drivers
		if _, err = w.cfg.Client.StorageV1().CSINodes().Update(ctx, cn, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// ensureCSINode returns the node's CSINode, creating it (with no drivers,
// owned by the Node) when it does not exist.
func (w *Watcher) ensureCSINode(ctx context.Context) (*storagev1.CSINode, error) {
	csiNodes := w.cfg.Client.StorageV1().CSINodes()
	cn, err := csiNodes.Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return cn, err
	}
	node, err := w.cfg.Client.CoreV1().Nodes().Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	cn, err = csiNodes.Create(ctx, NewCSINode(node), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return csiNodes.Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
	}
	return cn, err
}

// NewCSINode is the CSINode the agent creates for node: its name, owned by
// the Node, with no drivers.
func NewCSINode(node *corev1.Node) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name: node.Name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       node.Name,
				UID:        node.UID,
			}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
}
