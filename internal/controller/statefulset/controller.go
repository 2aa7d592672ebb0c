// Package statefulset is the StatefulSet controller: it runs apps/v1
// StatefulSets as kube-controller-manager 1.33 does with its default
// feature gates: pods with a stable identity, their claims, ordered or
// parallel scaling, rolling updates through ControllerRevisions, and the
// status kubectl rollout status reads.
//
// For each StatefulSet a pass (Sync):
//   - adopts the orphan ControllerRevisions its selector matches, and
//     claims pods as upstream does: orphans that match its selector and
//     are named <set>-<number> are adopted, pods it controls that no
//     longer match are released; another controller's are never touched;
//   - finds its update revision: the revision whose data is its template
//     (the {"spec":{"template":{"$patch":"replace",...}}} patch, named
//     <set>-<hash> with upstream's FNV-1 hash and collisionCount), created
//     when new, renumbered when an older one comes back (rollback); the
//     current revision is status.currentRevision's;
//   - keeps pods <set>-<ordinal> for the ordinals [start, start+replicas)
//     (spec.ordinals.start), each labelled statefulset.kubernetes.io/
//     pod-name, apps.kubernetes.io/pod-index and controller-revision-hash,
//     with hostname and subdomain (spec.serviceName) and the set as its
//     controller; a missing pod's claims <template>-<set>-<ordinal>
//     (the template's labels plus the selector's matchLabels) are created
//     before it. It is not created while one of them is being deleted
//     (upstream's FailedCreate "pvc <claim> is being deleted", and the
//     pass fails) or, under whenScaled Delete, still belongs to a
//     previous pod of its name (it waits, silently, for the garbage
//     collector);
//   - deletes Failed and Succeeded pods, which come back once gone; a pod
//     being deleted keeps its ordinal until the API server has removed
//     it, so a pod stuck Terminating on a dead node holds back its
//     replacement until it is force-deleted;
//   - with podManagementPolicy OrderedReady, creates one pod at a time in
//     ordinal order and stops at the first pod that is terminating, not
//     Running and Ready, or not yet available (minReadySeconds); scales
//     down from the highest ordinal, one pod per pass, only once every
//     pod in range is Running, Ready and available and no condemned pod
//     is terminating (a condemned pod that is not Ready goes only when it
//     is the lowest unhealthy one); with Parallel, does all of it at
//     once;
//   - sets each claim's owner references as the
//     persistentVolumeClaimRetentionPolicy wants (whenDeleted Delete: the
//     set controls the claim; whenScaled Delete: a condemned pod does), so
//     that the garbage collector deletes them;
//   - for updateStrategy RollingUpdate, deletes the highest pod at or
//     above the partition that is not at the update revision once all
//     above it are Running and Ready, one at a time (maxUnavailable is
//     ignored: MaxUnavailableStatefulSet is off in 1.33); missing pods are
//     created at the update revision, below the partition at the current
//     one (without spec.updateStrategy.rollingUpdate: below
//     status.currentReplicas). OnDelete only creates missing pods, at the
//     update revision;
//   - writes status: replicas, readyReplicas, availableReplicas,
//     currentReplicas, updatedReplicas, currentRevision, updateRevision,
//     collisionCount and observedGeneration; when every replica is updated
//     and Ready, currentRevision becomes updateRevision. The status counts
//     the pods as the pass's own writes left them (a pod created counts, a
//     pod deleted counts as terminating); upstream counts them on its
//     next pass;
//   - deletes the oldest revisions that no pod uses beyond
//     spec.revisionHistoryLimit, never the current or update revision.
//
// A StatefulSet being deleted gets only its status: its pods, claims and
// revisions are the garbage collector's.
//
// Events (on the StatefulSet), upstream's texts: Normal SuccessfulCreate
// "create Pod web-0 in StatefulSet web successful" and "create Claim
// data-web-0 Pod web-0 in StatefulSet web success", SuccessfulDelete and
// SuccessfulUpdate likewise; Warning FailedCreate "create Pod web-0 in
// StatefulSet web failed error: <error>" (also "create Claim data-web-0 for
// Pod web-0 in StatefulSet web failed error: <error>"), FailedDelete,
// FailedUpdate, and ConflictingController for a claim another controller
// holds.
//
// What the caller must do: give it a client that may list StatefulSets,
// update their status, list, create, update, patch and delete pods and
// ControllerRevisions, list, create and update PersistentVolumeClaims, and
// create events; call Sync for one deterministic pass on the injected
// clock, or Run. One controller per cluster (leader election is the
// caller's).
//
// Cost model: a pass lists every StatefulSet, pod, claim and
// ControllerRevision once (through the API, so it never acts on a stale
// cache and needs no expectations), then writes only what must change:
// with OrderedReady at most one pod creation or deletion per set and pass,
// with Parallel all of them. Run coalesces the changes it hears of into at
// most one pending pass, and wakes when a pod is due to become available.
//
// What it does not do: maxUnavailable (its feature gate is off by
// default), the StatefulSet conditions (upstream sets none), and
// upstream's concurrency: a Parallel set's writes are made one after
// another, in upstream's batches of 1, 2, 4, ... (a batch with a failure
// ends the pass). Claims are created with the owner references the policy
// wants, where upstream adds them with an update afterwards.
package statefulset

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
	"knode/internal/controller/loop"
	"knode/internal/controller/ownership"
)

