package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"knode/internal/volume"
)

// bindTimeout is how long a pod waits, after the scheduler's volume
// writes, for its claims to be bound: upstream's default
// bindTimeoutSeconds.
const bindTimeout = 10 * time.Minute

// volumeBindingPlugin names the step in PreBind failures, as upstream's
// messages do.
const volumeBindingPlugin = "VolumeBinding"

// volumeWait is a pod whose volume writes went through, waiting for its
// claims to be bound until deadline.
type volumeWait struct {
	o        outcome
	deadline time.Time
}

// reserveVolumes makes the plan for the pod's unbound claims on node and
// assumes it in the snapshot, so that the next decisions see the volumes
// taken and the claims given their node. Call it under mu.
func (s *Scheduler) reserveVolumes(vols *podVolumes, node string) *volumePlan {
	n := s.snap.Node(node)
	if n == nil {
		return nil
	}
	p := vols.plan(n.Node)
	if p == nil {
		return nil
	}
	for _, b := range p.bindings {
		if b.write {
			s.snap.assumeVolume(b.pv)
		}
	}
	for _, pr := range p.provisions {
		if pr.write {
			s.snap.assumeClaim(pr.claim)
		}
	}
	return p
}

// preBind writes o's volume plan: the claimRefs of the chosen volumes,
// then the selected-node annotations of the claims to provision (as
// upstream, with updates, so that a concurrent change is a conflict, not
// lost). It reports bind when the claims are bound already and the pod may
// be bound now. Otherwise the pod waits for them (see checkWaiting), or
// went back to the queue with the error written.
func (s *Scheduler) preBind(ctx context.Context, o outcome) (bind bool, err error) {
	key := o.info.Key
	if err := s.writeVolumes(ctx, o.volumes); err != nil {
		err = fmt.Errorf("running PreBind plugin %q: %w", volumeBindingPlugin, err)
		s.mu.Lock()
		s.unassume(o)
		s.checkWaiting()
		now := s.clock.Now()
		s.queue.moveAll(now)
		s.queue.retry(o.e, now)
		s.mu.Unlock()
		s.signal()
		if werr := s.unschedulable(ctx, o.info.Pod, ConditionSchedulerError, err.Error()); werr != nil {
			return false, errors.Join(err, werr)
		}
		return false, err
	}
	o.volumes.written = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.assumed[key] != o.node {
		return false, nil // the pod went away meanwhile
	}
	now := s.clock.Now()
	done, err := s.snap.bound(o.volumes)
	switch {
	case err != nil:
		s.failWait(o, err, now)
	case done:
		return true, nil
	default:
		s.waiting[key] = &volumeWait{o: o, deadline: now.Add(bindTimeout)}
	}
	s.signal() // Run recomputes its next wake
	return false, nil
}

