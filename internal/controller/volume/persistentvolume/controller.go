// Package persistentvolume is the PersistentVolume controller (upstream's
// "persistentvolume-binder"): it binds PersistentVolumeClaims to
// PersistentVolumes, hands claims to external provisioners, keeps both
// kinds' phases, and applies the reclaim policy of volumes whose claim is
// gone.
//
// A pass (Sync) reads every PV, PVC and StorageClass through the API and
// then, volumes first (so that a new volume is Available before the claims
// look for one):
//   - for each volume (DecideVolume): Available while unclaimed or only
//     pre-bound, Bound with its claim, Released when its claim is gone
//     (deleted, or replaced by a claim of another UID), then the reclaim
//     policy (Reclaim): Retain keeps it, Delete leaves it to the external
//     provisioner that made it (as upstream, with no event), anything knode
//     cannot delete goes Failed. A Released volume whose claimRef the
//     administrator removes is Available again;
//   - for each claim (DecideClaim): binds it to the smallest matching
//     Available volume or to the volume pre-bound to it (FindVolume), or to
//     the volume it names; gives a claim without any class the default
//     class (as upstream does since 1.28, only when the claim names none);
//     marks a claim whose class has an external provisioner with
//     volume.kubernetes.io/storage-provisioner and its beta twin, with the
//     ExternalProvisioning event, and binds the PV that provisioner
//     creates (it carries a claimRef to the claim); makes
//     WaitForFirstConsumer claims wait, with the WaitForFirstConsumer event,
//     until the scheduler sets volume.kubernetes.io/selected-node (to
//     provision) or pre-binds a PV's claimRef (which the pass completes);
//     and marks claims whose volume is gone or taken Lost (ClaimLost,
//     ClaimMisbound).
//
// Binding writes, in upstream's order, the PV's claimRef (with the claim's
// UID) and pv.kubernetes.io/bound-by-controller, its phase Bound, the
// claim's spec.volumeName with pv.kubernetes.io/bind-completed (and
// bound-by-controller when the controller chose the volume), then the
// claim's status (phase Bound, accessModes and capacity from the volume).
// A PV's status.lastPhaseTransitionTime is the pass's clock time whenever
// the pass changes its phase. Each write uses the object's resourceVersion;
// a conflict is left to the next pass.
//
// Events (source "persistentvolume-controller"), upstream's reasons and
// messages: on claims FailedBinding, VolumeMismatch, ProvisioningFailed,
// ExternalProvisioning, WaitForFirstConsumer, WaitForPodScheduled,
// ClaimLost and ClaimMisbound; on volumes VolumeMismatch,
// VolumeFailedDelete, VolumeFailedRecycle and VolumeUnknownReclaimPolicy.
// The events upstream repeats on every pass (all but the phase changes')
// are recorded once for as long as consecutive passes keep wanting them,
// since knode's recorder does not aggregate repeats.
//
// What the caller must do: give it a client that may list and get
// PersistentVolumes, PersistentVolumeClaims, StorageClasses and pods,
// update PVs, PVCs and their status, and create events; call Sync for one
// deterministic pass on the injected clock, or Run. One controller per
// cluster (leader election is the caller's).
//
// Cost model: a pass lists PVs, PVCs and StorageClasses once (and pods only
// while a WaitForFirstConsumer claim waits), gets a claim or volume live
// only before declaring it gone, and writes only what changes; matching is
// O(volumes) per unbound claim. Run coalesces the changes it hears of into
// at most one pending pass.
//
// What it does not do: in-tree volume plugins (so no in-tree provisioning,
// deleting or recycling: such volumes go Failed with upstream's events),
// CSI migration, the Recycle policy's in-use check, and the provisioning
// and deletion metrics. Matching compares volumeAttributesClassName as
// upstream does with that feature gate on; while knode's API drops the
// field (the gate off), it is empty on both sides.
package persistentvolume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
	"knode/internal/volume"
)

// Name is the controller's name in logs.
const Name = "persistentvolume-binder-controller"

// EventSource is the component upstream's PV controller writes into its
// events' source.
const EventSource = "persistentvolume-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens,
// upstream's --pvclaimbinder-sync-period default.
const DefaultResyncPeriod = 15 * time.Second

