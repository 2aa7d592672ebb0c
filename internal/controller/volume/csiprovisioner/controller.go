// Package csiprovisioner is knode's own external provisioner for one CSI
// driver: it creates volumes for the claims the PV controller hands to the
// driver and deletes them when their PVs are released, by calling the
// driver's controller service over gRPC, and keeps to the contract of the
// upstream csi-provisioner (kubernetes-csi/external-provisioner v6 on
// sig-storage-lib-external-provisioner v13), so that either may serve a
// driver.
//
// For each claim that is unbound (spec.volumeName empty), not being
// deleted, annotated volume.kubernetes.io/storage-provisioner=<driver>
// (or the beta annotation), whose StorageClass's provisioner is the driver,
// and, for a WaitForFirstConsumer class, annotated
// volume.kubernetes.io/selected-node, a pass (Sync):
//   - does nothing when the PV pvc-<claim uid> exists already;
//   - records the Normal event Provisioning ("External provisioner is
//     provisioning volume for claim \"<ns>/<name>\"");
//   - calls CreateVolume: name pvc-<claim uid>, the requested capacity,
//     one capability per access mode (fsType from the class, its mount
//     options), the class's parameters without the csi.storage.k8s.io/
//     keys, and, when the driver has topology, the accessibility
//     requirements built from the selected node's CSINode topology keys and
//     the nodes' labels (see Accessibility);
//   - creates the PV (see NewPV) and records ProvisioningSucceeded
//     ("Successfully provisioned volume pvc-<uid>"). The PV controller
//     binds it.
//
// A failure records the Warning event ProvisioningFailed with the error
// and is retried with back-off. A selected node without a CSINode, or a
// driver that answers ResourceExhausted for a claim with a selected node,
// instead removes the selected-node annotation, so that the scheduler
// chooses again. InvalidArgument is infeasible: the claim waits the longest
// back-off ("Volume provisioning failed with infeasible error. Retries
// will be delayed. ...").
//
// For each PV the driver provisioned (or a static CSI PV of the driver),
// the pass keeps the finalizer
// external-provisioner.volume.kubernetes.io/finalizer on a Bound PV whose
// reclaim policy is Delete (PVs are created with it) and takes it off
// under Retain or Recycle. A Released PV with reclaim policy Delete has
// its volume deleted (DeleteVolume; refused while a VolumeAttachment
// still names the PV, for a driver that attaches), then the PV itself,
// then the finalizer. A failed DeleteVolume records the Warning event
// VolumeFailedDelete on the PV.
//
// Failed objects are retried with exponential back-off on the clock
// (RetryStart doubling up to RetryMax); passes skip them until then, and
// Run wakes when one is due.
//
// What the caller must do: give it the driver's name, a connection to the
// driver's identity and controller services, and a client that may list
// and update PVCs, list StorageClasses, CSINodes, Nodes and
// VolumeAttachments, create, patch, get and delete PVs, and create events.
// One provisioner per driver per cluster; leader election is the caller's.
//
// What it does not do: secrets (none is read or referenced; the
// deletion-secret annotations are always empty), snapshots, clones, data
// populators (such claims are left alone without events),
// VolumeAttributesClasses, the node-local deployment mode, CSI migration,
// capacity tracking, and cleaning up after a claim deleted while its
// CreateVolume was in flight. A claim being deleted is not provisioned.
package csiprovisioner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
	"knode/internal/controller/volume/retry"
	"knode/internal/volume"
)

// Name is the controller's name in logs.
const Name = "csi-provisioner"

// Defaults of the Config durations, upstream's flag defaults where
// upstream has the flag.
const (
	DefaultResyncPeriod = time.Minute
	DefaultTimeout      = 10 * time.Second
	DefaultRetryStart   = time.Second
	DefaultRetryMax     = 5 * time.Minute
)

// cleanupAttempts is how often a volume too small for its claim is
// deleted before it is given up as orphaned.
const cleanupAttempts = 5

