package lease

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

const ms = time.Millisecond

// recordingClock is a fake clock that remembers every timer Run asks for.
type recordingClock struct {
	*testingclock.FakeClock
	mu    sync.Mutex
	waits []time.Duration
}

func (c *recordingClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

func (c *recordingClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

type world struct {
	cs       *fake.Clientset
	clock    *recordingClock
	r        *Renewer
	repeated atomic.Int64
	down     atomic.Bool
}

func node1() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "uid-1"}}
}

// newWorld builds a Renewer for node-1 over a fake clientset holding objs.
// While w.down is set every API call fails with a 500. rands are the
// jitter draws, used in turn (0.5 when none).
func newWorld(t *testing.T, rands []float64, objs ...k8sruntime.Object) *world {
	t.Helper()
	w := &world{
		cs:    fake.NewClientset(objs...),
		clock: &recordingClock{FakeClock: testingclock.NewFakeClock(t0)},
	}
	w.cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if w.down.Load() {
			return true, nil, apierrors.NewInternalError(errors.New("api server down"))
		}
		return false, nil, nil
	})
	if len(rands) == 0 {
		rands = []float64{0.5}
	}
	var draws atomic.Int64
	r, err := New(Config{
		Client:            w.cs,
		NodeName:          "node-1",
		Clock:             w.clock,
		Rand:              func() float64 { return rands[int(draws.Add(1)-1)%len(rands)] },
		OnRepeatedFailure: func() { w.repeated.Add(1) },
		Logger:            slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.r = r
	return w
}

// failN makes the next n calls of verb on resource fail with err.
func (w *world) failN(verb, resource string, n int, err error) {
	var left atomic.Int64
	left.Store(int64(n))
	w.cs.PrependReactor(verb, resource, func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if left.Add(-1) >= 0 {
			return true, nil, err
		}
		return false, nil, nil
	})
}

// calls returns the API calls made since the last call, as "verb resource".
func (w *world) calls() []string {
	var out []string
	for _, a := range w.cs.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	w.cs.ClearActions()
	return out
}

// lease reads the stored Lease straight from the tracker, unseen by
// reactors and the action log.
func (w *world) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	obj, err := w.cs.Tracker().Get(leasesGVR, "kube-node-lease", "node-1")
	if err != nil {
		t.Fatalf("reading the lease: %v", err)
	}
	return obj.(*coordinationv1.Lease)
}

func (w *world) leaseMissing(t *testing.T) {
	t.Helper()
	_, err := w.cs.Tracker().Get(leasesGVR, "kube-node-lease", "node-1")
	if !apierrors.IsNotFound(err) {
		t.Fatalf("lease get = %v, want NotFound", err)
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

var (
	leasesGVR   = coordinationv1.SchemeGroupVersion.WithResource("leases")
	errInternal = apierrors.NewInternalError(errors.New("boom"))
	errConflict = apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "node-1", errors.New("stale"))
	nodeOwner   = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", UID: "uid-1"}}
)

func existingLease(owners []metav1.OwnerReference) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", OwnerReferences: owners},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("node-1"),
			LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime:            &metav1.MicroTime{Time: t0.Add(-time.Hour)},
		},
	}
}

