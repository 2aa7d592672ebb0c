package server

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"knode/internal/cloudprovider"
	"knode/internal/controller/nodeipam"
)

// noCloud is a cloud provider that is never asked anything.
type noCloud struct{ cloudprovider.Interface }

// What runs under which Lease.
func TestComponents(t *testing.T) {
	kcm := []string{"namespace", "taint-eviction", "csr-signing", "replicaset", "daemonset", "statefulset", "disruption",
		"garbage-collector", "pod-gc", "out-of-service", "volumes", "node-lifecycle"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want map[string][]string
	}{
		{"defaults", Config{}, map[string][]string{ControllerManagerLease: kcm, SchedulerLease: {"scheduler"}}},
		{"with IPAM and a cloud", Config{IPAM: &nodeipam.Config{}, Cloud: noCloud{}},
			map[string][]string{ControllerManagerLease: append(append([]string(nil), kcm...), "node-ipam", "cloud-node"), SchedulerLease: {"scheduler"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string][]string{}
			for _, c := range components(&tc.cfg) {
				got[c.lease] = append(got[c.lease], c.name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("components (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeaderElectionDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   LeaderElection
		want string // the error, or "" for none
	}{
		{"zero means upstream's defaults", LeaderElection{}, ""},
		{"disabled skips the checks", LeaderElection{Disabled: true, LeaseDuration: time.Second, RenewDeadline: time.Hour}, ""},
		{"short, for tests", LeaderElection{LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: time.Second}, ""},
		{"renew deadline not below the lease", LeaderElection{LeaseDuration: 10 * time.Second},
			`--leader-elect-lease-duration: Invalid value: "10s": must be greater than --leader-elect-renew-deadline (10s)`},
		{"renew deadline not above 1.2 retries", LeaderElection{RetryPeriod: 9 * time.Second},
			`--leader-elect-renew-deadline: Invalid value: "10s": must be greater than --leader-elect-retry-period (9s) times 1.2`},
		{"negative", LeaderElection{RetryPeriod: -time.Second},
			`--leader-elect-retry-period: Invalid value: "-1s": must be greater than zero`},
		{"fractional lease", LeaderElection{LeaseDuration: 15500 * time.Millisecond},
			`--leader-elect-lease-duration: Invalid value: "15.5s": must be a whole number of seconds (the Lease records seconds)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			le := tc.in
			err := le.setDefaults()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("setDefaults: %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("setDefaults: %v, want %q", err, tc.want)
			case tc.want != "":
				return
			}
			if le.Disabled {
				return
			}
			if le.LeaseDuration == 0 || le.RenewDeadline == 0 || le.RetryPeriod == 0 {
				t.Errorf("timings not defaulted: %+v", le)
			}
			if tc.in.LeaseDuration == 0 && le.LeaseDuration != 15*time.Second {
				t.Errorf("lease duration %s, want 15s", le.LeaseDuration)
			}
			if i := strings.LastIndexByte(le.Identity, '_'); i <= 0 || len(le.Identity)-i-1 != 36 {
				t.Errorf("identity %q, want <hostname>_<uuid>", le.Identity)
			}
		})
	}
}

// A term's metrics leave the registry with the term, so that the next
// term's controllers can register theirs.
func TestTermRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	for term := range 2 {
		tr := &termRegistry{reg: reg}
		a := prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total"})
		b := prometheus.NewCounter(prometheus.CounterOpts{Name: "b_total"})
		if err := tr.Register(a); err != nil {
			t.Fatalf("term %d: %v", term, err)
		}
		tr.MustRegister(b)
		if err := tr.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "a_total"})); err == nil {
			t.Errorf("term %d: a second a_total registered", term)
		}
		if !tr.Unregister(b) {
			t.Errorf("term %d: b not unregistered", term)
		}
		tr.unregisterAll()
		if n, err := reg.Gather(); err != nil || len(n) != 0 {
			t.Errorf("term %d: after the term the registry holds %d families (%v)", term, len(n), err)
		}
	}
}
