package sim

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"knode/internal/agent"
	"knode/internal/agent/backoff"
	"knode/internal/agent/cm"
	fakehost "knode/internal/agent/host/fake"
	"knode/internal/agent/nodestatus"
	"knode/internal/agent/options"
	"knode/internal/agent/pods"
	fakeruntime "knode/internal/agent/runtime/fake"
	"knode/internal/agent/shutdown"
	"knode/internal/agent/shutdown/membus"
	"knode/internal/sim/script"
	"knode/internal/version"
)

// simAgent is one node: its machine (host) and the agent process on it
// (the real agent, pod worker and fake runtime, and the graceful shutdown
// manager when it is on), stepped by the World's timers. A stopped agent
// has no timers: it is silent. A machine that shuts down stops its agent
// for good; booting it again starts a new agent process (see boot).
type simAgent struct {
	w      *World
	name   string
	zone   string
	client kubernetes.Interface
	host   *fakehost.Host
	// rand is the agent's random source, which each boot carries on.
	rand func() float64

	agent  *agent.Agent
	worker *pods.Worker
	rt     *fakeruntime.Runtime
	// shutdown and bus are the graceful shutdown manager and its logind;
	// nil while graceful shutdown is off.
	shutdown *shutdown.Manager
	bus      *membus.Bus
	// lane is the agent's lane of the virtual clock (its index in the
	// World), and clk its view of the clock.
	lane int
	clk  *laneClock

	running    bool
	registered bool
	register   backoff.Exponential
	timers     [3]clock.Timer // lease, status, pods (runtime change or shutdown step)
	// soon is the work asked of the agent's next zero-delay callback;
	// when it is not zero, that callback is set.
	soon work
	// gen changes on every stop, so a kick set before it does nothing.
	gen int
	// power is the machine's state; boots counts its boots after the
	// first.
	power power
	boots int
}

const (
	leaseTimer = iota
	statusTimer
	podsTimer
)

// work is what a kick asks of the agent's next zero-delay callback.
type work uint8

const (
	// statusNow is a status pass, besides the periodic ones.
	statusNow work = 1 << iota
	// podsNow is a pod sync (and a shutdown step, while one runs).
	podsNow
)

// power is the state of a node's machine.
type power uint8

const (
	poweredOn power = iota
	// shuttingDown: the graceful shutdown manager is stopping the pods.
	shuttingDown
	// poweredOff: the machine is off until a start boots it.
	poweredOff
)

// AddNodes creates n agents in zone on machines of the default shape (see
// AddMachines).
func (w *World) AddNodes(zone string, n int) error {
	return w.AddMachines(script.Nodes{Zone: zone, Count: n})
}

// AddMachines creates s.Count agents in s.Zone, named <zone>-<i> after
// those the zone has, and starts them now: each registers its Node,
// creates its Lease and posts its status as it would on boot. Each runs on
// a fake machine (fakehost.Machine: 8Gi of memory) of s.CPUs CPUs
// (script.DefaultCPUs when 0) whose CPUs and memory are split over
// s.NUMANodes NUMA nodes (fakehost.SplitTopology; one when 0).
func (w *World) AddMachines(s script.Nodes) error {
	if err := w.start(); err != nil {
		return err
	}
	first := len(w.zones[s.Zone]) + 1
	for i := first; i < first+s.Count; i++ {
		if err := w.addAgent(s, i); err != nil {
			return err
		}
	}
	w.settle()
	return w.err
}