// Config builds a Controller.
type Config struct {
	// Driver is the CSI driver's name, the provisioner claims and classes
	// name. Required.
	Driver string
	// Conn reaches the driver's identity and controller services (a
	// *grpc.ClientConn, for one). Required.
	Conn grpc.ClientConnInterface
	// Client reads and writes claims, classes, PVs, CSINodes, Nodes,
	// VolumeAttachments and events. Required.
	Client kubernetes.Interface
	// Clock stamps events, paces Run, times out driver calls and spaces
	// retries; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Timeout bounds each driver call; 0 means DefaultTimeout.
	Timeout time.Duration
	// RetryStart and RetryMax bound the back-off of a failed object; 0
	// means DefaultRetryStart and DefaultRetryMax.
	RetryStart, RetryMax time.Duration
	// Identity goes into every PV's volume attributes
	// (storage.kubernetes.io/csiProvisionerIdentity); "" means upstream's
	// form "<unix ms at New>-<random below 10000>-<driver>".
	Identity string
	// DefaultFSType is used when a class names no fsType; "" means none
	// (upstream's --default-fstype).
	DefaultFSType string
	// ExtraCreateMetadata adds csi.storage.k8s.io/pvc/name,
	// pvc/namespace and pv/name to CreateVolume's parameters (upstream's
	// --extra-create-metadata).
	ExtraCreateMetadata bool
	// StrictTopology passes only the selected node's topology (upstream's
	// --strict-topology).
	StrictTopology bool
	// Informers, when set, is where Run takes the informers that wake it;
	// Run starts it. nil: Run builds its own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller provisions for one driver. Passes do not overlap.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	identity csi.IdentityClient
	driver   csi.ControllerClient
	rec      *events.Recorder

	mu    sync.Mutex
	caps  *Caps
	retry *retry.Backoff
}

// New checks cfg and builds a Controller. It does not call the driver.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "csiprovisioner", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	if cfg.Driver == "" {
		return nil, errors.New("csiprovisioner: Config.Driver is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("csiprovisioner: Config.Conn is required")
	}
	if err := retry.Check("csiprovisioner", &cfg.Timeout, &cfg.RetryStart, &cfg.RetryMax, DefaultTimeout, DefaultRetryStart, DefaultRetryMax); err != nil {
		return nil, err
	}
	if cfg.Identity == "" {
		cfg.Identity = fmt.Sprintf("%d-%d-%s", cfg.Clock.Now().UnixMilli(), rand.IntN(10000), cfg.Driver)
	}
	log := cfg.Logger.With("controller", Name, "driver", cfg.Driver)
	return &Controller{
		cfg:      cfg,
		log:      log,
		identity: csi.NewIdentityClient(cfg.Conn),
		driver:   csi.NewControllerClient(cfg.Conn),
		rec:      &events.Recorder{Client: cfg.Client.CoreV1(), Source: cfg.Driver, Logger: log},
		retry:    retry.New(cfg.RetryStart, cfg.RetryMax),
	}, nil
}

// pass is what one Sync has read, the lists only it needs read once.
type pass struct {
	now      time.Time
	caps     Caps
	pvs      map[string]*corev1.PersistentVolume
	csiNodes []storagev1.CSINode
	nodes    []corev1.Node
	topoRead bool
	vas      []storagev1.VolumeAttachment
	vasRead  bool
}

