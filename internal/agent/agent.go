// Package agent is knode's node agent, in the kubelet's role for the Node
// object: it registers (or adopts) its Node, reports the machine's status,
// and renews its Lease in kube-node-lease.
//
// The caller builds a Config (cmd/knode does it from the kubelet's flags and
// KubeletConfiguration file) and calls Run. Register and SyncStatus are the
// synchronous steps Run loops over; tests and the simulator call them
// directly. Every wait goes through Config.Clock.
//
// With a Runtime it also runs the pods bound to its node (package pods).
// Graceful shutdown is package shutdown's: the caller builds its manager
// over Pods() and hands the agent the manager's ShutdownStatus and Admit.
// Not here yet: swap and topology.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"knode/internal/agent/backoff"
	"knode/internal/agent/host"
	"knode/internal/agent/lease"
	"knode/internal/agent/nodestatus"
	"knode/internal/agent/pods"
	podruntime "knode/internal/agent/runtime"
	"knode/internal/agent/statusreport"
)

// Well-known names the agent writes.
const (
	// AnnotationControllerManagedAttachDetach tells the attach/detach
	// controller it owns this node's volume attachments.
	AnnotationControllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"
	// TaintCloudUninitialized marks a node an external cloud provider has
	// not initialized yet.
	TaintCloudUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	labelBetaOS             = "beta.kubernetes.io/os"
	labelBetaArch           = "beta.kubernetes.io/arch"
	eventSource             = "kubelet"
)

// Config builds an Agent.
type Config struct {
	// Client acts as the node's identity (system:node:<NodeName>). Required.
	Client kubernetes.Interface
	// NodeName is the Node's name: the lowercased hostname or override.
	NodeName string
	// RegisterNode: create the Node (or adopt an existing one). When false
	// the agent only reports status once someone has created it.
	RegisterNode bool
	// RegisterWithTaints are set on the Node when the agent creates it,
	// never on an existing Node.
	RegisterWithTaints []corev1.Taint
	// NodeLabels are set when the agent creates the Node, never on an
	// existing Node.
	NodeLabels map[string]string
	// ProviderID becomes spec.providerID on creation.
	ProviderID string
	// Status configures the status setters; Status.NodeName must equal
	// NodeName.
	Status nodestatus.Config
	// NodeStatusUpdateFrequency is how often status is computed (10 s);
	// NodeStatusReportFrequency is the longest time between posts (5 min).
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	// NodeLeaseDurationSeconds is the Lease's duration (40); it is renewed
	// every quarter of it.
	NodeLeaseDurationSeconds int32
	// Host supplies machine facts; RootDir is the agent's state directory,
	// whose filesystem is reported as ephemeral storage.
	Host    host.Host
	RootDir string
	// Clock drives every wait; zero value means the real clock.
	Clock clock.WithTicker
	// Rand supplies jitter in [0,1); nil means math/rand.
	Rand func() float64
	// Runtime runs the pods bound to the node; nil runs none (the agent
	// then only registers, reports and renews).
	Runtime podruntime.Runtime
	// Nodes reads the agent's own Node from a local cache, as the
	// kubelet's node lister does: a status pass starts from it and reads
	// the server only when it misses or on a retry. Nil: Run follows the
	// Node with a watch of its own, and a SyncStatus called directly
	// reads the server.
	Nodes NodeLister
	// OnReady is called once, the first time the posted status says Ready.
	OnReady func(*corev1.Node)
	// OnNode, when set, is called from Run with each version of the Node
	// its watch delivers (read-only; it must not block), so that what
	// follows the Node's spec (the pod network's CNI config, from
	// spec.podCIDRs) keeps up with it.
	OnNode func(*corev1.Node)
	// ShutdownStatus, when set, is asked on every status pass; an error
	// (the node is shutting down) turns Ready False with its message.
	ShutdownStatus func() error
	// RuntimeStatus, when set, is asked on every status pass for what
	// keeps the container runtime or the pod network from running pods
	// (the kubelet's runtime and network readiness); any error turns Ready
	// False with its message, ahead of ShutdownStatus's.
	RuntimeStatus func() []error
	// Images, when set, gives the node's container images on every status
	// pass, for status.images (already sorted and capped by the caller).
	Images func() []corev1.ContainerImage
	// PodNetwork says Runtime gives each pod a network of its own
	// (pods.Config.PodNetwork).
	PodNetwork bool
	// Probes, when set, runs the containers' probes (pods.Config.Probes).
	Probes pods.Probes
	// PodAdmit, when set, is asked about every new pod before the
	// worker's own admission (see pods.Config.Admit).
	PodAdmit func(*corev1.Pod) *pods.Rejection
	// PodResources, when set, is the container manager the pod worker
	// admits pods through and asks for their cgroups (pods.Config.Resources).
	PodResources pods.Resources
	// DeviceCapacity, when set, gives the device plugins' resources
	// (devicemanager.Manager.Capacity); every status pass reports them in
	// capacity and allocatable.
	DeviceCapacity func() (capacity, allocatable map[corev1.ResourceName]int64, removed []string)
	// StartEvents are recorded on the Node with Starting, each time the
	// agent registers or adopts it.
	StartEvents []nodestatus.Event
	// Volumes, when set, is the volume manager: the pod worker sets up
	// and tears down pods' volumes through it, and every status pass
	// reports its InUse as status.volumesInUse and tells it what the
	// server holds (ReportedInUse).
	Volumes Volumes
	Logger  *slog.Logger
}

