package attachdetach

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
	"knode/internal/volume"
)

// Name is the controller's event source, as upstream names it.
const Name = "attachdetach-controller"

// Defaults, as kube-controller-manager has them.
const (
	// DefaultMaxWaitForUnmountDuration is how long a detach waits for an
	// unreachable node to unmount before it is forced.
	DefaultMaxWaitForUnmountDuration = 6 * time.Minute
	// DefaultReconcilerSyncLoopPeriod is the reconciler's period.
	DefaultReconcilerSyncLoopPeriod = 100 * time.Millisecond
)

// Event reasons, upstream's strings.
const (
	EventSuccessfulAttach = "SuccessfulAttachVolume"
	EventFailedAttach     = "FailedAttachVolume"
)

// Config builds a Controller.
type Config struct {
	// Client reads nodes, pods, PVCs, PVs, CSIDrivers and
	// VolumeAttachments; creates and deletes VolumeAttachments; patches
	// nodes/status; creates events. Required.
	Client kubernetes.Interface
	// Clock gives now for every pass and paces Run; zero value means the
	// real clock.
	Clock clock.WithTicker
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Metrics receives the forced-detach counter; nil registers nothing
	// (it is still counted).
	Metrics prometheus.Registerer
	// Informers, when set, is the shared factory Run takes its informers
	// from; Run starts it. nil: Run builds its own. Step never uses it.
	Informers informers.SharedInformerFactory
	// DisableForceDetachOnTimeout is --disable-force-detach-on-timeout:
	// the unmount timeout never forces a detach; only the out-of-service
	// taint does.
	DisableForceDetachOnTimeout bool
	// MaxWaitForUnmountDuration is how long a detach of a volume that a
	// not-Ready node still reports in use waits before it is forced. 0
	// means DefaultMaxWaitForUnmountDuration.
	MaxWaitForUnmountDuration time.Duration
	// ReconcilerSyncLoopPeriod is Run's period. 0 means
	// DefaultReconcilerSyncLoopPeriod.
	ReconcilerSyncLoopPeriod time.Duration
}

// Controller attaches and detaches CSI volumes through VolumeAttachments.
// Its methods are safe for concurrent use; passes do not overlap.
type Controller struct {
	cfg     Config
	params  Params
	log     *slog.Logger
	metrics *metrics
	rec     *events.Recorder
	api     source

	// mu is held for a whole pass and guards everything below.
	mu sync.Mutex
	// detachRequested is the last Plan's DetachRequested.
	detachRequested map[string]time.Time
	// deleted holds the attachments this controller asked to delete, by
	// name, until a snapshot shows them deleting or gone, so that a stale
	// cache does not make it detach (and count) twice.
	deleted map[string]types.UID
	// nodes remembers what each node looked like when last seen, for the
	// time after it is deleted.
	nodes map[string]seenNode
	// multiAttachReported holds the attachment names whose Multi-Attach
	// error was reported while they stay blocked.
	multiAttachReported map[string]bool
	// announced holds "<node>\x00<volume>" for the volumes whose
	// SuccessfulAttachVolume events were recorded, while they stay
	// attached: a stale node cache must not announce them twice.
	announced map[string]bool
	// nextForce is the last Plan's NextForce.
	nextForce time.Time
}

type seenNode struct {
	managed bool
	inUse   []corev1.UniqueVolumeName
}

// New checks cfg, fills its defaults and builds a Controller, registering
// its metrics on cfg.Metrics.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("attachdetach: Config.Client is required")
	}
	if cfg.MaxWaitForUnmountDuration < 0 {
		return nil, fmt.Errorf("attachdetach: MaxWaitForUnmountDuration %v must not be negative", cfg.MaxWaitForUnmountDuration)
	}
	if cfg.ReconcilerSyncLoopPeriod < 0 {
		return nil, fmt.Errorf("attachdetach: ReconcilerSyncLoopPeriod %v must not be negative", cfg.ReconcilerSyncLoopPeriod)
	}
	if cfg.MaxWaitForUnmountDuration == 0 {
		cfg.MaxWaitForUnmountDuration = DefaultMaxWaitForUnmountDuration
	}
	if cfg.ReconcilerSyncLoopPeriod == 0 {
		cfg.ReconcilerSyncLoopPeriod = DefaultReconcilerSyncLoopPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := newMetrics()
	if err := m.register(cfg.Metrics); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	return &Controller{
		cfg:                 cfg,
		params:              Params{MaxWaitForUnmount: cfg.MaxWaitForUnmountDuration, DisableForceDetachOnTimeout: cfg.DisableForceDetachOnTimeout},
		log:                 log,
		metrics:             m,
		rec:                 &events.Recorder{Client: cfg.Client.CoreV1(), Source: Name, Logger: log},
		api:                 apiSource{client: cfg.Client},
		detachRequested:     map[string]time.Time{},
		deleted:             map[string]types.UID{},
		nodes:               map[string]seenNode{},
		multiAttachReported: map[string]bool{},
		announced:           map[string]bool{},
	}, nil
}