func (w *World) addAgent(s script.Nodes, index int) error {
	zone := s.Zone
	name := zone + "-" + strconv.Itoa(index)
	if w.byName[name] != nil {
		return fmt.Errorf("node %s already exists", name)
	}
	seq := len(w.agents)
	wire, err := w.client(nodeTokenPrefix + name)
	if err != nil {
		return err
	}
	var client kubernetes.Interface = wire
	if !w.cfg.WireOnly {
		client = direct{Interface: wire, api: w.api, user: nodeUser(name), calls: &w.directCalls}
	}
	ip := netip.AddrFrom4([4]byte{10, byte(seq >> 16), byte(seq >> 8), byte(seq)})
	machine := fakehost.Machine(name, ip)
	machine.CPUs = cmp.Or(s.CPUs, script.DefaultCPUs)
	if s.NUMANodes > 1 {
		machine.Topology = fakehost.SplitTopology(machine.CPUs, s.NUMANodes, machine.Memory.Capacity)
	}
	sa := &simAgent{
		w: w, name: name, zone: zone, client: client,
		host: fakehost.New(machine), rand: w.agentRand(seq),
		lane: seq, clk: &laneClock{Clock: w.clk}, register: backoff.Registration(),
	}
	if err := sa.build(); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	w.agents = append(w.agents, sa)
	w.byName[name] = sa
	w.zones[zone] = append(w.zones[zone], sa)
	return sa.start()
}

// build makes a new agent process for the machine: the agent, a pod
// worker over an empty fake runtime, the container manager when a resource
// setting is set and, when graceful shutdown is on, a shutdown manager
// holding its delay lock.
func (a *simAgent) build() error {
	w := a.w
	rt := fakeruntime.New(fakeruntime.Config{Clock: a.clk})
	// The agent's volume manager, which each boot starts afresh: a reboot
	// leaves nothing mounted.
	vols := newSimVolumes(a)
	res, err := a.containerManager()
	if err != nil {
		return err
	}
	ag, err := agent.New(agent.Config{
		Client:       a.client,
		NodeName:     a.name,
		RegisterNode: true,
		NodeLabels:   map[string]string{corev1.LabelTopologyZone: a.zone},
		Status: nodestatus.Config{
			NodeName: a.name, Hostname: a.name, KubeletVersion: version.Info().GitVersion, RuntimeName: "fake", RuntimeVersion: "0.1.0",
			SystemReserved: w.settings.Resources.systemReserved(),
		},
		NodeStatusUpdateFrequency: w.settings.NodeStatusUpdateFrequency,
		NodeStatusReportFrequency: w.settings.NodeStatusReportFrequency,
		NodeLeaseDurationSeconds:  w.settings.NodeLeaseDurationSeconds,
		Host:                      a.host,
		RootDir:                   "/var/lib/knode",
		Clock:                     a.clk,
		Rand:                      a.rand,
		Nodes:                     nodeLister{w.mirror},
		ShutdownStatus:            a.shutdownStatus,
		Volumes:                   vols,
		Logger:                    w.log,
	})
	if err != nil {
		return err
	}
	worker, err := pods.New(pods.Config{Client: a.client, NodeName: a.name, Nodes: nodeLister{w.mirror}, Pods: podLister{w.mirror}, Runtime: rt, Clock: a.clk, Admit: a.admit, Volumes: vols, Resources: res, Logger: w.log})
	if err != nil {
		return err
	}
	a.agent, a.worker, a.rt, a.shutdown, a.bus = ag, worker, rt, nil, nil
	groups := w.settings.Shutdown.Groups()
	if groups == nil {
		return nil
	}
	dir, err := w.rootDir(a.name)
	if err != nil {
		return err
	}
	mgr, err := shutdown.New(shutdown.Config{
		Groups:     groups,
		Pods:       shutdownPods{Worker: worker, a: a},
		Event:      a.event,
		SyncStatus: func() { a.kick(statusNow) },
		RootDir:    dir,
		DropInDir:  dir,
		Clock:      a.clk,
		Logger:     w.log,
	})
	if err != nil {
		return err
	}
	// logind grants what the manager asks, so Setup has no drop-in to
	// write and no reload to wait for: it returns at once.
	bus := membus.New(mgr.Requested(), dir)
	if err := mgr.Setup(w.ctx, bus); err != nil {
		return err
	}
	a.shutdown, a.bus = mgr, bus
	return nil
}

