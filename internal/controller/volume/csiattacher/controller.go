// Package csiattacher is knode's own external attacher for one CSI driver:
// it attaches and detaches the volumes of the VolumeAttachments whose
// spec.attacher is that driver, by calling the driver's controller service
// over gRPC, and keeps to the contract of the upstream csi-attacher
// (kubernetes-csi/external-attacher v4), so that either may serve a
// driver.
//
// For each VolumeAttachment of the driver a pass (Sync):
//   - not being deleted and not yet attached: adds the finalizer
//     external-attacher/<driver> to its PV (a JSON patch), refusing a PV
//     being deleted; finds the node's ID in CSINode.spec.drivers[]; adds
//     the same finalizer and the annotation csi.alpha.kubernetes.io/node-id
//     to the VolumeAttachment (a merge patch); calls
//     ControllerPublishVolume (the PV's volume handle and attributes, the
//     capability from its access modes, volume mode, fsType and mount
//     options, readonly only when the driver has PUBLISH_READONLY, no
//     secrets); and sets status.attached=true and
//     status.attachmentMetadata to the publish context through the status
//     subresource. Any failure is written to status.attachError {time,
//     message, errorCode (the gRPC code, when there is one)};
//   - being deleted and carrying the finalizer: calls
//     ControllerUnpublishVolume (the node ID falls back to the annotation
//     when the CSINode is gone), then drops the finalizer and clears
//     status.attached, attachmentMetadata and detachError; a failure is
//     written to status.detachError.
//
// A driver without PUBLISH_UNPUBLISH_VOLUME (or without a controller
// service) is never called: its VolumeAttachments are marked attached with
// no finalizer, and their deletion needs nothing.
//
// For each PV being deleted that carries the finalizer and that no
// VolumeAttachment names any more, the pass removes the finalizer. As
// upstream, the PV keeps the finalizer while it is not being deleted, even
// after its last detach.
//
// A VolumeAttachment (or PV) whose step failed is retried with exponential
// back-off on the clock (RetryStart doubling up to RetryMax); passes skip
// it until then, and Run wakes when it is due.
//
// What the caller must do: give it the driver's name, a connection to the
// driver's identity and controller services, and a client that may list
// VolumeAttachments, PersistentVolumes and CSINodes, patch
// VolumeAttachments and their status, and patch PersistentVolumes. One
// attacher per driver per cluster; leader election is the caller's.
//
// What it does not do: secrets (ControllerPublishSecretRef is ignored),
// the reconciliation with ListVolumes' published nodes, CSI migration of
// in-tree volumes, and events (upstream records none either).
package csiattacher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/loop"
	"knode/internal/controller/volume/retry"
	"knode/internal/volume"
)

// Name is the controller's name in logs.
const Name = "csi-attacher"

// Defaults of the Config durations, upstream's flag defaults where
// upstream has the flag.
const (
	DefaultResyncPeriod = time.Minute
	DefaultTimeout      = 15 * time.Second
	DefaultRetryStart   = time.Second
	DefaultRetryMax     = 5 * time.Minute
)

// Config builds a Controller.
type Config struct {
	// Driver is the CSI driver's name: the spec.attacher of the
	// VolumeAttachments this controller serves. Required.
	Driver string
	// Conn reaches the driver's identity and controller services (a
	// *grpc.ClientConn, for one). Required.
	Conn grpc.ClientConnInterface
	// Client reads and writes VolumeAttachments, PVs and CSINodes.
	// Required.
	Client kubernetes.Interface
	// Clock stamps errors, paces Run, times out driver calls and spaces
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
	// DefaultFSType is published for a mount volume whose PV names no
	// fsType; "" sends none (upstream's --default-fstype).
	DefaultFSType string
	// Informers, when set, is where Run takes the informers that wake it;
	// Run starts it. nil: Run builds its own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller attaches for one driver. Passes do not overlap.
type Controller struct {
	cfg      Config
	log      *slog.Logger
	identity csi.IdentityClient
	driver   csi.ControllerClient

	mu    sync.Mutex
	caps  *Caps
	retry *retry.Backoff
}

// New checks cfg and builds a Controller. It does not call the driver.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "csiattacher", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	if cfg.Driver == "" {
		return nil, errors.New("csiattacher: Config.Driver is required")
	}
	if cfg.Conn == nil {
		return nil, errors.New("csiattacher: Config.Conn is required")
	}
	if err := retry.Check("csiattacher", &cfg.Timeout, &cfg.RetryStart, &cfg.RetryMax, DefaultTimeout, DefaultRetryStart, DefaultRetryMax); err != nil {
		return nil, err
	}
	return &Controller{
		cfg:      cfg,
		log:      cfg.Logger.With("controller", Name, "driver", cfg.Driver),
		identity: csi.NewIdentityClient(cfg.Conn),
		driver:   csi.NewControllerClient(cfg.Conn),
		retry:    retry.New(cfg.RetryStart, cfg.RetryMax),
	}, nil
}