// Volumes is the volume manager as the agent uses it.
type Volumes interface {
	pods.Volumes
	// InUse is what status.volumesInUse must say.
	InUse() []corev1.UniqueVolumeName
	// ReportedInUse is told what the server's Node lists in volumesInUse.
	ReportedInUse([]corev1.UniqueVolumeName)
}

// NodeLister gets a Node by name from a cache; the object it returns is
// shared and read-only. client-go's NodeLister is one.
type NodeLister interface {
	Get(name string) (*corev1.Node, error)
}

// Defaults for Config.
const (
	DefaultNodeStatusUpdateFrequency = statusreport.DefaultUpdateFrequency
	DefaultNodeStatusReportFrequency = statusreport.DefaultReportFrequency
)

func (c *Config) setDefaults() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("agent: Config.Client is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("agent: Config.NodeName is required"))
	}
	if c.Host == nil {
		errs = append(errs, errors.New("agent: Config.Host is required"))
	}
	if c.NodeStatusUpdateFrequency == 0 {
		c.NodeStatusUpdateFrequency = DefaultNodeStatusUpdateFrequency
	}
	if c.NodeStatusUpdateFrequency < 0 {
		errs = append(errs, fmt.Errorf("nodeStatusUpdateFrequency %v: must be positive", c.NodeStatusUpdateFrequency))
	}
	if c.NodeStatusReportFrequency == 0 {
		c.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
	}
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = lease.DefaultDurationSeconds
	}
	if c.NodeLeaseDurationSeconds < 0 {
		errs = append(errs, fmt.Errorf("nodeLeaseDurationSeconds %d: must be greater than 0", c.NodeLeaseDurationSeconds))
	}
	if c.Status.NodeName == "" {
		c.Status.NodeName = c.NodeName
	}
	if c.Status.Hostname == "" {
		c.Status.Hostname = c.NodeName
	}
	if err := c.Status.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Agent keeps one Node registered, reported and leased.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	setters  []nodestatus.Setter
	schedule *statusreport.Schedule
	renewer  *lease.Renewer
	// nodes is Config.Nodes, or the cache Run fills.
	nodes NodeLister
	// quiet belongs to the status pass, like schedule (see quietPass).
	quiet quietPass
	// worker runs the pods; nil without a Runtime.
	worker *pods.Worker
	// postNow asks Run's status loop for a pass at once (KickStatus).
	postNow chan struct{}

	mu             sync.Mutex
	registered     bool
	registeredCh   chan struct{}
	registeredOnce sync.Once
	readyOnce      sync.Once
	stats          Stats
	// events numbers the events this agent records, so that names stay
	// unique when the clock has not moved (always, in virtual time).
	events int64
}

