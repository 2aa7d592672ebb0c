// Package sim runs knode's own components in virtual time: scenarios that
// rehearse node failures and eviction policy, hours of them in seconds,
// with the same result on every run of the same seed.
//
// What it owns: a World made of a memory store, the real API server (the
// real registries, authorization and admission chain of knode server), the
// real node lifecycle controller, taint eviction controller, scheduler and
// pod garbage collector, the real PV binder and attach/detach controller
// for the pods given a volume (see volumes.go), the real StatefulSet
// controller once a scenario has a StatefulSet (see statefulsets.go), and
// N real agents (lease renewal, node status, pod worker and, when
// configured, graceful node shutdown) on the fake host and the fake
// runtime, all on one virtual clock (internal/sim/vclock).
// Clients reach the API server through internal/sim/inproc, over HTTP
// semantics but without sockets, each agent as its own node identity;
// only the agents' Lease renewals and status patches skip the wire and
// call the server's handling directly (direct.go).
//
// How time moves: every component's work is a timer on the virtual clock
// whose callback calls the component's synchronous step (the same step its
// Run loop calls in a server): the agent's lease Step, SyncStatus and pod
// worker Sync; the lifecycle controller's monitor and tainting passes; the
// scheduler's Step; taint eviction's Observe; the PV binder's Sync and the
// attach/detach controller's Step; the StatefulSet controller's Sync; the
// pod garbage collector's Sync. Callbacks run in order of
// due time, ties in the order they were set, on the caller's goroutine,
// except that the agents' callbacks due before anything else's next one
// run side by side, each on its own virtual time (see lanes.go). After
// each callback, or batch of agents' callbacks, the World reads the store's
// new changes (see mirror) and sets zero-delay timers for the components
// they concern, which is how a server's watches would wake them. Nothing
// waits on real time, and what runs side by side cannot see each other's
// writes, so a seed fixes the outcome.
//
// Node shutdowns: each node is a machine and the agent process on it.
// With graceful shutdown configured (the shutdown-grace-period settings),
// each agent runs the real shutdown manager (internal/agent/shutdown) over
// an in-memory logind (membus) that grants the delay the manager asks.
// A shutdown calls the manager's Begin directly (no signal goes through a
// watch): the node's status is posted at once (Ready False, "node is
// shutting down"), and the manager is stepped after each pod sync of its
// agent and at the times it asks. When it releases its delay lock, or
// logind's delay runs out first, the machine powers off: its agent falls
// silent as a stopped one does. Without graceful shutdown (the default,
// as upstream) the machine powers off at once and its pods are not
// stopped. A start boots a machine that is off: a new boot ID and a new
// agent process (agent, empty runtime, pod worker, a manager that takes
// its lock again) that adopts the Node and runs the pods that have not
// ended; those the shutdown stopped are Failed in the API and stay so.
// The managers write their state files and reports under a directory of
// the World's own, removed by Close.
//
// Node resources: with any of the settings cpu-manager-policy,
// reserved-cpus, topology-manager-policy and topology-manager-scope set,
// each agent process runs the real container manager (internal/agent/cm)
// in its pod worker, as knode agent does, over its machine's fake
// topology (nodes … cpus=<c> numa-nodes=<k>), cpu and memory: the CPU
// manager (none or static) and the topology manager admit or reject each
// pod, and reserved-cpus is held back from the node's allocatable cpu. It
// only decides: no cgroup is written and the fake runtime applies nothing.
// Its state files (cpu_manager_state, memory_manager_state) are in the
// node's directory of the World, so a rebooted machine's new manager
// restores them. A rejected pod ends Failed with the kubelet's reason
// (such as TopologyAffinityError); pods_rejected counts them, and the
// summary gives their reasons. With none of these settings (the default)
// no container manager runs, as before.
//
// Non-graceful node shutdown: an operator's at <t> taint out-of-service
// statement puts node.kubernetes.io/out-of-service=nodeshutdown:NoExecute
// on nodes (untaint takes it off). Being NoExecute, it has taint eviction
// delete the pods that do not tolerate it; the pod garbage collector then
// force-deletes the pods being deleted on those nodes while they are not
// Ready, and the attach/detach controller detaches their volumes at once.
// The collector ticks every 20 s of virtual time from the start, its
// upstream cadence, and passes at a tick only when it has work: when its
// own plan (podgc.Plan) over the mirror would delete a pod, or a pod is
// bound to a node that does not exist. The ticks it skips are passes that
// would have listed every pod and node and written nothing, so the outcome
// is that of a pass every 20 s, and a scenario it has nothing to do in
// does not pay for it. The force-delete action stays: an operator's own
// kubectl delete --force.
//
// Where it departs from a server, on purpose: the pod worker syncs when
// its pods change and when the fake runtime has something due, not on its
// 10 s resync as well; the lifecycle controller and taint eviction read a
// synchronous mirror of the store instead of informers; the scheduler
// writes one binding at a time; the PV binder and the attach/detach
// controller pass when what they read changes (and the latter when a
// forced detach falls due), not also every 15 s and 100 ms; the
// StatefulSet controller passes on changes and when it asks to, not also
// every 30 s; the pod garbage collector skips the passes with nothing to
// do (above); and the CSI driver's attacher and each agent's volume
// manager are stand-ins that attach, mount and unmount at once (see
// volumes.go).
//
// What callers must do: use one World from one goroutine.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"knode/internal/admission/defaulttolerationseconds"
	"knode/internal/agent/pods"
	"knode/internal/agent/shutdown"
	"knode/internal/apiserver"
	"knode/internal/auth"
	"knode/internal/controller/nodelifecycle"
	"knode/internal/controller/podgc"
	"knode/internal/controller/statefulset"
	"knode/internal/controller/tainteviction"
	"knode/internal/controller/volume/attachdetach"
	"knode/internal/controller/volume/persistentvolume"
	"knode/internal/registry/priorityclass"
	"knode/internal/scheduler"
	"knode/internal/server"
	"knode/internal/sim/inproc"
	"knode/internal/sim/timeline"
	"knode/internal/sim/vclock"
	"knode/internal/storage/memory"
	"knode/internal/version"
)