// Sync makes one pass at the clock's now over the driver's
// VolumeAttachments and the PVs they hold, and blocks until its writes
// and driver calls are done. Objects waiting out a back-off are skipped.
// The error joins the failures.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	caps, err := c.capabilities(ctx)
	if err != nil {
		return err
	}
	cs := c.cfg.Client
	vaList, err := cs.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing volumeattachments: %w", err)
	}
	pvList, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing persistentvolumes: %w", err)
	}
	nodeList, err := cs.StorageV1().CSINodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing csinodes: %w", err)
	}
	pvs := map[string]*corev1.PersistentVolume{}
	for i := range pvList.Items {
		pvs[pvList.Items[i].Name] = &pvList.Items[i]
	}
	csiNodes := map[string]*storagev1.CSINode{}
	for i := range nodeList.Items {
		csiNodes[nodeList.Items[i].Name] = &nodeList.Items[i]
	}
	vas := vaList.Items
	sort.Slice(vas, func(i, j int) bool { return vas[i].Name < vas[j].Name })

	live := map[string]bool{}
	var errs []error
	for i := range vas {
		va := &vas[i]
		if va.Spec.Attacher != c.cfg.Driver {
			continue
		}
		key := "va/" + va.Name
		live[key] = true
		if !c.retry.Due(key, now) {
			continue
		}
		var pv *corev1.PersistentVolume
		if n := va.Spec.Source.PersistentVolumeName; n != nil {
			pv = pvs[*n]
		}
		csiNode := csiNodes[va.Spec.NodeName]
		if va.DeletionTimestamp == nil {
			err = c.attach(ctx, va, pv, csiNode, caps, now)
		} else {
			err = c.detach(ctx, va, pv, csiNode, now)
		}
		if err != nil {
			c.retry.Failed(key, now)
			errs = append(errs, fmt.Errorf("volumeattachment %s: %w", va.Name, err))
		} else {
			c.retry.Succeeded(key)
		}
	}

	names := make([]string, 0, len(pvs))
	for n := range pvs {
		names = append(names, n)
	}
	sort.Strings(names)
	finalizer := volume.AttacherFinalizer(c.cfg.Driver)
	for _, n := range names {
		pv := pvs[n]
		if !ReleasePV(c.cfg.Driver, pv, vas) {
			continue
		}
		key := "pv/" + n
		live[key] = true
		if !c.retry.Due(key, now) {
			continue
		}
		patch, _ := RemoveFinalizerPatch(pv.Finalizers, finalizer)
		if _, err := cs.CoreV1().PersistentVolumes().Patch(ctx, n, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			c.retry.Failed(key, now)
			errs = append(errs, fmt.Errorf("removing finalizer from persistentvolume %s: %w", n, err))
			continue
		}
		c.retry.Succeeded(key)
		c.log.Info("removed finalizer from persistentvolume", "pv", n)
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
	var caps Caps
	for _, pc := range plugin.GetCapabilities() {
		if pc.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
			resp, err := c.driver.ControllerGetCapabilities(cctx, &csi.ControllerGetCapabilitiesRequest{})
			if err != nil {
				return Caps{}, fmt.Errorf("asking %s for its controller capabilities: %w", c.cfg.Driver, err)
			}
			caps = CapsOf(resp)
			break
		}
	}
	c.caps = &caps
	c.log.Info("driver capabilities", "publishUnpublish", caps.PublishUnpublish, "publishReadonly", caps.PublishReadonly, "singleNodeMultiWriter", caps.SingleNodeMultiWriter)
	return caps, nil
}

// attach runs PlanAttach's steps for va.
func (c *Controller) attach(ctx context.Context, va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume, csiNode *storagev1.CSINode, caps Caps, now time.Time) error {
	plan := PlanAttach(c.cfg.Driver, va, pv, csiNode, caps, c.cfg.DefaultFSType)
	switch {
	case plan.Done:
		return nil
	case plan.Trivial:
		return c.markAttached(ctx, va, nil)
	}
	if plan.PVFinalizer {
		patch := AddFinalizerPatch(pv.Finalizers, volume.AttacherFinalizer(c.cfg.Driver))
		if _, err := c.cfg.Client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			plan.Err = fmt.Errorf("could not add PersistentVolume finalizer: %s", err)
		}
	}
	if plan.Err != nil {
		return c.attachFailed(ctx, va, plan.Err, now)
	}
	if plan.Meta != nil {
		updated, err := c.patch(ctx, va, plan.Meta)
		if err != nil {
			return c.attachFailed(ctx, va, fmt.Errorf("could not save VolumeAttachment: %s", err), now)
		}
		va = updated
	}
	cctx, cancel := retry.WithTimeout(ctx, c.cfg.Clock, c.cfg.Timeout)
	resp, err := c.driver.ControllerPublishVolume(cctx, plan.Request)
	cancel()
	if err != nil {
		return c.attachFailed(ctx, va, err, now)
	}
	c.log.Info("attached", "va", va.Name, "volume", plan.Request.VolumeId, "node", plan.Request.NodeId)
	return c.markAttached(ctx, va, resp.GetPublishContext())
}