// writeVolumes makes the plan's API writes, keeping the versions written.
// It sends copies: the plan's objects are also the snapshot's assumptions,
// which other decisions read meanwhile.
func (s *Scheduler) writeVolumes(ctx context.Context, p *volumePlan) error {
	for i := range p.bindings {
		b := &p.bindings[i]
		if !b.write {
			continue
		}
		pv, err := s.client.CoreV1().PersistentVolumes().Update(ctx, b.pv.DeepCopy(), metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		b.rv, b.done = pv.ResourceVersion, true
	}
	for i := range p.provisions {
		pr := &p.provisions[i]
		if !pr.write {
			continue
		}
		pvc, err := s.client.CoreV1().PersistentVolumeClaims(pr.claim.Namespace).Update(ctx, pr.claim.DeepCopy(), metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		pr.rv, pr.done = pvc.ResourceVersion, true
	}
	return nil
}

// bound looks at the informer's versions of the objects of a written
// plan: done when every claim is fully bound; an error when the binding
// was undone (a claimRef reset, a selected node removed, which is how a
// provisioner says it failed) or a volume's node affinity excludes the
// node. A write not seen yet is waited for: the informer's version is
// older than the one written, or an assumption about the object (this
// pod's or another's that shares the claim) is still in place.
func (snap *Snapshot) bound(p *volumePlan) (done bool, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("running PreBind plugin %q: binding volumes: %w", volumeBindingPlugin, err)
		}
	}()
	node := snap.Node(p.node)
	if node == nil {
		return false, fmt.Errorf("failed to get node %q: node %q not found", p.node, p.node)
	}
	st := &snap.storage
	for _, b := range p.bindings {
		e := st.volumes[b.pv.Name]
		if e == nil {
			return false, fmt.Errorf("failed to check binding: persistentvolume %q not found", b.pv.Name)
		}
		pvc := st.claims[b.claim]
		if pvc == nil {
			return false, fmt.Errorf("failed to check binding: persistentvolumeclaim %q not found", b.claim.Name)
		}
		if e.assumed != nil || olderThan(e.api.ResourceVersion, b.rv) {
			return false, nil
		}
		if !e.affinity.matches(node.Node.Labels) {
			return false, fmt.Errorf("pv %q node affinity doesn't match node %q: no matching NodeSelectorTerms", b.pv.Name, p.node)
		}
		if ref := e.api.Spec.ClaimRef; ref == nil || ref.UID == "" {
			return false, fmt.Errorf("ClaimRef got reset for pv %q", b.pv.Name)
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	for _, pr := range p.provisions {
		key := keyOf(pr.claim)
		pvc := st.claims[key]
		if pvc == nil {
			return false, fmt.Errorf("failed to check provisioning pvc: persistentvolumeclaim %q not found", pr.claim.Name)
		}
		if st.assumedClaims[key] != nil || olderThan(pvc.ResourceVersion, pr.rv) {
			return false, nil
		}
		if pvc.Annotations == nil {
			return false, fmt.Errorf("selectedNode annotation reset for PVC %q", pvc.Name)
		}
		if pvc.Annotations[volume.AnnSelectedNode] != p.node {
			return false, fmt.Errorf("provisioning failed for PVC %q", pvc.Name)
		}
		if pvc.Spec.VolumeName != "" {
			e := st.volumes[pvc.Spec.VolumeName]
			if e == nil {
				return false, nil // not seen yet
			}
			if !e.affinity.matches(node.Node.Labels) {
				return false, fmt.Errorf("pv %q node affinity doesn't match node %q: no matching NodeSelectorTerms", pvc.Spec.VolumeName, p.node)
			}
		}
		if !fullyBound(pvc) {
			return false, nil
		}
	}
	return true, nil
}

// checkWaiting looks at every waiting pod, in a fixed order: one whose
// claims are bound is handed to decide for binding; one whose binding
// failed goes back to the queue. A failure gives back assumptions other
// waiting pods may have relied on, so it looks again until nothing
// changes; called again while looking, it only asks for another look.
// Call it under mu; it signals Run when an outcome is ready.
func (s *Scheduler) checkWaiting() {
	if s.checking {
		s.recheck = true
		return
	}
	s.checking = true
	defer func() { s.checking = false }()
	for again := true; again; {
		s.recheck = false
		for _, key := range s.waitingKeys() {
			w := s.waiting[key]
			if w == nil {
				continue // failed meanwhile
			}
			done, err := s.snap.bound(w.o.volumes)
			switch {
			case err != nil:
				s.failWait(w.o, err, s.clock.Now())
			case done:
				delete(s.waiting, key)
				s.ready = append(s.ready, w.o)
				s.signal()
			}
		}
		again = s.recheck
	}
}

// expireWaits fails the waits whose time is up. Call it under mu.
func (s *Scheduler) expireWaits(now time.Time) {
	for _, key := range s.waitingKeys() {
		if w := s.waiting[key]; w != nil && !now.Before(w.deadline) {
			s.failWait(w.o, fmt.Errorf("running PreBind plugin %q: binding volumes: %w", volumeBindingPlugin, context.DeadlineExceeded), now)
		}
	}
}

// nextDeadline is when the earliest wait times out; ok is false when
// nothing waits. Call it under mu.
func (s *Scheduler) nextDeadline() (at time.Time, ok bool) {
	for _, w := range s.waiting {
		if !ok || w.deadline.Before(at) {
			at, ok = w.deadline, true
		}
	}
	return at, ok
}

// nextWake is the earliest of the next backoff end and the next wait
// deadline. Call it under mu.
func (s *Scheduler) nextWake() (time.Time, bool) {
	at, ok := s.queue.nextBackoffEnd()
	if d, waiting := s.nextDeadline(); waiting && (!ok || d.Before(at)) {
		at, ok = d, true
	}
	return at, ok
}

func (s *Scheduler) waitingKeys() []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(s.waiting))
	for key := range s.waiting {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

// compareKeys orders keys by namespace, then name.
func compareKeys(a, b types.NamespacedName) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// failWait gives back what the pod took, sends it back to wait out its
// backoff, and hands the error to decide for writing. Call it under mu.
func (s *Scheduler) failWait(o outcome, err error, now time.Time) {
	s.unassume(o)
	s.checkWaiting()
	s.queue.moveAll(now)
	s.queue.retry(o.e, now)
	o.volumeErr = err
	s.ready = append(s.ready, o)
	s.signal()
}

// volumesFailed writes a failed volume wait: PodScheduled=False with
// reason SchedulerError and a FailedScheduling event, as upstream reports
// a PreBind failure. When the wait timed out, the selected-node
// annotations the scheduler wrote come off claims still unbound, so that
// the next attempt may choose another node (upstream leaves that to the
// provisioner, which gives a claim up only when it fails).
func (s *Scheduler) volumesFailed(ctx context.Context, o outcome) error {
	s.log.Info("volumes not bound", "pod", o.info.Key.String(), "node", o.node, "err", o.volumeErr)
	if errors.Is(o.volumeErr, context.DeadlineExceeded) {
		for _, pr := range o.volumes.provisions {
			if pr.write {
				s.unselect(ctx, keyOf(pr.claim), o.node)
			}
		}
	}
	return s.unschedulable(ctx, o.info.Pod, ConditionSchedulerError, o.volumeErr.Error())
}

// unselect removes the selected-node annotation from a claim that still
// names node and is not bound; the patch tests the value, so a newer
// choice stays. Failures are logged.
func (s *Scheduler) unselect(ctx context.Context, key types.NamespacedName, node string) {
	s.mu.Lock()
	c := s.snap.storage.claims[key]
	s.mu.Unlock()
	if c == nil || c.Spec.VolumeName != "" || c.Annotations[volume.AnnSelectedNode] != node {
		return
	}
	path := "/metadata/annotations/" + jsonPointerEscape(volume.AnnSelectedNode)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": node},
		{"op": "remove", "path": path},
	})
	if err == nil {
		_, err = s.client.CoreV1().PersistentVolumeClaims(key.Namespace).Patch(ctx, key.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		s.log.Info("removing the selected node failed", "claim", key.String(), "err", err)
	}
}

// jsonPointerEscape escapes a JSON pointer segment (RFC 6901).
func jsonPointerEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			out = append(out, '~', '0')
		case '/':
			out = append(out, '~', '1')
		default:
			out = append(out, s[i])
		}
	}
	return string(out)
}