// Step makes one reconcile pass at the clock's now over a snapshot listed
// through the API, and blocks until its writes are done. The error joins
// the pass's failures; each is retried by the next pass.
func (c *Controller) Step(ctx context.Context) error {
	return c.pass(ctx, c.api)
}

// Run starts its informers, waits for their caches, then passes at once,
// every ReconcilerSyncLoopPeriod and on every change the informers see,
// reading the caches, until ctx ends. It blocks until then.
func (c *Controller) Run(ctx context.Context) {
	factory := c.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.cfg.Client, 0)
	}
	src := newInformerSource(factory)
	// Wait for every cache first: changes heard of before the last one
	// synced would otherwise wake passes that can only skip.
	factory.Start(ctx.Done())
	var synced []cache.InformerSynced
	for _, inf := range src.informers() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	loop.Run(ctx, loop.Config{
		Clock:     c.cfg.Clock,
		Resync:    c.cfg.ReconcilerSyncLoopPeriod,
		Informers: src.informers(),
		Start:     factory.Start,
		Sync: func(ctx context.Context) error {
			if err := c.pass(ctx, src); !errors.Is(err, errNotSynced) {
				return err
			}
			return nil
		},
		NextDue:   c.NextDue,
		DueMargin: time.Millisecond,
		Logger:    c.log,
		Name:      "attachdetach",
	})
}

// NextDue returns when the earliest waiting detach becomes forced by the
// timeout, as of the last pass; the zero time when none will. A driver of
// Step (the simulator) runs a pass just after it.
func (c *Controller) NextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextForce
}

// pass reads a snapshot from src, decides at the clock's now and applies
// the plan.
func (c *Controller) pass(ctx context.Context, src source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap, err := src.snapshot(ctx)
	if err != nil {
		return err
	}
	now := c.cfg.Clock.Now()
	w := c.observe(snap)
	plan := Decide(w, c.params, now)
	c.detachRequested = plan.DetachRequested
	c.nextForce = plan.NextForce
	return c.apply(ctx, w, plan, now)
}

// observe updates the controller's memory from snap and builds the
// decision's World.
func (c *Controller) observe(snap Snapshot) World {
	exists := make(map[string]*corev1.Node, len(snap.Nodes))
	for _, n := range snap.Nodes {
		exists[n.Name] = n
		c.nodes[n.Name] = seenNode{managed: Managed(n), inUse: slices.Clone(n.Status.VolumesInUse)}
	}
	managedGone := map[string]bool{}
	for name, seen := range c.nodes {
		if exists[name] == nil && seen.managed {
			managedGone[name] = true
		}
	}
	wanted := Desire(snap, managedGone)

	pvs := make(map[string]*corev1.PersistentVolume, len(snap.Volumes))
	for _, pv := range snap.Volumes {
		pvs[pv.Name] = pv
	}
	live := map[string]types.UID{}
	var atts []Attachment
	for _, va := range snap.Attachments {
		if va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		live[va.Name] = va.UID
		if va.DeletionTimestamp != nil {
			delete(c.deleted, va.Name)
		}
		pv := *va.Spec.Source.PersistentVolumeName
		uid, asked := c.deleted[va.Name]
		atts = append(atts, Attachment{
			Name:     va.Name,
			UID:      va.UID,
			Node:     va.Spec.NodeName,
			PV:       pv,
			Volume:   volumeOf(va, pvs[pv], exists[va.Spec.NodeName]),
			Attached: va.Status.Attached,
			Deleting: va.DeletionTimestamp != nil || asked && uid == va.UID,
		})
	}
	for name, uid := range c.deleted {
		if live[name] != uid {
			delete(c.deleted, name)
		}
	}

	views := make(map[string]NodeView, len(snap.Nodes))
	for _, n := range snap.Nodes {
		views[n.Name] = NodeView{
			Exists:       true,
			Managed:      Managed(n),
			Ready:        NodeReady(n),
			OutOfService: volume.OutOfService(n),
			InUse:        n.Status.VolumesInUse,
			InUseKnown:   true,
			Attached:     n.Status.VolumesAttached,
		}
	}
	// Nodes named by an attachment or a Wanted but not in snap are gone:
	// they get a view from memory.
	busy := map[string]bool{}
	named := func(name string) {
		busy[name] = true
		if _, ok := views[name]; ok {
			return
		}
		seen, known := c.nodes[name]
		views[name] = NodeView{Managed: seen.managed, InUse: seen.inUse, InUseKnown: known}
	}
	for _, a := range atts {
		named(a.Node)
	}
	for _, x := range wanted {
		named(x.Node)
	}
	// A deleted node is forgotten once nothing is attached to it or wanted
	// on it any more.
	for name := range c.nodes {
		if exists[name] == nil && !busy[name] {
			delete(c.nodes, name)
		}
	}
	return World{Nodes: views, Wanted: wanted, Attachments: atts, DetachRequested: c.detachRequested}
}

