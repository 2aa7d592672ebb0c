// Package pods is the agent's pod worker, in the kubelet's role for pods:
// it runs the pods bound to its node through a runtime.Runtime, reports
// their status through pods/status, and finishes their graceful deletion.
//
// One pass (Sync) reads the Node and the pods bound to it (the list uses
// the spec.nodeName field selector, which the node authorizer requires),
// then, for each pod in creation order:
//   - a new pod is admitted or rejected (Admit, then the container
//     manager's admission, which allocates exclusive CPUs, memory and
//     devices): a rejected pod gets phase Failed with the kubelet's reason
//     and "Pod was rejected: " message, and a Warning event;
//   - an admitted pod gets its cgroup from the container manager and is
//     started in the runtime, and its status (phase,
//     conditions, container statuses, start time, host and pod IPs) is
//     written whenever it changed;
//   - a pod with a deletionTimestamp is stopped within its grace period;
//     once its containers have stopped, its final status (Succeeded or
//     Failed) is written and the worker deletes it with grace period 0 and
//     a uid precondition, as the kubelet does;
//   - a pod the runtime holds that is gone from the API (force-deleted) is
//     stopped and removed.
//
// A finished or removed pod's resources go back to the container manager;
// when that changes the shared CPU pool, the runtime updates the running
// containers (runtime.ResourceUpdater).
//
// Run lists and watches the node's pods into a local cache (the role of
// the kubelet's API pod source), and loops Sync on every change, on the
// runtime's Changes and on a resync ticker of the injected clock; its
// passes read the pods (and, given Config.Nodes, the Node) from there
// rather than from the server.
//
// With Config.PodNetwork, status.podIP(s) are the pod sandbox's (a
// hostNetwork pod's are the node's); without it pods share the host
// network and status.podIP(s) are the node's address(es) (its first
// InternalIP, else ExternalIP, per family). With Config.Probes, a
// container is started and ready as its probes say, and a run whose
// liveness or startup probe failed is killed (the runtime restarts it per
// the restart policy); without, a running container is started and ready.
//
// The caller builds the Runtime and passes the node's allocatable (or
// leaves it to be read from the Node). The worker does not register the
// Node or evict pods under pressure. For a node shutdown it stops the pods
// the shutdown manager names (Terminate) and writes their final status;
// the order and the timing are the manager's.
package pods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"knode/internal/agent/prober"
	"knode/internal/agent/runtime"
)

// DefaultResyncPeriod is how often Run syncs without a reason to.
const DefaultResyncPeriod = 10 * time.Second

// eventSource is the component the worker's events name, as the kubelet's.
const eventSource = "kubelet"

// NodeLister gets a Node by name from a cache; the object it returns is
// shared and read-only.
type NodeLister interface {
	Get(name string) (*corev1.Node, error)
}

// Config builds a Worker.
type Config struct {
	// Client acts as the node's identity. Required.
	Client kubernetes.Interface
	// NodeName is the node whose pods this worker runs. Required.
	NodeName string
	// Runtime runs the containers. Required.
	Runtime runtime.Runtime
	// Clock drives Run's resync and stamps statuses; nil means the real
	// clock.
	Clock clock.WithTicker
	// Nodes reads the Node from a local cache (the agent's copy of it);
	// nil, or a miss, reads the server.
	Nodes NodeLister
	// Pods lists the node's pods from a local cache. Nil: Run fills one
	// from its list and watch, and a Sync called directly lists from the
	// server.
	Pods PodLister
	// Allocatable is what admission may hand out; nil means the Node's
	// status.allocatable. A list without "pods" admits no pod.
	Allocatable func() corev1.ResourceList
	// ResyncPeriod is Run's longest wait between passes; zero means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// Admit, when set, is asked first about every new pod; a Rejection
	// rejects it as Admit's own would (the node shutdown manager rejects
	// pods while the node shuts down).
	Admit func(*corev1.Pod) *Rejection
	// Volumes, when set, sets up each pod's volumes before its containers
	// start and tears them down after they stopped, before the deletion is
	// finished. nil: pods start at once and nothing is mounted.
	Volumes Volumes
	// Resources, when set, is the node's container manager: it allocates
	// CPUs, memory and devices to a pod that passed admission (or rejects
	// it), makes the pod's cgroup before its containers start, and releases
	// both once the pod's containers are gone. nil: pods get no cgroups of
	// the agent's and no exclusive resources.
	Resources Resources
	// PodNetwork says the runtime gives each pod a network of its own (a
	// CRI runtime with CNI): status.podIP(s) are then the sandbox's. false:
	// pods share the host's network and addresses.
	PodNetwork bool
	// Probes, when set, runs the containers' probes: the worker tells it
	// about pods and container runs, reads started and ready from it, and
	// kills a container whose liveness or startup probe failed (through
	// runtime.ContainerKiller). nil: no probes; a running container is
	// started and ready.
	Probes Probes
	// VolumeRetryPeriod is how soon Run passes again while a pod waits for
	// its volumes; zero means DefaultVolumeRetryPeriod.
	VolumeRetryPeriod time.Duration
	Logger            *slog.Logger
}