// TestSyncFirstPass covers one pass of a fresh Renewer against each state
// of the cluster.
func TestSyncFirstPass(t *testing.T) {
	tests := []struct {
		name      string
		objs      []k8sruntime.Object
		fail      func(w *world)
		wantErr   error
		wantCalls []string
		// wantOwners is the lease's owner references afterwards; nil with
		// noLease means the lease must not exist.
		wantOwners []metav1.OwnerReference
		noLease    bool
	}{
		{
			name:       "missing lease is created, owned by the node",
			objs:       []k8sruntime.Object{node1()},
			wantCalls:  []string{"get leases", "get nodes", "create leases"},
			wantOwners: nodeOwner,
		},
		{
			name:      "missing lease and missing node: nothing created",
			wantErr:   ErrNoOwner,
			wantCalls: []string{"get leases", "get nodes"},
			noLease:   true,
		},
		{
			name:       "existing lease without owner is renewed and adopted",
			objs:       []k8sruntime.Object{node1(), existingLease(nil)},
			wantCalls:  []string{"get leases", "get nodes", "update leases"},
			wantOwners: nodeOwner,
		},
		{
			name:      "existing lease, node missing: renewed without owner",
			objs:      []k8sruntime.Object{existingLease(nil)},
			wantCalls: []string{"get leases", "get nodes", "update leases"},
		},
		{
			name:       "existing owned lease: no node lookup",
			objs:       []k8sruntime.Object{existingLease(nodeOwner)},
			wantCalls:  []string{"get leases", "update leases"},
			wantOwners: nodeOwner,
		},
		{
			name:      "lease get fails",
			objs:      []k8sruntime.Object{node1()},
			fail:      func(w *world) { w.failN("get", "leases", 1, errInternal) },
			wantErr:   ErrEnsure,
			wantCalls: []string{"get leases"},
			noLease:   true,
		},
		{
			name:      "lease create fails",
			objs:      []k8sruntime.Object{node1()},
			fail:      func(w *world) { w.failN("create", "leases", 1, errInternal) },
			wantErr:   ErrEnsure,
			wantCalls: []string{"get leases", "get nodes", "create leases"},
			noLease:   true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, nil, tt.objs...)
			if tt.fail != nil {
				tt.fail(w)
			}
			w.clock.Step(time.Second)
			err := w.r.Sync(context.Background())
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Sync = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantCalls, w.calls()); diff != "" {
				t.Errorf("API calls (-want +got):\n%s", diff)
			}
			if tt.noLease {
				w.leaseMissing(t)
				return
			}
			l := w.lease(t)
			want := existingLease(tt.wantOwners)
			want.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(time.Second)}
			if diff := cmp.Diff(want.Spec, l.Spec); diff != "" {
				t.Errorf("lease spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOwners, l.OwnerReferences); diff != "" {
				t.Errorf("owner references (-want +got):\n%s", diff)
			}
			if got := w.r.Stats(); got.Renewals != 1 || !got.LastRenewTime.Equal(t0.Add(time.Second)) {
				t.Errorf("Stats = %+v, want 1 renewal at %v", got, t0.Add(time.Second))
			}
		})
	}
}

func TestSyncRenewsFromLatestWithoutGet(t *testing.T) {
	w := newWorld(t, nil, node1())
	ctx := context.Background()
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w.calls()
	for i := 1; i <= 3; i++ {
		w.clock.Step(10 * time.Second)
		if err := w.r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"update leases"}, w.calls()); diff != "" {
			t.Fatalf("pass %d API calls (-want +got):\n%s", i, diff)
		}
		if got, want := w.lease(t).Spec.RenewTime.Time, w.clock.Now(); !got.Equal(want) {
			t.Errorf("pass %d renewTime = %v, want %v", i, got, want)
		}
	}
	if got := w.r.Stats().Renewals; got != 4 {
		t.Errorf("Renewals = %d, want 4", got)
	}
}

func TestSyncConflictReadsAgain(t *testing.T) {
	w := newWorld(t, nil, node1())
	ctx := context.Background()
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w.calls()
	w.failN("update", "leases", 1, errConflict)
	w.clock.Step(10 * time.Second)
	if err := w.r.Sync(ctx); err != nil {
		t.Fatalf("Sync after a conflict = %v, want nil", err)
	}
	if diff := cmp.Diff([]string{"update leases", "get leases", "update leases"}, w.calls()); diff != "" {
		t.Errorf("API calls (-want +got):\n%s", diff)
	}
	if w.repeated.Load() != 0 {
		t.Errorf("OnRepeatedFailure called %d times for a conflict, want 0", w.repeated.Load())
	}
}