// volumeOf names the volume va attaches: from its PV when that is a CSI
// volume, else from the entry of its node's volumesAttached whose
// attachment name is va's; "" when neither tells.
func volumeOf(va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume, node *corev1.Node) corev1.UniqueVolumeName {
	if pv != nil && pv.Spec.CSI != nil {
		return volume.UniqueName(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
	}
	if node == nil {
		return ""
	}
	for _, av := range node.Status.VolumesAttached {
		driver, handle, ok := volume.ParseUniqueName(av.Name)
		if ok && volume.AttachmentName(handle, driver, va.Spec.NodeName) == va.Name {
			return av.Name
		}
	}
	return ""
}

// apply carries out plan in its documented order.
func (c *Controller) apply(ctx context.Context, w World, plan Plan, now time.Time) error {
	var errs []error
	status := make(map[string]NodeStatus, len(plan.Status))
	for _, s := range plan.Status {
		status[s.Node] = s
	}
	wanted := make(map[string]Wanted, len(w.Wanted))
	for _, x := range w.Wanted {
		wanted[x.Node+"\x00"+string(x.Volume)] = x
	}

	failed := map[string]bool{}
	for _, d := range plan.Detach {
		s, ok := status[d.Node]
		if !ok || failed[d.Node] {
			continue
		}
		delete(status, d.Node)
		if err := c.writeStatus(ctx, w.Nodes[d.Node], s, wanted, now); err != nil {
			failed[d.Node] = true
			errs = append(errs, err)
		}
	}
	for _, d := range plan.Detach {
		if failed[d.Node] {
			c.log.Info("not detaching this round: the node status update failed", "node", d.Node, "volumeAttachment", d.Name)
			continue
		}
		uid := d.UID
		err := c.cfg.Client.StorageV1().VolumeAttachments().Delete(ctx, d.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			c.deleted[d.Name] = d.UID
		case apierrors.IsNotFound(err):
		default:
			errs = append(errs, fmt.Errorf("deleting volumeattachment %s: %w", d.Name, err))
			continue
		}
		args := []any{"node", d.Node, "volume", d.Volume, "volumeAttachment", d.Name}
		switch d.Forced {
		case Verified:
			c.log.Info("detach started", args...)
		case ReasonTimeout:
			c.metrics.forced.WithLabelValues(string(d.Forced)).Inc()
			c.log.Warn("detach started without a verified unmount: maxWaitForUnmountDuration expired, forcing it", append(args, "duration", c.params.MaxWaitForUnmount)...)
		case ReasonOutOfService:
			c.metrics.forced.WithLabelValues(string(d.Forced)).Inc()
			c.log.Warn("detach started without a verified unmount: the node has the out-of-service taint, forcing it", args...)
		}
	}

	for _, x := range plan.Attach {
		pv := x.PV
		va := &storagev1.VolumeAttachment{
			ObjectMeta: metav1.ObjectMeta{Name: x.AttachmentName()},
			Spec: storagev1.VolumeAttachmentSpec{
				Attacher: x.Driver,
				NodeName: x.Node,
				Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
			},
		}
		_, err := c.cfg.Client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
		switch {
		case err == nil:
			c.log.Info("attach started", "node", x.Node, "volume", x.Volume, "volumeAttachment", va.Name)
		case !apierrors.IsAlreadyExists(err):
			errs = append(errs, fmt.Errorf("creating volumeattachment %s: %w", va.Name, err))
		}
	}

	for _, name := range slices.Sorted(maps.Keys(status)) {
		if err := c.writeStatus(ctx, w.Nodes[name], status[name], wanted, now); err != nil {
			errs = append(errs, err)
		}
	}
	// Forget the announcements of volumes no longer attached, so that a
	// later attach is announced again.
	still := map[string]bool{}
	for _, a := range w.Attachments {
		if a.Attached && !a.Deleting {
			still[a.Node+"\x00"+string(a.Volume)] = true
		}
	}
	for _, d := range plan.Detach {
		delete(still, d.Node+"\x00"+string(d.Volume))
	}
	for k := range c.announced {
		if !still[k] {
			delete(c.announced, k)
		}
	}

	blocked := map[string]bool{}
	for _, x := range plan.Blocked {
		name := x.AttachmentName()
		blocked[name] = true
		if !c.multiAttachReported[name] {
			c.multiAttachReported[name] = true
			c.reportMultiAttach(ctx, x, w.Wanted, now)
		}
	}
	for name := range c.multiAttachReported {
		if !blocked[name] {
			delete(c.multiAttachReported, name)
		}
	}
	return errors.Join(errs...)
}

// writeStatus sets the node's status.volumesAttached with a strategic
// merge patch of nodes/status (the list has no merge key, so the patch
// replaces it). A node deleted meanwhile is not an error. Each volume the
// write adds is announced, once while it stays attached, to the pods that
// want it.
func (c *Controller) writeStatus(ctx context.Context, node NodeView, s NodeStatus, wanted map[string]Wanted, now time.Time) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"volumesAttached": nilIfEmpty(s.VolumesAttached)}})
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.CoreV1().Nodes().Patch(ctx, s.Node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("updating volumesAttached of node %s: %w", s.Node, err)
	}
	for _, av := range s.VolumesAttached {
		k := s.Node + "\x00" + string(av.Name)
		if c.announced[k] || slices.ContainsFunc(node.Attached, func(old corev1.AttachedVolume) bool { return old.Name == av.Name }) {
			continue
		}
		x, ok := wanted[k]
		if !ok {
			continue
		}
		c.announced[k] = true
		msg := fmt.Sprintf("AttachVolume.Attach succeeded for volume %q ", x.PV)
		for _, pod := range x.Pods {
			c.rec.Record(ctx, pod, pod.Namespace, corev1.EventTypeNormal, EventSuccessfulAttach, msg, now)
		}
	}
	return nil
}

