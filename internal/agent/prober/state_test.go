package prober

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func sec(n int) time.Duration { return time.Duration(n) * time.Second }

func TestTimingOf(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		probe corev1.Probe
		want  timing
	}{
		{"zero values take the defaults", Readiness, corev1.Probe{},
			timing{Period: sec(10), Timeout: sec(1), SuccessThreshold: 1, FailureThreshold: 3}},
		{"negative values take the defaults", Readiness,
			corev1.Probe{InitialDelaySeconds: -1, PeriodSeconds: -1, TimeoutSeconds: -1, SuccessThreshold: -1, FailureThreshold: -1},
			timing{Period: sec(10), Timeout: sec(1), SuccessThreshold: 1, FailureThreshold: 3}},
		{"readiness keeps its success threshold", Readiness,
			corev1.Probe{InitialDelaySeconds: 5, PeriodSeconds: 3, TimeoutSeconds: 2, SuccessThreshold: 4, FailureThreshold: 6},
			timing{InitialDelay: sec(5), Period: sec(3), Timeout: sec(2), SuccessThreshold: 4, FailureThreshold: 6}},
		{"liveness success threshold is 1", Liveness, corev1.Probe{SuccessThreshold: 4, FailureThreshold: 1},
			timing{Period: sec(10), Timeout: sec(1), SuccessThreshold: 1, FailureThreshold: 1}},
		{"startup success threshold is 1", Startup, corev1.Probe{SuccessThreshold: 2, FailureThreshold: 30, PeriodSeconds: 1},
			timing{Period: sec(1), Timeout: sec(1), SuccessThreshold: 1, FailureThreshold: 30}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, timingOf(tt.kind, &tt.probe)); diff != "" {
				t.Errorf("timingOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNextSlot(t *testing.T) {
	tests := []struct {
		name     string
		due, now time.Time
		want     time.Time
	}{
		{"on time", t0, t0, t0.Add(sec(10))},
		{"a little late", t0, t0.Add(sec(3)), t0.Add(sec(10))},
		{"exactly one period late skips that slot", t0, t0.Add(sec(10)), t0.Add(sec(20))},
		{"many periods late", t0, t0.Add(sec(35)), t0.Add(sec(40))},
		{"early (not expected)", t0, t0.Add(-sec(1)), t0.Add(sec(10))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nextSlot(tt.due, tt.now, sec(10)); !got.Equal(tt.want) {
				t.Errorf("nextSlot = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestProbeStateDue(t *testing.T) {
	timing := timing{InitialDelay: sec(5), Period: sec(10), Timeout: sec(1), SuccessThreshold: 1, FailureThreshold: 3}
	tests := []struct {
		name    string
		kind    Kind
		modify  func(*probeState)
		now     time.Time
		started bool
		want    bool
	}{
		{"before the initial delay", Liveness, nil, t0.Add(sec(4)), true, false},
		{"just before the initial delay", Liveness, nil, t0.Add(sec(5) - time.Nanosecond), true, false},
		{"exactly at the initial delay", Liveness, nil, t0.Add(sec(5)), true, true},
		{"readiness after the delay", Readiness, nil, t0.Add(sec(6)), true, true},
		{"liveness waits for the startup probe", Liveness, nil, t0.Add(sec(6)), false, false},
		{"readiness waits for the startup probe", Readiness, nil, t0.Add(sec(6)), false, false},
		{"startup runs before the container started", Startup, nil, t0.Add(sec(6)), false, true},
		{"startup stops once started", Startup, nil, t0.Add(sec(6)), true, false},
		{"stopped", Liveness, func(s *probeState) { s.stopped = true }, t0.Add(sec(6)), true, false},
		{"in flight", Liveness, func(s *probeState) { s.inFlight = true }, t0.Add(sec(6)), true, false},
		{"after a launch, not until the next slot", Liveness, func(s *probeState) { s.launch(t0.Add(sec(5))); s.observe(resultSuccess) }, t0.Add(sec(14)), true, false},
		{"after a launch, at the next slot", Liveness, func(s *probeState) { s.launch(t0.Add(sec(5))); s.observe(resultSuccess) }, t0.Add(sec(15)), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newProbeState(tt.kind, timing, t0)
			if tt.modify != nil {
				tt.modify(s)
			}
			if got := s.due(tt.now, tt.started); got != tt.want {
				t.Errorf("due(%v, started=%v) = %v, want %v", tt.now.Sub(t0), tt.started, got, tt.want)
			}
		})
	}
}

func TestProbeStateObserve(t *testing.T) {
	const S, F = resultSuccess, resultFailure
	type step struct {
		outcome result
		result  result
		changed bool
	}
	tests := []struct {
		name        string
		kind        Kind
		succ, fail  int
		steps       []step
		wantStopped bool
	}{
		{"readiness: one success makes ready", Readiness, 1, 3, []step{{S, S, true}, {S, S, false}}, false},
		{"readiness: success threshold 3", Readiness, 3, 3,
			[]step{{S, F, false}, {S, F, false}, {S, S, true}, {S, S, false}}, false},
		{"readiness: a failure restarts the success count", Readiness, 2, 3,
			[]step{{S, F, false}, {F, F, false}, {S, F, false}, {S, S, true}}, false},
		{"readiness: failures flip back at the threshold and keep probing", Readiness, 1, 2,
			[]step{{S, S, true}, {F, S, false}, {F, F, true}, {F, F, false}, {S, S, true}}, false},
		{"liveness: starts alive, failure threshold 3", Liveness, 1, 3,
			[]step{{F, S, false}, {F, S, false}, {F, F, true}}, true},
		{"liveness: a success in between resets the count", Liveness, 1, 3,
			[]step{{F, S, false}, {F, S, false}, {S, S, false}, {F, S, false}, {F, S, false}, {F, F, true}}, true},
		{"liveness: threshold 1", Liveness, 1, 1, []step{{F, F, true}}, true},
		{"startup: first success decides", Startup, 1, 3, []step{{F, resultUnknown, false}, {S, S, true}}, false},
		{"startup: failure threshold", Startup, 1, 2, []step{{F, resultUnknown, false}, {F, F, true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newProbeState(tt.kind, timing{Period: sec(10), Timeout: sec(1), SuccessThreshold: tt.succ, FailureThreshold: tt.fail}, t0)
			for i, st := range tt.steps {
				s.launch(t0.Add(sec(10 * i)))
				changed := s.observe(st.outcome)
				if s.result != st.result || changed != st.changed {
					t.Fatalf("step %d (%v): result %v changed %v, want %v %v", i, st.outcome, s.result, changed, st.result, st.changed)
				}
				if s.inFlight {
					t.Fatalf("step %d: still in flight after observe", i)
				}
			}
			if s.stopped != tt.wantStopped {
				t.Errorf("stopped = %v, want %v", s.stopped, tt.wantStopped)
			}
		})
	}
}

func TestSettle(t *testing.T) {
	for _, k := range []Kind{Liveness, Readiness, Startup} {
		s := newProbeState(k, timing{Period: sec(10), SuccessThreshold: 1, FailureThreshold: 1}, t0)
		s.observe(resultFailure)
		s.settle()
		wantResult, wantStopped := resultSuccess, true
		if k == Readiness {
			wantResult, wantStopped = resultFailure, false
		}
		if s.result != wantResult || s.stopped != wantStopped {
			t.Errorf("%v after settle: result %v stopped %v, want %v %v", k, s.result, s.stopped, wantResult, wantStopped)
		}
	}
}

func TestStatusOf(t *testing.T) {
	probe := &corev1.Probe{FailureThreshold: 1}
	graceProbe := &corev1.Probe{FailureThreshold: 1, TerminationGracePeriodSeconds: ptr.To[int64](7)}
	podWith := func(policy corev1.RestartPolicy) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: policy}}
	}
	// outcomes feeds each named probe one outcome.
	type feed map[Kind]result
	tests := []struct {
		name    string
		pod     *corev1.Pod
		spec    corev1.Container
		sidecar bool
		id      string
		feed    feed
		want    Status
	}{
		{"not running", podWith(""), corev1.Container{Name: "c", ReadinessProbe: probe}, false, "", nil, Status{}},
		{"running without probes", podWith(""), corev1.Container{Name: "c"}, false, "id", nil, Status{Started: true, Ready: true}},
		{"readiness not yet succeeded", podWith(""), corev1.Container{Name: "c", ReadinessProbe: probe}, false, "id", nil, Status{Started: true}},
		{"readiness succeeded", podWith(""), corev1.Container{Name: "c", ReadinessProbe: probe}, false, "id", feed{Readiness: resultSuccess}, Status{Started: true, Ready: true}},
		{"startup pending", podWith(""), corev1.Container{Name: "c", StartupProbe: probe}, false, "id", nil, Status{}},
		{"startup pending hides readiness", podWith(""), corev1.Container{Name: "c", StartupProbe: probe, ReadinessProbe: probe}, false, "id", feed{Readiness: resultSuccess}, Status{}},
		{"startup succeeded", podWith(""), corev1.Container{Name: "c", StartupProbe: probe}, false, "id", feed{Startup: resultSuccess}, Status{Started: true, Ready: true}},
		{"liveness failed", podWith(corev1.RestartPolicyAlways), corev1.Container{Name: "app", LivenessProbe: probe}, false, "id", feed{Liveness: resultFailure},
			Status{Started: true, Ready: true, Kill: &Kill{Probe: Liveness, Message: "Container app failed liveness probe, will be restarted"}}},
		{"liveness failed, restartPolicy Never", podWith(corev1.RestartPolicyNever), corev1.Container{Name: "app", LivenessProbe: probe}, false, "id", feed{Liveness: resultFailure},
			Status{Started: true, Ready: true, Kill: &Kill{Probe: Liveness, Message: "Container app failed liveness probe"}}},
		{"liveness failed with a probe grace period", podWith(corev1.RestartPolicyOnFailure), corev1.Container{Name: "app", LivenessProbe: graceProbe}, false, "id", feed{Liveness: resultFailure},
			Status{Started: true, Ready: true, Kill: &Kill{Probe: Liveness, Message: "Container app failed liveness probe, will be restarted", GracePeriodSeconds: ptr.To[int64](7)}}},
		{"startup failed", podWith(""), corev1.Container{Name: "app", StartupProbe: probe}, false, "id", feed{Startup: resultFailure},
			Status{Kill: &Kill{Probe: Startup, Message: "Container app failed startup probe, will be restarted"}}},
		{"sidecar liveness failed, restartPolicy Never", podWith(corev1.RestartPolicyNever), corev1.Container{Name: "proxy", LivenessProbe: probe}, true, "id", feed{Liveness: resultFailure},
			Status{Started: true, Ready: true, Kill: &Kill{Probe: Liveness, Message: "Init container proxy failed liveness probe"}}},
		{"sidecar startup failed", podWith(""), corev1.Container{Name: "proxy", StartupProbe: probe}, true, "id", feed{Startup: resultFailure},
			Status{Kill: &Kill{Probe: Startup, Message: "Init container proxy failed startup probe"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := newContainerRun(&tt.spec, tt.id, t0, false)
			for k, r := range tt.feed {
				run.probes[k].observe(r)
			}
			if diff := cmp.Diff(tt.want, statusOf(tt.pod, &tt.spec, tt.sidecar, &run)); diff != "" {
				t.Errorf("statusOf (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewContainerRunDeleting(t *testing.T) {
	spec := &corev1.Container{Name: "c", LivenessProbe: &corev1.Probe{}, StartupProbe: &corev1.Probe{}, ReadinessProbe: &corev1.Probe{}}
	run := newContainerRun(spec, "id", t0, true)
	if !run.probes[Liveness].stopped || !run.probes[Startup].stopped || run.probes[Readiness].stopped {
		t.Errorf("stopped: liveness %v startup %v readiness %v, want true true false",
			run.probes[Liveness].stopped, run.probes[Startup].stopped, run.probes[Readiness].stopped)
	}
	if !run.hasStarted() {
		t.Error("a deleting pod's container counts as started (startup settled to Success)")
	}
}

func TestAttemptEvent(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		a     attempt
		want  event
		wantN bool
	}{
		{"success", Liveness, attempt{verdict: verdictSuccess, output: "ok"}, event{}, false},
		{"unknown without error", Liveness, attempt{verdict: verdictUnknown}, event{}, false},
		{"failure", Liveness, attempt{verdict: verdictFailure, output: "HTTP probe failed with statuscode: 500"}, event{"Warning", "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500"}, true},
		{"readiness failure", Readiness, attempt{verdict: verdictFailure, output: "dial tcp 10.0.0.5:8080: connect: connection refused"}, event{"Warning", "Unhealthy", "Readiness probe failed: dial tcp 10.0.0.5:8080: connect: connection refused"}, true},
		{"error", Startup, attempt{err: errors.New("boom")}, event{"Warning", "Unhealthy", "Startup probe errored and resulted in unknown state: boom"}, true},
		{"error with a failure verdict", Liveness, attempt{verdict: verdictFailure, err: errors.New("read: reset")}, event{"Warning", "Unhealthy", "Liveness probe errored and resulted in failure state: read: reset"}, true},
		{"warning", Readiness, attempt{verdict: verdictWarning, output: "Probe terminated redirects, Response body: x"}, event{"Warning", "ProbeWarning", "Readiness probe warning: Probe terminated redirects, Response body: x"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := attemptEvent(tt.kind, tt.a)
			if ok != tt.wantN || got != tt.want {
				t.Errorf("attemptEvent = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantN)
			}
		})
	}
}

func TestExpandStatic(t *testing.T) {
	env := []corev1.EnvVar{
		{Name: "A", Value: "alpha"},
		{Name: "EMPTY"},
		{Name: "FROM", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "alpha"},
		{"x$(A)y$(A)", "xalphayalpha"},
		{"$(EMPTY)", ""},
		{"$(FROM)", ""},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$$(A)", "$(A)"},
		{"$$", "$"},
		{"cost $5", "cost $5"},
		{"trailing $", "trailing $"},
		{"$(A", "$(A"},
		{"$(A)$(", "alpha$("},
	}
	for _, tt := range tests {
		got := expandStatic([]string{tt.in}, env)
		if got[0] != tt.want {
			t.Errorf("expandStatic(%q) = %q, want %q", tt.in, got[0], tt.want)
		}
	}
}

func TestResolvePort(t *testing.T) {
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "big", ContainerPort: 70000}}}
	tests := []struct {
		name    string
		param   intstr.IntOrString
		want    int
		wantErr string
	}{
		{"number", intstr.FromInt32(80), 80, ""},
		{"name", intstr.FromString("http"), 8080, ""},
		{"number as a string", intstr.FromString("9090"), 9090, ""},
		{"unknown name", intstr.FromString("nope"), 0, `strconv.Atoi: parsing "nope": invalid syntax`},
		{"zero", intstr.FromInt32(0), 0, "invalid port number: 0"},
		{"too big", intstr.FromString("big"), 0, "invalid port number: 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolvePort(tt.param, c)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.wantErr {
				t.Errorf("resolvePort = %d, %q; want %d, %q", got, gotErr, tt.want, tt.wantErr)
			}
		})
	}
}