// Volumes is the agent's volume manager as the worker uses it.
type Volumes interface {
	// Setup makes progress on pod's volumes without waiting, and reports
	// whether all are ready; err says what is wrong meanwhile.
	Setup(ctx context.Context, pod *corev1.Pod) (ready bool, err error)
	// Teardown takes down the volumes of a pod whose containers stopped,
	// and reports when nothing of them is left.
	Teardown(ctx context.Context, uid types.UID) (done bool, err error)
	// Cleanup tears down the volumes of pods keep does not claim.
	Cleanup(ctx context.Context, keep func(types.UID) bool) error
}

// Probes is the prober (internal/agent/prober) as the worker uses it.
type Probes interface {
	// AddPod starts or updates the probing of pod (read-only afterwards).
	AddPod(pod *corev1.Pod)
	// RemovePod stops probing the pod.
	RemovePod(uid types.UID)
	// UpdateContainer tells of a container's current run; an empty id
	// means it is not running.
	UpdateContainer(uid types.UID, container, id string, started time.Time, podIP string)
	// Status is what the probes say of the container's current run.
	Status(uid types.UID, container string) prober.Status
}

// Resources is the node's container manager (internal/agent/cm) as the
// worker uses it.
type Resources interface {
	// Admit allocates what pod's containers need exclusively, or says why
	// it cannot run here. A pod admitted before, by this agent or by one
	// before it, is admitted again with what it holds.
	Admit(pod *corev1.Pod) (reason, message string, ok bool)
	// PodStarting makes the pod's cgroup before its first container.
	PodStarting(pod *corev1.Pod) error
	// RemovePod releases what Admit allocated and the pod's cgroup; the
	// pod's containers are gone. Calling it again does nothing.
	RemovePod(uid types.UID)
	// Sync releases what pods other than holding still hold (pods that
	// ended while no agent ran), retries what earlier calls could not
	// finish, and reports whether running containers' resources changed
	// since the last Sync (the CPU manager's shared pool grew or shrank).
	Sync(holding []types.UID) (changed bool)
}

// DefaultVolumeRetryPeriod paces passes while a pod waits for its volumes
// (to be attached, or reported in use).
const DefaultVolumeRetryPeriod = 250 * time.Millisecond