// Stats counts the agent's writes, for measuring its cost.
type Stats struct {
	StatusPosts   int64
	StatusErrors  int64
	Registrations int64
	// QuietPasses counts the status passes that ran no setter, because
	// they started from the Node and facts of a pass that found nothing
	// to post (see quietPass).
	QuietPasses int64
}

// New checks cfg and builds an Agent.
func New(cfg Config) (*Agent, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{
		registeredCh: make(chan struct{}),
		cfg:          cfg,
		log:          cfg.Logger.With("node", cfg.NodeName),
		setters:      nodestatus.Setters(cfg.Status),
		schedule:     statusreport.NewSchedule(cfg.NodeStatusReportFrequency, cfg.Rand),
		nodes:        cfg.Nodes,
		postNow:      make(chan struct{}, 1),
	}
	if cfg.Runtime != nil {
		// The worker reads the Node through a.nodes, which Run may fill
		// only later: the lister below looks it up at each call.
		worker, err := pods.New(pods.Config{
			Client: cfg.Client, NodeName: cfg.NodeName, Nodes: agentNodes{a}, Runtime: cfg.Runtime, Clock: cfg.Clock,
			Admit: cfg.PodAdmit, Resources: cfg.PodResources, Volumes: workerVolumes(cfg.Volumes),
			PodNetwork: cfg.PodNetwork, Probes: cfg.Probes, Logger: a.log,
		})
		if err != nil {
			return nil, err
		}
		a.worker = worker
	}
	renewer, err := lease.New(lease.Config{
		Client:               cfg.Client,
		NodeName:             cfg.NodeName,
		LeaseDurationSeconds: cfg.NodeLeaseDurationSeconds,
		Rand:                 cfg.Rand,
		Clock:                cfg.Clock,
		Logger:               a.log,
	})
	if err != nil {
		return nil, err
	}
	a.renewer = renewer
	return a, nil
}

// Lease is the agent's lease renewer.
func (a *Agent) Lease() *lease.Renewer { return a.renewer }

// Pods is the agent's pod worker, which Run runs; nil without a Runtime.
func (a *Agent) Pods() *pods.Worker { return a.worker }

// KickStatus asks Run for a status pass now rather than at the next tick
// (the shutdown manager's way to turn Ready False at once). It never
// blocks.
func (a *Agent) KickStatus() {
	select {
	case a.postNow <- struct{}{}:
	default:
	}
}

// agentNodes reads the agent's Node from whatever cache the agent has
// when asked.
type agentNodes struct{ a *Agent }

func (n agentNodes) Get(name string) (*corev1.Node, error) {
	if n.a.nodes == nil {
		return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
	}
	return n.a.nodes.Get(name)
}

// Stats returns the agent's counters.
func (a *Agent) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// Run registers the Node (when RegisterNode), then renews the Lease and
// reports status until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	if a.cfg.RegisterNode {
		if err := a.Register(ctx); err != nil {
			return err
		}
		// Create the Lease now rather than one renew interval later.
		if err := a.renewer.Sync(ctx); err != nil {
			a.log.Warn("first lease renewal failed", "err", err)
		}
	}
	var running sync.WaitGroup
	running.Add(1)
	go func() {
		defer running.Done()
		a.renewer.Run(ctx)
	}()
	if a.nodes == nil {
		cache := &nodeCache{onSet: a.cfg.OnNode}
		a.nodes = cache
		running.Add(1)
		go func() {
			defer running.Done()
			a.follow(ctx, cache)
		}()
	}
	if worker := a.worker; worker != nil {
		running.Add(1)
		go func() {
			defer running.Done()
			if err := worker.Run(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("pod worker stopped", "err", err)
			}
		}()
	}
	defer running.Wait()
	ticker := a.cfg.Clock.NewTicker(a.cfg.NodeStatusUpdateFrequency)
	defer ticker.Stop()
	for {
		if err := a.SyncStatus(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("node status update failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		case <-a.postNow:
		}
	}
}

