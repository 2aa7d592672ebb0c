package topology

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Admission failure reasons and messages, as upstream.
const (
	ReasonTopologyAffinity    = "TopologyAffinityError"
	MessageTopologyAffinity   = "Resources cannot be allocated with Topology locality"
	ReasonUnexpectedAdmission = "UnexpectedAdmissionError"
)

// Result is the admission decision for a pod. When Admit is false, Reason
// and Message say why (they become the pod's status reason and message).
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// typedError is an admission error that names its own reason.
type typedError interface {
	error
	Type() string
}

// resultOf turns a provider's Allocate error into a rejection.
func resultOf(err error) Result {
	var typed typedError
	if errors.As(err, &typed) {
		return Result{Reason: typed.Type(), Message: typed.Error()}
	}
	return Result{
		Reason:  ReasonUnexpectedAdmission,
		Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err),
	}
}

var affinityRejection = Result{Reason: ReasonTopologyAffinity, Message: MessageTopologyAffinity}

// Scope runs a Policy over a pod, per container or once per pod, stores the
// chosen hints and calls the providers' Allocate. It is safe for concurrent
// Admit, Affinity and Remove calls; AddHintProvider must happen before the
// first Admit.
type Scope struct {
	name      string
	policy    Policy
	providers []HintProvider
	// onError is called once for every rejection Admit returns from the
	// container and pod scopes (not the none scope), as upstream counts
	// admission errors.
	onError func()

	mu sync.Mutex
	// hints is the chosen hint by pod UID, then container name.
	hints map[string]map[string]Hint
}

// NewScope returns the named scope ("container" or "pod") running policy.
// With the none policy the scope is always the none scope, which computes
// no hints and only calls Allocate for every container.
func NewScope(name string, policy Policy) (*Scope, error) {
	if policy.Name() == PolicyNone {
		name = scopeNone
	} else if name != ScopeContainer && name != ScopePod {
		return nil, fmt.Errorf("unknown scope: %q", name)
	}
	return &Scope{name: name, policy: policy, hints: map[string]map[string]Hint{}, onError: func() {}}, nil
}

// Name is "container", "pod", or "none" for the none policy.
func (s *Scope) Name() string { return s.name }

// Policy is the policy the scope runs.
func (s *Scope) Policy() Policy { return s.policy }

// AddHintProvider adds p; providers are consulted in the order added.
func (s *Scope) AddHintProvider(p HintProvider) { s.providers = append(s.providers, p) }

// Affinity returns the hint stored for a container; the zero Hint (any,
// not preferred) when none is stored.
func (s *Scope) Affinity(podUID, container string) Hint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hints[podUID][container]
}

// RemoveContainer forgets the hint stored for one container.
func (s *Scope) RemoveContainer(podUID, container string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hints[podUID], container)
	if len(s.hints[podUID]) == 0 {
		delete(s.hints, podUID)
	}
}

// RemovePod forgets every hint stored for a pod.
func (s *Scope) RemovePod(podUID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hints, podUID)
}

func (s *Scope) store(podUID, container string, h Hint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hints[podUID] == nil {
		s.hints[podUID] = map[string]Hint{}
	}
	s.hints[podUID][container] = h
}

// containers returns the pod's init containers (restartable sidecars
// included) followed by its app containers. Ephemeral containers are not
// admitted. Each is a shallow copy, as upstream hands providers.
func containers(pod *corev1.Pod) []*corev1.Container {
	var cs []*corev1.Container
	for _, c := range append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		cs = append(cs, &c)
	}
	return cs
}

// Admit decides the pod. Container scope: for each init then app container
// in order, merge the providers' container hints; on rejection stop with
// TopologyAffinityError; otherwise store the hint and call every provider's
// Allocate, stopping at the first error. Pod scope: merge the providers'
// pod hints once; on rejection stop; otherwise, per container, store the pod
// hint and call Allocate. None scope: only Allocate. Hints stored for
// containers before a rejection are kept (the caller removes the pod).
// Admit blocks for as long as the providers do.
func (s *Scope) Admit(pod *corev1.Pod) Result {
	uid := string(pod.UID)
	switch s.name {
	case scopeNone:
		for _, c := range containers(pod) {
			if err := s.allocate(pod, c); err != nil {
				return resultOf(err)
			}
		}
	case ScopeContainer:
		for _, c := range containers(pod) {
			var hints []map[string][]Hint
			for _, p := range s.providers {
				hints = append(hints, p.TopologyHints(pod, c))
			}
			best, admit := s.policy.Merge(hints)
			if !admit {
				s.onError()
				return affinityRejection
			}
			s.store(uid, c.Name, best)
			if err := s.allocate(pod, c); err != nil {
				s.onError()
				return resultOf(err)
			}
		}
	case ScopePod:
		var hints []map[string][]Hint
		for _, p := range s.providers {
			hints = append(hints, p.PodTopologyHints(pod))
		}
		best, admit := s.policy.Merge(hints)
		if !admit {
			s.onError()
			return affinityRejection
		}
		for _, c := range containers(pod) {
			s.store(uid, c.Name, best)
			if err := s.allocate(pod, c); err != nil {
				s.onError()
				return resultOf(err)
			}
		}
	}
	return Result{Admit: true}
}

func (s *Scope) allocate(pod *corev1.Pod, c *corev1.Container) error {
	for _, p := range s.providers {
		if err := p.Allocate(pod, c); err != nil {
			return err
		}
	}
	return nil
}