// markAttached sets status.attached with metadata and clears attachError.
func (c *Controller) markAttached(ctx context.Context, va *storagev1.VolumeAttachment, metadata map[string]string) error {
	next := va.DeepCopy()
	next.Status.Attached = true
	next.Status.AttachmentMetadata = metadata
	next.Status.AttachError = nil
	if _, err := c.patch(ctx, va, next, "status"); err != nil {
		return fmt.Errorf("failed to mark as attached: %w", err)
	}
	return nil
}

// attachFailed records cause as status.attachError and returns it.
func (c *Controller) attachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error, now time.Time) error {
	next := va.DeepCopy()
	next.Status.AttachError = volumeError(cause, now, true)
	if _, err := c.patch(ctx, va, next, "status"); err != nil {
		c.log.Warn("saving attach error failed", "va", va.Name, "err", err)
	}
	return fmt.Errorf("failed to attach: %s", cause)
}

// detach runs PlanDetach's steps for va.
func (c *Controller) detach(ctx context.Context, va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume, csiNode *storagev1.CSINode, now time.Time) error {
	plan := PlanDetach(c.cfg.Driver, va, pv, csiNode)
	if plan.Done {
		return nil
	}
	if plan.Err != nil {
		return c.detachFailed(ctx, va, plan.Err, now)
	}
	cctx, cancel := retry.WithTimeout(ctx, c.cfg.Clock, c.cfg.Timeout)
	_, err := c.driver.ControllerUnpublishVolume(cctx, plan.Request)
	cancel()
	if err != nil {
		return c.detachFailed(ctx, va, err, now)
	}
	c.log.Info("detached", "va", va.Name, "volume", plan.Request.VolumeId, "node", plan.Request.NodeId)
	// The finalizer goes first: without it a VolumeAttachment being
	// deleted counts as detached whatever its status says, while
	// attached=false with the finalizer would mean "maybe attached".
	if next, had := WithoutFinalizer(c.cfg.Driver, va); had {
		updated, err := c.patch(ctx, va, next)
		if err != nil {
			return c.detachFailed(ctx, va, fmt.Errorf("could not mark as detached: %s", err), now)
		}
		va = updated
	}
	next := va.DeepCopy()
	next.Status.Attached = false
	next.Status.AttachmentMetadata = nil
	next.Status.DetachError = nil
	if _, err := c.patch(ctx, va, next, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("could not mark as detached: %w", err)
	}
	return nil
}

// detachFailed records cause as status.detachError and returns it.
func (c *Controller) detachFailed(ctx context.Context, va *storagev1.VolumeAttachment, cause error, now time.Time) error {
	next := va.DeepCopy()
	next.Status.DetachError = volumeError(cause, now, false)
	if _, err := c.patch(ctx, va, next, "status"); err != nil {
		c.log.Warn("saving detach error failed", "va", va.Name, "err", err)
	}
	return fmt.Errorf("failed to detach: %s", cause)
}

// volumeError is the status error for err at now; withCode adds the gRPC
// code when err carries one (upstream sets it on attach errors only).
func volumeError(err error, now time.Time, withCode bool) *storagev1.VolumeError {
	ve := &storagev1.VolumeError{Message: err.Error(), Time: metav1.NewTime(now)}
	if withCode {
		if st, ok := status.FromError(err); ok {
			code := int32(st.Code())
			ve.ErrorCode = &code
		}
	}
	return ve
}

// patch writes the merge patch from va to next, to the subresources
// given.
func (c *Controller) patch(ctx context.Context, va, next *storagev1.VolumeAttachment, subresources ...string) (*storagev1.VolumeAttachment, error) {
	body, err := MergePatch(va, next)
	if err != nil {
		return nil, err
	}
	return c.cfg.Client.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, body, metav1.PatchOptions{}, subresources...)
}

// nextDue is when the earliest back-off ends; zero when none waits.
func (c *Controller) nextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.retry.Next()
}

// Run passes at once, then whenever a VolumeAttachment, PV or CSINode
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
			factory.Storage().V1().VolumeAttachments().Informer(),
			factory.Core().V1().PersistentVolumes().Informer(),
			factory.Storage().V1().CSINodes().Informer(),
		},
		Start:   factory.Start,
		Sync:    c.Sync,
		NextDue: c.nextDue,
		Logger:  c.log,
		Name:    Name,
	})
}