// Name is the controller's name and event source.
const Name = "statefulset-controller"

// DefaultResyncPeriod is how often Run passes when nothing happens.
const DefaultResyncPeriod = 30 * time.Second

// maxCollisions bounds the renames when a revision's name is taken by a
// revision with other data (each rename raises collisionCount).
const maxCollisions = 100

// Config builds a Controller.
type Config struct {
	// Client reads and writes StatefulSets, ControllerRevisions, pods,
	// claims and events. Required.
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

// Controller runs StatefulSets. Passes do not overlap.
type Controller struct {
	cfg Config
	log *slog.Logger
	rec *events.Recorder

	mu   sync.Mutex
	next time.Time // when the last pass expects a pod to become available
}

// New checks cfg and builds a Controller.
func New(cfg Config) (*Controller, error) {
	if err := loop.Check(loop.Settings{
		Package: "statefulset", HasClient: cfg.Client != nil,
		ResyncPeriod: &cfg.ResyncPeriod, DefaultResync: DefaultResyncPeriod,
		Clock: &cfg.Clock, Logger: &cfg.Logger,
	}); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("controller", Name)
	return &Controller{cfg: cfg, log: log, rec: &events.Recorder{Client: cfg.Client.CoreV1(), Source: Name, Logger: log}}, nil
}

// Sync makes one pass over every StatefulSet at the clock's now and
// blocks until its writes are done. The error joins the failures; each is
// retried by the next pass.
func (c *Controller) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.Now()
	cs := c.cfg.Client
	setList, err := cs.AppsV1().StatefulSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing statefulsets: %w", err)
	}
	c.next = time.Time{}
	if len(setList.Items) == 0 {
		return nil
	}
	podList, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	claimList, err := cs.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing persistentvolumeclaims: %w", err)
	}
	revList, err := cs.AppsV1().ControllerRevisions(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing controllerrevisions: %w", err)
	}
	pods := map[string][]*corev1.Pod{}
	for i := range podList.Items {
		p := &podList.Items[i]
		pods[p.Namespace] = append(pods[p.Namespace], p)
	}
	claims := map[string]map[string]*corev1.PersistentVolumeClaim{}
	for i := range claimList.Items {
		pvc := &claimList.Items[i]
		if claims[pvc.Namespace] == nil {
			claims[pvc.Namespace] = map[string]*corev1.PersistentVolumeClaim{}
		}
		claims[pvc.Namespace][pvc.Name] = pvc
	}
	revs := map[string][]*appsv1.ControllerRevision{}
	for i := range revList.Items {
		r := &revList.Items[i]
		revs[r.Namespace] = append(revs[r.Namespace], r)
	}
	sets := setList.Items
	sort.Slice(sets, func(i, j int) bool {
		if sets[i].Namespace != sets[j].Namespace {
			return sets[i].Namespace < sets[j].Namespace
		}
		return sets[i].Name < sets[j].Name
	})
	var errs []error
	for i := range sets {
		set := &sets[i]
		if claims[set.Namespace] == nil {
			claims[set.Namespace] = map[string]*corev1.PersistentVolumeClaim{}
		}
		next, err := c.syncOne(ctx, set, pods[set.Namespace], claims[set.Namespace], revs[set.Namespace], now)
		if err != nil {
			errs = append(errs, fmt.Errorf("statefulset %s/%s: %w", set.Namespace, set.Name, err))
		}
		if !next.IsZero() && (c.next.IsZero() || next.Before(c.next)) {
			c.next = next
		}
	}
	return errors.Join(errs...)
}

