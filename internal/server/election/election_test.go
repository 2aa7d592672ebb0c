package election_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"knode/internal/apitest"
	"knode/internal/server/election"
)

// Short timings, so that a takeover after a failure takes a few seconds.
const (
	leaseDuration = 2 * time.Second
	renewDeadline = time.Second
	retryPeriod   = 250 * time.Millisecond
	// waitLimit bounds every wait; nothing should take half as long.
	waitLimit = 20 * time.Second
)

// terms records the terms of several candidates in one process and any
// overlap between them.
type terms struct {
	mu       sync.Mutex
	working  string // the candidate whose Work runs, if any
	started  map[string]int
	overlaps []string
}

func newTerms() *terms { return &terms{started: map[string]int{}} }

// work is a candidate's Work: it holds the floor until its term ends.
func (w *terms) work(id string) func(ctx context.Context) {
	return func(ctx context.Context) {
		w.mu.Lock()
		if w.working != "" {
			w.overlaps = append(w.overlaps, fmt.Sprintf("%s started a term while %s's was running", id, w.working))
		}
		w.working = id
		w.started[id]++
		w.mu.Unlock()
		<-ctx.Done()
		w.mu.Lock()
		if w.working == id {
			w.working = ""
		}
		w.mu.Unlock()
	}
}

func (w *terms) state() (working string, started map[string]int, overlaps []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := map[string]int{}
	for k, v := range w.started {
		s[k] = v
	}
	return w.working, s, append([]string(nil), w.overlaps...)
}

// link is a candidate's connection to the API server, which the test may
// cut.
type link struct {
	cut      atomic.Bool
	leaseGet atomic.Int64 // GETs of the Lease that went through
}

func (l *link) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if l.cut.Load() {
			return nil, errors.New("link cut by the test")
		}
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/leases/") {
			l.leaseGet.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// candidate is one running Candidate.
type candidate struct {
	id     string
	link   *link
	status prometheus.Gauge
	stop   context.CancelFunc
	done   chan struct{}
}

// campaign starts a candidate for kube-system/test with the short
// timings, stopped when the test ends.
func campaign(t *testing.T, srv *apitest.Server, w *terms, id string, change ...func(*election.Config)) *candidate {
	t.Helper()
	c := &candidate{id: id, link: &link{}, status: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader_election_master_status"}), done: make(chan struct{})}
	cfg := srv.Config(apitest.AdminToken)
	cfg.WrapTransport = c.link.wrap
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ec := election.Config{
		Client: client, Namespace: "kube-system", Name: "test", Identity: id,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Work: w.work(id), Status: c.status,
	}
	for _, f := range change {
		f(&ec)
	}
	cand, err := election.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	go func() {
		defer close(c.done)
		cand.Run(ctx)
	}()
	t.Cleanup(c.shutdown)
	return c
}

// shutdown stops the candidate and waits for Run to return.
func (c *candidate) shutdown() {
	c.stop()
	<-c.done
}

// waitFor polls cond until it holds, and fails the test after waitLimit.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.After(waitLimit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: not after %s: %s", what, waitLimit, msg)
		case <-tick.C:
		}
	}
}

