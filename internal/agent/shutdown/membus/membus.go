// Package membus is a logind that lives in memory: a shutdown.Bus for the
// simulator and for tests of the shutdown manager that need no D-Bus.
//
// It keeps the inhibit delay and the delay locks taken, and lets its owner
// announce or cancel a shutdown. It does not model D-Bus itself: there is
// no connection to lose and no other sender to spoof. Tests of that run
// the real client against the fake logind in package logindtest.
package membus

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"knode/internal/agent/shutdown/logind"
)

// Bus is an in-memory logind. The zero value is not usable; use New.
type Bus struct {
	mu        sync.Mutex
	delay     time.Duration
	dropInDir string
	refuse    bool
	preparing bool
	reloads   int
	locks     []*Lock
	watchers  []chan logind.Signal
}

// New returns a logind granting delay, whose reloads read the drop-ins in
// dropInDir ("" reads none).
func New(delay time.Duration, dropInDir string) *Bus { return &Bus{delay: delay, dropInDir: dropInDir} }

// RefuseRaise makes reloads keep the delay whatever was asked.
func (b *Bus) RefuseRaise(refuse bool) {
	b.mu.Lock()
	b.refuse = refuse
	b.mu.Unlock()
}

// Lock is one delay lock; Close releases it.
type Lock struct {
	bus      *Bus
	released bool
}

// Close releases the lock; closing twice is harmless.
func (l *Lock) Close() error {
	l.bus.mu.Lock()
	l.released = true
	l.bus.mu.Unlock()
	return nil
}

// InhibitDelayMax implements shutdown.Bus.
func (b *Bus) InhibitDelayMax() (time.Duration, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.delay, nil
}

// PreparingForShutdown implements shutdown.Bus.
func (b *Bus) PreparingForShutdown() (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.preparing, nil
}

// InhibitShutdown implements shutdown.Bus.
func (b *Bus) InhibitShutdown(who, why string) (io.Closer, error) {
	if who == "" || why == "" {
		return nil, errors.New("membus: who and why are required")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	l := &Lock{bus: b}
	b.locks = append(b.locks, l)
	return l, nil
}

// ReloadLogind implements shutdown.Bus: unless raises are refused, the
// delay becomes the last InhibitDelayMaxSec=<seconds> found in the *.conf
// files of the drop-in directory, read in name order.
func (b *Bus) ReloadLogind() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reloads++
	if b.refuse || b.dropInDir == "" {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(b.dropInDir, "*.conf"))
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			v, ok := strings.CutPrefix(strings.TrimSpace(line), "InhibitDelayMaxSec=")
			if !ok {
				continue
			}
			if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
				b.delay = time.Duration(secs) * time.Second
			}
		}
	}
	return nil
}

// Watch implements shutdown.Bus. The channel is buffered; a watcher that
// does not read loses nothing up to 64 signals.
func (b *Bus) Watch() (<-chan logind.Signal, error) {
	ch := make(chan logind.Signal, 64)
	b.mu.Lock()
	b.watchers = append(b.watchers, ch)
	b.mu.Unlock()
	return ch, nil
}

// Close implements shutdown.Bus: it ends every watch.
func (b *Bus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ch := range b.watchers {
		close(ch)
	}
	b.watchers = nil
	return nil
}

// PrepareForShutdown announces (true) or cancels (false) a shutdown to
// every watcher, and sets PreparingForShutdown.
func (b *Bus) PrepareForShutdown(active bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.preparing = active
	for _, ch := range b.watchers {
		ch <- logind.Signal{Kind: logind.PrepareForShutdown, Active: active}
	}
}

// SetPreparingForShutdown sets the property without a signal, as when the
// shutdown began before anyone watched.
func (b *Bus) SetPreparingForShutdown(active bool) {
	b.mu.Lock()
	b.preparing = active
	b.mu.Unlock()
}

// HeldLocks counts the locks taken and not released.
func (b *Bus) HeldLocks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range b.locks {
		if !l.released {
			n++
		}
	}
	return n
}

// Locks counts every lock ever taken.
func (b *Bus) Locks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.locks)
}

// Reloads counts the reloads.
func (b *Bus) Reloads() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reloads
}
