package topology

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"knode/internal/agent/host"
)

// fakeProvider returns canned hints per container name (and for the pod),
// records its calls, and can fail Allocate for one container.
type fakeProvider struct {
	name      string
	hints     map[string]map[string][]Hint
	podHints  map[string][]Hint
	failOn    string
	failWith  error
	calls     *[]string
	onAlloc   func(container string)
	allocated []string
}

func (f *fakeProvider) TopologyHints(_ *corev1.Pod, c *corev1.Container) map[string][]Hint {
	*f.calls = append(*f.calls, f.name+".hints("+c.Name+")")
	return f.hints[c.Name]
}

func (f *fakeProvider) PodTopologyHints(*corev1.Pod) map[string][]Hint {
	*f.calls = append(*f.calls, f.name+".podHints")
	return f.podHints
}

func (f *fakeProvider) Allocate(_ *corev1.Pod, c *corev1.Container) error {
	*f.calls = append(*f.calls, f.name+".allocate("+c.Name+")")
	if f.onAlloc != nil {
		f.onAlloc(c.Name)
	}
	if c.Name == f.failOn {
		return f.failWith
	}
	f.allocated = append(f.allocated, c.Name)
	return nil
}

type typedErr struct{}

func (typedErr) Error() string { return "not enough cpus available to satisfy request" }
func (typedErr) Type() string  { return "SMTAlignmentError" }

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init"}},
			Containers:     []corev1.Container{{Name: "app"}, {Name: "side"}},
		},
	}
}