// storageLists are the storage objects a Sync pass lists.
type storageLists struct {
	claims   []corev1.PersistentVolumeClaim
	volumes  []corev1.PersistentVolume
	classes  []storagev1.StorageClass
	csiNodes []storagev1.CSINode
}

// listStorage lists the storage objects. A kind the server does not serve
// (NotFound) is taken to have no objects.
func listStorage(ctx context.Context, client kubernetes.Interface) (*storageLists, error) {
	var out storageLists
	opts := metav1.ListOptions{}
	skip := func(what string, err error) error {
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("listing %s: %w", what, err)
	}
	claims, err := client.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, opts)
	if err := skip("persistentvolumeclaims", err); err != nil {
		return nil, err
	} else if claims != nil {
		out.claims = claims.Items
	}
	volumes, err := client.CoreV1().PersistentVolumes().List(ctx, opts)
	if err := skip("persistentvolumes", err); err != nil {
		return nil, err
	} else if volumes != nil {
		out.volumes = volumes.Items
	}
	classes, err := client.StorageV1().StorageClasses().List(ctx, opts)
	if err := skip("storageclasses", err); err != nil {
		return nil, err
	} else if classes != nil {
		out.classes = classes.Items
	}
	csiNodes, err := client.StorageV1().CSINodes().List(ctx, opts)
	if err := skip("csinodes", err); err != nil {
		return nil, err
	} else if csiNodes != nil {
		out.csiNodes = csiNodes.Items
	}
	return &out, nil
}