// Config builds a Controller.
type Config struct {
	// Client reads and writes PVs, PVCs, StorageClasses, pods and events.
	// Required.
	Client kubernetes.Interface
	// Clock gives now and paces Run; zero value means the real clock.
	Clock clock.WithTicker
	// ResyncPeriod is the longest Run waits between passes; 0 means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Informers, when set, is where Run takes the informers that wake it
	// (shared with other controllers); Run starts it. nil: Run builds its
	// own. Sync never uses it.
	Informers informers.SharedInformerFactory
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Controller binds claims and volumes. Passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger
	rec *events.Recorder

	mu sync.Mutex
	// recorded holds the repeating events the last pass wanted (see the
	// package documentation); wanted collects this pass's.
	recorded, wanted map[string]bool
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "persistentvolume", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	return &Controller{
		cfg: cfg, log: log,
		rec:      &events.Recorder{Client: cfg.Client.CoreV1(), Source: EventSource, Logger: log},
		recorded: map[string]bool{},
	}, nil
}

// Sync makes one pass over every volume, then every claim, at the clock's
// now, and blocks until its writes are done. The error joins the failures
// other than write conflicts; each is retried by the next pass.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	st, err := c.read(ctx)
	if err != nil {
		return err
	}
	c.wanted = map[string]bool{}

	var errs []error
	keep := func(err error) {
		if err == nil {
			return
		}
		if apierrors.IsConflict(err) {
			c.log.Debug("write conflict; the next pass retries", "err", err)
			return
		}
		errs = append(errs, err)
	}
	// Volumes first, so that a new volume is Available before the claims
	// look for one.
	for _, pv := range st.sortedVolumes() {
		keep(c.syncVolume(ctx, st, pv, now))
	}
	claims := make([]*corev1.PersistentVolumeClaim, 0, len(st.Claims))
	for _, claim := range st.Claims {
		claims = append(claims, claim)
	}
	sort.Slice(claims, func(i, j int) bool { return ClaimKey(claims[i]) < ClaimKey(claims[j]) })
	for _, claim := range claims {
		keep(c.syncClaim(ctx, st, claim, now))
	}
	c.recorded = c.wanted
	return errors.Join(errs...)
}

// read builds the pass's State. Before a volume's claim or a bound claim's
// volume is taken as gone, it is looked up live, so that a list taken just
// before it was created does not release a volume or lose a claim.
func (c *Controller) read(ctx context.Context) (*State, error) {
	core := c.cfg.Client.CoreV1()
	pvs, err := core.PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing persistentvolumes: %w", err)
	}
	pvcs, err := core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	scs, err := c.cfg.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing storageclasses: %w", err)
	}
	st := &State{
		Volumes: make(map[string]*corev1.PersistentVolume, len(pvs.Items)),
		Claims:  make(map[string]*corev1.PersistentVolumeClaim, len(pvcs.Items)),
		Classes: make(map[string]*storagev1.StorageClass, len(scs.Items)),
	}
	for i := range pvs.Items {
		st.Volumes[pvs.Items[i].Name] = &pvs.Items[i]
	}
	for i := range pvcs.Items {
		st.Claims[ClaimKey(&pvcs.Items[i])] = &pvcs.Items[i]
	}
	for i := range scs.Items {
		st.Classes[scs.Items[i].Name] = &scs.Items[i]
	}

	for _, pv := range st.sortedVolumes() {
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.UID == "" {
			continue
		}
		claim := st.Claims[refKey(ref)]
		missing := claim == nil && pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed
		if !missing && (claim == nil || claim.UID == ref.UID) {
			continue
		}
		live, err := core.PersistentVolumeClaims(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			delete(st.Claims, refKey(ref))
		case err != nil:
			return nil, fmt.Errorf("getting persistentvolumeclaim %s: %w", refKey(ref), err)
		default:
			st.Claims[refKey(ref)] = live
		}
	}
	for _, claim := range st.Claims {
		name := claim.Spec.VolumeName
		if name == "" || st.Volumes[name] != nil || claim.Status.Phase == corev1.ClaimLost || !metav1.HasAnnotation(claim.ObjectMeta, volume.AnnBindCompleted) {
			continue
		}
		live, err := core.PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("getting persistentvolume %s: %w", name, err)
		default:
			st.Volumes[name] = live
		}
	}

	if waiting(st) {
		pods, err := core.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
		st.Unscheduled = UnscheduledUsers(pods.Items)
	}
	return st, nil
}