func TestSyncGivesUpAfterFiveUpdates(t *testing.T) {
	w := newWorld(t, nil, node1())
	ctx := context.Background()
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	w.calls()
	w.failN("update", "leases", 1000, errInternal)
	err := w.r.Sync(ctx)
	if !errors.Is(err, ErrUpdate) {
		t.Fatalf("Sync = %v, want ErrUpdate", err)
	}
	// Five PUTs from the last written lease, then a read and five more,
	// as upstream's sync does.
	want := append(append(repeat("update leases", 5), "get leases"), repeat("update leases", 5)...)
	if diff := cmp.Diff(want, w.calls()); diff != "" {
		t.Errorf("API calls (-want +got):\n%s", diff)
	}
	if got := w.repeated.Load(); got != 8 {
		t.Errorf("OnRepeatedFailure called %d times, want 8 (after each failed PUT but the first, twice)", got)
	}
	if got := w.r.Stats(); got.FailedCalls != 10 || got.FailedPasses != 1 {
		t.Errorf("Stats = %+v, want 10 failed calls in 1 failed pass", got)
	}
	// The next interval is a normal one: updates failing is not an
	// ensure failure.
	wait, _ := w.r.Step(ctx)
	if wait != 10200*ms {
		t.Errorf("wait after failed updates = %v, want 10.2s", wait)
	}
}

func TestSyncAddsOwnerOnceNodeExists(t *testing.T) {
	w := newWorld(t, nil, existingLease(nil))
	ctx := context.Background()
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(w.lease(t).OwnerReferences) != 0 {
		t.Fatal("owner set before the node exists")
	}
	w.calls()
	if _, err := w.cs.CoreV1().Nodes().Create(ctx, node1(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.calls()
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"get nodes", "update leases"}, w.calls()); diff != "" {
		t.Errorf("API calls adding the owner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(nodeOwner, w.lease(t).OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update leases"}, w.calls()); diff != "" {
		t.Errorf("API calls once owned (-want +got):\n%s", diff)
	}
}

func TestSyncCreatesOnceNodeRegisters(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	if err := w.r.Sync(ctx); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("Sync before the node exists = %v, want ErrNoOwner", err)
	}
	// Like upstream, a missing owner is not an ensure failure: the next
	// try comes after the renew interval, not the backoff.
	wait, err := w.r.Step(ctx)
	if !errors.Is(err, ErrNoOwner) || wait != 10200*ms {
		t.Fatalf("Step = %v, %v; want 10.2s, ErrNoOwner", wait, err)
	}
	if _, err := w.cs.CoreV1().Nodes().Create(ctx, node1(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(nodeOwner, w.lease(t).OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
}

// waitForTimer returns once Run is blocked on the fake clock.
func waitForTimer(t *testing.T, c *recordingClock) {
	t.Helper()
	for i := 0; !c.HasWaiters(); i++ {
		if i > 50_000_000 {
			t.Fatal("Run never waited on the clock")
		}
		runtime.Gosched()
	}
}

// startRun runs the Renewer until the test ends and returns once it waits.
func startRun(t *testing.T, w *world) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.r.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitForTimer(t, w.clock)
}

// advance moves the clock by d and returns once Run waits again.
func advance(t *testing.T, w *world, d time.Duration) {
	t.Helper()
	w.clock.Step(d)
	waitForTimer(t, w.clock)
}

// stepToNext advances exactly to NextDue, checking that Run's pending wait
// is want, and that nothing fires a nanosecond earlier.
func stepToNext(t *testing.T, w *world, want time.Duration) {
	t.Helper()
	waits := w.clock.Waits()
	if got := waits[len(waits)-1]; got != want {
		t.Fatalf("pending wait = %v, want %v", got, want)
	}
	if got := w.r.NextDue().Sub(w.clock.Now()); got != want {
		t.Fatalf("NextDue is %v away, want %v", got, want)
	}
	n := len(waits)
	advance(t, w, want-time.Nanosecond)
	if len(w.clock.Waits()) != n {
		t.Fatalf("Run woke up before its %v wait was over", want)
	}
	advance(t, w, time.Nanosecond)
	if len(w.clock.Waits()) != n+1 {
		t.Fatalf("Run did not wake up after %v", want)
	}
}

func TestRunBackoffScheduleWhileLeaseCannotBeRead(t *testing.T) {
	w := newWorld(t, []float64{0.5}, node1())
	w.failN("get", "leases", 8, errInternal)
	start := w.clock.Now()
	startRun(t, w)
	backoffs := []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 7 * time.Second, 7 * time.Second}
	var total time.Duration
	for _, d := range backoffs {
		w.leaseMissing(t)
		stepToNext(t, w, d)
		total += d
	}
	want := append(backoffs, 10200*ms)
	if diff := cmp.Diff(want, w.clock.Waits()); diff != "" {
		t.Errorf("Run's waits (-want +got):\n%s", diff)
	}
	l := w.lease(t)
	if got := l.Spec.RenewTime.Time; !got.Equal(start.Add(total)) {
		t.Errorf("renewTime = %v, want %v (after %v of backoff)", got, start.Add(total), total)
	}
	if diff := cmp.Diff(nodeOwner, l.OwnerReferences); diff != "" {
		t.Errorf("owner references (-want +got):\n%s", diff)
	}
	if got := w.r.Stats(); got.FailedPasses != 8 || got.Renewals != 1 {
		t.Errorf("Stats = %+v, want 8 failed passes and 1 renewal", got)
	}
}