// syncOne runs one StatefulSet against its namespace's pods, claims and
// revisions. Adopted pods replace the listed ones in pods, and claims it
// creates or updates replace theirs in claims, so later sets of the pass
// see them.
func (c *Controller) syncOne(ctx context.Context, set *appsv1.StatefulSet, pods []*corev1.Pod, claims map[string]*corev1.PersistentVolumeClaim, revisions []*appsv1.ControllerRevision, now time.Time) (time.Time, error) {
	if _, err := metav1.LabelSelectorAsSelector(set.Spec.Selector); err != nil {
		// Upstream does not retry a selector that cannot be parsed.
		c.log.Warn("statefulset has an invalid selector", "namespace", set.Namespace, "name", set.Name, "err", err)
		return time.Time{}, nil
	}

	mine, orphans := ClaimRevisions(set, revisions)
	if set.DeletionTimestamp == nil {
		patch := ownership.AdoptPatch(set, controllerKind)
		for _, r := range orphans {
			got, err := c.cfg.Client.AppsV1().ControllerRevisions(r.Namespace).Patch(ctx, r.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				return time.Time{}, fmt.Errorf("adopting controllerrevision %s: %w", r.Name, err)
			}
			mine = append(mine, got)
		}
	}
	claim := ClaimPods(set, pods)
	adopted, errs := ownership.Settle(ctx, c.cfg.Client.CoreV1(), set, controllerKind, claim.Adopt, claim.Release, pods)
	if len(errs) > 0 {
		return time.Time{}, errors.Join(errs...)
	}
	owned := append(claim.Owned, adopted...)

	SortRevisions(mine)
	step, err := ChooseRevision(set, mine)
	if err != nil {
		return time.Time{}, err
	}
	update, collisionCount, err := c.settleRevision(ctx, set, step)
	if err != nil {
		return time.Time{}, err
	}
	current := CurrentRevision(set, mine, update)

	plan, err := Decide(set, current, update, owned, claims, now)
	if err != nil {
		return time.Time{}, err
	}
	if plan.Wait != "" {
		c.log.Debug("statefulset waits", "namespace", set.Namespace, "name", set.Name, "reason", plan.Wait)
	}
	created, deleted, execErr := c.execute(ctx, set, &plan, claims, now)
	if execErr != nil {
		errs = append(errs, execErr)
	}

	status, next := Status(set, current, update, collisionCount, plan.PodsAfter(created, deleted, now), now)
	if StatusChanged(set.Status, status) {
		if err := c.writeStatus(ctx, set, status); err != nil {
			errs = append(errs, err)
		}
	}

	for _, r := range Truncate(set, owned, mine, current, update) {
		if err := c.cfg.Client.AppsV1().ControllerRevisions(r.Namespace).Delete(ctx, r.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting controllerrevision %s: %w", r.Name, err))
			break
		}
	}
	return next, errors.Join(errs...)
}

// settleRevision writes what step asks for and returns the update
// revision and the collision count it took.
func (c *Controller) settleRevision(ctx context.Context, set *appsv1.StatefulSet, step RevisionStep) (*appsv1.ControllerRevision, int32, error) {
	api := c.cfg.Client.AppsV1().ControllerRevisions(set.Namespace)
	collisionCount := step.CollisionCount
	switch {
	case step.Existing != nil && !step.Renumber:
		return step.Existing, collisionCount, nil
	case step.Existing != nil:
		cr := step.Existing.DeepCopy()
		for attempt := 0; ; attempt++ {
			cr.Revision = step.New.Revision
			got, err := api.Update(ctx, cr, metav1.UpdateOptions{})
			if err == nil {
				return got, collisionCount, nil
			}
			if !apierrors.IsConflict(err) || attempt == 4 {
				return nil, collisionCount, fmt.Errorf("renumbering controllerrevision %s: %w", cr.Name, err)
			}
			if cr, err = api.Get(ctx, cr.Name, metav1.GetOptions{}); err != nil {
				return nil, collisionCount, fmt.Errorf("renumbering controllerrevision %s: %w", step.Existing.Name, err)
			}
		}
	}
	cr := step.New.DeepCopy()
	for range maxCollisions {
		got, err := api.Create(ctx, cr, metav1.CreateOptions{})
		if err == nil {
			return got, collisionCount, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, collisionCount, fmt.Errorf("creating controllerrevision %s: %w", cr.Name, err)
		}
		exists, err := api.Get(ctx, cr.Name, metav1.GetOptions{})
		if err != nil {
			return nil, collisionCount, fmt.Errorf("creating controllerrevision %s: %w", cr.Name, err)
		}
		if bytes.Equal(exists.Data.Raw, cr.Data.Raw) {
			return exists, collisionCount, nil
		}
		collisionCount++
		cr.Name = RevisionName(set.Name, Hash(step.New, &collisionCount))
	}
	return nil, collisionCount, fmt.Errorf("creating a controllerrevision: %d name collisions", maxCollisions)
}

