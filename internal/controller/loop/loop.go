// Package loop owns the goroutine shell shared by the level-based
// controllers: it calls a controller's Sync at once, then again whenever
// one of its informers reports a change, when the controller's next due
// time comes, and at least every resync period, until the context ends.
//
// What the caller must do: hand Run a Sync that makes one whole pass (the
// loop never passes a key or an object), the informers whose changes
// should wake it, and a Start that starts the factory those informers came
// from. Sync must be safe to call while NextDue is called from the loop's
// goroutine (NextDue is only called between passes).
//
// What it does not do: it keeps no work queue and no per-object state.
// Changes heard of while a pass runs coalesce into at most one further
// pass. It does not retry a failed pass early: a failure is logged and the
// next wake-up passes again. It does not wait for informer caches to sync,
// since Sync reads through the API, not the caches.
package loop

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// Config describes one controller's loop.
type Config struct {
	// Clock paces the loop; zero value means the real clock.
	Clock clock.WithTicker
	// Resync is the longest the loop waits between passes. Must be
	// positive.
	Resync time.Duration
	// Informers wake the loop on every add, update and delete. They must
	// come from the factory Start starts, and are registered before Start
	// is called.
	Informers []cache.SharedIndexInformer
	// Start starts the informers' factory; it must not block. The loop
	// passes it ctx.Done(). nil: nothing is started.
	Start func(stop <-chan struct{})
	// Sync makes one pass and blocks until it is done. Required.
	Sync func(context.Context) error
	// NextDue, when set, is asked after each pass when the controller
	// wants its next pass; the zero time means it has no such wish.
	NextDue func() time.Time
	// DueMargin is added to the wait for NextDue, so the pass comes
	// strictly after the due time; 0 means none.
	DueMargin time.Duration
	// Logger receives the failure lines; nil means slog.Default().
	Logger *slog.Logger
	// Name begins the failed-pass log line: "<Name> pass failed".
	Name string
}

// Run passes at once and then on every wake-up (see the package
// documentation) until ctx ends; it blocks until then. Failed passes are
// logged, except the one ctx's end interrupts. It panics when Sync is nil
// or Resync is not positive.
func Run(ctx context.Context, cfg Config) {
	if cfg.Sync == nil {
		panic("loop: Config.Sync is required")
	}
	if cfg.Resync <= 0 {
		panic("loop: Config.Resync must be positive")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}

	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	for _, inf := range cfg.Informers {
		if _, err := inf.AddEventHandler(handler); err != nil {
			cfg.Logger.Error("watching for changes failed", "err", err)
		}
	}
	if cfg.Start != nil {
		cfg.Start(ctx.Done())
	}

	ticker := cfg.Clock.NewTicker(cfg.Resync)
	defer ticker.Stop()
	for {
		if err := cfg.Sync(ctx); err != nil && ctx.Err() == nil {
			cfg.Logger.Warn(cfg.Name+" pass failed", "err", err)
		}
		var due <-chan time.Time
		var timer clock.Timer
		if cfg.NextDue != nil {
			if next := cfg.NextDue(); !next.IsZero() {
				timer = cfg.Clock.NewTimer(next.Sub(cfg.Clock.Now()) + cfg.DueMargin)
				due = timer.C()
			}
		}
		select {
		case <-ctx.Done():
		case <-ticker.C():
		case <-wake:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// TimerUntil returns a timer that fires when c reaches at, or nil if it
// already has. A clock that moves while the timer is made (a fake clock
// stepped by another goroutine) is read again, so the timer never aims past
// at. The caller stops the timer it gets.
func TimerUntil(c clock.Clock, at time.Time) clock.Timer {
	for {
		now := c.Now()
		if !now.Before(at) {
			return nil
		}
		timer := c.NewTimer(at.Sub(now))
		if c.Now().Equal(now) {
			return timer
		}
		timer.Stop()
	}
}

// Settings are the fields every loop-run controller's Config has, by
// reference, so that Check can validate and default them in place.
type Settings struct {
	// Package prefixes error messages ("replicaset").
	Package string
	// HasClient reports whether Config.Client was set.
	HasClient     bool
	ResyncPeriod  *time.Duration
	DefaultResync time.Duration
	Clock         *clock.WithTicker
	Logger        **slog.Logger
}

// Check refuses a missing client or a negative resync period, naming the
// field, and fills the zero values: the default resync period, the real
// clock and slog's default logger.
func Check(s Settings) error {
	if !s.HasClient {
		return fmt.Errorf("%s: Config.Client is required", s.Package)
	}
	if *s.ResyncPeriod < 0 {
		return fmt.Errorf("%s: ResyncPeriod %v must not be negative", s.Package, *s.ResyncPeriod)
	}
	if *s.ResyncPeriod == 0 {
		*s.ResyncPeriod = s.DefaultResync
	}
	if *s.Clock == nil {
		*s.Clock = clock.RealClock{}
	}
	if *s.Logger == nil {
		*s.Logger = slog.Default()
	}
	return nil
}