// waiting reports whether some claim may wait for its first consumer, so
// that the pass needs the pods to say which.
func waiting(st *State) bool {
	for _, claim := range st.Claims {
		if claim.Spec.VolumeName != "" || metav1.HasAnnotation(claim.ObjectMeta, volume.AnnBindCompleted) {
			continue
		}
		if _, ok := claim.Annotations[volume.AnnSelectedNode]; ok {
			continue
		}
		if delay, err := delayBinding(st, claim); err == nil && delay {
			return true
		}
	}
	return false
}

// UnscheduledUsers maps each claim's "namespace/name" to the sorted names
// of the pods that use it (as a persistentVolumeClaim or a generic
// ephemeral volume), are not yet scheduled and are not terminated.
func UnscheduledUsers(pods []corev1.Pod) map[string][]string {
	out := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" || Terminated(p) {
			continue
		}
		seen := map[string]bool{}
		for _, v := range p.Spec.Volumes {
			var name string
			switch {
			case v.PersistentVolumeClaim != nil:
				name = v.PersistentVolumeClaim.ClaimName
			case v.Ephemeral != nil:
				name = p.Name + "-" + v.Name
			default:
				continue
			}
			if !seen[name] {
				seen[name] = true
				key := p.Namespace + "/" + name
				out[key] = append(out[key], p.Name)
			}
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

// Terminated reports whether the pod will run no more: it Succeeded or
// Failed, or it is being deleted and none of its containers is running.
func Terminated(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	if p.DeletionTimestamp == nil {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Terminated == nil && cs.State.Waiting == nil {
			return false
		}
	}
	return true
}

// record writes ev; a repeating event only when the last pass did not
// want it too.
func (c *Controller) record(ctx context.Context, ev Event, repeating bool, now time.Time) {
	if repeating {
		key := string(ev.On.UID) + "\x00" + ev.On.Kind + "\x00" + ev.On.Namespace + "\x00" + ev.On.Name + "\x00" + ev.Reason + "\x00" + ev.Message
		c.wanted[key] = true
		if c.recorded[key] {
			return
		}
	}
	ns := ev.On.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	c.rec.Record(ctx, ev.On, ns, ev.Type, ev.Reason, ev.Message, now)
}

// syncClaim carries out DecideClaim for one claim, keeping st current.
func (c *Controller) syncClaim(ctx context.Context, st *State, claim *corev1.PersistentVolumeClaim, now time.Time) error {
	plan := DecideClaim(st, claim)
	for _, ev := range plan.Events {
		c.record(ctx, ev, true, now)
	}
	pvcs := c.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace)
	var err error
	switch {
	case plan.AssignClass != "":
		updated := claim.DeepCopy()
		updated.Spec.StorageClassName = &plan.AssignClass
		if updated, err = pvcs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("assigning storage class %s to persistentvolumeclaim %s: %w", plan.AssignClass, ClaimKey(claim), err)
		}
		c.log.Info("assigned the default storage class", "claim", ClaimKey(claim), "class", plan.AssignClass)
		st.Claims[ClaimKey(claim)] = updated
		return plan.Err
	case plan.Bind != "":
		if err := c.bind(ctx, st, st.Volumes[plan.Bind], claim, now); err != nil {
			return err
		}
	case plan.Provisioner != "":
		if claim.Annotations[volume.AnnStorageProvisioner] != plan.Provisioner {
			updated := claim.DeepCopy()
			metav1.SetMetaDataAnnotation(&updated.ObjectMeta, volume.AnnBetaStorageProvisioner, plan.Provisioner)
			metav1.SetMetaDataAnnotation(&updated.ObjectMeta, volume.AnnStorageProvisioner, plan.Provisioner)
			if updated, err = pvcs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				c.record(ctx, Event{On: ClaimRef(claim), Type: corev1.EventTypeWarning, Reason: ReasonProvisioningFailed,
					Message: fmt.Sprintf("Error saving claim: %v", err)}, true, now)
				return fmt.Errorf("setting the provisioner of persistentvolumeclaim %s: %w", ClaimKey(claim), err)
			}
			claim = updated
			st.Claims[ClaimKey(claim)] = claim
		}
		c.record(ctx, Event{On: ClaimRef(claim), Type: corev1.EventTypeNormal, Reason: ReasonExternalProvisioning,
			Message: ExternalProvisioningMessage(plan.Provisioner)}, true, now)
	}
	if plan.Phase != "" {
		status, changed := ClaimStatus(claim, plan.Phase, nil)
		if changed {
			updated := claim.DeepCopy()
			updated.Status = status
			if updated, err = pvcs.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("updating status of persistentvolumeclaim %s: %w", ClaimKey(claim), err)
			}
			st.Claims[ClaimKey(claim)] = updated
			c.log.Info("claim entered phase", "claim", ClaimKey(claim), "phase", plan.Phase)
			if plan.PhaseEvent != nil {
				c.record(ctx, *plan.PhaseEvent, false, now)
			}
		}
	}
	return plan.Err
}