// execute runs plan's phases (see Plan) and returns the pods it created
// and deleted, by name.
func (c *Controller) execute(ctx context.Context, set *appsv1.StatefulSet, plan *Plan, claims map[string]*corev1.PersistentVolumeClaim, now time.Time) (created map[string]*corev1.Pod, deleted map[string]bool, err error) {
	created, deleted = map[string]*corev1.Pod{}, map[string]bool{}
	phases := []struct {
		actions []Action
		n       int
	}{
		{plan.Replicas, len(plan.InRange)},
		{plan.CondemnedClaims, len(plan.Condemned)},
		{plan.ScaleDown, len(plan.Condemned)},
		{plan.Rolling, len(plan.InRange)},
	}
	for _, ph := range phases {
		if plan.Monotonic {
			for _, a := range ph.actions {
				if err := c.do(ctx, set, a, claims, created, deleted, now); err != nil {
					return created, deleted, err
				}
			}
			continue
		}
		i := 0
		for start, size := 0, 1; start < ph.n && i < len(ph.actions); start, size = start+size, min(2*size, MaxBatchSize) {
			var errs []error
			for ; i < len(ph.actions) && ph.actions[i].Index < start+size; i++ {
				if err := c.do(ctx, set, ph.actions[i], claims, created, deleted, now); err != nil {
					errs = append(errs, err)
				}
			}
			if len(errs) > 0 {
				return created, deleted, errors.Join(errs...)
			}
		}
	}
	return created, deleted, nil
}

// do makes one action's writes and records its events, as upstream's
// StatefulPodControl does.
func (c *Controller) do(ctx context.Context, set *appsv1.StatefulSet, a Action, claims map[string]*corev1.PersistentVolumeClaim, created map[string]*corev1.Pod, deleted map[string]bool, now time.Time) error {
	podsAPI := c.cfg.Client.CoreV1().Pods(set.Namespace)
	switch a.Kind {
	case CreatePod:
		if err := c.createClaims(ctx, set, a, claims, now); err != nil {
			c.podEvent(ctx, set, "create", a.Pod, err, now)
			return err
		}
		pod, err := podsAPI.Create(ctx, a.Pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return err
		}
		if err != nil {
			c.podEvent(ctx, set, "create", a.Pod, err, now)
			return err
		}
		created[pod.Name] = pod
		if err := c.fixClaims(ctx, set, a, claims, now); err != nil {
			c.podEvent(ctx, set, "update", a.Pod, err, now)
			return err
		}
		c.podEvent(ctx, set, "create", a.Pod, nil, now)
	case DeletePod:
		uid := a.Pod.UID
		err := podsAPI.Delete(ctx, a.Pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if apierrors.IsNotFound(err) {
			deleted[a.Pod.Name] = true
			return nil
		}
		c.podEvent(ctx, set, "delete", a.Pod, err, now)
		if err != nil {
			return err
		}
		deleted[a.Pod.Name] = true
		c.log.Debug("deleted statefulset pod", "namespace", set.Namespace, "name", set.Name, "pod", a.Pod.Name, "reason", a.Reason)
	case UpdatePod:
		err := c.createClaims(ctx, set, a, claims, now)
		if err == nil {
			err = c.fixClaims(ctx, set, a, claims, now)
		}
		if err == nil && a.PodChanged {
			_, err = podsAPI.Update(ctx, a.Pod, metav1.UpdateOptions{})
		}
		c.podEvent(ctx, set, "update", a.Pod, err, now)
		return err
	case EnsureClaims:
		if err := c.createClaims(ctx, set, a, claims, now); err != nil {
			return err
		}
		if err := c.fixClaims(ctx, set, a, claims, now); err != nil {
			c.podEvent(ctx, set, "update", a.Pod, err, now)
			return err
		}
	case FixClaims:
		return c.fixClaims(ctx, set, a, claims, now)
	default:
		return fmt.Errorf("unknown action %v", a.Kind)
	}
	return nil
}

// createClaims creates a's missing claims, then fails with the errors of
// those and of the claims being deleted (upstream's aggregate).
func (c *Controller) createClaims(ctx context.Context, set *appsv1.StatefulSet, a Action, claims map[string]*corev1.PersistentVolumeClaim, now time.Time) error {
	var errs []error
	for _, claim := range a.NewClaims {
		got, err := c.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to create PVC %s: %s", claim.Name, err))
		} else {
			claims[got.Name] = got
		}
		if err == nil || !apierrors.IsAlreadyExists(err) {
			c.claimEvent(ctx, set, a.Pod, claim.Name, err, now)
		}
	}
	errs = append(errs, a.DeletingClaims...)
	return utilerrors.NewAggregate(errs)
}