// Register creates or adopts the Node, retrying with upstream's backoff
// (100 ms doubling to 7 s) until it succeeds or ctx ends.
func (a *Agent) Register(ctx context.Context) error {
	wait := backoff.Registration()
	for {
		timer := a.cfg.Clock.NewTimer(wait.Next())
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C():
		}
		done, err := a.TryRegister(ctx)
		if done {
			return nil
		}
		a.log.Info("unable to register node with API server", "err", err)
	}
}

// TryRegister makes one registration attempt: create the Node with its full
// status; if it exists (409, or 403 for an identity that may not create),
// adopt it, reconciling only what upstream reconciles.
func (a *Agent) TryRegister(ctx context.Context) (bool, error) {
	now := a.cfg.Clock.Now()
	node, err := a.initialNode(now)
	if err != nil {
		return false, err
	}
	nodes := a.cfg.Client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		a.markRegistered()
		a.log.Info("successfully registered node")
		a.recordEvents(ctx, a.startEvents())
		a.recordEvents(ctx, nodestatus.Events(a.cfg.NodeName, nil, &created.Status))
		a.schedule.Posted(now, true)
		a.noteReady(created)
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return false, err
	}
	existing, getErr := nodes.Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if getErr != nil {
		if apierrors.IsForbidden(err) {
			return false, err
		}
		return false, getErr
	}
	updated := existing.DeepCopy()
	changed := reconcileExisting(node, updated)
	if changed {
		if _, err := statusreport.PatchStatus(ctx, a.cfg.Client, existing, updated); err != nil {
			return false, err
		}
	}
	a.markRegistered()
	a.log.Info("node already exists; adopted it", "reconciled", changed)
	a.recordEvents(ctx, a.startEvents())
	return true, nil
}

// startEvents are the events of a registration: Starting, then the
// configured ones.
func (a *Agent) startEvents() []nodestatus.Event {
	return append([]nodestatus.Event{{Type: corev1.EventTypeNormal, Reason: "Starting", Message: "Starting kubelet."}}, a.cfg.StartEvents...)
}

// RecordEvent records one event about the Node.
func (a *Agent) RecordEvent(ctx context.Context, eventType, reason, message string) {
	a.recordEvents(ctx, []nodestatus.Event{{Type: eventType, Reason: reason, Message: message}})
}

func (a *Agent) markRegistered() {
	a.mu.Lock()
	a.registered = true
	a.stats.Registrations++
	a.mu.Unlock()
	a.registeredOnce.Do(func() { close(a.registeredCh) })
}

// Registered is closed once the agent has registered (or adopted) its
// Node; components that write to the Node (the CSI plugin watcher) start
// then.
func (a *Agent) Registered() <-chan struct{} { return a.registeredCh }

// initialNode is the Node the agent creates: its labels, taints and
// annotations, and a status computed by every setter that could run.
func (a *Agent) initialNode(now time.Time) (*corev1.Node, error) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        a.cfg.NodeName,
			Labels:      defaultLabels(a.cfg.Status.Hostname),
			Annotations: map[string]string{AnnotationControllerManagedAttachDetach: "true"},
		},
		Spec: corev1.NodeSpec{ProviderID: a.cfg.ProviderID},
	}
	for k, v := range a.cfg.NodeLabels {
		node.Labels[k] = v
	}
	node.Spec.Taints = append(node.Spec.Taints, a.cfg.RegisterWithTaints...)
	if a.cfg.Status.CloudProvider == nodestatus.CloudProviderExternal {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: TaintCloudUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	if err := a.computeStatus(node, now); err != nil {
		// As the kubelet: report what could be computed.
		a.log.Warn("failed to set some node status fields", "err", err)
	}
	return node, nil
}

// defaultLabels are the labels the agent owns on its Node.
func defaultLabels(hostname string) map[string]string {
	return map[string]string{
		corev1.LabelHostname:   hostname,
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
		labelBetaOS:            runtime.GOOS,
		labelBetaArch:          runtime.GOARCH,
	}
}