// into adds the lists to a snapshot.
func (l *storageLists) into(snap *Snapshot) {
	if l == nil {
		return
	}
	for i := range l.claims {
		snap.SetClaim(&l.claims[i])
	}
	for i := range l.volumes {
		snap.SetVolume(&l.volumes[i])
	}
	for i := range l.classes {
		snap.SetClass(&l.classes[i])
	}
	for i := range l.csiNodes {
		snap.SetCSINode(&l.csiNodes[i])
	}
}

// ClaimHandler, VolumeHandler, ClassHandler and CSINodeHandler are the
// handlers Run registers on its PersistentVolumeClaim, PersistentVolume,
// StorageClass and CSINode informers; a driver that follows objects itself
// (the simulator) feeds them the same events. An added or changed object
// sends the unschedulable pods that use claims back to be tried; claims
// and volumes also move the pods waiting for their volumes along.
func (s *Scheduler) ClaimHandler() cache.ResourceEventHandler {
	return s.storageHandler(
		func(obj any) bool {
			c, ok := obj.(*corev1.PersistentVolumeClaim)
			if ok {
				s.snap.SetClaim(c)
			}
			return ok
		},
		func(ns, name string) { s.snap.RemoveClaim(types.NamespacedName{Namespace: ns, Name: name}) },
		true)
}

// VolumeHandler: see ClaimHandler.
func (s *Scheduler) VolumeHandler() cache.ResourceEventHandler {
	return s.storageHandler(
		func(obj any) bool {
			pv, ok := obj.(*corev1.PersistentVolume)
			if ok {
				s.snap.SetVolume(pv)
			}
			return ok
		},
		func(_, name string) { s.snap.RemoveVolume(name) },
		true)
}

// ClassHandler: see ClaimHandler.
func (s *Scheduler) ClassHandler() cache.ResourceEventHandler {
	return s.storageHandler(
		func(obj any) bool {
			sc, ok := obj.(*storagev1.StorageClass)
			if ok {
				s.snap.SetClass(sc)
			}
			return ok
		},
		func(_, name string) { s.snap.RemoveClass(name) },
		false)
}

// CSINodeHandler: see ClaimHandler.
func (s *Scheduler) CSINodeHandler() cache.ResourceEventHandler {
	return s.storageHandler(
		func(obj any) bool {
			cn, ok := obj.(*storagev1.CSINode)
			if ok {
				s.snap.SetCSINode(cn)
			}
			return ok
		},
		func(_, name string) { s.snap.RemoveCSINode(name) },
		false)
}

// storageHandler builds a handler from set (which reports whether obj was
// of its kind) and remove, both called under mu.
func (s *Scheduler) storageHandler(set func(obj any) bool, remove func(ns, name string), waits bool) cache.ResourceEventHandler {
	changed := func(obj any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !set(obj) {
			return
		}
		if s.queue.moveClaimPods(s.clock.Now()) {
			s.signal()
		}
		if waits {
			s.checkWaiting()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { changed(obj) },
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: func(obj any) {
			ns, name, ok := deletedKey(obj)
			if !ok {
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			remove(ns, name)
			if waits {
				s.checkWaiting()
			}
		},
	}
}
