package scheduler

import (
	"context"
	"errors"
	"time"

	"k8s.io/client-go/tools/cache"
)

// NodeHandler and PodHandler are the handlers Run registers on its
// informers. A driver that follows nodes and pods itself (the simulator,
// which reads the store in virtual time) feeds them the same events and
// then calls Step.
func (s *Scheduler) NodeHandler() cache.ResourceEventHandler { return s.nodeHandler() }

// PodHandler: see NodeHandler.
func (s *Scheduler) PodHandler() cache.ResourceEventHandler { return s.podHandler() }

// Step is Run's loop body made synchronous: it releases the pods whose
// backoff has ended (and those unschedulable for too long), fails the
// volume waits whose time is up, then decides and writes every active pod
// in turn, one at a time, so that the order of writes is fixed. It returns
// when the earliest remaining backoff or volume wait ends (ok false when
// nothing waits on the clock) and the joined write failures.
func (s *Scheduler) Step(ctx context.Context) (next time.Time, ok bool, err error) {
	s.mu.Lock()
	now := s.clock.Now()
	s.queue.flush(now)
	s.expireWaits(now)
	s.mu.Unlock()
	var errs []error
	for ctx.Err() == nil {
		o, decided := s.decide()
		if !decided {
			break
		}
		if err := s.apply(ctx, o); err != nil {
			errs = append(errs, err)
		}
	}
	s.mu.Lock()
	next, ok = s.nextWake()
	s.mu.Unlock()
	return next, ok, errors.Join(errs...)
}