// Sync makes one pass at the clock's now over the claims and PVs, and
// blocks until its writes and driver calls are done. Objects waiting out
// a back-off are skipped. The error joins the failures.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	caps, err := c.capabilities(ctx)
	if err != nil {
		return err
	}
	p := &pass{now: c.cfg.Clock.Now(), caps: caps, pvs: map[string]*corev1.PersistentVolume{}}
	cs := c.cfg.Client
	claimList, err := cs.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	classList, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing storageclasses: %w", err)
	}
	pvList, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing persistentvolumes: %w", err)
	}
	classes := map[string]*storagev1.StorageClass{}
	for i := range classList.Items {
		classes[classList.Items[i].Name] = &classList.Items[i]
	}
	for i := range pvList.Items {
		p.pvs[pvList.Items[i].Name] = &pvList.Items[i]
	}
	claims := claimList.Items
	sort.Slice(claims, func(i, j int) bool {
		if claims[i].Namespace != claims[j].Namespace {
			return claims[i].Namespace < claims[j].Namespace
		}
		return claims[i].Name < claims[j].Name
	})

	live := map[string]bool{}
	var errs []error
	for i := range claims {
		claim := &claims[i]
		class := classes[volume.ClaimClass(claim)]
		should, err := ShouldProvision(c.cfg.Driver, claim, class)
		if !should && err == nil {
			continue
		}
		key := "claim/" + string(claim.UID)
		live[key] = true
		if !c.retry.Due(key, p.now) {
			continue
		}
		slow := false
		if err == nil {
			slow, err = c.provision(ctx, p, claim, class)
		}
		switch {
		case err == nil:
			c.retry.Succeeded(key)
			continue
		case slow:
			c.retry.FailedLong(key, p.now)
		default:
			c.retry.Failed(key, p.now)
		}
		errs = append(errs, fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err))
	}

	names := make([]string, 0, len(p.pvs))
	for n := range p.pvs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		pv := p.pvs[n]
		if !Responsible(c.cfg.Driver, pv) {
			continue
		}
		key := "pv/" + n
		live[key] = true
		if !c.retry.Due(key, p.now) {
			continue
		}
		if err := c.syncVolume(ctx, p, pv); err != nil {
			c.retry.Failed(key, p.now)
			errs = append(errs, fmt.Errorf("persistentvolume %s: %w", n, err))
			continue
		}
		c.retry.Succeeded(key)
	}
	c.retry.Keep(func(k string) bool { return live[k] })
	return errors.Join(errs...)
}

// capabilities asks the driver once, and remembers the answer.
func (c *Controller) capabilities(ctx context.Context) (Caps, error) {
	if c.caps != nil {
		return *c.caps, nil
	}
	cctx, cancel := retry.WithTimeout(ctx, c.cfg.Clock, c.cfg.Timeout)
	defer cancel()
	plugin, err := c.identity.GetPluginCapabilities(cctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		return Caps{}, fmt.Errorf("asking %s for its plugin capabilities: %w", c.cfg.Driver, err)
	}
	ctrl := &csi.ControllerGetCapabilitiesResponse{}
	if CapsOf(plugin, nil).ControllerService {
		if ctrl, err = c.driver.ControllerGetCapabilities(cctx, &csi.ControllerGetCapabilitiesRequest{}); err != nil {
			return Caps{}, fmt.Errorf("asking %s for its controller capabilities: %w", c.cfg.Driver, err)
		}
	}
	caps := CapsOf(plugin, ctrl)
	c.caps = &caps
	c.log.Info("driver capabilities", "createDelete", caps.CreateDelete, "topology", caps.Topology, "publishUnpublish", caps.PublishUnpublish)
	return caps, nil
}

// topology lists the CSINodes and Nodes once per pass.
func (c *Controller) topology(ctx context.Context, p *pass) error {
	if p.topoRead {
		return nil
	}
	csiNodes, err := c.cfg.Client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing csinodes: %w", err)
	}
	nodes, err := c.cfg.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	p.csiNodes, p.nodes, p.topoRead = csiNodes.Items, nodes.Items, true
	return nil
}

// attachments lists the VolumeAttachments once per pass.
func (c *Controller) attachments(ctx context.Context, p *pass) error {
	if p.vasRead {
		return nil
	}
	vas, err := c.cfg.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing volumeattachments: %w", err)
	}
	p.vas, p.vasRead = vas.Items, true
	return nil
}