// containerManager is a new agent process's container manager (package
// cm) as its pod worker uses it, or nil when no resource setting is set:
// the CPU and topology managers of the settings over the machine's
// topology, cpu and memory. It decides only: it writes no cgroup (the fake
// runtime applies nothing), and exports no metrics. Its state files are in
// the node's state directory, so the next boot's manager restores them, as
// the kubelet's do.
func (a *simAgent) containerManager() (pods.Resources, error) {
	r := a.w.settings.Resources
	if !r.On() {
		return nil, nil
	}
	dir, err := a.w.rootDir(a.name)
	if err != nil {
		return nil, err
	}
	topo, err := a.host.Topology()
	if err != nil {
		return nil, err
	}
	machine := a.host.State()
	policy, scope := r.topologyManager()
	m, err := cm.New(cm.Config{
		RootDir:  dir,
		Topology: topo,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(machine.CPUs), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(int64(machine.Memory.Capacity), resource.BinarySI),
		},
		SystemReserved:        r.systemReserved(),
		CPUManager:            r.cpuManager(),
		TopologyManagerPolicy: policy,
		TopologyManagerScope:  scope,
		Clock:                 a.clk,
		Logger:                a.w.log,
	})
	if err != nil {
		return nil, err
	}
	return &cm.WorkerHooks{Manager: m, Clock: a.clk, Reconcile: options.DefaultCPUManagerReconcilePeriod, Logger: a.w.log}, nil
}

// shutdownStatus is the agent's Config.ShutdownStatus: the manager's,
// looked up at each call since each boot has its own.
func (a *simAgent) shutdownStatus() error {
	if a.shutdown == nil {
		return nil
	}
	return a.shutdown.ShutdownStatus()
}

// admit is the pod worker's Config.Admit: the shutdown manager's.
func (a *simAgent) admit(pod *corev1.Pod) *pods.Rejection {
	if a.shutdown == nil {
		return nil
	}
	return a.shutdown.Admit(pod)
}

// event records the shutdown manager's events about the Node.
func (a *simAgent) event(eventType, reason, message string) {
	a.agent.RecordEvent(a.w.ctx, eventType, reason, message)
}

// shutdownPods is the pod worker as the shutdown manager sees it: asking
// it to stop a pod also syncs the agent's pods as soon as the current
// callback ends, as Kick wakes the worker's Run loop in a server.
type shutdownPods struct {
	*pods.Worker
	a *simAgent
}

func (p shutdownPods) Terminate(pod *corev1.Pod, grace time.Duration, final func(*corev1.PodStatus)) {
	p.Worker.Terminate(pod, grace, final)
	p.a.kick(podsNow)
}

func (p shutdownPods) Kick() { p.a.kick(podsNow) }

// rootDir is node's state directory, where its shutdown manager writes
// its state file and report and its container manager its CPU and memory
// managers' state: a directory of the World's own, made on first use and
// removed by Close.
func (w *World) rootDir(node string) (string, error) {
	if w.dir == "" {
		dir, err := os.MkdirTemp("", "knode-sim-")
		if err != nil {
			return "", err
		}
		w.dir = dir
	}
	dir := filepath.Join(w.dir, node)
	return dir, os.MkdirAll(dir, 0o755)
}

// start makes the agent run from now: register if it has not, then renew
// its lease, report its status and sync its pods, each on its own period.
// A machine that was shut down boots first.
func (a *simAgent) start() error {
	if a.power == poweredOff {
		if err := a.boot(); err != nil {
			return err
		}
	}
	if a.running {
		return nil
	}
	a.running = true
	if !a.registered {
		a.tryRegister()
		return nil
	}
	a.resume()
	return nil
}

// boot starts the machine again after a shutdown: a new boot ID, and a new
// agent process that knows nothing of the last one. Its runtime is empty,
// as a reboot leaves no container running; it registers again (adopting
// its Node) and runs, from the API, the node's pods that have not ended.
func (a *simAgent) boot() error {
	a.boots++
	a.host.Update(func(s *fakehost.State) {
		s.IDs.BootID = "boot-" + a.name + "-" + strconv.Itoa(a.boots)
	})
	if err := a.build(); err != nil {
		return fmt.Errorf("node %s: booting: %w", a.name, err)
	}
	a.registered = false
	a.register = backoff.Registration()
	a.power = poweredOn
	return nil
}