// reconciledLabels are the default-label keys upstream reconciles onto an
// existing Node.
var reconciledLabels = []string{
	corev1.LabelHostname, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceTypeStable, corev1.LabelInstanceType,
	corev1.LabelOSStable, corev1.LabelArchStable, corev1.LabelWindowsBuild,
	labelBetaOS, labelBetaArch,
}

// reconcileExisting brings an existing Node in line with the initial one
// where upstream does (the default labels and the attach/detach
// annotation), leaving taints, user labels and everything else alone. It
// reports whether existing changed.
func reconcileExisting(initial, existing *corev1.Node) bool {
	changed := false
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for _, key := range reconciledLabels {
		want, ok := initial.Labels[key]
		if !ok {
			continue
		}
		if have, has := existing.Labels[key]; has && have == want {
			continue
		}
		if want == "" {
			if _, has := existing.Labels[key]; has {
				delete(existing.Labels, key)
				changed = true
			}
			continue
		}
		existing.Labels[key] = want
		changed = true
	}
	if existing.Annotations[AnnotationControllerManagedAttachDetach] != "true" {
		if existing.Annotations == nil {
			existing.Annotations = map[string]string{}
		}
		existing.Annotations[AnnotationControllerManagedAttachDetach] = "true"
		changed = true
	}
	return changed
}

// computeStatus runs every status setter on node. A setter that fails
// leaves its fields as they were; the others still run.
func (a *Agent) computeStatus(node *corev1.Node, now time.Time) error {
	return a.applySetters(node, a.snapshot(), a.readyErrors(), a.images(), now)
}

// snapshot reads the machine facts the setters work from.
func (a *Agent) snapshot() host.Facts {
	facts, err := host.Snapshot(a.cfg.Host, a.cfg.RootDir)
	if err != nil {
		a.log.Debug("some machine facts could not be read", "err", err)
	}
	return facts
}

func (a *Agent) applySetters(node *corev1.Node, facts host.Facts, readyErrs []error, images []corev1.ContainerImage, now time.Time) error {
	err := nodestatus.Apply(a.setters, node, nodestatus.Facts{Host: facts, ReadyErrors: readyErrs}, now)
	if a.cfg.Images != nil {
		node.Status.Images = images
	}
	if a.cfg.Volumes != nil {
		node.Status.VolumesInUse = a.volumesInUse()
	}
	if a.cfg.DeviceCapacity != nil {
		capacity, allocatable, removed := a.cfg.DeviceCapacity()
		nodestatus.DeviceResources(node, capacity, allocatable, removed)
	}
	return err
}

// devicesKey is the device plugins' resources in one string, for
// quietPass.
func (a *Agent) devicesKey() string {
	if a.cfg.DeviceCapacity == nil {
		return ""
	}
	capacity, allocatable, removed := a.cfg.DeviceCapacity()
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(capacity)) {
		fmt.Fprintf(&b, "%s=%d/%d\n", name, capacity[name], allocatable[name])
	}
	for _, name := range slices.Sorted(slices.Values(removed)) {
		fmt.Fprintf(&b, "%s removed\n", name)
	}
	return b.String()
}

// volumesInUse is the volume manager's InUse, sorted as upstream posts it.
func (a *Agent) volumesInUse() []corev1.UniqueVolumeName {
	if a.cfg.Volumes == nil {
		return nil
	}
	names := a.cfg.Volumes.InUse()
	slices.Sort(names)
	if len(names) == 0 {
		return nil
	}
	return names
}

// workerVolumes is v as the pod worker takes it: a nil interface when v is
// nil.
func workerVolumes(v Volumes) pods.Volumes {
	if v == nil {
		return nil
	}
	return v
}

