package cm

import (
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// WorkerHooks is a Manager as the pod worker uses it (pods.Resources):
// errors are logged, and Sync reports a change of the shared CPU pool, or,
// with the static CPU manager, that Reconcile (cpuManagerReconcilePeriod)
// passed on Clock since running containers were last brought in line.
type WorkerHooks struct {
	Manager   *Manager
	Clock     clock.PassiveClock
	Reconcile time.Duration
	Logger    *slog.Logger

	mu         sync.Mutex
	generation uint64
	last       time.Time
}

// Admit is Manager.Admit.
func (p *WorkerHooks) Admit(pod *corev1.Pod) (string, string, bool) { return p.Manager.Admit(pod) }

// PodStarting is Manager.PodStarting.
func (p *WorkerHooks) PodStarting(pod *corev1.Pod) error { return p.Manager.PodStarting(pod) }

// RemovePod is Manager.RemovePod, logging its error.
func (p *WorkerHooks) RemovePod(uid types.UID) {
	if err := p.Manager.RemovePod(uid); err != nil {
		p.Logger.Warn("releasing a pod's resources", "pod", uid, "err", err)
	}
}

// Sync releases the pods other than holding (RemoveStale), retries the
// pending cgroup removals, and reports whether running containers need
// their resources applied again.
func (p *WorkerHooks) Sync(holding []types.UID) bool {
	if err := p.Manager.RemoveStale(holding); err != nil {
		p.Logger.Warn("releasing the resources of pods that are gone", "err", err)
	}
	if err := p.Manager.Sync(); err != nil {
		p.Logger.Warn("container manager cleanup", "err", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Clock.Now()
	g := p.Manager.SharedPoolGeneration()
	// Only the static CPU manager has cpusets to bring back in line.
	due := p.Manager.cpu != nil && now.Sub(p.last) >= p.Reconcile
	if g == p.generation && !due {
		return false
	}
	p.generation, p.last = g, now
	return true
}