func (c *Config) setDefaults() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("pods: Config.Client is required"))
	}
	if c.NodeName == "" {
		errs = append(errs, errors.New("pods: Config.NodeName is required"))
	}
	if c.Runtime == nil {
		errs = append(errs, errors.New("pods: Config.Runtime is required"))
	}
	if c.ResyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("pods: resync period %v: must be positive", c.ResyncPeriod))
	}
	if c.ResyncPeriod == 0 {
		c.ResyncPeriod = DefaultResyncPeriod
	}
	if c.VolumeRetryPeriod <= 0 {
		c.VolumeRetryPeriod = DefaultVolumeRetryPeriod
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Worker runs one node's pods. Use New.
type Worker struct {
	cfg Config
	log *slog.Logger
	// pods is Config.Pods, or cache, which Run fills (until then it
	// answers not filled, and a pass lists from the server).
	pods  PodLister
	cache *podCache

	// syncing serialises passes; the fields below belong to the pass.
	syncing sync.Mutex
	// admitted holds the pods admitted here and not yet finished with.
	admitted map[types.UID]bool
	// holding are the pods the container manager admitted and has not
	// released.
	holding map[types.UID]bool
	// last is the latest copy seen of each pod the runtime holds, for
	// the grace period of one that disappears from the API.
	last map[types.UID]*corev1.Pod
	// wake asks Run for a pass (Kick).
	wake chan struct{}
	// killed are the container runs killed for a failed probe, by pod, so
	// that each is killed once.
	killed map[types.UID]map[string]bool

	mu     sync.Mutex
	stats  Stats
	events int64
	// terms are the pods Terminate was called for, by uid.
	terms map[types.UID]*termination
	// volumesPending: the last pass left a pod waiting for its volumes to
	// be set up or torn down.
	pendingVolumes atomic.Bool
}

// VolumesPending reports whether the last pass left a pod waiting for its
// volumes, so that the next pass should come soon.
func (w *Worker) VolumesPending() bool { return w.pendingVolumes.Load() }

// Stats counts the worker's writes.
type Stats struct {
	StatusUpdates int64
	Rejections    int64
	Deletions     int64
}

// New checks cfg and builds a Worker.
func New(cfg Config) (*Worker, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	w := &Worker{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.NodeName),
		pods:     cfg.Pods,
		cache:    &podCache{},
		admitted: map[types.UID]bool{},
		holding:  map[types.UID]bool{},
		last:     map[types.UID]*corev1.Pod{},
		wake:     make(chan struct{}, 1),
		killed:   map[types.UID]map[string]bool{},
		terms:    map[types.UID]*termination{},
	}
	if w.pods == nil {
		w.pods = w.cache
	}
	return w, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

func (w *Worker) count(f func(*Stats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// nodeSelector is the list and watch selector the node authorizer allows.
func (w *Worker) nodeSelector() string {
	return fields.OneTermEqualSelector("spec.nodeName", w.cfg.NodeName).String()
}

// Sync makes one pass over the node's pods (see the package comment). Until
// the Node exists it does nothing. Errors for single pods are joined; the
// next pass retries them.
func (w *Worker) Sync(ctx context.Context) error {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	node, err := w.node(ctx)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", w.cfg.NodeName, err)
	}
	pods, err := w.podsOn(ctx)
	if err != nil {
		return err
	}
	sortByCreation(pods)
	allocatable := node.Status.Allocatable
	if w.cfg.Allocatable != nil {
		allocatable = w.cfg.Allocatable()
	}
	pass := &pass{node: node, allocatable: allocatable, hostIPs: HostIPs(node), now: w.cfg.Clock.Now()}
	for _, p := range pods {
		if _, err := w.cfg.Runtime.PodStatus(p.UID); err == nil && !w.admitted[p.UID] {
			w.admitted[p.UID] = true
			w.readmit(p)
		}
		if w.admitted[p.UID] && p.DeletionTimestamp == nil && !terminal(p.Status.Phase) {
			pass.active = append(pass.active, p)
		}
	}
	var errs []error
	seen := map[types.UID]bool{}
	w.pendingVolumes.Store(false)
	for _, p := range pods {
		seen[p.UID] = true
		if err := w.syncPod(ctx, pass, p); err != nil {
			errs = append(errs, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	for _, rs := range w.cfg.Runtime.ListPods() {
		if !seen[rs.UID] {
			if err := w.removeOrphan(ctx, rs); err != nil {
				errs = append(errs, fmt.Errorf("pod %s/%s (deleted): %w", rs.Namespace, rs.Name, err))
			}
		}
	}
	if w.cfg.Volumes != nil {
		keep := func(uid types.UID) bool {
			_, err := w.cfg.Runtime.PodStatus(uid)
			return seen[uid] || err == nil
		}
		if err := w.cfg.Volumes.Cleanup(ctx, keep); err != nil {
			errs = append(errs, fmt.Errorf("cleaning up volumes: %w", err))
		}
	}
	w.forgetTerminations(seen)
	for uid := range w.admitted {
		if !seen[uid] {
			if _, err := w.cfg.Runtime.PodStatus(uid); err != nil {
				delete(w.admitted, uid)
				w.release(uid)
			}
		}
	}
	if err := w.syncResources(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// readmit hands the container manager a pod the runtime already runs (an
// agent restart), so that it counts what the pod holds.
func (w *Worker) readmit(pod *corev1.Pod) {
	if w.cfg.Resources == nil {
		return
	}
	reason, message, ok := w.cfg.Resources.Admit(pod)
	if !ok {
		w.log.Warn("a running pod's resources could not be restored", "pod", klogName(pod), "reason", reason, "message", message)
		return
	}
	w.holding[pod.UID] = true
}

// release returns a finished pod's resources to the container manager.
func (w *Worker) release(uid types.UID) {
	if w.cfg.Probes != nil {
		w.cfg.Probes.RemovePod(uid)
	}
	delete(w.killed, uid)
	if w.holding[uid] {
		w.cfg.Resources.RemovePod(uid)
		delete(w.holding, uid)
	}
}

// syncResources lets the container manager retry its cleanups and, when
// the shared CPU pool changed, has the runtime apply it to the running
// containers.
func (w *Worker) syncResources(ctx context.Context) error {
	if w.cfg.Resources == nil || !w.cfg.Resources.Sync(slices.Collect(maps.Keys(w.holding))) {
		return nil
	}
	if u, ok := w.cfg.Runtime.(runtime.ResourceUpdater); ok {
		if err := u.UpdateResources(ctx); err != nil {
			return fmt.Errorf("updating running containers' resources: %w", err)
		}
	}
	return nil
}

// podsOn is the node's pods: the cached ones once the cache is filled,
// else a list from the server.
func (w *Worker) podsOn(ctx context.Context) ([]*corev1.Pod, error) {
	if w.pods != nil {
		if pods, ok := w.pods.PodsOn(w.cfg.NodeName); ok {
			return pods, nil
		}
	}
	list, err := w.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: w.nodeSelector()})
	if err != nil {
		return nil, fmt.Errorf("listing pods of node %s: %w", w.cfg.NodeName, err)
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == w.cfg.NodeName {
			pods = append(pods, &list.Items[i])
		}
	}
	return pods, nil
}

// node is the worker's Node: the cached copy when there is one, else the
// server's.
func (w *Worker) node(ctx context.Context) (*corev1.Node, error) {
	if w.cfg.Nodes != nil {
		if n, err := w.cfg.Nodes.Get(w.cfg.NodeName); err == nil && n != nil {
			return n, nil
		}
	}
	return w.cfg.Client.CoreV1().Nodes().Get(ctx, w.cfg.NodeName, metav1.GetOptions{})
}

// pass is what one Sync knows of the node.
type pass struct {
	node        *corev1.Node
	allocatable corev1.ResourceList
	hostIPs     []string
	now         time.Time
	// active are the admitted pods that still count against the node.
	active []*corev1.Pod
}

func terminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

func (w *Worker) syncPod(ctx context.Context, ps *pass, pod *corev1.Pod) error {
	rs, err := w.cfg.Runtime.PodStatus(pod.UID)
	known := err == nil
	if known {
		w.last[pod.UID] = pod
	}
	if t := w.terminationOf(pod.UID); t != nil && pod.DeletionTimestamp == nil && !terminal(pod.Status.Phase) {
		return w.syncTerminating(ctx, ps, pod, t, known)
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return w.syncDeleting(ctx, ps, pod, known)
	case terminal(pod.Status.Phase):
		// Finished here, or ended by someone else: make sure nothing runs,
		// then take its volumes down.
		if known && !rs.Stopping {
			return w.cfg.Runtime.StopPod(ctx, pod.UID, podGrace(pod))
		}
		if known && !rs.Stopped() {
			return nil
		}
		w.release(pod.UID)
		_, err := w.teardownVolumes(ctx, pod.UID)
		return err
	case !w.admitted[pod.UID]:
		rej := (*Rejection)(nil)
		if w.cfg.Admit != nil {
			rej = w.cfg.Admit(pod)
		}
		if rej == nil {
			rej = Admit(pod, ps.node, ps.allocatable, ps.active)
		}
		if rej == nil && w.cfg.Resources != nil {
			if reason, message, ok := w.cfg.Resources.Admit(pod); ok {
				w.holding[pod.UID] = true
			} else {
				rej = &Rejection{Reason: reason, Message: message}
			}
		}
		if rej != nil {
			return w.reject(ctx, ps, pod, rej)
		}
		w.admitted[pod.UID] = true
		ps.active = append(ps.active, pod)
		w.log.Info("admitted pod", "pod", klogName(pod))
	}
	if !known && w.cfg.Volumes != nil && len(pod.Spec.Volumes) > 0 {
		ready, verr := w.cfg.Volumes.Setup(ctx, pod)
		if !ready {
			w.pendingVolumes.Store(true)
			st := BuildStatus(pod, runtime.PodStatus{}, w.view(ps), false, ps.now)
			waitingForVolumes(&st)
			return errors.Join(verr, w.writeStatus(ctx, pod, st))
		}
	}
	if !known {
		if w.cfg.Resources != nil {
			if err := w.cfg.Resources.PodStarting(pod); err != nil {
				return fmt.Errorf("making the pod's cgroup: %w", err)
			}
		}
		if err := w.cfg.Runtime.StartPod(ctx, withIPs(pod, ps.hostIPs, w.cfg.PodNetwork)); err != nil {
			return err
		}
		w.last[pod.UID] = pod
		if rs, err = w.cfg.Runtime.PodStatus(pod.UID); err != nil {
			return err
		}
	}
	v := w.view(ps)
	w.syncProbes(ctx, pod, rs, v)
	return w.writeStatus(ctx, pod, BuildStatus(pod, rs, v, false, ps.now))
}

// view is how BuildStatus sees the node in pass ps.
func (w *Worker) view(ps *pass) View {
	v := View{HostIPs: ps.hostIPs, PodNetwork: w.cfg.PodNetwork}
	if w.cfg.Probes != nil {
		v.Probes = func(uid types.UID, container string) (bool, bool) {
			st := w.cfg.Probes.Status(uid, container)
			return st.Started, st.Ready
		}
	}
	return v
}

// syncProbes tells the prober of pod and its containers' current runs,
// and kills, once, each run a liveness or startup probe failed.
func (w *Worker) syncProbes(ctx context.Context, pod *corev1.Pod, rs runtime.PodStatus, v View) {
	if w.cfg.Probes == nil {
		return
	}
	w.cfg.Probes.AddPod(pod)
	podIP := ""
	if ips := v.podIPs(pod, rs); len(ips) > 0 {
		podIP = ips[0]
	}
	for _, list := range [][]runtime.ContainerStatus{rs.InitContainers, rs.Containers} {
		for _, c := range list {
			id, started := "", time.Time{}
			if c.State.Running != nil {
				id, started = c.ID, c.State.Running.StartedAt.Time
			}
			w.cfg.Probes.UpdateContainer(pod.UID, c.Name, id, started, podIP)
			if id == "" || w.killed[pod.UID][id] {
				continue
			}
			kill := w.cfg.Probes.Status(pod.UID, c.Name).Kill
			if kill == nil {
				continue
			}
			killer, ok := w.cfg.Runtime.(runtime.ContainerKiller)
			if !ok {
				w.log.Warn("a probe failed but the runtime cannot kill one container", "pod", klogName(pod), "container", c.Name)
				continue
			}
			grace := probeKillGrace(pod, kill.GracePeriodSeconds)
			if err := killer.KillContainer(ctx, pod.UID, c.Name, grace, "", ""); err != nil {
				w.log.Warn("killing a container that failed its probe failed", "pod", klogName(pod), "container", c.Name, "err", err)
				continue
			}
			if w.killed[pod.UID] == nil {
				w.killed[pod.UID] = map[string]bool{}
			}
			w.killed[pod.UID][id] = true
			w.log.Info("killed a container that failed its probe", "pod", klogName(pod), "container", c.Name, "probe", kill.Probe)
		}
	}
}

// probeKillGrace is the grace of a kill for a failed probe: the probe's
// terminationGracePeriodSeconds when set, else the pod's (30 s by
// default).
func probeKillGrace(pod *corev1.Pod, probeGrace *int64) time.Duration {
	switch {
	case probeGrace != nil:
		return time.Duration(*probeGrace) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return corev1.DefaultTerminationGracePeriodSeconds * time.Second
}

// syncDeleting stops a deleted pod and, once it has stopped, writes its
// final status and finishes the deletion.
func (w *Worker) syncDeleting(ctx context.Context, ps *pass, pod *corev1.Pod, known bool) error {
	if known {
		if err := w.cfg.Runtime.StopPod(ctx, pod.UID, podGrace(pod)); err != nil {
			return err
		}
		rs, err := w.cfg.Runtime.PodStatus(pod.UID)
		if err != nil {
			return err
		}
		if !rs.Stopped() {
			v := w.view(ps)
			w.syncProbes(ctx, pod, rs, v)
			return w.writeStatus(ctx, pod, BuildStatus(pod, rs, v, false, ps.now))
		}
		if err := w.writeStatus(ctx, pod, BuildStatus(pod, rs, w.view(ps), true, ps.now)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// As the kubelet: the deletion finishes only once the pod's volumes
	// are down.
	if done, err := w.teardownVolumes(ctx, pod.UID); !done {
		return err
	}
	err := w.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	})
	switch {
	case err == nil:
		w.count(func(s *Stats) { s.Deletions++ })
		w.log.Info("deleted pod after its containers stopped", "pod", klogName(pod))
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or a new pod of the same name.
	default:
		return err
	}
	delete(w.admitted, pod.UID)
	delete(w.last, pod.UID)
	if known {
		if err := w.cfg.Runtime.RemovePod(ctx, pod.UID); err != nil {
			return err
		}
	}
	w.release(pod.UID)
	return nil
}

// removeOrphan stops a pod that is gone from the API and removes it once
// stopped.
func (w *Worker) removeOrphan(ctx context.Context, rs runtime.PodStatus) error {
	var grace time.Duration
	if last := w.last[rs.UID]; last != nil {
		grace = podGrace(last)
	}
	if err := w.cfg.Runtime.StopPod(ctx, rs.UID, grace); err != nil {
		return err
	}
	now, err := w.cfg.Runtime.PodStatus(rs.UID)
	if err != nil || !now.Stopped() {
		return err
	}
	if done, err := w.teardownVolumes(ctx, rs.UID); !done {
		return err
	}
	delete(w.admitted, rs.UID)
	delete(w.last, rs.UID)
	w.log.Info("removed a pod deleted from the API", "pod", rs.Namespace+"/"+rs.Name)
	if err := w.cfg.Runtime.RemovePod(ctx, rs.UID); err != nil {
		return err
	}
	w.release(rs.UID)
	return nil
}

// teardownVolumes takes down the volumes of a pod whose containers have
// stopped; done is true when there are none left (or no volume manager).
func (w *Worker) teardownVolumes(ctx context.Context, uid types.UID) (bool, error) {
	if w.cfg.Volumes == nil {
		return true, nil
	}
	done, err := w.cfg.Volumes.Teardown(ctx, uid)
	if !done {
		w.pendingVolumes.Store(true)
	}
	return done, err
}

// waitingForVolumes marks a status written while the pod's volumes are
// set up: no sandbox yet, every container waiting in ContainerCreating.
func waitingForVolumes(st *corev1.PodStatus) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == PodReadyToStartContainers {
			st.Conditions[i].Status = corev1.ConditionFalse
		}
	}
}

// podGrace is how long pod's containers get to stop: the deletion's grace
// period once deleted, else the spec's (0 when unset).
func podGrace(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 0
}

// withIPs is pod with the IPs the runtime exposes through the downward
// API: the host's, and the host's as the pod's too unless the runtime
// gives the pod a network of its own (podNetwork), whose addresses it
// knows once the sandbox exists.
func withIPs(pod *corev1.Pod, hostIPs []string, podNetwork bool) *corev1.Pod {
	p := pod.DeepCopy()
	p.Status.HostIP, p.Status.PodIP = "", ""
	p.Status.HostIPs, p.Status.PodIPs = nil, nil
	sharesHost := !podNetwork || pod.Spec.HostNetwork
	for i, ip := range hostIPs {
		if i == 0 {
			p.Status.HostIP = ip
		}
		p.Status.HostIPs = append(p.Status.HostIPs, corev1.HostIP{IP: ip})
		if sharesHost {
			if i == 0 {
				p.Status.PodIP = ip
			}
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	return p
}

// reject fails a pod that may not run here.
func (w *Worker) reject(ctx context.Context, ps *pass, pod *corev1.Pod, rej *Rejection) error {
	w.log.Info("rejected pod", "pod", klogName(pod), "reason", rej.Reason, "message", rej.Message)
	st := pod.Status.DeepCopy()
	st.Phase = corev1.PodFailed
	st.Reason = rej.Reason
	st.Message = RejectedMessagePrefix + rej.Message
	if st.StartTime == nil {
		st.StartTime = ptr.To(metav1.NewTime(ps.now).Rfc3339Copy())
	}
	if err := w.writeStatus(ctx, pod, *st); err != nil {
		return err
	}
	w.count(func(s *Stats) { s.Rejections++ })
	w.recordEvent(ctx, pod, corev1.EventTypeWarning, rej.Reason, rej.Message)
	return nil
}

// writeStatus writes st through pods/status unless the pod already has it.
// A pod that is gone is not an error.
func (w *Worker) writeStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) error {
	_, err := w.writeFinalStatus(ctx, pod, st)
	return err
}

// writeFinalStatus is writeStatus that also says whether the pod was gone
// (nothing written).
func (w *Worker) writeFinalStatus(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) (gone bool, err error) {
	if equality.Semantic.DeepEqual(pod.Status, st) {
		return false, nil
	}
	updated := pod.DeepCopy()
	updated.Status = st
	_, err = w.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	w.count(func(s *Stats) { s.StatusUpdates++ })
	for _, name := range backingOff(&pod.Status, &st) {
		w.recordEvent(ctx, pod, corev1.EventTypeWarning, ReasonBackOff,
			fmt.Sprintf("Back-off restarting failed container %s in pod %s_%s(%s)", name, pod.Name, pod.Namespace, pod.UID))
	}
	return false, nil
}

// ReasonBackOff is the kubelet's event reason for a container waiting out
// its restart back-off.
const ReasonBackOff = "BackOff"

// backingOff names the containers that st has waiting in CrashLoopBackOff
// and old did not.
func backingOff(old, st *corev1.PodStatus) []string {
	was := map[string]bool{}
	for _, cs := range slices.Concat(old.InitContainerStatuses, old.ContainerStatuses) {
		was[cs.Name] = cs.State.Waiting != nil && cs.State.Waiting.Reason == runtime.ReasonCrashLoopBackOff
	}
	var names []string
	for _, cs := range slices.Concat(st.InitContainerStatuses, st.ContainerStatuses) {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == runtime.ReasonCrashLoopBackOff && !was[cs.Name] {
			names = append(names, cs.Name)
		}
	}
	return names
}

// recordEvent writes an event about pod from the kubelet source; failures
// are only logged.
// RecordEvent records an event about pod from the kubelet source, as the
// worker's own events are (the volume manager's FailedMount, for one).
func (w *Worker) RecordEvent(ctx context.Context, pod *corev1.Pod, eventType, reason, message string) {
	w.recordEvent(ctx, pod, eventType, reason, message)
}

func (w *Worker) recordEvent(ctx context.Context, pod *corev1.Pod, eventType, reason, message string) {
	now := metav1.NewTime(w.cfg.Clock.Now())
	w.mu.Lock()
	w.events++
	seq := w.events
	w.mu.Unlock()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()+seq),
			Namespace: pod.Namespace,
		},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Reason:         reason,
		Message:        message,
		Type:           eventType,
		Source:         corev1.EventSource{Component: eventSource, Host: w.cfg.NodeName},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	if _, err := w.cfg.Client.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		w.log.Debug("recording event failed", "reason", reason, "err", err)
	}
}

func klogName(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// nextChanger is a runtime that can tell when a container next changes on
// its own (the fake runtime), so Run need not wait for a resync.
type nextChanger interface {
	NextChange() (time.Time, bool)
}

// Run syncs until ctx ends: at once, then whenever a pod of the node
// changes, the runtime reports a change, or ResyncPeriod has passed.
func (w *Worker) Run(ctx context.Context) error {
	kick := make(chan struct{}, 1)
	cache := w.cache
	// The first list fills the cache before the first pass; the watch
	// starts from its revision.
	first, err := w.listInto(ctx, cache)
	if err != nil && ctx.Err() == nil {
		w.log.Debug("listing pods failed", "err", err)
	}
	var watching sync.WaitGroup
	watching.Add(1)
	go func() {
		defer watching.Done()
		w.watch(ctx, kick, cache, first)
	}()
	defer watching.Wait()
	ticker := w.cfg.Clock.NewTicker(w.cfg.ResyncPeriod)
	defer ticker.Stop()
	for {
		if err := w.Sync(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("pod sync failed", "err", err)
		}
		var due <-chan time.Time
		var timer clock.Timer
		if nc, ok := w.cfg.Runtime.(nextChanger); ok {
			if at, ok := nc.NextChange(); ok {
				timer = w.cfg.Clock.NewTimer(at.Sub(w.cfg.Clock.Now()))
				due = timer.C()
			}
		}
		if timer == nil && w.VolumesPending() {
			timer = w.cfg.Clock.NewTimer(w.cfg.VolumeRetryPeriod)
			due = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-ticker.C():
		case <-kick:
		case <-w.wake:
		case <-w.cfg.Runtime.Changes():
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// watch keeps cache current from a watch of the node's pods that starts
// at the revision of the list that filled it (first, or a new one),
// kicking a sync on every change. When the watch ends or fails it waits a
// second on the clock and lists again.
func (w *Worker) watch(ctx context.Context, kick chan<- struct{}, cache *podCache, first *corev1.PodList) {
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	for ctx.Err() == nil {
		if err := w.listAndWatch(ctx, cache, poke, first); err != nil && ctx.Err() == nil {
			w.log.Debug("watching pods failed", "err", err)
		}
		first = nil
		timer := w.cfg.Clock.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// listInto fills cache from a list of the node's pods.
func (w *Worker) listInto(ctx context.Context, cache *podCache) (*corev1.PodList, error) {
	list, err := w.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: w.nodeSelector()})
	if err != nil {
		return nil, err
	}
	cache.replace(list.Items)
	return list, nil
}

// listAndWatch lists (unless list is given) and then watches until the
// watch ends.
func (w *Worker) listAndWatch(ctx context.Context, cache *podCache, poke func(), list *corev1.PodList) error {
	if list == nil {
		var err error
		if list, err = w.listInto(ctx, cache); err != nil {
			return err
		}
		poke()
	}
	wi, err := w.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{FieldSelector: w.nodeSelector(), ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		if cache.apply(ev) {
			poke()
		}
	}
	return nil
}