// shutDown shuts the machine down now. With graceful shutdown off the
// machine goes off at once and its pods are left as they are. With it on,
// the agent's manager marks the node shutting down and stops its pods
// group by group, and the machine goes off when the manager releases its
// delay lock (see syncPods) or, as logind does, when the delay it granted
// has passed, whichever comes first. A silent agent holds its lock but
// cannot act, so its machine goes off after the delay, unless the agent
// is started before and carries the shutdown out then (see resume). A
// machine already shutting down or off is left alone.
func (a *simAgent) shutDown() {
	if a.power != poweredOn {
		return
	}
	if a.shutdown == nil {
		a.powerOff()
		return
	}
	a.power = shuttingDown
	a.bus.PrepareForShutdown(true)
	delay, err := a.bus.InhibitDelayMax()
	if err != nil {
		a.w.fail(err)
		return
	}
	boots := a.boots
	a.w.after(delay, func() {
		if a.boots == boots && a.power == shuttingDown {
			a.w.log.Info("logind's shutdown delay has passed; powering off", "node", a.name)
			a.powerOff()
		}
	})
	if a.running && a.registered {
		a.beginShutdown()
	}
}

// beginShutdown has the manager begin the shutdown now, and syncs the pods
// (and steps the manager) as soon as the current callback ends.
func (a *simAgent) beginShutdown() {
	a.shutdown.Begin(a.w.ctx)
	a.kick(podsNow)
}

// powerOff turns the machine off: the agent stops, and only a start
// (boot) brings it back.
func (a *simAgent) powerOff() {
	a.stop()
	a.power = poweredOff
}

// tryRegister makes one registration attempt now, retrying after the
// agent's registration backoff, as Agent.Register does.
func (a *simAgent) tryRegister() {
	done, err := a.agent.TryRegister(a.w.ctx)
	if !done {
		a.w.log.Info("unable to register node", "node", a.name, "err", err)
		a.timers[leaseTimer] = a.after(a.register.Next(), func() {
			if a.running {
				a.tryRegister()
			}
		})
		return
	}
	a.registered = true
	a.resume()
}

// resume sets the agent's loops going from now. A shutdown announced
// while the agent was silent begins now.
func (a *simAgent) resume() {
	a.renew()
	if a.power == shuttingDown && a.shutdown.ShutdownStatus() == nil {
		a.beginShutdown()
	}
	a.syncStatus()
	a.kickWorker()
}

// stop silences the agent: its timers are dropped and it makes no call.
func (a *simAgent) stop() {
	if !a.running {
		return
	}
	a.running = false
	a.gen++
	a.soon = 0
	for i, t := range a.timers {
		if t != nil {
			t.Stop()
			a.timers[i] = nil
		}
	}
}

func (a *simAgent) renew() {
	wait, err := a.agent.Lease().Step(a.w.ctx)
	if err != nil {
		a.w.log.Warn("node lease pass failed", "node", a.name, "err", err)
	}
	a.timers[leaseTimer] = a.after(wait, a.renew)
}

func (a *simAgent) syncStatus() {
	if err := a.agent.SyncStatus(a.w.ctx); err != nil {
		a.w.log.Warn("node status update failed", "node", a.name, "err", err)
	}
	a.timers[statusTimer] = a.after(a.w.settings.NodeStatusUpdateFrequency, a.syncStatus)
}

// kickWorker syncs the agent's pods as soon as the current callback ends.
func (a *simAgent) kickWorker() { a.kick(podsNow) }

