package election

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"knode/internal/controller/events"
)

// watchedLock is the LeaseLock client-go's elector uses, seen from the
// candidate: it remembers when the last successful renewal began (for the
// watchdog) and shows a Lease of this host that has expired as free.
//
// The elector calls it from one goroutine at a time; lastRenewal may be
// called from any.
type watchedLock struct {
	inner *resourcelock.LeaseLock
	clock clock.PassiveClock
	log   *slog.Logger

	mu sync.Mutex
	// began is when the current attempt's first call was made: the
	// elector stamps the record's renewTime just before that call, so a
	// successor, which waits a lease duration from when it sees the
	// record, cannot take over before began plus the lease duration.
	began   time.Time
	phase   phase
	renewed time.Time // began of the last write that made us the holder
}

// phase is where the elector is in one attempt (tryAcquireOrRenew): an
// optimistic Update, or a Get followed by a Create or an Update, or an
// optimistic Update that failed followed by the Get of the same attempt.
type phase int

const (
	idle         phase = iota // the last attempt is over
	read                      // after the attempt's Get
	fastPathLost              // after an optimistic Update failed
)

var _ resourcelock.Interface = (*watchedLock)(nil)

// call notes a call, a Get or a write, as the elector makes it; it
// returns whether a write is optimistic (made without a Get).
func (l *watchedLock) call(get bool) (optimistic bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if get {
		// A Get opens an attempt, unless it follows the failed
		// optimistic Update of the same attempt.
		if l.phase != fastPathLost {
			l.began = l.clock.Now()
		}
		l.phase = read
		return false
	}
	// A write after the attempt's Get belongs to it; any other is an
	// optimistic Update, which opens an attempt.
	if l.phase == read {
		return false
	}
	l.began = l.clock.Now()
	return true
}

func (l *watchedLock) wrote(rec resourcelock.LeaderElectionRecord, optimistic bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = idle
	if err != nil {
		if optimistic {
			l.phase = fastPathLost
		}
		return
	}
	if rec.HolderIdentity == l.inner.Identity() {
		l.renewed = l.began
	}
}

// lastRenewal is when the last successful acquisition or renewal began.
func (l *watchedLock) lastRenewal() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewed
}

func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.call(true)
	rec, raw, err := l.inner.Get(ctx)
	if err != nil || !takeable(*rec, l.Identity(), l.clock.Now()) {
		return rec, raw, err
	}
	l.log.Info("the lease's holder on this host has not renewed it for its duration: taking it over", "lease", l.Describe(), "holder", rec.HolderIdentity, "renewTime", rec.RenewTime.Time)
	free := *rec
	free.HolderIdentity = ""
	// The elector notices a change of record by its bytes.
	if raw, err = json.Marshal(free); err != nil {
		return nil, nil, err
	}
	return &free, raw, nil
}

func (l *watchedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	optimistic := l.call(false)
	err := l.inner.Create(ctx, rec)
	l.wrote(rec, optimistic, err)
	return err
}

func (l *watchedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	optimistic := l.call(false)
	err := l.inner.Update(ctx, rec)
	l.wrote(rec, optimistic, err)
	return err
}

func (l *watchedLock) RecordEvent(s string) { l.inner.RecordEvent(s) }
func (l *watchedLock) Identity() string     { return l.inner.Identity() }
func (l *watchedLock) Describe() string     { return l.inner.Describe() }

// takeable reports whether identity may take a Lease recorded as rec at
// now without client-go's wait: it is held by another candidate of the
// same host (the part of the identities before the last "_"), which has
// not renewed it for its whole leaseDurationSeconds.
func takeable(rec resourcelock.LeaderElectionRecord, identity string, now time.Time) bool {
	if rec.HolderIdentity == "" || rec.HolderIdentity == identity || rec.LeaseDurationSeconds <= 0 {
		return false
	}
	holderHost, ok := host(rec.HolderIdentity)
	if !ok {
		return false
	}
	ourHost, ok := host(identity)
	if !ok || holderHost != ourHost {
		return false
	}
	return now.After(rec.RenewTime.Add(time.Duration(rec.LeaseDurationSeconds) * time.Second))
}

// host is the host name part of an identity "<hostname>_<uuid>".
func host(identity string) (string, bool) {
	i := strings.LastIndexByte(identity, '_')
	if i <= 0 {
		return "", false
	}
	return identity[:i], true
}

// eventRecorder writes client-go's LeaderElection events about the Lease
// ("<identity> became leader", "<identity> stopped leading").
type eventRecorder struct {
	rec     *events.Recorder
	clock   clock.PassiveClock
	timeout time.Duration
}

func (e *eventRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	ref := corev1.ObjectReference{
		APIVersion: apiVersion, Kind: kind,
		Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	e.rec.Record(ctx, ref, m.GetNamespace(), typ, reason, fmt.Sprintf(format, args...), e.clock.Now())
}
