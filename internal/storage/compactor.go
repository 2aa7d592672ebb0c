package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
)

// CompactorConfig configures a Compactor.
type CompactorConfig struct {
	// Store is compacted. Required.
	Store Interface
	// Clock drives Run's ticker; nil means the real clock.
	Clock clock.WithTicker
	// Interval between compactions; default 5 minutes. Each compaction
	// keeps the history of the last full interval, so a watcher that falls
	// behind by less than one interval can resume.
	Interval time.Duration
	// Logger receives Run's failures; nil means slog.Default().
	Logger *slog.Logger
	// OnCompact, when set, is told each revision compacted to, so that
	// readers holding history of their own (the API server's watch
	// caches) can drop it too.
	OnCompact func(revision int64)
}

const defaultCompactInterval = 5 * time.Minute

// Validate reports every field that is missing or out of range.
func (c CompactorConfig) Validate() error {
	var errs field.ErrorList
	if c.Store == nil {
		errs = append(errs, field.Required(field.NewPath("store"), "the compactor needs a store"))
	}
	if c.Interval < 0 {
		errs = append(errs, field.Invalid(field.NewPath("interval"), c.Interval.String(), "must not be negative"))
	}
	return errs.ToAggregate()
}

// Compactor discards store history periodically. At every step it compacts
// to the revision it saw at the previous step and remembers the current one,
// so history always reaches back at least one interval.
//
// Several API servers sharing one store may each run a Compactor: a
// compaction another server already did past the target is not an error.
// Their steps interleave, so the history kept can then be shorter than one
// interval, but never shorter than the gap between two servers' steps.
type Compactor struct {
	store    Interface
	clock    clock.WithTicker
	interval time.Duration
	log      *slog.Logger
	// onCompact is CompactorConfig.OnCompact.
	onCompact func(int64)

	mu sync.Mutex
	// remembered is the revision seen at the previous step; 0 before the
	// first step.
	remembered int64
	// compacted is the last revision this compactor compacted to (or found
	// already compacted); 0 before the first compaction.
	compacted int64
}

// NewCompactor returns a Compactor, or an error naming the invalid field.
func NewCompactor(cfg CompactorConfig) (*Compactor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("storage: invalid compactor config: %w", err)
	}
	c := &Compactor{store: cfg.Store, clock: cfg.Clock, interval: cfg.Interval, log: cfg.Logger, onCompact: cfg.OnCompact}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.interval == 0 {
		c.interval = defaultCompactInterval
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// planCompaction decides one step: given the revision remembered at the
// previous step, the last revision compacted to and the store's current
// revision, it returns the revision to compact to (0 for none) and the
// revision to remember for the next step.
func planCompaction(remembered, compacted, current int64) (target, remember int64) {
	switch {
	case remembered == 0:
		// First step: nothing is one interval old yet.
		return 0, current
	case remembered > current:
		// The store went backwards (restored or replaced): what we
		// remembered means nothing there.
		return 0, current
	case remembered <= compacted:
		// No write since the last compaction.
		return 0, current
	}
	return remembered, current
}

// Step does one compaction pass: it reads the store revision, compacts to
// the revision remembered at the previous step if there is one to compact,
// and remembers the current revision. After a failure nothing changes, so
// the next step retries.
func (c *Compactor) Step(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	current, err := c.store.Revision(ctx)
	if err != nil {
		return fmt.Errorf("storage: compactor reading the revision: %w", err)
	}
	target, remember := planCompaction(c.remembered, c.compacted, current)
	if target != 0 {
		err := c.store.Compact(ctx, target)
		if err != nil && !errors.Is(err, ErrCompacted) {
			return fmt.Errorf("storage: compacting to revision %d: %w", target, err)
		}
		c.compacted = target
		if c.onCompact != nil {
			c.onCompact(target)
		}
	}
	c.remembered = remember
	return nil
}

// Run steps once at once and then every Interval until ctx ends. Failed
// steps are logged and retried at the next tick.
func (c *Compactor) Run(ctx context.Context) {
	t := c.clock.NewTicker(c.interval)
	defer t.Stop()
	for {
		if err := c.Step(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("storage compaction failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}