// readyErrors are the agent's own reasons not to be Ready.
func (a *Agent) readyErrors() []error {
	var errs []error
	if a.cfg.RuntimeStatus != nil {
		for _, err := range a.cfg.RuntimeStatus() {
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if a.cfg.ShutdownStatus != nil {
		if err := a.cfg.ShutdownStatus(); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// readyKey is the messages of errs, for quietPass.
func readyKey(errs []error) string {
	var b strings.Builder
	for _, err := range errs {
		b.WriteString(err.Error())
		b.WriteByte('\n')
	}
	return b.String()
}

// images is the node's images when Config.Images is set.
func (a *Agent) images() []corev1.ContainerImage {
	if a.cfg.Images == nil {
		return nil
	}
	return a.cfg.Images()
}

// imagesKey joins images' names and sizes for quietPass.
func imagesKey(images []corev1.ContainerImage) string {
	var b strings.Builder
	for _, img := range images {
		fmt.Fprintf(&b, "%s %d\n", strings.Join(img.Names, ","), img.SizeBytes)
	}
	return b.String()
}

// quietPass is what the last status pass started from when it found
// nothing to post: the Node's resourceVersion and the machine facts. The
// setters are pure functions of the Node and the facts, apart from the
// times they stamp, and Changed ignores heartbeat times, so a pass that
// starts from the same Node and the same facts finds nothing to post
// again. Such a pass skips copying the Node, running the setters and
// comparing, until a report is due. Any post, or a Node or facts that
// differ, runs the whole pass.
type quietPass struct {
	resourceVersion string
	facts           host.Facts
	// notReady is what kept the node from running pods (readyKey).
	notReady string
	// images is the node's images (imagesKey).
	images string
	// inUse is the volumes in use, joined.
	inUse string
	// devices is the device plugins' resources (devicesKey).
	devices string
}

// holds reports whether a pass from node and facts would find nothing to
// post, as the remembered one did.
func (q quietPass) holds(node *corev1.Node, facts host.Facts, notReady, inUse, devices, images string) bool {
	return q.resourceVersion != "" && q.resourceVersion == node.ResourceVersion && q.facts.Equal(facts) &&
		q.notReady == notReady && q.inUse == inUse && q.devices == devices && q.images == images
}

// inUseKey joins names for quietPass.
func inUseKey(names []corev1.UniqueVolumeName) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(string(n))
		b.WriteByte('\n')
	}
	return b.String()
}

// nodeStatusUpdateRetry is how many times a status pass tries before it
// gives up until the next one (upstream's count).
const nodeStatusUpdateRetry = 5

// SyncStatus computes the Node's status once and posts it when it changed
// or when the report interval has passed. Before the Node exists it does
// nothing. A failed try is made again, from the Node as the server has it,
// up to nodeStatusUpdateRetry times.
func (a *Agent) SyncStatus(ctx context.Context) error {
	var err error
	for try := 0; try < nodeStatusUpdateRetry; try++ {
		if err = a.trySyncStatus(ctx, try); err == nil || ctx.Err() != nil {
			return err
		}
		a.log.Debug("node status update failed, will retry", "err", err)
	}
	return fmt.Errorf("update node status exceeds retry count: %w", err)
}

// readNode is the Node a status try starts from: the first try's comes
// from the local cache when there is one and it holds the Node; every
// other read is a consistent read from the server, so a Node registered an
// instant ago is never taken for missing.
func (a *Agent) readNode(ctx context.Context, try int) (*corev1.Node, error) {
	if try == 0 && a.nodes != nil {
		if node, err := a.nodes.Get(a.cfg.NodeName); err == nil && node != nil {
			return node, nil
		}
	}
	return a.cfg.Client.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
}

func (a *Agent) trySyncStatus(ctx context.Context, try int) error {
	now := a.cfg.Clock.Now()
	node, err := a.readNode(ctx, try)
	if apierrors.IsNotFound(err) {
		a.log.Debug("node not registered yet; not posting status")
		return nil
	}
	if err != nil {
		return fmt.Errorf("error getting node %q: %w", a.cfg.NodeName, err)
	}
	facts := a.snapshot()
	readyErrs := a.readyErrors()
	notReady := readyKey(readyErrs)
	images := a.images()
	imageKey := imagesKey(images)
	if a.cfg.Volumes != nil {
		a.cfg.Volumes.ReportedInUse(node.Status.VolumesInUse)
	}
	inUse := inUseKey(a.volumesInUse())
	devices := a.devicesKey()
	if a.quiet.holds(node, facts, notReady, inUse, devices, imageKey) && !a.schedule.Due(false, now) {
		a.mu.Lock()
		a.stats.QuietPasses++
		a.mu.Unlock()
		return nil
	}
	a.quiet = quietPass{}
	updated := statusCopy(node)
	setErr := a.applySetters(updated, facts, readyErrs, images, now)
	if setErr != nil {
		// As the kubelet: post what could be computed.
		a.log.Warn("failed to set some node status fields", "err", setErr)
	}
	changed := statusreport.Changed(&node.Status, &updated.Status)
	if !a.schedule.Due(changed, now) {
		if !changed && setErr == nil {
			a.quiet = quietPass{resourceVersion: node.ResourceVersion, facts: facts, notReady: notReady, inUse: inUse, devices: devices, images: imageKey}
		}
		return nil
	}
	posted, err := statusreport.PatchStatus(ctx, a.cfg.Client, node, updated)
	if err != nil {
		a.countStatusError()
		return err
	}
	a.schedule.Posted(now, changed)
	a.mu.Lock()
	a.stats.StatusPosts++
	a.mu.Unlock()
	a.recordEvents(ctx, nodestatus.Events(a.cfg.NodeName, &node.Status, &posted.Status))
	if a.cfg.Volumes != nil {
		a.cfg.Volumes.ReportedInUse(posted.Status.VolumesInUse)
	}
	a.noteReady(posted)
	return nil
}

// statusCopy returns a copy of node for the status setters to fill: its
// status and annotations (the node IP setter writes one) are its own, and
// the rest is shared with node, read-only. The pass never changes the
// rest, and sharing it saves deep-copying every field of the Node, managed
// fields included, on each pass.
func statusCopy(node *corev1.Node) *corev1.Node {
	out := *node
	out.Annotations = maps.Clone(node.Annotations)
	node.Status.DeepCopyInto(&out.Status)
	return &out
}

func (a *Agent) countStatusError() {
	a.mu.Lock()
	a.stats.StatusErrors++
	a.mu.Unlock()
}

func (a *Agent) noteReady(node *corev1.Node) {
	if a.cfg.OnReady == nil {
		return
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			a.readyOnce.Do(func() { a.cfg.OnReady(node) })
		}
	}
}

// recordEvents writes node events the way the kubelet's recorder does:
// in the default namespace, about the Node (whose uid the kubelet gives as
// its name), from the "kubelet" source.
func (a *Agent) recordEvents(ctx context.Context, events []nodestatus.Event) {
	now := metav1.NewTime(a.cfg.Clock.Now())
	for _, e := range events {
		a.mu.Lock()
		a.events++
		seq := a.events
		a.mu.Unlock()
		ev := &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s.%x", a.cfg.NodeName, now.UnixNano()+seq),
				Namespace: metav1.NamespaceDefault,
			},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)},
			Reason:         e.Reason,
			Message:        e.Message,
			Type:           e.Type,
			Source:         corev1.EventSource{Component: eventSource, Host: a.cfg.NodeName},
			FirstTimestamp: now,
			LastTimestamp:  now,
			Count:          1,
		}
		if _, err := a.cfg.Client.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			a.log.Debug("recording event failed", "reason", e.Reason, "err", err)
		}
	}
}

// NodeName returns the name a host reports itself as: override if set,
// else the hostname, trimmed and lowercased.
func NodeName(override string, h host.Host) (string, error) {
	name := strings.ToLower(strings.TrimSpace(override))
	if name == "" {
		hn, err := h.Hostname()
		if err != nil {
			return "", fmt.Errorf("reading the hostname: %w", err)
		}
		name = strings.ToLower(strings.TrimSpace(hn))
	}
	if name == "" {
		return "", errors.New("empty hostname is invalid")
	}
	return name, nil
}