// Epoch is virtual time zero.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// SampleInterval is how often the timeline is sampled.
const SampleInterval = 10 * time.Second

// compactInterval is how often the store's history is compacted.
const compactInterval = 5 * time.Minute

// Config builds a World.
type Config struct {
	// Seed fixes every random choice (the agents' jitter).
	Seed uint64
	// Settings are the component settings; the zero value means
	// DefaultSettings().
	Settings *Settings
	// Logger receives the components' logs; nil discards them.
	Logger *slog.Logger
	// Workers is how many goroutines run the agents' callbacks that are
	// due together (see lanes.go); 0 means GOMAXPROCS. The outcome does
	// not depend on it.
	Workers int
	// Batch bounds how many agent callbacks one batch holds; 0 means
	// maxBatch, and 1 runs every callback on its own.
	Batch int
	// WireOnly sends the agents' Lease renewals and status patches over
	// the in-process HTTP transport, like every other request, instead of
	// the direct path of direct.go. The outcome does not depend on it.
	WireOnly bool
}

// World is one simulated cluster.
type World struct {
	cfg      Config
	settings Settings
	log      *slog.Logger
	ctx      context.Context
	clk      *vclock.Clock
	store    *memory.Store
	api      *apiserver.Server
	admin    kubernetes.Interface
	mirror   *mirror
	nlc      *nodelifecycle.Controller
	evictor  *tainteviction.Controller
	sched    *scheduler.Scheduler
	// claimEvents and volumeEvents are the scheduler's handlers for
	// claims and volumes.
	claimEvents, volumeEvents cache.ResourceEventHandler

	// binder and attachDetach are the volume controllers (see volumes.go);
	// adMetrics holds attachDetach's forced-detach counter.
	binder       *persistentvolume.Controller
	attachDetach *attachdetach.Controller
	adMetrics    *prometheus.Registry
	// driverMade is set once SimDriver's CSIDriver exists; unattached are
	// the attachments waiting for the attacher, by name.
	driverMade bool
	unattached map[string]bool
	// volumePasses counts the passes of the volume controllers.
	volumePasses int

	// sets is the StatefulSet controller, nil until the first StatefulSet
	// (see statefulsets.go); setPasses counts its passes and setMarks
	// follows each StatefulSet's readiness.
	sets      *statefulset.Controller
	setPasses int
	setMarks  map[types.NamespacedName]*setMarks
	// gc is the pod garbage collector; gcMetrics holds its counters and
	// gcPasses counts its passes. gcOrphans is set once a pod was seen
	// bound to a node that does not exist.
	gc        *podgc.Controller
	gcMetrics *prometheus.Registry
	gcPasses  int
	gcOrphans bool

	// directCalls counts the agents' requests made in process (direct.go).
	directCalls atomic.Int64

	agents []*simAgent
	byName map[string]*simAgent
	zones  map[string][]*simAgent
	pods   int

	// kicks are the zero-delay timers already set, by component.
	kicks map[string]bool
	// changedNodes and changedPods wait for taint eviction's next Observe.
	changedNodes map[string]bool
	// untainted are the nodes added or changed since the last NoSchedule
	// tainting pass.
	untainted   map[string]bool
	changedPods map[types.NamespacedName]bool
	// evictDue and schedDue are when taint eviction and the scheduler are
	// next due; attachDetachDue and bindDue the volume controllers,
	// and setDue the StatefulSet controller.
	evictDue, schedDue, attachDetachDue, bindDue, setDue dueTimer

	// batching is set while a batch of agent callbacks runs (see
	// stepLanes); batch and laneRank are its scratch space.
	batching bool
	batch    []vclock.LaneCall
	laneRank map[int]int
	// batches and batched count the batches of more than one callback
	// and the callbacks they held.
	batches, batched int

	// evicted counts, per zone, the pods taint eviction deleted.
	evicted     map[string]int
	evictedUIDs map[types.UID]bool
	// shutDown counts, per zone, the pods a node shutdown ended.
	shutDown     map[string]int
	shutDownUIDs map[types.UID]bool
	// rejected counts, per zone, the pods an agent rejected at admission.
	rejected     map[string]int
	rejectedUIDs map[types.UID]bool
	// forceDetached counts, per zone, the volumes detached without a
	// verified unmount.
	forceDetached map[string]int
	// classes are the PriorityClasses made for the pods statements.
	classes map[string]bool
	// dir holds the agents' root directories; "" until one is needed.
	dir string
	// marks holds, per zone, the exact times the summary reports.
	marks      map[string]*zoneMarks
	samples    []timeline.Row
	nextSample time.Duration
	err        error
}

