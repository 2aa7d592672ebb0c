package topology

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"knode/internal/agent/host"
)

// Config configures a Manager.
type Config struct {
	// Policy is topologyManagerPolicy; "" means none.
	Policy string
	// Scope is topologyManagerScope; "" means container.
	Scope string
	// Options is topologyManagerPolicyOptions; nil means the defaults.
	// Ignored with the none policy, as upstream.
	Options map[string]string
	// Topology is the machine; its NUMA node IDs (0 to 63) and distances
	// are used. A policy other than none needs at least one NUMA node.
	Topology host.Topology
	// Clock times each Admit for the duration metric; nil means the real
	// clock.
	Clock clock.PassiveClock
	// Metrics receives the kubelet_topology_manager_admission_* series;
	// nil registers nothing.
	Metrics prometheus.Registerer
}

// Manager is the topology manager: one policy and one scope over one
// machine. It is safe for concurrent use once every hint provider is added.
type Manager struct {
	scope   *Scope
	clock   clock.PassiveClock
	metrics *metrics
}

// New validates cfg (see ValidateConfig) and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Policy == "" {
		cfg.Policy = PolicyNone
	}
	if cfg.Scope == "" {
		cfg.Scope = ScopeContainer
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	nodes := NodeIDsOf(cfg.Topology)
	if err := ValidateConfig(cfg.Policy, cfg.Scope, cfg.Options, len(nodes)); err != nil {
		return nil, err
	}
	var opts Options
	if cfg.Policy != PolicyNone {
		var err error
		if opts, err = ParseOptions(cfg.Options); err != nil {
			return nil, err // ValidateConfig already checked; kept for safety.
		}
		if len(nodes) == 0 {
			return nil, fmt.Errorf("topology: policy %q needs at least one NUMA node", cfg.Policy)
		}
		if _, err := NewMask(nodes...); err != nil {
			return nil, fmt.Errorf("topology: NUMA node IDs %v: %w", nodes, err)
		}
	}
	policy, err := NewPolicy(cfg.Policy, nodes, opts, DistancesOf(cfg.Topology))
	if err != nil {
		return nil, err
	}
	scope, err := NewScope(cfg.Scope, policy)
	if err != nil {
		return nil, err
	}
	m := &Manager{scope: scope, clock: cfg.Clock, metrics: newMetrics()}
	scope.onError = m.metrics.errors.Inc
	if err := m.metrics.register(cfg.Metrics); err != nil {
		return nil, err
	}
	return m, nil
}

// AddHintProvider adds p. Call it before the first Admit.
func (m *Manager) AddHintProvider(p HintProvider) { m.scope.AddHintProvider(p) }

// Policy is the name of the policy in force.
func (m *Manager) Policy() string { return m.scope.Policy().Name() }

// Scope is the name of the scope in force ("none" with the none policy).
func (m *Manager) Scope() string { return m.scope.Name() }

// Admit decides whether pod may run here (see Scope.Admit), counting the
// request and timing it with the configured clock.
func (m *Manager) Admit(pod *corev1.Pod) Result {
	m.metrics.requests.Inc()
	start := m.clock.Now()
	r := m.scope.Admit(pod)
	m.metrics.duration.Observe(float64(m.clock.Since(start).Milliseconds()))
	return r
}

// Affinity returns the hint stored for a container at admission; the zero
// Hint when there is none (none policy, or never admitted).
func (m *Manager) Affinity(podUID, container string) Hint { return m.scope.Affinity(podUID, container) }

// RemoveContainer forgets one container's stored hint.
func (m *Manager) RemoveContainer(podUID, container string) {
	m.scope.RemoveContainer(podUID, container)
}

// RemovePod forgets every stored hint of a pod.
func (m *Manager) RemovePod(podUID string) { m.scope.RemovePod(podUID) }