func newTestManager(t *testing.T, policy, scope string, reg prometheus.Registerer, clk *clocktesting.FakeClock) *Manager {
	t.Helper()
	cfg := Config{Policy: policy, Scope: scope, Topology: fourNodes(), Metrics: reg}
	if clk != nil {
		cfg.Clock = clk
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScopes(t *testing.T) {
	rejection := Result{Reason: "TopologyAffinityError", Message: "Resources cannot be allocated with Topology locality"}
	for _, tc := range []struct {
		name       string
		policy     string
		scope      string
		cpu, dev   fakeProvider
		want       Result
		wantCalls  []string
		wantHints  map[string]Hint // by container name; absent = zero Hint
		wantErrors float64
	}{
		{
			name: "container scope: init first, then apps, hints then allocate", policy: PolicyBestEffort, scope: ScopeContainer,
			cpu: fakeProvider{hints: map[string]map[string][]Hint{
				"init": {"cpu": {h(true, 1)}}, "app": {"cpu": {h(true, 0), h(true, 2)}}, "side": {"cpu": nil},
			}},
			dev:  fakeProvider{hints: map[string]map[string][]Hint{"app": {"gpu": {h(true, 2)}}}},
			want: Result{Admit: true},
			wantCalls: []string{
				"cpu.hints(init)", "dev.hints(init)", "cpu.allocate(init)", "dev.allocate(init)",
				"cpu.hints(app)", "dev.hints(app)", "cpu.allocate(app)", "dev.allocate(app)",
				"cpu.hints(side)", "dev.hints(side)", "cpu.allocate(side)", "dev.allocate(side)",
			},
			wantHints: map[string]Hint{"init": h(true, 1), "app": h(true, 2), "side": h(true, 0, 1, 2, 3)},
		},
		{
			name: "container scope: restricted rejects at the first unaligned container", policy: PolicyRestricted, scope: ScopeContainer,
			cpu:  fakeProvider{hints: map[string]map[string][]Hint{"app": {"cpu": {h(true, 0)}}}},
			dev:  fakeProvider{hints: map[string]map[string][]Hint{"app": {"gpu": {h(true, 1)}}}},
			want: rejection,
			wantCalls: []string{
				"cpu.hints(init)", "dev.hints(init)", "cpu.allocate(init)", "dev.allocate(init)",
				"cpu.hints(app)", "dev.hints(app)",
			},
			wantHints:  map[string]Hint{"init": h(true, 0, 1, 2, 3)},
			wantErrors: 1,
		},
		{
			name: "single-numa-node rejects a container that needs two nodes", policy: PolicySingleNUMANode, scope: ScopeContainer,
			cpu:        fakeProvider{hints: map[string]map[string][]Hint{"init": {"cpu": {h(true, 0, 1)}}}},
			want:       rejection,
			wantCalls:  []string{"cpu.hints(init)", "dev.hints(init)"},
			wantErrors: 1,
		},
		{
			name: "untyped allocate error is unexpected", policy: PolicyBestEffort, scope: ScopeContainer,
			dev:  fakeProvider{failOn: "app", failWith: errors.New("boom")},
			want: Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to boom, which is unexpected"},
			wantCalls: []string{
				"cpu.hints(init)", "dev.hints(init)", "cpu.allocate(init)", "dev.allocate(init)",
				"cpu.hints(app)", "dev.hints(app)", "cpu.allocate(app)", "dev.allocate(app)",
			},
			wantHints:  map[string]Hint{"init": h(true, 0, 1, 2, 3), "app": h(true, 0, 1, 2, 3)},
			wantErrors: 1,
		},
		{
			name: "typed allocate error keeps its reason", policy: PolicyBestEffort, scope: ScopeContainer,
			cpu:        fakeProvider{failOn: "init", failWith: fmt.Errorf("wrapped: %w", typedErr{})},
			want:       Result{Reason: "SMTAlignmentError", Message: "not enough cpus available to satisfy request"},
			wantCalls:  []string{"cpu.hints(init)", "dev.hints(init)", "cpu.allocate(init)"},
			wantHints:  map[string]Hint{"init": h(true, 0, 1, 2, 3)},
			wantErrors: 1,
		},
		{
			name: "pod scope: one merge, same hint for every container", policy: PolicyRestricted, scope: ScopePod,
			cpu:  fakeProvider{podHints: map[string][]Hint{"cpu": {h(true, 2, 3), h(true, 3)}}},
			dev:  fakeProvider{podHints: map[string][]Hint{"gpu": {h(true, 3)}}},
			want: Result{Admit: true},
			wantCalls: []string{
				"cpu.podHints", "dev.podHints",
				"cpu.allocate(init)", "dev.allocate(init)", "cpu.allocate(app)", "dev.allocate(app)", "cpu.allocate(side)", "dev.allocate(side)",
			},
			wantHints: map[string]Hint{"init": h(true, 3), "app": h(true, 3), "side": h(true, 3)},
		},
		{
			name: "pod scope: rejection allocates nothing", policy: PolicySingleNUMANode, scope: ScopePod,
			cpu:        fakeProvider{podHints: map[string][]Hint{"cpu": {}}},
			want:       rejection,
			wantCalls:  []string{"cpu.podHints", "dev.podHints"},
			wantErrors: 1,
		},
		{
			name: "none policy: allocate only, no hints, errors not counted", policy: PolicyNone, scope: ScopePod,
			cpu:       fakeProvider{failOn: "side", failWith: errors.New("boom")},
			want:      Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to boom, which is unexpected"},
			wantCalls: []string{"cpu.allocate(init)", "dev.allocate(init)", "cpu.allocate(app)", "dev.allocate(app)", "cpu.allocate(side)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			m := newTestManager(t, tc.policy, tc.scope, reg, nil)
			var calls []string
			cpu, dev := tc.cpu, tc.dev
			cpu.name, cpu.calls = "cpu", &calls
			dev.name, dev.calls = "dev", &calls
			m.AddHintProvider(&cpu)
			m.AddHintProvider(&dev)
			got := m.Admit(testPod())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCalls, calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			for _, c := range []string{"init", "app", "side"} {
				if diff := cmp.Diff(tc.wantHints[c], m.Affinity("uid-1", c)); diff != "" {
					t.Errorf("Affinity(%s) (-want +got):\n%s", c, diff)
				}
			}
			fams := gather(t, reg)
			if got := fams["kubelet_topology_manager_admission_errors_total"].GetMetric()[0].GetCounter().GetValue(); got != tc.wantErrors {
				t.Errorf("errors_total = %v, want %v", got, tc.wantErrors)
			}
			if got := fams["kubelet_topology_manager_admission_requests_total"].GetMetric()[0].GetCounter().GetValue(); got != 1 {
				t.Errorf("requests_total = %v, want 1", got)
			}
		})
	}
}

func TestAffinityVisibleDuringAllocate(t *testing.T) {
	m := newTestManager(t, PolicyBestEffort, ScopeContainer, nil, nil)
	var calls []string
	seen := map[string]Hint{}
	p := &fakeProvider{name: "cpu", calls: &calls, hints: map[string]map[string][]Hint{"app": {"cpu": {h(true, 1)}}}}
	p.onAlloc = func(c string) { seen[c] = m.Affinity("uid-1", c) }
	m.AddHintProvider(p)
	if r := m.Admit(testPod()); !r.Admit {
		t.Fatalf("rejected: %+v", r)
	}
	if diff := cmp.Diff(h(true, 1), seen["app"]); diff != "" {
		t.Errorf("hint seen by Allocate (-want +got):\n%s", diff)
	}
}

func TestRemove(t *testing.T) {
	m := newTestManager(t, PolicyRestricted, ScopePod, nil, nil)
	var calls []string
	m.AddHintProvider(&fakeProvider{name: "cpu", calls: &calls, podHints: map[string][]Hint{"cpu": {h(true, 1)}}})
	m.Admit(testPod())
	m.RemoveContainer("uid-1", "app")
	if got := m.Affinity("uid-1", "app"); !got.IsEqual(Hint{}) {
		t.Errorf("app after RemoveContainer = %v", got)
	}
	if got := m.Affinity("uid-1", "side"); !got.IsEqual(h(true, 1)) {
		t.Errorf("side after removing app = %v", got)
	}
	m.RemovePod("uid-1")
	for _, c := range []string{"init", "side"} {
		if got := m.Affinity("uid-1", c); !got.IsEqual(Hint{}) {
			t.Errorf("%s after RemovePod = %v", c, got)
		}
	}
}

func TestNew(t *testing.T) {
	nine := host.Topology{}
	for i := 0; i < 9; i++ {
		nine.NUMANodes = append(nine.NUMANodes, host.NUMANode{ID: i})
	}
	for _, tc := range []struct {
		name      string
		cfg       Config
		wantErr   string
		wantScope string
	}{
		{name: "zero config is none", cfg: Config{}, wantScope: "none"},
		{name: "defaults scope to container", cfg: Config{Policy: "restricted", Topology: fourNodes()}, wantScope: "container"},
		{name: "none policy ignores scope", cfg: Config{Policy: "none", Scope: "pod"}, wantScope: "none"},
		{name: "too many nodes", cfg: Config{Policy: "best-effort", Topology: nine},
			wantErr: `invalid configuration: topologyManagerPolicy "best-effort": unsupported on machines with more than 8 NUMA Nodes`},
		{name: "option raises the limit", cfg: Config{Policy: "best-effort", Topology: nine, Options: map[string]string{"max-allowable-numa-nodes": "9"}}, wantScope: "container"},
		{name: "no NUMA nodes", cfg: Config{Policy: "restricted"},
			wantErr: `topology: policy "restricted" needs at least one NUMA node`},
		{name: "node ID out of range", cfg: Config{Policy: "restricted", Topology: host.Topology{NUMANodes: []host.NUMANode{{ID: 64}}}},
			wantErr: "topology: NUMA node IDs [64]: bit number must be in range 0-63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(tc.cfg)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Fatalf("err = %q, want %q", got, tc.wantErr)
			}
			if err == nil && m.Scope() != tc.wantScope {
				t.Errorf("Scope() = %q, want %q", m.Scope(), tc.wantScope)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newTestManager(t, PolicyRestricted, ScopeContainer, reg, clk)
	var calls []string
	p := &fakeProvider{name: "cpu", calls: &calls, hints: map[string]map[string][]Hint{"side": {"cpu": {h(false, 0)}}}}
	// Each Allocate takes 0.3ms of fake time: 2 containers before the
	// rejection at "side" make 0.6ms, observed as 0 whole milliseconds.
	p.onAlloc = func(string) { clk.Step(300 * time.Microsecond) }
	m.AddHintProvider(p)
	if r := m.Admit(testPod()); r.Admit {
		t.Fatal("admitted")
	}
	// A second pod whose allocations take 2.7ms: observed as 2.
	p.onAlloc = func(string) { clk.Step(900 * time.Microsecond) }
	p.hints = nil
	if r := m.Admit(testPod()); !r.Admit {
		t.Fatalf("rejected: %+v", r)
	}
	fams := gather(t, reg)
	type family struct {
		Help, Type string
		Value      float64
	}
	got := map[string]family{}
	for name, f := range fams {
		fam := family{Help: f.GetHelp(), Type: f.GetType().String()}
		switch m := f.GetMetric()[0]; f.GetType() {
		case dto.MetricType_COUNTER:
			fam.Value = m.GetCounter().GetValue()
		case dto.MetricType_HISTOGRAM:
			fam.Value = m.GetHistogram().GetSampleSum()
		}
		got[name] = fam
	}
	want := map[string]family{
		"kubelet_topology_manager_admission_requests_total": {"[ALPHA] The number of admission requests where resources have to be aligned.", "COUNTER", 2},
		"kubelet_topology_manager_admission_errors_total":   {"[ALPHA] The number of admission request failures where resources could not be aligned.", "COUNTER", 1},
		"kubelet_topology_manager_admission_duration_ms":    {"[ALPHA] Duration in milliseconds to serve a pod admission request.", "HISTOGRAM", 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
	hist := fams["kubelet_topology_manager_admission_duration_ms"].GetMetric()[0].GetHistogram()
	var bounds []float64
	cumulative := map[float64]uint64{}
	for _, b := range hist.GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
		cumulative[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	wantBounds := []float64{0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6, 819.2}
	if diff := cmp.Diff(wantBounds, bounds, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("buckets (-want +got):\n%s", diff)
	}
	// 0ms falls in every bucket, 2ms from the 3.2 bucket on.
	if hist.GetSampleCount() != 2 || cumulative[wantBounds[0]] != 1 || cumulative[wantBounds[5]] != 1 || cumulative[wantBounds[6]] != 2 {
		t.Errorf("histogram counts: total %d, cumulative %v", hist.GetSampleCount(), cumulative)
	}

	// A second manager on the same registry is refused.
	_, err := New(Config{Policy: PolicyRestricted, Topology: fourNodes(), Metrics: reg})
	if !errors.Is(err, ErrMetricsRegistered) {
		t.Errorf("second registration err = %v, want ErrMetricsRegistered", err)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}