func TestRunRenewsEveryIntervalWithJitter(t *testing.T) {
	w := newWorld(t, []float64{0, 0.5, 0.999}, node1())
	startRun(t, w)
	if got := w.lease(t).Spec.RenewTime.Time; !got.Equal(t0) {
		t.Fatalf("first renewTime = %v, want %v", got, t0)
	}
	w.calls()
	// Each wait is 10s plus draw × 4% of 10s, counted from the end of the
	// previous pass.
	for i, d := range []time.Duration{10 * time.Second, 10200 * ms, 10399600 * time.Microsecond, 10 * time.Second, 10200 * ms} {
		prev := w.clock.Now()
		stepToNext(t, w, d)
		if got := w.lease(t).Spec.RenewTime.Time; !got.Equal(prev.Add(d)) {
			t.Errorf("renewal %d: renewTime = %v, want %v", i+1, got, prev.Add(d))
		}
		if diff := cmp.Diff([]string{"update leases"}, w.calls()); diff != "" {
			t.Errorf("renewal %d API calls (-want +got):\n%s", i+1, diff)
		}
	}
	if got := w.r.Stats().Renewals; got != 6 {
		t.Errorf("Renewals = %d, want 6", got)
	}
}

func TestRunRecoversFromOutage(t *testing.T) {
	w := newWorld(t, []float64{0}, node1())
	startRun(t, w)
	stepToNext(t, w, 10*time.Second)

	w.down.Store(true)
	stepToNext(t, w, 10*time.Second) // 5 PUTs fail, then the read
	for _, d := range []time.Duration{200 * ms, 400 * ms, 800 * ms, 1600 * ms} {
		stepToNext(t, w, d)
	}
	if got := w.repeated.Load(); got != 4 {
		t.Errorf("OnRepeatedFailure called %d times, want 4", got)
	}
	w.down.Store(false)
	stepToNext(t, w, 3200*ms) // the read works again and the lease is renewed
	if got := w.lease(t).Spec.RenewTime.Time; !got.Equal(w.clock.Now()) {
		t.Errorf("renewTime after the outage = %v, want %v", got, w.clock.Now())
	}
	stepToNext(t, w, 10*time.Second)

	want := []time.Duration{10 * time.Second, 10 * time.Second, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 10 * time.Second, 10 * time.Second}
	if diff := cmp.Diff(want, w.clock.Waits()); diff != "" {
		t.Errorf("Run's waits (-want +got):\n%s", diff)
	}
	// A second outage starts the backoff from 200ms again.
	w.down.Store(true)
	stepToNext(t, w, 10*time.Second)
	stepToNext(t, w, 200*ms)
	w.down.Store(false)
	stepToNext(t, w, 400*ms)
	stepToNext(t, w, 10*time.Second)
	if got := w.r.Stats(); got.Renewals != 6 {
		t.Errorf("Stats = %+v, want 6 renewals", got)
	}
}

func TestRunStopsWithContext(t *testing.T) {
	w := newWorld(t, nil, node1())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.r.Run(ctx)
	}()
	waitForTimer(t, w.clock)
	cancel()
	<-done
	if w.clock.HasWaiters() {
		t.Error("Run left its timer behind")
	}
	renewals := w.r.Stats().Renewals
	w.clock.Step(time.Hour)
	if got := w.r.Stats().Renewals; got != renewals {
		t.Errorf("renewals went from %d to %d after Run stopped", renewals, got)
	}
}