// bind writes the binding of pv and claim in upstream's order, each step
// only if it changes something, and stops at the first failure (the next
// pass resumes it).
func (c *Controller) bind(ctx context.Context, st *State, pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim, now time.Time) error {
	core := c.cfg.Client.CoreV1()
	var err error
	if updated, changed := BindVolume(pv, claim); changed {
		if pv, err = core.PersistentVolumes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("binding persistentvolume %s to %s: %w", updated.Name, ClaimKey(claim), err)
		}
		st.Volumes[pv.Name] = pv
	}
	if updated, changed := VolumePhase(pv, corev1.VolumeBound, "", now); changed {
		if pv, err = core.PersistentVolumes().UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating status of persistentvolume %s: %w", updated.Name, err)
		}
		st.Volumes[pv.Name] = pv
	}
	pvcs := core.PersistentVolumeClaims(claim.Namespace)
	if updated, changed := BindClaim(claim, pv); changed {
		if claim, err = pvcs.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("binding persistentvolumeclaim %s to %s: %w", ClaimKey(updated), pv.Name, err)
		}
		st.Claims[ClaimKey(claim)] = claim
		c.log.Info("volume bound to claim", "claim", ClaimKey(claim), "volume", pv.Name)
	}
	if status, changed := ClaimStatus(claim, corev1.ClaimBound, pv); changed {
		updated := claim.DeepCopy()
		updated.Status = status
		if claim, err = pvcs.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating status of persistentvolumeclaim %s: %w", ClaimKey(updated), err)
		}
		st.Claims[ClaimKey(claim)] = claim
	}
	return nil
}

// syncVolume carries out DecideVolume for one volume, keeping st current.
func (c *Controller) syncVolume(ctx context.Context, st *State, pv *corev1.PersistentVolume, now time.Time) error {
	plan := DecideVolume(st, pv)
	for _, ev := range plan.Events {
		c.record(ctx, ev, true, now)
	}
	pvs := c.cfg.Client.CoreV1().PersistentVolumes()
	if plan.Unbind {
		updated, err := pvs.Update(ctx, UnbindVolume(pv), metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("unbinding persistentvolume %s: %w", pv.Name, err)
		}
		pv = updated
		st.Volumes[pv.Name] = pv
	}
	for _, ch := range plan.Phases {
		updated, changed := VolumePhase(pv, ch.Phase, ch.Message, now)
		if !changed {
			continue
		}
		written, err := pvs.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("updating status of persistentvolume %s: %w", updated.Name, err)
		}
		pv = written
		st.Volumes[pv.Name] = pv
		c.log.Info("volume entered phase", "volume", pv.Name, "phase", ch.Phase)
		if ch.Event != nil {
			c.record(ctx, *ch.Event, false, now)
		}
	}
	return nil
}

// Run passes at once, then whenever a PV, PVC or StorageClass changes, and
// at least every ResyncPeriod, until ctx ends. Errors are logged.
func (c *Controller) Run(ctx context.Context) {
	factory := c.cfg.Informers
	if factory == nil {
		factory = informers.NewSharedInformerFactory(c.cfg.Client, 0)
	}
	loop.Run(ctx, loop.Config{
		Clock:  c.cfg.Clock,
		Resync: c.cfg.ResyncPeriod,
		Informers: []cache.SharedIndexInformer{
			factory.Core().V1().PersistentVolumes().Informer(),
			factory.Core().V1().PersistentVolumeClaims().Informer(),
			factory.Storage().V1().StorageClasses().Informer(),
		},
		Start:  factory.Start,
		Sync:   c.Sync,
		Logger: c.log,
		Name:   "persistentvolume",
	})
}