// provision makes the volume and PV of claim. slow is true for a failure
// that should wait the longest back-off.
func (c *Controller) provision(ctx context.Context, p *pass, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass) (slow bool, err error) {
	if _, ok := p.pvs[VolumeName(claim)]; ok {
		return false, nil
	}
	if class.Provisioner != c.cfg.Driver || Populated(claim) {
		return false, nil
	}
	in := Input{
		Driver: c.cfg.Driver, Claim: claim, Class: class, Caps: p.caps,
		DefaultFSType: c.cfg.DefaultFSType, ExtraCreateMetadata: c.cfg.ExtraCreateMetadata, StrictTopology: c.cfg.StrictTopology,
	}
	if p.caps.Topology {
		if err := c.topology(ctx, p); err != nil {
			return false, err
		}
		in.CSINodes, in.Nodes = p.csiNodes, p.nodes
	}
	c.claimEvent(ctx, claim, corev1.EventTypeNormal, "Provisioning", fmt.Sprintf("External provisioner is provisioning volume for claim %q", claim.Namespace+"/"+claim.Name), p.now)

	prep, reschedule, err := Prepare(in)
	if err != nil {
		return false, c.failed(ctx, claim, err, reschedule, p.now)
	}
	cctx, cancel := retry.WithTimeout(ctx, c.cfg.Clock, c.cfg.Timeout)
	resp, err := c.driver.CreateVolume(cctx, prep.Request)
	cancel()
	if err != nil {
		if status.Code(err) == codes.InvalidArgument {
			c.claimEvent(ctx, claim, corev1.EventTypeWarning, "ProvisioningFailed", fmt.Sprintf("Volume provisioning failed with infeasible error. Retries will be delayed. %v", err), p.now)
			return true, err
		}
		mayReschedule := p.caps.Topology && claim.Annotations[volume.AnnSelectedNode] != ""
		return false, c.failed(ctx, claim, err, mayReschedule && status.Code(err) == codes.ResourceExhausted, p.now)
	}
	size, err := Capacity(prep.Request.CapacityRange.RequiredBytes, resp.GetVolume().GetCapacityBytes())
	if err != nil {
		if cerr := c.cleanup(ctx, resp.GetVolume().GetVolumeId()); cerr != nil {
			err = fmt.Errorf("%v. Cleanup of volume %s failed, volume is orphaned: %v", err, prep.Request.Name, cerr)
		}
		return false, c.failed(ctx, claim, err, false, p.now)
	}
	pv := NewPV(in, prep, resp.GetVolume(), size, c.cfg.Identity)
	if _, err := c.cfg.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		// The volume stays: the next attempt's CreateVolume of the same
		// name finds it again.
		return false, fmt.Errorf("error saving volume %s: %s", pv.Name, err)
	}
	c.log.Info("provisioned", "claim", claim.Namespace+"/"+claim.Name, "pv", pv.Name, "volume", pv.Spec.CSI.VolumeHandle)
	c.claimEvent(ctx, claim, corev1.EventTypeNormal, "ProvisioningSucceeded", "Successfully provisioned volume "+pv.Name, p.now)
	return false, nil
}

// failed records ProvisioningFailed with err. When reschedule is asked
// and the claim has a selected node, it removes the annotation, so the
// scheduler chooses again, and the claim is done with for now (nil);
// otherwise err is returned for a retry.
func (c *Controller) failed(ctx context.Context, claim *corev1.PersistentVolumeClaim, err error, reschedule bool, now time.Time) error {
	c.claimEvent(ctx, claim, corev1.EventTypeWarning, "ProvisioningFailed", err.Error(), now)
	if _, ok := claim.Annotations[volume.AnnSelectedNode]; !ok || !reschedule {
		return err
	}
	next := claim.DeepCopy()
	delete(next.Annotations, volume.AnnSelectedNode)
	if _, uerr := c.cfg.Client.CoreV1().PersistentVolumeClaims(next.Namespace).Update(ctx, next, metav1.UpdateOptions{}); uerr != nil {
		c.log.Info("volume rescheduling failed", "claim", claim.Namespace+"/"+claim.Name, "err", uerr)
		return err
	}
	c.log.Info("volume rescheduled", "claim", claim.Namespace+"/"+claim.Name, "because", err)
	return nil
}

// cleanup deletes a volume that will get no PV, trying a few times.
func (c *Controller) cleanup(ctx context.Context, id string) error {
	cctx, cancel := retry.WithTimeout(ctx, c.cfg.Clock, c.cfg.Timeout)
	defer cancel()
	var err error
	for range cleanupAttempts {
		if _, err = c.driver.DeleteVolume(cctx, &csi.DeleteVolumeRequest{VolumeId: id}); err == nil {
			return nil
		}
	}
	return err
}