// New builds a World at virtual time zero with no nodes.
func New(ctx context.Context, cfg Config) (*World, error) {
	w := &World{
		cfg: cfg, ctx: ctx, settings: DefaultSettings(), log: cfg.Logger,
		clk: vclock.New(Epoch), store: memory.New(memory.Config{}),
		byName: map[string]*simAgent{}, zones: map[string][]*simAgent{}, kicks: map[string]bool{},
		changedNodes: map[string]bool{}, untainted: map[string]bool{}, changedPods: map[types.NamespacedName]bool{},
		evicted: map[string]int{}, evictedUIDs: map[types.UID]bool{}, laneRank: map[int]int{},
		shutDown: map[string]int{}, shutDownUIDs: map[types.UID]bool{}, classes: map[string]bool{},
		rejected: map[string]int{}, rejectedUIDs: map[types.UID]bool{},
		marks: map[string]*zoneMarks{}, unattached: map[string]bool{}, forceDetached: map[string]int{},
		setMarks: map[types.NamespacedName]*setMarks{},
	}
	if cfg.Settings != nil {
		w.settings = *cfg.Settings
		if err := w.settings.Validate(); err != nil {
			return nil, err
		}
	}
	if w.log == nil {
		w.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return w, nil
}

// build makes the API server, the clients and the mirror, with the
// settings in effect.
func (w *World) build() error {
	var api *apiserver.Server
	authz, nodeRestriction := server.NodeAccess(func() *apiserver.Server { return api })
	priority, err := server.PriorityAdmission(func() *apiserver.Server { return api })
	if err != nil {
		return err
	}
	api, err = apiserver.New(apiserver.Config{
		Storage:       w.store,
		Kinds:         server.Kinds(),
		Authenticator: identities{},
		Authorizer:    authz,
		Admission: []apiserver.Admitter{
			nodeRestriction,
			priority,
			defaulttolerationseconds.New(defaulttolerationseconds.Config{
				NotReadyTolerationSeconds:    &w.settings.DefaultNotReadyTolerationSeconds,
				UnreachableTolerationSeconds: &w.settings.DefaultUnreachableTolerationSeconds,
			}),
		},
		Clock:   w.clk,
		Version: version.Info(),
		Logger:  w.log,
		// Every read sees every write made before it, whatever the
		// goroutines feeding the caches are doing: runs stay deterministic.
		StrictReads: true,
	})
	if err != nil {
		return err
	}
	w.api = api
	if err := api.EnsureNamespaces(w.ctx); err != nil {
		return err
	}
	// The built-in PriorityClasses, as knode server makes them.
	for _, pc := range priorityclass.System() {
		if _, err := api.Create(w.ctx, schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"), pc); err != nil {
			return fmt.Errorf("creating PriorityClass %s: %w", pc.Name, err)
		}
	}
	if w.admin, err = w.client(adminToken); err != nil {
		return err
	}
	if w.mirror, err = newMirror(w.store, api, 1, w); err != nil {
		return err
	}
	if err := w.mirror.refresh(); err != nil {
		return err
	}
	return nil
}

// Settings returns the settings in effect.
func (w *World) Settings() Settings { return w.settings }

// Now is the virtual time elapsed since Epoch.
func (w *World) Now() time.Duration { return w.clk.Now().Sub(Epoch) }

// started reports whether the controllers run yet; settings are fixed
// from then on.
func (w *World) started() bool { return w.nlc != nil }

// Set changes one setting; only before the first node, pod, StatefulSet,
// at or run.
func (w *World) Set(name, value string) error {
	if w.started() {
		return errors.New("settings must come before the first nodes, pods, statefulset, at or run statement")
	}
	return w.settings.Set(name, value)
}

// start builds the controllers and sets their timers, once. The settings
// are fixed from then on, and checked as a whole.
func (w *World) start() error {
	if w.started() {
		return nil
	}
	if err := w.settings.Validate(); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	if err := w.build(); err != nil {
		return err
	}
	s := w.settings
	nlc, err := nodelifecycle.New(nodelifecycle.Config{
		Client:                    w.admin,
		Source:                    source{w.mirror},
		Clock:                     w.clk,
		NodeMonitorPeriod:         s.NodeMonitorPeriod,
		NodeMonitorGracePeriod:    s.NodeMonitorGracePeriod,
		NodeStartupGracePeriod:    s.NodeStartupGracePeriod,
		NodeEvictionRate:          nodelifecycle.RateFlag(s.NodeEvictionRate),
		SecondaryNodeEvictionRate: nodelifecycle.RateFlag(s.SecondaryNodeEvictionRate),
		UnhealthyZoneThreshold:    s.UnhealthyZoneThreshold,
		LargeClusterSizeThreshold: s.LargeClusterSizeThreshold,
		Workers:                   1,
		Logger:                    w.log,
	})
	if err != nil {
		return err
	}
	evictor, err := tainteviction.New(tainteviction.Config{Client: w.admin, Clock: w.clk, Logger: w.log})
	if err != nil {
		return err
	}
	sched, err := scheduler.New(scheduler.Config{Client: w.admin, Clock: w.clk, Logger: w.log})
	if err != nil {
		return err
	}
	w.gcMetrics = prometheus.NewRegistry()
	gc, err := podgc.New(podgc.Config{
		Client:                 w.admin,
		Clock:                  w.clk,
		TerminatedPodThreshold: &s.TerminatedPodGCThreshold,
		Metrics:                w.gcMetrics,
		Logger:                 w.log,
	})
	if err != nil {
		return err
	}
	w.nlc, w.evictor, w.sched, w.gc = nlc, evictor, sched, gc
	w.claimEvents, w.volumeEvents = sched.ClaimHandler(), sched.VolumeHandler()
	if err := w.volumeControllers(); err != nil {
		return err
	}
	// What happened before the controllers existed reaches them now.
	for _, name := range sortedKeys(w.mirror.nodes) {
		w.nodeChanged(nil, w.mirror.nodes[name])
	}
	w.every(s.NodeMonitorPeriod, "node monitor pass", nlc.MonitorNodeHealth)
	w.every(podgc.DefaultPeriod, "pod garbage collection", w.collectPods)
	w.every(nodelifecycle.NoExecuteTaintingPeriod, "NoExecute tainting pass", nlc.DoNoExecuteTaintingPass)
	w.every(compactInterval, "compaction", func(ctx context.Context) error {
		if err := w.store.Compact(ctx, w.mirror.rev); err != nil {
			return err
		}
		w.api.Compacted(w.mirror.rev)
		return nil
	})
	return nil
}

// collectPods is the pod garbage collector's tick, every 20 s from the
// start as its Run loop passes: a pass when it has work (see gcHasWork).
func (w *World) collectPods(ctx context.Context) error {
	if !w.gcHasWork() {
		return nil
	}
	w.gcPasses++
	return w.gc.Sync(ctx)
}

// gcHasWork reports whether a pass of the pod garbage collector now could
// write anything: its own plan (podgc.Plan) over the mirror, which holds
// every write so far, deletes a pod, or a pod is bound to a node that does
// not exist (whose quarantine the collector keeps from pass to pass; once
// one has been seen, every tick passes). A tick without work skips the
// pass, which would list every pod and node and write nothing.
func (w *World) gcHasWork() bool {
	if w.gcOrphans {
		return true
	}
	pods := make([]*corev1.Pod, 0, len(w.mirror.pods))
	for _, p := range w.mirror.pods {
		if p.Spec.NodeName != "" && w.mirror.nodes[p.Spec.NodeName] == nil {
			w.gcOrphans = true
			return true
		}
		pods = append(pods, p)
	}
	nodes := make([]*corev1.Node, len(w.mirror.names))
	for i, name := range w.mirror.names {
		nodes[i] = w.mirror.nodes[name]
	}
	return len(podgc.Plan(pods, nodes, nil, w.settings.TerminatedPodGCThreshold)) > 0
}

// every runs step now and then every period, as a component's Run loop
// would.
func (w *World) every(period time.Duration, what string, step func(context.Context) error) {
	var tick func()
	tick = func() {
		if err := step(w.ctx); err != nil {
			w.log.Warn(what+" failed", "err", err)
		}
		w.after(period, tick)
	}
	w.after(0, tick)
}

// after runs fn on the virtual clock after d, then takes in what fn wrote.
func (w *World) after(d time.Duration, fn func()) clock.Timer {
	return w.clk.AfterFunc(d, func() {
		if w.err != nil {
			return
		}
		fn()
		w.settle()
	})
}

// settle reads the store's new changes and wakes the components they
// concern.
func (w *World) settle() { w.settleOrdered(nil) }

// settleOrdered is settle, handing the changes on ordered by the rank of
// the node each concerns when rank is not nil (see mirror.refreshOrdered).
func (w *World) settleOrdered(rank func(node string) int) {
	if err := w.mirror.refreshOrdered(rank); err != nil {
		w.fail(err)
		return
	}
	if !w.started() {
		return
	}
	if len(w.untainted) > 0 {
		w.kick("NoSchedule tainting pass", w.noScheduleTaint)
	}
	if len(w.changedNodes) > 0 || len(w.changedPods) > 0 {
		w.kick("taint eviction", w.observeTaints)
	}
	if st := w.sched.Stats(); st.Active > 0 {
		w.kick("scheduler", w.schedule)
	}
}

func (w *World) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// kick sets a zero-delay timer for fn unless one is already set.
func (w *World) kick(name string, fn func()) {
	if w.kicks[name] {
		return
	}
	w.kicks[name] = true
	w.after(0, func() {
		delete(w.kicks, name)
		fn()
	})
}

// nodeChanged implements observer.
func (w *World) nodeChanged(old, cur *corev1.Node) {
	var oldNE, curNE []corev1.Taint
	if old != nil {
		oldNE = tainteviction.NoExecuteTaints(old.Spec.Taints)
	}
	if cur != nil {
		curNE = tainteviction.NoExecuteTaints(cur.Spec.Taints)
	}
	w.markTaints(old, cur, len(oldNE) > 0, len(curNE) > 0)
	if !w.started() {
		return
	}
	name := ""
	switch {
	case cur != nil:
		name = cur.Name
		if old == nil {
			w.sched.NodeHandler().OnAdd(cur, false)
		} else {
			w.sched.NodeHandler().OnUpdate(old, cur)
		}
	case old != nil:
		name = old.Name
		w.sched.NodeHandler().OnDelete(old)
	}
	if cur != nil {
		w.untainted[name] = true
	}
	if old == nil || cur == nil || !equality.Semantic.DeepEqual(oldNE, curNE) {
		w.changedNodes[name] = true
	}
	if w.haveVolumes() && attachDetachReads(old, cur) {
		w.kickAttachDetach()
	}
}

// podChanged implements observer.
func (w *World) podChanged(old, cur *corev1.Pod) {
	w.countEviction(cur, old)
	w.countShutdown(cur)
	w.countRejection(cur)
	if !w.started() {
		return
	}
	p := cur
	switch {
	case cur != nil && old == nil:
		w.sched.PodHandler().OnAdd(cur, false)
	case cur != nil:
		w.sched.PodHandler().OnUpdate(old, cur)
	default:
		p = old
		w.sched.PodHandler().OnDelete(old)
	}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if old == nil || cur == nil || old.Spec.NodeName != cur.Spec.NodeName || !equality.Semantic.DeepEqual(old.Spec.Tolerations, cur.Spec.Tolerations) {
		w.changedPods[key] = true
	}
	for _, node := range []string{nodeOf(old), nodeOf(cur)} {
		if a := w.byName[node]; a != nil {
			a.kickWorker()
		}
	}
	if usesClaims(old) || usesClaims(cur) {
		w.kickAttachDetach()
	}
	if w.concernsSets(old) || w.concernsSets(cur) {
		w.kickSets()
	}
}

func nodeOf(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Spec.NodeName
}

// countEviction counts a pod the first time it is seen deleted by taint
// eviction (its DisruptionTarget condition says so), in its node's zone.
func (w *World) countEviction(cur, old *corev1.Pod) {
	p := cur
	if p == nil {
		p = old
		if p == nil {
			return
		}
	} else if p.DeletionTimestamp == nil {
		return
	}
	if w.evictedUIDs[p.UID] {
		return
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == tainteviction.ConditionReason {
			w.evictedUIDs[p.UID] = true
			zone := w.zoneOf(p.Spec.NodeName)
			w.evicted[zone]++
			if m := w.marksOf(zone); !m.evicted {
				m.evicted, m.firstEvicted = true, w.Now()
			}
			return
		}
	}
}

// countShutdown counts a pod the first time it is seen Failed by a node
// shutdown (reason Terminated, which only the shutdown manager writes), in
// its node's zone.
func (w *World) countShutdown(cur *corev1.Pod) {
	if cur == nil || cur.Status.Phase != corev1.PodFailed || cur.Status.Reason != shutdown.ReasonTerminated || w.shutDownUIDs[cur.UID] {
		return
	}
	w.shutDownUIDs[cur.UID] = true
	w.shutDown[w.zoneOf(cur.Spec.NodeName)]++
}

// countRejection counts a pod the first time it is seen Failed by its
// agent's admission (the pod worker's "Pod was rejected: " message), in its
// node's zone, and by reason.
func (w *World) countRejection(cur *corev1.Pod) {
	if cur == nil || cur.Status.Phase != corev1.PodFailed || !strings.HasPrefix(cur.Status.Message, pods.RejectedMessagePrefix) || w.rejectedUIDs[cur.UID] {
		return
	}
	w.rejectedUIDs[cur.UID] = true
	zone := w.zoneOf(cur.Spec.NodeName)
	w.rejected[zone]++
	m := w.marksOf(zone)
	if m.rejections == nil {
		m.rejections = map[string]int{}
	}
	m.rejections[cur.Status.Reason]++
}

// zoneMarks are a zone's NoExecute taints and first eviction as they
// happen, at the virtual time the World observes them, rather than as the
// 10 s samples catch them.
type zoneMarks struct {
	// tainted is the zone's nodes with a NoExecute taint now; maxTainted
	// the most at once, first reached at allTainted; firstTainted is when
	// the first was tainted.
	tainted, maxTainted      int
	firstTainted, allTainted time.Duration
	evicted                  bool
	firstEvicted             time.Duration
	// forceDetached is set once a volume of the zone was force-detached,
	// first at firstForceDetached.
	forceDetached      bool
	firstForceDetached time.Duration
	// rejections counts the zone's pods rejected at admission, by reason.
	rejections map[string]int
}

func (w *World) marksOf(zone string) *zoneMarks {
	m := w.marks[zone]
	if m == nil {
		m = &zoneMarks{}
		w.marks[zone] = m
	}
	return m
}

// markTaints follows a node from old to cur: was and is say whether each
// has a NoExecute taint.
func (w *World) markTaints(old, cur *corev1.Node, was, is bool) {
	if was {
		w.marksOf(old.Labels[corev1.LabelTopologyZone]).tainted--
	}
	if !is {
		return
	}
	m := w.marksOf(cur.Labels[corev1.LabelTopologyZone])
	m.tainted++
	if m.tainted > m.maxTainted {
		if m.maxTainted == 0 {
			m.firstTainted = w.Now()
		}
		m.maxTainted, m.allTainted = m.tainted, w.Now()
	}
}

// Summary is Summarize of the samples, with the taint and eviction times
// and the most nodes tainted at once as they happened, not as sampled.
func (w *World) Summary() []ZoneSummary {
	out := Summarize(w.samples)
	for i := range out {
		m := w.marks[out[i].Zone]
		if m == nil {
			m = &zoneMarks{}
		}
		out[i].MaxTainted, out[i].FirstTainted, out[i].AllTainted = m.maxTainted, m.firstTainted, m.allTainted
		if m.evicted {
			out[i].FirstEvicted = m.firstEvicted
		}
		if m.forceDetached {
			out[i].FirstForceDetached = m.firstForceDetached
		}
		out[i].Rejections = maps.Clone(m.rejections)
	}
	return out
}

func (w *World) zoneOf(node string) string {
	if a := w.byName[node]; a != nil {
		return a.zone
	}
	if n := w.mirror.nodes[node]; n != nil {
		return n.Labels[corev1.LabelTopologyZone]
	}
	return ""
}

// noScheduleTaint runs the lifecycle controller's NoSchedule tainting pass
// over the nodes that changed, as its node update queue would in a server.
func (w *World) noScheduleTaint() {
	names := sortedKeys(w.untainted)
	clear(w.untainted)
	if err := w.nlc.NoScheduleTaintingPassFor(w.ctx, names); err != nil {
		w.log.Warn("NoSchedule tainting pass failed", "err", err)
	}
}

// observeTaints hands taint eviction what changed, then sets a timer for
// its next due deletion.
func (w *World) observeTaints() {
	nodes := sortedKeys(w.changedNodes)
	pods := make([]types.NamespacedName, 0, len(w.changedPods))
	for k := range w.changedPods {
		pods = append(pods, k)
	}
	clear(w.changedNodes)
	clear(w.changedPods)
	if err := w.evictor.Observe(w.ctx, w.mirror.lookup(), nodes, pods); err != nil {
		w.log.Warn("taint eviction pass failed", "err", err)
	}
	if at, ok := w.evictor.NextDue(); ok {
		w.evictDue.set(w, at, w.observeTaints)
	}
}

// schedule runs the scheduler's step, then sets a timer for its next
// backoff.
func (w *World) schedule() {
	next, ok, err := w.sched.Step(w.ctx)
	if err != nil {
		w.log.Warn("scheduling failed", "err", err)
	}
	if ok {
		w.schedDue.set(w, next, w.schedule)
	}
}

// dueTimer is the one timer a component keeps for the time its next step
// is due.
type dueTimer struct {
	t  clock.Timer
	at time.Time
}

// set makes fn run at at, replacing a timer set for another time.
func (d *dueTimer) set(w *World, at time.Time, fn func()) {
	if d.t != nil {
		if d.at.Equal(at) {
			return
		}
		d.t.Stop()
	}
	d.at = at
	d.t = w.after(at.Sub(w.clk.Now()), func() {
		d.t = nil
		fn()
	})
}

// RunFor advances virtual time by d, running everything due, and samples
// the timeline every SampleInterval.
func (w *World) RunFor(d time.Duration) error {
	if err := w.start(); err != nil {
		return err
	}
	end := w.clk.Now().Add(d)
	for w.err == nil {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		// A sample at time t shows the state after everything due at or
		// before t.
		sampleAt := Epoch.Add(w.nextSample)
		if next, ok := w.clk.Next(); ok && !next.After(end) && !next.After(sampleAt) {
			if !w.stepLanes(earliest(end, sampleAt)) {
				w.clk.Step()
			}
			continue
		}
		if sampleAt.After(end) {
			break
		}
		w.clk.AdvanceTo(sampleAt)
		w.sample()
	}
	if w.err != nil {
		return w.err
	}
	w.clk.AdvanceTo(end)
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sample records one row per zone at the current time.
func (w *World) sample() {
	w.samples = append(w.samples, w.Snapshot()...)
	w.nextSample += SampleInterval
}

// Samples returns the timeline so far.
func (w *World) Samples() []timeline.Row { return w.samples }

// Snapshot counts every zone now, zones in name order.
func (w *World) Snapshot() []timeline.Row {
	byZone := map[string]*timeline.Row{}
	get := func(zone string) *timeline.Row {
		s := byZone[zone]
		if s == nil {
			s = &timeline.Row{TimeS: int64(w.Now() / time.Second), Zone: zone, PodsEvicted: w.evicted[zone], PodsShutDown: w.shutDown[zone], VolumesForceDetached: w.forceDetached[zone], PodsRejected: w.rejected[zone]}
			byZone[zone] = s
		}
		return s
	}
	for zone, agents := range w.zones {
		s := get(zone)
		for _, a := range agents {
			if a.power != poweredOn {
				s.ShuttingDown++
			}
		}
	}
	for _, n := range w.mirror.nodes {
		s := get(n.Labels[corev1.LabelTopologyZone])
		s.Nodes++
		switch readyStatus(n) {
		case corev1.ConditionTrue:
			s.Ready++
		case corev1.ConditionFalse:
			s.NotReady++
		default:
			s.Unknown++
		}
		if len(tainteviction.NoExecuteTaints(n.Spec.Taints)) > 0 {
			s.NoExecuteTainted++
		}
	}
	for _, p := range w.mirror.pods {
		switch {
		case p.Spec.NodeName == "":
		case p.DeletionTimestamp != nil:
			get(w.zoneOf(p.Spec.NodeName)).PodsTerminating++
		case p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			get(w.zoneOf(p.Spec.NodeName)).Pods++
		}
	}
	for _, va := range w.mirror.attachments {
		if va.Status.Attached && va.DeletionTimestamp == nil {
			get(w.zoneOf(va.Spec.NodeName)).VolumesAttached++
		}
	}
	ready := w.setsReady()
	out := make([]timeline.Row, 0, len(byZone))
	for _, zone := range sortedKeys(byZone) {
		r := *byZone[zone]
		r.StatefulSetReady = ready
		out = append(out, r)
	}
	return out
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// Close stops the API server's caches, releases the store and removes the
// agents' root directories.
func (w *World) Close() error {
	if w.api != nil {
		w.api.Close()
	}
	err := w.store.Close()
	if w.dir != "" {
		err = errors.Join(err, os.RemoveAll(w.dir))
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// adminToken and nodeTokenPrefix are the bearer tokens of the World's
// identities: the controllers act as a system:masters user, each agent as
// its node.
const (
	adminToken      = "sim-admin"
	nodeTokenPrefix = "sim-node:"
)

// identities authenticates the World's clients.
type identities struct{}

func (identities) Authenticate(r *http.Request) (*auth.User, bool, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false, nil
	}
	if token == adminToken {
		return &auth.User{Name: "system:kube-controller-manager", Groups: []string{"system:masters", "system:authenticated"}}, true, nil
	}
	if node, ok := strings.CutPrefix(token, nodeTokenPrefix); ok && node != "" {
		return nodeUser(node), true, nil
	}
	return nil, false, nil
}

// nodeUser is node's identity.
func nodeUser(node string) *auth.User {
	return &auth.User{Name: "system:node:" + node, Groups: []string{"system:nodes", "system:authenticated"}}
}

// client is a clientset acting as token, over the in-process transport,
// speaking protobuf as the components of a cluster do.
func (w *World) client(token string) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(&rest.Config{
		Host:        "http://knode-sim",
		BearerToken: token,
		QPS:         -1,
		Transport:   &inproc.Transport{Handler: w.api},
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
	})
}

// agentRand is agent i's random source, fixed by the seed.
func (w *World) agentRand(i int) func() float64 {
	return rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+1)).Float64
}
