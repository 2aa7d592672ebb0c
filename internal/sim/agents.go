package sim

import (
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"knode/internal/agent"
	"knode/internal/agent/backoff"
	fakehost "knode/internal/agent/host/fake"
	"knode/internal/agent/nodestatus"
	"knode/internal/agent/pods"
	fakeruntime "knode/internal/agent/runtime/fake"
	"knode/internal/version"
)

// simAgent is one node's agent: the real agent and pod worker, stepped by
// the World's timers. A stopped agent has no timers: it is silent.
type simAgent struct {
	w      *World
	name   string
	zone   string
	agent  *agent.Agent
	worker *pods.Worker
	rt     *fakeruntime.Runtime
	// lane is the agent's lane of the virtual clock (its index in the
	// World), and clk its view of the clock.
	lane int
	clk  *laneClock

	running    bool
	registered bool
	register   backoff.Exponential
	timers     [3]clock.Timer // lease, status, runtime change
	kicked     bool
	// gen changes on every stop, so a kick set before it does nothing.
	gen int
}

const (
	leaseTimer = iota
	statusTimer
	runtimeTimer
)

// AddNodes creates n agents in zone, named <zone>-<i> after those the zone
// has, and starts them now: each registers its Node, creates its Lease and
// posts its status as it would on boot.
func (w *World) AddNodes(zone string, n int) error {
	if err := w.start(); err != nil {
		return err
	}
	first := len(w.zones[zone]) + 1
	for i := first; i < first+n; i++ {
		if err := w.addAgent(zone, i); err != nil {
			return err
		}
	}
	w.settle()
	return w.err
}

func (w *World) addAgent(zone string, index int) error {
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
	host := fakehost.New(fakehost.Machine(name, ip))
	clk := &laneClock{Clock: w.clk}
	rt := fakeruntime.New(fakeruntime.Config{Clock: clk})
	a, err := agent.New(agent.Config{
		Client:                    client,
		NodeName:                  name,
		RegisterNode:              true,
		NodeLabels:                map[string]string{corev1.LabelTopologyZone: zone},
		Status:                    nodestatus.Config{NodeName: name, Hostname: name, KubeletVersion: version.Info().GitVersion, RuntimeName: "fake", RuntimeVersion: "0.1.0"},
		NodeStatusUpdateFrequency: w.settings.NodeStatusUpdateFrequency,
		NodeStatusReportFrequency: w.settings.NodeStatusReportFrequency,
		NodeLeaseDurationSeconds:  w.settings.NodeLeaseDurationSeconds,
		Host:                      host,
		RootDir:                   "/var/lib/knode",
		Clock:                     clk,
		Rand:                      w.agentRand(seq),
		Nodes:                     nodeLister{w.mirror},
		Logger:                    w.log,
	})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	worker, err := pods.New(pods.Config{Client: client, NodeName: name, Nodes: nodeLister{w.mirror}, Pods: podLister{w.mirror}, Runtime: rt, Clock: clk, Logger: w.log})
	if err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	sa := &simAgent{w: w, name: name, zone: zone, agent: a, worker: worker, rt: rt, lane: seq, clk: clk, register: backoff.Registration()}
	w.agents = append(w.agents, sa)
	w.byName[name] = sa
	w.zones[zone] = append(w.zones[zone], sa)
	sa.start()
	return nil
}

// start makes the agent run from now: register if it has not, then renew
// its lease, report its status and sync its pods, each on its own period.
func (a *simAgent) start() {
	if a.running {
		return
	}
	a.running = true
	if !a.registered {
		a.tryRegister()
		return
	}
	a.resume()
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

// resume sets the agent's loops going from now.
func (a *simAgent) resume() {
	a.renew()
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
	a.kicked = false
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
func (a *simAgent) kickWorker() {
	if !a.running || !a.registered || a.kicked {
		return
	}
	a.kicked = true
	gen := a.gen
	a.after(0, func() {
		if gen != a.gen {
			return
		}
		a.kicked = false
		a.syncPods()
	})
}

func (a *simAgent) syncPods() {
	if err := a.worker.Sync(a.w.ctx); err != nil {
		a.w.log.Warn("pod sync failed", "node", a.name, "err", err)
	}
	if t := a.timers[runtimeTimer]; t != nil {
		t.Stop()
		a.timers[runtimeTimer] = nil
	}
	if at, ok := a.rt.NextChange(); ok {
		a.timers[runtimeTimer] = a.after(at.Sub(a.clk.Now()), a.syncPods)
	}
}

// SetRunning stops or starts the first count agents of zone (all when
// count is 0).
func (w *World) SetRunning(zone string, count int, running bool) error {
	agents := w.zones[zone]
	if len(agents) == 0 {
		return fmt.Errorf("zone %q has no nodes", zone)
	}
	if count == 0 || count > len(agents) {
		if count > len(agents) {
			return fmt.Errorf("count=%d: zone %q has only %d nodes", count, zone, len(agents))
		}
		count = len(agents)
	}
	for _, a := range agents[:count] {
		if running {
			a.start()
		} else {
			a.stop()
		}
	}
	w.settle()
	return w.err
}