func nilIfEmpty(v []corev1.AttachedVolume) []corev1.AttachedVolume {
	if len(v) == 0 {
		return nil
	}
	return v
}

// reportMultiAttach tells each pod waiting for x why its volume is not
// attached, in upstream's words: which pods of its own namespace hold the
// volume on other nodes, and how many of other namespaces.
func (c *Controller) reportMultiAttach(ctx context.Context, x Wanted, all []Wanted, now time.Time) {
	var holders []corev1.ObjectReference
	for _, o := range all {
		if o.Node != x.Node && o.Volume == x.Volume {
			holders = append(holders, o.Pods...)
		}
	}
	for _, pod := range x.Pods {
		c.rec.Record(ctx, pod, pod.Namespace, corev1.EventTypeWarning, EventFailedAttach, MultiAttachMessage(x.PV, pod.Namespace, holders), now)
	}
	c.log.Info("Multi-Attach error: volume is already exclusively attached to another node", "node", x.Node, "volume", x.Volume)
}

// MultiAttachMessage is upstream's FailedAttachVolume message for a pod of
// namespace waiting for the exclusive volume pv, which holders (pods on
// other nodes) use.
func MultiAttachMessage(pv, namespace string, holders []corev1.ObjectReference) string {
	detail := "Volume is already exclusively attached to one node and can't be attached to another"
	if len(holders) > 0 {
		var local []string
		other := 0
		for _, h := range holders {
			if h.Namespace == namespace {
				local = append(local, h.Name)
			} else {
				other++
			}
		}
		slices.SortFunc(local, cmp.Compare)
		if len(local) > 0 {
			detail = "Volume is already used by pod(s) " + strings.Join(local, ", ")
			if other > 0 {
				detail += fmt.Sprintf(" and %d pod(s) in different namespaces", other)
			}
		} else {
			detail = fmt.Sprintf("Volume is already used by %d pod(s) in different namespaces", other)
		}
	}
	return fmt.Sprintf("Multi-Attach error for volume %q %s", pv, detail)
}