// fixClaims reports a's conflicting claims and writes its claim updates,
// stopping at the first failure.
func (c *Controller) fixClaims(ctx context.Context, set *appsv1.StatefulSet, a Action, claims map[string]*corev1.PersistentVolumeClaim, now time.Time) error {
	for _, name := range a.ConflictingClaims {
		c.record(ctx, set, corev1.EventTypeWarning, "ConflictingController", fmt.Sprintf(conflictingControllerMessage, name), now)
	}
	for _, claim := range a.ClaimUpdates {
		got, err := c.cfg.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("could not update claim %s for delete policy ownerRefs: %w", claim.Name, err)
		}
		claims[got.Name] = got
	}
	return nil
}

// writeStatus writes status over set's, once more on a conflict.
func (c *Controller) writeStatus(ctx context.Context, set *appsv1.StatefulSet, status appsv1.StatefulSetStatus) error {
	api := c.cfg.Client.AppsV1().StatefulSets(set.Namespace)
	updated := set.DeepCopy()
	for attempt := 0; ; attempt++ {
		updated.Status = status
		_, err := api.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 1 {
			return fmt.Errorf("updating status: %w", err)
		}
		if updated, err = api.Get(ctx, set.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("updating status: %w", err)
		}
		if updated.UID != set.UID {
			return nil
		}
	}
}

// podEvent records verb on pod as upstream's recordPodEvent.
func (c *Controller) podEvent(ctx context.Context, set *appsv1.StatefulSet, verb string, pod *corev1.Pod, err error, now time.Time) {
	title := strings.ToUpper(verb[:1]) + verb[1:]
	if err == nil {
		c.record(ctx, set, corev1.EventTypeNormal, "Successful"+title,
			fmt.Sprintf("%s Pod %s in StatefulSet %s successful", verb, pod.Name, set.Name), now)
		return
	}
	c.record(ctx, set, corev1.EventTypeWarning, "Failed"+title,
		fmt.Sprintf("%s Pod %s in StatefulSet %s failed error: %s", verb, pod.Name, set.Name, err), now)
}

// claimEvent records the creation of a claim for pod as upstream's
// recordClaimEvent.
func (c *Controller) claimEvent(ctx context.Context, set *appsv1.StatefulSet, pod *corev1.Pod, claim string, err error, now time.Time) {
	if err == nil {
		c.record(ctx, set, corev1.EventTypeNormal, "SuccessfulCreate",
			fmt.Sprintf("create Claim %s Pod %s in StatefulSet %s success", claim, pod.Name, set.Name), now)
		return
	}
	c.record(ctx, set, corev1.EventTypeWarning, "FailedCreate",
		fmt.Sprintf("create Claim %s for Pod %s in StatefulSet %s failed error: %s", claim, pod.Name, set.Name, err), now)
}

// record writes one event about set; a failure is only logged.
func (c *Controller) record(ctx context.Context, set *appsv1.StatefulSet, typ, reason, msg string, now time.Time) {
	ref := corev1.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: set.Namespace, Name: set.Name, UID: set.UID, ResourceVersion: set.ResourceVersion}
	c.rec.Record(ctx, ref, set.Namespace, typ, reason, msg, now)
}

// NextDue is when the last pass wants the next one: when a Ready pod of a
// set with minReadySeconds becomes available. Zero means no wish.
func (c *Controller) NextDue() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next
}

// Run passes at once, then whenever a StatefulSet, pod, claim or
// ControllerRevision changes, when a pod is due to become available, and
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
			factory.Apps().V1().StatefulSets().Informer(),
			factory.Core().V1().Pods().Informer(),
			factory.Core().V1().PersistentVolumeClaims().Informer(),
			factory.Apps().V1().ControllerRevisions().Informer(),
		},
		Start:     factory.Start,
		Sync:      c.Sync,
		NextDue:   c.NextDue,
		DueMargin: time.Second,
		Logger:    c.log,
		Name:      "statefulset",
	})
}