func holder(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "test", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// waitLeader waits until id's term runs and id holds the Lease.
func waitLeader(t *testing.T, srv *apitest.Server, w *terms, id string) {
	t.Helper()
	waitFor(t, id+" leads", func() (bool, string) {
		working, _, _ := w.state()
		h := holder(t, srv.Admin)
		return working == id && h == id, fmt.Sprintf("working %q, holder %q", working, h)
	})
}

func checkNoOverlap(t *testing.T, w *terms) {
	t.Helper()
	if _, _, overlaps := w.state(); len(overlaps) > 0 {
		t.Errorf("terms overlapped: %q", overlaps)
	}
}

// One candidate leads; a graceful stop releases the Lease only after its
// term's work returned, and the other takes over without waiting a lease
// duration.
func TestHandoverOnShutdown(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	w := newTerms()
	a := campaign(t, srv, w, "host_a")
	waitLeader(t, srv, w, "host_a")
	b := campaign(t, srv, w, "host_b")
	// b tries a few times while a holds the Lease.
	waitFor(t, "b tries", func() (bool, string) { return b.link.leaseGet.Load() >= 3, "" })
	if working, _, _ := w.state(); working != "host_a" {
		t.Fatalf("while a holds the lease, %q works", working)
	}
	if got := testutil.ToFloat64(a.status); got != 1 {
		t.Errorf("a's status %v, want 1", got)
	}
	if got := testutil.ToFloat64(b.status); got != 0 {
		t.Errorf("b's status %v, want 0", got)
	}

	a.shutdown()
	if got := testutil.ToFloat64(a.status); got != 0 {
		t.Errorf("a's status after its shutdown %v, want 0", got)
	}
	// Released: b needs no lease duration (2 s) to take over; a retry
	// period (250 ms, jittered) and a margin are enough.
	start := time.Now()
	waitLeader(t, srv, w, "host_b")
	if took := time.Since(start); took >= leaseDuration {
		t.Errorf("b took over after %s, want less than the lease duration %s: the lease was not released", took, leaseDuration)
	}
	if got := testutil.ToFloat64(b.status); got != 1 {
		t.Errorf("b's status %v, want 1", got)
	}
	checkNoOverlap(t, w)

	evs, err := srv.Admin.CoreV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, e := range evs.Items {
		if e.Reason == "LeaderElection" && e.InvolvedObject.Kind == "Lease" && e.InvolvedObject.Name == "test" {
			msgs = append(msgs, e.Message)
		}
	}
	for _, want := range []string{"host_a became leader", "host_a stopped leading", "host_b became leader"} {
		if !strings.Contains(strings.Join(msgs, "\n"), want) {
			t.Errorf("LeaderElection events %q lack %q", msgs, want)
		}
	}
}

// A leader that can no longer renew ends its term within the renew
// deadline, before the other candidate may take over; it campaigns again
// and, once the other steps down, leads a fresh term.
func TestStepDownWhenRenewalsFail(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	w := newTerms()
	a := campaign(t, srv, w, "host_a")
	waitLeader(t, srv, w, "host_a")
	b := campaign(t, srv, w, "host_b")
	waitFor(t, "b tries", func() (bool, string) { return b.link.leaseGet.Load() >= 2, "" })

	a.link.cut.Store(true)
	waitFor(t, "a's term ends", func() (bool, string) {
		working, _, _ := w.state()
		return working != "host_a", "a still works"
	})
	if got := testutil.ToFloat64(a.status); got != 0 {
		t.Errorf("a's status after it stepped down %v, want 0", got)
	}
	waitLeader(t, srv, w, "host_b")
	checkNoOverlap(t, w)

	// a campaigns again but b holds the Lease.
	a.link.cut.Store(false)
	before := a.link.leaseGet.Load()
	waitFor(t, "a tries again", func() (bool, string) { return a.link.leaseGet.Load() >= before+2, "" })
	if working, _, _ := w.state(); working != "host_b" {
		t.Fatalf("while b holds the lease, %q works", working)
	}

	b.shutdown()
	waitLeader(t, srv, w, "host_a")
	if _, started, _ := w.state(); started["host_a"] != 2 || started["host_b"] != 1 {
		t.Errorf("terms started %v, want a 2 and b 1", started)
	}
	checkNoOverlap(t, w)
}

func staleLease(t *testing.T, srv *apitest.Server, holder string) {
	t.Helper()
	renewed := metav1.NewMicroTime(time.Now().Add(-time.Minute))
	_, err := srv.Admin.CoordinationV1().Leases("kube-system").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "test"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &renewed, RenewTime: &renewed, LeaseTransitions: ptr.To[int32](3),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// A Lease a crashed candidate of this host left is taken at once, though
// the lease duration is 15 s (what `knode up` after a crash relies on);
// one of another host is waited for as client-go does.
func TestExpiredLeaseOfThisHost(t *testing.T) {
	slow := func(c *election.Config) {
		c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 15*time.Second, 10*time.Second, 200*time.Millisecond
	}
	t.Run("same host", func(t *testing.T) {
		srv := apitest.Start(t, apitest.Options{})
		staleLease(t, srv, "host_crashed")
		w := newTerms()
		start := time.Now()
		campaign(t, srv, w, "host_a", slow)
		waitLeader(t, srv, w, "host_a")
		if took := time.Since(start); took >= 5*time.Second {
			t.Errorf("took over after %s", took)
		}
	})
	t.Run("other host", func(t *testing.T) {
		srv := apitest.Start(t, apitest.Options{})
		staleLease(t, srv, "elsewhere_crashed")
		w := newTerms()
		a := campaign(t, srv, w, "host_a", slow)
		waitFor(t, "a tries", func() (bool, string) { return a.link.leaseGet.Load() >= 5, "" })
		if working, _, _ := w.state(); working != "" {
			t.Errorf("%q works within the lease duration of another host's lease", working)
		}
		if h := holder(t, srv.Admin); h != "elsewhere_crashed" {
			t.Errorf("holder %q, want the other host's", h)
		}
	})
}

func TestNewRejects(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	good := election.Config{Client: srv.Admin, Namespace: "kube-system", Name: "x", Identity: "h_1", Work: func(context.Context) {}}
	if _, err := election.New(good); err != nil {
		t.Fatalf("a good config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*election.Config)
		want   string
	}{
		{"no client", func(c *election.Config) { c.Client = nil }, "client: Required value"},
		{"no identity", func(c *election.Config) { c.Identity = "" }, "identity: Required value"},
		{"no work", func(c *election.Config) { c.Work = nil }, "work: Required value"},
		{"renew deadline past the lease", func(c *election.Config) { c.RenewDeadline = 20 * time.Second },
			`leaseDuration: Invalid value: "15s": must be greater than renewDeadline (20s)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.change(&cfg)
			_, err := election.New(cfg)
			if !errors.Is(err, election.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
}