// syncVolume keeps pv's deletion finalizer and deletes a released
// volume.
func (c *Controller) syncVolume(ctx context.Context, p *pass, pv *corev1.PersistentVolume) error {
	if finalizers, changed := Finalizers(pv); changed {
		updated, err := c.patchFinalizers(ctx, pv, finalizers)
		if err != nil {
			return fmt.Errorf("failed to modify finalizers to %+v on volume %s err: %+v", finalizers, pv.Name, err)
		}
		pv = updated
	}
	if !ShouldDelete(pv) {
		return nil
	}
	if p.caps.PublishUnpublish {
		if err := c.attachments(ctx, p); err != nil {
			return err
		}
	}
	req, err := DeleteRequest(pv, p.caps, p.vas)
	if err == nil {
		cctx, cancel := retry.WithTimeout(ctx, c.cfg.Clock, c.cfg.Timeout)
		_, err = c.driver.DeleteVolume(cctx, req)
		cancel()
	}
	if err != nil {
		ref := corev1.ObjectReference{Kind: "PersistentVolume", APIVersion: "v1", Name: pv.Name, UID: pv.UID, ResourceVersion: pv.ResourceVersion}
		c.rec.Record(ctx, ref, metav1.NamespaceDefault, corev1.EventTypeWarning, "VolumeFailedDelete", err.Error(), p.now)
		return err
	}
	c.log.Info("deleted volume", "pv", pv.Name, "volume", req.VolumeId)
	pvs := c.cfg.Client.CoreV1().PersistentVolumes()
	if err := pvs.Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting persistentvolume: %w", err)
	}
	// The delete stamped deletionTimestamp: read the PV again before
	// taking the finalizer off.
	current, err := pvs.Get(ctx, pv.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	finalizers := make([]string, 0, len(current.Finalizers))
	for _, f := range current.Finalizers {
		if f != volume.ProvisionerDeletionFinalizer {
			finalizers = append(finalizers, f)
		}
	}
	if len(finalizers) == len(current.Finalizers) {
		return nil
	}
	if len(finalizers) == 0 {
		finalizers = nil
	}
	if _, err := c.patchFinalizers(ctx, current, finalizers); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	return nil
}

// patchFinalizers sets pv's finalizers with a strategic merge patch.
func (c *Controller) patchFinalizers(ctx context.Context, pv *corev1.PersistentVolume, finalizers []string) (*corev1.PersistentVolume, error) {
	from, err := json.Marshal(pv)
	if err != nil {
		return nil, err
	}
	next := pv.DeepCopy()
	next.Finalizers = finalizers
	to, err := json.Marshal(next)
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(from, to, &corev1.PersistentVolume{})
	if err != nil {
		return nil, err
	}
	return c.cfg.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
}

// claimEvent records one event about claim.
func (c *Controller) claimEvent(ctx context.Context, claim *corev1.PersistentVolumeClaim, typ, reason, msg string, now time.Time) {
	ref := corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion}
	c.rec.Record(ctx, ref, claim.Namespace, typ, reason, msg, now)
}

// nextDue is when the earliest back-off ends; zero when none waits.
func (c *Controller) nextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retry.Next()
}

// Run passes at once, then whenever a claim, PV, StorageClass or CSINode
// changes, when a back-off ends, and at least every ResyncPeriod, until
// ctx ends. Errors are logged.
func (c *Controller) Run(ctx context.Context) {
	factory := c.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.cfg.Client, 0)
	}
	loop.Run(ctx, loop.Config{
		Clock:  c.cfg.Clock,
		Resync: c.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{
			factory.Core().V1().PersistentVolumeClaims().Informer(),
			factory.Core().V1().PersistentVolumes().Informer(),
			factory.Storage().V1().StorageClasses().Informer(),
			factory.Storage().V1().CSINodes().Informer(),
		},
		Start:   factory.Start,
		Sync:    c.Sync,
		NextDue: c.nextDue,
		Logger:  c.log,
		Name:    Name,
	})
}
