package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"knode/internal/auth"
)

func TestBucketBoundaries(t *testing.T) {
	for i := 0; i < histogramBuckets-1; i++ {
		b := bucketBound(i)
		if got := bucketOf(b); got != i {
			t.Fatalf("bucketOf(bound(%d)=%v) = %d", i, b, got)
		}
		if got := bucketOf(b + 1); got != i+1 {
			t.Fatalf("bucketOf(bound(%d)+1ns) = %d, want %d", i, got, i+1)
		}
	}
	if got := bucketOf(-time.Second); got != 0 {
		t.Errorf("bucketOf(-1s) = %d, want 0", got)
	}
	if got := bucketOf(time.Hour); got != histogramBuckets-1 {
		t.Errorf("bucketOf(1h) = %d, want the last bucket", got)
	}
}

func TestHistogramPercentiles(t *testing.T) {
	// within says got is d or at most one bucket (4.4 %) above it.
	within := func(got, d time.Duration) bool {
		return got >= d && float64(got) <= float64(d)*1.045
	}
	tests := []struct {
		name    string
		observe []time.Duration
		q       float64
		want    time.Duration
		// exact: got must equal want; otherwise within(got, want).
		exact bool
	}{
		{name: "empty", q: 0.99, want: 0, exact: true},
		{name: "one value is capped at the max", observe: []time.Duration{5 * time.Millisecond}, q: 0.5, want: 5 * time.Millisecond, exact: true},
		{name: "zeros", observe: []time.Duration{0, 0}, q: 0.99, want: 0, exact: true},
		{name: "p50 of 1..100ms", observe: ramp(100, time.Millisecond), q: 0.5, want: 50 * time.Millisecond},
		{name: "p99 of 1..100ms", observe: ramp(100, time.Millisecond), q: 0.99, want: 99 * time.Millisecond},
		{name: "p100 is the max", observe: ramp(100, time.Millisecond), q: 1, want: 100 * time.Millisecond, exact: true},
		{name: "p99 of 1000 with one outlier ignores it", observe: append(make([]time.Duration, 999), time.Minute), q: 0.99, want: histogramMin, exact: true},
		{name: "overflow reports the max", observe: []time.Duration{10 * time.Minute}, q: 0.5, want: 10 * time.Minute, exact: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h Histogram
			for _, d := range tc.observe {
				h.Observe(d)
			}
			c := h.Snapshot()
			if c.Total() != int64(len(tc.observe)) {
				t.Errorf("total = %d, want %d", c.Total(), len(tc.observe))
			}
			got := c.Percentile(tc.q)
			if (tc.exact && got != tc.want) || (!tc.exact && !within(got, tc.want)) {
				t.Errorf("percentile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

// ramp returns n durations step, 2×step, …, n×step.
func ramp(n int, step time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i+1) * step
	}
	return out
}

func TestCountsSub(t *testing.T) {
	var h Histogram
	for range 100 {
		h.Observe(time.Millisecond)
	}
	before := h.Snapshot()
	for range 10 {
		h.Observe(80 * time.Millisecond)
	}
	recent := h.Snapshot().Sub(before)
	if recent.Total() != 10 {
		t.Errorf("total = %d, want 10", recent.Total())
	}
	if got := recent.Percentile(0.5); got < 80*time.Millisecond || got > 84*time.Millisecond {
		t.Errorf("recent p50 = %v, want about 80ms", got)
	}
	if got := h.Snapshot().Percentile(0.5); got > 2*time.Millisecond {
		t.Errorf("overall p50 = %v, want about 1ms", got)
	}

	h.Observe(time.Second)
	mid := h.Snapshot()
	h.Observe(2 * time.Millisecond)
	if got := h.Snapshot().Sub(mid).Max(); got < 2*time.Millisecond || got > 2090*time.Microsecond {
		t.Errorf("max of a difference = %v, want about 2ms, not the 1s before it", got)
	}
	if got := mid.Sub(mid); got.Max() != 0 || got.Total() != 0 || got.Percentile(0.99) != 0 {
		t.Errorf("empty difference: max=%v total=%d p99=%v, want zeros", got.Max(), got.Total(), got.Percentile(0.99))
	}
}

func TestTallySub(t *testing.T) {
	m := newMeter(testingclock.NewFakeClock(time.Unix(0, 0)))
	lease := auth.RequestAttributes(httptest.NewRequest(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil))
	node := auth.RequestAttributes(httptest.NewRequest(http.MethodGet, "/api/v1/nodes/n1", nil))
	m.record(lease, 409, nil, time.Millisecond, false)
	m.record(node, 500, nil, time.Millisecond, false)
	m.record(lease, 200, nil, time.Millisecond, false)
	before := m.tally()
	m.record(node, 500, nil, time.Millisecond, false)
	m.record(lease, 200, nil, time.Millisecond, false)
	m.record(node, 200, nil, time.Millisecond, false)
	got := m.tally().sub(before)
	if got.requests != 3 || got.renewals != 1 || got.errors != 1 || got.latency.Total() != 1 {
		t.Errorf("requests=%d renewals=%d errors=%d latencies=%d, want 3, 1, 1, 1", got.requests, got.renewals, got.errors, got.latency.Total())
	}
	if diff := cmp.Diff(map[string]int64{"500 get nodes": 1}, got.byKind); diff != "" {
		t.Errorf("errors by kind (-want +got):\n%s", diff)
	}
}

func TestZoneNames(t *testing.T) {
	tests := []struct {
		n    int
		want []string
	}{
		{n: 0, want: []string{}},
		{n: 1, want: []string{"zone-a"}},
		{n: 3, want: []string{"zone-a", "zone-b", "zone-c"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, ZoneNames(tc.n)); diff != "" {
			t.Errorf("ZoneNames(%d) (-want +got):\n%s", tc.n, diff)
		}
	}
	many := ZoneNames(703)
	for i, want := range map[int]string{25: "zone-z", 26: "zone-aa", 27: "zone-ab", 701: "zone-zz", 702: "zone-aaa"} {
		if many[i] != want {
			t.Errorf("zone %d = %q, want %q", i, many[i], want)
		}
	}
}

func TestPlace(t *testing.T) {
	zones := []string{"zone-a", "zone-b"}
	tests := []struct {
		i    int
		want Placement
	}{
		{i: 0, want: Placement{Name: "fleet-zone-a-1", Zone: "zone-a", Index: 1, IP: netip.MustParseAddr("10.0.0.1")}},
		{i: 1, want: Placement{Name: "fleet-zone-b-1", Zone: "zone-b", Index: 1, IP: netip.MustParseAddr("10.0.0.2")}},
		{i: 2, want: Placement{Name: "fleet-zone-a-2", Zone: "zone-a", Index: 2, IP: netip.MustParseAddr("10.0.0.3")}},
		{i: 9999, want: Placement{Name: "fleet-zone-b-5000", Zone: "zone-b", Index: 5000, IP: netip.MustParseAddr("10.0.39.16")}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, Place("fleet", zones, tc.i), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("Place(%d) (-want +got):\n%s", tc.i, diff)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	rc := &rest.Config{Host: "https://127.0.0.1:6443"}
	tests := []struct {
		name string
		cfg  Config
		// want are substrings of the error; none means valid.
		want []string
	}{
		{name: "defaults", cfg: Config{Rest: rc, Nodes: 10}},
		{name: "no rest config", cfg: Config{Nodes: 1}, want: []string{"rest: Required value"}},
		{name: "no nodes", cfg: Config{Rest: rc}, want: []string{"nodes: Invalid value: 0: must be greater than 0"}},
		{name: "unknown identity", cfg: Config{Rest: rc, Nodes: 1, Identity: "root"},
			want: []string{`identity: Unsupported value: "root": supported values: "node", "admin"`}},
		{name: "negative durations", cfg: Config{Rest: rc, Nodes: 1, Duration: -1, Ramp: -time.Second},
			want: []string{`duration: Invalid value: "-1ns": must not be negative`, `ramp: Invalid value: "-1s": must not be negative`}},
		{name: "bad prefix", cfg: Config{Rest: rc, Nodes: 1, NamePrefix: "Fleet_1"}, want: []string{`namePrefix: Invalid value: "Fleet_1"`}},
		{name: "empty zone list", cfg: Config{Rest: rc, Nodes: 1, Zones: []string{}}, want: []string{"zones: Required value"}},
		{name: "duplicate zone", cfg: Config{Rest: rc, Nodes: 1, Zones: []string{"a", "a"}}, want: []string{`zones[1]: Duplicate value: "a"`}},
		{name: "zone not a label", cfg: Config{Rest: rc, Nodes: 1, Zones: []string{"us.east"}}, want: []string{`zones[0]: Invalid value: "us.east": zone names are part of node names`}},
		{name: "longest names", cfg: Config{Rest: rc, Nodes: 100000, NamePrefix: strings.Repeat("f", 63), Zones: []string{strings.Repeat("z", 63)}}},
		{name: "zone too long", cfg: Config{Rest: rc, Nodes: 1, Zones: []string{strings.Repeat("z", 64)}}, want: []string{"zones[0]: Invalid value", "must be no more than 63 characters"}},
		{name: "servers", cfg: Config{Rest: rc, Nodes: 1, Servers: []string{"10.0.0.1:6443", "10.0.0.2:6443", "[fd00::3]:6443"}}},
		{name: "server without a port", cfg: Config{Rest: rc, Nodes: 1, Servers: []string{"10.0.0.1"}},
			want: []string{`servers[0]: Invalid value: "10.0.0.1": must be host:port`}},
		{name: "server without a host", cfg: Config{Rest: rc, Nodes: 1, Servers: []string{":6443"}},
			want: []string{`servers[0]: Invalid value: ":6443": must be host:port with both a host and a port`}},
		{name: "duplicate server", cfg: Config{Rest: rc, Nodes: 1, Servers: []string{"a:1", "b:1", "a:1"}}, want: []string{`servers[2]: Duplicate value: "a:1"`}},
		{name: "fewer connections than servers", cfg: Config{Rest: rc, Nodes: 1, Connections: 2, Servers: []string{"a:1", "b:1", "c:1"}},
			want: []string{"connections: Invalid value: 2: must be at least the number of servers (3)"}},
		{name: "servers and a host with a path", cfg: Config{Rest: &rest.Config{Host: "10.0.0.1:6443/prefix"}, Nodes: 1, Servers: []string{"a:1"}},
			want: []string{`rest.host: Invalid value: "10.0.0.1:6443/prefix"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New succeeded, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestClassify(t *testing.T) {
	attrs := func(method, path string) auth.Attributes {
		return auth.RequestAttributes(httptest.NewRequest(method, path, nil))
	}
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
	tests := []struct {
		name string
		a    auth.Attributes
		code int
		err  error
		want outcome
	}{
		{name: "renewal", a: attrs(http.MethodPut, leasePath), code: 200, want: outcome{renewal: true}},
		{name: "lease created is no renewal", a: attrs(http.MethodPost, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"), code: 201},
		{name: "node status patch", a: attrs(http.MethodPatch, "/api/v1/nodes/n1/status"), code: 200},
		{name: "renewal conflict", a: attrs(http.MethodPut, leasePath), code: 409, want: outcome{failed: true, errorKind: "409 update leases"}},
		{name: "lease not created yet", a: attrs(http.MethodGet, leasePath), code: 404},
		{name: "node exists", a: attrs(http.MethodPost, "/api/v1/nodes"), code: 409},
		{name: "forbidden status", a: attrs(http.MethodPatch, "/api/v1/nodes/n2/status"), code: 403, want: outcome{failed: true, errorKind: "403 patch nodes/status"}},
		{name: "server error on a get", a: attrs(http.MethodGet, "/api/v1/nodes/n1"), code: 500, want: outcome{failed: true, errorKind: "500 get nodes"}},
		{name: "404 to an update", a: attrs(http.MethodPut, leasePath), code: 404, want: outcome{failed: true, errorKind: "404 update leases"}},
		{name: "throttled", a: attrs(http.MethodGet, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1"), code: 429, want: outcome{failed: true, errorKind: "429 list pods"}},
		{name: "transport", a: attrs(http.MethodPut, leasePath), err: errors.New("connection reset"), want: outcome{failed: true, errorKind: "transport update leases"}},
		{name: "timeout", a: attrs(http.MethodPut, leasePath), err: errTimeout, want: outcome{failed: true, errorKind: "timeout update leases"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, classify(tc.a, tc.code, tc.err), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeterIgnoresStoppingRequests(t *testing.T) {
	m := newMeter(testingclock.NewFakeClock(time.Unix(0, 0)))
	a := auth.RequestAttributes(httptest.NewRequest(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil))
	m.record(a, 0, context.Canceled, time.Second, true)
	m.record(a, 200, nil, 3*time.Millisecond, false)
	m.record(a, 409, nil, time.Millisecond, false)
	got := m.tally()
	if got.errors != 1 || got.requests != 3 || got.renewals != 1 {
		t.Errorf("errors=%d requests=%d renewals=%d, want 1, 3, 1", got.errors, got.requests, got.renewals)
	}
	if diff := cmp.Diff(map[string]int64{"409 update leases": 1}, got.byKind); diff != "" {
		t.Errorf("errors by kind (-want +got):\n%s", diff)
	}
	if got := got.latency.Max(); got != 3*time.Millisecond {
		t.Errorf("latency max = %v, want 3ms (only the renewal)", got)
	}
}

func TestReadiness(t *testing.T) {
	type step struct {
		name    string
		ready   bool
		deleted bool
	}
	type counts struct{ Ready, NotReady, NotReadyMax int }
	tests := []struct {
		name  string
		steps []step
		want  counts
	}{
		{name: "registering nodes are not counted as not ready", steps: []step{{name: "a"}, {name: "b"}}, want: counts{}},
		{name: "ready", steps: []step{{name: "a"}, {name: "a", ready: true}, {name: "b", ready: true}}, want: counts{Ready: 2}},
		{name: "a ready node that fails counts", steps: []step{{name: "a", ready: true}, {name: "b", ready: true}, {name: "a"}, {name: "b"}},
			want: counts{NotReady: 2, NotReadyMax: 2}},
		{name: "recovery keeps the max", steps: []step{{name: "a", ready: true}, {name: "a"}, {name: "a", ready: true}},
			want: counts{Ready: 1, NotReadyMax: 1}},
		{name: "repeated updates count once", steps: []step{{name: "a", ready: true}, {name: "a"}, {name: "a"}, {name: "a"}},
			want: counts{NotReady: 1, NotReadyMax: 1}},
		{name: "deleted nodes leave", steps: []step{{name: "a", ready: true}, {name: "b", ready: true}, {name: "b"}, {name: "a", deleted: true}, {name: "b", deleted: true}},
			want: counts{NotReadyMax: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newReadiness()
			for _, s := range tc.steps {
				r.observe(s.name, s.ready, s.deleted)
			}
			var got counts
			got.Ready, got.NotReady, got.NotReadyMax = r.counts()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProgressString(t *testing.T) {
	tests := []struct {
		name string
		p    Progress
		want string
	}{
		{name: "running", p: Progress{Elapsed: 120500 * time.Millisecond, Of: 10 * time.Minute, Started: 10000, Nodes: 10000,
			Ready: 10000, Renewals: 119880, P99: 12340 * time.Microsecond, P99Recent: 11 * time.Millisecond, Interval: 10 * time.Second},
			want: "fleet: 120s/600s nodes=10000 ready=10000 not_ready=0 renewals=119880 p99=12.3ms p99_10s=11.0ms errors=0"},
		{name: "ramping", p: Progress{Ramping: true, Elapsed: 12 * time.Second, Of: 40 * time.Second, Started: 3000, Nodes: 10000,
			Ready: 2950, NotReady: 2, Renewals: 2800, P99: 4100 * time.Microsecond, P99Recent: 4400 * time.Microsecond, Interval: 10 * time.Second, Errors: 3},
			want: "fleet: ramp 12s/40s started=3000/10000 ready=2950 not_ready=2 renewals=2800 p99=4.1ms p99_10s=4.4ms errors=3"},
		{name: "short interval", p: Progress{Elapsed: time.Second, Of: 2 * time.Second, Nodes: 20, Interval: 500 * time.Millisecond},
			want: "fleet: 1s/2s nodes=20 ready=0 not_ready=0 renewals=0 p99=0.0ms p99_500ms=0.0ms errors=0"},
	}
	for _, tc := range tests {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// blockingTransport answers only when the request's context ends, or at
// once for a request whose path ends in /fast.
type blockingTransport struct {
	called chan struct{}
}

func (b *blockingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	b.called <- struct{}{}
	if strings.HasSuffix(req.URL.Path, "/fast") {
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}
	<-req.Context().Done()
	return nil, req.Context().Err()
}

func TestTimeoutTransport(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(0, 0))
	next := &blockingTransport{called: make(chan struct{}, 1)}
	tt := &timeoutTransport{clock: clk, timeout: 10 * time.Second, next: next}

	t.Run("a slow request times out on the clock", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := tt.RoundTrip(httptest.NewRequest(http.MethodPut, "http://x/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1", nil))
			done <- err
		}()
		<-next.called
		clk.Step(9 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("ended after 9s: %v", err)
		default:
		}
		clk.Step(time.Second)
		if err := <-done; !errors.Is(err, errTimeout) {
			t.Errorf("error = %v, want errTimeout", err)
		}
	})

	t.Run("a finished request stops its timer when its body is closed", func(t *testing.T) {
		resp, err := tt.RoundTrip(httptest.NewRequest(http.MethodGet, "http://x/api/v1/fast", nil))
		<-next.called
		if err != nil {
			t.Fatal(err)
		}
		if !clk.HasWaiters() {
			t.Fatal("no timer while the body is open")
		}
		resp.Body.Close()
		if clk.HasWaiters() {
			t.Error("timer still set after the body was closed")
		}
	})

	t.Run("a watch is not timed", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			req := httptest.NewRequest(http.MethodGet, "http://x/api/v1/pods?watch=true", nil).WithContext(ctx)
			_, err := tt.RoundTrip(req)
			done <- err
		}()
		<-next.called
		if clk.HasWaiters() {
			t.Error("a watch got a timer")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
	})
}

func TestDefaultConnections(t *testing.T) {
	for _, tc := range []struct{ servers, want int }{
		{0, 8}, {1, 8}, {2, 8}, {3, 9}, {5, 10}, {8, 8}, {9, 9}, {12, 12},
	} {
		cfg := Config{Rest: &rest.Config{Host: "https://127.0.0.1:6443"}, Nodes: 1}
		for i := range tc.servers {
			cfg.Servers = append(cfg.Servers, fmt.Sprintf("10.0.0.%d:6443", i+1))
		}
		f, err := New(cfg)
		if err != nil {
			t.Fatalf("%d servers: %v", tc.servers, err)
		}
		if f.cfg.Connections != tc.want {
			t.Errorf("%d servers: %d connections by default, want %d", tc.servers, f.cfg.Connections, tc.want)
		}
	}
}

func TestPreferring(t *testing.T) {
	servers := []string{"a:1", "b:1", "c:1"}
	tests := []struct {
		k    int
		want []string
	}{
		{0, []string{"a:1", "b:1", "c:1"}},
		{1, []string{"b:1", "c:1", "a:1"}},
		{2, []string{"c:1", "a:1", "b:1"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, preferring(servers, tc.k)); diff != "" {
			t.Errorf("preferring(%d) (-want +got):\n%s", tc.k, diff)
		}
	}
	if diff := cmp.Diff([]string{"a:1", "b:1", "c:1"}, servers); diff != "" {
		t.Errorf("preferring changed its argument (-want +got):\n%s", diff)
	}
}

func TestSpread(t *testing.T) {
	tests := []struct {
		name                        string
		nodes, connections, servers int
		want                        []int
	}{
		{name: "one server", nodes: 10, connections: 8, servers: 1, want: []int{10}},
		{name: "connections a multiple of servers", nodes: 500, connections: 9, servers: 3, want: []int{167, 167, 166}},
		{name: "uneven connections", nodes: 800, connections: 8, servers: 3, want: []int{300, 300, 200}},
		{name: "fewer nodes than servers", nodes: 2, connections: 3, servers: 3, want: []int{1, 1, 0}},
		{name: "as many connections as servers", nodes: 7, connections: 2, servers: 2, want: []int{4, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, spread(tc.nodes, tc.connections, tc.servers)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBalancedHost(t *testing.T) {
	tests := []struct {
		name string
		base rest.Config
		want string
	}{
		{name: "https URL", base: rest.Config{Host: "https://10.0.0.1:6443"}, want: "https://127.0.0.1:4000"},
		{name: "http URL", base: rest.Config{Host: "http://10.0.0.1:8080"}, want: "http://127.0.0.1:4000"},
		{name: "path prefix kept", base: rest.Config{Host: "https://lb.example/k8s"}, want: "https://127.0.0.1:4000/k8s"},
		{name: "host:port with a CA is https", base: rest.Config{Host: "10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("x")}},
			want: "https://127.0.0.1:4000"},
		{name: "host:port without TLS is http", base: rest.Config{Host: "10.0.0.1:6443"}, want: "http://127.0.0.1:4000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := balancedHost(&tc.base, "127.0.0.1:4000")
			if err != nil || got != tc.want {
				t.Errorf("balancedHost = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