// kick asks for wk as soon as the current callback ends. All that is
// asked before that runs in one callback (a status pass, then a pod
// sync), so an agent never has two zero-delay callbacks due at once.
func (a *simAgent) kick(wk work) {
	if !a.running || !a.registered {
		return
	}
	pending := a.soon != 0
	a.soon |= wk
	if pending {
		return
	}
	gen := a.gen
	a.after(0, func() {
		if gen != a.gen {
			return
		}
		wk := a.soon
		a.soon = 0
		if wk&statusNow != 0 {
			if err := a.agent.SyncStatus(a.w.ctx); err != nil {
				a.w.log.Warn("node status update failed", "node", a.name, "err", err)
			}
		}
		if wk&podsNow != 0 {
			a.syncPods()
		}
	})
}

// syncPods syncs the agent's pods and, while the machine shuts down, steps
// the shutdown manager; then it sets a timer for whichever is due first
// of the runtime's next change (or, with none, the worker's volume retry
// while a pod waits for its volumes, as its Run loop does) and the
// manager's next step. When the manager has released its lock, the
// machine goes off.
func (a *simAgent) syncPods() {
	if err := a.worker.Sync(a.w.ctx); err != nil {
		a.w.log.Warn("pod sync failed", "node", a.name, "err", err)
	}
	if t := a.timers[podsTimer]; t != nil {
		t.Stop()
		a.timers[podsTimer] = nil
	}
	at, ok := a.rt.NextChange()
	if !ok && a.worker.VolumesPending() {
		at, ok = a.clk.Now().Add(pods.DefaultVolumeRetryPeriod), true
	}
	if a.power == shuttingDown {
		step := a.shutdown.Step(a.w.ctx)
		if step.IsZero() {
			a.powerOff()
			return
		}
		if !ok || step.Before(at) {
			at, ok = step, true
		}
	}
	if ok {
		a.timers[podsTimer] = a.after(at.Sub(a.clk.Now()), a.syncPods)
	}
}

// Act applies a.Action to a.Count agents of a.Zone from the one with
// index a.From (1-based; 0 means 1), or to all the rest of the zone when
// a.Count is 0; a.Time is not read:
//
//   - stop silences the agents: the machines stay up, their pods keep
//     running, and nothing reaches the API server from them;
//   - start brings silent agents back as they were, and boots machines
//     that were shut down (see boot); running agents are left alone;
//   - shutdown shuts the machines down (see shutDown);
//   - force-delete deletes the pods bound to the nodes at once (grace
//     period 0), as an operator does;
//   - taint out-of-service taints the nodes node.kubernetes.io/out-of-
//     service=nodeshutdown:NoExecute, as an operator does once they are
//     known to be off, and untaint out-of-service takes every taint with
//     that key off them (see volumes.go).
func (w *World) Act(a script.At) error {
	agents := w.zones[a.Zone]
	if len(agents) == 0 {
		return fmt.Errorf("zone %q has no nodes", a.Zone)
	}
	first := max(a.From, 1) - 1
	if first >= len(agents) {
		return fmt.Errorf("from=%d: zone %q has only %d nodes", a.From, a.Zone, len(agents))
	}
	end := len(agents)
	if a.Count > 0 {
		if a.Count > len(agents)-first {
			return fmt.Errorf("from=%d count=%d: zone %q has only %d nodes", max(a.From, 1), a.Count, a.Zone, len(agents))
		}
		end = first + a.Count
	}
	if (a.Action == script.Taint || a.Action == script.Untaint) && a.Taint != script.OutOfService {
		return fmt.Errorf("%s: unknown taint %q", a.Action, a.Taint)
	}
	for _, ag := range agents[first:end] {
		switch a.Action {
		case script.Stop:
			ag.stop()
		case script.Start:
			if err := ag.start(); err != nil {
				return err
			}
		case script.Shutdown:
			ag.shutDown()
		case script.ForceDelete:
			if err := w.forceDelete(ag.name); err != nil {
				return err
			}
		case script.Taint:
			if err := w.markOutOfService(ag.name, true); err != nil {
				return err
			}
		case script.Untaint:
			if err := w.markOutOfService(ag.name, false); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown action %q", a.Action)
		}
	}
	w.settle()
	return w.err
}
